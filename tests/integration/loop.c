/* SPDX-License-Identifier: MIT */
/*
 * The loop over a real provider, two ctxs in one process:
 *   cancel    100 writes queued, ctx closed: 100 -ECANCELED, each once
 *   inflight  100 writes, some handed to the provider, ctx closed: each
 *             completes exactly once (0 or -ECANCELED)
 *   closecb   a timer callback closes its own ctx with 100 writes out:
 *             tern_run() returns -TERN_ECLOSED, each write completed once
 *   embed     100 round trips driven by the caller's own poll() on
 *             tern_ctx_fd() with tern_ctx_arm()/tern_ctx_timeout()
 *   idle      tern_run() with a receive posted and a 100 ms timer for 2 s:
 *             CPU time used, from getrusage (must stay under 5%)
 *
 * usage: loop --provider shm|tcp [--node ADDR] SCENARIO
 * Run it under ASan: nothing may leak or be touched after free.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tern/tern.h>

#define N 100

static const char *prov, *node;
static int failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failed = 1;                                          \
		}                                                            \
	} while (0)

static struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr attr = { .provider = prov, .node = node };
	struct tern_ctx *ctx = NULL;
	int ret = tern_ctx_open(&attr, &ctx);

	if (ret != 0) {
		fprintf(stderr, "tern_ctx_open(%s): %s\n", prov,
			tern_strerror(ret));
		exit(1);
	}
	return ctx;
}

static struct tern_peer *peer_of(struct tern_ctx *a, struct tern_ctx *b)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p = NULL;
	ssize_t len = tern_ctx_card(b, card, sizeof(card));

	if (len < 0 || tern_peer_add(a, card, (size_t)len, &p) != 0) {
		fprintf(stderr, "peer_add failed\n");
		exit(1);
	}
	return p;
}

/* Two ctxs, a -> b, a source region in a and a target region in b. */
struct pair {
	struct tern_ctx *a, *b;
	struct tern_peer *peer;
	/* b knows a too: an RMA target must have its initiator in its
	 * address vector first (efa-direct; docs/efa.md). */
	struct tern_peer *back;
	struct tern_mr *src, *dst;
	struct tern_mr_desc rdesc;
	uint8_t *sbuf, *dbuf;
	struct tern_req w[N];
	int calls[N];
	int status[N];
};

static void w_cb(struct tern_req *req)
{
	struct pair *p = req->data;
	size_t i = (size_t)(req - p->w);

	p->calls[i]++;
	p->status[i] = req->status;
}

static void pair_open(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->a = open_ctx();
	p->b = open_ctx();
	p->peer = peer_of(p->a, p->b);
	p->back = peer_of(p->b, p->a);
	p->sbuf = calloc(N, 4096);
	p->dbuf = calloc(N, 4096);
	if (p->sbuf == NULL || p->dbuf == NULL ||
	    tern_mr_reg(p->a, p->sbuf, N * 4096, TERN_ACCESS_LOCAL, &p->src) ||
	    tern_mr_reg(p->b, p->dbuf, N * 4096, TERN_ACCESS_REMOTE_WRITE,
			&p->dst) ||
	    tern_mr_desc(p->dst, &p->rdesc)) {
		fprintf(stderr, "setup failed\n");
		exit(1);
	}
}

static void post_writes(struct pair *p)
{
	for (int i = 0; i < N; i++) {
		tern_req_init(&p->w[i], w_cb, p);
		CHECK(tern_write(p->peer, p->src, p->sbuf + i * 4096, 4096,
				 &p->rdesc, (uint64_t)i * 4096, &p->w[i]) == 0,
		      "write %d", i);
	}
}

/* Each write completed exactly once; @return how many were cancelled. */
static int count_once(struct pair *p, const char *what)
{
	int cancelled = 0;

	for (int i = 0; i < N; i++) {
		CHECK(p->calls[i] == 1 && p->w[i].done,
		      "%s: write %d completed %d times", what, i, p->calls[i]);
		CHECK(p->status[i] == 0 || p->status[i] == -ECANCELED,
		      "%s: write %d status %s", what, i,
		      tern_strerror(p->status[i]));
		cancelled += p->status[i] == -ECANCELED;
	}
	return cancelled;
}

static void pair_close_rest(struct pair *p)
{
	tern_mr_close(p->dst);
	CHECK(tern_ctx_close(p->b) == 0, "close b");
	free(p->sbuf);
	free(p->dbuf);
}

