/* SPDX-License-Identifier: MIT */
/*
 * tern_task_submit() under load, over a real provider, one process:
 *
 *   ctx a (initiator) and ctx b (target), each driven by its own thread
 *   running tern_run(TERN_RUN_DEFAULT). 8 worker threads hand ctx a tasks
 *   that post tern_write() of distinct slices into b's region (1 byte to
 *   8 KiB, a window of 4 in flight per worker) and tern_read() of slices
 *   b's region was filled with beforehand; each worker learns of each
 *   completion through an atomic flag the request's callback sets, and
 *   checks every byte a read brought. At the end every byte of b's region
 *   is checked (each slice, and the zeros past it), every completion
 *   counted once, and each worker's tasks ran in its order.
 *
 *   Then a thread submits tasks (each posts a write) while ctx a is being
 *   closed: every accepted submit gets one callback (0, or -ECANCELED
 *   from inside the close), every write it posted one completion, and
 *   the thread's submits are refused (-ECANCELED) once the close began.
 *
 * usage: threads --provider PROV [--node ADDR]
 * Exit 0 when every check held, 1 otherwise (it says which). Runs under
 * ASan (make asan-check) and ThreadSanitizer (make tsan-check).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

#include "check.h"
#include "pair.h"

#define WORKERS	 8
#define OPS	 192  /* slots per worker: 2 writes for each read */
#define ROUNDS	 8    /* over each worker's slots */
#define WIN	 4    /* per worker in flight */
#define SLOT	 8192 /* bytes of b's region per operation */
#define RD_SLOTS 64   /* b's read-only half: slots filled beforehand */
#define RACE_LEN 64   /* the close race's writes: one more slot, at the end */

static const char *prov, *node;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The byte at @k of what worker @w writes in its operation @i; of the read
 * half when @w is WORKERS. */
static uint8_t pat(unsigned int w, unsigned int i, size_t k)
{
	uint32_t x = (uint32_t)(w * 7919u + i * 104729u + (uint32_t)k);

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return (uint8_t)(x | 1); /* never 0: a byte not written shows */
}

/* Whose pattern worker @w writes in @round (never WORKERS). */
static unsigned int writer(unsigned int w, unsigned int round)
{
	return w + 2 * WORKERS * round;
}

/* Length of worker @w's operation @i: 1 byte to SLOT. */
static size_t op_len(unsigned int w, unsigned int i)
{
	static const size_t lens[] = { 1, 8, 63, 512, 4096, 4097, 8192, 300 };

	return lens[(w + i) % 8];
}

struct world {
	struct tern_ctx *a, *b;
	struct tern_peer *peer; /* a -> b */
	struct tern_peer *back; /* b -> a (an RMA target knows its
				 * initiator: efa-direct, docs/efa.md) */
	struct tern_mr *src, *dst;
	struct tern_mr_desc rdesc;
	uint8_t *sbuf; /* a: WORKERS * OPS slots, written from */
	uint8_t *rbuf; /* a: WORKERS * WIN slots, read into */
	uint8_t *dbuf; /* b: WORKERS * OPS write slots, RD_SLOTS read, 1 */
	size_t dlen;
	struct tern_timer keep[2]; /* keep each DEFAULT loop running */
	atomic_int loops_stop;
};

static struct world W;

struct job {
	struct tern_task task;
	struct tern_req req;
	unsigned int w, i, win;
	int read;
	size_t len;
	uint64_t roff;
	uint8_t *lbuf;
	atomic_int done;
	atomic_int calls; /* request callbacks */
	int status;
};

struct worker {
	pthread_t th;
	unsigned int w;
	struct job jobs[WIN];
	unsigned int next_seq; /* ctx a's thread: the next i expected */
	int out_of_order;
	int writes, reads;
};

static struct worker workers[WORKERS];

static void job_done(struct tern_req *req)
{
	struct job *j = req->data;

	j->status = req->status;
	atomic_fetch_add(&j->calls, 1);
	atomic_store_explicit(&j->done, 1, memory_order_release);
}

