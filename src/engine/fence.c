/* SPDX-License-Identifier: MIT */
/*
 * Rails that go silent, and fences (docs/api.md, "When a rail fails").
 *
 * A link that dies without an error (a cable pulled under tcp, every
 * packet dropped) leaves what is posted on it waiting: tcp retransmits for
 * many minutes. A rail that holds operations and completes nothing for
 * TERN_RAIL_STALL_MS while another rail completes some is taken for
 * silent: each peer with operations on it has that path marked down
 * (failover.c), unless it is that peer's last rail up, and new operations
 * avoid it. When every rail is quiet the peers are slow (one that does
 * not progress holds what tcp and shm deliver to it) or gone, which is
 * not a link's failure: nothing goes down.
 *
 * What the silent rail holds cannot simply go again elsewhere: the link
 * may come back and deliver the first copy late, after the caller reused
 * the memory it wrote. So tern fences it first, where it can: over
 * libfabric's tcp provider its connections are this process's own
 * sockets, and tern disconnects those of the rail to that peer's host
 * (src/prov/tcpfence.c): their send queues are purged, nothing they held
 * can be sent any more, and libfabric fails what was posted on them,
 * which failover.c posts again on a live rail.
 *
 * The far end still holds its half of each connection, and ofi_rxm
 * refuses a new connection from a process it has one with: the rail
 * could not come back. So tern also asks the peer, over a live rail, to
 * disconnect its half (FENCE, ctrl.c); it does, and answers FENCED on the
 * fenced rail itself, which on a connection the first end dropped is
 * answered by a reset that ends it, wherever it was accepted.
 *
 * Elsewhere (efa, verbs, shm) a silent rail is only avoided: what it
 * holds waits for the provider, which on EFA and verbs fails it within
 * its retry timeout. A peer's FENCE disconnects the rail's connections to
 * its host (those another process there made cannot be told from its
 * own), once per half cooldown; what that fails here within a second
 * goes again and takes no rail down, so a peer that asks for fences can
 * make operations go again, never take a rail or a peer away.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#include "../wire/card.h"

/* Can this ctx fence: are its rails libfabric's tcp? */
static int fence_possible(const struct tern_ctx *ctx)
{
	return ctx->failover && strncmp(ctx->caps.prov_name, "tcp", 3) == 0;
}

/* The peer added for source @src, or NULL. */
static struct tern_peer *peer_of(struct tern_ctx *ctx, uint32_t src)
{
	if (src == 0)
		return NULL;
	for (struct tern_peer *p = ctx->peers; p != NULL; p = p->next) {
		if (p->src_id == src && !p->removed && !p->removing && !p->gone)
			return p;
	}
	return NULL;
}

/* Disconnect this process's connections of rail @r to @peer's host:
 * to its listener, and (@any_port) those any process of it made to
 * ours, which cannot be told apart. */
static int disconnect(struct tern_ctx *ctx, struct tern_peer *peer,
		      unsigned int r, int any_port)
{
	struct tern__card c;
	char why[128];
	int n;

	if (tern__card_parse(peer->card, peer->card_len, &c, why,
			     sizeof(why)) != 0)
		return -TERN_ECARD;
	n = tern__prov_fence(ctx->rails[r].addr, ctx->rails[r].addrlen,
			     c.addrs + (r % c.nrails) * c.addrlen, c.addrlen,
			     any_port);
	if (n >= 0) {
		peer->paths[r].fenced_ns = tern__now_ns();
		ctx->rails[r].fenced_ns = peer->paths[r].fenced_ns;
		ctx->fences++;
	}
	return n;
}

void tern__fence_start(struct tern_peer *peer, unsigned int r, int stalled)
{
	struct tern_ctx *ctx = peer->ctx;
	struct tern__path *p = &peer->paths[r];
	uint64_t now = tern__now_ns();
	int n;

	if (!ctx->fence_ok ||
	    (p->fenced_ns != 0 &&
	     now - p->fenced_ns < (uint64_t)ctx->cooldown_ms * 1000000 / 2))
		return;
	n = disconnect(ctx, peer, r, 1);
	if (n < 0) {
		tern__warn("rail %u to peer %p: cannot fence: %s", r,
			   (void *)peer, tern_strerror(n));
		return;
	}
	if (stalled || n > 0)
		tern__warn("rail %u to peer %p fenced: %d connection(s) "
			   "dropped; what the rail held goes again on the "
			   "other rails",
			   r, (void *)peer, n);
	/* The far end drops its half too, so the rail can come back. */
	if (ctx->ctrl != NULL && ctx->ctrl->nrails == ctx->nrails) {
		if (++ctx->next_token == 0)
			ctx->next_token = 1;
		p->fence_token = ctx->next_token;
		p->fence_ns = now;
		tern__ctrl_fence(ctx, peer, r, p->fence_token);
	}
}

