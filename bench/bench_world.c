/* SPDX-License-Identifier: MIT */
/*
 * `tern bench --world` and `tern ping --world`: every rank of a world
 * against every other. The pairs run in N-1 steps; at step k rank r
 * targets (r + k) mod N while (r - k) mod N targets it, so every rank
 * writes to one peer and is written by one peer at a time (a balanced
 * permutation, as nccl-tests' alltoall and nixlbench's pairwise modes).
 * A fence opens each step, so a row's figures were all measured under
 * the same load. Each rank publishes its row through the world; rank 0
 * prints the matrix.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>
#include <tern/world.h>

#include "apps/json.h"
#include "bench_world.h"
#include "core/core.h"

/* Immediates of the all-to-all: a tag in the top byte, the size index
 * and step below, so nothing of one step counts toward the next. */
#define A2A_IMM(si, k) ((0xa2u << 24) | ((uint32_t)(si) << 16) | (k))
#define PING_IMM(k)    ((0xb1u << 24) | (uint32_t)(k))
#define PONG_IMM(k)    ((0xb2u << 24) | (uint32_t)(k))
#define WORLD_WAIT_MS  60000
#define PONG_RING      16

static void whyf(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void whyf(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* The byte pattern rank @src writes to rank @dst at size @size. */
static uint8_t pat(int src, int dst, uint64_t size, size_t i)
{
	uint64_t x = ((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ size ^
		     (i * 0x9E3779B97F4A7C15ULL);

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ULL;
	return (uint8_t)(x >> 56);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Wait for @req, failing after WORLD_WAIT_MS. */
static int wait_req(struct tern_ctx *ctx, struct tern_req *req, char *why,
		    size_t whylen, const char *what, int peer)
{
	int ret = tern_wait(ctx, req, WORLD_WAIT_MS);

	if (ret == 0)
		ret = req->status;
	if (ret != 0)
		whyf(why, whylen, "%s (rank %d): %s", what, peer,
		     tern_strerror(ret));
	return ret;
}

/* Rank 0 gathers every row of @name (N uint32 each) into @m. */
static int gather(struct tern_world *w, const char *name, uint32_t *m, int n,
		  char *why, size_t whylen)
{
	for (int r = 0; r < n; r++) {
		ssize_t got = tern_world_get(w, r, name, &m[(size_t)r * n],
					     (size_t)n * sizeof(uint32_t));

		if (got != (ssize_t)((size_t)n * sizeof(uint32_t))) {
			whyf(why, whylen, "rank %d's row %s: %s", r, name,
			     got < 0 ? tern_strerror((int)got)
				     : "wrong length");
			return got < 0 ? (int)got : -TERN_EPROTO;
		}
	}
	return 0;
}

struct mstats {
	uint32_t min, med, max;
	int min_i, min_j, max_i, max_j;
};

static void matrix_stats(const uint32_t *m, int n, struct mstats *s)
{
	uint32_t *v = malloc(sizeof(*v) * (size_t)n * (size_t)n);
	size_t c = 0;

	*s = (struct mstats){ .min = UINT32_MAX };
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			uint32_t x = m[(size_t)i * n + j];

			if (i == j)
				continue;
			if (v != NULL)
				v[c++] = x;
			if (x < s->min) {
				s->min = x;
				s->min_i = i, s->min_j = j;
			}
			if (x >= s->max) {
				s->max = x;
				s->max_i = i, s->max_j = j;
			}
		}
	}
	if (v != NULL && c > 0) {
		qsort(v, c, sizeof(*v), cmp_u32);
		s->med = c % 2 ? v[c / 2]
			       : (uint32_t)(((uint64_t)v[c / 2 - 1] +
					     v[c / 2]) /
					    2);
	}
	free(v);
}

/* --- the all-to-all ------------------------------------------------ */

struct a2a {
	struct tern_ctx *ctx;
	struct tern_world *w;
	const struct bench_world_opts *o;
	int rank, n;
	uint64_t slot; /* bytes per writer in the target buffer */
	uint8_t *src, *dst;
	struct tern_mr *smr, *dmr;
	struct tern_mr_desc *descs; /* every rank's target region */
	struct tern_req *reqs;	    /* the window */
};

/* @count writes of @size to @p, at most a window in flight. */
static int a2a_burst(struct a2a *a, struct tern_peer *peer, size_t si, int k,
		     int p, uint64_t count, char *why, size_t whylen)
{
	const struct bench_world_opts *o = a->o;
	const void *buf = a->src + (uint64_t)p * a->slot;
	uint64_t roff = (uint64_t)a->rank * a->slot, size = o->sizes[si];
	uint64_t posted = 0, done = 0;
	unsigned int win = o->window;
	int ret;

	/* Writes with immediate when verifying, so the target counts every
	 * one landed before it checks (delivery is unordered). */
	while (done < count) {
		while (posted < count && posted - done < win) {
			struct tern_req *req = &a->reqs[posted % win];

			ret = o->verify
				      ? tern_write_imm(peer, a->smr, buf, size,
						       &a->descs[p], roff,
						       A2A_IMM(si, k), req)
				      : tern_write(peer, a->smr, buf, size,
						   &a->descs[p], roff, req);
			if (ret != 0) {
				whyf(why, whylen, "write to rank %d: %s", p,
				     tern_strerror(ret));
				return ret;
			}
			posted++;
		}
		ret = wait_req(a->ctx, &a->reqs[done % win], why, whylen,
			       "write", p);
		if (ret != 0)
			return ret;
		done++;
	}
	return 0;
}

/* One step of one size: the warmup, then o->iters timed writes to @p.
 * kB/s into *kbps. */
static int a2a_pair(struct a2a *a, size_t si, int k, int p, uint32_t *kbps,
		    char *why, size_t whylen)
{
	const struct bench_world_opts *o = a->o;
	struct tern_peer *peer;
	uint64_t t0, ns;
	double v;
	int ret;

	ret = tern_world_peer(a->w, p, &peer);
	if (ret != 0) {
		whyf(why, whylen, "peer rank %d: %s", p, tern_strerror(ret));
		return ret;
	}
	ret = a2a_burst(a, peer, si, k, p, o->warmup, why, whylen);
	if (ret != 0)
		return ret;
	t0 = tern__now_ns();
	ret = a2a_burst(a, peer, si, k, p, o->iters, why, whylen);
	if (ret != 0)
		return ret;
	ns = tern__now_ns() - t0;
	/* kB/s: 1 kB/s to 4.3 TB/s in a uint32 */
	v = (double)o->iters * (double)o->sizes[si] * 1e6 /
	    (double)(ns ? ns : 1);
	*kbps = v > UINT32_MAX ? UINT32_MAX : (uint32_t)(v + 0.5);
	return 0;
}

static int a2a_check(struct a2a *a, uint64_t size, uint64_t *bad)
{
	for (int q = 0; q < a->n; q++) {
		const uint8_t *d = a->dst + (uint64_t)q * a->slot;

		if (q == a->rank)
			continue;
		for (uint64_t i = 0; i < size; i++) {
			if (d[i] != pat(q, a->rank, size, i)) {
				(*bad)++;
				break;
			}
		}
	}
	return *bad ? -TERN_EVERIFY : 0;
}

static void print_matrix(FILE *f, const uint32_t *m, int n, double scale,
			 const char *fmt)
{
	fprintf(f, "%6s", "");
	for (int j = 0; j < n; j++)
		fprintf(f, " %8d", j);
	fprintf(f, "\n");
	for (int i = 0; i < n; i++) {
		fprintf(f, "%6d", i);
		for (int j = 0; j < n; j++) {
			if (i == j)
				fprintf(f, " %8s", "-");
			else
				fprintf(f, fmt, m[(size_t)i * n + j] / scale);
		}
		fprintf(f, "\n");
	}
}

static void json_matrix(FILE *f, const uint32_t *m, int n, double scale)
{
	fprintf(f, "[");
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s[", i ? "," : "");
		for (int j = 0; j < n; j++) {
			if (i == j)
				fprintf(f, "%snull", j ? "," : "");
			else
				fprintf(f, "%s%.6f", j ? "," : "",
					m[(size_t)i * n + j] / scale);
		}
		fprintf(f, "]");
	}
	fprintf(f, "]");
}

static void a2a_report(struct a2a *a, size_t si, const uint32_t *m,
		       int verified, FILE *json, int first)
{
	uint64_t size = a->o->sizes[si];
	struct mstats s;
	int n = a->n;

	matrix_stats(m, n, &s);
	printf("\nsize %" PRIu64 " B: GB/s, row = writer, column = target\n",
	       size);
	print_matrix(stdout, m, n, 1e6, " %8.3f");
	printf("per rank, GB/s written (read):");
	for (int i = 0; i < n; i++) {
		uint64_t out = 0, in = 0;

		for (int j = 0; j < n; j++) {
			out += m[(size_t)i * n + j] * (i != j);
			in += m[(size_t)j * n + i] * (i != j);
		}
		printf(" %d: %.3f (%.3f)", i, out / 1e6, in / 1e6);
	}
	printf("\nmin %.3f, median %.3f, max %.3f GB/s; slowest pair %d -> "
	       "%d%s\n",
	       s.min / 1e6, s.med / 1e6, s.max / 1e6, s.min_i, s.min_j,
	       a->o->verify ? (verified ? "; verified: every byte of every "
					  "pair"
					: "; VERIFY FAILED")
			    : "");
	if (json == NULL)
		return;
	fprintf(json, "%s{\"size\":%" PRIu64 ",\"unit\":\"GB/s\",\"matrix\":",
		first ? "" : ",", size);
	json_matrix(json, m, n, 1e6);
	fprintf(json,
		",\"min\":%.6f,\"median\":%.6f,\"max\":%.6f,"
		"\"slowest\":[%d,%d],\"verified\":%s}",
		s.min / 1e6, s.med / 1e6, s.max / 1e6, s.min_i, s.min_j,
		!a->o->verify ? "null"
		: verified    ? "true"
			      : "false");
}

static void a2a_free(struct a2a *a)
{
	tern_mr_close(a->smr);
	tern_mr_close(a->dmr);
	free(a->src);
	free(a->dst);
	free(a->descs);
	free(a->reqs);
}

static int a2a_setup(struct a2a *a, char *why, size_t whylen)
{
	const struct bench_world_opts *o = a->o;
	uint64_t len;
	int ret;

	for (size_t i = 0; i < o->nsizes; i++)
		a->slot = o->sizes[i] > a->slot ? o->sizes[i] : a->slot;
	len = a->slot * (uint64_t)a->n;
	if (len / (uint64_t)a->n != a->slot || len > BENCH_WORLD_MAX_BUF) {
		whyf(why, whylen,
		     "%d ranks x %" PRIu64 " B = more than the %llu MiB "
		     "buffer limit: use smaller --sizes",
		     a->n, a->slot,
		     (unsigned long long)(BENCH_WORLD_MAX_BUF >> 20));
		return -EINVAL;
	}
	a->src = aligned_alloc(4096, (len + 4095) & ~4095ULL);
	a->dst = aligned_alloc(4096, (len + 4095) & ~4095ULL);
	a->descs = calloc((size_t)a->n, sizeof(*a->descs));
	a->reqs = calloc(o->window, sizeof(*a->reqs));
	if (!a->src || !a->dst || !a->descs || !a->reqs)
		return -ENOMEM;
	memset(a->dst, 0, len);
	for (unsigned int i = 0; i < o->window; i++)
		tern_req_init(&a->reqs[i], NULL, NULL);
	ret = tern_mr_reg(a->ctx, a->src, len, TERN_ACCESS_LOCAL, &a->smr);
	if (ret == 0)
		ret = tern_mr_reg(a->ctx, a->dst, len,
				  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
				  &a->dmr);
	if (ret != 0) {
		whyf(why, whylen, "registering %" PRIu64 " B: %s", len,
		     tern_strerror(ret));
		return ret;
	}
	{
		struct tern_mr_desc d;

		tern_mr_desc(a->dmr, &d);
		ret = tern_world_publish(a->w, "bench.a2a", &d);
	}
	if (ret == 0)
		ret = tern_world_fence(a->w);
	for (int r = 0; ret == 0 && r < a->n; r++) {
		if (r != a->rank)
			ret = tern_world_lookup(a->w, r, "bench.a2a",
						&a->descs[r]);
		if (ret == 0 && r != a->rank && a->descs[r].len < len) {
			whyf(why, whylen,
			     "rank %d's region: %" PRIu64 " B, not %" PRIu64, r,
			     a->descs[r].len, len);
			return -TERN_EDESC;
		}
		if (ret != 0)
			whyf(why, whylen, "rank %d's region: %s", r,
			     tern_strerror(ret));
	}
	if (ret != 0 && why[0] == '\0')
		whyf(why, whylen, "fence: %s", tern_strerror(ret));
	return ret;
}

/* Rank 0: what the all-to-all runs, on stdout and opening the JSON. */
static void a2a_header(struct a2a *a, FILE *json)
{
	const struct bench_world_opts *o = a->o;
	struct tern_ctx_info ci;

	tern_ctx_query(a->ctx, &ci);
	printf("bench: world %s, %d ranks, provider %s, %s, window %u, "
	       "%" PRIu64 " writes per pair per size%s\n",
	       tern_world_kind(a->w), a->n, ci.provider,
	       o->verify ? "writes with immediate" : "writes", o->window,
	       o->iters, o->verify ? ", verified" : "");
	if (json)
		fprintf(json,
			"{\"world\":{\"kind\":\"%s\",\"ranks\":%d},"
			"\"provider\":",
			tern_world_kind(a->w), a->n);
	if (json)
		app_json_string(json, ci.provider, 256);
	if (json)
		fprintf(json,
			",\"op\":\"%s\",\"window\":%u,\"iters\":"
			"%" PRIu64 ",\"results\":[",
			o->verify ? "writedata" : "write", o->window, o->iters);
}

/* Size @si's N-1 steps: this rank's writes to each peer in turn, timed
 * into @row (kB/s per target), and, verifying, the writes it expects. */
static int a2a_steps(struct a2a *a, size_t si, uint32_t *row, char *why,
		     size_t whylen)
{
	const struct bench_world_opts *o = a->o;
	uint64_t size = o->sizes[si];
	struct tern_req ex;
	int ret = 0;

	/* This size's source: the pattern for each target. */
	for (int p = 0; p < a->n; p++)
		for (uint64_t i = 0; i < size; i++)
			a->src[(uint64_t)p * a->slot + i] = pat(a->rank, p,
								size, i);
	memset(row, 0, sizeof(*row) * (size_t)a->n);
	for (int k = 1; ret == 0 && k < a->n; k++) {
		int p = (a->rank + k) % a->n;

		tern_req_init(&ex, NULL, NULL);
		if (o->verify)
			ret = tern_imm_expect(a->ctx, A2A_IMM(si, k),
					      o->warmup + o->iters, &ex);
		if (ret == 0)
			ret = tern_world_fence(a->w);
		if (ret != 0) {
			whyf(why, whylen, "step %d: %s", k, tern_strerror(ret));
			break;
		}
		ret = a2a_pair(a, si, k, p, &row[p], why, whylen);
		if (ret == 0 && o->verify)
			ret = wait_req(a->ctx, &ex, why, whylen, "writes from",
				       (a->rank - k + a->n) % a->n);
		if (ret != 0 && o->verify && !ex.done) {
			tern_req_cancel(a->ctx, &ex);
			tern_wait(a->ctx, &ex, 1000);
		}
	}
	return ret;
}

/* Size @si's results: this rank's verdict on what it was written, its
 * row through the world; rank 0 gathers the matrix into @m and reports
 * it. *failed set on a verification failure. */
static int a2a_results(struct a2a *a, size_t si, uint32_t *row, uint32_t *m,
		       FILE *json, int *failed, char *why, size_t whylen)
{
	uint64_t size = a->o->sizes[si], bad = 0;
	char name[32];
	int ret, vfail;

	vfail = a->o->verify ? a2a_check(a, size, &bad) != 0 : 0;
	if (vfail) {
		fprintf(stderr,
			"bench: rank %d: %" PRIu64 " writer(s)' bytes "
			"differ at size %" PRIu64 "\n",
			a->rank, bad, size);
		*failed = 1;
	}
	row[a->rank] = vfail ? 1 : 0; /* the diagonal carries the
					 verdict */
	snprintf(name, sizeof(name), "bench.row.%zu", si);
	ret = tern_world_put(a->w, name, row, sizeof(*row) * (size_t)a->n);
	if (ret == 0)
		ret = tern_world_fence(a->w);
	if (ret == 0 && a->rank == 0) {
		int ok = 1;

		ret = gather(a->w, name, m, a->n, why, whylen);
		for (int r = 0; ret == 0 && r < a->n; r++) {
			ok &= m[(size_t)r * a->n + r] == 0;
			m[(size_t)r * a->n + r] = 0;
		}
		if (ret == 0)
			a2a_report(a, si, m, ok, json, si == 0);
		*failed |= !ok;
	}
	if (ret != 0 && why[0] == '\0')
		whyf(why, whylen, "results of size %" PRIu64 ": %s", size,
		     tern_strerror(ret));
	return ret;
}

int bench_world_a2a(struct tern_ctx *ctx, struct tern_world *w,
		    const struct bench_world_opts *o, FILE *json, char *why,
		    size_t whylen)
{
	struct a2a a = { .ctx = ctx, .w = w, .o = o };
	uint32_t *row = NULL, *m = NULL;
	int ret, failed = 0;

	why[0] = '\0';
	a.rank = tern_world_rank(w);
	a.n = tern_world_size(w);
	if (a.n < 2 || a.n > BENCH_WORLD_MAX_RANKS) {
		whyf(why, whylen,
		     "a world of %d ranks: the all-to-all needs "
		     "2 to %d",
		     a.n, BENCH_WORLD_MAX_RANKS);
		return -EINVAL;
	}
	ret = a2a_setup(&a, why, whylen);
	row = calloc((size_t)a.n, sizeof(*row));
	m = calloc((size_t)a.n * a.n, sizeof(*m));
	if (ret == 0 && (row == NULL || m == NULL))
		ret = -ENOMEM;
	if (ret == 0 && a.rank == 0)
		a2a_header(&a, json);
	for (size_t si = 0; ret == 0 && si < o->nsizes; si++) {
		ret = a2a_steps(&a, si, row, why, whylen);
		if (ret != 0)
			break;
		ret = a2a_results(&a, si, row, m, json, &failed, why, whylen);
	}
	/* Nobody leaves before rank 0 has read every row: an etcd world's
	 * values go with their rank's lease. */
	if (ret == 0)
		ret = tern_world_fence(w);
	if (json && a.rank == 0)
		fprintf(json, "]}\n");
	free(row);
	free(m);
	a2a_free(&a);
	if (ret == 0 && failed) {
		whyf(why, whylen, "verification failed (see above)");
		ret = -TERN_EVERIFY;
	}
	return ret;
}

/* --- the latency matrix -------------------------------------------- */

struct pinger {
	struct tern_ctx *ctx;
	struct tern_peer *to; /* the rank that pings us this step */
	struct tern_mr *mr;
	uint8_t *buf;
	const struct tern_mr_desc *desc;
	uint64_t roff;
	uint32_t k;
	uint64_t left; /* pongs still to send */
	struct tern_req ex;
	/* The answers: a ping may land before our last answer's local
	 * completion, so answers rotate through a ring. */
	struct tern_req reply[PONG_RING];
	uint64_t sent, acked;
	int err;
};

static void on_reply(struct tern_req *req)
{
	struct pinger *g = req->data;

	g->acked++;
	if (req->status != 0 && g->err == 0)
		g->err = req->status;
}

/* A ping landed: answer it, and expect the next. */
static void on_ping(struct tern_req *req)
{
	struct pinger *g = req->data;
	int ret;

	if (req->status != 0) {
		g->err = req->status;
		return;
	}
	if (g->sent - g->acked >= PONG_RING) {
		g->err = -EBUSY; /* 16 answers unacknowledged: give up */
		return;
	}
	ret = tern_write_imm(g->to, g->mr, g->buf, 8, g->desc, g->roff,
			     PONG_IMM(g->k), &g->reply[g->sent % PONG_RING]);
	g->sent += ret == 0;
	if (ret == 0 && --g->left > 0)
		ret = tern_imm_expect(g->ctx, PING_IMM(g->k), 1, &g->ex);
	if (ret != 0)
		g->err = ret;
}

/* One rank's side of the latency matrix. */
struct ping_run {
	struct tern_ctx *ctx;
	struct tern_world *w;
	const struct bench_world_opts *o;
	int rank, n;
	struct tern_mr_desc *descs; /* every rank's buffer */
	uint32_t *row, *m;	    /* this rank's p50s; rank 0's matrix */
	uint64_t *lat;		    /* a step's timed round trips */
	struct tern_mr *mr;
	uint8_t *buf; /* 8 bytes per rank: where each writes to us */
};

/* The buffers, this rank's registered and published, every other's
 * looked up. */
static int ping_setup(struct ping_run *run, char *why, size_t whylen)
{
	const struct bench_world_opts *o = run->o;
	int n = run->n, ret;

	run->buf = aligned_alloc(4096, ((size_t)n * 8 + 4095) & ~(size_t)4095);
	run->descs = calloc((size_t)n, sizeof(*run->descs));
	run->row = calloc((size_t)n, sizeof(*run->row));
	run->m = calloc((size_t)n * n, sizeof(*run->m));
	run->lat = calloc(o->iters ? o->iters : 1, sizeof(*run->lat));
	if (!run->buf || !run->descs || !run->row || !run->m || !run->lat)
		return -ENOMEM;
	memset(run->buf, 0, (size_t)n * 8);
	ret = tern_mr_reg(run->ctx, run->buf, (size_t)n * 8,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &run->mr);
	if (ret == 0) {
		struct tern_mr_desc d;

		tern_mr_desc(run->mr, &d);
		ret = tern_world_publish(run->w, "ping.buf", &d);
	}
	if (ret == 0)
		ret = tern_world_fence(run->w);
	for (int r = 0; ret == 0 && r < n; r++)
		if (r != run->rank)
			ret = tern_world_lookup(run->w, r, "ping.buf",
						&run->descs[r]);
	if (ret != 0)
		whyf(why, whylen, "setting up: %s", tern_strerror(ret));
	return ret;
}

/* Step @k: this rank pings (rank + k) mod N, timing each round trip,
 * while it answers (rank - k) mod N's pings; the median into the row. */
static int ping_step(struct ping_run *run, int k, char *why, size_t whylen)
{
	const struct bench_world_opts *o = run->o;
	struct tern_ctx *ctx = run->ctx;
	struct tern_world *w = run->w;
	int rank = run->rank, n = run->n, ret;
	uint64_t total = o->warmup + o->iters;
	struct tern_mr_desc *descs = run->descs;
	uint32_t *row = run->row;
	uint64_t *lat = run->lat;
	struct tern_mr *mr = run->mr;
	uint8_t *buf = run->buf;
	int p = (rank + k) % n, q = (rank - k + n) % n;
	struct pinger g = { .ctx = ctx,
			    .mr = mr,
			    .buf = buf,
			    .desc = &descs[q],
			    .roff = (uint64_t)rank * 8,
			    .k = (uint32_t)k,
			    .left = total };
	struct tern_peer *pp;
	struct tern_req ping, pong;

	ret = tern_world_peer(w, q, &g.to);
	if (ret == 0)
		ret = tern_world_peer(w, p, &pp);
	if (ret != 0) {
		whyf(why, whylen, "step %d: %s", k, tern_strerror(ret));
		return ret;
	}
	tern_req_init(&g.ex, on_ping, &g);
	for (int i = 0; i < PONG_RING; i++)
		tern_req_init(&g.reply[i], on_reply, &g);
	tern_req_init(&ping, NULL, NULL);
	tern_req_init(&pong, NULL, NULL);
	ret = tern_imm_expect(ctx, PING_IMM(k), 1, &g.ex);
	if (ret == 0)
		ret = tern_world_fence(w);
	for (uint64_t i = 0; ret == 0 && i < total; i++) {
		uint64_t t0;

		ret = tern_imm_expect(ctx, PONG_IMM(k), 1, &pong);
		t0 = tern__now_ns();
		if (ret == 0)
			ret = tern_write_imm(pp, mr, buf, 8, &descs[p],
					     (uint64_t)rank * 8, PING_IMM(k),
					     &ping);
		if (ret == 0)
			ret = wait_req(ctx, &pong, why, whylen, "pong from", p);
		if (ret == 0 && i >= o->warmup)
			lat[i - o->warmup] = (tern__now_ns() - t0) / 2;
		if (ret == 0)
			ret = wait_req(ctx, &ping, why, whylen, "ping to", p);
		if (ret == 0 && g.err)
			ret = g.err;
	}
	/* Answer the rank that pings us until it is done. */
	while (ret == 0 && g.err == 0 && (g.left > 0 || g.acked < g.sent)) {
		ret = tern_wait(ctx, NULL, WORLD_WAIT_MS);
		if (ret == -ETIMEDOUT)
			whyf(why, whylen,
			     "rank %d stopped pinging "
			     "(%" PRIu64 " left)",
			     q, g.left);
	}
	if (ret == 0 && g.err)
		ret = g.err;
	if (ret == 0) {
		qsort(lat, o->iters, sizeof(*lat), cmp_u64);
		row[p] = (uint32_t)lat[o->iters / 2];
	} else if (why[0] == '\0') {
		whyf(why, whylen, "step %d: %s", k, tern_strerror(ret));
	}
	if (ret != 0 && !g.ex.done) {
		tern_req_cancel(ctx, &g.ex);
		tern_wait(ctx, &g.ex, 1000);
	}
	return ret;
}

/* Rank 0: the matrix gathered in run->m, on stdout and as JSON. */
static void ping_report(struct ping_run *run, FILE *json)
{
	const uint32_t *m = run->m;
	int n = run->n;
	struct mstats s;

	matrix_stats(m, n, &s);
	printf("\nhalf round trip p50, us, row = pinger, column = "
	       "target\n");
	print_matrix(stdout, m, n, 1000.0, " %8.2f");
	printf("min %.2f, median %.2f, max %.2f us; slowest pair %d "
	       "-> %d\n",
	       s.min / 1000.0, s.med / 1000.0, s.max / 1000.0, s.max_i,
	       s.max_j);
	if (json) {
		fprintf(json,
			"{\"world\":{\"kind\":\"%s\",\"ranks\":%d},"
			"\"unit\":\"us\",\"p50\":",
			tern_world_kind(run->w), n);
		json_matrix(json, m, n, 1000.0);
		fprintf(json,
			",\"min\":%.3f,\"median\":%.3f,\"max\":%.3f,"
			"\"slowest\":[%d,%d]}\n",
			s.min / 1000.0, s.med / 1000.0, s.max / 1000.0, s.max_i,
			s.max_j);
	}
}

int bench_world_ping(struct tern_ctx *ctx, struct tern_world *w,
		     const struct bench_world_opts *o, FILE *json, char *why,
		     size_t whylen)
{
	struct ping_run run = { .ctx = ctx,
				.w = w,
				.o = o,
				.rank = tern_world_rank(w),
				.n = tern_world_size(w) };
	int ret;

	why[0] = '\0';
	if (run.n < 2 || run.n > BENCH_WORLD_MAX_RANKS) {
		whyf(why, whylen,
		     "a world of %d ranks: the matrix needs 2 to "
		     "%d",
		     run.n, BENCH_WORLD_MAX_RANKS);
		return -EINVAL;
	}
	ret = ping_setup(&run, why, whylen);
	if (ret != 0)
		goto out;
	if (run.rank == 0) {
		struct tern_ctx_info ci;

		tern_ctx_query(ctx, &ci);
		printf("ping: world %s, %d ranks, provider %s, 8 B writes with "
		       "immediate, %" PRIu64 " round trips per pair\n",
		       tern_world_kind(w), run.n, ci.provider, o->iters);
	}
	for (int k = 1; ret == 0 && k < run.n; k++)
		ret = ping_step(&run, k, why, whylen);
	if (ret == 0)
		ret = tern_world_put(w, "ping.row", run.row,
				     sizeof(*run.row) * (size_t)run.n);
	if (ret == 0)
		ret = tern_world_fence(w);
	if (ret == 0 && run.rank == 0)
		ret = gather(w, "ping.row", run.m, run.n, why, whylen);
	if (ret == 0 && run.rank == 0)
		ping_report(&run, json);
	if (ret == 0)
		ret = tern_world_fence(w); /* rank 0 has read every row */
	if (ret != 0 && why[0] == '\0')
		whyf(why, whylen, "%s", tern_strerror(ret));
out:
	tern_mr_close(run.mr);
	free(run.buf);
	free(run.descs);
	free(run.row);
	free(run.m);
	free(run.lat);
	return ret;
}
