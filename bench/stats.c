/* SPDX-License-Identifier: MIT */
/*
 * The log-linear latency histogram of bench.h. Values below BENCH_HIST_SUB
 * have a bucket each; from there on every power of two [2^e, 2^(e+1)) is
 * cut into BENCH_HIST_SUB equal buckets, so a bucket is never wider than
 * 1/BENCH_HIST_SUB of the values it holds. Adding a sample is a few integer
 * operations: no allocation, no floating point.
 */
#include <math.h>
#include <string.h>

#include "bench.h"

/* floor(log2(v)) for v > 0. */
static unsigned int ilog2_u64(uint64_t v)
{
#if defined(__GNUC__) || defined(__clang__)
	return 63u - (unsigned int)__builtin_clzll(v);
#else
	unsigned int e = 0;

	while (v > 1) {
		v >>= 1;
		e++;
	}
	return e;
#endif
}

size_t bench_hist_index(uint64_t v)
{
	unsigned int e, shift;

	if (v < BENCH_HIST_SUB)
		return (size_t)v;
	e = ilog2_u64(v);
	shift = e - BENCH_HIST_SUB_BITS;
	/* v >> shift lies in [SUB, 2 * SUB): its low bits pick the slice. */
	return (size_t)(shift + 1) * BENCH_HIST_SUB +
	       (size_t)((v >> shift) - BENCH_HIST_SUB);
}

/*
 * The inverse of bench_hist_index(). An index past the last bucket (the
 * "next" bucket of the last one) saturates to UINT64_MAX.
 */
uint64_t bench_hist_lower(size_t i)
{
	size_t group, slice;

	if (i < BENCH_HIST_SUB)
		return (uint64_t)i;
	if (i >= BENCH_HIST_BUCKETS)
		return UINT64_MAX;
	group = i / BENCH_HIST_SUB;
	slice = i % BENCH_HIST_SUB;
	return ((uint64_t)BENCH_HIST_SUB + slice) << (group - 1);
}

void bench_hist_init(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

static void sum_add(struct bench_hist *h, uint64_t lo, uint64_t hi)
{
	uint64_t old = h->sum_lo;

	h->sum_lo += lo;
	h->sum_hi += hi + (h->sum_lo < old ? 1 : 0);
}

void bench_hist_add(struct bench_hist *h, uint64_t v)
{
	h->count++;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	sum_add(h, v, 0);
	h->buckets[bench_hist_index(v)]++;
}

/* @a * @b as 128 bits. */
static void mul_u64(uint64_t a, uint64_t b, uint64_t *lo, uint64_t *hi)
{
	uint64_t al = a & 0xffffffffu, ah = a >> 32;
	uint64_t bl = b & 0xffffffffu, bh = b >> 32;
	uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);

	*lo = (mid << 32) | (ll & 0xffffffffu);
	*hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

void bench_hist_add_n(struct bench_hist *h, uint64_t v, uint64_t n)
{
	uint64_t lo, hi;

	if (n == 0)
		return;
	h->count += n;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	mul_u64(v, n, &lo, &hi);
	sum_add(h, lo, hi);
	h->buckets[bench_hist_index(v)] += n;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
	if (src->count == 0)
		return;
	dst->count += src->count;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	sum_add(dst, src->sum_lo, src->sum_hi);
	for (size_t i = 0; i < BENCH_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
}

uint64_t bench_hist_quantile(const struct bench_hist *h, double q)
{
	uint64_t rank, cum = 0;
	double r;

	if (h->count == 0)
		return 0;
	/* NaN lands here too: the smallest sample is as good as any. */
	if (!(q > 0.0))
		return h->min;
	if (q >= 1.0)
		return h->max;

	r = ceil(q * (double)h->count);
	if (r < 1.0)
		rank = 1;
	else if (r >= (double)h->count)
		rank = h->count;
	else
		rank = (uint64_t)r;

	for (size_t i = 0; i < BENCH_HIST_BUCKETS; i++) {
		cum += h->buckets[i];
		if (cum >= rank) {
			uint64_t v = bench_hist_lower(i);

			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return v;
		}
	}
	/* Unreachable while count matches the buckets. */
	return h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	long double sum;

	if (h->count == 0)
		return 0.0;
	sum = (long double)h->sum_hi * 18446744073709551616.0L +
	      (long double)h->sum_lo;
	return (double)(sum / (long double)h->count);
}
