/* SPDX-License-Identifier: MIT */
/*
 * Rails that go silent, and fences (docs/api.md, "When a rail fails").
 *
 * A link that dies without an error (a cable pulled under tcp, every
 * packet dropped) leaves what is posted on it waiting: tcp retransmits for
 * many minutes. A rail that holds operations and completes nothing for
 * TERN_RAIL_STALL_MS is taken for silent: each peer with operations on it
 * has that path marked down (failover.c), and new operations avoid it.
 *
 * What the silent rail holds cannot simply go again elsewhere: the link
 * may come back and deliver the first copy late, after the caller reused
 * the memory it wrote. So tern fences it first, where the provider lets
 * it (connections under ofi_rxm, which close when their address-vector
 * entry goes, FI_AV_REMOVE_CLEANUP):
 *
 * 1. the initiator asks the target, over a live rail, to drop its
 *    connection on the silent rail (FENCE, ctrl.c);
 * 2. the target removes the initiator's address on that rail and inserts
 *    it again: its connection closes, and whatever arrives on it later
 *    is refused by its kernel (a closed TCP socket answers data with a
 *    reset), never written; it answers FENCED over the rail the FENCE
 *    came by;
 * 3. the initiator then does the same on its side: its connection closes,
 *    and the provider fails everything it held with "cancelled", which
 *    failover.c posts again on a live rail (nothing it held can land any
 *    more: the target's end is closed).
 *
 * A new connection is made on the next use of the rail: its probe. The
 * same fence follows a path error on such a rail (a connection reset),
 * so that neither end keeps a half-dead connection libfabric would not
 * make again. Where there is no such provider, or no control messages
 * (efa-direct), or no source address on arrivals (FI_SOURCE), a silent
 * rail is only avoided: what it holds waits for the provider, which on
 * EFA and verbs fails it within its retry timeout.
 *
 * A peer can make us fence only its own connection, once per cooldown.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* A fence not answered in this long is given up (its operations wait
 * for the provider). */
#define FENCE_WAIT_MS 3000

/* Does the provider close a connection when its address goes? */
static int fence_possible(const struct tern_ctx *ctx)
{
	return ctx->failover && ctx->ctrl != NULL && ctx->msg_source &&
	       ctx->ctrl->nrails == ctx->nrails &&
	       strstr(ctx->caps.prov_name, "ofi_rxm") != NULL;
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

/* Ask @peer to drop its end of rail @r, unless a fence of it is under
 * way or was done within the cooldown. */
void tern__fence_start(struct tern_peer *peer, unsigned int r, int stalled)
{
	struct tern_ctx *ctx = peer->ctx;
	struct tern__path *p = &peer->paths[r];
	uint64_t now = tern__now_ns();

	if (!ctx->fence_ok || peer->nrails != ctx->nrails || p->fence_token ||
	    (p->fenced_ns != 0 &&
	     now - p->fenced_ns < (uint64_t)ctx->cooldown_ms * 1000000))
		return;
	if (++ctx->next_token == 0)
		ctx->next_token = 1;
	p->fence_token = ctx->next_token;
	p->fence_ns = now;
	p->fence_stalled = (uint8_t)stalled;
	tern__debug("rail %u to peer %p: fencing (token %" PRIu32 ")", r,
		    (void *)peer, p->fence_token);
	tern__ctrl_fence(ctx, peer, r, p->fence_token);
}

/* Drop and make again our address of @peer (and of every peer added with
 * its card) on rail @r: the provider closes the connection. */
static int drop_end(struct tern_ctx *ctx, struct tern_peer *peer,
		    unsigned int r)
{
	int ret = tern__peer_reinsert(ctx, peer, r);

	if (ret != 0)
		tern__warn("rail %u to peer %p: making its address again: %s",
			   r, (void *)peer, tern_strerror(ret));
	return ret;
}

void tern__fence_asked(struct tern_ctx *ctx, uint32_t src, unsigned int r,
		       uint32_t token, unsigned int via)
{
	struct tern_peer *peer = peer_of(ctx, src);
	struct tern__path *p;
	uint64_t now = tern__now_ns();

	if (peer == NULL || !ctx->fence_ok || r >= ctx->nrails ||
	    peer->nrails != ctx->nrails || tern__paths(peer) == NULL) {
		if (ctx->fence_ok || peer == NULL)
			tern__debug("a fence of rail %u from source %" PRIu32
				    " not done: %s",
				    r, src,
				    peer == NULL ? "no such peer"
						 : "this ctx cannot fence");
		return;
	}
	p = &peer->paths[r];
	/* One per cooldown: a peer cannot make us churn. An answer still
	 * goes: the first was done. */
	if (p->fenced_ns == 0 ||
	    now - p->fenced_ns >= (uint64_t)ctx->cooldown_ms * 1000000 / 2) {
		if (drop_end(ctx, peer, r) != 0)
			return;
		p->fenced_ns = now;
		ctx->fences++;
		tern__info("rail %u to peer %p: its connection dropped, as "
			   "the peer asked (the rail failed there)",
			   r, (void *)peer);
	}
	tern__ctrl_fenced(ctx, peer, r, token, via);
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
		return; /* not ours, or given up */
	p->fence_token = 0;
	if (drop_end(ctx, peer, r) != 0)
		return;
	p->fenced_ns = tern__now_ns();
	ctx->fences++;
	tern__warn("rail %u to peer %p fenced after %" PRIu64
		   " ms: what it held goes again on the other rails",
		   r, (void *)peer, (p->fenced_ns - p->fence_ns) / 1000000);
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

/* Fences asked and not answered in time: given up. */
static void fences_expire(struct tern_ctx *ctx, uint64_t now)
{
	for (struct tern_peer *peer = ctx->peers; peer != NULL;
	     peer = peer->next) {
		if (peer->paths == NULL)
			continue;
		for (unsigned int r = 0; r < ctx->nrails; r++) {
			struct tern__path *p = &peer->paths[r];

			if (p->fence_token == 0 ||
			    now < p->fence_ns + FENCE_WAIT_MS * 1000000ULL)
				continue;
			p->fence_token = 0;
			tern__warn("rail %u to peer %p: no answer to its fence "
				   "in %u ms; what the rail holds waits for "
				   "the provider",
				   r, (void *)peer, FENCE_WAIT_MS);
		}
	}
}

static void stall_tick(struct tern_timer *t)
{
	struct tern_ctx *ctx = t->data;
	uint64_t now = tern__now_ns();
	int busy_any = 0;

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
		    (uint64_t)ctx->stall_ms * 1000000) {
			rail_stalled(ctx, rail, now - rail->stall_since);
			rail->stall_since = now;
		}
	}
	if (ctx->fence_ok)
		fences_expire(ctx, now);
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
