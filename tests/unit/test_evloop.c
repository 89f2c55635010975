/* SPDX-License-Identifier: MIT */
/*
 * The event loop without a provider: timers (order, repeat, restart from
 * their own callback), deferred work (next round, FIFO, cancel), fd
 * watchers, tern_run() modes, tern_stop() from a callback and from another
 * thread, tern_wait() timeouts, and the embedding calls. The ctx has no
 * rails, so nothing calls libfabric.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"

static int setup(void **state)
{
	struct tern_ctx *ctx = calloc(1, sizeof(*ctx));

	if (ctx == NULL)
		return -1;
	ctx->nrails = 0;
	if (tern__imm_init(&ctx->imm) != 0 || tern__loop_init(ctx) != 0) {
		free(ctx);
		return -1;
	}
	*state = ctx;
	return 0;
}

static int teardown(void **state)
{
	struct tern_ctx *ctx = *state;

	tern__loop_fini(ctx);
	tern__imm_fini(&ctx->imm);
	free(ctx);
	return 0;
}

static uint64_t ms_since(uint64_t t0)
{
	return (tern__now_ns() - t0) / 1000000;
}

/* ---- timers ---- */

struct rec {
	int order[16];
	int n;
	struct tern_ctx *ctx;
};

struct tmr {
	struct tern_timer t;
	struct rec *rec;
	int id;
	int runs;
	int stop_after; /* repeating: stop itself after this many runs */
};

static void tmr_cb(struct tern_timer *t)
{
	struct tmr *m = (struct tmr *)t;

	m->runs++;
	if (m->rec->n < 16)
		m->rec->order[m->rec->n++] = m->id;
	if (m->stop_after != 0 && m->runs >= m->stop_after)
		tern_timer_stop(t);
}

static void tmr_init(struct tmr *m, struct rec *r, int id)
{
	memset(m, 0, sizeof(*m));
	tern_timer_init(&m->t, tmr_cb, m);
	m->rec = r;
	m->id = id;
}

static void test_timer_order(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tmr m[5];
	struct rec r = { 0 };
	uint64_t t0 = tern__now_ns();

	for (int i = 0; i < 5; i++)
		tmr_init(&m[i], &r, i);
	assert_int_equal(tern_timer_start(ctx, &m[0].t, 30, 0), 0);
	assert_int_equal(tern_timer_start(ctx, &m[1].t, 10, 0), 0);
	assert_int_equal(tern_timer_start(ctx, &m[2].t, 20, 0), 0);
	assert_int_equal(tern_timer_start(ctx, &m[3].t, 10, 0), 0);
	assert_int_equal(tern_timer_start(ctx, &m[4].t, 5, 0), 0);
	/* Stopped: never runs. Restarted: runs at its new time only. */
	assert_int_equal(tern_timer_stop(&m[4].t), 0);
	assert_false(tern_timer_active(&m[4].t));
	assert_int_equal(tern_timer_start(ctx, &m[2].t, 40, 0), 0);
	assert_true(tern_timer_active(&m[2].t));
	assert_int_equal(ctx->ntimers, 4);
	/* Nothing else is alive: DEFAULT returns after the last timer. */
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_true(ms_since(t0) >= 40);
	assert_int_equal(r.n, 4);
	assert_int_equal(r.order[0], 1);
	assert_int_equal(r.order[1], 3); /* same due time: start order */
	assert_int_equal(r.order[2], 0);
	assert_int_equal(r.order[3], 2);
	assert_int_equal(m[4].runs, 0);
	assert_int_equal(ctx->ntimers, 0);
	assert_null(ctx->timer_head);
}

