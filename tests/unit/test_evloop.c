/* SPDX-License-Identifier: MIT */
/*
 * The event loop without a provider: timers (order, repeat, restart from
 * their own callback), deferred work (next round, FIFO, cancel), fd
 * watchers, tern_run() modes, tern_stop() from a callback and from another
 * thread, tern_wait() timeouts, and the embedding calls; with the argument
 * "threads", the calls other threads make: tern_stop(), and
 * tern_task_submit() (order, -EBUSY, resubmits, waking a sleeping loop, the
 * close). The ctx has no rails, so nothing
 * calls libfabric.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

	if (ctx == NULL)
		return 0; /* the test closed it */
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
	assert_int_equal(atomic_load(&ctx->stop), 0); /* consumed */
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

/* ---- tasks from other threads (label threads: evloop_threads) ---- */

#define TSEQ 200 /* tasks per submitting thread */

struct tsk {
	struct tern_task t;
	int id;		  /* thread << 16 | sequence */
	atomic_int calls; /* callbacks run */
	int status;
	int resubmit; /* from its callback, this many times more */
	int in_submit;
};

struct order {
	struct tern_ctx *ctx;
	int last[4]; /* per thread: the last sequence seen */
	int bad;     /* out of order, or twice */
	atomic_int ran;
};

static struct order *order_rec;

static void order_cb(struct tern_task *t, int status)
{
	struct tsk *k = (struct tsk *)t;
	struct order *o = t->data;
	int th = k->id >> 16, seq = k->id & 0xffff;

	assert_ptr_equal(o, order_rec);
	k->status = status;
	atomic_fetch_add(&k->calls, 1);
	if (seq != o->last[th] + 1)
		o->bad++;
	o->last[th] = seq;
	atomic_fetch_add(&o->ran, 1);
}

struct submitter {
	struct tern_ctx *ctx;
	struct order *o;
	struct tsk *k; /* TSEQ of them */
	int th;
	int failed;
};

static void *submit_many(void *arg)
{
	struct submitter *s = arg;

	for (int i = 0; i < TSEQ; i++) {
		s->k[i].id = s->th << 16 | i;
		if (tern_task_submit(s->ctx, &s->k[i].t, order_cb, s->o) != 0)
			s->failed++;
	}
	return NULL;
}

/* Tasks run on the ctx's thread, from progress, in the order each thread
 * submitted them, each once; never inside the submit. */
static void test_task_order(void **state)
{
	struct tern_ctx *ctx = *state;
	static struct tsk k[3][TSEQ];
	struct submitter s[3];
	struct order o = { .ctx = ctx };
	pthread_t th[2];
	uint64_t t0 = tern__now_ns();

	memset(k, 0, sizeof(k));
	order_rec = &o;
	for (int i = 0; i < 3; i++) {
		s[i] = (struct submitter){
			.ctx = ctx, .o = &o, .k = k[i], .th = i
		};
		o.last[i] = -1;
	}
	/* From this thread first: nothing runs inside the call. */
	submit_many(&s[0]);
	assert_int_equal(atomic_load(&o.ran), 0);
	assert_int_equal(tern_ctx_arm(ctx), -EAGAIN);
	assert_int_equal(tern_ctx_timeout(ctx), 0);
	/* Two threads submit while this one runs the loop. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			pthread_create(&th[i], NULL, submit_many, &s[i + 1]),
			0);
	while (atomic_load(&o.ran) < 3 * TSEQ && ms_since(t0) < 10000)
		assert_true(tern_progress(ctx) >= 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(s[0].failed + s[1].failed + s[2].failed, 0);
	assert_int_equal(atomic_load(&o.ran), 3 * TSEQ);
	assert_int_equal(o.bad, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(o.last[i], TSEQ - 1);
		for (int j = 0; j < TSEQ; j++) {
			assert_int_equal(atomic_load(&k[i][j].calls), 1);
			assert_int_equal(k[i][j].status, 0);
		}
	}
	assert_int_equal(tern_progress(ctx), 0);
	assert_int_equal(tern_ctx_arm(ctx), 0);
	/* Bad arguments. */
	assert_int_equal(tern_task_submit(NULL, &k[0][0].t, order_cb, NULL),
			 -EINVAL);
	assert_int_equal(tern_task_submit(ctx, NULL, order_cb, NULL), -EINVAL);
	assert_int_equal(tern_task_submit(ctx, &k[0][0].t, NULL, NULL),
			 -EINVAL);
	assert_int_equal(tern_progress(ctx), 0);
}

