/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the benchmark engine's statistics (the log-linear histogram,
 * checked against exact order statistics), of its parameters (operations,
 * the explicit and implicit models, the HELLO codec) and of its reporters
 * (table, JSON, CSV, SVG), which are also fed to python3's parsers when it
 * is installed.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <tern/util.h>

#include "bench.h"
#include "engine_int.h"

#define PYTHON3 "/usr/bin/python3"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- histogram: buckets ------------------------------------------------- */

/* lower(index(v)) <= v < lower(index(v) + 1), and the index is in range. */
static void check_bucket(uint64_t v)
{
	size_t i = bench_hist_index(v);

	if (i >= BENCH_HIST_BUCKETS)
		fail_msg("index(%llu) = %zu, past the last bucket",
			 (unsigned long long)v, i);
	if (bench_hist_lower(i) > v)
		fail_msg("lower(index(%llu)) = %llu", (unsigned long long)v,
			 (unsigned long long)bench_hist_lower(i));
	if (i + 1 < BENCH_HIST_BUCKETS && v >= bench_hist_lower(i + 1))
		fail_msg("%llu is not below lower(index + 1) = %llu",
			 (unsigned long long)v,
			 (unsigned long long)bench_hist_lower(i + 1));
}

static void test_hist_index_small(void **state)
{
	(void)state;
	for (uint64_t v = 0; v <= 10000; v++) {
		check_bucket(v);
		if (v < BENCH_HIST_SUB)
			assert_int_equal(bench_hist_index(v), v);
	}
	/* The formula of bench.h, worked by hand. */
	assert_int_equal(bench_hist_index(128), 128);
	assert_int_equal(bench_hist_index(255), 255);
	assert_int_equal(bench_hist_index(256), 256);
	assert_int_equal(bench_hist_index(257), 256);
	assert_int_equal(bench_hist_index(258), 257);
	assert_int_equal(bench_hist_lower(257), 258);
	assert_int_equal(bench_hist_index(1000), 3 * 128 + (1000 >> 2) - 128);
}

static void test_hist_index_powers(void **state)
{
	const uint64_t last = UINT64_C(255) << 56;

	(void)state;
	for (unsigned int k = 0; k < 64; k++) {
		uint64_t p = UINT64_C(1) << k;

		check_bucket(p);
		check_bucket(p - 1);
		check_bucket(p + 1);
		check_bucket(p | (p - 1));
		if (p > 2)
			check_bucket(p - 2);
		check_bucket(p + 2);
		if (k >= BENCH_HIST_SUB_BITS) {
			/* A power of two opens a group of SUB buckets. */
			assert_int_equal(bench_hist_index(p) % BENCH_HIST_SUB,
					 0);
			assert_true(bench_hist_lower(bench_hist_index(p)) == p);
		}
	}
	check_bucket(UINT64_MAX);
	check_bucket(UINT64_MAX - 1);
	assert_int_equal(bench_hist_index(UINT64_MAX), BENCH_HIST_BUCKETS - 1);
	/* The last bucket starts at 255 << 56: 128 + 127 slices of 2^56. */
	assert_true(bench_hist_lower(BENCH_HIST_BUCKETS - 1) == last);
	/* Past the last bucket, lower() saturates rather than wraps. */
	assert_true(bench_hist_lower(BENCH_HIST_BUCKETS) == UINT64_MAX);
}

/* Every bucket: its lower bound maps back to it, bounds increase, and a
 * bucket is no wider than 1/SUB of its lower bound. */
static void test_hist_buckets_exhaustive(void **state)
{
	(void)state;
	for (size_t i = 0; i < BENCH_HIST_BUCKETS; i++) {
		uint64_t lo = bench_hist_lower(i);

		if (bench_hist_index(lo) != i)
			fail_msg("index(lower(%zu) = %llu) = %zu", i,
				 (unsigned long long)lo, bench_hist_index(lo));
		if (i + 1 < BENCH_HIST_BUCKETS) {
			uint64_t next = bench_hist_lower(i + 1);
			uint64_t width = next - lo;

			assert_true(next > lo);
			assert_int_equal(bench_hist_index(next - 1), i);
			assert_true(width <= 1 || width <= lo / BENCH_HIST_SUB);
		}
	}
}

static void test_hist_index_random(void **state)
{
	struct tern_mt64 rng;

	(void)state;
	tern_mt64_seed(&rng, 20240601);
	for (int i = 0; i < 1000000; i++) {
		uint64_t v = tern_mt64_next(&rng);

		check_bucket(v);
		/* Every magnitude, not only values near 2^63. */
		check_bucket(v >> (tern_mt64_next(&rng) % 64));
	}
}

/* --- histogram: quantiles against exact order statistics ---------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* The sample of rank ceil(q * n) (at least 1) in @sorted. */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q)
{
	double r;
	size_t rank;

	if (q <= 0.0)
		return sorted[0];
	if (q >= 1.0)
		return sorted[n - 1];
	r = ceil(q * (double)n);
	rank = r < 1.0 ? 1 : r >= (double)n ? n : (size_t)r;
	return sorted[rank - 1];
}

static const double quantiles[] = { 0.0, 0.001, 0.25,  0.5,	 0.75,
				    0.9, 0.99,	0.999, 0.999999, 1.0 };

