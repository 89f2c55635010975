/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Immediate-data counting (tern_imm_expect(),
 * tern_imm_count()): arrivals before and after an expectation, surplus,
 * errors, cancellation, and the table that counts them (growth, high-bit
 * keys, its cap).
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

/* ---- Immediate-data counting ---- */

static void test_imm_arrivals_before_expect(void **state)
{
	struct env *e = *state;
	struct tracked x;

	for (int i = 0; i < 3; i++)
		cq_imm(42);
	cq_imm(43);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_count(e->ctx, 42), 3);
	assert_int_equal(tern_imm_count(e->ctx, 43), 1);
	assert_int_equal(tern_imm_count(e->ctx, 44), 0);

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 42, 3, &x.req), 0);
	/* Satisfied already, yet it completes in progress, not here. */
	assert_int_equal(x.calls, 0);
	assert_int_equal(x.req.done, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.done, 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 3);
	assert_int_equal(tern_imm_count(e->ctx, 42), 0);
	assert_int_equal(tern_imm_count(e->ctx, 43), 1);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	/* No provider call is involved in counting. */
	assert_int_equal(fk.ncalls, 0);
}

static void test_imm_arrivals_after_expect(void **state)
{
	struct env *e = *state;
	struct tracked x;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 7, 2, &x.req), 0);
	cq_imm(7);
	cq_imm(8);
	cq_imm(0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	assert_int_equal(tern_imm_count(e->ctx, 8), 1);
	assert_int_equal(tern_imm_count(e->ctx, 0), 1);
	cq_imm(7);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(tern_imm_count(e->ctx, 7), 0);
	assert_int_equal(tern_imm_count(e->ctx, 8), 1);
}

static void test_imm_surplus_stays_counted(void **state)
{
	struct env *e = *state;
	struct tracked x, y;

	for (int i = 0; i < 5; i++)
		cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 99, 3, &x.req), 0);
	/* More arrive before the ready expectation is completed. */
	cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(tern_imm_count(e->ctx, 99), 3);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 99, 4, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(y.calls, 0);
	cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 99), 0);
	assert_int_equal(e->ctx->imm.used, 0);
}

static void test_imm_expect_errors(void **state)
{
	struct env *e = *state;
	struct tracked x, y, before;

	track_init(&x);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 0, &x.req), -EINVAL);
	assert_int_equal(tern_imm_expect(NULL, 5, 1, &x.req), -EINVAL);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 1, NULL), -EINVAL);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 2, &x.req), 0);
	before = y;
	assert_int_equal(tern_imm_expect(e->ctx, 5, 1, &y.req), -EBUSY);
	assert_memory_equal(&y, &before, sizeof(y));
	/* A satisfied-but-not-yet-completed one is pending too. */
	cq_imm(6);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_expect(e->ctx, 6, 1, &y.req), 0);
	assert_int_equal(tern_imm_expect(e->ctx, 6, 1, &before.req), -EBUSY);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(x.calls, 0);
	/* Closing ctx refuses new expectations. */
	e->ctx->closing = 1;
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 9, 1, &y.req), -ECANCELED);
	e->ctx->closing = 0;
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
}

static void test_imm_cancel(void **state)
{
	struct env *e = *state;
	struct tracked x, y;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 11, 3, &x.req), 0);
	cq_imm(11);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	/* Its callback runs from the next progress pass, never inside the
	 * cancel; until then it is not done, and cannot be cancelled. */
	assert_int_equal(x.calls, 0);
	assert_int_equal(x.req.done, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), -EALREADY);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.done_in_cb, 1);
	assert_int_equal(x.req.done, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), -EALREADY);
	/* The arrival stays counted and later ones do not touch x. */
	assert_int_equal(tern_imm_count(e->ctx, 11), 1);
	cq_imm(11);
	cq_imm(11);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	assert_int_equal(tern_imm_count(e->ctx, 11), 3);
	/* A new expectation is allowed and sees all three. */
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 11, 3, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.req.status, 0);

	/* Cancel one that was already satisfied: cancelled, exactly once. */
	cq_imm(12);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 12, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_imm_count(e->ctx, 12), 1);

	/* Cancelling one with no arrivals leaves the table empty. */
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 13, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_imm_count(e->ctx, 13), 0);
}

