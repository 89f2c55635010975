/* SPDX-License-Identifier: MIT */
/*
 * The progress engine: operations (queued by the posting calls, submit.c)
 * are handed to the provider per rail in bounded batches ("more" on all
 * but the last of a batch) within the rail's queue credits; completions
 * are read in batches and dispatched to requests and immediate-data
 * counters. Nothing here allocates or makes a system call per operation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "local.h"
#include "post.h"
#include "stripe.h"
#include "stage.h"

/* Completions read per rail per progress pass. */
#define TERN_POLL_BATCH 64

void tern_req_init(struct tern_req *req, tern_req_cb cb, void *data)
{
	/* Every post sets what it uses; clear only what a caller may read
	 * and what tern tests before posting (on the hot path: no memset of
	 * the whole request). */
	req->cb = cb;
	req->data = data;
	req->done = 0;
	req->status = 0;
	req->len = 0;
	req->imm = 0;
	req->value = 0;
	req->flags = 0;
	req->prov_errno = 0;
	req->errmsg[0] = '\0';
	tern__rp(req)->next = tern__rp(req)->prev = NULL;
	tern__rp(req)->peer = NULL;
	tern__rp(req)->op = 0;
	tern__rp(req)->state = 0;
	tern__rp(req)->ready = 0;
	tern__rp(req)->xflags = 0;
}

/*
 * A request is finished: tern lets go of its region and its peer (a
 * removed peer is freed with its last request) and records the status.
 * req->done is not set here: it means "tern no longer holds the request",
 * which is true only once the request is off every list, just before its
 * callback runs.
 */
static inline void finish_req(struct tern_req *req, int status)
{
	struct tern_peer *peer = tern__rp(req)->peer;
	struct tern_mr *mr = tern__rp(req)->mr;

	/* A write with immediate that failed tells its target (ctrl.c). */
	if (tern_unlikely(status != 0) && peer != NULL)
		tern__ctrl_imm_failed(tern__rp(req)->ctx, req, status);
	req->status = status;
	if (mr != NULL) /* NULL: an immediate expectation */
		mr->inflight--;
	if (peer != NULL) {
		tern__rp(req)->peer = NULL;
		peer->inflight--;
		if (tern_unlikely(peer->removed))
			tern__peer_release_later(peer);
	}
}

/* The hot path's form of tern__req_complete_now(): from a CQ entry. */
static inline void complete_req(struct tern_req *req, int status)
{
	finish_req(req, status);
	tern__rp(req)->state = TERN__ST_DONE;
	req->done = 1;
	/* Last touch of req by tern: the callback may reuse it. */
	if (req->cb != NULL)
		req->cb(req);
}

void tern__req_complete_now(struct tern_ctx *ctx, struct tern_req *req,
			    int status)
{
	(void)ctx;
	complete_req(req, status);
}

struct tern__desc *tern__desc_get(struct tern_ctx *ctx,
				  const struct tern_mr_desc *src)
{
	struct tern__desc *rd = ctx->desc_free;

	if (rd != NULL)
		ctx->desc_free = rd->next_free;
	else if ((rd = malloc(sizeof(*rd))) == NULL)
		return NULL;
	rd->d = *src;
	return rd;
}

void tern__desc_put(struct tern_ctx *ctx, struct tern__desc *rd)
{
	rd->next_free = ctx->desc_free;
	ctx->desc_free = rd;
}

void tern__desc_pool_fini(struct tern_ctx *ctx)
{
	struct tern__desc *rd;

	while ((rd = ctx->desc_free) != NULL) {
		ctx->desc_free = rd->next_free;
		free(rd);
	}
}

/* A striped or staged request gives its descriptor copy back as it
 * finishes (never on the single-rail path: no test there). */
static void drop_desc(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__req_priv *p = tern__rp(req);

	if (!(p->xflags & TERN__XF_DESC))
		return;
	p->xflags &= (uint8_t)~TERN__XF_DESC;
	tern__desc_put(ctx, p->op == TERN__OP_PIECES ? p->u.stripe.rd
						     : p->u.staged.rd);
}

void tern__req_complete(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	drop_desc(ctx, req);
	finish_req(req, status);
	tern__rp(req)->state = TERN__ST_READY;
	tern__reqq_push(&ctx->ready, req);
}

