/* SPDX-License-Identifier: MIT */
/*
 * The loop of a ctx: timers, deferred work, fd watchers, sleeping and
 * tern_run(). One epoll fd per ctx holds the rails' completion-queue wait
 * fds (where the provider has them), the user's fds and an eventfd for
 * tern_stop(). Sleeping follows libfabric's rule: drain, fi_trywait, then
 * block; a provider without wait fds is polled with sleeps that grow
 * while idle.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "local.h"
#include "stage.h"

/* Events taken from epoll at once. */
#define TERN__EVS 64
/* Empty passes spun before sleeping (latency of a reply just around the
 * corner), and how often a spinning loop looks at the user's fds. */
#define TERN__SPIN     200
#define TERN__IO_EVERY 64
/* Polling sleeps (no wait fd): from 1 µs doubling to 1 ms, and to
 * $TERN_POLL_MAX_US (default TERN_POLL_SLEEP_MAX_US) once idle for a
 * second. Each wakeup of an idle process costs tens of µs of CPU on a
 * virtual machine: 50 a second keep an idle server well under 1%. */
#define TERN__POLL_MIN_NS   1000ULL
#define TERN__POLL_BUSY_NS  1000000ULL
#define TERN__POLL_IDLE_AGE 1000000000ULL

int tern__loop_init(struct tern_ctx *ctx)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	ctx->epfd = ctx->wakefd = -1;
	ret = pthread_mutex_init(&ctx->tasks.lock, NULL);
	if (ret != 0)
		return -ret;
	ctx->tasks.ready = 1;
	ctx->evs = calloc(TERN__EVS, sizeof(struct epoll_event));
	if (ctx->evs == NULL) {
		tern__loop_fini(ctx);
		return -ENOMEM;
	}
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctx->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctx->epfd < 0 || ctx->wakefd < 0)
		goto err;
	ev.data.ptr = ctx;
	if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->wakefd, &ev) != 0)
		goto err;
	ctx->can_wait = ctx->nrails > 0;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_rail *r = &ctx->rails[i];

		if (r->wait_fd < 0) {
			ctx->can_wait = 0;
			continue;
		}
		ev.data.ptr = r;
		if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, r->wait_fd, &ev) != 0)
			goto err;
	}
	ctx->idle_since = tern__now_ns();
	tern_ctx_set_poll_max(ctx, 0);
	return 0;
err:
	ret = -errno;
	tern__loop_fini(ctx);
	return ret;
}

void tern_ctx_set_poll_max(struct tern_ctx *ctx, unsigned int max_us)
{
	if (ctx == NULL)
		return;
	if (max_us == 0)
		max_us = (unsigned int)tern__env_long(
			"TERN_POLL_MAX_US", TERN_POLL_SLEEP_MAX_US, 1, 1000000);
	ctx->poll_max_ns = 1000ULL * TERN_MIN(max_us, 1000000U);
	ctx->poll_ns = 0;
}

void tern__loop_fini(struct tern_ctx *ctx)
{
	if (ctx->tasks.ready) {
		/* A submit still inside tern_task_submit() (refused: the
		 * close began) must leave before the ctx goes. */
		while (atomic_load(&ctx->tasks.users) != 0)
			sched_yield();
		pthread_mutex_destroy(&ctx->tasks.lock);
		ctx->tasks.ready = 0;
	}
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	if (ctx->wakefd >= 0)
		close(ctx->wakefd);
	ctx->epfd = ctx->wakefd = -1;
	free(ctx->evs);
	ctx->evs = NULL;
	/* Every request completed by now: the whole pool is free. */
	tern__desc_pool_fini(ctx);
}

/* ---- timers -------------------------------------------------------- */

void tern_timer_init(struct tern_timer *timer, tern_timer_cb cb, void *data)
{
	*timer = (struct tern_timer){ .cb = cb, .data = data };
}

static void timer_unlink(struct tern_ctx *ctx, struct tern_timer *t)
{
	if (t->_priv.prev != NULL)
		t->_priv.prev->_priv.next = t->_priv.next;
	else
		ctx->timer_head = t->_priv.next;
	if (t->_priv.next != NULL)
		t->_priv.next->_priv.prev = t->_priv.prev;
	else
		ctx->timer_tail = t->_priv.prev;
	t->_priv.next = t->_priv.prev = NULL;
	t->_priv.active = 0;
	ctx->ntimers--;
}