/* On ctx a's thread: post the job's operation. */
static void job_start(struct tern_task *t, int status)
{
	struct job *j = t->data;
	struct worker *wk = &workers[j->w];
	int ret = status;

	if (j->i != wk->next_seq)
		wk->out_of_order++;
	wk->next_seq = j->i + 1;
	if (ret == 0) {
		tern_req_init(&j->req, job_done, j);
		ret = j->read ? tern_read(W.peer, W.src, j->lbuf, j->len,
					  &W.rdesc, j->roff, &j->req)
			      : tern_write(W.peer, W.src, j->lbuf, j->len,
					   &W.rdesc, j->roff, &j->req);
	}
	if (ret != 0) {
		j->status = ret;
		atomic_fetch_add(&j->calls, 1);
		atomic_store_explicit(&j->done, 1, memory_order_release);
	}
}

static void wait_done(struct job *j)
{
	uint64_t t0 = now_ms();
	unsigned int spins = 0;

	while (!atomic_load_explicit(&j->done, memory_order_acquire)) {
		if (++spins < 64) {
			sched_yield();
			continue;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 20000 }, NULL);
		CHECK(now_ms() - t0 < 30000,
		      "worker %u op %u (%s %zu B): no completion in 30 s", j->w,
		      j->i, j->read ? "read" : "write", j->len);
	}
}

