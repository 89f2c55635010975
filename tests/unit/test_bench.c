/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the benchmark engine's statistics (the log-linear histogram,
 * checked against exact order statistics) and of its parameters
 * (operations, the explicit and implicit models, the HELLO codec); and
 * main(), which runs these and the reporters' (test_bench_report.c,
 * bench_fixture.h).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tern/util.h>

#include "bench.h"
#include "engine_int.h"
#include "bench_fixture.h"

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
