/* SPDX-License-Identifier: MIT */
/*
 * The posting hot path, inline in the loop's posting pass: a write or read
 * goes to the provider without a call into ops.c. Measured in one process
 * (bench/inproc, shm, 4 KiB), handing each write to a function in ops.c
 * cost 2-3% against fi_writemsg() written in place: on shm a write is a
 * system call, and the user code around it runs cold. Still fabric-layer
 * code: the loop reaches the provider only through tern__rail_*().
 */
#ifndef TERN_ENGINE_POST_H
#define TERN_ENGINE_POST_H

#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "engine.h"

/* A post the provider refused: -EAGAIN, or the error, logged. */
int tern__post_failed(struct tern_rail *rail, struct tern_req *req,
		      ssize_t ret);

static inline __attribute__((always_inline)) ssize_t tern__post_rma(
	struct tern_rail *rail, struct tern_req *req, void *buf, size_t len,
	uint64_t raddr, uint64_t rkey, void *context, uint64_t flags)
{
	struct tern_mr *mr = tern__rp(req)->mr;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	void *desc = mr->desc[rail->idx];
	struct fi_rma_iov rma = { .addr = raddr, .len = len, .key = rkey };
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = tern__rp(req)->peer->fiaddr[rail->idx],
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = context,
		.data = tern__rp(req)->imm,
	};

	if (tern__rp(req)->xflags & TERN__XF_DELIVER)
		flags |= FI_DELIVERY_COMPLETE;
	if (tern__rp(req)->op == TERN__OP_READ ||
	    tern__rp(req)->sop == TERN__OP_READ)
		return fi_readmsg(rail->ep, &msg, flags);
	return fi_writemsg(rail->ep, &msg, flags);
}

/* tern__rail_post(), with writes and reads inline. */
static inline __attribute__((always_inline)) int tern__rail_post_inline(
	struct tern_rail *rail, struct tern_req *req, int more)
{
	uint8_t op = tern__rp(req)->op;
	uint64_t flags = more ? FI_MORE : 0;
	ssize_t ret;

	if (tern_unlikely(op != TERN__OP_WRITE && op != TERN__OP_READ &&
			  op != TERN__OP_WRITE_IMM))
		return tern__rail_post(rail, req, more);
	if (op == TERN__OP_WRITE_IMM)
		flags |= FI_REMOTE_CQ_DATA;
	ret = tern__post_rma(rail, req, tern__rp(req)->buf, req->len,
			     tern__rp(req)->u.rma.raddr,
			     tern__rp(req)->u.rma.rkey, tern__rp(req)->fictx,
			     flags);
	if (tern_likely(ret == 0))
		return 0;
	return tern__post_failed(rail, req, ret);
}

#endif /* TERN_ENGINE_POST_H */