static void job_check(struct job *j)
{
	CHECK(j->status == 0, "worker %u op %u (%s %zu B): %s", j->w, j->i,
	      j->read ? "read" : "write", j->len, tern_strerror(j->status));
	CHECK(atomic_load(&j->calls) == 1, "worker %u op %u: %d callbacks",
	      j->w, j->i, atomic_load(&j->calls));
	if (!j->read)
		return;
	for (size_t k = 0; k < j->len; k++) {
		unsigned int slot = (unsigned int)((j->roff -
						    (uint64_t)WORKERS * OPS *
							    SLOT) /
						   SLOT);

		CHECK(j->lbuf[k] == pat(WORKERS, slot, k),
		      "worker %u op %u: read slot %u byte %zu is %u, want %u",
		      j->w, j->i, slot, k, j->lbuf[k], pat(WORKERS, slot, k));
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;

	for (unsigned int n = 0; n < ROUNDS * OPS; n++) {
		struct job *j = &wk->jobs[n % WIN];
		unsigned int i = n % OPS, round = n / OPS;
		int ret;

		if (n >= WIN) {
			wait_done(j);
			job_check(j);
		}
		j->w = wk->w;
		j->i = n;
		j->read = i % 3 == 2;
		j->len = op_len(wk->w, i);
		atomic_store(&j->done, 0);
		atomic_store(&j->calls, 0);
		if (j->read) {
			unsigned int slot = (wk->w * 5 + i) % RD_SLOTS;

			j->roff = ((uint64_t)WORKERS * OPS + slot) * SLOT;
			j->lbuf = W.rbuf +
				  (size_t)(wk->w * WIN + n % WIN) * SLOT;
			memset(j->lbuf, 0, j->len);
			wk->reads++;
		} else {
			size_t off = ((size_t)wk->w * OPS + i) * SLOT;

			j->roff = off;
			j->lbuf = W.sbuf + off;
			for (size_t k = 0; k < j->len; k++)
				j->lbuf[k] = pat(writer(wk->w, round), i, k);
			wk->writes++;
		}
		ret = tern_task_submit(W.a, &j->task, job_start, j);
		CHECK(ret == 0, "worker %u op %u: submit: %s", wk->w, n,
		      tern_strerror(ret));
	}
	for (unsigned int i = 0; i < WIN; i++) {
		wait_done(&wk->jobs[i]);
		job_check(&wk->jobs[i]);
	}
	return NULL;
}

/* ---- the ctx threads ---- */

static void keep_cb(struct tern_timer *t)
{
	if (atomic_load(&W.loops_stop))
		tern_timer_stop(t); /* nothing left: DEFAULT returns */
}

static void *loop_main(void *arg)
{
	struct tern_ctx *ctx = arg;
	int ret = tern_run(ctx, TERN_RUN_DEFAULT);

	CHECK(ret == 0, "tern_run: %s", tern_strerror(ret));
	return NULL;
}

/* Stop a ctx's loop from another thread: a task, on its thread. */
static void stop_task(struct tern_task *t, int status)
{
	struct tern_timer *keep = t->data;

	CHECK(status == 0, "stop task: %s", tern_strerror(status));
	tern_timer_stop(keep);
	tern_stop(keep == &W.keep[0] ? W.a : W.b);
}

static void loop_halt(struct tern_ctx *ctx, struct tern_timer *keep,
		      pthread_t th)
{
	static struct tern_task stop[2];
	struct tern_task *t = &stop[keep == &W.keep[0] ? 0 : 1];

	memset(t, 0, sizeof(*t));
	CHECK(tern_task_submit(ctx, t, stop_task, keep) == 0, "stop task");
	pthread_join(th, NULL);
}

static struct tern_ctx *open_ctx(void)
{
	return pair_open(prov, node);
}

static struct tern_peer *peer_of(struct tern_ctx *a, struct tern_ctx *b)
{
	return pair_peer(a, b);
}

static void world_open(void)
{
	size_t slen = (size_t)WORKERS * OPS * SLOT;
	size_t rlen = (size_t)WORKERS * WIN * SLOT;

	W.dlen = slen + (size_t)(RD_SLOTS + 1) * SLOT;
	W.a = open_ctx();
	W.b = open_ctx();
	W.peer = peer_of(W.a, W.b);
	W.back = peer_of(W.b, W.a);
	W.sbuf = calloc(1, slen + rlen);
	W.dbuf = calloc(1, W.dlen);
	CHECK(W.sbuf != NULL && W.dbuf != NULL, "out of memory");
	W.rbuf = W.sbuf + slen;
	for (unsigned int s = 0; s < RD_SLOTS; s++) {
		for (size_t k = 0; k < SLOT; k++)
			W.dbuf[slen + (size_t)s * SLOT + k] = pat(WORKERS, s,
								  k);
	}
	CHECK(tern_mr_reg(W.a, W.sbuf, slen + rlen, TERN_ACCESS_LOCAL,
			  &W.src) == 0,
	      "reg src");
	CHECK(tern_mr_reg(W.b, W.dbuf, W.dlen,
			  TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_READ,
			  &W.dst) == 0,
	      "reg dst");
	CHECK(tern_mr_desc(W.dst, &W.rdesc) == 0, "desc");
}

static size_t race_off(void)
{
	return ((size_t)WORKERS * OPS + RD_SLOTS) * SLOT;
}

/* What the close race writes: worker 0's first read buffer, which it
 * filled with this before the race (it is done by then). */
static uint8_t race_byte(size_t k)
{
	return (uint8_t)(0xa5 ^ k);
}

/* Every byte of b's region: each write slot holds its slice and zeros
 * past it; the read half is as it was filled. */
static void check_target(void)
{
	size_t bad = 0, first = 0;

	for (unsigned int w = 0; w < WORKERS; w++) {
		for (unsigned int i = 0; i < OPS; i++) {
			const uint8_t *s = W.dbuf +
					   ((size_t)w * OPS + i) * SLOT;
			size_t len = i % 3 == 2 ? 0 : op_len(w, i);

			for (size_t k = 0; k < SLOT; k++) {
				uint8_t want = k < len ? pat(writer(w,
								    ROUNDS - 1),
							     i, k)
						       : 0;

				if (s[k] != want && bad++ == 0)
					first = (size_t)(s - W.dbuf) + k;
			}
		}
	}
	for (unsigned int s = 0; s < RD_SLOTS; s++) {
		for (size_t k = 0; k < SLOT; k++) {
			size_t off = ((size_t)WORKERS * OPS + s) * SLOT + k;

			if (W.dbuf[off] != pat(WORKERS, s, k) && bad++ == 0)
				first = off;
		}
	}
	/* The close race's slot: its writes' bytes where they landed (a
	 * write cancelled in flight may have landed in part), 0 elsewhere. */
	for (size_t k = 0; k < SLOT; k++) {
		size_t off = race_off() + k;
		uint8_t b = W.dbuf[off];

		if (b != 0 && (k >= RACE_LEN || b != race_byte(k)) &&
		    bad++ == 0)
			first = off;
	}
	CHECK(bad == 0, "target: %zu bytes wrong, the first at offset %zu", bad,
	      first);
}

/* ---- submits while the ctx closes ---- */

#define FRESH 64

struct racer {
	struct tern_task mine; /* kept queued: its cancel holds the close */
	struct tern_task fresh[FRESH];
	struct tern_req req[FRESH];
	int posted[FRESH];
	atomic_int hold;   /* a's loop stopped: nothing runs "mine" */
	atomic_int parked; /* -EBUSY since: "mine" is queued for good */
	atomic_int saw_refusal;
	atomic_int mine_cb, mine_cancelled;
	atomic_int fresh_cb, fresh_cancelled;
	atomic_int req_cb, req_cancelled, req_bad;
	int accepted_mine, accepted_fresh, posts;
	int bad; /* the racer thread's */
};

static struct racer R;

static void racer_req_cb(struct tern_req *req)
{
	atomic_fetch_add(&R.req_cb, 1);
	if (req->status == -ECANCELED)
		atomic_fetch_add(&R.req_cancelled, 1);
	else if (req->status != 0)
		atomic_fetch_add(&R.req_bad, 1);
}

static void racer_mine(struct tern_task *t, int status)
{
	uint64_t t0 = now_ms();

	(void)t;
	atomic_fetch_add(&R.mine_cb, 1);
	if (status != -ECANCELED)
		return;
	atomic_fetch_add(&R.mine_cancelled, 1);
	/* Inside the close: it frees the ctx once this returns, so the
	 * thread must have stopped submitting by then. */
	while (!atomic_load(&R.saw_refusal) && now_ms() - t0 < 10000)
		sched_yield();
}

static void racer_fresh(struct tern_task *t, int status)
{
	size_t i = (size_t)(t - R.fresh);

	atomic_fetch_add(&R.fresh_cb, 1);
	if (status == -ECANCELED) {
		atomic_fetch_add(&R.fresh_cancelled, 1);
		return;
	}
	/* Post a write; one in flight per task at most. */
	if (R.posted[i] && !R.req[i].done)
		return;
	tern_req_init(&R.req[i], racer_req_cb, NULL);
	if (tern_write(W.peer, W.src, W.rbuf, RACE_LEN, &W.rdesc, race_off(),
		       &R.req[i]) == 0) {
		R.posted[i] = 1;
		R.posts++;
	}
}

static void *racer_main(void *arg)
{
	unsigned int i = 0;

	(void)arg;
	for (;;) {
		int hold = atomic_load(&R.hold);
		int ret = tern_task_submit(W.a, &R.mine, racer_mine, NULL);

		if (ret == -ECANCELED)
			break;
		if (ret == 0)
			R.accepted_mine++;
		else if (ret != -EBUSY)
			R.bad++;
		else if (hold) /* queued, and nothing will run it */
			atomic_store(&R.parked, 1);
		ret = tern_task_submit(W.a, &R.fresh[i++ % FRESH], racer_fresh,
				       NULL);
		if (ret == -ECANCELED)
			break;
		if (ret == 0)
			R.accepted_fresh++;
		else if (ret != -EBUSY)
			R.bad++;
		if (!hold)
			sched_yield();
	}
	atomic_store(&R.saw_refusal, 1);
	return NULL;
}

static void close_race(pthread_t loop_a)
{
	pthread_t th;
	uint64_t t0;

	memset(&R, 0, sizeof(R));
	for (size_t k = 0; k < RACE_LEN; k++)
		W.rbuf[k] = race_byte(k);
	CHECK(pthread_create(&th, NULL, racer_main, NULL) == 0, "thread");
	/* Its tasks run, and post writes, for a while... */
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	/* ...then a's loop stops (this thread takes the ctx over) and its
	 * own task stays queued until the close: the racer says so once a
	 * submit of it was refused -EBUSY after the loop stopped. */
	loop_halt(W.a, &W.keep[0], loop_a);
	atomic_store(&R.hold, 1);
	t0 = now_ms();
	while (!atomic_load(&R.parked))
		CHECK(now_ms() - t0 < 10000, "racer's task never queued");
	/* Peer and region go with the ctx. */
	CHECK(tern_ctx_close(W.a) == 0, "close a");
	pthread_join(th, NULL);
	CHECK(R.bad == 0, "racer: %d unexpected submit results", R.bad);
	CHECK(atomic_load(&R.req_bad) == 0, "racer: %d writes failed",
	      atomic_load(&R.req_bad));
	CHECK(atomic_load(&R.mine_cancelled) == 1,
	      "racer: own task cancelled %d times",
	      atomic_load(&R.mine_cancelled));
	CHECK(atomic_load(&R.mine_cb) == R.accepted_mine,
	      "racer: %d submits of its own task accepted, %d callbacks",
	      R.accepted_mine, atomic_load(&R.mine_cb));
	CHECK(atomic_load(&R.fresh_cb) == R.accepted_fresh,
	      "racer: %d fresh submits accepted, %d callbacks",
	      R.accepted_fresh, atomic_load(&R.fresh_cb));
	CHECK(atomic_load(&R.req_cb) == R.posts,
	      "racer: %d writes posted, %d completions", R.posts,
	      atomic_load(&R.req_cb));
	CHECK(R.posts > 0, "racer: its tasks posted no write");
	printf("close race: %d + %d submits accepted, %d tasks cancelled by "
	       "the close, %d writes posted, %d of them cancelled, each "
	       "completed once\n",
	       R.accepted_mine, R.accepted_fresh,
	       atomic_load(&R.mine_cancelled) + atomic_load(&R.fresh_cancelled),
	       R.posts, atomic_load(&R.req_cancelled));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	pthread_t loop_th[2];
	int c, writes = 0, reads = 0, order = 0;
	uint64_t t0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			node = optarg;
		else
			return 2;
	}
	if (prov == NULL) {
		fprintf(stderr,
			"usage: threads --provider PROV [--node ADDR]\n");
		return 2;
	}
	world_open();
	for (int i = 0; i < 2; i++) {
		struct tern_ctx *ctx = i == 0 ? W.a : W.b;

		tern_timer_init(&W.keep[i], keep_cb, NULL);
		CHECK(tern_timer_start(ctx, &W.keep[i], 100, 100) == 0,
		      "timer");
		CHECK(pthread_create(&loop_th[i], NULL, loop_main, ctx) == 0,
		      "thread");
	}
	t0 = now_ms();
	for (unsigned int w = 0; w < WORKERS; w++) {
		workers[w].w = w;
		CHECK(pthread_create(&workers[w].th, NULL, worker_main,
				     &workers[w]) == 0,
		      "thread");
	}
	for (unsigned int w = 0; w < WORKERS; w++) {
		pthread_join(workers[w].th, NULL);
		writes += workers[w].writes;
		reads += workers[w].reads;
		order += workers[w].out_of_order;
	}
	CHECK(order == 0, "%d tasks ran out of their thread's order", order);
	CHECK(writes + reads == WORKERS * OPS * ROUNDS,
	      "%d operations, want %d", writes + reads, WORKERS * OPS * ROUNDS);
	printf("threads: %d workers, %d writes and %d reads through tasks in "
	       "%llu ms, each completed once, in order, reads byte-exact\n",
	       WORKERS, writes, reads, (unsigned long long)(now_ms() - t0));
	close_race(loop_th[0]);
	/* b's loop ran until a was gone: its memory is quiet now. */
	loop_halt(W.b, &W.keep[1], loop_th[1]);
	check_target();
	printf("target: %zu bytes checked\n", W.dlen);
	tern_mr_close(W.dst);
	CHECK(tern_ctx_close(W.b) == 0, "close b");
	free(W.sbuf);
	free(W.dbuf);
	return 0;
}