/* Run the callbacks of finished requests, oldest first. A callback may
 * post, cancel or close anything: each request is taken off the list
 * before its callback runs, and the list is read again from its head. */
int tern__ready_run(struct tern_ctx *ctx)
{
	struct tern_req *req;
	int n = 0;

	while ((req = tern__reqq_pop(&ctx->ready)) != NULL) {
		tern__rp(req)->state = TERN__ST_DONE;
		req->done = 1;
		n++;
		if (req->cb != NULL)
			req->cb(req);
	}
	return n;
}

void tern__queue(struct tern_ctx *ctx, struct tern_req *req)
{
	tern__queue_req(ctx, req);
}

/* The last piece of a batch has been handed over (or abandoned): the batch
 * completes with its last piece's completion, or now if none is out. */
static void pieces_posted(struct tern_ctx *ctx, struct tern_req *req)
{
	if (tern__rp(req)->inflight == 0) {
		tern__req_complete(ctx, req, tern__rp(req)->err);
		return;
	}
	tern__rp(req)->state = TERN__ST_POSTED;
	tern__reqq_push(&ctx->posted, req);
}

/* Post the next piece of batch @req in @q. @return 0 (pieces remain),
 * -EAGAIN or 1 (all posted, or abandoned: it left @q). */
static int post_piece(struct tern_ctx *ctx, struct tern_rail *rail,
		      struct tern__reqq *q, struct tern_req *req,
		      size_t *credits, int more)
{
	int ret;

	if (tern__rp(req)->sop != 0) {
		/* A striped chunk: on its own rail, with that rail's
		 * credits, never "more" (the next chunk is elsewhere). */
		unsigned int r = tern__stripe_rail(tern__rp(req)->rail,
						   tern__rp(req)->next_piece,
						   ctx->nrails);

		if (tern_unlikely(tern__rp(req)->peer->down != 0)) {
			/* The first part: a probe of a rail due for one. */
			if (tern__rp(req)->next_piece == 0)
				tern__path_try(tern__rp(req)->peer,
					       &tern__rp(req)->u.stripe.rd->d,
					       tern__rp(req)->u.stripe.roff);
			r = tern__path_pick(tern__rp(req)->peer, r);
		}
		rail = &ctx->rails[r];
		credits = &rail->tx_credits;
		if (*credits == 0)
			return -EAGAIN;
		ret = tern__rail_post_chunk(rail, req);
	} else {
		ret = tern__rail_post_piece(rail, req, more);
		if (ret == TERN__PART_MORE) {
			/* Part of a piece that crosses a chunk. */
			(*credits)--;
			tern__rp(req)->inflight++;
			return 0;
		}
	}
	if (ret == -EAGAIN)
		return ret;
	tern__rp(req)->next_piece++;
	if (ret == 0) {
		(*credits)--;
		tern__rp(req)->inflight++;
	} else if (tern__rp(req)->err == 0) {
		tern__rp(req)->err = ret;
	}
	if (tern__rp(req)->next_piece == tern__rp(req)->npieces) {
		tern__reqq_remove(q, req);
		pieces_posted(ctx, req);
		return 1;
	}
	return 0;
}

/* Peers whose post was refused (-EAGAIN) in this pass: their later
 * requests wait, in order, while other peers' requests go ahead. */
#define TERN__BLOCKED_MAX 8

static int peer_blocked(struct tern_peer *const *blocked, int n,
			const struct tern_peer *peer)
{
	for (int i = 0; i < n; i++) {
		if (blocked[i] == peer)
			return 1;
	}
	return 0;
}

/*
 * Post up to a batch from @q within @credits. A post that fails finishes
 * its request onto ctx->ready (its callback runs at the end of the pass).
 *
 * A refused post (-EAGAIN) does not hold up the whole queue: on shm it can
 * mean that one peer's command queue is full (a process that died takes no
 * more), so requests to other peers are tried after it, each peer's in its
 * own order. A refusal with no peer (receives) stops the pass.
 */
