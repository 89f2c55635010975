/* SPDX-License-Identifier: MIT */
/*
 * The posting calls of the public API (tern/req.h): tern_send, tern_recv,
 * tern_write, tern_write_imm, tern_read, their pieces, the atomics. Each
 * checks its arguments and the peer's descriptor, fills the request and
 * queues it on a rail (or hands it to the same-host path, local_copy.c,
 * or the staging pipeline, stage.c); progress.c posts what is queued and
 * reaps what completes. The common case (one rail, host memory) stays
 * short and inline: rma_common(); the rest is rma_any()'s.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "local.h"
#include "stripe.h"
#include "stage.h"

/* Checks shared by the posting calls; fills the common request fields. */
static inline __attribute__((always_inline)) int prep(
	struct tern_ctx *ctx, struct tern_req *req, uint8_t op,
	struct tern_peer *peer, struct tern_mr *mr, const void *buf, size_t len)
{
	if (tern_unlikely(ctx == NULL || req == NULL || mr == NULL ||
			  (buf == NULL && len)))
		return -EINVAL;
	if (tern_unlikely(ctx->closing ||
			  (peer != NULL &&
			   (peer->removed | peer->removing | peer->gone))))
		return ctx->closing || peer->removed || peer->removing
			       ? -ECANCELED
			       : -TERN_EPEERGONE;
	if (tern_unlikely(mr->ctx != ctx))
		return -EINVAL;
	if (tern_unlikely((const char *)buf < (const char *)mr->buf ||
			  len > mr->len ||
			  (size_t)((const char *)buf - (const char *)mr->buf) >
				  mr->len - len))
		return -TERN_EBOUNDS;
	if (tern_unlikely(!(mr->access & TERN_ACCESS_LOCAL)))
		return -TERN_EACCESS;
	/* A message is one registration's: inside one chunk (one RMA is,
	 * rma_any() cuts them). */
	if (tern_unlikely(mr->nchunks > 1) && len != 0 &&
	    tern__cut_room(mr->chunk_shift, (uint64_t)((const char *)buf -
						       (const char *)mr->buf)) <
		    len) {
		tern__warn("a message of %zu bytes crosses a chunk of a region "
			   "registered in chunks of %llu bytes",
			   len, 1ULL << mr->chunk_shift);
		return -TERN_EBOUNDS;
	}
	/* Messages up to the provider's largest; one RMA up to its largest
	 * (rma_any() splits longer ones); a receive of any size. */
	if (tern_unlikely(len > (op == TERN__OP_SEND || op == TERN__OP_SEND_IMM
					 ? ctx->max_msg_size
				 : op == TERN__OP_RECV ? UINT64_MAX
						       : ctx->max_rma_size)))
		return -EMSGSIZE;
	tern__req_fill(ctx, req, op, peer, mr, buf, len);
	/* Messages use rail 0 on both sides, so a receive always sits where
	 * the message lands; one-sided operations spread over the rails
	 * (round-robin without a division per operation). */
	tern__rp(req)->rail = 0;
	if (ctx->nrails > 1 && op != TERN__OP_SEND && op != TERN__OP_SEND_IMM &&
	    op != TERN__OP_RECV) {
		unsigned int r = ctx->next_rail;

		ctx->next_rail = r + 1 < ctx->nrails ? r + 1 : 0;
		/* Around a rail that failed (failover.c). */
		if (tern_unlikely(peer->down != 0))
			r = tern__path_pick(peer, r);
		tern__rp(req)->rail = (uint8_t)r;
	}
	return 0;
}

void tern__req_fill(struct tern_ctx *ctx, struct tern_req *req, uint8_t op,
		    struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		    size_t len)
{
	req->done = 0;
	req->status = 0;
	req->len = len;
	req->imm = 0;
	req->value = 0;
	req->flags = 0;
	req->prov_errno = 0;
	req->errmsg[0] = '\0';
	tern__rp(req)->ctx = ctx;
	tern__rp(req)->op = op;
	tern__rp(req)->sop = 0; /* rma_common() sets it for a striped one */
	tern__rp(req)->xflags = 0;
	tern__rp(req)->peer = peer;
	tern__rp(req)->mr = mr;
	tern__rp(req)->buf = (void *)(uintptr_t)buf;
}

