/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Cancellation (tern_req_cancel()) of queued and posted
 * requests, regions pinned by what is in flight on them, a peer marked
 * gone, and closing: a ctx's drain completes everything in flight
 * -ECANCELED.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "fake_env.h"
#include "fake_prov.h"
#include "loop_fixture.h"

/* ---- Cancellation ---- */

static void test_cancel_queued(void **state)
{
	struct env *e = *state;
	struct tracked w[3], r;

	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->peer.inflight, 3);

	/* Cancelled now (the peer lets go of it), called back from the
	 * next progress pass: never inside tern_req_cancel(). */
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), 0);
	assert_int_equal(w[1].calls, 0);
	assert_int_equal(w[1].req.done, 0);
	assert_int_equal(e->peer.inflight, 2);
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), -EALREADY);

	/* The others go, the cancelled ones never reach the provider, and
	 * their callbacks run once, from this pass. */
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].done_in_cb, 1);
	assert_int_equal(w[1].req.status, -ECANCELED);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, -ECANCELED);
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), -EALREADY);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_ptr_equal(fk.calls[0].context, ctx_of(&w[0]));
	assert_ptr_equal(fk.calls[1].context, ctx_of(&w[2]));
	assert_int_equal(fk.calls[1].flags, 0);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(r.calls, 1);

	/* A write the provider holds cannot be cancelled. */
	assert_int_equal(tern_req_cancel(e->ctx, &w[0].req), -EBUSY);
	assert_int_equal(fk.ncalls, 2);
	cq_ok(ctx_of(&w[0]), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(tern_req_cancel(e->ctx, &w[0].req), -EALREADY);
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(w[0].req.status, 0);
	assert_int_equal(tern_req_cancel(NULL, &w[0].req), -EINVAL);
	assert_int_equal(tern_req_cancel(e->ctx, NULL), -EINVAL);
}

/* A wait on a cancelled request returns at once: one progress pass runs
 * its callback (it is not done before that, so a wait cannot skip it). */
static void test_cancel_then_wait(void **state)
{
	struct env *e = *state;
	struct tracked w;

	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(tern_wait(e->ctx, &w.req, -1), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.done_in_cb, 1);
	assert_int_equal(w.req.status, -ECANCELED);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(e->peer.inflight, 0);
	/* Done now: a second wait runs no pass and no callback. */
	assert_int_equal(tern_wait(e->ctx, &w.req, -1), 0);
	assert_int_equal(w.calls, 1);
}

/* A callback run for a cancelled request may post it again at once: it
 * is off every list of tern's by then. */
struct repost {
	struct env *e;
	int calls;
	int ret;
};

static void repost_cb(struct tern_req *req)
{
	struct repost *rp = req->data;

	if (rp->calls++ == 0)
		rp->ret = tern_write(&rp->e->peer, &rp->e->mr, rp->e->buf, 8,
				     &rp->e->rdesc, 0, req);
}

static void test_cancelled_cb_reposts(void **state)
{
	struct env *e = *state;
	struct repost rp = { .e = e, .ret = 1 };
	struct tern_req req;

	tern_req_init(&req, repost_cb, &rp);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &req), 0);
	assert_int_equal(rp.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(rp.calls, 1);
	assert_int_equal(rp.ret, 0);
	assert_int_equal(req.done, 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(rp.calls, 2);
	assert_int_equal(req.status, 0);
}

/* Regions count what is in flight on them, as peers do: a queued or
 * posted operation pins its region (tern_mr_close() answers -EBUSY), and
 * lets go of it as it finishes, a cancelled one at the cancel. */
static void test_mr_inflight(void **state)
{
	struct env *e = *state;
	struct tracked w, r, x;

	assert_int_equal(write_nth(e, &w, 0), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->mr.inflight, 2);
	assert_int_equal(tern_mr_close(&e->mr), -EBUSY);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->mr.inflight, 2); /* posted: still pinned */
	assert_int_equal(tern_mr_close(&e->mr), -EBUSY);
	cq_ok(ctx_of(&w), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(e->mr.inflight, 1);
	/* A posted receive cancelled: the provider's completion lets go. */
	fk.cancel_completes = 1;
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.status, -ECANCELED);
	assert_int_equal(e->mr.inflight, 0);
	/* A queued write cancelled lets go at once, before its callback. */
	assert_int_equal(write_nth(e, &w, 1), 0);
	assert_int_equal(e->mr.inflight, 1);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_int_equal(e->mr.inflight, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	/* An expectation uses no region. */
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 4, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(e->mr.inflight, 0);
	assert_int_equal(tern_mr_close(NULL), 0);
}

static void test_cancel_posted_recv(void **state)
{
	struct env *e = *state;
	struct tracked r;

	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].op, FOP_CANCEL);
	assert_ptr_equal(fk.calls[1].context, fk.calls[0].context);
	/* It completes from progress, when the provider reports it. */
	assert_int_equal(r.calls, 0);
	assert_int_equal(r.req.done, 0);
	cq_err(fk.calls[0].context, -ECANCELED, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, -ECANCELED);
	assert_int_equal(e->ctx->rails[0].rx_credits, 8);

	/* A provider that refuses to cancel. */
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	fk.cancel_ret = -ENOENT;
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), -TERN_EPROV);
	assert_int_equal(r.calls, 0);
}

