/* SPDX-License-Identifier: MIT */
/*
 * tern's own control messages (docs/protocol.md):
 *
 * - a sender whose write with immediate failed (an error completion, a
 *   cancel, its peer gone) tells the target, whose expectation for that
 *   immediate then fails with -TERN_EABORTED instead of waiting for
 *   writes that will never come;
 * - the fence of a rail gone silent or broken (fence.c): "drop my
 *   connection on rail R" (FENCE), answered "dropped" (FENCED).
 *
 * They travel as tagged messages with a tag of their own, which no
 * tern_recv() matches: between rails 0, and on a ctx that routes around
 * failed rails (failover.c) between any two rails of the same index, so
 * that a fence of rail 0 has a live rail to go by. Each such rail keeps
 * TERN__CTRL_RECVS receives posted for them and has TERN__CTRL_SENDS
 * sends in flight at most, their provider contexts slots of the rail
 * past its tx credits' (so the CQ decoding of the hot path needs no test
 * of its own). A rail without tagged messages (efa-direct) carries none:
 * there every tern message buffer takes whatever comes (bounce.c), and a
 * control message could not be told from the user's.
 *
 * Everything that arrives is checked field by field; what fails is
 * dropped and counted. Nothing here runs a callback: an expectation that
 * fails goes to ctx->ready.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#include "../wire/ctrl.h"

#define NBUF (TERN__CTRL_RECVS + TERN__CTRL_SENDS) /* buffers per rail */

unsigned int tern__ctrl_rails(const struct tern_ctx *ctx)
{
	if (!ctx->caps.tagged)
		return 0;
	return ctx->failover ? ctx->nrails : 1;
}

unsigned int tern__ctrl_slots(const struct tern_ctx *ctx)
{
	return ctx->caps.tagged ? NBUF : 0;
}

static unsigned int ctrl_nrails(const struct tern__ctrl *c)
{
	return c->nrails != 0 ? c->nrails : 1;
}

static struct tern__slot *ctrl_slot(struct tern_ctx *ctx, unsigned int r,
				    unsigned int i)
{
	return &ctx->rails[r].slots[ctx->caps.tx_size + i];
}

static uint8_t *ctrl_buf(struct tern_ctx *ctx, unsigned int r, unsigned int i)
{
	return ctx->ctrl->buf + ((size_t)r * NBUF + i) * TERN__CTRL_LEN;
}

/* Log at 1, 2, 4, 8...: a peer cannot flood the log. */
static int pow2(uint64_t n)
{
	return (n & (n - 1)) == 0;
}

static int repost(struct tern_ctx *ctx, unsigned int r, unsigned int i)
{
	ssize_t ret;
	char msg[64];
	int prov_errno;

	ret = tern__prov_ctrl_recv(&ctx->rails[r].prov, ctrl_buf(ctx, r, i),
				   TERN__CTRL_LEN, ctx->ctrl->mr->desc[r],
				   ctrl_slot(ctx, r, i)->fictx);
	if (ret == 0)
		return 0;
	tern__prov_post_error(ret, msg, sizeof(msg), &prov_errno);
	tern__warn("rail %u: posting a control receive: %s (one of %u fewer)",
		   r, msg + 6 /* after "post: " */, TERN__CTRL_RECVS);
	return -TERN_EPROV;
}

int tern__ctrl_open(struct tern_ctx *ctx)
{
	unsigned int nrails = tern__ctrl_rails(ctx);
	size_t len = (size_t)nrails * NBUF * TERN__CTRL_LEN;
	struct tern__ctrl *c;
	int ret;

	if (nrails == 0)
		return 0;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	if (posix_memalign((void **)&c->buf, 64, len) != 0) {
		free(c);
		return -ENOMEM;
	}
	memset(c->buf, 0, len);
	ret = tern__mr_reg_own(ctx, c->buf, len, TERN_ACCESS_LOCAL, &c->mr);
	if (ret != 0) {
		free(c->buf);
		free(c);
		return ret;
	}
	ctx->nmr--; /* tern's own: not the user's to close */
	c->nrails = nrails;
	ctx->ctrl = c;
	return tern__ctrl_post_all(ctx); /* on failure tern_ctx_open closes */
}