static void post_queue(struct tern_ctx *ctx, struct tern_rail *rail,
		       struct tern__reqq *q, size_t *credits, uint8_t *refused)
{
	size_t n = TERN_MIN(TERN_MIN(q->len, *credits), ctx->post_batch);
	struct tern_peer *blocked[TERN__BLOCKED_MAX];
	struct tern_req *req = q->head;
	size_t n0 = n;
	int nblocked = 0;

	/* A batched write counts once in q->len but posts many pieces. */
	if (req != NULL && tern__rp(req)->op == TERN__OP_PIECES)
		n = TERN_MIN(*credits, ctx->post_batch);
	/* A failed post goes to ctx->ready: no callback runs in this loop,
	 * so the saved next pointer stays good. (A hard failure of a batch's
	 * last post leaves the "more" posts before it to be flushed by the
	 * rail's next post.) */
	while (n > 0 && req != NULL) {
		struct tern_req *next = tern__rp(req)->next;
		int more, ret;

		if (tern__rp(req)->peer != NULL &&
		    peer_blocked(blocked, nblocked, tern__rp(req)->peer)) {
			req = next;
			continue;
		}
		more = n > 1 &&
		       (next != NULL || (tern__rp(req)->op == TERN__OP_PIECES &&
					 tern__rp(req)->next_piece + 1 <
						 tern__rp(req)->npieces));
		if (tern__rp(req)->op == TERN__OP_PIECES) {
			ret = post_piece(ctx, rail, q, req, credits, more);
			if (ret == -EAGAIN)
				goto refused;
			n--;
			if (ret == 1)
				req = next;
			continue;
		}
		ret = tern__rail_post_inline(rail, req, more);
		if (ret == -EAGAIN)
			goto refused;
		tern__reqq_remove(q, req);
		n--;
		if (ret != 0) {
			/* Failed, or a small write the provider took: no
			 * completion will come (post.h); done, callback at
			 * the end of this pass, no credit held. */
			tern__req_complete(ctx, req,
					   ret == TERN__PROV_TAKEN ? 0 : ret);
			req = next;
			continue;
		}
		(*credits)--;
		tern__rp(req)->state = TERN__ST_POSTED;
		tern__reqq_push(&ctx->posted, req);
		req = next;
		continue;
	refused:
		/* It stays queued, re-posted on a later pass. */
		if (tern__rp(req)->peer == NULL ||
		    nblocked == TERN__BLOCKED_MAX) {
			nblocked++;
			break;
		}
		blocked[nblocked++] = tern__rp(req)->peer;
		req = next;
	}
	/* Refused and nothing went out: until a completion or a new
	 * request, retrying at once only spins (a connection that
	 * tcp;ofi_rxm is still setting up refuses every send). */
	*refused = nblocked != 0 && n == n0;
}

void tern__req_abort(struct tern_ctx *ctx, struct tern__reqq *q,
		     struct tern_req *req, int status)
{
	tern__reqq_remove(q, req);
	if (tern__rp(req)->op == TERN__OP_PIECES) {
		/* Pieces already out finish first; then the batch ends. */
		if (tern__rp(req)->err == 0)
			tern__rp(req)->err = status;
		tern__rp(req)->next_piece = tern__rp(req)->npieces;
		pieces_posted(ctx, req);
		return;
	}
	tern__req_complete(ctx, req, status);
}

int tern__piece_done(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	tern__rp(req)->inflight--;
	if (status != 0 && tern__rp(req)->err == 0)
		tern__rp(req)->err = status;
	if (tern__rp(req)->inflight > 0 ||
	    tern__rp(req)->next_piece < tern__rp(req)->npieces)
		return 0;
	tern__reqq_remove(&ctx->posted, req);
	drop_desc(ctx, req);
	complete_req(req, tern__rp(req)->err);
	return 1;
}

static int dispatch(struct tern_ctx *ctx, struct tern_rail *rail,
		    struct tern__cqe *c)
{
	struct tern_req *req = c->req;