/* Keep the list sorted by due time, equal times in start order. Timers
 * are mostly started with similar timeouts: search from the tail. */
static void timer_link(struct tern_ctx *ctx, struct tern_timer *t)
{
	struct tern_timer *p = ctx->timer_tail;

	while (p != NULL && p->_priv.due_ns > t->_priv.due_ns)
		p = p->_priv.prev;
	t->_priv.prev = p;
	t->_priv.next = p != NULL ? p->_priv.next : ctx->timer_head;
	if (t->_priv.next != NULL)
		t->_priv.next->_priv.prev = t;
	else
		ctx->timer_tail = t;
	if (p != NULL)
		p->_priv.next = t;
	else
		ctx->timer_head = t;
	t->_priv.active = 1;
	ctx->ntimers++;
}

int tern_timer_start(struct tern_ctx *ctx, struct tern_timer *timer,
		     uint64_t timeout_ms, uint64_t repeat_ms)
{
	uint64_t now;

	if (ctx == NULL || timer == NULL || timer->cb == NULL ||
	    timeout_ms > UINT64_MAX / 2000000 ||
	    repeat_ms > UINT64_MAX / 2000000)
		return -EINVAL;
	if (ctx->closing)
		return -ECANCELED;
	if (timer->_priv.active) {
		if (timer->_priv.ctx != ctx)
			return -EINVAL;
		timer_unlink(ctx, timer);
	}
	now = tern__now_ns();
	/* Started from a timer callback, a 0 ms timer runs next round, not
	 * in the round that is running. */
	if (now <= ctx->timer_now)
		now = ctx->timer_now + 1;
	timer->_priv.ctx = ctx;
	timer->_priv.due_ns = now + timeout_ms * 1000000ULL;
	timer->_priv.repeat_ns = repeat_ms * 1000000ULL;
	timer_link(ctx, timer);
	return 0;
}

int tern_timer_stop(struct tern_timer *timer)
{
	if (timer == NULL)
		return -EINVAL;
	if (timer->_priv.active)
		timer_unlink(timer->_priv.ctx, timer);
	return 0;
}

int tern_timer_active(const struct tern_timer *timer)
{
	return timer != NULL && timer->_priv.active;
}

static int run_timers(struct tern_ctx *ctx)
{
	uint64_t now = tern__now_ns();
	struct tern_timer *t;
	int n = 0;

	ctx->timer_now = now;
	while ((t = ctx->timer_head) != NULL && t->_priv.due_ns <= now) {
		timer_unlink(ctx, t);
		if (t->_priv.repeat_ns != 0) {
			/* Keep the period; skip beats lost while busy. */
			t->_priv.due_ns += t->_priv.repeat_ns;
			if (t->_priv.due_ns <= now)
				t->_priv.due_ns = now + t->_priv.repeat_ns;
			timer_link(ctx, t);
		}
		/* tern's own watch of silent rails is no work of the
		 * caller's (fence.c). */
		n += t != &ctx->stall_timer;
		t->cb(t);
		if (ctx->close_pending)
			break;
	}
	ctx->timer_now = 0;
	return n;
}

/* ns until the first timer is due: 0 if now, -1 without timers. */
static int64_t timer_wait_ns(const struct tern_ctx *ctx)
{
	uint64_t now;

	if (ctx->timer_head == NULL)
		return -1;
	now = tern__now_ns();
	if (ctx->timer_head->_priv.due_ns <= now)
		return 0;
	return (int64_t)(ctx->timer_head->_priv.due_ns - now);
}

/* ---- deferred work ------------------------------------------------- */

enum { DEFER_IDLE = 0, DEFER_NEXT = 1, DEFER_RUN = 2 };

static void defer_unlink(struct tern_ctx *ctx, struct tern_defer *d)
{
	struct tern_defer **head = &ctx->defer_head, **tail = &ctx->defer_tail;

	if (d->_priv.queued == DEFER_RUN) {
		head = &ctx->drun_head;
		tail = &ctx->drun_tail;
	}
	if (d->_priv.prev != NULL)
		d->_priv.prev->_priv.next = d->_priv.next;
	else
		*head = d->_priv.next;
	if (d->_priv.next != NULL)
		d->_priv.next->_priv.prev = d->_priv.prev;
	else
		*tail = d->_priv.prev;
	d->_priv.next = d->_priv.prev = NULL;
	d->_priv.queued = DEFER_IDLE;
}