int tern__ctrl_post_all(struct tern_ctx *ctx)
{
	for (unsigned int r = 0; r < ctrl_nrails(ctx->ctrl); r++) {
		for (unsigned int i = 0; i < TERN__CTRL_RECVS; i++) {
			int ret = repost(ctx, r, i);

			if (ret != 0)
				return ret;
		}
	}
	return 0;
}

/* A control message no longer holds its peer. */
static void put_peer(struct tern_peer *peer)
{
	peer->inflight--;
	if (peer->removed)
		tern__peer_release_later(peer);
}

void tern__ctrl_close(struct tern_ctx *ctx, int held)
{
	struct tern__ctrl *c = ctx->ctrl;

	if (c == NULL)
		return;
	for (unsigned int i = 0; i < ctrl_nrails(c) * TERN__CTRL_SENDS; i++) {
		if (c->out[i].peer != NULL)
			put_peer(c->out[i].peer);
	}
	for (unsigned int i = 0; i < c->qlen; i++)
		put_peer(c->queue[(c->qhead + i) % TERN__CTRL_QUEUE].peer);
	if (c->sent || c->dropped || c->bad)
		tern__info("control messages: %" PRIu64 " sent, %" PRIu64
			   " not sent, %" PRIu64 " malformed ones dropped",
			   c->sent, c->dropped, c->bad);
	ctx->nmr++;
	tern__mr_close(c->mr);
	/* A receive the provider still holds may land in it. */
	if (held)
		tern__keep(c->buf);
	else
		free(c->buf);
	free(c);
	ctx->ctrl = NULL;
	ctx->ctrl_pending = 0;
}

static void dropped(struct tern_ctx *ctx, const struct tern__ctrl_out *o,
		    const char *why)
{
	/* An answer to a fence goes by the fenced rail, often dead yet: it
	 * only ends a connection the peer dropped (fence.c). */
	if (o->type == TERN_CTRL_FENCED) {
		tern__debug("a fence's answer to peer %p on rail %u: %s",
			    (void *)o->peer, o->via, why);
		put_peer(o->peer);
		return;
	}
	if (pow2(++ctx->ctrl->dropped)) {
		if (o->type == TERN_CTRL_IMM_ABORT)
			tern__warn("telling a peer that imm %" PRIu32
				   " was aborted: %s (%" PRIu64
				   " not sent so far)",
				   o->imm, why, ctx->ctrl->dropped);
		else
			tern__warn("a fence of rail %u to peer %p: %s (%" PRIu64
				   " control messages not sent so far)",
				   o->rail, (void *)o->peer, why,
				   ctx->ctrl->dropped);
	}
	put_peer(o->peer);
}

/* The rail @o goes by: an abort by rail 0, or the next live one; a fence
 * by a live rail other than the one fenced; an answer where the fence
 * came in. */
static unsigned int send_rail(struct tern_ctx *ctx,
			      const struct tern__ctrl_out *o)
{
	unsigned int n = ctrl_nrails(ctx->ctrl), r;

	switch (o->type) {
	case TERN_CTRL_FENCE:
		r = tern__path_pick(o->peer, (o->rail + 1) % ctx->nrails);
		break;
	case TERN_CTRL_FENCED:
		r = o->via;
		break;
	default:
		r = n > 1 ? tern__path_pick(o->peer, 0) : 0;
		break;
	}
	return r < n ? r : 0;
}

/* A free send slot of rail @r, or -1. */
static int free_send(const struct tern__ctrl *c, unsigned int r)
{
	for (unsigned int i = 0; i < TERN__CTRL_SENDS; i++) {
		if (c->out[r * TERN__CTRL_SENDS + i].peer == NULL)
			return (int)i;
	}
	return -1;
}