/* Add @v[0..n) to a histogram and check it against the exact figures. */
static void check_samples(const char *what, const uint64_t *v, size_t n)
{
	struct bench_hist *h = malloc(sizeof(*h));
	uint64_t *sorted = malloc(n * sizeof(*sorted));
	long double sum = 0;
	double mean;

	assert_non_null(h);
	assert_non_null(sorted);
	bench_hist_init(h);
	for (size_t i = 0; i < n; i++) {
		bench_hist_add(h, v[i]);
		sum += v[i];
	}
	memcpy(sorted, v, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);

	assert_int_equal(h->count, n);
	assert_true(h->min == sorted[0]);
	assert_true(h->max == sorted[n - 1]);
	mean = bench_hist_mean(h);
	if (fabsl((long double)mean - sum / n) > 1e-9L * (sum / n))
		fail_msg("%s: mean %.17g, want %.17Lg", what, mean, sum / n);

	for (size_t j = 0; j < ARRAY_SIZE(quantiles); j++) {
		double q = quantiles[j];
		uint64_t exact = exact_quantile(sorted, n, q);
		uint64_t want = bench_hist_lower(bench_hist_index(exact));
		uint64_t got = bench_hist_quantile(h, q);
		uint64_t diff = got > exact ? got - exact : exact - got;

		/* Its bucket's lower bound, but q = 0 and 1 are exact. */
		if (want < sorted[0] || q <= 0.0)
			want = sorted[0];
		if (q >= 1.0)
			want = sorted[n - 1];
		if (got != want)
			fail_msg("%s (n %zu): q %g gives %llu; exact %llu, "
				 "its bucket %llu",
				 what, n, q, (unsigned long long)got,
				 (unsigned long long)exact,
				 (unsigned long long)want);
		assert_true(diff <= exact / 128 + 1);
	}
	free(sorted);
	free(h);
}

/* A uniform double in (0, 1]. */
static double unit_random(struct tern_mt64 *rng)
{
	return (double)((tern_mt64_next(rng) >> 11) + 1) * 0x1p-53;
}

static uint64_t *samples(size_t n)
{
	uint64_t *v = malloc(n * sizeof(*v));

	assert_non_null(v);
	return v;
}

static void test_hist_quantiles_uniform(void **state)
{
	static const size_t sizes[] = { 1, 2, 3, 7, 100, 1000, 12345, 1000000 };
	static const uint64_t ranges[] = { 100, 1000, 1000000,
					   UINT64_C(1) << 40 };
	struct tern_mt64 rng;
	char what[64];

	(void)state;
	tern_mt64_seed(&rng, 1);
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		for (size_t k = 0; k < ARRAY_SIZE(ranges); k++) {
			uint64_t *v = samples(sizes[s]);

			for (size_t i = 0; i < sizes[s]; i++)
				v[i] = tern_mt64_next(&rng) % ranges[k];
			snprintf(what, sizeof(what), "uniform below %llu",
				 (unsigned long long)ranges[k]);
			check_samples(what, v, sizes[s]);
			free(v);
		}
	}
}

/* Latency-like: an exponential tail above a floor. */
static void test_hist_quantiles_exponential(void **state)
{
	static const size_t sizes[] = { 10, 1000, 100000, 1000000 };
	struct tern_mt64 rng;

	(void)state;
	tern_mt64_seed(&rng, 2);
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		uint64_t *v = samples(sizes[s]);

		for (size_t i = 0; i < sizes[s]; i++)
			v[i] = 1500 +
			       (uint64_t)(-5000.0 * log(unit_random(&rng)));
		check_samples("exponential", v, sizes[s]);
		free(v);
	}
}

/* Two modes far apart: the p99 lands in the second. */
static void test_hist_quantiles_bimodal(void **state)
{
	static const size_t sizes[] = { 2, 50, 10007, 500000 };
	struct tern_mt64 rng;

	(void)state;
	tern_mt64_seed(&rng, 3);
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		uint64_t *v = samples(sizes[s]);

		for (size_t i = 0; i < sizes[s]; i++) {
			uint64_t r = tern_mt64_next(&rng);

			if (r % 100 < 90)
				v[i] = 1900 + (r >> 8) % 200;
			else
				v[i] = 75000 + (r >> 8) % 10000;
		}
		check_samples("bimodal", v, sizes[s]);
		free(v);
	}
}

static void test_hist_quantiles_degenerate(void **state)
{
	static const uint64_t values[] = {
		0, 1, 127, 128, 129, 123456789, UINT64_MAX - 1, UINT64_MAX
	};
	uint64_t *v = samples(1000);

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(values); k++) {
		check_samples("one sample", &values[k], 1);
		for (size_t i = 0; i < 1000; i++)
			v[i] = values[k];
		check_samples("all equal", v, 1000);
	}
	free(v);
}

/* Sums past 2^64: the mean must still be right. */
static void test_hist_quantiles_huge(void **state)
{
	struct tern_mt64 rng;
	uint64_t *v = samples(100000);

	(void)state;
	tern_mt64_seed(&rng, 4);
	for (size_t i = 0; i < 100000; i++)
		v[i] = UINT64_MAX - tern_mt64_next(&rng) % (UINT64_C(1) << 60);
	check_samples("near UINT64_MAX", v, 100000);
	free(v);
}

