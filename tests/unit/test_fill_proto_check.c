/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the random-fill protocol (fill_proto_fixture.h): the
 * checks a server makes before it writes a client's memory. Where each
 * page of a request lands in the client's regions (fill_page_target()),
 * and fill_request_check()'s refusals of page sizes, counts, byte totals,
 * bounds and duplicates, each named in its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tern/tern.h>

#include "core/core.h"
#include "apps/fill/proto.h"
#include "fill_proto_fixture.h"

static uint32_t idx[FILL_MAX_PAGES + 1];
static uint32_t scratch[FILL_MAX_PAGES + 1];

void test_region_pages(void **state)
{
	(void)state;
	assert_int_equal(fill_region_pages(16 * MIB, 3000), 5592);
	assert_int_equal(fill_region_pages(16 * MIB, 4096), 4096);
	assert_int_equal(fill_region_pages(4095, 4096), 0);
	assert_int_equal(fill_region_pages(4096, 4096), 1);
	assert_int_equal(fill_region_pages(16 * MIB, 0), 0);
	assert_true(fill_region_pages(1ULL << 40, 1) == 1ULL << 40);
}

/* Expect page @index at (@region, @offset). */
static void target_is(const struct tern_mr_desc *regions, uint32_t ps,
		      uint32_t index, unsigned int region, uint64_t offset)
{
	unsigned int r = 99;
	uint64_t off = 1;
	int ret = fill_page_target(regions, ps, index, &r, &off);

	if (ret != 0 || r != region || off != offset)
		fail_msg("page %u of %u bytes: ret %d region %u offset %llu, "
			 "want region %u offset %llu",
			 index, ps, ret, r, (unsigned long long)off, region,
			 (unsigned long long)offset);
	/* The whole page lies inside its region. */
	assert_true(off + ps <= regions[r].len);
}

static void target_out(const struct tern_mr_desc *regions, uint32_t ps,
		       uint32_t index)
{
	unsigned int r = 99;
	uint64_t off = 1;

	assert_int_equal(fill_page_target(regions, ps, index, &r, &off),
			 -TERN_EBOUNDS);
	/* Out-parameters are written only on success. */
	assert_int_equal(r, 99);
	assert_true(off == 1);
}

void test_page_target(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	const uint32_t per = 5592; /* 3000-byte pages in 16 MiB */

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	target_is(regions, 3000, 0, 0, 0);
	target_is(regions, 3000, 1, 0, 3000);
	target_is(regions, 3000, per - 1, 0, 16773000);
	target_is(regions, 3000, per, 1, 0);
	target_is(regions, 3000, per + 1, 1, 3000);
	target_is(regions, 3000, 2 * per - 1, 1, 16773000);
	target_out(regions, 3000, 2 * per);
	target_out(regions, 3000, UINT32_MAX);
	/* Every page, in order. */
	for (uint32_t i = 0; i < 2 * per; i++)
		target_is(regions, 3000, i, i / per,
			  (uint64_t)(i % per) * 3000);
}

void test_page_target_uneven(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];

	(void)state;
	/* Region 0 holds two whole pages; its tail is never written. */
	make_regions(regions, 10000, MIB);
	target_is(regions, 4096, 0, 0, 0);
	target_is(regions, 4096, 1, 0, 4096);
	target_is(regions, 4096, 2, 1, 0);
	target_is(regions, 4096, 257, 1, 255 * 4096);
	target_out(regions, 4096, 258);

	/* Region 0 smaller than a page holds none. */
	make_regions(regions, 100, 8192);
	target_is(regions, 4096, 0, 1, 0);
	target_is(regions, 4096, 1, 1, 4096);
	target_out(regions, 4096, 2);

	/* Pages of 0 bytes do not exist. */
	make_regions(regions, MIB, MIB);
	target_out(regions, 0, 0);
}

/* Encode and decode a request, so the indices are little-endian. */
static void make_request(struct fill_request *r, uint32_t page_size,
			 uint32_t count, const uint32_t *indices)
{
	struct fill_request in = {
		.id = 7,
		.page_size = page_size,
		.seed = 42,
		.page_count = count,
	};
	ssize_t n = fill_request_encode(msg, sizeof(msg), SESSION, &in,
					indices);

	assert_true(n > 0);
	assert_int_equal(fill_request_decode(msg, (size_t)n, r), 0);
}

/* Does @s mention @v as a whole decimal number? */
static int mentions(const char *s, unsigned long long v)
{
	char num[24];
	size_t len;

	snprintf(num, sizeof(num), "%llu", v);
	len = strlen(num);
	for (const char *p = strstr(s, num); p != NULL;
	     p = strstr(p + 1, num)) {
		if ((p == s || p[-1] < '0' || p[-1] > '9') &&
		    (p[len] < '0' || p[len] > '9'))
			return 1;
	}
	return 0;
}

static void check_ok(const struct fill_request *r,
		     const struct tern_mr_desc *regions)
{
	char why[256] = "";
	int ret = fill_request_check(r, regions, scratch, why, sizeof(why));

	if (ret != 0)
		fail_msg("good request refused: %d (%s)", ret, why);
}

static void check_refused(const struct fill_request *r,
			  const struct tern_mr_desc *regions, int want,
			  unsigned long long v)
{
	char why[256] = "";
	int ret = fill_request_check(r, regions, scratch, why, sizeof(why));

	if (ret != want)
		fail_msg("request check: %d, want %d (%s)", ret, want, why);
	assert_true(strlen(why) > 0);
	if (!mentions(why, v))
		fail_msg("reason \"%s\" does not mention %llu", why, v);
}