static void count_cb(struct tern_task *t, int status)
{
	struct tsk *k = (struct tsk *)t;

	k->status = status;
	atomic_fetch_add(&k->calls, 1);
	if (k->resubmit > 0) {
		k->resubmit--;
		k->in_submit = 1;
		assert_int_equal(
			tern_task_submit(t->_priv.ctx, t, count_cb, t->data),
			0);
		k->in_submit = 0;
	}
}

/* A queued task: -EBUSY, and the refused submit changes nothing. */
static void test_task_busy(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tsk k = { .id = 0 };
	int other;

	assert_int_equal(tern_task_submit(ctx, &k.t, count_cb, &k), 0);
	assert_int_equal(tern_task_submit(ctx, &k.t, order_cb, &other), -EBUSY);
	assert_int_equal(atomic_load(&k.calls), 0);
	/* The callback and data of the submit that was taken. */
	assert_int_equal(tern_progress(ctx), 1);
	assert_int_equal(atomic_load(&k.calls), 1);
	assert_int_equal(k.status, 0);
	assert_ptr_equal(k.t.cb, count_cb);
	assert_ptr_equal(k.t.data, &k);
	/* Its callback ran: the caller's again. */
	assert_int_equal(tern_task_submit(ctx, &k.t, count_cb, &k), 0);
	assert_int_equal(tern_progress(ctx), 1);
	assert_int_equal(atomic_load(&k.calls), 2);
	assert_int_equal(tern_progress(ctx), 0);
}

/* A callback submits its own task again: it runs in the next pass, so a
 * task that keeps submitting itself cannot hold a pass forever. */
static void test_task_resubmit_in_cb(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tsk k = { .resubmit = 4 };
	int passes = 0;

	assert_int_equal(tern_task_submit(ctx, &k.t, count_cb, &k), 0);
	while (atomic_load(&k.calls) < 5 && passes < 100) {
		assert_int_equal(tern_progress(ctx), 1);
		passes++;
	}
	assert_int_equal(passes, 5);
	assert_int_equal(tern_progress(ctx), 0);
	/* TERN_RUN_DEFAULT runs while tasks are queued, then returns. */
	k.resubmit = 3;
	assert_int_equal(tern_task_submit(ctx, &k.t, count_cb, &k), 0);
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_int_equal(atomic_load(&k.calls), 9);
	/* An idle ctx with none returns at once, as without tasks. */
	assert_int_equal(tern_run(ctx, TERN_RUN_DEFAULT), 0);
	assert_int_equal(atomic_load(&k.calls), 9);
}

/* Another thread submits a sleeping loop's task: it wakes. */
struct waker {
	struct tern_ctx *ctx;
	struct tsk *k;
	int delay_ms;
	uint64_t submitted_ns;
	int ret;
};

static void *submit_later(void *arg)
{
	struct waker *w = arg;
	struct timespec ts = { .tv_nsec = w->delay_ms * 1000000L };

	nanosleep(&ts, NULL);
	w->submitted_ns = tern__now_ns();
	w->ret = tern_task_submit(w->ctx, &w->k->t, count_cb, w->k);
	return NULL;
}

static uint64_t ran_ns;

static void stamp_cb(struct tern_task *t, int status)
{
	ran_ns = tern__now_ns();
	count_cb(t, status);
}

static void *submit_later_stamp(void *arg)
{
	struct waker *w = arg;
	struct timespec ts = { .tv_nsec = w->delay_ms * 1000000L };

	nanosleep(&ts, NULL);
	w->submitted_ns = tern__now_ns();
	w->ret = tern_task_submit(w->ctx, &w->k->t, stamp_cb, w->k);
	return NULL;
}