static void test_hist_empty_and_bounds(void **state)
{
	struct bench_hist *h = malloc(sizeof(*h));

	(void)state;
	assert_non_null(h);
	bench_hist_init(h);
	assert_int_equal(h->count, 0);
	for (size_t j = 0; j < ARRAY_SIZE(quantiles); j++)
		assert_int_equal(bench_hist_quantile(h, quantiles[j]), 0);
	assert_true(bench_hist_mean(h) == 0.0);

	bench_hist_add(h, 1000);
	bench_hist_add(h, 5120);
	bench_hist_add(h, 9000);
	assert_int_equal(bench_hist_quantile(h, -1.0), 1000);
	assert_int_equal(bench_hist_quantile(h, 0.0), 1000);
	assert_int_equal(bench_hist_quantile(h, NAN), 1000);
	assert_int_equal(bench_hist_quantile(h, 1.0), 9000);
	assert_int_equal(bench_hist_quantile(h, 2.0), 9000);
	assert_int_equal(bench_hist_quantile(h, INFINITY), 9000);
	/* ceil(0.5 * 3) = 2: the middle sample; 5120 = 160 << 5 is a
	 * bucket's lower bound, 5121 is not. */
	assert_int_equal(bench_hist_quantile(h, 0.5), 5120);
	assert_true(bench_hist_mean(h) == 5040.0);
	bench_hist_init(h);
	bench_hist_add(h, 1000);
	bench_hist_add(h, 5121);
	bench_hist_add(h, 9000);
	assert_int_equal(bench_hist_quantile(h, 0.5), 5120);
	free(h);
}

static void assert_hist_equal(const struct bench_hist *a,
			      const struct bench_hist *b)
{
	assert_true(a->count == b->count);
	assert_true(a->min == b->min);
	assert_true(a->max == b->max);
	assert_true(a->sum_lo == b->sum_lo);
	assert_true(a->sum_hi == b->sum_hi);
	assert_memory_equal(a->buckets, b->buckets, sizeof(a->buckets));
	for (size_t j = 0; j < ARRAY_SIZE(quantiles); j++)
		assert_true(bench_hist_quantile(a, quantiles[j]) ==
			    bench_hist_quantile(b, quantiles[j]));
	assert_true(bench_hist_mean(a) == bench_hist_mean(b));
}

static void test_hist_merge(void **state)
{
	struct bench_hist *a = malloc(sizeof(*a));
	struct bench_hist *b = malloc(sizeof(*b));
	struct bench_hist *u = malloc(sizeof(*u));
	struct bench_hist *e = malloc(sizeof(*e));
	struct tern_mt64 rng;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(u);
	assert_non_null(e);
	tern_mt64_seed(&rng, 5);
	bench_hist_init(a);
	bench_hist_init(b);
	bench_hist_init(u);
	bench_hist_init(e);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = tern_mt64_next(&rng);
		/* Different ranges, and sums that carry past 2^64. */
		uint64_t v = i % 3 == 0 ? r : r % 100000;

		bench_hist_add(i % 5 < 2 ? a : b, v);
		bench_hist_add(u, v);
	}
	/* Empty on either side changes nothing. */
	bench_hist_merge(e, a);
	assert_hist_equal(e, a);
	bench_hist_init(e);
	bench_hist_merge(a, e);
	bench_hist_merge(e, a);
	assert_hist_equal(e, a);

	bench_hist_merge(a, b);
	assert_hist_equal(a, u);
	free(a);
	free(b);
	free(u);
	free(e);
}

/* n samples at once are n samples one by one, sums past 2^64 too. */
static void test_hist_add_n(void **state)
{
	static const struct {
		uint64_t v, n;
	} cases[] = {
		{ 0, 1 },
		{ 5, 64 },
		{ 1500, 7 },
		{ 123456, 1000 },
		{ UINT64_MAX / 3, 1000 },
		{ UINT64_MAX, 3 },
	};
	struct bench_hist *a = malloc(sizeof(*a));
	struct bench_hist *b = malloc(sizeof(*b));

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	bench_hist_init(a);
	bench_hist_init(b);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		bench_hist_add_n(a, cases[i].v, cases[i].n);
		for (uint64_t k = 0; k < cases[i].n; k++)
			bench_hist_add(b, cases[i].v);
		assert_hist_equal(a, b);
	}
	assert_true(a->sum_hi != 0);
	/* None at all changes nothing, not even min and max. */
	bench_hist_add_n(a, 1, 0);
	bench_hist_add_n(a, UINT64_MAX - 1, 0);
	assert_hist_equal(a, b);
	bench_hist_init(a);
	bench_hist_add_n(a, 77, 0);
	assert_int_equal(a->count, 0);
	assert_true(a->min == UINT64_MAX);
	free(a);
	free(b);
}

/* --- parameters ---------------------------------------------------------- */

/* Every operation by name, and which have an implicit form (--implicit)
 * and a batch form (--batch). */
