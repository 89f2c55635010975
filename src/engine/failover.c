/* SPDX-License-Identifier: MIT */
/*
 * Rails routed around (docs/api.md, "When a rail fails"). A peer's path
 * over one local rail goes down when an operation on it completes with an
 * error that says the path is gone (the provider's "unreachable",
 * "connection reset", "timed out", "I/O error": struct tern__cqe.path),
 * not the operation (a bad key, a bad length), or when the rail goes
 * silent (fence.c: it completes nothing while another rail does; over
 * tcp it is fenced first, so that what it held can no longer land).
 * From then on:
 *
 * - new operations to that peer take its other rails;
 * - what failed is posted again on a live rail when posting it twice is
 *   harmless: a plain write or read, a part of a striped or cut one, a
 *   piece of a batch (the same bytes to the same place); a write with
 *   immediate's parts that carry no immediate. The part that carries
 *   the immediate goes again only stamped (dedup.h: where the remote CQ
 *   data has 8 bytes), with its number and REPEAT, so that the target
 *   counts it once (docs/protocol.md). Unstamped, and atomics, are
 *   never repeated: the target could count it twice, or add twice. They
 *   fail as before, and the target of a write with immediate is told
 *   (ctrl.c);
 * - after its cooldown the rail is tried again by a write of 0 bytes of
 *   tern's own (a probe), sent where the next write or read to that peer
 *   goes, with delivery complete: its success brings the rail back, its
 *   failure leaves it down for another wait, so a rail back is in use
 *   within one wait of its link. The caller's operations never try a
 *   down rail, so none waits on one. A rail that fails again soon after
 *   coming back waits twice as long as before (at most
 *   TERN__COOLDOWN_GROWTH times the first), so a flapping link is tried
 *   no faster than its cooldown, and ever slower while it flaps;
 * - a peer whose every rail is down is gone (tern__peer_gone()): its
 *   operations fail -TERN_EPEERGONE, as when its process dies.
 *
 * Every change is logged once; tern_peer_rails() reports each rail.
 * Nothing here runs on a healthy ctx's path but one test of peer->down
 * when a multi-rail operation picks its rail (a completion comes here
 * only when it failed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "stripe.h"

/* A rail that flaps (fails again soon after it came back) waits at most
 * this many times its first cooldown. */
#define TERN__COOLDOWN_GROWTH 64
/* A rail up this many cooldowns is healthy again: its next failure
 * waits the first cooldown, not a grown one. */
#define TERN__COOLDOWN_HEAL 10

/* A part to post again: of a striped or cut write or read (its offset
 * in the operation), or of a batch (a piece, from @sub). */
struct tern__redo {
	struct tern__redo *next;
	struct tern_req *req;
	uint64_t off;	/* striped/cut: the part's offset; batch: sub */
	uint32_t piece; /* batch: the piece */
	uint32_t stamp; /* with an immediate: its stamp (dedup.h), or 0 */
	uint8_t from;	/* the rail it failed on */
};

static uint32_t rails_mask(const struct tern_ctx *ctx)
{
	return ctx->nrails >= 32 ? UINT32_MAX : (1U << ctx->nrails) - 1;
}

struct tern__path *tern__paths(struct tern_peer *peer)
{
	if (peer->paths == NULL)
		peer->paths = calloc(TERN_MAX_RAILS, sizeof(*peer->paths));
	return peer->paths;
}

unsigned int tern__path_pick(const struct tern_peer *peer, unsigned int r)
{
	const struct tern_ctx *ctx = peer->ctx;

	for (unsigned int i = 0; i < ctx->nrails; i++) {
		unsigned int k = (r + i) % ctx->nrails;

		if (!(peer->down & (1U << k)))
			return k;
	}
	return r; /* every rail down: the peer is gone, posts fail */
}

/* A probe finished. Its success came from its completion, inside the
 * pass that read it: its peer (req->data) is still there, removed or not
 * (freed at the pass's end), and the rail is back. A failure was seen by
 * tern__path_completed() or tern__path_probe_unposted(); a probe cancelled
 * (its peer removed or gone, the ctx closing) leaves the rail as it is. */
static void probe_done(struct tern_req *req)
{
	if (req->status == 0)
		tern__path_probed(req->data, tern__rp(req)->rail);
	free(req);
}

