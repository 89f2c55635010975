/* SPDX-License-Identifier: MIT */
/**
 * @file tern/loop.h
 * The event loop of a ctx: run, stop, timers, deferred work, file
 * descriptors, and embedding tern in another loop (docs/loop.md).
 *
 * Every ctx has one loop, driven by the ctx's thread. Callbacks of
 * requests, timers, deferred work and fd watchers run only inside
 * tern_run(), tern_progress(), tern_wait() (and the cancelling calls), on
 * that thread. Other threads hand it work with tern_task_submit(), the
 * one call of a ctx besides tern_stop() that is thread-safe. Handles
 * (struct tern_timer, tern_defer, tern_task, tern_io) are owned by the
 * caller, like requests: tern never allocates for them, and a handle must
 * stay valid while it is active.
 *
 * Sleeping: where every rail's completion queue offers a wait fd (tcp,
 * verbs) the loop drains, calls fi_trywait and sleeps in epoll on those
 * fds, the user's fds and the timers. Where a provider offers none (shm,
 * efa in libfabric 1.17) it polls with sleeps that grow from 1 µs to
 * 1 ms, and to TERN_POLL_SLEEP_MAX_US after a second idle
 * (tern_ctx_query() says which way a ctx sleeps).
 * Busy polling (TERN_CTX_BUSY_POLL, $TERN_BUSY_POLL=1) never sleeps.
 */
#ifndef TERN_LOOP_H
#define TERN_LOOP_H

#include <stdint.h>

#include <tern/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Longest sleep between polls on a provider without wait fds, in µs,
 * reached after a second idle ($TERN_POLL_MAX_US overrides it). It bounds
 * how late an idle shm ctx sees the first message. */
#define TERN_POLL_SLEEP_MAX_US 20000

/** How tern_run() runs. */
enum tern_run_mode {
	/** Until tern_stop(), or until nothing is left that could produce
	 * a callback (no request, timer, deferred work, queued task or fd
	 * watcher). Tasks other threads may submit later do not count:
	 * a ctx that waits for them keeps a timer or an fd watcher. */
	TERN_RUN_DEFAULT = 0,
	/** Run callbacks that are due, sleeping first if none are; return
	 * after one round (or when a signal interrupts the sleep). */
	TERN_RUN_ONCE = 1,
	/** One round without sleeping. */
	TERN_RUN_NOWAIT = 2,
};

/**
 * Run the loop.
 * @return 0 after tern_stop(), when nothing is left (DEFAULT) or after one
 * round (ONCE, NOWAIT); -TERN_ECLOSED when a callback closed the ctx (it is
 * gone: do not touch it again); another negative code on a provider
 * failure; -EINVAL for a NULL ctx or bad mode; -EDEADLK when called from
 * inside a callback of the same ctx.
 */
TERN_API int tern_run(struct tern_ctx *ctx, enum tern_run_mode mode);

/**
 * Make the current (or next) tern_run() of @p ctx return after the round
 * it is in. Safe from a callback, from another thread and from a signal
 * handler (it only sets a flag and writes an eventfd).
 */
TERN_API void tern_stop(struct tern_ctx *ctx);

/* ---- timers -------------------------------------------------------- */

struct tern_timer;
typedef void (*tern_timer_cb)(struct tern_timer *timer);

/** A caller-owned timer. Initialise with tern_timer_init(). */
struct tern_timer {
	tern_timer_cb cb;
	void *data; /**< caller's pointer, untouched by tern */
	/** Private to tern. */
	struct {
		struct tern_ctx *ctx;
		struct tern_timer *next, *prev;
		uint64_t due_ns;
		uint64_t repeat_ns;
		int active;
	} _priv;
};

/**
 * Prepare @p timer for its first tern_timer_start(): sets its callback and
 * data; the timer is inactive. Not on an active timer (stop it first).
 */
TERN_API void tern_timer_init(struct tern_timer *timer, tern_timer_cb cb,
			      void *data);

