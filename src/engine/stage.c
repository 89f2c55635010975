/* SPDX-License-Identifier: MIT */
/* Staging CUDA memory through a pinned host shadow, in pipelined chunks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "stripe.h"
#include "../hmem/cuda.h"
#include "stage.h"

enum {
	CH_FREE = 0,
	CH_COPY_OUT, /* GPU -> shadow running; the post follows */
	CH_HELD,     /* copied; a write's immediate waits for the others */
	CH_NET,	     /* the inner operation is with tern */
	CH_COPY_IN,  /* shadow -> GPU running; then the chunk is done */
};

struct tern__stage_chunk {
	struct tern_req req; /* the inner operation, on the shadow */
	struct tern_req *parent;
	struct tern__stage *st;
	uint64_t off; /* in the region */
	uint64_t len;
	uint64_t roff; /* in the remote region (writes, reads) */
	uint32_t idx;
	int phase;
	int has_ev; /* a copy was queued and ev recorded after it */
	tern_cu_event ev;
};

struct tern__stage {
	struct tern_ctx *ctx;
	const struct tern__cu *cu; /* NULL: host regions only */
	int device;
	tern_cu_stream stream;
	uint64_t chunk;
	unsigned int nchunks; /* depth data chunks, then TERN_STAGE_RECVS */
	unsigned int depth;
	unsigned int nfree[2]; /* free data chunks, free receive chunks */
	unsigned int ncopy;    /* chunks with a copy running */
	unsigned long completed;
	struct tern__stage_chunk *chunks;
	struct tern__reqq ops; /* user requests, in the order posted */
};

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t lo,
			uint64_t hi)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (s == NULL || *s == '\0')
		return dflt;
	v = strtoull(s, &end, 0);
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	if (*end != '\0' || v < lo || v > hi) {
		tern__warn("%s=%s ignored (want %llu..%llu)", name, s,
			   (unsigned long long)lo, (unsigned long long)hi);
		return dflt;
	}
	return v;
}

int tern__stage_open(struct tern_ctx *ctx, const struct tern__cu *cu,
		     int device)
{
	struct tern__stage *st = ctx->stage;
	tern_cu_result r;

	if (st == NULL) {
		unsigned int depth = (unsigned int)env_u64(
			"TERN_STAGE_DEPTH", TERN_STAGE_DEPTH_DEFAULT, 1,
			TERN_STAGE_DEPTH_MAX);

		st = calloc(1, sizeof(*st));
		if (st == NULL)
			return -ENOMEM;
		/* Receives wait for messages as long as they like: they get
		 * chunks of their own, so they never starve other work. */
		st->chunks = calloc(depth + TERN_STAGE_RECVS,
				    sizeof(*st->chunks));
		if (st->chunks == NULL) {
			free(st);
			return -ENOMEM;
		}
		st->ctx = ctx;
		st->device = -1;
		st->depth = st->nfree[0] = depth;
		st->nfree[1] = TERN_STAGE_RECVS;
		st->nchunks = depth + TERN_STAGE_RECVS;
		st->chunk = env_u64("TERN_STAGE_CHUNK",
				    TERN_STAGE_CHUNK_DEFAULT, 4096, 1ULL << 30);
		for (unsigned int i = 0; i < st->nchunks; i++)
			st->chunks[i].st = st;
		ctx->stage = st;
	}
	if (cu == NULL || st->cu != NULL)
		return 0;
	/*
	 * The copy stream and one event per chunk, made once. A blocking
	 * stream: its copies start after the work queued before
	 * them on the default (legacy) stream, so a source written by a
	 * kernel or a cudaMemcpy there is read whole, and its copies into a
	 * buffer finish before later default-stream work touches it. Work on
	 * the user's own non-blocking streams is theirs to finish before
	 * posting (docs/gpu.md).
	 */
	r = cu->StreamCreate(&st->stream, TERN_CU_STREAM_DEFAULT);
	for (unsigned int i = 0; r == TERN_CU_SUCCESS && i < st->nchunks; i++)
		r = cu->EventCreate(&st->chunks[i].ev, TERN_CU_EVENT_NO_TIMING);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("CUDA device %d: creating the staging stream: %s",
			   device, tern__cu_errstr(cu, r));
		for (unsigned int i = 0; i < st->nchunks; i++) {
			if (st->chunks[i].ev != NULL)
				cu->EventDestroy(st->chunks[i].ev);
			st->chunks[i].ev = NULL;
		}
		if (st->stream != NULL)
			cu->StreamDestroy(st->stream);
		st->stream = NULL;
		return -TERN_EHMEM;
	}
	st->cu = cu;
	st->device = device;
	tern__debug("staging on CUDA device %d: %u chunk(s) of %llu bytes in "
		    "flight",
		    device, st->nchunks, (unsigned long long)st->chunk);
	return 0;
}

