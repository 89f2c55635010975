/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Callbacks may post: a callback posts, reuses its own
 * request, expects again, expects mid-batch, or cancels a sibling behind a
 * failed post.
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

/* ---- Callbacks may post ---- */

struct chain {
	struct env *e;
	struct tern_req first;
	struct tracked next;
	int calls;
	int ret;
	size_t ncalls_before, ncalls_after;
};

static void chain_cb(struct tern_req *req)
{
	struct chain *ch = req->data;

	ch->calls++;
	ch->ncalls_before = fk.ncalls;
	ch->ret = write_nth(ch->e, &ch->next, 9);
	ch->ncalls_after = fk.ncalls;
}

static void test_callback_posts(void **state)
{
	struct env *e = *state;
	struct chain ch = { .e = e };

	tern_req_init(&ch.first, chain_cb, &ch);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0,
				    &ch.first),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	assert_true(tern_progress(e->ctx) >= 1);
	assert_int_equal(ch.calls, 1);
	assert_int_equal(ch.ret, 0);
	/* The post inside the callback only queued. */
	assert_int_equal(ch.ncalls_after, ch.ncalls_before);
	assert_int_equal(ch.next.calls, 0);
	/* It is handed over by this progress pass or the next. */
	if (fk.ncalls == 1)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_ptr_equal(fk.calls[1].context, ctx_of(&ch.next));
	assert_int_equal(fk.calls[1].raddr, RBASE + 64 * 9);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(ch.next.calls, 1);
	assert_int_equal(ch.next.req.status, 0);
	assert_int_equal(ch.calls, 1);
	assert_int_equal(e->peer.inflight, 0);
}

/* A callback may reuse its own request for the next operation. */
struct again {
	struct env *e;
	struct tern_req req;
	int calls;
};

static void again_cb(struct tern_req *req)
{
	struct again *a = req->data;

	if (++a->calls < 3)
		assert_int_equal(tern_write(&a->e->peer, &a->e->mr, a->e->buf,
					    16, &a->e->rdesc, 16 * a->calls,
					    req),
				 0);
}

static void test_callback_reuses_request(void **state)
{
	struct env *e = *state;
	struct again a = { .e = e };

	fk.auto_complete = 1;
	tern_req_init(&a.req, again_cb, &a);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 16, &e->rdesc, 0, &a.req),
		0);
	for (int i = 0; i < 20 && a.calls < 3; i++)
		assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(a.calls, 3);
	assert_int_equal(fk.ncalls, 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(fk.calls[i].raddr, RBASE + 16 * i);
	assert_int_equal(a.req.done, 1);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
}

/* A callback on an immediate expectation may expect again. */
struct reexpect {
	struct tern_ctx *ctx;
	struct tern_req req;
	int calls;
	int ret;
};

static void reexpect_cb(struct tern_req *req)
{
	struct reexpect *r = req->data;

	if (++r->calls == 1)
		r->ret = tern_imm_expect(r->ctx, 77, 2, req);
}

static void test_callback_reexpects(void **state)
{
	struct env *e = *state;
	struct reexpect r = { .ctx = e->ctx };

	tern_req_init(&r.req, reexpect_cb, &r);
	assert_int_equal(tern_imm_expect(e->ctx, 77, 1, &r.req), 0);
	cq_imm(77);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.ret, 0);
	assert_int_equal(r.req.done, 0);
	cq_imm(77);
	cq_imm(77);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 77), 0);
}

/* An expectation made in a callback, mid-batch, while more of its
 * immediates follow in the same batch: completes once, at the next pass. */
struct mid {
	struct tern_ctx *ctx;
	struct tracked x;
	int ret;
};

static void mid_cb(struct tern_req *req)
{
	struct mid *m = req->data;

	track_init(&m->x);
	m->ret = tern_imm_expect(m->ctx, 55, 1, &m->x.req);
}

static void test_callback_expects_mid_batch(void **state)
{
	struct env *e = *state;
	struct mid m = { .ctx = e->ctx };
	struct tern_req w;

	cq_imm(55);
	assert_int_equal(tern_progress(e->ctx), 0);
	tern_req_init(&w, mid_cb, &m);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &w), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	cq_imm(55);
	assert_true(tern_progress(e->ctx) >= 1);
	assert_int_equal(m.ret, 0);
	assert_true(m.x.calls <= 1);
	assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(m.x.calls, 1);
	assert_int_equal(m.x.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 55), 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(m.x.calls, 1);
}

/* A failed post's callback cancels a sibling queued behind it. The post's
 * failure goes to the ready list, so progress finishes posting the queue
 * before any callback runs: the sibling is out by then and cannot be
 * cancelled (once the callback ran mid-walk and progress posted the
 * vanished request: NULL deref). */
struct sib {
	struct tern_ctx *ctx;
	struct tern_req *victim;
	int cancel_ret;
	int calls;
};

static void sib_cb(struct tern_req *req)
{
	struct sib *b = req->data;

	b->calls++;
	b->cancel_ret = tern_req_cancel(b->ctx, b->victim);
}

static void test_failed_post_cb_cancels_sibling(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { -TERN_EPROV };
	struct sib b = { .ctx = e->ctx };
	struct tern_req a;
	struct tracked v;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	tern_req_init(&a, sib_cb, &b);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &a), 0);
	assert_int_equal(write_nth(e, &v, 1), 0);
	b.victim = &v.req;
	/* Posting alone runs no callback, even for a failed post. */
	assert_int_equal(tern_flush(e->ctx), 0);
	assert_int_equal(b.calls, 0);
	assert_int_equal(a.done, 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(a.status, -TERN_EPROV);
	assert_int_equal(b.cancel_ret, -EBUSY);
	assert_int_equal(v.calls, 0);
	cq_ok(ctx_of(&v), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(v.calls, 1);
	assert_int_equal(v.req.status, 0);
	assert_int_equal(fk.ncalls, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_failed_post_cb_cancels_sibling),
		T(test_callback_posts),
		T(test_callback_reuses_request),
		T(test_callback_reexpects),
		T(test_callback_expects_mid_batch),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
