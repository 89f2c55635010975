/* SPDX-License-Identifier: MIT */
/* Handing a rail's queued operations to the provider (the hot path's
 * inline part is post.h; its completions are read in reap.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "post.h"
#include "stripe.h"

/* The request context fits libfabric's: engine.h checks it. */

/* On the hot path: the common answer costs one test. */
static inline int post_result(struct tern_rail *rail, struct tern_req *req,
			      ssize_t ret)
{
	if (tern_likely(ret == 0))
		return 0;
	return tern__post_failed(rail, req, ret);
}

__attribute__((noinline, cold)) int tern__post_failed(struct tern_rail *rail,
						      struct tern_req *req,
						      ssize_t ret)
{
	int err = tern__prov_post_error(ret, req->errmsg, sizeof(req->errmsg),
					&req->prov_errno);

	if (err == -EAGAIN)
		return err;
	/* tern's own probe of a down rail: a failed try (failover.c). */
	if (tern__rp(req)->xflags & TERN__XF_PROBE)
		tern__path_probe_unposted(req, rail->idx);
	/* Logged at 1, 2, 4, 8... so a burst cannot flood the log: on shm
	 * (libfabric 1.17) every small write through a descriptor naming
	 * memory its peer has not mapped fails here (post.h). */
	rail->post_errs++;
	if ((rail->post_errs & (rail->post_errs - 1)) == 0)
		tern__warn("rail %u: posting op %u: %s (%" PRIu64 " so far)",
			   rail->idx, tern__rp(req)->op,
			   req->errmsg + 6 /* after "post: " */,
			   rail->post_errs);
	return err;
}

static struct tern__slot *slot_get(struct tern_rail *rail,
				   struct tern_req *owner)
{
	struct tern__slot *slot;

	/* One slot per credit: a credit in hand means a slot is free. */
	if (rail->nfree == 0)
		return NULL;
	slot = &rail->slots[rail->free_slots[--rail->nfree]];
	slot->owner = owner;
	return slot;
}

void tern__slot_free(struct tern_rail *rail, struct tern__slot *slot)
{
	slot->owner = NULL;
	rail->free_slots[rail->nfree++] = (uint32_t)(slot - rail->slots);
}

static ssize_t post_atomic(struct tern_rail *rail, struct tern_req *req,
			   struct tern__slot *slot, uint64_t flags)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t *w = tern__slot_words(rail, slot);

	w[0] = rp->u.atomic.operand;
	w[1] = rp->u.atomic.compare;
	w[2] = 0;
	return tern__prov_atomic(&rail->prov, rp->op == TERN__OP_FADD, w,
				 rail->ctx->scratch_mr->desc[rail->idx],
				 rp->peer->fiaddr[rail->idx],
				 rp->u.atomic.raddr, rp->u.atomic.rkey,
				 slot->fictx, flags);
}

int tern__rail_post(struct tern_rail *rail, struct tern_req *req, int more)
{
	struct tern_peer *peer = tern__rp(req)->peer;
	uint64_t flags = more ? TERN__PF_MORE : 0, data = 0;
	struct tern__slot *slot;
	ssize_t ret;

	switch (tern__rp(req)->op) {
	case TERN__OP_WRITE_IMM:
		flags |= TERN__PF_IMM;
		data = tern__rp(req)->imm | (uint64_t)tern__rp(req)->u.rma.stamp
						    << 32;
		/* fall through */
	case TERN__OP_WRITE:
	case TERN__OP_READ:
		ret = tern__post_rma(rail, req, tern__rp(req)->buf, req->len,
				     tern__rp(req)->u.rma.raddr,
				     tern__rp(req)->u.rma.rkey, data,
				     tern__rp(req)->fictx, flags);
		break;
	case TERN__OP_SEND:
	case TERN__OP_SEND_IMM:
	case TERN__OP_RECV: {
		struct tern_mr *mr = tern__rp(req)->mr;
		void *desc = mr != NULL
				     ? tern__mr_desc_at(
					       mr, rail->idx,
					       (uint64_t)((char *)tern__rp(req)
								  ->buf -
							  (char *)mr->buf))
				     : NULL;
		uint64_t addr = peer ? peer->fiaddr[rail->idx]
				     : TERN__PROV_ADDR_ANY;

		if (tern__rp(req)->op == TERN__OP_RECV) {
			ret = tern__prov_trecv(&rail->prov, tern__rp(req)->buf,
					       req->len, desc, addr,
					       tern__rp(req)->fictx, flags);
			break;
		}
		if (tern__rp(req)->op == TERN__OP_SEND_IMM)
			flags |= TERN__PF_IMM;
		ret = tern__prov_tsend(&rail->prov, tern__rp(req)->buf,
				       req->len, desc, addr, tern__rp(req)->imm,
				       tern__rp(req)->fictx, flags);
		break;
	}
	case TERN__OP_FADD:
	case TERN__OP_CSWAP:
		slot = slot_get(rail, req);
		if (slot == NULL)
			return -EAGAIN;
		ret = post_atomic(rail, req, slot, flags);
		if (ret != 0)
			tern__slot_free(rail, slot);
		break;
	default:
		return -EINVAL;
	}
	return post_result(rail, req, ret);
}