int tern__stage_device(const struct tern_ctx *ctx)
{
	return ctx->stage != NULL && ctx->stage->cu != NULL ? ctx->stage->device
							    : -1;
}

/* --- one request ------------------------------------------------------ */

static int is_source(const struct tern_req *req)
{
	switch (tern__rp(req)->op) {
	case TERN__OP_SEND:
	case TERN__OP_SEND_IMM:
	case TERN__OP_WRITE:
	case TERN__OP_WRITE_IMM:
	case TERN__OP_PIECES:
		return 1;
	case TERN__OP_SYNC:
		return tern__rp(req)->u.sync.dir == TERN_MR_SYNC_OUT;
	default:
		return 0;
	}
}

/* The request is over once nothing of it is active and either every chunk
 * finished or an error stopped it. */
static void op_maybe_done(struct tern__stage *st, struct tern_req *req)
{
	if (tern__rp(req)->inflight != 0)
		return;
	if (tern__rp(req)->err == 0 &&
	    tern__rp(req)->ndone < tern__rp(req)->npieces)
		return;
	tern__reqq_remove(&st->ops, req);
	st->completed++;
	tern__req_complete(st->ctx, req, tern__rp(req)->err);
}

static void set_err(struct tern_req *req, int err)
{
	if (tern__rp(req)->err == 0)
		tern__rp(req)->err = err;
}

static void chunk_finish(struct tern__stage_chunk *ch, int status)
{
	struct tern_req *req = ch->parent;
	struct tern__stage *st = ch->st;

	ch->phase = CH_FREE;
	ch->parent = NULL;
	st->nfree[tern__rp(req)->op == TERN__OP_RECV]++;
	tern__rp(req)->inflight--;
	if (status != 0)
		set_err(req, status);
	else
		tern__rp(req)->ndone++;
	op_maybe_done(st, req);
}

static char *shadow(const struct tern_req *req)
{
	return tern__rp(req)->mr->smr->buf;
}

static char *device(const struct tern_req *req)
{
	return tern__rp(req)->mr->buf;
}

