/* SPDX-License-Identifier: MIT */
/* Handing operations to the provider and reading its completions. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "engine.h"
#include "post.h"
#include "stripe.h"

/* Every tern message travels with this tag; receives match it exactly. */
#define TERN_TAG_MSG 0x7465726eULL

/* The request context fits libfabric's: engine.h checks it. */

/* Map a provider error (positive FI_E* value) to a tern error code. */
int tern__err_from_fi(int fi_err)
{
	switch (fi_err) {
	case FI_ECANCELED:
		return -ECANCELED;
	case FI_ETRUNC:
		return -TERN_ETRUNC;
	case FI_EACCES:
	case FI_EPERM:
		return -TERN_EACCESS;
	case FI_ETIMEDOUT:
		return -ETIMEDOUT;
	case FI_ENOMEM:
		return -ENOMEM;
	default:
		return -TERN_EPROV;
	}
}

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
	if (ret == -FI_EAGAIN)
		return -EAGAIN;
	snprintf(req->errmsg, sizeof(req->errmsg), "post: %s",
		 fi_strerror((int)-ret));
	req->prov_errno = (int)-ret;
	tern_warn("rail %u: posting op %u: %s", rail->idx, tern__rp(req)->op,
		  fi_strerror((int)-ret));
	return tern__err_from_fi((int)-ret);
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

static uint64_t *slot_words(struct tern_rail *rail, struct tern__slot *slot)
{
	return rail->scratch + 3 * (size_t)(slot - rail->slots);
}

static ssize_t post_atomic(struct tern_rail *rail, struct tern_req *req,
			   struct tern__slot *slot, uint64_t flags)
{
	struct tern_ctx *ctx = rail->ctx;
	uint64_t *w = slot_words(rail, slot);
	void *desc = ctx->scratch_mr->desc[rail->idx];
	struct fi_ioc op = { .addr = &w[0], .count = 1 };
	struct fi_ioc cmp = { .addr = &w[1], .count = 1 };
	struct fi_ioc res = { .addr = &w[2], .count = 1 };
	struct fi_rma_ioc rioc = {
		.addr = tern__rp(req)->u.atomic.raddr,
		.count = 1,
		.key = tern__rp(req)->u.atomic.rkey,
	};
	struct fi_msg_atomic msg = {
		.msg_iov = &op,
		.desc = &desc,
		.iov_count = 1,
		.addr = tern__rp(req)->peer->fiaddr[rail->idx],
		.rma_iov = &rioc,
		.rma_iov_count = 1,
		.datatype = FI_UINT64,
		.op = tern__rp(req)->op == TERN__OP_FADD ? FI_SUM : FI_CSWAP,
		.context = slot->fictx,
	};

	w[0] = tern__rp(req)->u.atomic.operand;
	w[1] = tern__rp(req)->u.atomic.compare;
	w[2] = 0;
	if (tern__rp(req)->op == TERN__OP_FADD)
		return fi_fetch_atomicmsg(rail->ep, &msg, &res, &desc, 1,
					  flags);
	return fi_compare_atomicmsg(rail->ep, &msg, &cmp, &desc, 1, &res, &desc,
				    1, flags);
}