static void test_timer_repeat(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tmr m, once;
	struct rec r = { 0 };
	uint64_t t0 = tern__now_ns();

	tmr_init(&m, &r, 7);
	tmr_init(&once, &r, 8);
	m.stop_after = 3;
	assert_int_equal(tern_timer_start(ctx, &m.t, 2, 5), 0);
	assert_int_equal(tern_timer_start(ctx, &once.t, 6, 0), 0);
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_int_equal(m.runs, 3);
	assert_int_equal(once.runs, 1);
	assert_true(ms_since(t0) >= 12); /* 2, 7, 12 */
	/* 7 at 2 ms, 8 at 6 ms, 7 at 7 and 12 ms. */
	assert_int_equal(r.n, 4);
	assert_int_equal(r.order[0], 7);
	assert_int_equal(r.order[1], 8);
	assert_int_equal(r.order[2], 7);
	assert_int_equal(r.order[3], 7);
	/* Bad arguments. */
	assert_int_equal(tern_timer_start(NULL, &m.t, 1, 0), -EINVAL);
	assert_int_equal(tern_timer_start(ctx, NULL, 1, 0), -EINVAL);
	assert_int_equal(tern_timer_start(ctx, &m.t, UINT64_MAX, 0), -EINVAL);
	assert_int_equal(tern_timer_stop(NULL), -EINVAL);
	assert_int_equal(tern_timer_stop(&m.t), 0); /* not active: fine */
}

/* A 0 ms timer restarted from its own callback runs once per round: the
 * round that runs it must end. */
struct self_tmr {
	struct tern_timer t;
	int runs;
};

static void self_cb(struct tern_timer *t)
{
	struct self_tmr *s = (struct self_tmr *)t;

	if (++s->runs < 5)
		tern_timer_start(t->_priv.ctx, t, 0, 0);
}

static void test_timer_restart_in_cb(void **state)
{
	struct tern_ctx *ctx = *state;
	struct self_tmr s = { .runs = 0 };
	int rounds = 0;

	tern_timer_init(&s.t, self_cb, NULL);
	assert_int_equal(tern_timer_start(ctx, &s.t, 0, 0), 0);
	while (tern_timer_active(&s.t) && rounds < 1000) {
		int n = tern_progress(ctx);

		assert_true(n == 0 || n == 1);
		rounds++;
	}
	assert_int_equal(s.runs, 5);
	assert_true(rounds >= 5);
}

/* ---- deferred work ---- */

struct dfr {
	struct tern_defer d;
	struct rec *rec;
	int id;
	struct dfr *chain; /* deferred from this one's callback */
	struct dfr *cancel;
};

static void dfr_cb(struct tern_defer *d)
{
	struct dfr *f = d->data;

	if (f->rec->n < 16)
		f->rec->order[f->rec->n++] = f->id;
	if (f->chain != NULL)
		tern_defer(f->rec->ctx, &f->chain->d, dfr_cb, f->chain);
	if (f->cancel != NULL)
		assert_int_equal(tern_defer_cancel(&f->cancel->d), 0);
}

static void test_defer(void **state)
{
	struct tern_ctx *ctx = *state;
	struct rec r = { .ctx = ctx };
	struct dfr f[5];

	memset(f, 0, sizeof(f));
	for (int i = 0; i < 5; i++) {
		f[i].rec = &r;
		f[i].id = i;
	}
	f[0].chain = &f[3]; /* runs in the round after */
	f[1].cancel = &f[2];
	assert_int_equal(tern_defer(ctx, &f[0].d, dfr_cb, &f[0]), 0);
	assert_int_equal(tern_defer(ctx, &f[1].d, dfr_cb, &f[1]), 0);
	assert_int_equal(tern_defer(ctx, &f[2].d, dfr_cb, &f[2]), 0);
	assert_int_equal(tern_defer(ctx, &f[4].d, dfr_cb, &f[4]), 0);
	assert_int_equal(tern_defer_cancel(&f[4].d), 0);
	assert_int_equal(tern_defer_cancel(&f[4].d), -EALREADY);
	/* Queued again: only one run. */
	assert_int_equal(tern_defer(ctx, &f[0].d, dfr_cb, &f[0]), 0);
	assert_int_equal(r.n, 0); /* never inside the call */
	assert_int_equal(tern_ctx_arm(ctx), -EAGAIN);
	assert_int_equal(tern_ctx_timeout(ctx), 0);
	assert_int_equal(tern_progress(ctx), 2); /* 0 and 1; 1 cancels 2 */
	assert_int_equal(r.n, 2);
	assert_int_equal(r.order[0], 0);
	assert_int_equal(r.order[1], 1);
	assert_int_equal(tern_progress(ctx), 1); /* 3, deferred by 0 */
	assert_int_equal(r.order[2], 3);
	assert_int_equal(tern_progress(ctx), 0);
	assert_int_equal(r.n, 3);
	assert_int_equal(tern_defer(NULL, &f[0].d, dfr_cb, NULL), -EINVAL);
	assert_int_equal(tern_defer(ctx, &f[0].d, NULL, NULL), -EINVAL);
}