static void test_params_ops(void **state)
{
	static const char *const names[] = { "write", "writedata", "read",
					     "send",  "atomic",	   "register" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		int op = bench_op_parse(names[i]);

		assert_true(op >= BENCH_WRITE && op <= BENCH_REGISTER);
		assert_string_equal(bench_op_name(op), names[i]);
	}
	assert_int_equal(bench_op_parse("atomic-fetch"), -EINVAL);
	assert_int_equal(bench_op_parse(""), -EINVAL);
	assert_string_equal(bench_op_name(0), "?");
	assert_string_equal(bench_op_name(BENCH_REGISTER + 1), "?");

	assert_string_equal(bench_model_name(0), "explicit");
	assert_string_equal(bench_model_name(1), "implicit");
	assert_string_equal(bench_model_name(BENCH_IMPLICIT), "implicit");
	assert_string_equal(bench_model_name(BENCH_BATCH), "batch");
	assert_null(bench_implicit_why(BENCH_WRITE));
	assert_null(bench_implicit_why(BENCH_WRITEDATA));
	assert_null(bench_implicit_why(BENCH_READ));
	assert_null(bench_implicit_why(BENCH_ATOMIC)); /* as an add */
	/* Refused, naming the option and the operation. */
	assert_non_null(bench_implicit_why(BENCH_SEND));
	assert_non_null(strstr(bench_implicit_why(BENCH_SEND), "--implicit"));
	assert_non_null(strstr(bench_implicit_why(BENCH_SEND), "--op send"));
	assert_non_null(
		strstr(bench_implicit_why(BENCH_REGISTER), "--op register"));
	assert_non_null(bench_implicit_why(0));
	assert_non_null(bench_implicit_why(BENCH_REGISTER + 1));

	/* Pieces are writes (writedata: TERN_PIECES_IMM) or reads. */
	assert_null(bench_batch_why(BENCH_WRITE));
	assert_null(bench_batch_why(BENCH_WRITEDATA));
	assert_null(bench_batch_why(BENCH_READ));
	assert_non_null(strstr(bench_batch_why(BENCH_SEND), "--batch"));
	assert_non_null(strstr(bench_batch_why(BENCH_SEND), "--op send"));
	assert_non_null(strstr(bench_batch_why(BENCH_ATOMIC), "--batch"));
	assert_non_null(strstr(bench_batch_why(BENCH_ATOMIC), "--op atomic"));
	assert_non_null(
		strstr(bench_batch_why(BENCH_REGISTER), "--op register"));
	assert_non_null(bench_batch_why(0));
	assert_non_null(bench_batch_why(BENCH_REGISTER + 1));
}

/* The HELLO parameters: round trip, and what is refused. The model is
 * the initiator's alone: it is not on the wire. */
static void test_params_codec(void **state)
{
	struct bench_params p = { .op = BENCH_READ,
				  .window = 64,
				  .max_size = 16 << 20,
				  .seed = 5489,
				  .verify = 1 },
			    q;
	uint8_t b[PARAMS_LEN];
	char why[160];

	(void)state;
	bench_params_encode(&p, b);
	assert_int_equal(
		bench_params_decode(b, sizeof(b), &q, why, sizeof(why)), 0);
	assert_int_equal(q.op, p.op);
	assert_int_equal(q.window, p.window);
	assert_true(q.max_size == p.max_size && q.seed == p.seed);
	assert_int_equal(q.verify, p.verify);
	assert_int_equal(
		bench_params_decode(b, sizeof(b) - 1, &q, why, sizeof(why)),
		-TERN_EPROTO);
	p.op = BENCH_REGISTER; /* never on the wire: its writes are writes */
	bench_params_encode(&p, b);
	assert_int_equal(
		bench_params_decode(b, sizeof(b), &q, why, sizeof(why)),
		-TERN_EREFUSED);
	p.op = BENCH_WRITE;
	p.window = BENCH_MAX_WINDOW + 1;
	bench_params_encode(&p, b);
	assert_int_equal(
		bench_params_decode(b, sizeof(b), &q, why, sizeof(why)),
		-TERN_EREFUSED);
	p.window = 1;
	bench_params_encode(&p, b);
	b[PARAMS_LEN - 1] = 1; /* the reserved word */
	assert_int_equal(
		bench_params_decode(b, sizeof(b), &q, why, sizeof(why)),
		-TERN_EREFUSED);
}

/* --- reporters ----------------------------------------------------------- */

/* With a quote, a newline, a backslash, a control byte and an '&'. */
#define PROVIDER      "tcp&rxm \"v2\"\nx\\y\x01"
#define PROVIDER_JSON "\"provider\": \"tcp&rxm \\\"v2\\\"\\nx\\\\y\\u0001\""

