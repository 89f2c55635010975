/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of implicit operations (tern_write_nbi() and its kin) and
 * tern_quiet() (src/engine/nbi.c), over the fake provider (fake_env.c):
 * what is posted, how a quiet counts and reports, the order of quiets,
 * cancelling one, the in-flight limit, and posts refused.
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

/* Callbacks of quiets, in the order they ran. */
static struct tracked *g_order[8];
static int g_norder;

static void order_cb(struct tern_req *req)
{
	struct tracked *t = req->data;

	t->calls++;
	t->status = req->status;
	g_order[g_norder++] = t;
}

static void quiet_init(struct tracked *t)
{
	memset(t, 0, sizeof(*t));
	tern_req_init(&t->req, order_cb, t);
}

static int write_nbi(struct env *e, unsigned int i)
{
	return tern_write_nbi(&e->peer, &e->mr, e->buf + 64 * (i % 64), 64,
			      &e->rdesc, 64 * (uint64_t)i);
}

/* Progress until nothing more is posted (the fake posts a batch a pass). */
static void post_all(struct env *e)
{
	for (int i = 0; i < 8; i++)
		(void)tern_progress(e->ctx);
}

static void test_nbi_posts_without_request(void **state)
{
	struct env *e = *state;

	g_norder = 0;
	e->rdesc.flags |= TERN_MR_DESC_REMOTE_READ;
	assert_int_equal(write_nbi(e, 0), 0);
	assert_int_equal(tern_write_imm_nbi(&e->peer, &e->mr, e->buf, 8,
					    &e->rdesc, 4096, 0x77),
			 0);
	assert_int_equal(tern_read_nbi(&e->peer, &e->mr, e->buf + 128, 16,
				       &e->rdesc, 8192),
			 0);
	/* Only queued, as explicit posts: the provider sees them in
	 * progress, each with tern's own context. */
	assert_int_equal(fk.ncalls, 0);
	post_all(e);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[0].op, FOP_WRITE);
	assert_int_equal(fk.calls[0].raddr, RBASE);
	assert_int_equal(fk.calls[1].op, FOP_WRITE);
	assert_int_equal(fk.calls[1].data, 0x77);
	assert_true(fk.calls[1].flags & TERN__PF_IMM);
	assert_int_equal(fk.calls[2].op, FOP_READ);
	assert_int_equal(fk.calls[2].raddr, RBASE + 8192);
	for (size_t i = 0; i < 3; i++)
		assert_non_null(fk.calls[i].context);
	/* Each holds its peer twice: its request, and its count until
	 * nbi_done() has counted it. */
	assert_int_equal(e->peer.inflight, 6);
	for (size_t i = 0; i < 3; i++)
		cq_ok(fk.calls[i].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(e->ctx->nbi_inflight, 0);
}

static void test_nbi_quiet_reports_first_error(void **state)
{
	struct env *e = *state;
	struct tracked q, qc;

	g_norder = 0;
	for (unsigned int i = 0; i < 5; i++)
		assert_int_equal(write_nbi(e, i), 0);
	quiet_init(&q);
	quiet_init(&qc);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q.req), 0);
	assert_int_equal(tern_quiet(e->ctx, NULL, &qc.req), 0);
	post_all(e);
	assert_int_equal(fk.ncalls, 5);
	assert_int_equal(q.calls, 0);
	/* The third and the fifth fail; the others land. */
	for (size_t i = 0; i < 5; i++) {
		if (i == 2 || i == 4)
			cq_err(fk.calls[i].context, -TERN_EPROV, 5, 0);
		else
			cq_ok(fk.calls[i].context, 64, 0, 0);
		(void)tern_progress(e->ctx);
		if (i < 4)
			assert_int_equal(q.calls, 0);
	}
	post_all(e);
	assert_int_equal(q.calls, 1);
	assert_int_equal(q.req.done, 1);
	assert_int_equal(q.req.status, -TERN_EPROV);
	assert_int_equal(q.req.len, 5);
	assert_int_equal(q.req.value, 2);
	assert_int_equal(q.req.imm, 3);
	assert_int_equal(q.req.prov_errno, 5);
	assert_non_null(strstr(q.req.errmsg, "write #3"));
	assert_non_null(strstr(q.req.errmsg, FAKE_PROV_TEXT));
	/* The ctx's quiet saw the same operations. */
	assert_int_equal(qc.calls, 1);
	assert_int_equal(qc.req.status, -TERN_EPROV);
	assert_int_equal(qc.req.len, 5);
	assert_int_equal(qc.req.value, 2);
	/* Each error is reported once: the next quiet is clean. */
	quiet_init(&q);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q.req), 0);
	assert_int_equal(q.req.done, 0); /* never inside the call */
	post_all(e);
	assert_int_equal(q.calls, 1);
	assert_int_equal(q.req.status, 0);
	assert_int_equal(q.req.len, 0);
	assert_int_equal(q.req.value, 0);
	assert_int_equal(e->peer.inflight, 0);
}