void test_check_good(void **state)
{
	static const uint32_t good4k[] = { 0, 4095, 4096, 8191, 17 };
	static const uint32_t good3k[] = { 11183, 0, 5591, 5592 };
	static const uint32_t both[] = { 1, 0 };
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	make_request(&r, 4096, TERN_ARRAY_SIZE(good4k), good4k);
	check_ok(&r, regions);
	make_request(&r, 3000, TERN_ARRAY_SIZE(good3k), good3k);
	check_ok(&r, regions);
	/* The largest page, filling both regions: exactly the byte limit. */
	make_request(&r, FILL_MAX_PAGE_SIZE, 2, both);
	check_ok(&r, regions);
	/* Every page of 4 KiB: exactly FILL_MAX_BYTES. */
	for (uint32_t i = 0; i < 8192; i++)
		idx[i] = 8191 - i;
	make_request(&r, 4096, 8192, idx);
	check_ok(&r, regions);
	/* The request is left as it was (the check sorts scratch). */
	assert_int_equal(fill_request_index(&r, 0), 8191);
	assert_int_equal(fill_request_index(&r, 8191), 0);
}

void test_check_page_size(void **state)
{
	static const uint32_t one[] = { 0 };
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	make_request(&r, 0, 1, one);
	check_refused(&r, regions, -TERN_EREFUSED, 0);
	make_request(&r, FILL_MAX_PAGE_SIZE + 1, 1, one);
	check_refused(&r, regions, -TERN_EREFUSED, FILL_MAX_PAGE_SIZE + 1);
	make_request(&r, UINT32_MAX, 1, one);
	check_refused(&r, regions, -TERN_EREFUSED, UINT32_MAX);
}

void test_check_page_count(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	make_request(&r, 4096, 0, NULL);
	check_refused(&r, regions, -TERN_EREFUSED, 0);
	/* One page more than the limit, each of one byte. */
	for (uint32_t i = 0; i <= FILL_MAX_PAGES; i++)
		idx[i] = i;
	make_request(&r, 1, FILL_MAX_PAGES + 1, idx);
	check_refused(&r, regions, -TERN_EREFUSED, FILL_MAX_PAGES + 1);
	/* ... and exactly the limit is fine. */
	make_request(&r, 1, FILL_MAX_PAGES, idx);
	check_ok(&r, regions);
}

void test_check_bytes(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;
	char why[256] = "";

	(void)state;
	make_regions(regions, 1ULL << 30, 1ULL << 30);
	for (uint32_t i = 0; i < 8193; i++)
		idx[i] = i;
	/* 8193 pages of 4 KiB: one page over FILL_MAX_BYTES. */
	make_request(&r, 4096, 8193, idx);
	check_refused(&r, regions, -TERN_EREFUSED, 8193);
	assert_int_equal(
		fill_request_check(&r, regions, scratch, why, sizeof(why)),
		-TERN_EREFUSED);
	assert_true(mentions(why, 4096));
	/* Two of the largest pages and one more byte's worth. */
	make_request(&r, FILL_MAX_PAGE_SIZE, 3, idx);
	check_refused(&r, regions, -TERN_EREFUSED, 3);
}

void test_check_bounds(void **state)
{
	static const uint32_t past[] = { 0, 1, 9000, 2 };
	static const uint32_t last[] = { 8192 };
	static const uint32_t max[] = { 5, UINT32_MAX };
	static const uint32_t p3k[] = { 11184 };
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	make_request(&r, 4096, TERN_ARRAY_SIZE(past), past);
	check_refused(&r, regions, -TERN_EBOUNDS, 9000);
	/* One past the last page. */
	make_request(&r, 4096, TERN_ARRAY_SIZE(last), last);
	check_refused(&r, regions, -TERN_EBOUNDS, 8192);
	make_request(&r, 4096, TERN_ARRAY_SIZE(max), max);
	check_refused(&r, regions, -TERN_EBOUNDS, UINT32_MAX);
	/* Pages that do not divide the regions. */
	make_request(&r, 3000, TERN_ARRAY_SIZE(p3k), p3k);
	check_refused(&r, regions, -TERN_EBOUNDS, 11184);
	/* Smaller regions hold fewer pages. */
	make_regions(regions, 4096, 8191);
	make_request(&r, 4096, 1, last);
	check_refused(&r, regions, -TERN_EBOUNDS, 8192);
	idx[0] = 1;
	idx[1] = 2;
	make_request(&r, 4096, 2, idx);
	check_refused(&r, regions, -TERN_EBOUNDS, 2);
}

void test_check_duplicate(void **state)
{
	static const uint32_t dup[] = { 100, 4242, 7, 8000, 4242, 1 };
	static const uint32_t adjacent[] = { 3, 3 };
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r;

	(void)state;
	make_regions(regions, 16 * MIB, 16 * MIB);
	make_request(&r, 4096, TERN_ARRAY_SIZE(dup), dup);
	check_refused(&r, regions, -TERN_EREFUSED, 4242);
	make_request(&r, 4096, TERN_ARRAY_SIZE(adjacent), adjacent);
	check_refused(&r, regions, -TERN_EREFUSED, 3);
	/* Duplicates far apart in a long list. */
	for (uint32_t i = 0; i < 4096; i++)
		idx[i] = i * 2;
	idx[4095] = 1234;
	make_request(&r, 4096, 4096, idx);
	check_refused(&r, regions, -TERN_EREFUSED, 1234);
}