/* Queue a copy of the chunk on the stream, in @out's direction. */
static int chunk_copy(struct tern__stage_chunk *ch, int out, uint64_t len)
{
	struct tern__stage *st = ch->st;
	const struct tern__cu *cu = st->cu;
	const struct tern_req *req = ch->parent;
	char *h = shadow(req) + ch->off, *d = device(req) + ch->off;
	tern_cu_result r;

	ch->phase = out ? CH_COPY_OUT : CH_COPY_IN;
	ch->has_ev = 0;
	if (len == 0)
		return 0;
	/* Progress may run on another thread than the registering one. */
	if (tern__cu_ctx_ensure(cu, st->device) != 0)
		return -TERN_EHMEM;
	r = cu->MemcpyAsync((tern_cu_ptr)(uintptr_t)(out ? h : d),
			    (tern_cu_ptr)(uintptr_t)(out ? d : h), len,
			    st->stream);
	if (r == TERN_CU_SUCCESS)
		r = cu->EventRecord(ch->ev, st->stream);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("staging copy of %llu bytes %s GPU: %s",
			   (unsigned long long)len, out ? "from" : "to",
			   tern__cu_errstr(cu, r));
		snprintf(ch->parent->errmsg, sizeof(ch->parent->errmsg),
			 "CUDA copy: %s", tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	ch->has_ev = 1;
	st->ncopy++;
	st->ctx->stage_copies++;
	st->ctx->stage_bytes += len;
	return 0;
}

static void net_done(struct tern_req *inner);

/* Queue the chunk's operation on the shadow, inside the engine (never
 * through the public calls: this runs from progress). */
static int chunk_post(struct tern__stage_chunk *ch)
{
	struct tern_req *req = ch->parent, *in = &ch->req;
	struct tern_peer *peer = tern__rp(req)->peer;
	struct tern_mr *smr = tern__rp(req)->mr->smr;
	char *h = shadow(req) + ch->off;
	const struct tern_mr_desc *rd;
	const struct tern_mr_desc *regions;
	struct tern_piece p;
	uint8_t op;

	tern_req_init(in, net_done, ch);
	ch->phase = CH_NET;
	/* A write or read: the remote region, as the descriptor it came
	 * with (the pool's copy). */
	if (tern__rp(req)->xflags & TERN__XF_DESC)
		rd = &tern__rp(req)->u.staged.rd->d;
	else
		rd = NULL;
	op = tern__rp(req)->op;
	switch (op) {
	case TERN__OP_SEND:
	case TERN__OP_SEND_IMM:
	case TERN__OP_RECV:
		return tern__submit_msg(
			tern__rp(req)->ctx, op == TERN__OP_RECV ? NULL : peer,
			op, smr, h, ch->len, tern__rp(req)->imm, in);
	case TERN__OP_READ:
	case TERN__OP_WRITE:
		return tern__submit_rma(peer, smr, h, ch->len, rd, ch->roff, op,
					0, 0, in);
	case TERN__OP_WRITE_IMM:
		if (ch->idx + 1 == tern__rp(req)->npieces)
			return tern__submit_rma(peer, smr, h, ch->len, rd,
						ch->roff, op,
						tern__rp(req)->imm, 0, in);
		/* The immediate goes with the last chunk, posted once the
		 * others completed: they must have landed by then, on any
		 * rail, so ask for delivery, not just transmission. */
		return tern__submit_rma(peer, smr, h, ch->len, rd, ch->roff,
					TERN__OP_WRITE, 0, TERN__XF_DELIVER,
					in);
	case TERN__OP_PIECES:
		p = tern__piece(tern__rp(req), ch->idx);
		regions = tern__rp(req)->u.batch.regions;
		if (tern__rp(req)->u.batch.with_imm)
			return tern__submit_rma(peer, smr, h, ch->len,
						&regions[p.region], p.roff,
						TERN__OP_WRITE_IMM,
						tern__rp(req)->imm, 0, in);
		return tern__submit_rma(peer, smr, h, ch->len,
					&regions[p.region], p.roff,
					TERN__OP_WRITE, 0, 0, in);
	default:
		return -EINVAL;
	}
}

static void chunk_net(struct tern__stage_chunk *ch)
{
	struct tern_req *req = ch->parent;
	int ret;

	if (tern__rp(req)->err != 0 &&
	    (tern__rp(req)->op != TERN__OP_PIECES ||
	     (tern__rp(req)->xflags & TERN__XF_CANCELLED))) {
		chunk_finish(ch, tern__rp(req)->err);
		return;
	}
	if (tern__rp(req)->op == TERN__OP_WRITE_IMM &&
	    ch->idx + 1 == tern__rp(req)->npieces &&
	    tern__rp(req)->ndone + 1 < tern__rp(req)->npieces) {
		ch->phase = CH_HELD;
		return;
	}
	ret = chunk_post(ch);
	if (ret != 0)
		chunk_finish(ch, ret);
}

/* The inner operation completed (inside tern's progress). */
static void net_done(struct tern_req *in)
{
	struct tern__stage_chunk *ch = in->data;
	struct tern_req *req = ch->parent;
	int ret;

	if (in->status != 0) {
		if (req->errmsg[0] == '\0' && in->errmsg[0] != '\0') {
			memcpy(req->errmsg, in->errmsg, sizeof(req->errmsg));
			req->prov_errno = in->prov_errno;
		}
		if (tern__rp(req)->op == TERN__OP_RECV)
			req->len = in->len;
		chunk_finish(ch, in->status);
		return;
	}
	if (is_source(req)) {
		chunk_finish(ch, 0);
		return;
	}
	/* A sink: the bytes are in the shadow; now to the GPU. */
	if (tern__rp(req)->op == TERN__OP_RECV) {
		req->len = in->len;
		req->imm = in->imm;
		req->flags = in->flags;
	}
	ret = chunk_copy(
		ch, 0, tern__rp(req)->op == TERN__OP_RECV ? in->len : ch->len);
	if (ret != 0)
		chunk_finish(ch, ret);
	else if (!ch->has_ev)
		chunk_finish(ch, 0);
}

static struct tern__stage_chunk *chunk_get(struct tern__stage *st, int recv)
{
	unsigned int lo = recv ? st->depth : 0;
	unsigned int hi = recv ? st->nchunks : st->depth;

	for (unsigned int i = lo; i < hi; i++) {
		if (st->chunks[i].phase == CH_FREE &&
		    st->chunks[i].parent == NULL)
			return &st->chunks[i];
	}
	return NULL;
}

/* Start the request's next chunk in a free slot. */
static void chunk_start(struct tern__stage *st, struct tern_req *req)
{
	int recv = tern__rp(req)->op == TERN__OP_RECV;
	struct tern__stage_chunk *ch = chunk_get(st, recv);
	uint32_t i = tern__rp(req)->next_piece++;
	uint64_t base = (uint64_t)((char *)tern__rp(req)->buf - device(req));
	int ret;

	st->nfree[recv]--;
	tern__rp(req)->inflight++;
	ch->parent = req;
	ch->idx = i;
	ch->roff = 0;
	if (tern__rp(req)->op == TERN__OP_PIECES) {
		const struct tern_piece pc = tern__piece(tern__rp(req), i);

		ch->off = pc.loff;
		ch->len = pc.len;
	} else if (tern__rp(req)->op == TERN__OP_SEND ||
		   tern__rp(req)->op == TERN__OP_SEND_IMM ||
		   tern__rp(req)->op == TERN__OP_RECV) {
		ch->off = base; /* a message is never cut */
		ch->len = req->len;
	} else {
		tern__stripe_chunk(req->len, st->chunk, i, &ch->off, &ch->len);
		ch->roff = tern__rp(req)->u.staged.roff + ch->off;
		ch->off += base;
	}
	if (tern__rp(req)->op == TERN__OP_SYNC) {
		ret = chunk_copy(ch,
				 tern__rp(req)->u.sync.dir == TERN_MR_SYNC_OUT,
				 ch->len);
		if (ret != 0 || !ch->has_ev)
			chunk_finish(ch, ret);
		return;
	}
	if (is_source(req)) {
		ret = chunk_copy(ch, 1, ch->len);
		if (ret != 0)
			chunk_finish(ch, ret);
		else if (!ch->has_ev)
			chunk_net(ch);
		return;
	}
	ret = chunk_post(ch);
	if (ret != 0)
		chunk_finish(ch, ret);
}

void tern__stage_submit(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__stage *st = ctx->stage;

	tern__rp(req)->state = TERN__ST_STAGING;
	/* xflags: TERN__XF_CANCELLED once cancelled (the post cleared it) */
	tern__rp(req)->next_piece = 0;
	tern__rp(req)->inflight = 0;
	tern__rp(req)->ndone = 0;
	tern__rp(req)->err = 0;
	switch (tern__rp(req)->op) {
	case TERN__OP_PIECES: /* one chunk per piece, set by the caller */
		break;
	case TERN__OP_SEND:
	case TERN__OP_SEND_IMM:
	case TERN__OP_RECV:
		tern__rp(req)->npieces = 1;
		break;
	case TERN__OP_SYNC: /* nothing to copy on a host region */
		tern__rp(req)->npieces = tern__rp(req)->mr->smr == NULL ||
							 req->len == 0
						 ? 0
						 : (uint32_t)tern__stripe_count(
							   req->len, st->chunk);
		break;
	default:
		tern__rp(req)->npieces = req->len == 0
						 ? 1
						 : (uint32_t)tern__stripe_count(
							   req->len, st->chunk);
		break;
	}
	tern__rp(req)->mr->inflight++;
	if (tern__rp(req)->peer != NULL)
		tern__rp(req)->peer->inflight++;
	tern__reqq_push(&st->ops, req);
}

/* Start chunks, oldest request first; a request's chunks start in order,
 * and a later request starts only once the earlier ones all have (receives
 * stay in the order they were posted). */
static void start_chunks(struct tern__stage *st)
{
	struct tern_req *req;
	int again = 1;

	while (again) {
		int blocked[2] = { 0, 0 };

		again = 0;
		for (req = st->ops.head; req != NULL;
		     req = tern__rp(req)->next) {
			int recv = tern__rp(req)->op == TERN__OP_RECV;

			/* A batch's other pieces still run after one failed
			 * (unless cancelled); anything else stops at its
			 * error. */
			if ((tern__rp(req)->err == 0 ||
			     (tern__rp(req)->op == TERN__OP_PIECES &&
			      !(tern__rp(req)->xflags & TERN__XF_CANCELLED))) &&
			    tern__rp(req)->next_piece <
				    tern__rp(req)->npieces) {
				/* In posting order within each pool. */
				if (blocked[recv] || st->nfree[recv] == 0) {
					blocked[recv] = 1;
					continue;
				}
				/* May complete it (and run callbacks that
				 * change the list): walk again. */
				chunk_start(st, req);
				again = 1;
				break;
			}
			if (tern__rp(req)->inflight == 0) {
				/* Nothing to start, nothing active: over
				 * (a sync of a host region, or 0 bytes). */
				op_maybe_done(st, req);
				again = 1;
				break;
			}
		}
	}
}

int tern__stage_progress(struct tern_ctx *ctx)
{
	struct tern__stage *st = ctx->stage;
	int done;

	for (unsigned int i = 0; st->ncopy != 0 && i < st->nchunks; i++) {
		struct tern__stage_chunk *ch = &st->chunks[i];
		tern_cu_result r;

		if (!ch->has_ev ||
		    (ch->phase != CH_COPY_OUT && ch->phase != CH_COPY_IN))
			continue;
		r = st->cu->EventQuery(ch->ev);
		if (r == TERN_CU_ERROR_NOT_READY)
			continue;
		ch->has_ev = 0;
		st->ncopy--;
		if (r != TERN_CU_SUCCESS) {
			tern__warn("staging copy %s GPU failed: %s",
				   ch->phase == CH_COPY_OUT ? "from" : "to",
				   tern__cu_errstr(st->cu, r));
			snprintf(ch->parent->errmsg, sizeof(ch->parent->errmsg),
				 "CUDA copy: %s", tern__cu_errstr(st->cu, r));
			chunk_finish(ch, -TERN_EHMEM);
		} else if (ch->phase == CH_COPY_OUT &&
			   tern__rp(ch->parent)->op != TERN__OP_SYNC) {
			chunk_net(ch);
		} else {
			chunk_finish(ch, 0);
		}
	}
	for (unsigned int i = 0; i < st->nchunks; i++) {
		struct tern__stage_chunk *ch = &st->chunks[i];

		if (ch->phase == CH_HELD &&
		    (tern__rp(ch->parent)->err != 0 ||
		     tern__rp(ch->parent)->ndone + 1 ==
			     tern__rp(ch->parent)->npieces))
			chunk_net(ch);
	}
	start_chunks(st);
	done = (int)st->completed;
	st->completed = 0;
	return done;
}

int tern__stage_busy(const struct tern_ctx *ctx)
{
	return ctx->stage != NULL && ctx->stage->ncopy != 0;
}

int tern__stage_alive(const struct tern_ctx *ctx)
{
	return ctx->stage != NULL && ctx->stage->ops.len != 0;
}

static void stage_cancel(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	struct tern__stage *st = ctx->stage;

	/* A receive whose message already landed completes normally (the
	 * message is consumed): as on host regions, the message won. */
	for (unsigned int i = st->depth; i < st->nchunks; i++) {
		if (st->chunks[i].parent == req &&
		    st->chunks[i].phase == CH_COPY_IN)
			return;
	}
	set_err(req, status);
	/* Cancelled: nothing more is posted. */
	tern__rp(req)->xflags |= TERN__XF_CANCELLED;
	tern__rp(req)->next_piece = tern__rp(req)->npieces; /* start no more */
	/* Hold it: a chunk finishing below must not complete it (its
	 * callback may free or reuse it) before the walk is over. */
	tern__rp(req)->inflight++;
	for (unsigned int i = 0; i < st->nchunks; i++) {
		struct tern__stage_chunk *ch = &st->chunks[i];

		if (ch->parent != req)
			continue;
		if (ch->phase == CH_HELD)
			chunk_finish(ch, -ECANCELED);
		else if (ch->phase == CH_NET &&
			 tern__rp(req)->op == TERN__OP_RECV)
			tern_req_cancel(ctx, &ch->req);
	}
	tern__rp(req)->inflight--;
	op_maybe_done(st, req);
}

void tern__stage_cancel(struct tern_ctx *ctx, struct tern_req *req)
{
	stage_cancel(ctx, req, -ECANCELED);
}

void tern__stage_cancel_peer(struct tern_ctx *ctx, struct tern_peer *peer,
			     int status)
{
	struct tern__stage *st = ctx->stage;
	struct tern_req *req, *next;

	if (st == NULL)
		return;
	/* A cancel runs no callback (it queues on ctx->ready) and takes
	 * only the request itself off the list: one walk does. */
	for (req = st->ops.head; req != NULL; req = next) {
		next = tern__rp(req)->next;
		/* Not yet cancelled: may still start or succeed. */
		if ((peer == NULL || tern__rp(req)->peer == peer) &&
		    !(tern__rp(req)->xflags & TERN__XF_CANCELLED))
			stage_cancel(ctx, req, status);
	}
}

void tern__stage_quiesce(struct tern_ctx *ctx)
{
	struct tern__stage *st = ctx->stage;

	if (st != NULL && st->cu != NULL && st->stream != NULL)
		st->cu->StreamSynchronize(st->stream);
}

void tern__stage_close(struct tern_ctx *ctx)
{
	struct tern__stage *st = ctx->stage;
	struct tern_req *req;

	if (st == NULL)
		return;
	tern__stage_quiesce(ctx);
	/* Inner operations were cancelled with the endpoints; whatever is
	 * still linked ends now. */
	while ((req = tern__reqq_pop(&st->ops)) != NULL) {
		tern__rp(req)->inflight = 0;
		tern__req_complete(ctx, req, -ECANCELED);
	}
	if (st->cu != NULL) {
		for (unsigned int i = 0; i < st->nchunks; i++)
			st->cu->EventDestroy(st->chunks[i].ev);
		st->cu->StreamDestroy(st->stream);
	}
	free(st->chunks);
	free(st);
	ctx->stage = NULL;
}

int tern_mr_sync(struct tern_mr *mr, uint64_t off, uint64_t len,
		 unsigned int dir, struct tern_req *req)
{
	struct tern_ctx *ctx;
	int ret;

	if (mr == NULL || req == NULL ||
	    (dir != TERN_MR_SYNC_IN && dir != TERN_MR_SYNC_OUT))
		return -EINVAL;
	ctx = mr->ctx;
	if (off > mr->len || len > mr->len - off)
		return -TERN_EBOUNDS;
	if (ctx->closing)
		return -ECANCELED;
	if (ctx->stage == NULL) {
		ret = tern__stage_open(ctx, NULL, -1);
		if (ret != 0)
			return ret;
	}
	tern__req_fill(ctx, req, TERN__OP_SYNC, NULL, mr, (char *)mr->buf + off,
		       len);
	tern__rp(req)->u.sync.dir = dir;
	tern__stage_submit(ctx, req);
	return 0;
}