/* Post the part of piece @idx of batch @req from @sub on @rail (as far as
 * it goes inside one chunk of either region): its length in *@len_p. */
static ssize_t piece_post_at(struct tern_rail *rail, struct tern_req *req,
			     uint32_t idx, uint64_t sub, int more,
			     uint32_t stamp, uint64_t *len_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	const struct tern_piece pc = tern__piece(rp, idx);
	const struct tern_mr_desc *rd = rp->u.batch.regions + pc.region;
	uint64_t len = pc.len - sub;
	uint64_t flags = more ? TERN__PF_MORE : 0;
	struct tern__slot *slot;
	ssize_t ret;

	if (tern_unlikely(rp->mr->nchunks > 1 ||
			  (rd->flags & TERN_MR_DESC_CHUNK_MASK) != 0))
		len = tern__cut_len(
			pc.len, sub, UINT64_MAX, pc.loff,
			rp->mr->nchunks > 1 ? rp->mr->chunk_shift : 0, pc.roff,
			TERN_MR_DESC_CHUNK_SHIFT(rd->flags));
	if (rp->u.batch.with_imm)
		flags |= TERN__PF_IMM;
	slot = slot_get(rail, req);
	if (slot == NULL)
		return -EAGAIN;
	slot->part = sub;
	slot->piece = idx;
	slot->stamp = stamp;
	/* tern__post_rma()'s body, the direction from the batch. */
	if (rp->xflags & TERN__XF_DELIVER)
		flags |= TERN__PF_DELIVER;
	ret = tern__prov_rma(
		&rail->prov, rp->u.batch.read,
		(char *)rp->mr->buf + pc.loff + sub, len,
		tern__mr_desc_at(rp->mr, rail->idx, pc.loff + sub),
		rp->peer->fiaddr[rail->idx], tern__raddr(rd, pc.roff + sub),
		tern__desc_key(rd, pc.roff + sub, rail->idx % rp->peer->nrails),
		rp->imm | (uint64_t)stamp << 32, slot->fictx, flags);
	if (ret != 0) {
		tern__slot_free(rail, slot);
		return post_result(rail, req, ret);
	}
	tern__sync_note(rail, slot->fictx, flags);
	*len_p = len;
	return 0;
}

/* Post the next piece of a batched write or read
 * (tern__rp(req)->next_piece), or its next part where the piece crosses a
 * chunk of either region (mr.c): TERN__PART_MORE when a part went and
 * the piece goes on (u.batch.sub: how much of it went). */
