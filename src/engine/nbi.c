/* SPDX-License-Identifier: MIT */
/*
 * Implicit operations (tern_write_nbi() and its kin) and tern_quiet().
 *
 * An implicit operation has no request of the caller's: tern takes one of
 * its own from a pool (no malloc per operation once the pool has grown),
 * posts it as the explicit call would, and counts it in two scopes, its
 * peer's and its ctx's. A scope is a list of epochs: the open one (its
 * tail) takes new operations; tern_quiet() closes it with the caller's
 * request, which completes once every operation of that epoch, and of
 * every epoch before it, has completed, with the first error among them.
 * Epochs complete in order: a quiet never reports before an earlier one.
 *
 * Same host: a write or read to a region the peer shares with us as
 * mapped host memory is copied in the call (tern__local_now()), and
 * counts as completed at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "local.h"

/* Pool slabs: operations are never freed one by one, only with the ctx. */
#define NBI_SLAB 64

struct tern__nbi_epoch {
	struct tern__nbi_epoch *next;
	struct tern_req *quiet; /* the quiet that closed it, or NULL */
	int closed;		/* closed: by a quiet (cancelled since?) */
	int err;		/* the first error, or 0 */
	int prov_errno;
	uint64_t outstanding; /* its operations still in flight */
	uint64_t nops, nfail;
	uint64_t first_seq; /* the first failed operation's number */
	char errmsg[TERN_REQ_ERRMSG_LEN];
};

struct tern__nbi_op {
	struct tern_req req; /* first: the callback casts back */
	struct tern__nbi_op *next_free;
	struct tern_ctx *ctx;
	struct tern_peer *peer; /* held (peer->inflight) until counted */
	struct tern__nbi_epoch *pe, *ce; /* its peer's and its ctx's */
	uint64_t seq;			 /* its number among its peer's */
	uint8_t op;
};

struct tern__nbi_slab {
	struct tern__nbi_slab *next;
	struct tern__nbi_op ops[NBI_SLAB];
};

static const char *op_name(uint8_t op)
{
	switch (op) {
	case TERN__OP_WRITE:
		return "write";
	case TERN__OP_WRITE_IMM:
		return "write_imm";
	case TERN__OP_READ:
		return "read";
	default:
		return "atomic_add";
	}
}

static struct tern__nbi_epoch *epoch_new(struct tern_ctx *ctx)
{
	struct tern__nbi_epoch *e = ctx->nbi_epoch_free;

	if (e != NULL)
		ctx->nbi_epoch_free = e->next;
	else if ((e = malloc(sizeof(*e))) == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	return e;
}

static void epoch_put(struct tern_ctx *ctx, struct tern__nbi_epoch *e)
{
	e->next = ctx->nbi_epoch_free;
	ctx->nbi_epoch_free = e;
}

/* The open epoch of @s, made when there is none. */
static struct tern__nbi_epoch *epoch_open(struct tern_ctx *ctx,
					  struct tern__nbi_scope *s)
{
	struct tern__nbi_epoch *e = s->tail;

	if (tern_likely(e != NULL && !e->closed))
		return e;
	if ((e = epoch_new(ctx)) == NULL)
		return NULL;
	if (s->tail != NULL)
		s->tail->next = e;
	else
		s->head = e;
	s->tail = e;
	return e;
}

/* Fold what @from counted into @into, the epoch after it: a cancelled
 * quiet's operations are the next quiet's to report, and its first error
 * came first. */
static void epoch_fold(struct tern__nbi_epoch *into,
		       const struct tern__nbi_epoch *from)
{
	into->nops += from->nops;
	into->nfail += from->nfail;
	if (from->err == 0)
		return;
	into->err = from->err;
	into->prov_errno = from->prov_errno;
	into->first_seq = from->first_seq;
	memcpy(into->errmsg, from->errmsg, sizeof(into->errmsg));
}

/* Complete the quiets whose epochs, and every one before, are done. */
static void scope_advance(struct tern_ctx *ctx, struct tern__nbi_scope *s)
{
	struct tern__nbi_epoch *e;

	while ((e = s->head) != NULL && e->closed && e->outstanding == 0) {
		struct tern_req *q = e->quiet;

		s->head = e->next;
		if (s->head == NULL)
			s->tail = NULL;
		if (q == NULL) {
			/* Its quiet was cancelled (and it was not the last:
			 * tern__nbi_cancel() reopens that one). */
			if (s->head != NULL)
				epoch_fold(s->head, e);
			epoch_put(ctx, e);
			continue;
		}
		q->len = (size_t)e->nops;
		q->value = e->nfail;
		q->imm = e->first_seq;
		q->prov_errno = e->prov_errno;
		memcpy(q->errmsg, e->errmsg, sizeof(q->errmsg));
		epoch_put(ctx, e);
		tern__req_complete(ctx, q, e->err);
	}
}

static void epoch_error(struct tern__nbi_epoch *e,
			const struct tern__nbi_op *op)
{
	const struct tern_req *req = &op->req;

	e->nfail++;
	if (e->err != 0)
		return;
	e->err = req->status;
	e->prov_errno = req->prov_errno;
	e->first_seq = op->seq;
	snprintf(e->errmsg, sizeof(e->errmsg), "%s #%" PRIu64 " to %p: %s",
		 op_name(op->op), op->seq, (void *)op->peer,
		 req->errmsg[0] != '\0' ? req->errmsg
					: tern_strerror(req->status));
}

static void op_put(struct tern_ctx *ctx, struct tern__nbi_op *op)
{
	op->next_free = ctx->nbi_free;
	ctx->nbi_free = op;
	ctx->nbi_inflight--;
}

/* An implicit operation finished: count it, complete what it ends. */
static void nbi_done(struct tern_req *req)
{
	struct tern__nbi_op *op = (struct tern__nbi_op *)req;
	struct tern_ctx *ctx = op->ctx;
	struct tern_peer *peer = op->peer;

	if (tern_unlikely(req->status != 0)) {
		epoch_error(op->pe, op);
		epoch_error(op->ce, op);
	}
	op->pe->outstanding--;
	op->ce->outstanding--;
	op_put(ctx, op);
	if (tern_unlikely(op->pe->closed && op->pe == peer->nbi.head))
		scope_advance(ctx, &peer->nbi);
	if (tern_unlikely(op->ce->closed && op->ce == ctx->nbi.head))
		scope_advance(ctx, &ctx->nbi);
	peer->inflight--;
	if (tern_unlikely(peer->removed))
		tern__peer_release_later(peer);
}

/* A pooled operation for @peer, or NULL (-ENOBUFS or -ENOMEM in *err). */
static struct tern__nbi_op *op_get(struct tern_ctx *ctx, int *err)
{
	struct tern__nbi_op *op = ctx->nbi_free;