/**
 * Start (or restart) @p timer: its callback runs @p timeout_ms from now,
 * then every @p repeat_ms if that is not 0. Timers due at the same
 * millisecond run in the order they were started. A callback may start,
 * stop or restart any timer, its own included.
 * @return 0; -EINVAL for a NULL argument or a timer active on another ctx.
 */
TERN_API int tern_timer_start(struct tern_ctx *ctx, struct tern_timer *timer,
			      uint64_t timeout_ms, uint64_t repeat_ms);

/** Stop @p timer if active; its callback will not run. @return 0. */
TERN_API int tern_timer_stop(struct tern_timer *timer);

/** 1 while @p timer is started and its callback has not run (or it
 * repeats). */
TERN_API int tern_timer_active(const struct tern_timer *timer);

/* ---- deferred work ------------------------------------------------- */

struct tern_defer;
typedef void (*tern_defer_cb)(struct tern_defer *d);

/** A caller-owned piece of deferred work. */
struct tern_defer {
	tern_defer_cb cb;
	void *data;
	/** Private to tern. */
	struct {
		struct tern_ctx *ctx;
		struct tern_defer *next, *prev;
		int queued;
	} _priv;
};

/**
 * Run @p cb(d) at the start of the next round of the loop, not inside this
 * call: a callback uses it to start the next step of a protocol without
 * recursing. Work deferred from deferred work runs in the round after.
 * Deferring a queued @p d again only changes its callback and data.
 * @return 0; -EINVAL.
 */
TERN_API int tern_defer(struct tern_ctx *ctx, struct tern_defer *d,
			tern_defer_cb cb, void *data);

/** Take back deferred work that has not run yet. @return 0, or -EALREADY
 * if it was not queued. */
TERN_API int tern_defer_cancel(struct tern_defer *d);

/* ---- work from other threads --------------------------------------- */

struct tern_task;
/** @p status: 0 (it runs on the ctx's thread, from progress) or
 * -ECANCELED (its ctx is closing: from inside tern_ctx_close()). */
typedef void (*tern_task_cb)(struct tern_task *task, int status);

/**
 * A caller-owned piece of work handed to a ctx from any thread (docs/loop.md,
 * "Threads"). Zero it before its first submit; tern never allocates for it.
 * @p cb and @p data are what the submit passed, set by tern on the ctx's
 * thread as the callback starts (not by the submit: a callback reading
 * them never races with a submit of the same task from another thread).
 */
struct tern_task {
	tern_task_cb cb;
	void *data;
	/** Private to tern. */
	struct {
		struct tern_task *next;
		struct tern_ctx *ctx;
		tern_task_cb cb; /* as submitted */
		void *data;
		int queued;
	} _priv;
};

/**
 * Hand @p task to @p ctx: @p cb(task, 0) runs on the ctx's thread, from
 * its next progress pass (tern_progress(), tern_wait(), tern_run() in any
 * mode), never inside this call. Tasks run in the order they were
 * submitted (a task submitted from a task's callback runs in the next
 * pass). Inside @p cb every call on @p ctx is allowed, as in any callback:
 * it is how another thread posts work; the completions of what it posts
 * come back as usual, from progress, on the ctx's thread.
 *
 * Thread safety: the one call of a ctx, with tern_stop(), that any thread
 * may make while the ctx is open, the ctx's own thread and its callbacks
 * included. Every other call on a ctx stays the ctx thread's.
 *
 * Waking: a tern_run() or tern_wait() asleep on the ctx wakes, and
 * tern_ctx_fd() becomes readable (the eventfd tern_stop() writes, written
 * once per burst: when the queue goes from empty to not empty). While
 * tasks are queued tern_ctx_arm() returns -EAGAIN, tern_ctx_timeout() 0,
 * and tern_run(TERN_RUN_DEFAULT) does not return for lack of work.
 *
 * Ownership: from a submit that returned 0 until its callback starts, the
 * task is tern's: do not change, move or free it. Once its callback has
 * started tern does not touch it again: it is the caller's, and may be
 * freed or submitted again (from the callback too, or from another thread
 * meanwhile: the callback still sees its own @p cb and @p data). Exactly
 * one callback follows a submit that returned 0; a submit that fails
 * changes nothing and runs nothing. Submitting it to another ctx while its
 * callback runs lets that ctx's thread set @p cb and @p data under it:
 * don't.
 *
 * Closing: tern_ctx_close() refuses submits from the moment it starts
 * (-ECANCELED) and calls back the tasks still queued with -ECANCELED,
 * inside the close, on the closing thread. A submit racing with the close
 * is safe as long as it entered the call before the close's last step:
 * the close waits for submits inside the call to leave before it frees
 * the ctx. One that enters after that, or after tern_ctx_close()
 * returned, touches freed memory: make your threads stop submitting (and
 * join them, or learn otherwise that they have) before the close returns;
 * a task kept queued whose -ECANCELED callback waits for its thread to
 * stop is one way (tests/integration/threads.c).
 *
 * A single-threaded program pays one load of a flag per progress pass.
 *
 * @return 0 (queued); -EINVAL for a NULL @p ctx, @p task or @p cb;
 * -EBUSY if @p task is queued and its callback has not started (on this
 * or another ctx); -ECANCELED if @p ctx is closing.
 */
