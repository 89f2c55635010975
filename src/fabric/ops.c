/* SPDX-License-Identifier: MIT */
/* Handing operations to the provider and reading its completions. */
#include <errno.h>
#include <stdio.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "fabric.h"

/* Every tern message travels with this tag; receives match it exactly. */
#define TERN_TAG_MSG 0x7465726eULL

_Static_assert(sizeof(((struct tern_req *)0)->_priv.fictx) >=
		       sizeof(struct fi_context2),
	       "request context too small for libfabric");

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

int tern__rail_post(struct tern_rail *rail, struct tern_req *req, int more)
{
	struct tern_peer *peer = req->_priv.peer;
	struct tern_mr *mr = req->_priv.mr;
	struct iovec iov = { .iov_base = req->_priv.buf, .iov_len = req->len };
	void *desc = mr != NULL ? mr->desc[rail->idx] : NULL;
	uint64_t flags = more ? FI_MORE : 0;
	ssize_t ret;

	switch (req->_priv.op) {
	case TERN__OP_SEND:
	case TERN__OP_RECV: {
		struct fi_msg_tagged msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = peer ? peer->fiaddr[rail->idx] : FI_ADDR_UNSPEC,
			.tag = TERN_TAG_MSG,
			.ignore = 0,
			.context = req->_priv.fictx,
		};

		if (req->_priv.op == TERN__OP_SEND)
			ret = fi_tsendmsg(rail->ep, &msg, flags);
		else
			ret = fi_trecvmsg(rail->ep, &msg, flags);
		break;
	}
	case TERN__OP_WRITE:
	case TERN__OP_WRITE_IMM: {
		struct fi_rma_iov rma = {
			.addr = req->_priv.raddr,
			.len = req->len,
			.key = req->_priv.rkey,
		};
		struct fi_msg_rma msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = peer->fiaddr[rail->idx],
			.rma_iov = &rma,
			.rma_iov_count = 1,
			.context = req->_priv.fictx,
			.data = req->_priv.imm,
		};

		if (req->_priv.op == TERN__OP_WRITE_IMM)
			flags |= FI_REMOTE_CQ_DATA;
		ret = fi_writemsg(rail->ep, &msg, flags);
		break;
	}
	default:
		return -EINVAL;
	}
	if (ret == 0)
		return 0;
	if (ret == -FI_EAGAIN)
		return -EAGAIN;
	snprintf(req->errmsg, sizeof(req->errmsg), "post: %s",
		 fi_strerror((int)-ret));
	req->prov_errno = (int)-ret;
	tern_warn("rail %u: posting op %u: %s", rail->idx, req->_priv.op,
		  fi_strerror((int)-ret));
	return tern__err_from_fi((int)-ret);
}

static int is_sink(struct tern_rail *rail, void *op_context)
{
	char *c = op_context, *lo = (char *)rail->sink_ctx;

	return c >= lo && c < lo + sizeof(rail->sink_ctx);
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
		tern_warn("rail %u: completion error without a request: %s "
			  "(provider errno %d)",
			  rail->idx, fi_strerror(err.err), err.prov_errno);
		if (err.op_context != NULL)
			fi_recv(rail->ep, NULL, 0, NULL, FI_ADDR_UNSPEC,
				err.op_context);
		return 0;
	}
	req = tern_container_of(err.op_context, struct tern_req, _priv.fictx);
	req->prov_errno = err.prov_errno;
	snprintf(req->errmsg, sizeof(req->errmsg), "%s%s%s",
		 fi_strerror(err.err), err.prov_errno ? ": " : "",
		 err.prov_errno ? fi_cq_strerror(rail->cq, err.prov_errno,
						 err.err_data, NULL, 0)
				: "");
	*cqe = (struct tern__cqe){
		.req = req,
		.status = tern__err_from_fi(err.err),
		.len = err.len,
	};
	return 1;
}

int tern__rail_poll(struct tern_rail *rail, struct tern__cqe *cqe, size_t n)
{
	struct fi_cq_data_entry ent[64];
	size_t got = 0;
	ssize_t ret;

	if (n > TERN_ARRAY_SIZE(ent))
		n = TERN_ARRAY_SIZE(ent);
	ret = fi_cq_read(rail->cq, ent, n);
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret == -FI_EAVAIL)
		return read_error(rail, cqe);
	if (ret < 0) {
		tern_warn("rail %u: fi_cq_read: %s", rail->idx,
			  fi_strerror((int)-ret));
		return -TERN_EPROV;
	}
	for (ssize_t i = 0; i < ret; i++) {
		struct fi_cq_data_entry *e = &ent[i];

		if ((e->flags & FI_REMOTE_WRITE) ||
		    (e->op_context != NULL && is_sink(rail, e->op_context))) {
			/* A write with immediate landed here. */
			if (e->op_context != NULL &&
			    is_sink(rail, e->op_context))
				fi_recv(rail->ep, NULL, 0, NULL, FI_ADDR_UNSPEC,
					e->op_context);
			if (!(e->flags & FI_REMOTE_CQ_DATA))
				continue;
			cqe[got++] = (struct tern__cqe){
				.imm = 1,
				.data = e->data,
			};
			continue;
		}
		cqe[got++] = (struct tern__cqe){
			.req = tern_container_of(e->op_context, struct tern_req,
						 _priv.fictx),
			.len = e->len,
			.data = (e->flags & FI_REMOTE_CQ_DATA) ? e->data : 0,
		};
	}
	return (int)got;
}