void tern__path_try(struct tern_peer *peer, const struct tern_mr_desc *rd,
		    uint64_t roff)
{
	struct tern_ctx *ctx = peer->ctx;
	uint64_t now = tern__now_ns();

	if (ctx->scratch_mr == NULL)
		return;
	for (unsigned int r = 0; r < ctx->nrails; r++) {
		struct tern__path *p = &peer->paths[r];
		struct tern__req_priv *rp;
		struct tern_req *req;

		if (!(peer->down & (1U << r)) || p->probing ||
		    now < p->retry_ns)
			continue;
		/* A write of 0 bytes, tern's own, where the caller's
		 * operation goes: harmless, and its completion says
		 * whether the path works. */
		req = malloc(sizeof(*req));
		if (req == NULL)
			return;
		tern_req_init(req, probe_done, peer);
		tern__req_fill(ctx, req, TERN__OP_WRITE, peer, ctx->scratch_mr,
			       ctx->scratch, 0);
		rp = tern__rp(req);
		rp->rail = (uint8_t)r;
		rp->u.rma.raddr = tern__raddr(rd, roff);
		rp->u.rma.rkey = tern__desc_key(rd, roff, r % peer->nrails);
		rp->xflags = TERN__XF_PROBE | TERN__XF_DELIVER;
		p->probing = 1;
		p->probes++;
		tern__queue_req(ctx, req);
	}
}

/* The probe of @peer's rail @r failed (@why): the rail stays down, and
 * waits its cooldown again before the next. */
static void probe_failed(struct tern_peer *peer, unsigned int r,
			 const char *why)
{
	struct tern__path *p = &peer->paths[r];

	p->probing = 0;
	p->retry_ns = tern__now_ns() + (uint64_t)p->cooldown_ms * 1000000;
	tern__debug("rail %u to peer %p: still down (%s); next try in %u ms", r,
		    (void *)peer, why, p->cooldown_ms);
}

void tern__path_probe_unposted(struct tern_req *req, unsigned int r)
{
	struct tern_peer *peer = tern__rp(req)->peer;

	/* No completion will come: the probe failed here. */
	if (peer != NULL && peer->paths != NULL &&
	    (peer->down & (1U << r)) != 0)
		probe_failed(peer, r, req->errmsg);
}

/* The path of @peer over rail @r failed (@why; @probe: the failure was
 * its probe's): mark it down. */
static void path_down(struct tern_ctx *ctx, struct tern_peer *peer,
		      unsigned int r, const char *why, int probe)
{
	struct tern__path *p = &peer->paths[r];
	uint64_t now = tern__now_ns();

	if (peer->down & (1U << r)) {
		/* Already down: one more of its failures, or its probe's. */
		if (probe)
			probe_failed(peer, r, why);
		return;
	}
	/* Up a while: healthy, the first wait; else it flaps: a longer one. */
	if (p->cooldown_ms == 0 || now - p->up_ns > (uint64_t)p->cooldown_ms *
							    1000000 *
							    TERN__COOLDOWN_HEAL)
		p->cooldown_ms = ctx->cooldown_ms;
	else
		p->cooldown_ms = TERN_MIN(p->cooldown_ms * 2,
					  ctx->cooldown_ms *
						  TERN__COOLDOWN_GROWTH);
	peer->down |= 1U << r;
	p->probing = 0;
	p->down_ns = now;
	p->retry_ns = now + (uint64_t)p->cooldown_ms * 1000000;
	p->downs++;
	ctx->rails_down++;
	tern__warn("rail %u to peer %p down: %s; its operations move to the "
		   "other rails, and it is tried again in %u ms",
		   r, (void *)peer, why, p->cooldown_ms);
	if ((peer->down & rails_mask(ctx)) == rails_mask(ctx)) {
		tern__warn("peer %p: every rail is down", (void *)peer);
		tern__peer_gone(peer);
	}
}

void tern__path_probed(struct tern_peer *peer, unsigned int r)
{
	struct tern__path *p = &peer->paths[r];
	uint64_t now = tern__now_ns();

	p->probing = 0;
	if (!(peer->down & (1U << r)))
		return;
	peer->down &= ~(1U << r);
	p->up_ns = now;
	peer->ctx->rails_up++;
	tern__warn("rail %u to peer %p is back after %" PRIu64 " ms", r,
		   (void *)peer, (now - p->down_ns) / 1000000);
}

/* Did @rail's operation fail because this end dropped its connections
 * there for a fence (fence.c), within a second of it? Then it goes again,
 * and the rail is not down for it: a peer that asks for fences cannot
 * take a rail down, only make operations go again. */
static int fenced_here(const struct tern_rail *rail)
{
	return rail->fenced_ns != 0 &&
	       tern__now_ns() - rail->fenced_ns < 1000000000ULL;
}