static void fill_report(struct bench_report *r, size_t n)
{
	static const uint64_t sizes[] = { 8, 4096, 65536, 1048576, 1536 };

	memset(r, 0, sizeof(*r));
	snprintf(r->ctx.tern_version, sizeof(r->ctx.tern_version), "0.1.0");
	snprintf(r->ctx.fabric_version, sizeof(r->ctx.fabric_version), "1.22");
	snprintf(r->ctx.provider, sizeof(r->ctx.provider), "%s", PROVIDER);
	snprintf(r->ctx.fabric, sizeof(r->ctx.fabric), "TCP-IP");
	snprintf(r->ctx.domain, sizeof(r->ctx.domain), "eth0 <lo>");
	snprintf(r->ctx.host, sizeof(r->ctx.host), "node1");
	snprintf(r->ctx.date, sizeof(r->ctx.date), "2024-06-01T12:00:00Z");
	snprintf(r->ctx.op, sizeof(r->ctx.op), "write");
	snprintf(r->ctx.model, sizeof(r->ctx.model), "implicit");
	/* Not UTF-8 (\xff), and UTF-8 that is (the micro sign). */
	snprintf(r->ctx.command, sizeof(r->ctx.command),
		 "tern bench --op write \xff \xc2\xb5s");
	r->ctx.link_bps = 0;
	r->ctx.window = 64;
	r->ctx.rails = 2;
	r->ctx.iters = 1000;
	r->ctx.warmup = 100;
	r->ctx.mr_reg_ms = 1.25;
	r->ctx.mr_bytes = 64 << 20;
	r->ctx.verify = 1;
	r->npoints = n;
	for (size_t i = 0; i < n; i++) {
		struct bench_point *p = &r->points[i];
		double s = (double)sizes[i % ARRAY_SIZE(sizes)];

		p->size = sizes[i % ARRAY_SIZE(sizes)];
		p->ops = 1000;
		p->bytes = p->size * p->ops;
		p->seconds = 0.001 * (double)(i + 1);
		p->gbps = (double)p->bytes * 8 / p->seconds / 1e9;
		p->gBps = p->gbps / 8;
		p->link_pct = -1.0;
		p->mpps = (double)p->ops / p->seconds / 1e6;
		p->lat_min_us = 1.5 + s / 1e4;
		p->lat_p50_us = 2.0 + s / 1e4;
		p->lat_p99_us = 3.25 + s / 1e4;
		p->lat_p999_us = 4.0 + s / 1e4;
		p->lat_max_us = 10.0 + s / 1e4;
		p->cold_us = 40.0;
		p->verified = (int)(i % 3) - 1;
	}
}

typedef int (*writer_fn)(FILE *f, const struct bench_report *r);

/* Run @fn into memory; returns the text (free it), or fails the test. */
static char *capture(writer_fn fn, const struct bench_report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(f, r), 0);
	assert_int_equal(fclose(f), 0);
	assert_non_null(buf);
	assert_int_equal(strlen(buf), len);
	return buf;
}

static int print_table(FILE *f, const struct bench_report *r)
{
	bench_print_table(f, r);
	return 0;
}

/* Whether python3 accepts @text with @check (a command taking a file). */
static void python_check(const char *text, const char *check)
{
	char path[] = "/tmp/tern_test_bench_XXXXXX";
	char cmd[512];
	FILE *f;
	int fd, ret;

	if (access(PYTHON3, X_OK) != 0) {
		print_message("note: no " PYTHON3 ", output not parsed\n");
		return;
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null", check, path);
	ret = system(cmd);
	unlink(path);
	if (ret != 0)
		fail_msg("`%s` failed (%d) on:\n%s", check, ret, text);
}

#define JSON_CHECK PYTHON3 " -m json.tool"
#define XML_CHECK                                               \
	PYTHON3 " -c 'import sys, xml.etree.ElementTree as E; " \
		"E.parse(sys.argv[1])'"

static void test_report_json(void **state)
{
	static const char *const keys[] = {
		"context",     "results",    "tern_version", "fabric_version",
		"provider",    "fabric",     "domain",	     "host",
		"date",	       "op",	     "model",	     "link_bps",
		"window",      "rails",	     "iters",	     "duration_s",
		"warmup",      "mr_reg_ms",  "mr_bytes",     "verify",
		"command",     "size",	     "ops",	     "bytes",
		"seconds",     "gbps",	     "gBps",	     "link_pct",
		"mpps",	       "lat_min_us", "lat_p50_us",   "lat_p99_us",
		"lat_p999_us", "lat_max_us", "cold_us",	     "verified",
	};
	struct bench_report *r = malloc(sizeof(*r));
	char key[64], *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 4);
	r->points[1].lat_p999_us = NAN;
	r->points[2].cold_us = INFINITY;
	r->points[3].mpps = -INFINITY;
	r->points[0].seconds = 0.1 + 0.2;
	s = capture(bench_write_json, r);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		snprintf(key, sizeof(key), "\"%s\": ", keys[i]);
		if (strstr(s, key) == NULL)
			fail_msg("no %s in:\n%s", key, s);
	}
	assert_non_null(strstr(s, PROVIDER_JSON));
	assert_non_null(strstr(s, "\"lat_p999_us\": null"));
	assert_non_null(strstr(s, "\"cold_us\": null"));
	assert_non_null(strstr(s, "\"mpps\": null"));
	assert_non_null(strstr(s, "\\ufffd \xc2\xb5s\""));
	assert_non_null(strstr(s, "\"mr_reg_ms\": 1.25,"));
	assert_non_null(strstr(s, "\"model\": \"implicit\""));
	/* Shortest exact form: 0.1 + 0.2 is not 0.3. */
	assert_non_null(strstr(s, "\"seconds\": 0.30000000000000004,"));
	assert_non_null(strstr(s, "\"seconds\": 0.002,"));
	assert_non_null(strstr(s, "\"size\": 1048576,"));
	assert_null(strstr(s, "nan"));
	assert_null(strstr(s, "inf"));
	python_check(s, JSON_CHECK);
	free(s);

	/* No points: still an object with an empty array. */
	fill_report(r, 0);
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"results\": []"));
	python_check(s, JSON_CHECK);
	free(s);
	free(r);
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (*s == c)
			n++;
	return n;
}