static void test_nbi_quiets_in_order(void **state)
{
	struct env *e = *state;
	struct tracked q1, q2;

	g_norder = 0;
	assert_int_equal(write_nbi(e, 0), 0);
	assert_int_equal(write_nbi(e, 1), 0);
	quiet_init(&q1);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q1.req), 0);
	assert_int_equal(write_nbi(e, 2), 0);
	quiet_init(&q2);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q2.req), 0);
	post_all(e);
	assert_int_equal(fk.ncalls, 3);
	/* The later quiet's operation lands first: it waits for q1's. */
	cq_ok(fk.calls[2].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(q2.calls, 0);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(q1.calls + q2.calls, 0);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(g_norder, 2);
	assert_ptr_equal(g_order[0], &q1);
	assert_ptr_equal(g_order[1], &q2);
	assert_int_equal(q1.req.len, 2);
	assert_int_equal(q2.req.len, 1);
	assert_int_equal(q1.status, 0);
	assert_int_equal(q2.status, 0);
}

static void test_nbi_cancelled_quiet_passes_report_on(void **state)
{
	struct env *e = *state;
	struct tracked q1, q2;

	g_norder = 0;
	assert_int_equal(write_nbi(e, 0), 0);
	assert_int_equal(write_nbi(e, 1), 0);
	quiet_init(&q1);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q1.req), 0);
	post_all(e);
	assert_int_equal(tern_req_cancel(e->ctx, &q1.req), 0);
	post_all(e);
	assert_int_equal(q1.calls, 1);
	assert_int_equal(q1.status, -ECANCELED);
	cq_err(fk.calls[0].context, -TERN_EPROV, 5, 0);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(write_nbi(e, 2), 0);
	quiet_init(&q2);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q2.req), 0);
	post_all(e);
	assert_int_equal(q2.calls, 0);
	cq_ok(fk.calls[2].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(q2.calls, 1);
	assert_int_equal(q2.req.status, -TERN_EPROV);
	assert_int_equal(q2.req.len, 3);
	assert_int_equal(q2.req.value, 1);
	assert_int_equal(q2.req.imm, 1);
	/* Cancelling a quiet that is done, or due, says so. */
	assert_int_equal(tern_req_cancel(e->ctx, &q2.req), -EALREADY);
}

static void test_nbi_cancelled_quiet_between_others(void **state)
{
	struct env *e = *state;
	struct tracked q1, q2, q3;

	g_norder = 0;
	assert_int_equal(write_nbi(e, 0), 0);
	quiet_init(&q1);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q1.req), 0);
	assert_int_equal(write_nbi(e, 1), 0);
	quiet_init(&q2);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q2.req), 0);
	assert_int_equal(write_nbi(e, 2), 0);
	quiet_init(&q3);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q3.req), 0);
	post_all(e);
	/* q2 goes: its operation is q3's to report. */
	assert_int_equal(tern_req_cancel(e->ctx, &q2.req), 0);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	cq_err(fk.calls[1].context, -TERN_EPROV, 5, 0);
	cq_ok(fk.calls[2].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(g_norder, 3);
	assert_ptr_equal(g_order[0], &q2); /* cancelled, called back first */
	assert_ptr_equal(g_order[1], &q1);
	assert_ptr_equal(g_order[2], &q3);
	assert_int_equal(q1.req.status, 0);
	assert_int_equal(q1.req.len, 1);
	assert_int_equal(q3.req.status, -TERN_EPROV);
	assert_int_equal(q3.req.len, 2);
	assert_int_equal(q3.req.imm, 2);
}