void tern__fence_asked(struct tern_ctx *ctx, uint32_t src, unsigned int r,
		       uint32_t token)
{
	struct tern_peer *peer = peer_of(ctx, src);
	struct tern__path *p;
	uint64_t now = tern__now_ns();
	int n;

	if (peer == NULL || !ctx->fence_ok || r >= ctx->nrails ||
	    tern__paths(peer) == NULL) {
		tern__debug("a fence of rail %u from source %" PRIu32
			    " not done: %s",
			    r, src,
			    peer == NULL ? "no such peer"
					 : "this ctx cannot fence");
		return;
	}
	p = &peer->paths[r];
	/* One per half cooldown: a peer cannot make us churn. */
	if (p->fenced_ns != 0 &&
	    now - p->fenced_ns < (uint64_t)ctx->cooldown_ms * 1000000 / 2)
		return;
	n = disconnect(ctx, peer, r, 1);
	tern__info("rail %u to peer %p: %d connection(s) dropped, as the "
		   "peer asked (the rail went silent or failed there)",
		   r, (void *)peer, n < 0 ? 0 : n);
	/* On the fenced rail: over a half the peer dropped, it meets a
	 * reset, which ends that half here too. */
	tern__ctrl_fenced(ctx, peer, r, token, r);
}

void tern__fence_answered(struct tern_ctx *ctx, uint32_t src, unsigned int r,
			  uint32_t token)
{
	struct tern_peer *peer = peer_of(ctx, src);
	struct tern__path *p;

	if (peer == NULL || r >= ctx->nrails || peer->paths == NULL)
		return;
	p = &peer->paths[r];
	if (p->fence_token == 0 || p->fence_token != token)
		return;
	p->fence_token = 0;
	tern__debug("rail %u to peer %p: the peer dropped its half in %" PRIu64
		    " ms",
		    r, (void *)peer, (tern__now_ns() - p->fence_ns) / 1000000);
}

/* Peers with operations posted on @rail: walk what it holds. */
static void rail_stalled(struct tern_ctx *ctx, struct tern_rail *rail,
			 uint64_t quiet_ns)
{
	char why[96];

	snprintf(why, sizeof(why),
		 "no completion for %" PRIu64 " ms (the link is silent)",
		 quiet_ns / 1000000);
	for (struct tern_req *q = ctx->posted.head; q != NULL;
	     q = tern__rp(q)->next) {
		struct tern__req_priv *rp = tern__rp(q);

		if (rp->peer != NULL && rp->rail == rail->idx &&
		    rp->op != TERN__OP_PIECES)
			tern__path_stalled(ctx, rp->peer, rail->idx, why);
	}
	for (size_t i = 0; i < ctx->caps.tx_size; i++) {
		struct tern_req *q = rail->slots[i].owner;

		if (q != NULL && tern__rp(q)->peer != NULL)
			tern__path_stalled(ctx, tern__rp(q)->peer, rail->idx,
					   why);
	}
}

/* Has a rail other than @quiet completed anything since @quiet went
 * quiet? If none has, the peers are slow or gone, not a link. */
static int others_alive(const struct tern_ctx *ctx,
			const struct tern_rail *quiet)
{
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		if (&ctx->rails[i] != quiet &&
		    ctx->rails[i].alive_ns > quiet->stall_since)
			return 1;
	}
	return 0;
}

static void stall_tick(struct tern_timer *t)
{
	struct tern_ctx *ctx = t->data;
	uint64_t now = tern__now_ns();
	int busy_any = 0;

	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_rail *rail = &ctx->rails[i];

		if (rail->reaped != rail->stall_mark)
			rail->alive_ns = now;
	}
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_rail *rail = &ctx->rails[i];
		int busy = rail->tx_credits < ctx->caps.tx_size;

		busy_any |= busy;
		if (!busy || rail->reaped != rail->stall_mark) {
			rail->stall_mark = rail->reaped;
			rail->stall_since = now;
			continue;
		}
		if (now - rail->stall_since >=
			    (uint64_t)ctx->stall_ms * 1000000 &&
		    others_alive(ctx, rail)) {
			rail_stalled(ctx, rail, now - rail->stall_since);
			rail->stall_since = now;
		}
	}
	if (!busy_any && ctx->redo_head == NULL) {
		tern_timer_stop(t);
		ctx->stall_on = 0;
		ctx->stall_idle = 1;
	}
}

void tern__stall_arm(struct tern_ctx *ctx)
{
	uint64_t now = tern__now_ns();
	uint64_t tick = TERN_MAX(ctx->stall_ms / 4, 10U);

	ctx->stall_idle = 0;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		ctx->rails[i].stall_mark = ctx->rails[i].reaped;
		ctx->rails[i].stall_since = now;
	}
	if (tern_timer_start(ctx, &ctx->stall_timer, tick, tick) == 0)
		ctx->stall_on = 1;
}

void tern__stall_init(struct tern_ctx *ctx)
{
	ctx->fence_ok = fence_possible(ctx);
	/* The fence of a silent rail purges what its sockets hold, the bytes
	 * of writes and sends tcp completed when it took them as well: those
	 * complete once delivered instead, so that a purged one goes again.
	 * (A connection that failed lost its queue already, fenced or not.) */
	for (unsigned int i = 0;
	     ctx->fence_ok && ctx->stall_ms != 0 && i < ctx->nrails; i++)
		tern__prov_rail_deliver(&ctx->rails[i].prov);
	if (!ctx->failover)
		return;
	tern__debug("failover: a rail silent for %u ms is %s", ctx->stall_ms,
		    ctx->stall_ms == 0 ? "not watched"
		    : ctx->fence_ok
			    ? "fenced and what it holds goes again"
			    : "avoided (this provider cannot fence it: what it "
			      "holds waits for the provider)");
	if (ctx->stall_ms == 0)
		return;
	tern_timer_init(&ctx->stall_timer, stall_tick, ctx);
	ctx->stall_idle = 1;
}
