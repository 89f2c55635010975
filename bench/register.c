/* SPDX-License-Identifier: MIT */
/*
 * tern bench --op register: what registering host memory costs, per size
 * (bench_register()). Each iteration maps a fresh range of address space
 * (MAP_NORESERVE, never touched: a size may exceed the machine's memory)
 * and times
 *
 *   cold: tern_mr_reg() + tern_mr_close() of it, a range no region
 *     covers (a fresh mapping, so that no cache of the provider's, keyed
 *     by address, can answer either);
 *   cached: the same again while the cold region is open, which the
 *     registration cache answers (docs/api.md);
 *   first-write, second-write: two writes of BENCH_REG_WRITE bytes from
 *     its offset 0 to the responder's region, post to completion: the
 *     region's first use, then its second.
 *
 * --churn N then registers and closes N ranges of one mapping, 1 MiB to
 * 1 GiB in turn, and reports a cycle's median over the first, the middle
 * and the last tenth of the run: a cost that grows with use shows there.
 */
#define _GNU_SOURCE /* cpu_set_t, in bench/common.h */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/core.h"
#include "engine_int.h"

/* As a region that peers read and write and this side writes from. */
#define REG_ACCESS \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE)

enum { M_COLD, M_CACHED, M_FIRST, M_SECOND, M_N };

static const char *const measure_name[M_N] = { "cold", "cached", "first-write",
					       "second-write" };