static void test_cancel(void)
{
	static struct pair p;

	pair_open(&p);
	post_writes(&p);
	/* Peer and source region still open: the close takes them along. */
	CHECK(tern_ctx_close(p.a) == 0, "close a");
	CHECK(count_once(&p, "cancel") == N, "not all %d cancelled", N);
	pair_close_rest(&p);
	printf("cancel: %d writes queued, ctx closed: %d -ECANCELED, each "
	       "once\n",
	       N, N);
}

static void test_inflight(void)
{
	static struct pair p;
	int c;

	pair_open(&p);
	post_writes(&p);
	for (int i = 0; i < 3; i++) {
		tern_progress(p.a);
		tern_progress(p.b);
	}
	CHECK(tern_ctx_close(p.a) == 0, "close a");
	c = count_once(&p, "inflight");
	pair_close_rest(&p);
	printf("inflight: %d writes, ctx closed after 3 progress passes: %d "
	       "done, %d -ECANCELED, each once\n",
	       N, N - c, c);
}

static int closed_in_cb;

static void close_cb(struct tern_timer *t)
{
	struct pair *p = t->data;

	static struct tern_req late;

	/* Peer and region go with it; the ctx is freed after this
	 * callback returns, not inside the close. */
	closed_in_cb = tern_ctx_close(p->a) == 0;
	tern_req_init(&late, NULL, NULL);
	CHECK(tern_send_imm(NULL, NULL, NULL, 0, 0, &late) == -EINVAL, "args");
	CHECK(tern_timer_start(p->a, t, 10, 0) == -ECANCELED,
	      "a closing ctx took a timer");
}

static void test_closecb(void)
{
	static struct pair p;
	struct tern_timer t;
	int ret, c;

	pair_open(&p);
	post_writes(&p);
	tern_timer_init(&t, close_cb, &p);
	CHECK(tern_timer_start(p.a, &t, 0, 0) == 0, "timer");
	ret = tern_run(p.a, TERN_RUN_DEFAULT);
	CHECK(ret == -TERN_ECLOSED, "tern_run returned %s, want ECLOSED",
	      tern_strerror(ret));
	CHECK(closed_in_cb, "close in callback failed");
	c = count_once(&p, "closecb");
	pair_close_rest(&p);
	printf("closecb: a timer closed its ctx with %d writes out: run "
	       "returned -TERN_ECLOSED; %d done, %d -ECANCELED, each once\n",
	       N, N - c, c);
}

/* ---- embedding: the caller's poll() loop drives both ctxs ---- */

struct echo {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	struct tern_mr *mr;
	uint8_t *buf;
	struct tern_req rx, tx;
	int got, sent;
};

static void echo_rx(struct tern_req *req);

static void echo_post_rx(struct echo *e)
{
	tern_req_init(&e->rx, echo_rx, e);
	CHECK(tern_recv(e->ctx, e->mr, e->buf, 64, &e->rx) == 0, "recv");
}

static void echo_send(struct echo *e)
{
	tern_req_init(&e->tx, NULL, e);
	CHECK(tern_send(e->peer, e->mr, e->buf + 64, 8, &e->tx) == 0, "send");
	e->sent++;
}

static void echo_rx(struct tern_req *req)
{
	struct echo *e = req->data;

	if (req->status != 0)
		return;
	e->got++;
	echo_post_rx(e);
	if (e->sent < N)
		echo_send(e);
}