TERN_API int tern_task_submit(struct tern_ctx *ctx, struct tern_task *task,
			      tern_task_cb cb, void *data);

/* ---- file descriptors ---------------------------------------------- */

#define TERN_IO_READ  (1U << 0) /**< readable, or the peer hung up */
#define TERN_IO_WRITE (1U << 1) /**< writable */
#define TERN_IO_ERROR (1U << 2) /**< (reported only) error or hang-up */

struct tern_io;
/** @p events: what is ready (TERN_IO_*). */
typedef void (*tern_io_cb)(struct tern_io *io, unsigned int events);

/** A caller-owned fd watcher (sockets, pipes, eventfds, timerfds...). */
struct tern_io {
	tern_io_cb cb;
	void *data;
	int fd;
	/** Private to tern. */
	struct {
		struct tern_ctx *ctx;
		unsigned int events;
		int active;
	} _priv;
};

/**
 * Watch @p fd for @p events (TERN_IO_READ | TERN_IO_WRITE); the callback
 * runs while the condition holds (level-triggered), from tern_run() and
 * tern_wait() when they would sleep, and from every 64th tern_progress()
 * pass, so a busy data path does not starve it. Calling it again on an
 * active watcher changes the events. The caller closes the fd, after
 * tern_io_stop().
 * @return 0; -EINVAL; -EEXIST if @p fd is watched by another tern_io of
 * this ctx; a negative errno from epoll.
 */
TERN_API int tern_io_start(struct tern_ctx *ctx, struct tern_io *io, int fd,
			   unsigned int events, tern_io_cb cb, void *data);

/** Stop watching; the callback will not run again. @return 0. */
TERN_API int tern_io_stop(struct tern_io *io);

/* ---- embedding in another loop ------------------------------------- */

/**
 * A file descriptor (an epoll fd) that becomes readable when the ctx has
 * work: a completion, a watched fd, tern_stop(), a submitted task. Put it in
 * your own epoll/poll/libuv loop, and when it is readable (or
 * tern_ctx_timeout() has passed) call tern_run(ctx, TERN_RUN_NOWAIT). Before
 * sleeping, call tern_ctx_arm(). The fd belongs to the ctx: do not close it.
 */
TERN_API int tern_ctx_fd(const struct tern_ctx *ctx);

/**
 * Get ready to sleep on tern_ctx_fd().
 * @return 0 when it is safe to sleep until the fd is readable or
 * tern_ctx_timeout() passes; -EAGAIN when work is already waiting (run
 * tern_run(ctx, TERN_RUN_NOWAIT) first, then arm again).
 */
TERN_API int tern_ctx_arm(struct tern_ctx *ctx);

/**
 * How long, in ms, the caller may sleep before it must run the loop: the
 * next timer, or the polling interval on a provider without wait fds.
 * @return -1 for "until the fd is readable", 0 for "now".
 */
TERN_API int tern_ctx_timeout(const struct tern_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* TERN_LOOP_H */