static ssize_t send_one(struct tern_ctx *ctx, const struct tern__ctrl_out *o,
			unsigned int r, unsigned int i)
{
	struct tern__ctrl_msg m = { .type = o->type,
				    .imm = o->imm,
				    .rail = o->rail,
				    .token = o->token };
	unsigned int k = TERN__CTRL_RECVS + i;

	tern__ctrl_pack(&m, ctrl_buf(ctx, r, k), TERN__CTRL_LEN);
	return tern__prov_ctrl_send(&ctx->rails[r].prov, ctrl_buf(ctx, r, k),
				    TERN_CTRL_LEN, ctx->ctrl->mr->desc[r],
				    o->peer->fiaddr[r],
				    ctrl_slot(ctx, r, k)->fictx);
}

void tern__ctrl_flush(struct tern_ctx *ctx)
{
	struct tern__ctrl *c = ctx->ctrl;

	while (c->qlen != 0) {
		struct tern__ctrl_out *o = &c->queue[c->qhead];
		unsigned int r = send_rail(ctx, o);
		int i = free_send(c, r);
		ssize_t ret;
		char msg[64];
		int prov_errno;

		if (i < 0)
			break; /* a send of that rail completes first */
		if (o->type == TERN_CTRL_FENCE && r == o->rail) {
			/* Every other rail down: the peer is gone. */
			ret = -EHOSTUNREACH;
			snprintf(msg, sizeof(msg), "post: no other rail up");
		} else {
			ret = send_one(ctx, o, r, (unsigned int)i);
			if (ret != 0 &&
			    tern__prov_post_error(ret, msg, sizeof(msg),
						  &prov_errno) == -EAGAIN) {
				/* The next pass tries again, for a while: a
				 * peer that takes nothing must not hold the
				 * queue. */
				if (tern__now_ns() < o->until_ns)
					break;
				snprintf(msg, sizeof(msg),
					 "post: refused for %s",
					 o->peer->gone ? "1 s (peer gone)"
						       : "5 s");
			}
		}
		c->qhead = (c->qhead + 1) % TERN__CTRL_QUEUE;
		c->qlen--;
		if (ret == 0) {
			c->out[r * TERN__CTRL_SENDS + (unsigned int)i] = *o;
			c->sent++;
			continue;
		}
		dropped(ctx, o, msg + 6 /* after "post: " */);
	}
	ctx->ctrl_pending = c->qlen != 0;
}

/* Queue @o (its peer held here) for the next pass; dropped when full. */
static void enqueue(struct tern_ctx *ctx, const struct tern__ctrl_out *o)
{
	struct tern__ctrl *c = ctx->ctrl;
	struct tern__ctrl_out *q;

	o->peer->inflight++;
	if (c->qlen == TERN__CTRL_QUEUE) {
		dropped(ctx, o, "too many waiting");
		return;
	}
	q = &c->queue[(c->qhead + c->qlen++) % TERN__CTRL_QUEUE];
	*q = *o;
	/* Refused, it is tried again for 5 s; a peer gone may be only
	 * slow: for 1 s. */
	q->until_ns = tern__now_ns() +
		      (o->peer->gone ? 1000000000ULL : 5000000000ULL);
	ctx->ctrl_pending = 1;
}

static int with_imm(const struct tern__req_priv *rp)
{
	if (rp->op == TERN__OP_WRITE_IMM ||
	    (rp->op == TERN__OP_PIECES && rp->sop == TERN__OP_WRITE_IMM))
		return 1;
	return rp->op == TERN__OP_PIECES && rp->sop == 0 && !rp->u.batch.read &&
	       rp->u.batch.with_imm;
}

void tern__ctrl_imm_failed(struct tern_ctx *ctx, struct tern_req *req,
			   int status)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern_peer *peer = rp->peer;

	(void)status;
	if (ctx->ctrl == NULL || peer == NULL || !with_imm(rp) ||
	    ctx->closing || peer->removing || peer->removed)
		return;
	enqueue(ctx, &(struct tern__ctrl_out){ .peer = peer,
					       .type = TERN_CTRL_IMM_ABORT,
					       .imm = rp->imm });
}