/* prep() for a write or read that is cut in chunks (striped or staged):
 * no one message carries it all, so any length inside @mr goes. */
static int prep_long(struct tern_ctx *ctx, struct tern_req *req, uint8_t op,
		     struct tern_peer *peer, struct tern_mr *mr,
		     const void *buf, size_t len)
{
	int ret = prep(ctx, req, op, peer, mr, buf, 0);

	if (ret != 0)
		return ret;
	if (len > mr->len ||
	    (size_t)((const char *)buf - (const char *)mr->buf) > mr->len - len)
		return -TERN_EBOUNDS;
	req->len = len;
	return 0;
}

/* A prepared request goes to a rail's queue, or, on a staged region, to
 * the staging pipeline (src/engine/stage.c). */
static int submit(struct tern_ctx *ctx, struct tern_req *req)
{
	if (tern__rp(req)->mr->smr != NULL)
		tern__stage_submit(ctx, req);
	else
		tern__queue(ctx, req);
	return 0;
}

int tern__submit_msg(struct tern_ctx *ctx, struct tern_peer *peer, uint8_t op,
		     struct tern_mr *mr, void *buf, size_t len, uint32_t imm,
		     struct tern_req *req)
{
	int ret;

	if (op != TERN__OP_RECV && peer == NULL)
		return -EINVAL;
	ret = prep(ctx, req, op, peer, mr, buf, len);
	if (ret != 0)
		return ret;
	tern__rp(req)->imm = imm;
	submit(ctx, req);
	/* Untagged: a message may be waiting already. Its callback runs
	 * from progress, as always. */
	if (op == TERN__OP_RECV &&
	    tern_unlikely(ctx->bounce != NULL && ctx->bounce->head != NULL))
		tern__bounce_match(ctx);
	return 0;
}

int tern_send(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
	      size_t len, struct tern_req *req)
{
	if (peer == NULL)
		return -EINVAL;
	return tern__submit_msg(peer->ctx, peer, TERN__OP_SEND, mr,
				(void *)(uintptr_t)buf, len, 0, req);
}

int tern_recv(struct tern_ctx *ctx, struct tern_mr *mr, void *buf, size_t len,
	      struct tern_req *req)
{
	return tern__submit_msg(ctx, NULL, TERN__OP_RECV, mr, buf, len, 0, req);
}

/* Check a remote range against a descriptor the peer sent us. */
static int remote_check(const struct tern_peer *peer,
			const struct tern_mr_desc *rd, uint64_t roff,
			uint64_t len, uint32_t right)
{
	if (tern_unlikely(rd->nkeys < peer->nrails ||
			  rd->nkeys > TERN_MAX_RAILS))
		return -TERN_EDESC;
	/* Chunked: its keys are read where they are, so its shape first. */
	if (tern_unlikely((rd->flags & ~TERN_MR_DESC_FLAGS) != 0) &&
	    ((rd->flags & ~TERN_MR_DESC_FLAGS_ALL) != 0 ||
	     tern__desc_shape(rd) == 0))
		return -TERN_EDESC;
	if (tern_unlikely(!(rd->flags & right)))
		return -TERN_EACCESS;
	if (tern_unlikely(roff > rd->len || len > rd->len - roff))
		return -TERN_EBOUNDS;
	return 0;
}

/* A write or read to a same-host peer (local_*.c): 1 when it is not one the
 * local path takes (the caller goes on to the fabric). */