	if (c->imm) {
		/* A stamp in the high word (dedup.h): a failover ctx's. */
		if (tern_unlikely(c->data >> 32 != 0))
			tern__imm_stamped(ctx, c->data, c->src);
		else
			tern__imm_arrived(ctx, (uint32_t)c->data, c->src);
		return 0;
	}
	if (c->slot != NULL) {
		if (tern_unlikely(req == NULL)) {
			/* One of tern's own receives or sends. */
			if (ctx->bounce != NULL)
				return tern__bounce_done(ctx, c);
			tern__ctrl_done(ctx, rail, c);
			return 0;
		}
		if (tern_unlikely(c->status != 0) &&
		    tern__path_completed(ctx, rail, c))
			return 0; /* to go again on another rail */
		tern__slot_free(rail, c->slot);
		rail->tx_credits++;
		if (tern__rp(req)->op == TERN__OP_PIECES)
			return tern__piece_done(ctx, req, c->status);
		req->value = c->data;
		tern__reqq_remove(&ctx->posted, req);
		complete_req(req, c->status);
		return 1;
	}
	/* (A probe that succeeds is seen by its callback: failover.c.) */
	if (tern_unlikely(c->status != 0) && tern__path_completed(ctx, rail, c))
		return 0;
	tern__reqq_remove(&ctx->posted, req);
	if (tern__rp(req)->op == TERN__OP_RECV) {
		rail->rx_credits++;
		if (c->imm_data) {
			req->imm = c->data;
			req->flags |= TERN_REQ_F_IMM;
		}
		if (c->status == 0 || c->status == -TERN_ETRUNC)
			req->len = c->len;
	} else {
		rail->tx_credits++;
	}
	complete_req(req, c->status);
	return 1;
}

/* Post what @rail has queued, receives first. An empty queue costs no
 * call: most passes of a spinning wait find both empty. */
static inline void post_rail(struct tern_ctx *ctx, struct tern_rail *rail)
{
	/* Untagged, receives wait in tern (bounce.c), not the provider. */
	if (rail->rxq.len != 0 && ctx->caps.tagged)
		post_queue(ctx, rail, &rail->rxq, &rail->rx_credits,
			   &rail->rx_refused);
	if (rail->txq.len != 0)
		post_queue(ctx, rail, &rail->txq, &rail->tx_credits,
			   &rail->tx_refused);
}

/* Inlined into tern_progress(): see tern__rail_poll(). */
static TERN_ALWAYS_INLINE int progress_rail(struct tern_ctx *ctx,
					    struct tern_rail *rail)
{
	struct tern__prov_cqent ent[TERN_POLL_BATCH];
	struct tern__cqe cqe[TERN_POLL_BATCH];
	uint64_t src[TERN_POLL_BATCH]; /* where FI_SOURCE: not initialised */
	int done = 0, reaped = 0, n;

	/* Post first: a queued operation goes out before we spend time in
	 * the CQ (on tcp that means reading sockets): latency. */
	post_rail(ctx, rail);
	do {
		n = tern__rail_poll(rail, ent, src, cqe, TERN_ARRAY_SIZE(cqe));
		if (n < 0)
			return n;
		reaped += n;
		for (int i = 0; i < n; i++)
			done += dispatch(ctx, rail, &cqe[i]);
	} while (n == (int)TERN_ARRAY_SIZE(cqe));
	/* Completions freed credits and callbacks may have queued more: post
	 * again now rather than a pass later (bandwidth). */
	if (reaped != 0) {
		rail->reaped += (unsigned int)reaped;
		post_rail(ctx, rail);
	}
	return done;
}