	if (tern_unlikely(ctx->nbi_inflight >= ctx->nbi_max)) {
		*err = -ENOBUFS;
		return NULL;
	}
	if (tern_unlikely(op == NULL)) {
		struct tern__nbi_slab *sl = malloc(sizeof(*sl));

		if (sl == NULL) {
			*err = -ENOMEM;
			return NULL;
		}
		sl->next = ctx->nbi_slabs;
		ctx->nbi_slabs = sl;
		ctx->nbi_nslabs++;
		for (int i = NBI_SLAB - 1; i > 0; i--) {
			sl->ops[i].next_free = ctx->nbi_free;
			ctx->nbi_free = &sl->ops[i];
		}
		op = &sl->ops[0];
	} else {
		ctx->nbi_free = op->next_free;
	}
	ctx->nbi_inflight++;
	return op;
}

/* The open epochs an operation to @peer counts in, made when there are
 * none: 0, or -ENOMEM (then nothing may be taken). */
static int op_count(struct tern_ctx *ctx, struct tern_peer *peer,
		    struct tern__nbi_epoch **pe, struct tern__nbi_epoch **ce)
{
	*pe = epoch_open(ctx, &peer->nbi);
	*ce = *pe != NULL ? epoch_open(ctx, &ctx->nbi) : NULL;
	return *ce != NULL ? 0 : -ENOMEM;
}

/* Count an operation tern took in both epochs; @pending: still in flight
 * (nbi_done() ends it), else done in its post. */
static void op_counted(struct tern__nbi_epoch *pe, struct tern__nbi_epoch *ce,
		       int pending)
{
	pe->nops++;
	ce->nops++;
	pe->outstanding += (uint64_t)pending;
	ce->outstanding += (uint64_t)pending;
}

/* Post @op's request as the explicit call would. */
static int op_post(struct tern__nbi_op *op, struct tern_mr *mr, void *buf,
		   size_t len, const struct tern_mr_desc *rdesc, uint64_t roff,
		   uint32_t imm, uint64_t add)
{
	struct tern_req *req = &op->req;

	int ret;

	switch (op->op) {
	case TERN__OP_WRITE:
		ret = tern_write(op->peer, mr, buf, len, rdesc, roff, req);
		break;
	case TERN__OP_WRITE_IMM:
		ret = tern_write_imm(op->peer, mr, buf, len, rdesc, roff, imm,
				     req);
		break;
	case TERN__OP_READ:
		return tern_read(op->peer, mr, buf, len, rdesc, roff, req);
	default:
		return tern_atomic_fetch_add(op->peer, rdesc, roff, add, req);
	}
	/* A quiet promises the bytes have landed, not only left: delivery
	 * complete, as staging's chunks before an immediate (the provider
	 * then never takes it as an inject). Queued, not yet posted. */
	if (ret == 0)
		tern__rp(req)->xflags |= TERN__XF_DELIVER;
	return ret;
}

static int nbi_post(struct tern_peer *peer, uint8_t kind, struct tern_mr *mr,
		    void *buf, size_t len, const struct tern_mr_desc *rdesc,
		    uint64_t roff, uint32_t imm, uint64_t add)
{
	struct tern__nbi_epoch *pe, *ce;
	struct tern__nbi_op *op;
	struct tern_ctx *ctx;
	int ret = 0;

	if (tern_unlikely(peer == NULL))
		return -EINVAL;
	/* A staged region's chunks complete when they leave, not when they
	 * land: a quiet could not promise their bytes are there. */
	if (tern_unlikely(mr != NULL && mr->smr != NULL))
		return -TERN_ENOTSUP;
	ctx = peer->ctx;
	if (tern_unlikely(op_count(ctx, peer, &pe, &ce) != 0))
		return -ENOMEM;
	/* Same host, mapped host memory: the copy is the operation. */
	if (peer->local != NULL && kind != TERN__OP_FADD) {
		ret = tern__local_now(ctx, peer, mr, buf, len, rdesc, roff,
				      kind, imm);
		if (ret <= 0) {
			if (ret == 0) {
				peer->nbi.seq++;
				op_counted(pe, ce, 0);
			}
			return ret;
		}
	}
	op = op_get(ctx, &ret);
	if (tern_unlikely(op == NULL))
		return ret;
	op->ctx = ctx;
	op->peer = peer;
	op->op = kind;
	tern_req_init(&op->req, nbi_done, NULL);
	ret = op_post(op, mr, buf, len, rdesc, roff, imm, add);
	if (tern_unlikely(ret != 0)) {
		op_put(ctx, op); /* unused: its post failed */
		return ret;
	}
	op->seq = ++peer->nbi.seq;
	op->pe = pe;
	op->ce = ce;
	op_counted(pe, ce, 1);
	peer->inflight++; /* nbi_done() lets go of it */
	return 0;
}

int tern_write_nbi(struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		   size_t len, const struct tern_mr_desc *rdesc, uint64_t roff)
{
	return nbi_post(peer, TERN__OP_WRITE, mr, (void *)(uintptr_t)buf, len,
			rdesc, roff, 0, 0);
}

int tern_write_imm_nbi(struct tern_peer *peer, struct tern_mr *mr,
		       const void *buf, size_t len,
		       const struct tern_mr_desc *rdesc, uint64_t roff,
		       uint32_t imm)
{
	return nbi_post(peer, TERN__OP_WRITE_IMM, mr, (void *)(uintptr_t)buf,
			len, rdesc, roff, imm, 0);
}

int tern_read_nbi(struct tern_peer *peer, struct tern_mr *mr, void *buf,
		  size_t len, const struct tern_mr_desc *rdesc, uint64_t roff)
{
	return nbi_post(peer, TERN__OP_READ, mr, buf, len, rdesc, roff, 0, 0);
}

int tern_atomic_add_nbi(struct tern_peer *peer,
			const struct tern_mr_desc *rdesc, uint64_t roff,
			uint64_t add)
{
	return nbi_post(peer, TERN__OP_FADD, NULL, NULL, 0, rdesc, roff, 0,
			add);
}

int tern_quiet(struct tern_ctx *ctx, struct tern_peer *peer,
	       struct tern_req *req)
{
	struct tern__nbi_scope *s;
	struct tern__nbi_epoch *e;