static __attribute__((noinline)) int local_rma(
	struct tern_peer *peer, struct tern_mr *mr, const void *buf, size_t len,
	const struct tern_mr_desc *rdesc, uint64_t roff, uint8_t op,
	uint32_t imm, struct tern_req *req)
{
	int ret = remote_check(peer, rdesc, roff, len,
			       op == TERN__OP_READ ? TERN_MR_DESC_REMOTE_READ
						   : TERN_MR_DESC_REMOTE_WRITE);

	if (ret != 0)
		return ret;
	/* No message carries it: any length inside @mr goes. */
	ret = prep_long(peer->ctx, req, op, peer, mr, buf, len);
	if (ret != 0)
		return ret;
	tern__rp(req)->imm = imm;
	return tern__local_rma(peer->ctx, req, rdesc, roff);
}

/* prep_long() for an operation that keeps a copy of @rdesc until it
 * completes (staged, striped or cut): the copy in *rd_p. */
static int prep_desc(struct tern_req *req, uint8_t op, struct tern_peer *peer,
		     struct tern_mr *mr, const void *buf, size_t len,
		     const struct tern_mr_desc *rdesc, uint32_t imm,
		     struct tern__desc **rd_p)
{
	struct tern_ctx *ctx = peer->ctx;
	struct tern__desc *rd = tern__desc_get(ctx, rdesc);
	int ret;

	if (rd == NULL)
		return -ENOMEM;
	ret = prep_long(ctx, req, op, peer, mr, buf, len);
	if (ret != 0) {
		tern__desc_put(ctx, rd);
		return ret;
	}
	tern__rp(req)->imm = imm;
	tern__rp(req)->xflags |= TERN__XF_DESC;
	*rd_p = rd;
	return 0;
}

/* A write or read, any case: staged, striped, over several rails. */
static __attribute__((noinline)) int rma_any(struct tern_peer *peer,
					     struct tern_mr *mr,
					     const void *buf, size_t len,
					     const struct tern_mr_desc *rdesc,
					     uint64_t roff, uint8_t op,
					     uint32_t imm, struct tern_req *req)
{
	unsigned int rrail, lshift, rshift;
	struct tern__desc *rd;
	struct tern_ctx *ctx;
	uint64_t chunk;
	int ret;

	if (peer == NULL || rdesc == NULL)
		return -EINVAL;
	ctx = peer->ctx;
	ret = remote_check(peer, rdesc, roff, len,
			   op == TERN__OP_READ ? TERN_MR_DESC_REMOTE_READ
					       : TERN_MR_DESC_REMOTE_WRITE);
	if (ret != 0)
		return ret;
	if (tern_unlikely(mr != NULL && mr->smr != NULL)) {
		ret = prep_desc(req, op, peer, mr, buf, len, rdesc, imm, &rd);
		if (ret != 0)
			return ret;
		tern__rp(req)->u.staged.roff = roff;
		tern__rp(req)->u.staged.rd = rd;
		tern__stage_submit(ctx, req);
		return 0;
	}
	/* Striped over the rails, or longer than one RMA may be (efa-direct:
	 * max_rma_size, about 1 GiB), or crossing a chunk of either region
	 * (mr.c): parts posted like a batch's pieces, each at most a chunk
	 * and inside one registration at each end. A write with immediate
	 * is cut only where it must be, and then its last part, carrying
	 * the immediate, goes once every other has landed (post_chunk(),
	 * post.c): the target counts it once, after its bytes. */
	chunk = ctx->nrails > 1 && ctx->stripe_chunk != 0 &&
				len > ctx->stripe_chunk &&
				op != TERN__OP_WRITE_IMM
			? ctx->stripe_chunk
			: 0;
	if (len > ctx->max_rma_size &&
	    (chunk == 0 || chunk > ctx->max_rma_size))
		chunk = ctx->max_rma_size;
	lshift = mr != NULL && mr->nchunks > 1 ? mr->chunk_shift : 0;
	rshift = TERN_MR_DESC_CHUNK_SHIFT(rdesc->flags);
	if (mr != NULL && (chunk != 0 || lshift != 0 || rshift != 0)) {
		uint64_t loff = (uint64_t)((const char *)buf -
					   (const char *)mr->buf);
		uint64_t parts;

		if (chunk == 0)
			chunk = UINT64_MAX;
		parts = tern__cut_count(len, chunk, loff, lshift, roff, rshift);
		if (parts > UINT32_MAX)
			return -EMSGSIZE;
		/* One part (or none: 0 bytes) on one rail: the plain path,
		 * with its keys. */
		if (parts <= 1 && (lshift != 0 || rshift != 0))
			goto plain;
		ret = prep_desc(req, op, peer, mr, buf, len, rdesc, imm, &rd);
		if (ret != 0)
			return ret;
		tern__rp(req)->op = TERN__OP_PIECES;
		tern__rp(req)->sop = op;
		tern__rp(req)->npieces = (uint32_t)parts;
		tern__rp(req)->next_piece = 0;
		tern__rp(req)->inflight = 0;
		tern__rp(req)->err = 0;
		tern__rp(req)->u.stripe.roff = roff;
		tern__rp(req)->u.stripe.chunk = chunk;
		tern__rp(req)->u.stripe.off = 0;
		tern__rp(req)->u.stripe.rd = rd;
		tern__queue(ctx, req);
		return 0;
	}
plain:
	ret = prep(ctx, req, op, peer, mr, buf, len);
	if (ret != 0)
		return ret;
	/* A rail down to it, due for a try: a probe beside (failover.c). */
	if (tern_unlikely(peer->down != 0))
		tern__path_try(peer, rdesc, roff);
	rrail = tern__rp(req)->rail;
	if (rrail >= peer->nrails)
		rrail %= peer->nrails;
	tern__rp(req)->u.rma.rkey = tern__desc_key(rdesc, roff, rrail);
	/* Should its rail fail, the next one takes it (failover.c). */
	if (ctx->failover) {
		rrail = tern__rp(req)->rail + 1U < ctx->nrails
				? tern__rp(req)->rail + 1U
				: 0;
		tern__rp(req)->u.rma.rail_next = (uint8_t)rrail;
		tern__rp(req)->u.rma.rkey_next = tern__desc_key(
			rdesc, roff, rrail % peer->nrails);
	}
	tern__rp(req)->u.rma.raddr = tern__raddr(rdesc, roff);
	tern__rp(req)->imm = imm;
	/* Stamped, it may go again should its rail fail (dedup.h). */
	tern__rp(req)->u.rma.stamp = op == TERN__OP_WRITE_IMM
					     ? tern__stamp_take(ctx, peer)
					     : 0;
	tern__queue_req(ctx, req);
	return 0;
}