int tern_progress(struct tern_ctx *ctx)
{
	int done = 0, ret = 0;

	if (ctx == NULL)
		return -EINVAL;
	tern__enter(ctx);
	if (ctx->timer_head != NULL || ctx->defer_head != NULL)
		done += tern__loop_due(ctx);
	/* Work other threads submitted: one relaxed load when there is
	 * none; what the tasks post goes out in this pass. */
	if (tern_unlikely(atomic_load_explicit(&ctx->task_pending,
					       memory_order_relaxed) != 0) &&
	    !ctx->close_pending)
		done += tern__task_run(ctx);
	if (ctx->imm_ready.head != NULL)
		tern__imm_poll(ctx);
	/* Same-host peers' immediates, and local operations that waited
	 * for room in a peer's ring. */
	if (ctx->local != NULL) {
		done += tern__local_flush(ctx);
		done += tern__local_poll(ctx);
	}
	/* Staged chunks whose copies are done go out in this pass. */
	if (ctx->stage != NULL && tern__stage_alive(ctx))
		done += tern__stage_progress(ctx);
	/* Parts that failed on a rail gone down go again (failover.c). */
	if (tern_unlikely(ctx->redo_head != NULL))
		done += tern__redo_post(ctx);
	for (unsigned int i = 0; i < ctx->nrails && ret >= 0; i++) {
		ret = progress_rail(ctx, &ctx->rails[i]);
		if (ret > 0)
			done += ret;
	}
	/* Immediates complete expectations inside dispatch; count them too. */
	done += (int)ctx->imm_completed;
	ctx->imm_completed = 0;
	/* Aborts to tell (ctrl.c): after the CQ reads freed their sends. */
	if (tern_unlikely(ctx->ctrl_pending))
		tern__ctrl_flush(ctx);
	/* Cancelled, failed to post, of a removed peer: their callbacks run
	 * here, the one place outside a CQ read where tern runs them. */
	if (ctx->ready.head != NULL)
		done += tern__ready_run(ctx);
	if (ret >= 0 && ctx->nios != 0 && !ctx->close_pending)
		done += tern__loop_poll_ios(ctx);
	/* Removed peers whose last operation finished in this pass: freed
	 * (mappings, CUDA handles, AV entries) here, not inside dispatch. */
	if (tern_unlikely(ctx->release != NULL))
		tern__peer_release_due(ctx);
	if (tern__leave(ctx))
		return -TERN_ECLOSED;
	return ret < 0 ? ret : done;
}

int tern_flush(struct tern_ctx *ctx)
{
	if (ctx == NULL)
		return -EINVAL;
	/* Runs no callback: a post that fails waits on ctx->ready. */
	if (ctx->local != NULL)
		tern__local_flush(ctx);
	for (unsigned int i = 0; i < ctx->nrails; i++)
		post_rail(ctx, &ctx->rails[i]);
	return 0;
}

int tern_wait(struct tern_ctx *ctx, struct tern_req *req, int timeout_ms)
{
	uint64_t deadline = 0;
	unsigned int idle = 0, spins = 0;

	if (ctx == NULL)
		return -EINVAL;
	/* Already complete: no progress pass. (One would read the CQ, which
	 * on tcp polls the sockets and resets the provider's signal: a
	 * ping-pong paid a system call pair per message for it.) */
	if (req != NULL && req->done)
		return 0;
	for (;;) {
		int n = tern_progress(ctx);
		uint64_t now;

		if (n < 0)
			return n;
		/* Activity: the next idle spell starts afresh. */
		if (n > 0)
			ctx->poll_ns = 0;
		if (req != NULL ? req->done : n > 0)
			return 0;
		/* The clock is read after the first pass, not before it: that
		 * pass posts what the caller just queued (a ping's send), and a
		 * wait that ends in it needs no deadline. */
		if (tern_unlikely(deadline == 0 && timeout_ms >= 0))
			deadline = tern__now_ns() +
				   (uint64_t)timeout_ms * 1000000ULL;
		/* The clock costs as much as an empty CQ read: while
		 * spinning, look at it one pass in 64. */
		if (deadline != 0 && (++spins % 64 == 0 || idle >= 200) &&
		    tern__now_ns() >= deadline)
			return -ETIMEDOUT;
		/* GPU copies running (staging) have no fd to sleep on. */
		if (n > 0 || ctx->busy_poll || tern__stage_busy(ctx)) {
			idle = 0;
			ctx->poll_ns = 0;
			continue;
		}
		/* Idle: spin briefly, then sleep on the ctx's wait fds (or,
		 * without them, poll with growing sleeps). */
		if (++idle < 200)
			continue;
		now = tern__now_ns();
		if (deadline != 0 && now >= deadline)
			return -ETIMEDOUT;
		tern__enter(ctx);
		n = tern__loop_block(
			ctx, deadline != 0 ? (int64_t)(deadline - now) : -1);
		if (tern__leave(ctx))
			return -TERN_ECLOSED;
		if (n < 0 && n != -EINTR)
			return n;
		if (n > 0 && req == NULL)
			return 0;
	}
}

