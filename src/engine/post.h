/* SPDX-License-Identifier: MIT */
/*
 * The posting hot path, inline in the loop's posting pass: a write or read
 * goes to the provider (src/prov/prov_inline.h) without a call into
 * post.c. Measured in one process (bench/inproc, shm, 4 KiB), handing each
 * write to a function in post.c cost 2-3% against libfabric's writemsg called
 * in place: on shm a write is a system call, and the user code around it runs
 * cold.
 */
#ifndef TERN_ENGINE_POST_H
#define TERN_ENGINE_POST_H

#include "engine.h"

/* A post the provider refused: -EAGAIN, or the error, logged. */
int tern__post_failed(struct tern_rail *rail, struct tern_req *req,
		      ssize_t ret);

/* A write or read @context posted with @flags went out: on a rail whose
 * provider may complete it inside the post (engine.h: sync_ring), note
 * it. One test of a field elsewhere. Writes with immediate and delivery
 * complete never take shm's fast path; an injected write the provider
 * took (TERN__PROV_TAKEN) is never noted: no entry of its can come, nor
 * a failure without context (its failures are the post's return). A
 * small plain write carried through shm's queue (prov_inline.h) is
 * noted: it completes inside its post, in order, with its context, so
 * the ring stays in post order. */
static inline void tern__sync_note(struct tern_rail *rail, void *context,
				   uint64_t flags)
{
	if (tern_unlikely(rail->sync_ring != NULL) &&
	    !(flags & (TERN__PF_IMM | TERN__PF_DELIVER)))
		tern__sync_push(rail, context);
}

static inline __attribute__((always_inline)) ssize_t tern__post_rma(
	struct tern_rail *rail, struct tern_req *req, void *buf, size_t len,
	uint64_t raddr, uint64_t rkey, uint64_t data, void *context,
	uint64_t flags)
{
	struct tern__req_priv *rp = tern__rp(req);
	ssize_t ret;

	if (rp->xflags & TERN__XF_DELIVER)
		flags |= TERN__PF_DELIVER;
	ret = tern__prov_rma(
		&rail->prov,
		rp->op == TERN__OP_READ || rp->sop == TERN__OP_READ, buf, len,
		tern__mr_desc_at(rp->mr, rail->idx,
				 (uint64_t)((char *)buf - (char *)rp->mr->buf)),
		rp->peer->fiaddr[rail->idx], raddr, rkey, data, context, flags);
	if (tern_likely(ret == 0))
		tern__sync_note(rail, context, flags);
	return ret;
}

/*
 * Small writes. A write or write with immediate of at most
 * ctx->inject_max bytes (the provider's inject size), from host memory,
 * not asking for delivery complete, goes to the provider as a copy it
 * takes (TERN__PF_INJECT). Where the provider then answers
 * TERN__PROV_TAKEN no completion will come: the request is finished onto
 * ctx->ready by the posting pass (progress.c), so its callback runs from
 * progress as every other, exactly once, and it holds no tx credit (the
 * provider's own queue limits it: -FI_EAGAIN, parked and re-posted as
 * always). Its completion means the provider has the bytes: the buffer
 * may be reused, as after any write's completion; a failure the provider
 * meets later is not reported (docs/api.md). Never injected: reads,
 * delivery complete (staging's chunks before an immediate, which must
 * have landed), device memory (fi_inject_write() takes no descriptor),
 * batches and striped chunks (rail slots: their completions count the
 * batch).
 */
static inline __attribute__((always_inline)) uint64_t tern__inject_flag(
	const struct tern_rail *rail, const struct tern_req *req)
{
	const struct tern__req_priv *rp = tern__rp(req);

	if (req->len <= rail->ctx->inject_max &&
	    !(rp->xflags & TERN__XF_DELIVER) && rp->mr->kind == TERN_MEM_HOST)
		return TERN__PF_INJECT;
	return 0;
}

/* tern__rail_post(), with writes and reads inline. 0: posted (one
 * completion will come), TERN__PROV_TAKEN: posted, none will come (a
 * small write, above), or <0. */
static inline __attribute__((always_inline)) int tern__rail_post_inline(
	struct tern_rail *rail, struct tern_req *req, int more)
{
	uint8_t op = tern__rp(req)->op;
	uint64_t flags = more ? TERN__PF_MORE : 0;
	uint64_t data = tern__rp(req)->imm;
	ssize_t ret;

	if (tern_unlikely(op != TERN__OP_WRITE && op != TERN__OP_READ &&
			  op != TERN__OP_WRITE_IMM))
		return tern__rail_post(rail, req, more);
	if (op == TERN__OP_WRITE_IMM) {
		flags |= TERN__PF_IMM;
		data |= (uint64_t)tern__rp(req)->u.rma.stamp << 32;
	}
	if (op != TERN__OP_READ)
		flags |= tern__inject_flag(rail, req);
	ret = tern__post_rma(rail, req, tern__rp(req)->buf, req->len,
			     tern__rp(req)->u.rma.raddr,
			     tern__rp(req)->u.rma.rkey, data,
			     tern__rp(req)->fictx, flags);
	if (tern_likely(ret == 0 || ret == TERN__PROV_TAKEN))
		return (int)ret;
	return tern__post_failed(rail, req, ret);
}

#endif /* TERN_ENGINE_POST_H */