int tern_defer(struct tern_ctx *ctx, struct tern_defer *d, tern_defer_cb cb,
	       void *data)
{
	if (ctx == NULL || d == NULL || cb == NULL)
		return -EINVAL;
	if (d->_priv.queued != DEFER_IDLE && d->_priv.ctx != ctx)
		return -EINVAL;
	if (ctx->closing)
		return -ECANCELED;
	d->cb = cb;
	d->data = data;
	if (d->_priv.queued != DEFER_IDLE)
		return 0;
	d->_priv.ctx = ctx;
	d->_priv.queued = DEFER_NEXT;
	d->_priv.next = NULL;
	d->_priv.prev = ctx->defer_tail;
	if (ctx->defer_tail != NULL)
		ctx->defer_tail->_priv.next = d;
	else
		ctx->defer_head = d;
	ctx->defer_tail = d;
	return 0;
}

int tern_defer_cancel(struct tern_defer *d)
{
	if (d == NULL)
		return -EINVAL;
	if (d->_priv.queued == DEFER_IDLE)
		return -EALREADY;
	defer_unlink(d->_priv.ctx, d);
	return 0;
}

static int run_defers(struct tern_ctx *ctx)
{
	struct tern_defer *d;
	int n = 0;

	/* This round runs what was deferred before it; what its callbacks
	 * defer waits for the next round. */
	ctx->drun_head = ctx->defer_head;
	ctx->drun_tail = ctx->defer_tail;
	ctx->defer_head = ctx->defer_tail = NULL;
	for (d = ctx->drun_head; d != NULL; d = d->_priv.next)
		d->_priv.queued = DEFER_RUN;
	while ((d = ctx->drun_head) != NULL) {
		defer_unlink(ctx, d);
		n++;
		d->cb(d);
		if (ctx->close_pending)
			break;
	}
	return n;
}

/* ---- work from other threads --------------------------------------- */

/*
 * A task is claimed by the submit that flips its queued word from 0 to 1
 * (whichever ctx it was on: -EBUSY otherwise), and given back as its
 * callback starts. The list and ctx->task_pending change only under
 * ctx->tasks.lock; the ctx's thread reads task_pending without it, once a
 * pass, and takes the lock only when it is set. The eventfd is written
 * only when the list goes from empty to not empty: a burst costs one
 * system call, and the ctx's thread, which empties the list under the
 * lock, reads task_pending before any sleep (work_waiting()).
 */
int tern_task_submit(struct tern_ctx *ctx, struct tern_task *task,
		     tern_task_cb cb, void *data)
{
	int ret = 0, wake = 0;

	if (ctx == NULL || task == NULL || cb == NULL)
		return -EINVAL;
	if (__atomic_exchange_n(&task->_priv.queued, 1, __ATOMIC_ACQUIRE) != 0)
		return -EBUSY;
	/* Seen by a close's wait before this call touches the lock. */
	atomic_fetch_add(&ctx->tasks.users, 1);
	pthread_mutex_lock(&ctx->tasks.lock);
	if (ctx->tasks.closed) {
		ret = -ECANCELED;
	} else {
		/* Not task->cb and ->data: a callback of its last submit
		 * may be reading them (task_call() sets them). */
		task->_priv.cb = cb;
		task->_priv.data = data;
		task->_priv.ctx = ctx;
		task->_priv.next = NULL;
		if (ctx->tasks.tail != NULL) {
			ctx->tasks.tail->_priv.next = task;
		} else {
			ctx->tasks.head = task;
			atomic_store_explicit(&ctx->task_pending, 1,
					      memory_order_relaxed);
			wake = 1;
		}
		ctx->tasks.tail = task;
	}
	pthread_mutex_unlock(&ctx->tasks.lock);
	if (ret != 0)
		__atomic_store_n(&task->_priv.queued, 0, __ATOMIC_RELEASE);
	if (wake) {
		uint64_t one = 1;
		ssize_t w = write(ctx->wakefd, &one, sizeof(one));

		(void)w; /* a full eventfd is already readable */
	}
	/* The last touch of ctx: a close may free it from here on. */
	atomic_fetch_sub_explicit(&ctx->tasks.users, 1, memory_order_release);
	return ret;
}