int tern_ctx_settle(struct tern_ctx *ctx, int ms)
{
	uint64_t end;

	if (ctx == NULL || ms < 0)
		return -EINVAL;
	if (ctx->depth != 0)
		return -EDEADLK;
	end = tern__now_ns() + (uint64_t)ms * 1000000ULL;
	for (;;) {
		uint64_t now = tern__now_ns();
		int ret;

		if (now >= end)
			return 0;
		ret = tern_wait(ctx, NULL,
				(int)TERN_MIN((end - now) / 1000000 + 1, 20));
		if (ret < 0 && ret != -ETIMEDOUT)
			return ret;
	}
}

/* Complete a whole queue with -ECANCELED. */
static void cancel_queue(struct tern_ctx *ctx, struct tern__reqq *q)
{
	struct tern_req *req;

	while ((req = q->head) != NULL)
		tern__req_abort(ctx, q, req, -ECANCELED);
}

void tern__loop_drain(struct tern_ctx *ctx)
{
	uint64_t deadline = tern__now_ns() + 2000000000ULL;
	struct tern_req *req;

	tern__stage_cancel_peer(ctx, NULL, -ECANCELED);
	tern__local_cancel_all(ctx, -ECANCELED);
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		cancel_queue(ctx, &ctx->rails[i].rxq);
		cancel_queue(ctx, &ctx->rails[i].txq);
	}
	tern__imm_cancel_all(ctx);
	/* Posted receives are cancelled in the provider; sends and writes
	 * get a bounded time to finish. */
	for (req = ctx->posted.head; req != NULL; req = tern__rp(req)->next) {
		if (tern__rp(req)->op == TERN__OP_RECV)
			tern__rail_cancel(&ctx->rails[tern__rp(req)->rail],
					  req);
	}
	while ((ctx->posted.len > 0 || tern__stage_alive(ctx)) &&
	       tern__now_ns() < deadline) {
		if (tern_progress(ctx) < 0)
			break;
	}
	/* verbs;ofi_rxm: the peer's last flow-control credit must be in,
	 * and ours out, before the endpoints close (ctx.c, close_linger_ms). */
	deadline = tern__now_ns() + (uint64_t)ctx->caps.linger_ms * 1000000ULL;
	while (tern__now_ns() < deadline) {
		if (tern_progress(ctx) < 0)
			break;
	}
}

void tern__loop_cancel_posted(struct tern_ctx *ctx)
{
	struct tern_req *req;

	if (ctx->posted.len > 0)
		tern__warn(
			"ctx close: %zu operation(s) still with the provider "
			"completed as cancelled",
			ctx->posted.len);
	/* The endpoints are closed: nothing more will complete. */
	while ((req = tern__reqq_pop(&ctx->posted)) != NULL) {
		if (tern__rp(req)->op == TERN__OP_PIECES)
			tern__rp(req)->inflight = 0;
		tern__req_complete(ctx, req, -ECANCELED);
	}
}

static int req_cancel(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern_rail *rail;

	switch (tern__rp(req)->state) {
	case TERN__ST_QUEUED:
		/* A batch with pieces already out completes when they have:
		 * the provider may still be reading its buffers. */
		rail = &ctx->rails[tern__rp(req)->rail];
		tern__req_abort(ctx,
				tern__rp(req)->op == TERN__OP_RECV ? &rail->rxq
								   : &rail->txq,
				req, -ECANCELED);
		return 0;
	case TERN__ST_WAITING:
		tern__imm_cancel(ctx, req);
		return 0;
	case TERN__ST_STAGING:
		tern__stage_cancel(ctx, req);
		return 0;
	case TERN__ST_LOCALQ:
		tern__local_cancel(ctx, req, -ECANCELED);
		return 0;
	case TERN__ST_QUIET:
		tern__nbi_cancel(ctx, req, -ECANCELED);
		return 0;
	case TERN__ST_POSTED:
		if (tern__rp(req)->op != TERN__OP_RECV)
			return -EBUSY;
		return tern__rail_cancel(&ctx->rails[tern__rp(req)->rail], req);
	default: /* done, or on ctx->ready: its callback is due */
		return -EALREADY;
	}
}

int tern_req_cancel(struct tern_ctx *ctx, struct tern_req *req)
{
	if (ctx == NULL || req == NULL)
		return -EINVAL;
	/* Runs no callback: a cancelled request waits on ctx->ready. */
	return req_cancel(ctx, req);
}
