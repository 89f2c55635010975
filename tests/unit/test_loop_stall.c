/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of silent rails (src/engine/fence.c) over the fake provider
 * (loop_fixture.h), two rails to one peer: a rail that holds operations
 * and completes nothing for TERN_RAIL_STALL_MS goes down for the peers
 * whose operations it holds, and new operations avoid it; where the ctx
 * cannot fence it (no control messages here) what it holds waits for the
 * provider and completes as the provider says; a rail that completes
 * slowly but steadily is not silent; the watch stops once nothing is in
 * flight, and keeps no loop alive; 0 turns it off.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "fake_env.h"
#include "fake_prov.h"
#include "loop_fixture.h"

/* Two rails to the peer (loop_fixture.h), a rail silent after
 * @stall_ms, watched as tern_ctx_open() makes the watch. */
static void stall_rails(struct env *e, uint32_t stall_ms)
{
	two_rails(e, 60000);
	e->ctx->stall_ms = stall_ms;
	e->ctx->peers = &e->peer;
	tern__stall_init(e->ctx);
}

/* Progress for @ms, completing nothing. */
static void spin_ms(struct env *e, long ms)
{
	for (long i = 0; i < ms; i++) {
		tern_progress(e->ctx);
		sleep_ms(1);
	}
}

/* Rail 1 of a striped write completes nothing: down after the stall
 * time, for this peer; the next write goes on rail 0 only; nothing was
 * fenced (this ctx cannot), so the parts rail 1 holds stay posted there
 * and the write completes when they do, clean. */
static void test_silent_rail_avoided(void **state)
{
	struct env *e = *state;
	struct tracked w, s;
	uint64_t t0;

	stall_rails(e, 40);
	assert_int_equal(e->ctx->stall_idle, 1);
	assert_int_equal(e->ctx->fence_ok, 0);
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 4096, &e->rdesc,
				    0, &w.req),
			 0);
	assert_int_equal(e->ctx->stall_on, 1); /* watching from the post */
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 4);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(e->peer.down, 0);
	t0 = tern__now_ns();
	spin_ms(e, 15);
	if (tern__now_ns() - t0 < 30000000) /* not yet (unless descheduled) */
		assert_int_equal(e->peer.down, 0);
	spin_ms(e, 60);
	assert_int_equal(e->peer.down, 2);
	assert_int_equal(e->ctx->rails_down, 1);
	assert_int_equal(w.calls, 0);
	/* A new striped write: rail 0 only. */
	track_init(&s);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &s.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 6);
	assert_int_equal(fk.calls[4].rail, 0);
	assert_int_equal(fk.calls[5].rail, 0);
	cq_ok(fk.calls[4].context, 0, 0, 0);
	cq_ok(fk.calls[5].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.status, 0);
	/* Nothing went again: rail 1's parts are the provider's. */
	assert_int_equal(fk.ncalls, 6);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(e->peer.inflight, 0);
	/* Idle: the watch stops at its next look and keeps no loop alive. */
	spin_ms(e, 30);
	assert_int_equal(e->ctx->stall_on, 0);
	assert_int_equal(e->ctx->stall_idle, 1);
	assert_int_equal(tern__loop_alive(e->ctx), 0);
}

/* A rail that completes one part every 20 ms of a 300 ms stall time is
 * slow, not silent (4 parts on each rail). */
static void test_slow_rail_not_silent(void **state)
{
	struct env *e = *state;
	struct tracked w;

	stall_rails(e, 300);
	e->ctx->stripe_chunk = 512;
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 4096, &e->rdesc,
				    0, &w.req),
			 0);
	for (int i = 0; i < 8 && fk.ncalls < 8; i++)
		tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 8);
	for (unsigned int k = 0; k < 8; k += 2)
		cq_ok(fk.calls[k].context, 0, 0, 0);
	for (unsigned int k = 1; k < 8; k += 2) {
		spin_ms(e, 20);
		cq_ok(fk.calls[k].context, 0, 0, 0);
	}
	spin_ms(e, 5);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(e->peer.down, 0);
	assert_int_equal(e->ctx->rails_down, 0);
}

/* Both rails quiet (a peer that does not progress, or one gone): no rail
 * is silent, so none goes down; nor does the peer's last rail up. */
static void test_all_quiet_no_rail_down(void **state)
{
	struct env *e = *state;
	struct tracked w, s;

	stall_rails(e, 40);
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 4096, &e->rdesc,
				    0, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 4);
	spin_ms(e, 150);
	assert_int_equal(e->peer.down, 0);
	assert_int_equal(e->ctx->rails_down, 0);
	for (unsigned int k = 0; k < 4; k++)
		cq_ok(fk.calls[k].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.status, 0);
	/* One rail down already (an error): the other, the last, quiet,
	 * stays up. */
	track_init(&s);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &s.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 6);
	cq_err_path(fk.calls[4].context, -TERN_EPROV);
	tern_progress(e->ctx);
	assert_int_equal(e->peer.down, 1U << fk.calls[4].rail);
	spin_ms(e, 150);
	assert_int_equal(e->peer.down, 1U << fk.calls[4].rail);
	assert_int_equal(e->peer.gone, 0);
	assert_int_equal(s.calls, 0);
	for (unsigned int k = 5; k < fk.ncalls; k++)
		cq_ok(fk.calls[k].context, 0, 0, 0);
	tern_progress(e->ctx);
	tern_progress(e->ctx);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.status, 0);
}

/* TERN_RAIL_STALL_MS=0: never watched, however long a rail is quiet. */
static void test_watch_off(void **state)
{
	struct env *e = *state;
	struct tracked w;

	stall_rails(e, 0);
	assert_int_equal(e->ctx->stall_idle, 0);
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &w.req),
			 0);
	assert_int_equal(e->ctx->stall_on, 0);
	tern_progress(e->ctx);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	spin_ms(e, 30);
	assert_int_equal(e->peer.down, 0);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_silent_rail_avoided),
		T(test_slow_rail_not_silent),
		T(test_all_quiet_no_rail_down),
		T(test_watch_off),
#undef T
	};

	/* Rails going down are logged; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