/* Take every queued task, oldest first. */
static struct tern_task *task_take(struct tern_ctx *ctx)
{
	struct tern_task *t;

	pthread_mutex_lock(&ctx->tasks.lock);
	t = ctx->tasks.head;
	ctx->tasks.head = ctx->tasks.tail = NULL;
	atomic_store_explicit(&ctx->task_pending, 0, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->tasks.lock);
	return t;
}

/* Give @t and its successors back to the head of the queue. */
static void task_putback(struct tern_ctx *ctx, struct tern_task *t)
{
	struct tern_task *last = t;

	while (last->_priv.next != NULL)
		last = last->_priv.next;
	pthread_mutex_lock(&ctx->tasks.lock);
	last->_priv.next = ctx->tasks.head;
	if (ctx->tasks.head == NULL)
		ctx->tasks.tail = last;
	ctx->tasks.head = t;
	atomic_store_explicit(&ctx->task_pending, 1, memory_order_relaxed);
	pthread_mutex_unlock(&ctx->tasks.lock);
}

/* Call @t back with @status; it is the caller's again from here: tern
 * touches it no more (the callback may free it, or submit it again). */
static void task_call(struct tern_task *t, int status)
{
	tern_task_cb cb = t->_priv.cb;

	t->cb = cb;
	t->data = t->_priv.data;
	__atomic_store_n(&t->_priv.queued, 0, __ATOMIC_RELEASE);
	cb(t, status);
}

int tern__task_run(struct tern_ctx *ctx)
{
	struct tern_task *t = task_take(ctx), *next;
	int n = 0;

	/* What the callbacks submit waits for the next pass. */
	for (; t != NULL; t = next) {
		next = t->_priv.next;
		n++;
		task_call(t, 0);
		if (ctx->close_pending) {
			/* A callback closed the ctx: the rest are cancelled
			 * with the queue (tern__task_cancel_all()). */
			if (next != NULL)
				task_putback(ctx, next);
			break;
		}
	}
	return n;
}

void tern__task_close(struct tern_ctx *ctx)
{
	pthread_mutex_lock(&ctx->tasks.lock);
	ctx->tasks.closed = 1;
	pthread_mutex_unlock(&ctx->tasks.lock);
}

void tern__task_cancel_all(struct tern_ctx *ctx)
{
	struct tern_task *t, *next;

	/* Refused from now on: nothing joins the list while it is called
	 * back, callbacks' own submits included. */
	tern__task_close(ctx);
	for (t = task_take(ctx); t != NULL; t = next) {
		next = t->_priv.next;
		task_call(t, -ECANCELED);
	}
}

/* Timers and deferred work due now; called by tern_progress(). */
int tern__loop_due(struct tern_ctx *ctx)
{
	int n = 0;

	if (ctx->timer_head != NULL &&
	    ctx->timer_head->_priv.due_ns <= tern__now_ns())
		n += run_timers(ctx);
	if (ctx->defer_head != NULL && !ctx->close_pending)
		n += run_defers(ctx);
	return n;
}

/* ---- fd watchers --------------------------------------------------- */

static uint32_t epoll_events(unsigned int events)
{
	return ((events & TERN_IO_READ) ? EPOLLIN | EPOLLRDHUP : 0) |
	       ((events & TERN_IO_WRITE) ? EPOLLOUT : 0);
}

int tern_io_start(struct tern_ctx *ctx, struct tern_io *io, int fd,
		  unsigned int events, tern_io_cb cb, void *data)
{
	struct epoll_event ev = { .events = epoll_events(events) };
	int op = EPOLL_CTL_ADD;

	if (ctx == NULL || io == NULL || cb == NULL || fd < 0 ||
	    (events & ~(TERN_IO_READ | TERN_IO_WRITE)) != 0)
		return -EINVAL;
	if (ctx->closing)
		return -ECANCELED;
	if (io->_priv.active) {
		if (io->_priv.ctx != ctx || io->fd != fd)
			return -EINVAL;
		op = EPOLL_CTL_MOD;
	}
	ev.data.ptr = io;
	if (epoll_ctl(ctx->epfd, op, fd, &ev) != 0)
		return -errno;
	io->cb = cb;
	io->data = data;
	io->fd = fd;
	io->_priv.events = events;
	if (!io->_priv.active) {
		io->_priv.ctx = ctx;
		io->_priv.active = 1;
		ctx->nios++;
	}
	return 0;
}