static void test_task_wakes(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tsk k = { .id = 0 }, k2 = { .id = 0 };
	struct waker w = { .ctx = ctx, .k = &k, .delay_ms = 50 };
	struct tmr guard;
	struct rec r = { 0 };
	struct pollfd pfd = { .fd = tern_ctx_fd(ctx), .events = POLLIN };
	uint64_t val = 0, t0;
	pthread_t th;

	/* Sleep in epoll with no timeout, as a ctx whose rails all have
	 * wait fds does: only the submit's wakeup (or the guard) ends it. */
	ctx->can_wait = 1;
	tmr_init(&guard, &r, 1);
	assert_int_equal(tern_timer_start(ctx, &guard.t, 10000, 0), 0);
	t0 = tern__now_ns();
	assert_int_equal(pthread_create(&th, NULL, submit_later_stamp, &w), 0);
	assert_int_equal(tern_run(ctx, TERN_RUN_ONCE), 0);
	pthread_join(th, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(atomic_load(&k.calls), 1);
	assert_int_equal(guard.runs, 0);
	assert_true(ms_since(t0) >= 50);
	/* From the submit to the callback: a wakeup, not a poll. */
	assert_true(ran_ns - w.submitted_ns < 1000000000ULL);
	print_message("tern_run(ONCE) woken %.1f us after the submit\n",
		      (double)(ran_ns - w.submitted_ns) / 1e3);
	/* tern_wait(ctx, NULL) likewise. */
	w.submitted_ns = 0;
	assert_int_equal(pthread_create(&th, NULL, submit_later, &w), 0);
	assert_int_equal(tern_wait(ctx, NULL, 5000), 0);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&k.calls), 2);
	assert_int_equal(guard.runs, 0);
	/* The embedding fd: readable once a task is queued, and a burst
	 * writes the eventfd once. */
	while (read(ctx->wakefd, &val, sizeof(val)) > 0)
		;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(tern_ctx_arm(ctx), 0);
	assert_int_equal(tern_task_submit(ctx, &k.t, count_cb, &k), 0);
	assert_int_equal(tern_task_submit(ctx, &k2.t, count_cb, &k2), 0);
	assert_int_equal(poll(&pfd, 1, 0), 1);
	assert_int_equal(tern_ctx_arm(ctx), -EAGAIN);
	assert_int_equal(read(ctx->wakefd, &val, sizeof(val)),
			 (ssize_t)sizeof(val));
	assert_int_equal(val, 1);
	assert_int_equal(tern_run(ctx, TERN_RUN_NOWAIT), 0);
	assert_int_equal(atomic_load(&k.calls), 3);
	assert_int_equal(atomic_load(&k2.calls), 1);
	assert_int_equal(tern_ctx_arm(ctx), 0);
	tern_timer_stop(&guard.t);
}

/* Another thread submits again once the callback has started. */
struct again {
	struct tern_task t;
	struct tern_ctx *ctx;
	atomic_int started;
	atomic_int calls;
	int ret;
};

static void again_cb(struct tern_task *t, int status)
{
	struct again *a = (struct again *)t;

	(void)status;
	atomic_fetch_add(&a->calls, 1);
	atomic_store(&a->started, 1);
}

static void *resubmit_when_started(void *arg)
{
	struct again *a = arg;
	uint64_t t0 = tern__now_ns();

	while (!atomic_load(&a->started) && ms_since(t0) < 5000)
		sched_yield();
	a->ret = tern_task_submit(a->ctx, &a->t, again_cb, a);
	return NULL;
}

static void test_task_resubmit_from_thread(void **state)
{
	struct tern_ctx *ctx = *state;
	struct again a;
	pthread_t th;
	uint64_t t0 = tern__now_ns();

	memset(&a, 0, sizeof(a));
	a.ctx = ctx;
	assert_int_equal(tern_task_submit(ctx, &a.t, again_cb, &a), 0);
	assert_int_equal(pthread_create(&th, NULL, resubmit_when_started, &a),
			 0);
	while (atomic_load(&a.calls) < 2 && ms_since(t0) < 10000)
		assert_true(tern_progress(ctx) >= 0);
	pthread_join(th, NULL);
	assert_int_equal(a.ret, 0);
	assert_int_equal(atomic_load(&a.calls), 2);
}