/* A write or read: one rail, host memory (the common case, kept short);
 * the rest goes to rma_any(). */
static inline __attribute__((always_inline)) int rma_common(
	struct tern_peer *peer, struct tern_mr *mr, const void *buf, size_t len,
	const struct tern_mr_desc *rdesc, uint64_t roff, uint8_t op,
	uint32_t imm, struct tern_req *req)
{
	struct tern_ctx *ctx;
	int ret;

	if (tern_unlikely(peer == NULL || rdesc == NULL || mr == NULL))
		return -EINVAL;
	ctx = peer->ctx;
	/* A staged region's own GPU buffer too: the local path copies
	 * from and into it with the GPU, not through the shadow. */
	if (tern_unlikely(peer->local != NULL)) {
		ret = local_rma(peer, mr, buf, len, rdesc, roff, op, imm, req);
		if (ret != 1)
			return ret;
	}
	if (tern_unlikely(ctx->nrails != 1 || mr->smr != NULL ||
			  mr->nchunks > 1 ||
			  (rdesc->flags & TERN_MR_DESC_CHUNK_MASK) != 0))
		return rma_any(peer, mr, buf, len, rdesc, roff, op, imm, req);
	ret = remote_check(peer, rdesc, roff, len,
			   op == TERN__OP_READ ? TERN_MR_DESC_REMOTE_READ
					       : TERN_MR_DESC_REMOTE_WRITE);
	if (tern_unlikely(ret != 0))
		return ret;
	ret = prep(ctx, req, op, peer, mr, buf, len);
	if (tern_unlikely(ret != 0)) {
		/* Longer than one RMA: rma_any() cuts it up. */
		if (ret == -EMSGSIZE)
			return rma_any(peer, mr, buf, len, rdesc, roff, op, imm,
				       req);
		return ret;
	}
	tern__rp(req)->u.rma.rkey = rdesc->keys[0];
	tern__rp(req)->u.rma.raddr = tern__raddr(rdesc, roff);
	tern__rp(req)->u.rma.stamp = 0; /* one rail: never stamped */
	tern__rp(req)->imm = imm;
	tern__queue_req(ctx, req);
	return 0;
}