static void test_report_csv(void **state)
{
	static const char header[] =
		"size,ops,bytes,seconds,gbps,gBps,link_pct,mpps,lat_min_us,"
		"lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,cold_us,"
		"verified,model\n";
	struct bench_report *r = malloc(sizeof(*r));
	size_t lines = 0;
	char *s, *line, *save = NULL;

	(void)state;
	assert_non_null(r);
	fill_report(r, 5);
	r->points[2].lat_p99_us = NAN;
	s = capture(bench_write_csv, r);
	assert_memory_equal(s, header, strlen(header));
	assert_int_equal(count_char(s, '\n'), 6);
	assert_non_null(strstr(s, "\n8,1000,8000,0.001,"));
	assert_null(strstr(s, "nan"));
	for (line = strtok_r(s, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (count_char(line, ',') != 15)
			fail_msg("not 16 fields: %s", line);
		/* The model closes every row but the header. */
		if (lines > 0 && strcmp(line + strlen(line) - 9, ",implicit"))
			fail_msg("no model: %s", line);
		lines++;
	}
	assert_int_equal(lines, 6);
	free(s);

	/* The explicit model; a model with a comma or a quote in it cannot
	 * break a row: only letters, digits, '-' and '_' are written. */
	fill_report(r, 1);
	snprintf(r->ctx.model, sizeof(r->ctx.model), "explicit");
	s = capture(bench_write_csv, r);
	assert_non_null(strstr(s, ",explicit\n"));
	free(s);
	snprintf(r->ctx.model, sizeof(r->ctx.model), "a,b\"c\nd");
	s = capture(bench_write_csv, r);
	assert_int_equal(count_char(s, '\n'), 2);
	assert_int_equal(count_char(s, ','), 2 * 15);
	assert_non_null(strstr(s, ",abcd\n"));
	free(s);

	fill_report(r, 0);
	s = capture(bench_write_csv, r);
	assert_string_equal(s, header);
	free(s);
	free(r);
}

static void check_svg(const char *s)
{
	const char *end = "</svg>\n";
	size_t len = strlen(s);

	if (strncmp(s, "<?xml", 5) == 0)
		s = strstr(s, "?>\n") + 3;
	assert_memory_equal(s, "<svg", 4);
	assert_true(len > strlen(end));
	assert_string_equal(s + strlen(s) - strlen(end), end);
	assert_null(strstr(s, "NaN"));
	assert_null(strstr(s, "nan"));
	assert_null(strstr(s, "inf"));
	assert_null(strstr(s, "Inf"));
	assert_null(strstr(s, "script"));
	assert_null(strstr(s, "href"));
	python_check(s, XML_CHECK);
}

static void test_report_svg(void **state)
{
	struct bench_report *r = malloc(sizeof(*r));
	char *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 4);
	r->points[1].lat_p99_us = NAN;
	r->points[2].gbps = INFINITY;
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_non_null(strstr(s, "tcp&amp;rxm &quot;v2&quot;"));
	assert_null(strstr(s, "tcp&rxm"));
	assert_non_null(strstr(s, "eth0 &lt;lo&gt;"));
	assert_non_null(strstr(s, "<polyline"));
	assert_non_null(strstr(s, "<circle"));
	assert_non_null(strstr(s, ">1 MiB<"));
	assert_non_null(strstr(s, "tern bench: write (implicit) over "));
	free(s);

	/* Latency within a decade stays on a linear axis... */
	fill_report(r, 2);
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_null(strstr(s, "log scale"));
	free(s);

	/* ...and over decades on a log axis, with ticks at decades. */
	r->points[0].lat_p50_us = 0.8;
	r->points[1].lat_p99_us = 25000;
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_non_null(strstr(s, "log scale"));
	assert_non_null(strstr(s, ">0.1<"));
	assert_non_null(strstr(s, ">100000<"));
	free(s);

	/* 0 and 1 point, all values missing, and one size of 0 bytes. */
	for (size_t n = 0; n <= 1; n++) {
		fill_report(r, n);
		s = capture(bench_write_svg, r);
		check_svg(s);
		free(s);
	}
	fill_report(r, 3);
	for (size_t i = 0; i < 3; i++) {
		r->points[i].gbps = NAN;
		r->points[i].lat_p50_us = NAN;
		r->points[i].lat_p99_us = -INFINITY;
	}
	r->points[0].size = 0;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	/* Sizes up to 2^63 and enormous rates. */
	fill_report(r, 2);
	r->points[0].size = 1;
	r->points[1].size = UINT64_C(1) << 63;
	r->points[1].gbps = 1.7e308;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	fill_report(r, 1);
	r->points[0].size = UINT64_MAX;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	free(r);
}

