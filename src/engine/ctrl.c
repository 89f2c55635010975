/* SPDX-License-Identifier: MIT */
/*
 * tern's own control messages (docs/protocol.md): today, a sender whose
 * write with immediate failed (an error completion, a cancel, its peer
 * gone) tells the target, whose expectation for that immediate then fails
 * with -TERN_EABORTED instead of waiting for writes that will never come.
 *
 * They travel as tagged messages between rails 0 with a tag of their own,
 * which no tern_recv() matches; rail 0 keeps TERN__CTRL_RECVS receives
 * posted for them and has TERN__CTRL_SENDS sends in flight at most, their
 * provider contexts slots of rail 0 past its tx credits' (so the CQ
 * decoding of the hot path needs no test of its own). A rail without
 * tagged messages (efa-direct) carries none: there every tern message
 * buffer takes whatever comes (bounce.c), and a control message could
 * not be told from the user's.
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

unsigned int tern__ctrl_slots(const struct tern_ctx *ctx)
{
	return ctx->caps.tagged ? TERN__CTRL_RECVS + TERN__CTRL_SENDS : 0;
}

static struct tern__slot *ctrl_slot(struct tern_ctx *ctx, unsigned int i)
{
	return &ctx->rails[0].slots[ctx->caps.tx_size + i];
}

static uint8_t *ctrl_buf(struct tern_ctx *ctx, unsigned int i)
{
	return ctx->ctrl->buf + (size_t)i * TERN__CTRL_LEN;
}

/* Log at 1, 2, 4, 8...: a peer cannot flood the log. */
static int pow2(uint64_t n)
{
	return (n & (n - 1)) == 0;
}

static int repost(struct tern_ctx *ctx, unsigned int i)
{
	ssize_t ret;
	char msg[64];
	int prov_errno;

	ret = tern__prov_ctrl_recv(&ctx->rails[0].prov, ctrl_buf(ctx, i),
				   TERN__CTRL_LEN, ctx->ctrl->mr->desc[0],
				   ctrl_slot(ctx, i)->fictx);
	if (ret == 0)
		return 0;
	tern__prov_post_error(ret, msg, sizeof(msg), &prov_errno);
	tern__warn("rail 0: posting a control receive: %s (one of %u fewer)",
		   msg + 6 /* after "post: " */, TERN__CTRL_RECVS);
	return -TERN_EPROV;
}

int tern__ctrl_open(struct tern_ctx *ctx)
{
	size_t len = (size_t)(TERN__CTRL_RECVS + TERN__CTRL_SENDS) *
		     TERN__CTRL_LEN;
	struct tern__ctrl *c;
	int ret;

	if (!ctx->caps.tagged)
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
	ctx->ctrl = c;
	return tern__ctrl_post_all(ctx); /* on failure tern_ctx_open closes */
}

int tern__ctrl_post_all(struct tern_ctx *ctx)
{
	for (unsigned int i = 0; i < TERN__CTRL_RECVS; i++) {
		int ret = repost(ctx, i);

		if (ret != 0)
			return ret;
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
	for (unsigned int i = 0; i < TERN__CTRL_SENDS; i++) {
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
	if (pow2(++ctx->ctrl->dropped))
		tern__warn("rail 0: telling a peer that imm %" PRIu32
			   " was aborted: %s (%" PRIu64 " not sent so far)",
			   o->imm, why, ctx->ctrl->dropped);
	put_peer(o->peer);
}

void tern__ctrl_flush(struct tern_ctx *ctx)
{
	struct tern__ctrl *c = ctx->ctrl;

	for (unsigned int i = 0; i < TERN__CTRL_SENDS && c->qlen != 0; i++) {
		struct tern__ctrl_out *o = &c->queue[c->qhead];
		struct tern__ctrl_msg m = { .type = TERN_CTRL_IMM_ABORT,
					    .imm = o->imm };
		unsigned int k = TERN__CTRL_RECVS + i;
		ssize_t ret;
		char msg[64];
		int prov_errno;

		if (c->out[i].peer != NULL)
			continue;
		tern__ctrl_pack(&m, ctrl_buf(ctx, k), TERN__CTRL_LEN);
		ret = tern__prov_ctrl_send(&ctx->rails[0].prov,
					   ctrl_buf(ctx, k), TERN_CTRL_LEN,
					   c->mr->desc[0], o->peer->fiaddr[0],
					   ctrl_slot(ctx, k)->fictx);
		if (ret != 0 && tern__prov_post_error(ret, msg, sizeof(msg),
						      &prov_errno) == -EAGAIN) {
			/* The next pass tries again, for a while: a peer
			 * that takes nothing must not hold the queue. */
			if (tern__now_ns() < o->until_ns)
				break;
			snprintf(msg, sizeof(msg), "post: refused for %s",
				 o->peer->gone ? "1 s (peer gone)" : "5 s");
		}
		c->qhead = (c->qhead + 1) % TERN__CTRL_QUEUE;
		c->qlen--;
		if (ret == 0) {
			c->out[i] = *o;
			c->sent++;
			continue;
		}
		dropped(ctx, o, msg + 6 /* after "post: " */);
	}
	ctx->ctrl_pending = c->qlen != 0;
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
	struct tern__ctrl *c = ctx->ctrl;
	struct tern__ctrl_out *o;

	(void)status;
	if (c == NULL || peer == NULL || !with_imm(rp) || ctx->closing ||
	    peer->removing || peer->removed)
		return;
	if (c->qlen == TERN__CTRL_QUEUE) {
		struct tern__ctrl_out lost = { .peer = peer, .imm = rp->imm };

		peer->inflight++;
		dropped(ctx, &lost, "too many waiting");
		return;
	}
	o = &c->queue[(c->qhead + c->qlen++) % TERN__CTRL_QUEUE];
	/* Refused, it is tried again for 5 s; a peer gone may be only
	 * slow: for 1 s. */
	*o = (struct tern__ctrl_out){
		.peer = peer,
		.imm = rp->imm,
		.until_ns = tern__now_ns() +
			    (peer->gone ? 1000000000ULL : 5000000000ULL),
	};
	peer->inflight++;
	ctx->ctrl_pending = 1;
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

void tern__ctrl_done(struct tern_ctx *ctx, const struct tern__cqe *cqe)
{
	struct tern__ctrl *c = ctx->ctrl;
	unsigned int i = (unsigned int)(cqe->slot - ctx->rails[0].slots -
					ctx->caps.tx_size);
	struct tern__ctrl_msg m;

	if (i >= TERN__CTRL_RECVS) {
		struct tern__ctrl_out *o = &c->out[i - TERN__CTRL_RECVS];

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
			tern__warn("rail 0: a control message failed to "
				   "arrive: %s (%" PRIu64 " dropped so far)",
				   tern_strerror(cqe->status), c->bad);
		repost(ctx, i);
		return;
	}
	if (tern__ctrl_parse(ctrl_buf(ctx, i), cqe->len, &m) != 0) {
		if (pow2(++c->bad))
			tern__warn("rail 0: a malformed control message (%zu "
				   "bytes) dropped (%" PRIu64 " so far)",
				   cqe->len, c->bad);
	} else {
		tern__imm_aborted(ctx, m.imm, cqe->src);
	}
	repost(ctx, i);
}