int tern_io_stop(struct tern_io *io)
{
	struct tern_ctx *ctx;
	struct epoll_event *evs;

	if (io == NULL)
		return -EINVAL;
	if (!io->_priv.active)
		return 0;
	ctx = io->_priv.ctx;
	/* The fd may already be closed; epoll then dropped it itself. */
	epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->_priv.active = 0;
	ctx->nios--;
	/* An event of this batch not dispatched yet must not reach it. */
	evs = ctx->evs;
	for (int i = ctx->cur_ev + 1; i < ctx->nevs; i++) {
		if (evs[i].data.ptr == io)
			evs[i].data.ptr = NULL;
	}
	return 0;
}

/* ---- sleeping ------------------------------------------------------ */

static int is_rail(const struct tern_ctx *ctx, const void *p)
{
	return (const char *)p >= (const char *)&ctx->rails[0] &&
	       (const char *)p < (const char *)&ctx->rails[TERN_MAX_RAILS];
}

/* Dispatch an epoll batch. @return user callbacks run. */
static int dispatch_events(struct tern_ctx *ctx, int nevs)
{
	struct epoll_event *evs = ctx->evs;
	int n = 0;

	ctx->nevs = nevs;
	for (ctx->cur_ev = 0; ctx->cur_ev < nevs; ctx->cur_ev++) {
		struct epoll_event *ev = &evs[ctx->cur_ev];
		struct tern_io *io = ev->data.ptr;
		unsigned int what = 0;
		uint64_t junk;

		if (io == NULL || is_rail(ctx, io))
			continue; /* stopped, or a CQ: progress reads it */
		if ((void *)io == (void *)ctx) {
			while (read(ctx->wakefd, &junk, sizeof(junk)) > 0)
				;
			continue;
		}
		if ((void *)io == (void *)&ctx->local) {
			tern__local_exited(ctx); /* a local peer's pidfd */
			continue;
		}
		if (ev->events & (EPOLLIN | EPOLLRDHUP))
			what |= TERN_IO_READ;
		if (ev->events & EPOLLOUT)
			what |= TERN_IO_WRITE;
		if (ev->events & (EPOLLERR | EPOLLHUP))
			what |= TERN_IO_ERROR |
				(io->_priv.events &
				 (TERN_IO_READ | TERN_IO_WRITE));
		n++;
		io->cb(io, what);
		if (ctx->close_pending)
			break;
	}
	ctx->nevs = ctx->cur_ev = 0;
	return n;
}

/* tern_stop() was called (from any thread). */
static inline int stopped(const struct tern_ctx *ctx)
{
	return atomic_load_explicit(&ctx->stop, memory_order_relaxed) != 0;
}

/* Work that must run before any sleep. */
static int work_waiting(const struct tern_ctx *ctx)
{
	if (ctx->defer_head != NULL || ctx->imm_ready.len != 0 ||
	    ctx->ready.len != 0 || stopped(ctx) ||
	    atomic_load_explicit(&ctx->task_pending, memory_order_relaxed))
		return 1;
	if (ctx->local != NULL && tern__local_pending(ctx))
		return 1;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		const struct tern_rail *r = &ctx->rails[i];

		/* Untagged, receives wait in tern for a message, not for
		 * a post (bounce.c). */
		if ((r->txq.len != 0 && r->tx_credits != 0 && !r->tx_refused) ||
		    (r->rxq.len != 0 && r->rx_credits != 0 &&
		     ctx->caps.tagged && !r->rx_refused))
			return 1;
	}
	return 0;
}

/* Posts the provider refused wait on it: sleep, but not long (below).
 * So do parts to post again on another rail (failover.c): they go in a
 * pass, and no completion may come to start one. */
static int posts_refused(const struct tern_ctx *ctx)
{
	if (ctx->redo_head != NULL)
		return 1;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		const struct tern_rail *r = &ctx->rails[i];

		if ((r->txq.len != 0 && r->tx_refused) ||
		    (r->rxq.len != 0 && r->rx_refused))
			return 1;
	}
	return 0;
}

/* The longest sleep with refused posts queued: what frees them (a
 * connection set up, a peer's queue drained) need not wake a wait fd. */