static void test_report_table(void **state)
{
	struct bench_report *r = malloc(sizeof(*r));
	char *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 5);
	r->points[4].lat_max_us = NAN;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "n/a"));
	assert_non_null(strstr(s, "10^9"));
	assert_non_null(strstr(s, "1.250 ms for 64 MiB"));
	assert_non_null(strstr(s, "     8 B"));
	assert_non_null(strstr(s, "   4 KiB"));
	assert_non_null(strstr(s, "   1 MiB"));
	assert_non_null(strstr(s, "1536 B"));
	assert_non_null(strstr(s, "FAIL"));
	assert_non_null(strstr(s, " ok\n"));
	assert_non_null(strstr(s, "p99.9"));
	/* The model and what latency then means. */
	assert_non_null(strstr(s, "  model          implicit: no request "));
	assert_non_null(strstr(s, "its window's first post to its quiet"));
	/* The provider's newline and control byte do not break the layout. */
	assert_non_null(strstr(s, "  provider       tcp&rxm \"v2\"?x\\y?\n"));
	assert_null(strstr(s, "nan"));
	free(s);

	snprintf(r->ctx.model, sizeof(r->ctx.model), "explicit");
	s = capture(print_table, r);
	assert_non_null(strstr(s, "  model          explicit: a request per "));
	assert_non_null(strstr(s, "post to completion; cold: the first "
				  "operation"));
	free(s);

	snprintf(r->ctx.model, sizeof(r->ctx.model), "batch");
	s = capture(print_table, r);
	assert_non_null(strstr(s, "  model          batch: one request "
				  "per window"));
	assert_non_null(strstr(s, "its window's post to its batch's "
				  "completion"));
	free(s);

	r->ctx.link_bps = UINT64_C(100000000000);
	r->points[0].link_pct = 12.5;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "100 Gbit/s"));
	assert_non_null(strstr(s, " 12.5 "));
	free(s);
	free(r);
}

/* --op register: @n sizes, four measures each. */
static void fill_reg_report(struct bench_report *r, size_t n)
{
	static const char *const measures[] = { "cold", "cached", "first-write",
						"second-write" };

	fill_report(r, 0);
	snprintf(r->ctx.op, sizeof(r->ctx.op), "register");
	r->ctx.model[0] = '\0';
	r->ctx.iters = 200;
	r->ctx.warmup = 20;
	r->ctx.write_bytes = 4096;
	r->ctx.reg_cache = 1;
	r->ctx.churn_cycles = 10000;
	r->ctx.churn_start_us = 0.25;
	r->ctx.churn_middle_us = 0.5;
	r->ctx.churn_end_us = 0.75;
	snprintf(r->ctx.route, sizeof(r->ctx.route), "provider");
	for (size_t i = 0; i < n; i++) {
		for (size_t m = 0; m < ARRAY_SIZE(measures); m++) {
			struct bench_point *p = &r->points[r->npoints++];

			p->size = UINT64_C(4096) << (6 * i);
			p->ops = 200;
			snprintf(p->measure, sizeof(p->measure), "%s",
				 measures[m]);
			p->lat_min_us = 0.5 + (double)m;
			p->lat_p50_us = 1.0 + (double)m;
			p->lat_p99_us = 2.0 + (double)m;
			p->lat_max_us = 3.0 + (double)m;
			p->lat_p999_us = p->lat_max_us;
		}
	}
}