/* Spread keys, or keys that differ only in their high bits. */
static uint32_t imm_key(unsigned int i, int high)
{
	return high ? (uint32_t)i << 19 : 1000 + 7 * (uint32_t)i;
}

static void imm_many(struct env *e, int high, unsigned int n)
{
	struct tracked *x = calloc(n, sizeof(*x));
	int done;

	assert_non_null(x);
	/* Half the expectations come before any arrival. */
	for (unsigned int i = 0; i < n; i += 2) {
		track_init(&x[i]);
		assert_int_equal(
			tern_imm_expect(e->ctx, imm_key(i, high), 2, &x[i].req),
			0);
	}
	for (unsigned int i = 0; i < n; i++)
		cq_imm(imm_key(i, high));
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_true(e->ctx->imm.cap > 256);
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(tern_imm_count(e->ctx, imm_key(i, high)), 1);
	for (unsigned int i = 1; i < n; i += 2) {
		track_init(&x[i]);
		assert_int_equal(
			tern_imm_expect(e->ctx, imm_key(i, high), 2, &x[i].req),
			0);
	}
	assert_int_equal(tern_progress(e->ctx), 0);
	for (unsigned int i = 0; i < n; i++)
		cq_imm(imm_key(n - 1 - i, high));
	done = tern_progress(e->ctx);
	assert_int_equal(done, (int)n);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(x[i].calls, 1);
		assert_int_equal(x[i].req.status, 0);
		assert_int_equal(tern_imm_count(e->ctx, imm_key(i, high)), 0);
	}
	assert_int_equal(e->ctx->imm.used, 0);
	assert_int_equal(e->ctx->imm.dropped, 0);
	free(x);
}

static void test_imm_table_grows(void **state)
{
	imm_many(*state, 0, 5000);
}

/*
 * Keys equal in their low bits (a peer may pick such values) must not pile
 * into one probe run: with a hash that kept only the low bits, 5000 of
 * them took seconds (slot_del re-inserts the rest of a run).
 */
static void test_imm_table_grows_high_bit_keys(void **state)
{
	imm_many(*state, 1, 5000);
}

/* Peers cannot make the table grow without bound: past its cap, arrivals
 * of new values are dropped (and counted), known values still count. */
static void test_imm_table_full(void **state)
{
	struct env *e = *state;
	struct tracked x, y;
	size_t n;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 0, 2, &x.req), 0);
	fk.gen_next = 0;
	fk.gen_left = 1u << 20;
	for (int i = 0; i < 10 && fk.gen_left > 0; i++)
		assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(fk.gen_left, 0);
	n = e->ctx->imm.used;
	assert_true(n >= 1u << 18);
	assert_true(n < 1u << 20);
	assert_int_equal(e->ctx->imm.dropped, (1u << 20) - n);
	assert_int_equal(tern_imm_count(e->ctx, (uint32_t)n - 1), 1);
	assert_int_equal(tern_imm_count(e->ctx, (uint32_t)n), 0);
	/* A new value has no room; a known one still counts and completes. */
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 1u << 30, 1, &y.req), -ENOSPC);
	assert_int_equal(x.calls, 0);
	cq_imm(0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, 0);
	/* Its slot is free again (no arrivals left): room for one more. */
	assert_int_equal(tern_imm_expect(e->ctx, 1u << 30, 1, &y.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &y.req), 0);
}

static void test_imm_ignores_plain_remote_write(void **state)
{
	struct env *e = *state;
	struct fake_cqe c = {
		.ent.e = { .flags = TERN__CQ_REMOTE_WRITE, .data = 42 },
	};

	fake_cq_push(0, &c);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_count(e->ctx, 42), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_imm_arrivals_before_expect),
		T(test_imm_arrivals_after_expect),
		T(test_imm_surplus_stays_counted),
		T(test_imm_expect_errors),
		T(test_imm_cancel),
		T(test_imm_table_grows),
		T(test_imm_table_grows_high_bit_keys),
		T(test_imm_table_full),
		T(test_imm_ignores_plain_remote_write),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