	if (ctx == NULL || req == NULL || (peer != NULL && peer->ctx != ctx))
		return -EINVAL;
	if (ctx->closing || (peer != NULL && (peer->removed || peer->removing)))
		return -ECANCELED;
	s = peer != NULL ? &peer->nbi : &ctx->nbi;
	e = epoch_open(ctx, s);
	if (e == NULL)
		return -ENOMEM;
	tern__req_fill(ctx, req, TERN__OP_QUIET, peer, NULL, NULL, 0);
	tern__rp(req)->state = TERN__ST_QUIET;
	if (peer != NULL)
		peer->inflight++; /* finish_req() lets go of it */
	e->quiet = req;
	e->closed = 1;
	/* Done already: its callback runs from the next progress pass. */
	scope_advance(ctx, s);
	return 0;
}

void tern__nbi_cancel(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	struct tern_peer *peer = tern__rp(req)->peer;
	struct tern__nbi_scope *s = peer != NULL ? &peer->nbi : &ctx->nbi;

	for (struct tern__nbi_epoch *e = s->head; e != NULL; e = e->next) {
		if (e->quiet != req)
			continue;
		e->quiet = NULL;
		/* The open one again, if nothing came after it. */
		if (e == s->tail)
			e->closed = 0;
		break;
	}
	tern__req_complete(ctx, req, status);
	scope_advance(ctx, s);
}

void tern__nbi_scope_fini(struct tern_ctx *ctx, struct tern__nbi_scope *s)
{
	struct tern__nbi_epoch *e;

	while ((e = s->head) != NULL) {
		s->head = e->next;
		epoch_put(ctx, e);
	}
	s->tail = NULL;
}

void tern__nbi_fini(struct tern_ctx *ctx)
{
	struct tern__nbi_epoch *e;
	struct tern__nbi_slab *sl;

	tern__nbi_scope_fini(ctx, &ctx->nbi);
	while ((e = ctx->nbi_epoch_free) != NULL) {
		ctx->nbi_epoch_free = e->next;
		free(e);
	}
	while ((sl = ctx->nbi_slabs) != NULL) {
		ctx->nbi_slabs = sl->next;
		free(sl);
	}
	ctx->nbi_free = NULL;
}