void tern__path_stalled(struct tern_ctx *ctx, struct tern_peer *peer,
			unsigned int r, const char *why)
{
	/* Its last rail up silent too: the peer is slow, or gone (which
	 * its connection or keepalive tells), not a rail. */
	if (ctx->closing || peer->gone || peer->removing || peer->removed ||
	    tern__paths(peer) == NULL || (peer->down & (1U << r)) ||
	    ((peer->down | (1U << r)) & rails_mask(ctx)) == rails_mask(ctx))
		return;
	path_down(ctx, peer, r, why, 0);
	if (!peer->gone)
		tern__fence_start(peer, r, 1);
}

/* The next live rail after @r, for a part that failed there; @r itself
 * when none is (the peer is gone then). */
static unsigned int live_rail(const struct tern_peer *peer, unsigned int r)
{
	const struct tern_ctx *ctx = peer->ctx;

	for (unsigned int i = 1; i < ctx->nrails; i++) {
		unsigned int k = (r + i) % ctx->nrails;

		if (!(peer->down & (1U << k)))
			return k;
	}
	return r;
}

/* May @req's failed part (on @slot, NULL: the request's own context) be
 * posted again: the same bytes to the same place, nothing counted twice?
 * A part with an immediate may when stamped: the target counts its
 * number once (dedup.h). */
static int repeatable(const struct tern_req *req, const struct tern__slot *slot)
{
	const struct tern__req_priv *rp = tern__rp(req);

	switch (rp->op) {
	case TERN__OP_WRITE:
	case TERN__OP_READ:
		return slot == NULL;
	case TERN__OP_WRITE_IMM:
		return slot == NULL && rp->u.rma.stamp != 0;
	case TERN__OP_PIECES:
		if (slot == NULL)
			return 0;
		if (rp->sop == 0)
			return !rp->u.batch.with_imm || slot->stamp != 0;
		/* A cut write with immediate: all its parts but the last,
		 * which carries the immediate, unless stamped. */
		return rp->sop != TERN__OP_WRITE_IMM || slot->stamp != 0 ||
		       slot->part + tern__cut_len(
					    req->len, slot->part,
					    rp->u.stripe.chunk,
					    (uint64_t)((char *)rp->buf -
						       (char *)rp->mr->buf),
					    rp->mr->nchunks > 1
						    ? rp->mr->chunk_shift
						    : 0,
					    rp->u.stripe.roff,
					    TERN_MR_DESC_CHUNK_SHIFT(
						    rp->u.stripe.rd->d.flags)) <
			       req->len;
	default:
		return 0;
	}
}

static void redo_push(struct tern_ctx *ctx, struct tern__redo *rd)
{
	rd->next = NULL;
	if (ctx->redo_tail != NULL)
		ctx->redo_tail->next = rd;
	else
		ctx->redo_head = rd;
	ctx->redo_tail = rd;
}

/* A plain write or read that failed on @from: again on @to, with the key
 * it was given for that rail (rma_any()). */
static void requeue(struct tern_ctx *ctx, struct tern_req *req, unsigned int to)
{
	struct tern__req_priv *rp = tern__rp(req);

	tern__reqq_remove(&ctx->posted, req);
	rp->rail = (uint8_t)to;
	rp->u.rma.rkey = rp->u.rma.rkey_next;
	/* A stamped write with immediate: the same number, a repeat. */
	if (rp->op == TERN__OP_WRITE_IMM)
		rp->u.rma.stamp |= TERN__STAMP_REPEAT;
	rp->state = TERN__ST_QUEUED;
	tern__reqq_push(&ctx->rails[to].txq, req);
	ctx->rails[to].tx_refused = 0;
}