int tern_write(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
	       size_t len, const struct tern_mr_desc *rdesc, uint64_t roff,
	       struct tern_req *req)
{
	return rma_common(peer, mr, buf, len, rdesc, roff, TERN__OP_WRITE, 0,
			  req);
}

int tern_write_imm(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		   size_t len, const struct tern_mr_desc *rdesc, uint64_t roff,
		   uint32_t imm, struct tern_req *req)
{
	return rma_common(peer, mr, buf, len, rdesc, roff, TERN__OP_WRITE_IMM,
			  imm, req);
}

int tern_send_imm(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		  size_t len, uint32_t imm, struct tern_req *req)
{
	if (peer == NULL)
		return -EINVAL;
	return tern__submit_msg(peer->ctx, peer, TERN__OP_SEND_IMM, mr,
				(void *)(uintptr_t)buf, len, imm, req);
}

int tern_read(struct tern_peer *peer, struct tern_mr *mr, void *buf, size_t len,
	      const struct tern_mr_desc *rdesc, uint64_t roff,
	      struct tern_req *req)
{
	return rma_common(peer, mr, buf, len, rdesc, roff, TERN__OP_READ, 0,
			  req);
}

int tern__submit_rma(struct tern_peer *peer, struct tern_mr *mr, void *buf,
		     size_t len, const struct tern_mr_desc *rdesc,
		     uint64_t roff, uint8_t op, uint32_t imm, uint8_t xflags,
		     struct tern_req *req)
{
	int ret = rma_common(peer, mr, buf, len, rdesc, roff, op, imm, req);

	/* Queued, not posted: progress posts it with these. */
	if (ret == 0)
		tern__rp(req)->xflags |= xflags;
	return ret;
}

/* A batch's pieces: a table (tern_write_pieces()), or three arrays
 * with one region (tern_write_pieces_arrays()). */
struct pieces_in {
	const struct tern_piece *pieces;
	const uint64_t *loffs, *roffs, *lens;
	const struct tern_mr_desc *regions;
	unsigned int nregions;
};

/* tern_write_pieces() and tern_read_pieces() and their _arrays: check
 * every piece against both regions, then queue the batch as one request. */