struct reg_run {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	const struct tern_mr_desc *remote;
	const struct bench_opts *o;
	uint64_t wlen; /* the responder's region: the largest write */
	/* On the heap: a write that never completes keeps it. */
	struct tern_req *req;
	int stuck;
	int shared; /* the last cached registration shared the cold one */
	uint64_t next_show;
	struct bench_hist h[M_N];
};

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* @len bytes of address space, no page touched. */
static void *map_space(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int same_keys(const struct tern_mr *x, const struct tern_mr *y)
{
	struct tern_mr_desc dx, dy;

	if (tern_mr_desc(x, &dx) != 0 || tern_mr_desc(y, &dy) != 0)
		return 0;
	return dx.nkeys == dy.nkeys &&
	       memcmp(dx.keys, dy.keys, dx.nkeys * sizeof(dx.keys[0])) == 0;
}

/* A write of @len bytes from @buf (region @mr) to the responder's region,
 * waited for; its post-to-completion time in *@ns_p. */
static int write_timed(struct reg_run *r, struct tern_mr *mr, void *buf,
		       size_t len, uint64_t *ns_p)
{
	uint64_t t0;
	int ret;

	tern_req_init(r->req, NULL, NULL);
	t0 = clock_ns();
	ret = tern_write(r->peer, mr, buf, len, r->remote, 0, r->req);
	if (ret != 0)
		return ret;
	ret = tern_wait(r->ctx, r->req, CTRL_TIMEOUT_MS);
	*ns_p = clock_ns() - t0;
	if (ret != 0 && !r->req->done) {
		r->stuck = 1;
		return ret;
	}
	return ret != 0 ? ret : r->req->status;
}

/* Why @what of @size bytes failed, into @why. */
static int failed(int ret, const char *what, uint64_t size, char *why,
		  size_t whylen)
{
	char sz[32];

	snprintf(sz, sizeof(sz), "%" PRIu64, size);
	snprintf(why, whylen, "--op register: %s (%s bytes): %s", what, sz,
		 tern_strerror(ret));
	return ret;
}

/* One iteration at @size: cold, cached, the two writes; recorded when
 * @timed. */
static int reg_once(struct reg_run *r, uint64_t size, int timed, char *why,
		    size_t whylen)
{
	size_t len = (size_t)size, wlen = (size_t)TERN_MIN(size, r->wlen);
	uint64_t t0, t1, t2, t3, t4, t5, t6, w1 = 0, w2 = 0;
	struct tern_mr *a = NULL, *b = NULL;
	const char *what = "tern_mr_reg()";
	uint8_t *buf = map_space(len);
	int ret, c;

	if (buf == NULL)
		return failed(-errno, "mapping address space", size, why,
			      whylen);
	t0 = clock_ns();
	ret = tern_mr_reg(r->ctx, buf, len, REG_ACCESS, &a);
	t1 = clock_ns();
	if (ret == 0)
		ret = tern_mr_reg(r->ctx, buf, len, REG_ACCESS, &b);
	t2 = clock_ns();
	if (ret == 0) {
		r->shared = same_keys(a, b);
		t3 = clock_ns();
		what = "tern_mr_close()";
		ret = tern_mr_close(b);
	} else {
		t3 = t2;
	}
	t4 = clock_ns();
	if (ret == 0) {
		what = "the first write";
		ret = write_timed(r, a, buf, wlen, &w1);
	}
	if (ret == 0) {
		what = "the second write";
		ret = write_timed(r, a, buf, wlen, &w2);
	}
	/* The provider may still read the range: keep it, and its region. */
	if (r->stuck)
		return failed(ret, what, size, why, whylen);
	t5 = clock_ns();
	c = tern_mr_close(a);
	t6 = clock_ns();
	munmap(buf, len);
	if (ret == 0 && c != 0) {
		what = "tern_mr_close()";
		ret = c;
	}
	if (ret != 0)
		return failed(ret, what, size, why, whylen);
	if (timed) {
		bench_hist_add(&r->h[M_COLD], (t1 - t0) + (t6 - t5));
		bench_hist_add(&r->h[M_CACHED], (t2 - t1) + (t4 - t3));
		bench_hist_add(&r->h[M_FIRST], w1);
		bench_hist_add(&r->h[M_SECOND], w2);
	}
	return 0;
}

/* The live line: @size bytes (0: the churn), @done of @of iterations. */
static void show_progress(struct reg_run *r, uint64_t size, uint64_t done,
			  uint64_t of)
{
	uint64_t now = clock_ns();

	if (!r->o->progress || now < r->next_show)
		return;
	r->next_show = now + 500000000ULL;
	if (size != 0)
		fprintf(stderr, "\rbench: register %" PRIu64 " B: ", size);
	else
		fprintf(stderr, "\rbench: register churn: ");
	fprintf(stderr, "%" PRIu64 " of %" PRIu64 "   ", done, of);
	fflush(stderr);
}

/* Every iteration of one size, then its four points into @rep. */
static int reg_size(struct reg_run *r, uint64_t size, uint64_t iters,
		    uint64_t warmup, struct bench_report *rep, char *why,
		    size_t whylen)
{
	const struct bench_opts *o = r->o;
	int ret = 0;

	for (int m = 0; m < M_N; m++)
		bench_hist_init(&r->h[m]);
	for (uint64_t i = 0; i < warmup + iters && ret == 0; i++) {
		ret = reg_once(r, size, i >= warmup, why, whylen);
		if (ret == 0 && o->stop != NULL && *o->stop)
			ret = -EINTR;
		show_progress(r, size, i + 1, warmup + iters);
	}
	if (o->progress)
		fprintf(stderr, "\r%60s\r", "");
	if (ret != 0)
		return ret;
	for (int m = 0; m < M_N; m++) {
		struct bench_point *pt = &rep->points[rep->npoints++];
		const struct bench_hist *h = &r->h[m];

		memset(pt, 0, sizeof(*pt));
		pt->size = size;
		pt->ops = h->count;
		pt->link_pct = -1;
		snprintf(pt->measure, sizeof(pt->measure), "%s",
			 measure_name[m]);
		pt->lat_min_us = (double)bench_hist_quantile(h, 0) / 1e3;
		pt->lat_p50_us = (double)bench_hist_quantile(h, 0.5) / 1e3;
		pt->lat_p99_us = (double)bench_hist_quantile(h, 0.99) / 1e3;
		pt->lat_p999_us = (double)bench_hist_quantile(h, 0.999) / 1e3;
		pt->lat_max_us = (double)bench_hist_quantile(h, 1) / 1e3;
		pt->cold_us = NAN;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n (>= 1) samples in ns, as us; sorts them. */
static double median_us(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return (double)v[n / 2] / 1e3;
}

/* --churn: @cycles register/close cycles in one mapping of 2 GiB, the
 * n-th of 1 MiB << (n % 11) bytes at n % 1024 MiB. */
static int churn(struct reg_run *r, uint64_t cycles, struct bench_context *c,
		 char *why, size_t whylen)
{
	const size_t span = (size_t)2 << 30, mib = (size_t)1 << 20;
	uint64_t *t = malloc(cycles * sizeof(*t));
	size_t tenth = (size_t)TERN_MAX(cycles / 10, (uint64_t)1);
	uint8_t *base = map_space(span);
	int ret = 0;

	if (t == NULL || base == NULL) {
		ret = t == NULL ? -ENOMEM : -errno;
		snprintf(why, whylen, "--churn: %s",
			 t == NULL ? "no memory for the timings"
				   : "mapping 2 GiB of address space");
		goto out;
	}
	for (uint64_t i = 0; i < cycles && ret == 0; i++) {
		size_t len = mib << (i % 11);
		uint8_t *p = base + (i % 1024) * mib;
		struct tern_mr *mr;
		uint64_t t0 = clock_ns();

		ret = tern_mr_reg(r->ctx, p, len, REG_ACCESS, &mr);
		if (ret == 0)
			ret = tern_mr_close(mr);
		t[i] = clock_ns() - t0;
		if (ret != 0)
			failed(ret, "--churn", len, why, whylen);
		else if (r->o->stop != NULL && *r->o->stop)
			ret = -EINTR;
		show_progress(r, 0, i + 1, cycles);
	}
	if (r->o->progress)
		fprintf(stderr, "\r%60s\r", "");
	if (ret == 0) {
		c->churn_cycles = cycles;
		c->churn_start_us = median_us(t, tenth);
		c->churn_middle_us = median_us(t + (cycles - tenth) / 2, tenth);
		c->churn_end_us = median_us(t + cycles - tenth, tenth);
	}
out:
	if (base != NULL)
		munmap(base, span);
	free(t);
	return ret;
}

int bench_register(struct tern_ctx *ctx, struct tern_peer *peer,
		   const struct tern_mr_desc *remote, uint64_t wlen,
		   const struct bench_opts *o, struct bench_report *rep,
		   int *stuck_p, char *why, size_t whylen)
{
	struct reg_run *r = calloc(1, sizeof(*r));
	uint64_t iters = o->iters ? o->iters : BENCH_REG_ITERS, warmup;
	int ret = 0;

	if (r == NULL)
		return -ENOMEM;
	r->req = malloc(sizeof(*r->req));
	if (r->req == NULL) {
		free(r);
		return -ENOMEM;
	}
	r->ctx = ctx;
	r->peer = peer;
	r->remote = remote;
	r->o = o;
	r->wlen = wlen;
	warmup = o->warmup != BENCH_AUTO ? o->warmup
					 : TERN_MAX(iters / 10, (uint64_t)16);
	rep->ctx.iters = iters;
	rep->ctx.warmup = warmup;
	rep->ctx.write_bytes = wlen;
	rep->ctx.churn_start_us = NAN;
	rep->ctx.churn_middle_us = NAN;
	rep->ctx.churn_end_us = NAN;
	for (size_t i = 0; i < o->nsizes && ret == 0; i++) {
		ret = reg_size(r, o->sizes[i], iters, warmup, rep, why, whylen);
		if (i == 0)
			rep->ctx.reg_cache = r->shared;
	}
	if (ret == 0 && o->churn != 0)
		ret = churn(r, o->churn, &rep->ctx, why, whylen);
	*stuck_p = r->stuck;
	if (!r->stuck)
		free(r->req);
	free(r);
	return ret;
}