#define TERN__REFUSED_NS 1000000LL

/* The next polling sleep on a provider without wait fds. */
static uint64_t poll_sleep_ns(struct tern_ctx *ctx)
{
	uint64_t cap = TERN_MIN(TERN__POLL_BUSY_NS, ctx->poll_max_ns);

	if (ctx->poll_ns == 0)
		ctx->idle_since = tern__now_ns(); /* an idle spell begins */
	else if (tern__now_ns() - ctx->idle_since > TERN__POLL_IDLE_AGE)
		cap = ctx->poll_max_ns;
	ctx->poll_ns = ctx->poll_ns == 0 ? TERN__POLL_MIN_NS
					 : TERN_MIN(ctx->poll_ns * 2, cap);
	return ctx->poll_ns;
}

/*
 * Sleep until a completion, a watched fd, a timer, tern_stop(), a signal
 * or @p timeout_ns (-1: no limit) — or not at all when work is waiting.
 * @return user fd callbacks run (>= 0); -EINTR; a negative error.
 */
int tern__loop_block(struct tern_ctx *ctx, int64_t timeout_ns)
{
	int64_t t = timer_wait_ns(ctx);
	int nevs, ms, ret;

	if (t < 0 || (timeout_ns >= 0 && timeout_ns < t))
		t = timeout_ns;
	if (work_waiting(ctx) || ctx->busy_poll)
		t = 0;
	else if ((t < 0 || t > TERN__REFUSED_NS) && posts_refused(ctx))
		t = TERN__REFUSED_NS;
	if (t != 0 && ctx->can_wait) {
		ret = tern__rails_trywait(ctx);
		if (ret == -EAGAIN)
			t = 0;
		else if (ret != 0)
			ctx->can_wait = 0; /* logged by src/prov/ */
	}
	if (t != 0 && !ctx->can_wait) {
		int64_t p = (int64_t)poll_sleep_ns(ctx);

		if (t < 0 || p < t)
			t = p;
		if (t < 1000000 && ctx->nios == 0) {
			nanosleep(&(struct timespec){ .tv_nsec = (long)t },
				  NULL);
			return 0;
		}
	}
	if (t == 0 && ctx->nios == 0 && !stopped(ctx))
		return 0;
	ms = t < 0 ? -1 : (int)((t + 999999) / 1000000);
	if (t > (int64_t)INT32_MAX * 1000000)
		ms = INT32_MAX;
	/* Same-host writers write our eventfd while we sleep (local_*.c). */
	if (ctx->local != NULL && ms != 0 && tern__local_sleep(ctx, 1))
		ms = 0;
	nevs = epoll_wait(ctx->epfd, ctx->evs, TERN__EVS, ms);
	if (ctx->local != NULL)
		tern__local_sleep(ctx, 0);
	if (nevs < 0)
		return errno == EINTR ? -EINTR : -errno;
	return dispatch_events(ctx, nevs);
}

int tern__loop_alive(const struct tern_ctx *ctx)
{
	if (ctx->posted.len || ctx->nexpect || ctx->imm_ready.len ||
	    ctx->ready.len || ctx->ntimers > (unsigned long)ctx->stall_on ||
	    ctx->nios || ctx->defer_head ||
	    atomic_load_explicit(&ctx->task_pending, memory_order_relaxed) ||
	    tern__stage_alive(ctx) ||
	    (ctx->local != NULL && tern__local_pending(ctx)))
		return 1;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		if (ctx->rails[i].txq.len || ctx->rails[i].rxq.len)
			return 1;
	}
	return 0;
}

/* ---- running ------------------------------------------------------- */

void tern_stop(struct tern_ctx *ctx)
{
	uint64_t one = 1;
	ssize_t ret;

	if (ctx == NULL)
		return;
	atomic_store_explicit(&ctx->stop, 1, memory_order_relaxed);
	ret = write(ctx->wakefd, &one, sizeof(one));
	(void)ret; /* a full eventfd is already readable */
}

/* Look at the user's fds without sleeping. */
static int poll_ios(struct tern_ctx *ctx)
{
	int nevs = epoll_wait(ctx->epfd, ctx->evs, TERN__EVS, 0);

	return nevs > 0 ? dispatch_events(ctx, nevs) : 0;
}