static int pieces_common(struct tern_peer *peer, struct tern_mr *mr,
			 const struct pieces_in *in, size_t n, uint64_t flags,
			 uint32_t imm, int read, struct tern_req *req)
{
	uint32_t right = read ? TERN_MR_DESC_REMOTE_READ
			      : TERN_MR_DESC_REMOTE_WRITE;
	uint64_t total = 0;
	int ret;

	if (peer == NULL || mr == NULL || in->regions == NULL || n == 0 ||
	    n > UINT32_MAX || in->nregions == 0 || (flags & ~TERN_PIECES_IMM))
		return -EINVAL;
	if (in->pieces == NULL &&
	    (in->loffs == NULL || in->roffs == NULL || in->lens == NULL))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		struct tern_piece pc = in->pieces != NULL
					       ? in->pieces[i]
					       : (struct tern_piece){
							 .loff = in->loffs[i],
							 .roff = in->roffs[i],
							 .len = in->lens[i]
						 };

		if (pc.region >= in->nregions || pc.pad != 0)
			return -EINVAL;
		ret = remote_check(peer, &in->regions[pc.region], pc.roff,
				   pc.len, right);
		if (ret != 0)
			return ret;
		if (pc.len > peer->ctx->max_rma_size)
			return -EMSGSIZE;
		if (pc.loff > mr->len || pc.len > mr->len - pc.loff)
			return -TERN_EBOUNDS;
		/* Split where it crosses a chunk, a piece with an immediate
		 * would be counted once per part. */
		if ((flags & TERN_PIECES_IMM) &&
		    tern__cut_len(
			    pc.len, 0, UINT64_MAX, pc.loff,
			    mr->nchunks > 1 ? mr->chunk_shift : 0, pc.roff,
			    TERN_MR_DESC_CHUNK_SHIFT(
				    in->regions[pc.region].flags)) < pc.len) {
			tern__warn("write_pieces with immediates: piece %zu "
				   "(%" PRIu64 " bytes) crosses a chunk of a "
				   "region registered in chunks; use "
				   "tern_write_imm() for it",
				   i, pc.len);
			return -TERN_ENOTSUP;
		}
		total += pc.len;
	}
	/* The staging pipeline (device memory without direct RDMA) carries
	 * batched writes only. */
	if (read && mr->smr != NULL)
		return -TERN_ENOTSUP;
	ret = prep(peer->ctx, req, TERN__OP_PIECES, peer, mr, mr->buf, 0);
	if (ret != 0)
		return ret;
	req->len = total;
	if (in->pieces != NULL) {
		tern__rp(req)->u.batch.pieces = in->pieces;
		tern__rp(req)->u.batch.lens = NULL;
	} else {
		tern__rp(req)->u.batch.loffs = in->loffs;
		tern__rp(req)->u.batch.roffs = in->roffs;
		tern__rp(req)->u.batch.lens = in->lens;
	}
	tern__rp(req)->u.batch.regions = in->regions;
	tern__rp(req)->u.batch.nregions = in->nregions;
	tern__rp(req)->u.batch.with_imm = (flags & TERN_PIECES_IMM) != 0;
	tern__rp(req)->u.batch.read = read != 0;
	tern__rp(req)->u.batch.sub = 0;
	tern__rp(req)->npieces = (uint32_t)n;
	tern__rp(req)->next_piece = 0;
	tern__rp(req)->inflight = 0;
	tern__rp(req)->err = 0;
	tern__rp(req)->imm = imm;
	if (tern_unlikely(peer->local != NULL)) {
		ret = tern__local_pieces(peer->ctx, req);
		if (ret != 1)
			return ret;
	}
	/* A rail down to it, due for a try: a probe beside, where the first
	 * piece goes (failover.c). */
	if (tern_unlikely(peer->down != 0)) {
		struct tern_piece pc = tern__piece(tern__rp(req), 0);

		tern__path_try(peer, &in->regions[pc.region], pc.roff);
	}
	return submit(peer->ctx, req);
}

int tern_write_pieces(struct tern_peer *peer, struct tern_mr *mr,
		      const struct tern_piece *pieces, size_t n,
		      const struct tern_mr_desc *regions, unsigned int nregions,
		      uint64_t flags, uint32_t imm, struct tern_req *req)
{
	struct pieces_in in = { .pieces = pieces,
				.regions = regions,
				.nregions = nregions };

	if (pieces == NULL)
		return -EINVAL;
	return pieces_common(peer, mr, &in, n, flags, imm, 0, req);
}

int tern_read_pieces(struct tern_peer *peer, struct tern_mr *mr,
		     const struct tern_piece *pieces, size_t n,
		     const struct tern_mr_desc *regions, unsigned int nregions,
		     struct tern_req *req)
{
	struct pieces_in in = { .pieces = pieces,
				.regions = regions,
				.nregions = nregions };

	if (pieces == NULL)
		return -EINVAL;
	return pieces_common(peer, mr, &in, n, 0, 0, 1, req);
}

int tern_write_pieces_arrays(struct tern_peer *peer, struct tern_mr *mr,
			     const uint64_t *loffs, const uint64_t *roffs,
			     const uint64_t *lens, size_t n,
			     const struct tern_mr_desc *rdesc, uint64_t flags,
			     uint32_t imm, struct tern_req *req)
{
	struct pieces_in in = { .loffs = loffs,
				.roffs = roffs,
				.lens = lens,
				.regions = rdesc,
				.nregions = 1 };

	return pieces_common(peer, mr, &in, n, flags, imm, 0, req);
}