/* Closing: queued tasks are called back -ECANCELED inside the close,
 * once; submits from then on (their callbacks' own too) are refused. */
static struct tern_ctx *closing_ctx;
static int refused_in_cancel;

static void cancel_cb(struct tern_task *t, int status)
{
	struct tsk *k = (struct tsk *)t;

	count_cb(t, status);
	/* Refused, and nothing runs. */
	if (tern_task_submit(closing_ctx, t, count_cb, k) == -ECANCELED)
		refused_in_cancel++;
}

static void test_task_close_cancels(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tsk k[3];

	memset(k, 0, sizeof(k));
	closing_ctx = ctx;
	refused_in_cancel = 0;
	for (int i = 0; i < 3; i++)
		assert_int_equal(
			tern_task_submit(ctx, &k[i].t, cancel_cb, &k[i]), 0);
	assert_int_equal(tern_ctx_close(ctx), 0);
	*state = NULL; /* gone */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&k[i].calls), 1);
		assert_int_equal(k[i].status, -ECANCELED);
	}
	assert_int_equal(refused_in_cancel, 3);
}

/* A task's callback closes its ctx: the tasks queued behind it are
 * called back -ECANCELED, not run, and the pass returns -TERN_ECLOSED. */
static void close_in_task_cb(struct tern_task *t, int status)
{
	struct tsk *k = (struct tsk *)t;

	count_cb(t, status);
	assert_int_equal(tern_ctx_close(t->_priv.ctx), 0);
	/* Refused from the moment the close starts. */
	assert_int_equal(tern_task_submit(t->_priv.ctx, t, count_cb, k),
			 -ECANCELED);
}

static void test_task_close_in_cb(void **state)
{
	struct tern_ctx *ctx = *state;
	struct tsk k[3];

	memset(k, 0, sizeof(k));
	assert_int_equal(tern_task_submit(ctx, &k[0].t, count_cb, &k[0]), 0);
	assert_int_equal(
		tern_task_submit(ctx, &k[1].t, close_in_task_cb, &k[1]), 0);
	assert_int_equal(tern_task_submit(ctx, &k[2].t, count_cb, &k[2]), 0);
	assert_int_equal(tern_progress(ctx), -TERN_ECLOSED);
	*state = NULL;
	assert_int_equal(atomic_load(&k[0].calls), 1);
	assert_int_equal(k[0].status, 0);
	assert_int_equal(atomic_load(&k[1].calls), 1);
	assert_int_equal(k[1].status, 0);
	assert_int_equal(atomic_load(&k[2].calls), 1);
	assert_int_equal(k[2].status, -ECANCELED);
}

/*
 * Threads submit while the ctx is being closed. Each keeps its own task
 * queued (-EBUSY while it is) and new ones besides; the close must call
 * the queued ones back -ECANCELED and refuse the rest. The cancelled
 * task's callback holds the close until its thread has seen a refusal:
 * the close thus cannot free the ctx under a thread that may submit
 * again (a thread must stop before the close returns).
 */
#define RACERS 4

struct racer {
	struct tern_ctx *ctx;
	struct tern_task mine; /* kept queued */
	struct tern_task fresh[64];
	atomic_int hold;   /* the loop stopped: spin, do not yield */
	atomic_int parked; /* -EBUSY since: mine is queued for good */
	atomic_int saw_refusal;
	atomic_int mine_calls, mine_cancelled;
	atomic_int fresh_calls;
	int ok, busy, bad;
};

static void mine_cb(struct tern_task *t, int status)
{
	struct racer *r = t->data;
	uint64_t t0 = tern__now_ns();

	atomic_fetch_add(&r->mine_calls, 1);
	if (status != -ECANCELED)
		return;
	atomic_fetch_add(&r->mine_cancelled, 1);
	while (!atomic_load(&r->saw_refusal) && ms_since(t0) < 10000)
		sched_yield();
}