int tern__loop_poll_ios(struct tern_ctx *ctx)
{
	/* Not from inside a dispatch: ctx->evs is in use. */
	if (ctx->nios == 0 || ctx->nevs != 0 ||
	    ++ctx->io_spins % TERN__IO_EVERY != 0)
		return 0;
	return poll_ios(ctx);
}

/* Run fd callbacks (they may close the ctx). @return <0: stop with it. */
static int guarded(struct tern_ctx *ctx, int (*fn)(struct tern_ctx *),
		   int64_t t, int *ran)
{
	int ret;

	tern__enter(ctx);
	ret = fn != NULL ? fn(ctx) : tern__loop_block(ctx, t);
	if (tern__leave(ctx))
		return -TERN_ECLOSED;
	if (ret >= 0) {
		*ran += ret;
		return 0;
	}
	return ret;
}

int tern_run(struct tern_ctx *ctx, enum tern_run_mode mode)
{
	unsigned int spins = 0;
	int ret = 0;

	if (ctx == NULL || (unsigned int)mode > TERN_RUN_NOWAIT)
		return -EINVAL;
	if (ctx->depth != 0)
		return -EDEADLK;
	for (;;) {
		int n = tern_progress(ctx);

		if (n < 0)
			return n; /* -TERN_ECLOSED: the ctx is gone */
		if (stopped(ctx))
			break;
		if (mode == TERN_RUN_NOWAIT) {
			ret = guarded(ctx, poll_ios, 0, &n);
			break;
		}
		if (mode == TERN_RUN_DEFAULT && !tern__loop_alive(ctx))
			break;
		if (n > 0 || ctx->busy_poll || tern__stage_busy(ctx)) {
			ctx->idle = 0;
			ctx->poll_ns = 0;
			if (ctx->nios != 0 && ++spins % TERN__IO_EVERY == 0) {
				ret = guarded(ctx, poll_ios, 0, &n);
				if (ret != 0)
					break;
			}
			if (mode == TERN_RUN_ONCE && n > 0)
				break;
			continue;
		}
		if (++ctx->idle < TERN__SPIN)
			continue;
		n = 0;
		ret = guarded(ctx, NULL, -1, &n);
		if (ret == -EINTR) {
			ret = 0;
			if (mode == TERN_RUN_ONCE)
				break;
			continue;
		}
		if (ret != 0)
			break;
		if (mode == TERN_RUN_ONCE) {
			ret = tern_progress(ctx);
			if (ret > 0)
				ret = 0;
			break;
		}
	}
	if (ret == -TERN_ECLOSED)
		return ret;
	atomic_store_explicit(&ctx->stop, 0, memory_order_relaxed);
	return ret;
}

/* ---- embedding ----------------------------------------------------- */

int tern_ctx_fd(const struct tern_ctx *ctx)
{
	return ctx != NULL ? ctx->epfd : -EINVAL;
}

int tern_ctx_arm(struct tern_ctx *ctx)
{
	int ret;

	if (ctx == NULL)
		return -EINVAL;
	if (work_waiting(ctx) || timer_wait_ns(ctx) == 0)
		return -EAGAIN;
	/* Same-host writers write our eventfd (in the fd) from now on; the
	 * next progress pass stops them (local_*.c). */
	if (ctx->local != NULL && tern__local_sleep(ctx, 1)) {
		tern__local_sleep(ctx, 0);
		return -EAGAIN;
	}
	if (!ctx->can_wait)
		return 0; /* tern_ctx_timeout() bounds the sleep */
	ret = tern__rails_trywait(ctx);
	if (ret != 0 && ret != -EAGAIN) {
		ctx->can_wait = 0;
		return 0;
	}
	return ret;
}

int tern_ctx_timeout(const struct tern_ctx *ctx)
{
	int64_t t;

	if (ctx == NULL)
		return 0;
	if (work_waiting(ctx))
		return 0;
	t = timer_wait_ns(ctx);
	if (!ctx->can_wait && (t < 0 || t > (int64_t)TERN__POLL_BUSY_NS))
		t = TERN__POLL_BUSY_NS;
	if ((t < 0 || t > TERN__REFUSED_NS) && posts_refused(ctx))
		t = TERN__REFUSED_NS;
	if (t < 0)
		return -1;
	if (t > (int64_t)INT32_MAX * 1000000)
		return INT32_MAX;
	return (int)((t + 999999) / 1000000);
}