static void test_nbi_limit_in_flight(void **state)
{
	struct env *e = *state;
	struct tracked q;

	g_norder = 0;
	e->ctx->nbi_max = 3;
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nbi(e, i), 0);
	assert_int_equal(write_nbi(e, 3), -ENOBUFS);
	post_all(e);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	post_all(e);
	assert_int_equal(write_nbi(e, 3), 0);
	assert_int_equal(write_nbi(e, 4), -ENOBUFS);
	post_all(e);
	for (size_t i = 1; i < 4; i++)
		cq_ok(fk.calls[i].context, 64, 0, 0);
	quiet_init(&q);
	assert_int_equal(tern_quiet(e->ctx, NULL, &q.req), 0);
	post_all(e);
	assert_int_equal(q.calls, 1);
	assert_int_equal(q.req.len, 4); /* the refused ones never counted */
	assert_int_equal(q.req.status, 0);
}

static void test_nbi_refused_posts(void **state)
{
	struct env *e = *state;
	struct tracked q;

	g_norder = 0;
	assert_int_equal(tern_write_nbi(NULL, &e->mr, e->buf, 8, &e->rdesc, 0),
			 -EINVAL);
	assert_int_equal(tern_write_nbi(&e->peer, &e->mr, e->buf, 8, &e->rdesc,
					RLEN - 4),
			 -TERN_EBOUNDS);
	assert_int_equal(tern_write_nbi(&e->peer, &e->mr, e->buf,
					ENV_BUF_LEN + 1, &e->rdesc, 0),
			 -TERN_EBOUNDS);
	/* No read right in the descriptor. */
	assert_int_equal(
		tern_read_nbi(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0),
		-TERN_EACCESS);
	/* A staged region: its chunks complete as they leave. */
	e->mr.smr = &e->mr;
	assert_int_equal(write_nbi(e, 0), -TERN_ENOTSUP);
	e->mr.smr = NULL;
	assert_int_equal(tern_quiet(NULL, NULL, &q.req), -EINVAL);
	assert_int_equal(tern_quiet(e->ctx, NULL, NULL), -EINVAL);
	quiet_init(&q);
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q.req), 0);
	post_all(e);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(q.calls, 1);
	assert_int_equal(q.req.len, 0);
	assert_int_equal(e->ctx->nbi_inflight, 0);
	e->peer.removed = 1;
	assert_int_equal(tern_quiet(e->ctx, &e->peer, &q.req), -ECANCELED);
	assert_int_equal(write_nbi(e, 0), -ECANCELED);
	e->peer.removed = 0;
}

/* Thousands in flight: the pool grows to what is in flight, and is
 * reused, never grown, once they complete. */
static void test_nbi_many_in_flight(void **state)
{
	struct env *e = *state;
	unsigned long slabs = 0;
	struct tracked q;

	g_norder = 0;
	fk.auto_complete = 1;
	for (int round = 0; round < 3; round++) {
		size_t n = 0;

		for (unsigned int i = 0; i < 3000; i++)
			assert_int_equal(write_nbi(e, i), 0);
		assert_int_equal(e->ctx->nbi_inflight, 3000);
		quiet_init(&q);
		assert_int_equal(tern_quiet(e->ctx, &e->peer, &q.req), 0);
		while (q.calls == 0 && n++ < 100000) {
			(void)tern_progress(e->ctx);
			if (fk.ncalls > FAKE_MAX_CALLS / 2)
				fk.ncalls = 0; /* the record only */
		}
		assert_int_equal(q.calls, 1);
		assert_int_equal(q.req.status, 0);
		assert_int_equal(q.req.len, 3000);
		assert_int_equal(e->ctx->nbi_inflight, 0);
		if (round == 0)
			slabs = e->ctx->nbi_nslabs;
		assert_int_equal(e->ctx->nbi_nslabs, slabs);
	}
	assert_true(slabs >= 3000 / 64 && slabs <= 3000 / 64 + 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_nbi_posts_without_request),
		T(test_nbi_quiet_reports_first_error),
		T(test_nbi_quiets_in_order),
		T(test_nbi_cancelled_quiet_passes_report_on),
		T(test_nbi_cancelled_quiet_between_others),
		T(test_nbi_limit_in_flight),
		T(test_nbi_refused_posts),
		T(test_nbi_many_in_flight),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