void tern__ctrl_fence(struct tern_ctx *ctx, struct tern_peer *peer,
		      unsigned int rail, uint32_t token)
{
	enqueue(ctx, &(struct tern__ctrl_out){ .peer = peer,
					       .type = TERN_CTRL_FENCE,
					       .rail = (uint8_t)rail,
					       .token = token });
}

void tern__ctrl_fenced(struct tern_ctx *ctx, struct tern_peer *peer,
		       unsigned int rail, uint32_t token, unsigned int via)
{
	enqueue(ctx, &(struct tern__ctrl_out){ .peer = peer,
					       .type = TERN_CTRL_FENCED,
					       .rail = (uint8_t)rail,
					       .via = (uint8_t)via,
					       .token = token });
}

void tern__ctrl_forget_peer(struct tern_ctx *ctx, struct tern_peer *peer)
{
	struct tern__ctrl *c = ctx->ctrl;
	unsigned int n, k = 0;

	if (c == NULL || c->qlen == 0)
		return;
	n = c->qlen;
	for (unsigned int i = 0; i < n; i++) {
		struct tern__ctrl_out o =
			c->queue[(c->qhead + i) % TERN__CTRL_QUEUE];

		if (o.peer == peer) {
			peer->inflight--; /* removed: freed by the caller */
			continue;
		}
		c->queue[(c->qhead + k++) % TERN__CTRL_QUEUE] = o;
	}
	c->qlen = k;
	ctx->ctrl_pending = k != 0;
}

/* A message arrived from @src: act on it. */
static void arrived(struct tern_ctx *ctx, const struct tern__ctrl_msg *m,
		    uint32_t src)
{
	switch (m->type) {
	case TERN_CTRL_IMM_ABORT:
		/* Under ofi_rxm a message's source is not a write's. */
		tern__imm_aborted(ctx, m->imm, ctx->imm_source ? src : 0);
		break;
	case TERN_CTRL_FENCE:
		tern__fence_asked(ctx, src, m->rail, m->token);
		break;
	case TERN_CTRL_FENCED:
		tern__fence_answered(ctx, src, m->rail, m->token);
		break;
	}
}

void tern__ctrl_done(struct tern_ctx *ctx, struct tern_rail *rail,
		     const struct tern__cqe *cqe)
{
	struct tern__ctrl *c = ctx->ctrl;
	unsigned int r = rail->idx;
	unsigned int i = (unsigned int)(cqe->slot - rail->slots -
					ctx->caps.tx_size);
	struct tern__ctrl_msg m;

	if (i >= TERN__CTRL_RECVS) {
		struct tern__ctrl_out *o =
			&c->out[r * TERN__CTRL_SENDS + i - TERN__CTRL_RECVS];

		if (cqe->status != 0)
			dropped(ctx, o, tern_strerror(cqe->status));
		else
			put_peer(o->peer);
		o->peer = NULL;
		if (c->qlen != 0)
			ctx->ctrl_pending = 1;
		return;
	}
	if (cqe->status != 0) {
		if (cqe->status == -ECANCELED || ctx->closing)
			return;
		if (pow2(++c->bad))
			tern__warn("rail %u: a control message failed to "
				   "arrive: %s (%" PRIu64 " dropped so far)",
				   r, tern_strerror(cqe->status), c->bad);
		repost(ctx, r, i);
		return;
	}
	if (tern__ctrl_parse(ctrl_buf(ctx, r, i), cqe->len, &m) != 0) {
		if (pow2(++c->bad))
			tern__warn("rail %u: a malformed control message (%zu "
				   "bytes) dropped (%" PRIu64 " so far)",
				   r, cqe->len, c->bad);
	} else {
		arrived(ctx, &m, cqe->src);
	}
	repost(ctx, r, i);
}