static void test_report_register(void **state)
{
	static const char *const keys[] = {
		"pages",	"write_bytes",	  "reg_cache",
		"churn_cycles", "churn_start_us", "churn_middle_us",
		"churn_end_us", "measure",	  "lat_min_us",
		"lat_p50_us",	"lat_p99_us",	  "lat_max_us",
	};
	struct bench_report *r = malloc(sizeof(*r));
	char key[64], *s;
	FILE *f;

	(void)state;
	assert_non_null(r);
	fill_reg_report(r, 6); /* 4 KiB to 4 TiB */
	assert_int_equal(r->npoints, 24);
	assert_int_equal(bench_report_is_register(r), 1);

	s = capture(bench_write_json, r);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		snprintf(key, sizeof(key), "\"%s\": ", keys[i]);
		if (strstr(s, key) == NULL)
			fail_msg("no %s in:\n%s", key, s);
	}
	assert_non_null(strstr(s, "\"op\": \"register\""));
	assert_non_null(strstr(s, "\"pages\": \"untouched\""));
	assert_non_null(strstr(s, "\"size\": 68719476736, \"measure\": "
				  "\"cached\", \"ops\": 200, "
				  "\"lat_min_us\": 1.5,"));
	/* Bandwidth has no meaning here: not written. */
	assert_null(strstr(s, "\"gbps\""));
	python_check(s, JSON_CHECK);
	free(s);

	/* No churn: its figures are null. */
	r->ctx.churn_cycles = 0;
	r->ctx.churn_start_us = NAN;
	r->ctx.churn_middle_us = NAN;
	r->ctx.churn_end_us = NAN;
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"churn_start_us\": null"));
	python_check(s, JSON_CHECK);
	free(s);

	s = capture(bench_write_csv, r);
	assert_memory_equal(s,
			    "size,measure,ops,lat_min_us,lat_p50_us,"
			    "lat_p99_us,lat_max_us\n4096,cold,200,0.5,1,2,3\n",
			    strlen("size,measure,ops,lat_min_us,lat_p50_us,"
				   "lat_p99_us,lat_max_us\n4096,cold,200,0.5,"
				   "1,2,3\n"));
	assert_int_equal(count_char(s, '\n'), 25);
	assert_int_equal(count_char(s, ','), 25 * 6);
	assert_non_null(
		strstr(s, "\n68719476736,second-write,200,3.5,4,5,6\n"));
	free(s);

	fill_reg_report(r, 6);
	s = capture(print_table, r);
	assert_non_null(strstr(s, "pages untouched"));
	assert_non_null(strstr(s, "shares its registration (the cache)"));
	assert_non_null(strstr(s, "4 KiB from offset 0"));
	assert_non_null(strstr(s, "10000 tern_mr_reg() + tern_mr_close() "
				  "cycles"));
	assert_non_null(strstr(s, "0.25 us in the first tenth, 0.50 in the "
				  "middle, 0.75 in the last"));
	assert_non_null(strstr(s, "   64 GiB  first-write        200 "));
	assert_non_null(strstr(s, "    4 TiB  cold "));
	assert_null(strstr(s, "Gbit/s"));
	free(s);
	r->ctx.reg_cache = 0;
	r->ctx.churn_cycles = 0;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "registered apart (the cache is off"));
	assert_null(strstr(s, "churn"));
	free(s);

	/* No chart: four measures per size and no bandwidth. */
	f = fopen("/dev/null", "w");
	assert_non_null(f);
	assert_int_equal(bench_write_svg(f, r), -EINVAL);
	fclose(f);
	free(r);
}

/* A locale with a decimal comma must not leak into JSON, CSV or SVG. */
static void test_report_locale(void **state)
{
	static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8",
					     "fr_FR.UTF-8", "fr_FR.utf8" };
	struct bench_report *r = malloc(sizeof(*r));
	const char *name = NULL;
	char *s;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < ARRAY_SIZE(names) && name == NULL; i++)
		if (setlocale(LC_NUMERIC, names[i]) != NULL)
			name = names[i];
	if (name == NULL) {
		print_message("note: no decimal-comma locale, not tested\n");
		free(r);
		return;
	}
	fill_report(r, 3);
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"mr_reg_ms\": 1.25,"));
	python_check(s, JSON_CHECK);
	free(s);
	s = capture(bench_write_csv, r);
	assert_non_null(strstr(s, "\n8,1000,8000,0.001,"));
	assert_int_equal(count_char(s, ','), 4 * 15);
	free(s);
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_null(strstr(s, "\"80,0\""));
	free(s);
	s = capture(print_table, r);
	assert_non_null(strstr(s, "1.250 ms"));
	free(s);
	setlocale(LC_NUMERIC, "C");
	free(r);
}

static void test_report_errors(void **state)
{
	static const writer_fn writers[] = { bench_write_json, bench_write_csv,
					     bench_write_svg };
	struct bench_report *r = malloc(sizeof(*r));
	FILE *f;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < ARRAY_SIZE(writers); i++) {
		fill_report(r, 3);
		/* A read-only stream: every write fails. */
		f = fopen("/dev/null", "r");
		assert_non_null(f);
		assert_int_equal(writers[i](f, r), -EIO);
		fclose(f);
		/* A full device: the error surfaces on the flush. */
		f = fopen("/dev/full", "w");
		if (f != NULL) {
			int ret = writers[i](f, r);

			assert_true(ret == -ENOSPC || ret == -EIO);
			fclose(f);
		}
		r->npoints = ARRAY_SIZE(r->points) + 1;
		f = fopen("/dev/null", "w");
		assert_non_null(f);
		assert_int_equal(writers[i](f, r), -EINVAL);
		assert_int_equal(writers[i](NULL, r), -EINVAL);
		assert_int_equal(writers[i](f, NULL), -EINVAL);
		fclose(f);
	}
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_index_small),
		cmocka_unit_test(test_hist_index_powers),
		cmocka_unit_test(test_hist_buckets_exhaustive),
		cmocka_unit_test(test_hist_index_random),
		cmocka_unit_test(test_hist_quantiles_uniform),
		cmocka_unit_test(test_hist_quantiles_exponential),
		cmocka_unit_test(test_hist_quantiles_bimodal),
		cmocka_unit_test(test_hist_quantiles_degenerate),
		cmocka_unit_test(test_hist_quantiles_huge),
		cmocka_unit_test(test_hist_empty_and_bounds),
		cmocka_unit_test(test_hist_merge),
		cmocka_unit_test(test_hist_add_n),
		cmocka_unit_test(test_params_ops),
		cmocka_unit_test(test_params_codec),
		cmocka_unit_test(test_report_json),
		cmocka_unit_test(test_report_csv),
		cmocka_unit_test(test_report_svg),
		cmocka_unit_test(test_report_table),
		cmocka_unit_test(test_report_register),
		cmocka_unit_test(test_report_locale),
		cmocka_unit_test(test_report_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
