/* SPDX-License-Identifier: MIT */
/*
 * The posting hot path, inline in the loop's posting pass: a write or read
 * goes to the provider (src/prov/prov_inline.h) without a call into
 * ops.c. Measured in one process (bench/inproc, shm, 4 KiB), handing each
 * write to a function in ops.c cost 2-3% against libfabric's writemsg called in
 * place: on shm a write is a system call, and the user code around it
 * runs cold.
 */
#ifndef TERN_ENGINE_POST_H
#define TERN_ENGINE_POST_H

#include "engine.h"

/* A post the provider refused: -EAGAIN, or the error, logged. */
int tern__post_failed(struct tern_rail *rail, struct tern_req *req,
		      ssize_t ret);

/* A write or read @context posted with @flags went out: on a rail whose
 * provider may complete it inside the post (engine.h: sync_ring), note
 * it. One test of a field elsewhere. */
static inline void tern__sync_note(struct tern_rail *rail, void *context,
				   uint64_t flags)
{
	if (tern_unlikely(rail->sync_ring != NULL) &&
	    !(flags & (TERN__PF_IMM | TERN__PF_DELIVER)))
		tern__sync_push(rail, context);
}

static inline __attribute__((always_inline)) ssize_t tern__post_rma(
	struct tern_rail *rail, struct tern_req *req, void *buf, size_t len,
	uint64_t raddr, uint64_t rkey, void *context, uint64_t flags)
{
	struct tern__req_priv *rp = tern__rp(req);
	ssize_t ret;

	if (rp->xflags & TERN__XF_DELIVER)
		flags |= TERN__PF_DELIVER;
	ret = tern__prov_rma(
		&rail->prov,
		rp->op == TERN__OP_READ || rp->sop == TERN__OP_READ, buf, len,
		rp->mr->desc[rail->idx], rp->peer->fiaddr[rail->idx], raddr,
		rkey, rp->imm, context, flags);
	if (tern_likely(ret == 0))
		tern__sync_note(rail, context, flags);
	return ret;
}

/* tern__rail_post(), with writes and reads inline. */
static inline __attribute__((always_inline)) int tern__rail_post_inline(
	struct tern_rail *rail, struct tern_req *req, int more)
{
	uint8_t op = tern__rp(req)->op;
	uint64_t flags = more ? TERN__PF_MORE : 0;
	ssize_t ret;

	if (tern_unlikely(op != TERN__OP_WRITE && op != TERN__OP_READ &&
			  op != TERN__OP_WRITE_IMM))
		return tern__rail_post(rail, req, more);
	if (op == TERN__OP_WRITE_IMM)
		flags |= TERN__PF_IMM;
	ret = tern__post_rma(rail, req, tern__rp(req)->buf, req->len,
			     tern__rp(req)->u.rma.raddr,
			     tern__rp(req)->u.rma.rkey, tern__rp(req)->fictx,
			     flags);
	if (tern_likely(ret == 0))
		return 0;
	return tern__post_failed(rail, req, ret);
}

#endif /* TERN_ENGINE_POST_H */