static void fresh_cb(struct tern_task *t, int status)
{
	struct racer *r = t->data;

	(void)status;
	atomic_fetch_add(&r->fresh_calls, 1);
}

static void *race_submit(void *arg)
{
	struct racer *r = arg;
	unsigned int i = 0;

	for (;;) {
		int hold = atomic_load(&r->hold);
		int ret = tern_task_submit(r->ctx, &r->mine, mine_cb, r);

		if (ret == 0 || ret == -EBUSY) {
			r->ok += ret == 0;
			r->busy += ret == -EBUSY;
			/* Refused as queued once nothing runs it: it stays
			 * queued (a submit in progress would not do). */
			if (ret == -EBUSY && hold)
				atomic_store(&r->parked, 1);
			if (ret == -EBUSY && !hold)
				sched_yield(); /* let the loop run it */
		} else if (ret == -ECANCELED) {
			break;
		} else {
			r->bad++;
			break;
		}
		ret = tern_task_submit(r->ctx, &r->fresh[i % 64], fresh_cb, r);
		if (ret == -ECANCELED)
			break;
		if (ret != 0 && ret != -EBUSY)
			r->bad++;
		i++;
	}
	atomic_store(&r->saw_refusal, 1);
	return NULL;
}

static void test_task_submit_while_closing(void **state)
{
	struct tern_ctx *ctx = *state;
	static struct racer r[RACERS];
	pthread_t th[RACERS];
	int ready = 0;
	uint64_t t0 = tern__now_ns();

	memset(r, 0, sizeof(r));
	for (int i = 0; i < RACERS; i++) {
		r[i].ctx = ctx;
		assert_int_equal(
			pthread_create(&th[i], NULL, race_submit, &r[i]), 0);
	}
	/* Run tasks for a while as they come... */
	while (ms_since(t0) < 100)
		assert_true(tern_progress(ctx) >= 0);
	/* ...then stop running them, so every thread's own task is queued
	 * when the close starts. */
	for (int i = 0; i < RACERS; i++)
		atomic_store(&r[i].hold, 1);
	while (ready < RACERS && ms_since(t0) < 10000) {
		ready = 0;
		for (int i = 0; i < RACERS; i++)
			ready += atomic_load(&r[i].parked);
	}
	assert_int_equal(ready, RACERS);
	assert_int_equal(tern_ctx_close(ctx), 0);
	*state = NULL;
	for (int i = 0; i < RACERS; i++) {
		int fresh_total;

		pthread_join(th[i], NULL);
		assert_int_equal(r[i].bad, 0);
		assert_int_equal(atomic_load(&r[i].mine_cancelled), 1);
		/* Every accepted submit of its own task: one callback. */
		assert_int_equal(atomic_load(&r[i].mine_calls), r[i].ok);
		fresh_total = atomic_load(&r[i].fresh_calls);
		assert_true(fresh_total > 0);
		print_message("racer %d: %d own submits, %d -EBUSY, %d fresh "
			      "callbacks\n",
			      i, r[i].ok, r[i].busy, fresh_total);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_timer_order),
		T(test_timer_repeat),
		T(test_timer_restart_in_cb),
		T(test_defer),
		T(test_io),
		T(test_io_not_starved),
		T(test_wait_timeout_runs_timers),
		T(test_embedding),
		T(test_run_nested),
	};
	/* The calls other threads make: tern_task_submit(), tern_stop().
	 * Run alone as evloop_threads (label threads, also under
	 * ThreadSanitizer: make tsan-check). */
	const struct CMUnitTest threads[] = {
		T(test_stop_from_thread),
		T(test_task_order),
		T(test_task_busy),
		T(test_task_resubmit_in_cb),
		T(test_task_wakes),
		T(test_task_resubmit_from_thread),
		T(test_task_close_cancels),
		T(test_task_close_in_cb),
		T(test_task_submit_while_closing),
#undef T
	};

	if (argc > 1 && strcmp(argv[1], "threads") == 0)
		return cmocka_run_group_tests_name("threads", threads, NULL,
						   NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