static void test_embed(void)
{
	struct echo e[2];
	struct tern_ctx_info ci;
	uint64_t t0 = 0;
	int sleeps = 0, wakes = 0;
	struct timespec ts;

	memset(e, 0, sizeof(e));
	for (int i = 0; i < 2; i++) {
		e[i].ctx = open_ctx();
		e[i].buf = calloc(1, 4096);
		CHECK(tern_mr_reg(e[i].ctx, e[i].buf, 4096, TERN_ACCESS_LOCAL,
				  &e[i].mr) == 0,
		      "reg");
	}
	e[0].peer = peer_of(e[0].ctx, e[1].ctx);
	e[1].peer = peer_of(e[1].ctx, e[0].ctx);
	tern_ctx_query(e[0].ctx, &ci);
	for (int i = 0; i < 2; i++)
		echo_post_rx(&e[i]);
	echo_send(&e[0]);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (uint64_t)ts.tv_sec;
	while ((e[0].got < N || e[1].got < N) && !failed) {
		struct pollfd pfd[2];
		int timeout = -1, ready = 1;

		for (int i = 0; i < 2; i++) {
			int t;

			tern_run(e[i].ctx, TERN_RUN_NOWAIT);
			if (tern_ctx_arm(e[i].ctx) == -EAGAIN)
				ready = 0;
			t = tern_ctx_timeout(e[i].ctx);
			if (t >= 0 && (timeout < 0 || t < timeout))
				timeout = t;
			pfd[i] = (struct pollfd){ .fd = tern_ctx_fd(e[i].ctx),
						  .events = POLLIN };
		}
		if (!ready)
			continue;
		/* Both armed: sleep until a fd is readable (or the poll
		 * interval of a provider without wait fds). */
		sleeps++;
		if (poll(pfd, 2, timeout < 0 ? 5000 : timeout) > 0)
			wakes++;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		CHECK((uint64_t)ts.tv_sec - t0 < 30, "embed: stuck at %d/%d",
		      e[0].got, e[1].got);
	}
	printf("embed: %d + %d messages through the caller's poll() loop "
	       "(%s: %s), %d sleeps, %d woken by the fd\n",
	       e[0].got, e[1].got, ci.provider,
	       ci.wait_fd ? "wait fds" : "polling", sleeps, wakes);
	CHECK(e[0].got == N && e[1].got == N, "embed: got %d and %d", e[0].got,
	      e[1].got);
	for (int i = 0; i < 2; i++) {
		CHECK(tern_ctx_close(e[i].ctx) == 0, "close");
		free(e[i].buf);
	}
}

/* ---- idle: no spinning ---- */

static void tick_cb(struct tern_timer *t)
{
	int *ticks = t->data;

	if (++*ticks == 20)
		tern_stop(t->_priv.ctx);
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void test_idle(void)
{
	struct tern_ctx *ctx = open_ctx();
	struct tern_ctx_info ci;
	struct tern_timer t;
	struct tern_mr *mr;
	struct tern_req rx;
	uint8_t *buf = calloc(1, 4096);
	struct timespec a, b;
	double c0, c1, wall;
	int ticks = 0;

	tern_ctx_query(ctx, &ci);
	CHECK(tern_mr_reg(ctx, buf, 4096, TERN_ACCESS_LOCAL, &mr) == 0, "reg");
	tern_req_init(&rx, NULL, NULL);
	CHECK(tern_recv(ctx, mr, buf, 4096, &rx) == 0, "recv");
	tern_timer_init(&t, tick_cb, &ticks);
	tern_timer_start(ctx, &t, 100, 100);
	clock_gettime(CLOCK_MONOTONIC, &a);
	c0 = cpu_s();
	CHECK(tern_run(ctx, TERN_RUN_DEFAULT) == 0, "run");
	c1 = cpu_s();
	clock_gettime(CLOCK_MONOTONIC, &b);
	wall = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("idle: %s (%s): %.3f s of CPU in %.2f s idle = %.2f%% of a "
	       "core, %d timer ticks\n",
	       ci.provider, ci.wait_fd ? "sleeps on wait fds" : "polls",
	       c1 - c0, wall, 100 * (c1 - c0) / wall, ticks);
	CHECK(ticks == 20, "ticks %d", ticks);
	CHECK(wall >= 1.9, "stopped early: %.2f s", wall);
	CHECK((c1 - c0) / wall < 0.05, "idle loop used %.1f%% of a core",
	      100 * (c1 - c0) / wall);
	CHECK(tern_ctx_close(ctx) == 0, "close");
	CHECK(rx.done && rx.status == -ECANCELED, "receive not cancelled");
	free(buf);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *what;
	int c;

	while ((c = getopt_long(argc, argv, "p:n:", opts, NULL)) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			node = optarg;
		else
			return 2;
	}
	if (prov == NULL || optind != argc - 1) {
		fprintf(stderr, "usage: loop --provider P [--node ADDR] "
				"cancel|inflight|closecb|embed|idle\n");
		return 2;
	}
	what = argv[optind];
	if (strcmp(what, "cancel") == 0)
		test_cancel();
	else if (strcmp(what, "inflight") == 0)
		test_inflight();
	else if (strcmp(what, "closecb") == 0)
		test_closecb();
	else if (strcmp(what, "embed") == 0)
		test_embed();
	else if (strcmp(what, "idle") == 0)
		test_idle();
	else
		return 2;
	printf("%s: %s %s\n", failed ? "FAIL" : "PASS", what, prov);
	return failed;
}