/* ---- fd watchers, stop, run modes ---- */

struct iow {
	struct tern_io io;
	int calls;
	unsigned int events;
	char got;
	int stop_loop;
};

static void io_cb(struct tern_io *io, unsigned int events)
{
	struct iow *w = (struct iow *)io;

	w->calls++;
	w->events = events;
	if (events & TERN_IO_READ)
		assert_int_equal(read(io->fd, &w->got, 1), 1);
	if (w->stop_loop)
		tern_stop(io->_priv.ctx);
}

static void test_io(void **state)
{
	struct tern_ctx *ctx = *state;
	struct iow w = { .calls = 0 }, w2 = { .calls = 0 };
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	assert_int_equal(
		tern_io_start(ctx, &w.io, fds[0], TERN_IO_READ, io_cb, NULL),
		0);
	assert_int_equal(
		tern_io_start(ctx, &w2.io, fds[0], TERN_IO_READ, io_cb, NULL),
		-EEXIST);
	assert_int_equal(
		tern_io_start(ctx, &w2.io, -1, TERN_IO_READ, io_cb, NULL),
		-EINVAL);
	/* Nothing to read: a NOWAIT round runs no callback. */
	assert_int_equal(tern_run(ctx, TERN_RUN_NOWAIT), 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(write(fds[1], "x", 1), 1);
	assert_int_equal(tern_run(ctx, TERN_RUN_NOWAIT), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.got, 'x');
	assert_true(w.events & TERN_IO_READ);
	/* ONCE sleeps until the fd is readable. */
	w.stop_loop = 1;
	assert_int_equal(write(fds[1], "y", 1), 1);
	assert_int_equal(tern_run(ctx, TERN_RUN_ONCE), 0);
	assert_int_equal(w.got, 'y');
	/* DEFAULT runs while the watcher is alive, until tern_stop(). */
	assert_int_equal(write(fds[1], "z", 1), 1);
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_int_equal(w.got, 'z');
	assert_int_equal(w.calls, 3);
	/* Hang-up is reported as readable. */
	assert_int_equal(tern_io_stop(&w.io), 0);
	assert_int_equal(ctx->nios, 0);
	assert_int_equal(write(fds[1], "q", 1), 1);
	assert_int_equal(tern_run(ctx, TERN_RUN_NOWAIT), 0);
	assert_int_equal(w.calls, 3); /* stopped: not called */
	close(fds[0]);
	close(fds[1]);
}

/* A loop that never goes idle (work deferred again and again, as a busy
 * server's completions are) still runs fd callbacks: from tern_run(ONCE)
 * rounds and from plain tern_progress() calls. */
static void requeue(struct tern_defer *d)
{
	tern_defer(d->_priv.ctx, d, requeue, NULL);
}

static void test_io_not_starved(void **state)
{
	struct tern_ctx *ctx = *state;
	struct iow w = { .calls = 0 };
	struct tern_defer d;
	int fds[2], i;

	assert_int_equal(pipe(fds), 0);
	assert_int_equal(
		tern_io_start(ctx, &w.io, fds[0], TERN_IO_READ, io_cb, NULL),
		0);
	memset(&d, 0, sizeof(d));
	assert_int_equal(tern_defer(ctx, &d, requeue, NULL), 0);
	assert_int_equal(write(fds[1], "a", 1), 1);
	for (i = 0; i < 10000 && w.calls == 0; i++)
		assert_true(tern_run(ctx, TERN_RUN_ONCE) >= 0);
	assert_int_equal(w.calls, 1);
	assert_true(i < 1000); /* every 64th round looks at the fds */
	assert_int_equal(write(fds[1], "b", 1), 1);
	for (i = 0; i < 10000 && w.calls == 1; i++)
		assert_true(tern_progress(ctx) >= 0);
	assert_int_equal(w.calls, 2);
	assert_int_equal(w.got, 'b');
	tern_defer_cancel(&d);
	assert_int_equal(tern_io_stop(&w.io), 0);
	close(fds[0]);
	close(fds[1]);
}

/* tern_stop() from another thread wakes a loop sleeping on an fd. */
static void *stopper(void *arg)
{
	struct timespec ts = { .tv_nsec = 50 * 1000000L };

	nanosleep(&ts, NULL);
	tern_stop(arg);
	return NULL;
}

static void test_stop_from_thread(void **state)
{
	struct tern_ctx *ctx = *state;
	struct iow w = { .calls = 0 };
	uint64_t t0 = tern__now_ns();
	pthread_t th;
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	assert_int_equal(
		tern_io_start(ctx, &w.io, fds[0], TERN_IO_READ, io_cb, NULL),
		0);
	assert_int_equal(pthread_create(&th, NULL, stopper, ctx), 0);
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	pthread_join(th, NULL);
	assert_true(ms_since(t0) >= 50);
	assert_int_equal(w.calls, 0);
	assert_int_equal(ctx->stop, 0); /* consumed */
	tern_io_stop(&w.io);
	close(fds[0]);
	close(fds[1]);
}

/* ---- waiting ---- */

static void test_wait_timeout_runs_timers(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tern_req never;
	struct tmr m;
	struct rec r = { 0 };
	uint64_t t0 = tern__now_ns();

	tmr_init(&m, &r, 1);
	tern_req_init(&never, NULL, NULL);
	assert_int_equal(tern_timer_start(ctx, &m.t, 10, 0), 0);
	assert_int_equal(tern_wait(ctx, &never, 60), -ETIMEDOUT);
	assert_true(ms_since(t0) >= 60);
	assert_int_equal(m.runs, 1); /* timers run inside tern_wait */
	/* A wait without a request returns once a callback ran. */
	assert_int_equal(tern_timer_start(ctx, &m.t, 5, 0), 0);
	assert_int_equal(tern_wait(ctx, NULL, 2000), 0);
	assert_int_equal(m.runs, 2);
	assert_int_equal(tern_wait(ctx, NULL, 20), -ETIMEDOUT);
	assert_int_equal(tern_wait(ctx, NULL, 0), -ETIMEDOUT);
}

static void test_embedding(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tmr m;
	struct rec r = { 0 };
	int t;

	tmr_init(&m, &r, 1);
	assert_true(tern_ctx_fd(ctx) >= 0);
	assert_int_equal(tern_ctx_fd(NULL), -EINVAL);
	/* No wait fds (no rails here): the caller polls every 1 ms. */
	assert_int_equal(tern_ctx_timeout(ctx), 1);
	assert_int_equal(tern_ctx_arm(ctx), 0);
	assert_int_equal(tern_timer_start(ctx, &m.t, 0, 0), 0);
	t = tern_ctx_timeout(ctx);
	assert_true(t == 0 || t == 1);
	nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
	assert_true(m.runs == 0); /* never outside the loop */
	/* Due: arm says run first. */
	assert_int_equal(tern_ctx_arm(ctx), -EAGAIN);
	assert_int_equal(tern_run(ctx, TERN_RUN_NOWAIT), 0);
	assert_int_equal(m.runs, 1);
	assert_int_equal(tern_ctx_arm(ctx), 0);
	assert_int_equal(tern_run(NULL, TERN_RUN_NOWAIT), -EINVAL);
	assert_int_equal(tern_run(ctx, (enum tern_run_mode)7), -EINVAL);
}

/* tern_run() from a callback of the same ctx is refused. */
static int nested_ret = 1;

static void nested_cb(struct tern_timer *t)
{
	nested_ret = tern_run(t->_priv.ctx, TERN_RUN_NOWAIT);
}

static void test_run_nested(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tern_timer t;

	tern_timer_init(&t, nested_cb, NULL);
	assert_int_equal(tern_timer_start(ctx, &t, 0, 0), 0);
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_int_equal(nested_ret, -EDEADLK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_timer_order),
		T(test_timer_repeat),
		T(test_timer_restart_in_cb),
		T(test_defer),
		T(test_io),
		T(test_io_not_starved),
		T(test_stop_from_thread),
		T(test_wait_timeout_runs_timers),
		T(test_embedding),
		T(test_run_nested),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