int tern__rail_post(struct tern_rail *rail, struct tern_req *req, int more)
{
	struct tern_peer *peer = tern__rp(req)->peer;
	uint64_t flags = more ? FI_MORE : 0;
	struct tern__slot *slot;
	ssize_t ret;

	switch (tern__rp(req)->op) {
	case TERN__OP_WRITE_IMM:
		flags |= FI_REMOTE_CQ_DATA;
		/* fall through */
	case TERN__OP_WRITE:
	case TERN__OP_READ:
		ret = tern__post_rma(rail, req, tern__rp(req)->buf, req->len,
				     tern__rp(req)->u.rma.raddr,
				     tern__rp(req)->u.rma.rkey,
				     tern__rp(req)->fictx, flags);
		break;
	case TERN__OP_SEND:
	case TERN__OP_SEND_IMM:
	case TERN__OP_RECV: {
		struct tern_mr *mr = tern__rp(req)->mr;
		struct iovec iov = { .iov_base = tern__rp(req)->buf,
				     .iov_len = req->len };
		void *desc = mr != NULL ? mr->desc[rail->idx] : NULL;
		struct fi_msg_tagged msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = peer ? peer->fiaddr[rail->idx] : FI_ADDR_UNSPEC,
			.tag = TERN_TAG_MSG,
			.ignore = 0,
			.context = tern__rp(req)->fictx,
			.data = tern__rp(req)->imm,
		};

		if (tern__rp(req)->op == TERN__OP_RECV) {
			ret = fi_trecvmsg(rail->ep, &msg, flags);
			break;
		}
		if (tern__rp(req)->op == TERN__OP_SEND_IMM)
			flags |= FI_REMOTE_CQ_DATA;
		ret = fi_tsendmsg(rail->ep, &msg, flags);
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

/* Post the next piece of a batched write (tern__rp(req)->next_piece). */
int tern__rail_post_piece(struct tern_rail *rail, struct tern_req *req,
			  int more)
{
	const struct tern_piece *pc =
		(const struct tern_piece *)tern__rp(req)->u.batch.pieces +
		tern__rp(req)->next_piece;
	const struct tern_mr_desc *rd =
		(const struct tern_mr_desc *)tern__rp(req)->u.batch.regions +
		pc->region;
	uint64_t raddr = tern__raddr(rd, pc->roff);
	uint64_t flags = more ? FI_MORE : 0;
	struct tern__slot *slot;
	ssize_t ret;

	if (tern__rp(req)->u.batch.with_imm)
		flags |= FI_REMOTE_CQ_DATA;
	slot = slot_get(rail, req);
	if (slot == NULL)
		return -EAGAIN;
	ret = tern__post_rma(
		rail, req, (char *)tern__rp(req)->mr->buf + pc->loff, pc->len,
		raddr, rd->keys[rail->idx % tern__rp(req)->peer->nrails],
		slot->fictx, flags);
	if (ret != 0)
		tern__slot_free(rail, slot);
	return post_result(rail, req, ret);
}

int tern__rail_post_chunk(struct tern_rail *rail, struct tern_req *req)
{
	uint64_t off, len;
	struct tern__slot *slot;
	ssize_t ret;

	tern__stripe_chunk(req->len, tern__rp(req)->u.stripe.chunk,
			   tern__rp(req)->next_piece, &off, &len);
	slot = slot_get(rail, req);
	if (slot == NULL)
		return -EAGAIN;
	ret = tern__post_rma(
		rail, req, (char *)tern__rp(req)->buf + off, len,
		tern__rp(req)->u.stripe.raddr + off,
		tern__rp(req)->u.stripe.rd->d.keys[rail->idx %
						   tern__rp(req)->peer->nrails],
		slot->fictx, 0);
	if (ret != 0)
		tern__slot_free(rail, slot);
	return post_result(rail, req, ret);
}

/* Which request (and slot) a completion's op_context belongs to. */
static inline void decode_ctx(struct tern_rail *rail, void *op_context,
			      struct tern__cqe *cqe)
{
	/* One unsigned compare: below the slots wraps to a huge offset. */
	if (tern_unlikely((uintptr_t)op_context - (uintptr_t)rail->slots <
			  rail->slots_span)) {
		cqe->slot = op_context;
		cqe->req = cqe->slot->owner;
		if (tern__rp(cqe->req)->op == TERN__OP_FADD ||
		    tern__rp(cqe->req)->op == TERN__OP_CSWAP)
			cqe->data = slot_words(rail, cqe->slot)[2];
		return;
	}
	cqe->req = tern__req_of_fictx(op_context);
}

/* Give a consumed FI_RX_CQ_DATA sink receive back to the provider. Losing
 * one for good would, after 64, stop writes with immediates from being
 * absorbed: say so loudly. */
static void repost_sink(struct tern_rail *rail, void *op_context)
{
	ssize_t ret = fi_recv(rail->ep, NULL, 0, NULL, FI_ADDR_UNSPEC,
			      op_context);

	if (ret != 0)
		tern_warn("rail %u: re-posting a receive for remote CQ data: "
			  "%s (one fewer left)",
			  rail->idx, fi_strerror((int)-ret));
}

static inline int is_sink(struct tern_rail *rail, void *op_context)
{
	/* NULL, or anything below, wraps to a huge offset. */
	return (uintptr_t)op_context - (uintptr_t)rail->sink_ctx <
	       sizeof(rail->sink_ctx);
}

static int read_error(struct tern_rail *rail, struct tern__cqe *cqe)
{
	struct fi_cq_err_entry err = { 0 };
	struct tern_req *req;
	ssize_t ret;

	ret = fi_cq_readerr(rail->cq, &err, 0);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret < 0) {
		tern_warn("rail %u: fi_cq_readerr: %s", rail->idx,
			  fi_strerror((int)-ret));
		return -TERN_EPROV;
	}
	if (err.op_context == NULL || is_sink(rail, err.op_context)) {
		/* Logged at 1, 2, 4, 8... so a burst cannot flood the log
		 * (shm 1.17 reports failed writes to a dead process so). */
		rail->orphan_errs++;
		if ((rail->orphan_errs & (rail->orphan_errs - 1)) == 0)
			tern_warn("rail %u: completion error without a "
				  "request: %s (provider errno %d; %" PRIu64
				  " so far)",
				  rail->idx, fi_strerror(err.err),
				  err.prov_errno, rail->orphan_errs);
		if (err.op_context != NULL)
			repost_sink(rail, err.op_context);
		return 0;
	}
	*cqe = (struct tern__cqe){
		.status = tern__err_from_fi(err.err),
		.len = err.len,
	};
	decode_ctx(rail, err.op_context, cqe);
	req = cqe->req;
	/* A batch keeps its first error's text. */
	if (req->errmsg[0] == '\0' || cqe->slot == NULL) {
		req->prov_errno = err.prov_errno;
		snprintf(req->errmsg, sizeof(req->errmsg), "rail %u: %s%s%s",
			 rail->idx, fi_strerror(err.err),
			 err.prov_errno ? ": " : "",
			 err.prov_errno
				 ? fi_cq_strerror(rail->cq, err.prov_errno,
						  err.err_data, NULL, 0)
				 : "");
	}
	return 1;
}

int tern__rail_reap(struct tern_rail *rail, const struct fi_cq_data_entry *ent,
		    ssize_t ret, struct tern__cqe *cqe)
{
	size_t got = 0;

	/* -FI_EAGAIN never comes here: tern__rail_poll() answers it. */
	if (ret == -FI_EAVAIL)
		return read_error(rail, cqe);
	if (ret < 0) {
		tern_warn("rail %u: fi_cq_read: %s", rail->idx,
			  fi_strerror((int)-ret));
		return -TERN_EPROV;
	}
	for (ssize_t i = 0; i < ret; i++) {
		const struct fi_cq_data_entry *e = &ent[i];

		if (tern_unlikely((e->flags & FI_REMOTE_WRITE) ||
				  is_sink(rail, e->op_context))) {
			/* A write with immediate landed here. */
			if (is_sink(rail, e->op_context))
				repost_sink(rail, e->op_context);
			if (!(e->flags & FI_REMOTE_CQ_DATA))
				continue;
			cqe[got++] = (struct tern__cqe){
				.imm = 1,
				.data = e->data,
			};
			continue;
		}
		cqe[got] = (struct tern__cqe){
			.len = e->len,
			.data = e->data,
			.imm_data = (e->flags & FI_REMOTE_CQ_DATA) != 0,
		};
		decode_ctx(rail, e->op_context, &cqe[got]);
		got++;
	}
	return (int)got;
}