int tern__path_failed(struct tern_ctx *ctx, struct tern_rail *rail,
		      const struct tern__cqe *c)
{
	struct tern_req *req = c->req;
	struct tern__req_priv *rp = tern__rp(req);
	struct tern_peer *peer = rp->peer;
	struct tern__redo *rd = NULL;
	unsigned int to;

	if (peer == NULL || ctx->closing || peer->gone || peer->removing ||
	    peer->removed || tern__paths(peer) == NULL)
		return 0;
	if (!fenced_here(rail)) {
		path_down(ctx, peer, rail->idx, req->errmsg,
			  (rp->xflags & TERN__XF_PROBE) != 0);
		/* Neither end may keep a broken connection: the next one is
		 * made anew. */
		if (!peer->gone)
			tern__fence_start(peer, rail->idx, 0);
	}
	/* A probe is tern's own: it ends here. */
	if (peer->gone || (rp->xflags & TERN__XF_PROBE) ||
	    !repeatable(req, c->slot))
		return 0;
	to = live_rail(peer, rail->idx);
	if (to == rail->idx || (c->slot == NULL && to != rp->u.rma.rail_next))
		return 0; /* nowhere to go, or no key for it */
	if (c->slot != NULL) {
		rd = malloc(sizeof(*rd));
		if (rd == NULL)
			return 0;
		*rd = (struct tern__redo){ .req = req,
					   .off = c->slot->part,
					   .piece = c->slot->piece,
					   .stamp = c->slot->stamp,
					   .from = (uint8_t)rail->idx };
		tern__slot_free(rail, c->slot);
	}
	/* The failed post's credit comes back; the operation stays in
	 * flight, its part queued to go again. */
	rail->tx_credits++;
	if (rd != NULL)
		redo_push(ctx, rd);
	else
		requeue(ctx, req, to);
	/* The error was this part's, now gone: the request's text is the
	 * next failure's, if any. */
	if (rp->op != TERN__OP_PIECES || rp->err == 0) {
		req->errmsg[0] = '\0';
		req->prov_errno = 0;
	}
	peer->paths[rail->idx].rerouted++;
	ctx->rerouted++;
	return 1;
}

int tern__path_completed(struct tern_ctx *ctx, struct tern_rail *rail,
			 const struct tern__cqe *c)
{
	struct tern__req_priv *rp = tern__rp(c->req);

	if (c->path && ctx->failover)
		return tern__path_failed(ctx, rail, c);
	/* Failed for its own reason: the path answered. */
	if ((rp->xflags & TERN__XF_PROBE) && rp->peer != NULL &&
	    rp->peer->paths != NULL)
		tern__path_probed(rp->peer, rail->idx);
	return 0;
}

/* A part that cannot go again (its peer went meanwhile): it ends with
 * @status, as if its post had failed. */
static void redo_fail(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	struct tern__req_priv *rp = tern__rp(req);

	if (rp->err == 0)
		rp->err = status;
	tern__piece_done(ctx, req, status);
}

int tern__redo_post(struct tern_ctx *ctx)
{
	struct tern__redo *rd;
	int done = 0;

	while ((rd = ctx->redo_head) != NULL) {
		struct tern_req *req = rd->req;
		struct tern_peer *peer = tern__rp(req)->peer;
		struct tern_rail *rail;
		int ret;

		if (peer->gone || peer->removing || peer->removed ||
		    ctx->closing) {
			ret = peer->gone ? -TERN_EPEERGONE : -ECANCELED;
		} else {
			rail = &ctx->rails[tern__path_pick(peer, rd->from + 1)];
			if (rail->tx_credits == 0)
				break; /* the next pass */
			ret = tern__rail_repost(rail, req, rd->off, rd->piece,
						rd->stamp);
			if (ret == -EAGAIN)
				break;
			if (ret == 0)
				rail->tx_credits--;
		}
		ctx->redo_head = rd->next;
		if (ctx->redo_head == NULL)
			ctx->redo_tail = NULL;
		free(rd);
		if (ret != 0) {
			redo_fail(ctx, req, ret);
			done++;
		}
	}
	return done;
}

void tern__redo_fini(struct tern_ctx *ctx)
{
	struct tern__redo *rd;

	while ((rd = ctx->redo_head) != NULL) {
		ctx->redo_head = rd->next;
		free(rd);
	}
	ctx->redo_tail = NULL;
}

int tern_peer_rails(const struct tern_peer *peer, struct tern_peer_rail *st,
		    unsigned int n)
{
	const struct tern_ctx *ctx;
	uint64_t now;

	if (peer == NULL || (st == NULL && n != 0))
		return -EINVAL;
	ctx = peer->ctx;
	now = tern__now_ns();
	for (unsigned int r = 0; r < n && r < ctx->nrails; r++) {
		const struct tern__path *p = peer->paths != NULL
						     ? &peer->paths[r]
						     : NULL;
		int down = (peer->down & (1U << r)) != 0;

		st[r] = (struct tern_peer_rail){ .up = !down };
		if (p == NULL)
			continue;
		st[r].downs = p->downs;
		st[r].rerouted = p->rerouted;
		st[r].probes = p->probes;
		st[r].cooldown_ms = p->cooldown_ms;
		if (down)
			st[r].down_ms = (now - p->down_ns) / 1000000;
	}
	return (int)ctx->nrails;
}