int tern__rail_post_piece(struct tern_rail *rail, struct tern_req *req,
			  int more)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t sub = rp->u.batch.sub, len = 0;
	uint32_t stamp = 0;
	ssize_t ret;

	/* Each piece with an immediate takes its number (pieces carrying
	 * one are never cut: pieces_common()). */
	if (rp->u.batch.with_imm)
		stamp = tern__stamp_take(rail->ctx, rp->peer);
	ret = piece_post_at(rail, req, rp->next_piece, sub, more, stamp, &len);
	if (ret != 0) {
		/* Failed for good: the batch goes on with the next piece,
		 * from its start. */
		if (ret != -EAGAIN)
			rp->u.batch.sub = 0;
		return (int)ret;
	}
	if (sub + len < tern__piece(rp, rp->next_piece).len) {
		rp->u.batch.sub = sub + len;
		return TERN__PART_MORE;
	}
	rp->u.batch.sub = 0;
	return 0;
}

/* Post the part at @off of a striped or cut write or read on @rail, with
 * @flags: its length in *@len_p. */
static ssize_t chunk_post_at(struct tern_rail *rail, struct tern_req *req,
			     uint64_t off, uint64_t flags, uint32_t stamp,
			     uint64_t *len_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	const struct tern_mr_desc *rd = &rp->u.stripe.rd->d;
	uint64_t roff = rp->u.stripe.roff + off, len;
	struct tern__slot *slot;
	ssize_t ret;

	len = tern__cut_len(req->len, off, rp->u.stripe.chunk,
			    (uint64_t)((char *)rp->buf - (char *)rp->mr->buf),
			    rp->mr->nchunks > 1 ? rp->mr->chunk_shift : 0,
			    rp->u.stripe.roff,
			    TERN_MR_DESC_CHUNK_SHIFT(rd->flags));
	slot = slot_get(rail, req);
	if (slot == NULL)
		return -EAGAIN;
	slot->part = off;
	slot->stamp = stamp;
	ret = tern__post_rma(
		rail, req, (char *)rp->buf + off, len, tern__raddr(rd, roff),
		tern__desc_key(rd, roff, rail->idx % rp->peer->nrails),
		rp->imm | (uint64_t)stamp << 32, slot->fictx, flags);
	if (ret != 0) {
		tern__slot_free(rail, slot);
		return post_result(rail, req, ret);
	}
	*len_p = len;
	return 0;
}

/* Post the next part of a striped or cut write or read (progress.c,
 * rma_any()). A write with immediate cut in parts: every part but the
 * last asks for delivery complete, and the last, with the immediate,
 * waits (-EAGAIN) until every other has completed, landed; after a
 * failed one it is not posted (the batch ends with that error, and the
 * target is told: ctrl.c). */
int tern__rail_post_chunk(struct tern_rail *rail, struct tern_req *req)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t flags = 0, len = 0;
	uint32_t stamp = 0;
	ssize_t ret;

	if (rp->sop == TERN__OP_WRITE_IMM) {
		/* After a failed part no other goes: the immediate never
		 * will. */
		if (rp->err != 0)
			return rp->err;
		if (rp->next_piece + 1 < rp->npieces) {
			flags |= TERN__PF_DELIVER;
		} else {
			if (rp->inflight != 0)
				return -EAGAIN;
			flags |= TERN__PF_IMM;
			stamp = tern__stamp_take(rail->ctx, rp->peer);
		}
	}
	ret = chunk_post_at(rail, req, rp->u.stripe.off, flags, stamp, &len);
	if (ret != 0)
		return (int)ret;
	rp->u.stripe.off += len;
	return 0;
}

int tern__rail_repost(struct tern_rail *rail, struct tern_req *req,
		      uint64_t off, uint32_t piece, uint32_t stamp)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t flags = 0, len;

	/* A part with an immediate goes again with its number, marked a
	 * repeat: the target counts whichever arrives first (dedup.h). */
	if (stamp != 0)
		stamp |= TERN__STAMP_REPEAT;
	if (rp->sop == 0)
		return (int)piece_post_at(rail, req, piece, off, 0, stamp,
					  &len);
	/* A cut write with immediate's part: landed before the last goes;
	 * the last, with the immediate, goes again only stamped. */
	if (rp->sop == TERN__OP_WRITE_IMM)
		flags = stamp != 0 ? TERN__PF_IMM : TERN__PF_DELIVER;
	return (int)chunk_post_at(rail, req, off, flags, stamp, &len);
}