int tern_read_pieces_arrays(struct tern_peer *peer, struct tern_mr *mr,
			    const uint64_t *loffs, const uint64_t *roffs,
			    const uint64_t *lens, size_t n,
			    const struct tern_mr_desc *rdesc,
			    struct tern_req *req)
{
	struct pieces_in in = { .loffs = loffs,
				.roffs = roffs,
				.lens = lens,
				.regions = rdesc,
				.nregions = 1 };

	return pieces_common(peer, mr, &in, n, 0, 0, 1, req);
}

static int atomic_common(struct tern_peer *peer,
			 const struct tern_mr_desc *rdesc, uint64_t roff,
			 uint8_t op, uint64_t operand, uint64_t compare,
			 struct tern_req *req)
{
	struct tern_ctx *ctx;
	int ret;

	if (peer == NULL || rdesc == NULL || req == NULL)
		return -EINVAL;
	ctx = peer->ctx;
	/* Same host, shared memory: the CPU's own atomics, whatever the
	 * provider offers. */
	if (peer->local != NULL && roff % 8 == 0 &&
	    remote_check(peer, rdesc, roff, 8, TERN_MR_DESC_REMOTE_ATOMIC) ==
		    0 &&
	    prep(ctx, req, op, peer, ctx->scratch_mr, ctx->scratch, 8) == 0) {
		tern__rp(req)->u.atomic.operand = operand;
		tern__rp(req)->u.atomic.compare = compare;
		ret = tern__local_atomic(ctx, req, rdesc, roff);
		if (ret != 1)
			return ret;
	}
	if (op == TERN__OP_FADD ? !ctx->atomic_fadd : !ctx->atomic_cswap) {
		tern__warn("%s: provider %s fabric %s offers no 64-bit %s%s",
			   op == TERN__OP_FADD ? "fetch-add" : "compare-swap",
			   ctx->caps.prov_name, ctx->caps.fabric_name,
			   op == TERN__OP_FADD ? "fetch-and-add"
					       : "compare-and-swap",
			   strcmp(ctx->caps.fabric_name, "efa-direct") == 0
				   ? " (the efa fabric emulates them: "
				     "attr.fabric = \"efa\", --fabric efa)"
				   : "");
		return -TERN_ENOTSUP;
	}
	if (roff % 8 != 0)
		return -EINVAL;
	ret = remote_check(peer, rdesc, roff, 8, TERN_MR_DESC_REMOTE_ATOMIC);
	if (ret != 0)
		return ret;
	/* The operand and result travel in the rail's registered scratch. */
	ret = prep(ctx, req, op, peer, ctx->scratch_mr, ctx->scratch, 8);
	if (ret != 0)
		return ret;
	/* An aligned word never crosses a chunk (4 KiB at least). */
	tern__rp(req)->u.atomic.rkey = tern__desc_key(
		rdesc, roff, tern__rp(req)->rail % peer->nrails);
	tern__rp(req)->u.atomic.raddr = tern__raddr(rdesc, roff);
	tern__rp(req)->u.atomic.operand = operand;
	tern__rp(req)->u.atomic.compare = compare;
	tern__queue(ctx, req);
	return 0;
}

int tern_atomic_fetch_add(struct tern_peer *peer,
			  const struct tern_mr_desc *rdesc, uint64_t roff,
			  uint64_t add, struct tern_req *req)
{
	return atomic_common(peer, rdesc, roff, TERN__OP_FADD, add, 0, req);
}

int tern_atomic_cswap(struct tern_peer *peer, const struct tern_mr_desc *rdesc,
		      uint64_t roff, uint64_t compare, uint64_t swap,
		      struct tern_req *req)
{
	return atomic_common(peer, rdesc, roff, TERN__OP_CSWAP, swap, compare,
			     req);
}
