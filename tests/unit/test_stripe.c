/* SPDX-License-Identifier: MIT */
/* Striping arithmetic: every byte of a transfer lands in exactly one chunk,
 * chunks are contiguous and at most a chunk long, and they go round-robin
 * over the rails from the request's first rail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/stripe.h"

static void check_cover(uint64_t len, uint64_t chunk, unsigned int nrails,
			unsigned int first)
{
	uint8_t *seen = calloc(len, 1);
	uint64_t n = tern__stripe_count(len, chunk), next = 0;
	unsigned int per_rail[8] = { 0 };

	assert_non_null(seen);
	assert_int_equal(n, (len + chunk - 1) / chunk);
	for (uint64_t k = 0; k < n; k++) {
		uint64_t off, clen;
		unsigned int r = tern__stripe_rail(first, k, nrails);

		tern__stripe_chunk(len, chunk, k, &off, &clen);
		assert_int_equal(off, next); /* contiguous, in order */
		assert_true(clen > 0 && clen <= chunk);
		assert_true(off + clen <= len);
		if (k + 1 < n)
			assert_int_equal(clen,
					 chunk); /* only the last is short */
		for (uint64_t i = off; i < off + clen; i++)
			seen[i]++;
		next = off + clen;
		assert_true(r < nrails);
		assert_int_equal(r, (first + k) % nrails);
		per_rail[r]++;
	}
	assert_int_equal(next, len);
	for (uint64_t i = 0; i < len; i++)
		assert_int_equal(seen[i], 1); /* every byte exactly once */
	/* Round-robin: rail loads differ by at most one chunk, and rails
	 * beyond the chunk count get none. */
	for (unsigned int r = 0; r < nrails; r++) {
		unsigned int want = (unsigned int)(n / nrails) +
				    ((r + nrails - first) % nrails <
				     n % nrails);

		assert_int_equal(per_rail[r], want);
	}
	free(seen);
}

static void test_boundaries(void **state)
{
	const uint64_t chunk = 4096;
	const uint64_t lens[] = {
		1,
		chunk - 1,
		chunk,
		chunk + 1,
		2 * chunk - 1,
		2 * chunk,
		2 * chunk + 1,
		3 * chunk + 123,
		12345,
		7 * chunk,
		7 * chunk + 1,
		64 * chunk - 1,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (unsigned int nrails = 1; nrails <= 8; nrails++) {
			for (unsigned int first = 0; first < nrails; first++)
				check_cover(lens[i], chunk, nrails, first);
		}
	}
}

static void test_odd_chunks(void **state)
{
	(void)state;
	/* Chunk sizes that divide nothing evenly; more rails than chunks. */
	check_cover(1000003, 131072, 4, 1);
	check_cover(131073, 131072, 8, 7); /* 2 chunks, 8 rails */
	check_cover(5, 3, 4, 2);
	check_cover(3, 3, 4, 0); /* exactly one chunk */
}

static void test_large(void **state)
{
	uint64_t off, clen;
	const uint64_t len = (1ULL << 40) + 17, chunk = 1ULL << 17;
	const uint64_t n = tern__stripe_count(len, chunk);

	(void)state;
	/* Past 4 GiB: the arithmetic stays 64-bit. */
	assert_int_equal(n, (1ULL << 23) + 1);
	tern__stripe_chunk(len, chunk, n - 1, &off, &clen);
	assert_int_equal(off, 1ULL << 40);
	assert_int_equal(clen, 17);
	assert_int_equal(tern__stripe_rail(3, n - 1, 4), (3 + n - 1) % 4);
}

/* Cut where either region's chunk ends: every byte in exactly one part,
 * parts contiguous, none crossing a local or remote chunk, none longer
 * than @chunk, and as many as tern__cut_count() says. */
static void check_cut(uint64_t len, uint64_t chunk, uint64_t loff,
		      unsigned int lshift, uint64_t roff, unsigned int rshift)
{
	uint64_t off = 0, n = 0;

	while (off < len) {
		uint64_t part = tern__cut_len(len, off, chunk, loff, lshift,
					      roff, rshift);

		assert_true(part > 0 && part <= chunk && part <= len - off);
		if (lshift != 0)
			assert_true((loff + off) >> lshift ==
				    (loff + off + part - 1) >> lshift);
		if (rshift != 0)
			assert_true((roff + off) >> rshift ==
				    (roff + off + part - 1) >> rshift);
		/* Cut only where it must be: at the end, a chunk's end or
		 * the part size. */
		assert_true(off + part == len || part == chunk ||
			    (lshift != 0 && ((loff + off + part) &
					     ((1ULL << lshift) - 1)) == 0) ||
			    (rshift != 0 && ((roff + off + part) &
					     ((1ULL << rshift) - 1)) == 0));
		off += part;
		n++;
	}
	assert_int_equal(off, len);
	assert_int_equal(
		n, tern__cut_count(len, chunk, loff, lshift, roff, rshift));
}

static void test_cut(void **state)
{
	const uint64_t M = 1ULL << 20;

	(void)state;
	/* Neither region in chunks: the stripe's own parts. */
	assert_int_equal(tern__cut_count(10 * M, 4 * M, 5, 0, 7, 0), 3);
	/* Inside one chunk at each end: one part. */
	assert_int_equal(tern__cut_count(100, UINT64_MAX, 5 * M, 20, 3 * M, 20),
			 1);
	/* 16 bytes across one boundary: two. */
	assert_int_equal(tern__cut_count(16, UINT64_MAX, M - 8, 20, 0, 0), 2);
	/* Boundaries at different places at the two ends. */
	check_cut(3 * M + 777, UINT64_MAX, M - 100, 20, 2 * M - 3000, 20);
	check_cut(30 * M + 1, UINT64_MAX, 1, 20, 3, 12);
	check_cut(30 * M + 1, 3 * M, 1, 20, 3, 0);
	check_cut(64 * M, 512 * 1024, 0, 20, 0, 20);
	check_cut(5, UINT64_MAX, 4094, 12, 0, 0);
	/* Past 4 GiB, chunks of 1 GiB at one end. */
	check_cut((5ULL << 30) + 3, 1ULL << 28, 1ULL << 29, 30, 17, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_odd_chunks),
		cmocka_unit_test(test_large),
		cmocka_unit_test(test_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