/* A peer marked gone: what tern still queues for it fails from the next
 * progress pass (never inside the call), later posts fail at once, and
 * what the provider holds completes as the provider says. */
static void test_peer_gone(void **state)
{
	struct env *e = *state;
	struct tracked w[3], r, b, late;
	struct tern_piece pc[3] = { { .loff = 0, .roff = 0, .len = 64 },
				    { .loff = 64, .roff = 64, .len = 64 },
				    { .loff = 128, .roff = 128, .len = 64 } };
	struct tern_req before;

	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 1);
	/* A batch with one piece out and two still queued. */
	e->ctx->rails[0].tx_credits = 1;
	track_init(&b);
	assert_int_equal(tern_write_pieces(&e->peer, &e->mr, pc, 3, &e->rdesc,
					   1, 0, 0, &b.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 2);
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	assert_int_equal(write_nth(e, &w[2], 2), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->peer.inflight, 4);

	assert_int_equal(tern__peer_gone(&e->peer), 0);
	assert_int_equal(w[1].calls + w[2].calls + b.calls + w[0].calls, 0);
	assert_int_equal(w[1].req.done, 0);
	/* Posts fail at once, the request untouched. */
	track_init(&late);
	before = late.req;
	assert_int_equal(write_nth(e, &late, 3), -TERN_EPEERGONE);
	assert_memory_equal(&late.req, &before, sizeof(before));
	assert_int_equal(tern_send(&e->peer, &e->mr, e->buf, 8, &late.req),
			 -TERN_EPEERGONE);
	/* Again: nothing more happens. */
	assert_int_equal(tern__peer_gone(&e->peer), 0);
	assert_int_equal(tern__peer_gone(NULL), -EINVAL);

	e->ctx->rails[0].tx_credits = 8;
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].done_in_cb, 1);
	assert_int_equal(w[1].req.status, -TERN_EPEERGONE);
	assert_int_equal(w[2].req.status, -TERN_EPEERGONE);
	/* Nothing more went to the provider; the receive (no peer) stands. */
	assert_int_equal(fake_count(FOP_WRITE), 2);
	assert_int_equal(r.calls, 0);
	/* The batch ends once its piece out has. */
	assert_int_equal(b.calls, 0);
	assert_int_equal(w[0].calls, 0);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[0].req.status, 0);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.req.status, -TERN_EPEERGONE);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(fake_count(FOP_RECV), 1);
}

/* ---- Closing: everything in flight completes -ECANCELED ---- */

static void test_drain_cancels_everything(void **state)
{
	struct env *e = *state;
	struct tracked a, r, b, r2, x, y, c;
	size_t ncalls;

	track_init(&a);
	track_init(&r);
	assert_int_equal(write_nth(e, &a, 0), 0);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 1, 1, &x.req), 0);
	cq_imm(2);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	/* Queued requests and a satisfied, not yet completed expectation. */
	assert_int_equal(write_nth(e, &b, 1), 0);
	track_init(&r2);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r2.req), 0);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 2, 1, &y.req), 0);
	/* The posted write finishes on its own; the receive is cancelled. */
	cq_ok(ctx_of(&a), 64, 0, 0);
	fk.cancel_completes = 1;
	ncalls = fk.ncalls;
	e->ctx->closing = 1;
	tern__loop_drain(e->ctx);

	assert_int_equal(a.calls, 1);
	assert_int_equal(a.status, 0);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.status, -ECANCELED);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -ECANCELED);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.status, -ECANCELED);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ECANCELED);
	/* Only the cancel reached the provider, for the posted receive. */
	assert_int_equal(fk.ncalls, ncalls + 1);
	assert_int_equal(fk.calls[ncalls].op, FOP_CANCEL);
	assert_ptr_equal(fk.calls[ncalls].context, ctx_of(&r));
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);

	/* What the provider still holds after that is cancelled by tern. */
	e->ctx->closing = 0;
	assert_int_equal(write_nth(e, &c, 2), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->posted.len, 1);
	tern__loop_cancel_posted(e->ctx);
	/* ctx close then runs their callbacks (tern__ctx_finish_close()). */
	assert_int_equal(c.calls, 0);
	assert_int_equal(tern__ready_run(e->ctx), 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.status, -ECANCELED);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_cancel_queued),
		T(test_cancel_then_wait),
		T(test_peer_gone),
		T(test_mr_inflight),
		T(test_cancelled_cb_reposts),
		T(test_cancel_posted_recv),
		T(test_drain_cancels_everything),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
