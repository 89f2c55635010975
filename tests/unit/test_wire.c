/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the checked little-endian reader and writer every wire
 * codec uses (src/wire/wire.h): byte order of each width, overruns on
 * write and on read, and the sticky error.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <tern/tern.h>

#include "wire/ctrl.h"
#include "wire/local.h"
#include "wire/wire.h"

#define CANARY 0xa5

/* What the writer below puts down, byte by byte. */
static const uint8_t expect_bytes[] = {
	0x11,				  /* u8 */
	0x33, 0x22,			  /* u16 0x2233 */
	0x77, 0x66, 0x55, 0x44,		  /* u32 0x44556677 */
	0xff, 0xee, 0xdd, 0xcc,		  /* u64 0x8899aabbccddeeff */
	0xbb, 0xaa, 0x99, 0x88, 'x', 'y', /* bytes "xy" */
};

static void write_all(struct tern__wr *w)
{
	tern__wr_u8(w, 0x11);
	tern__wr_u16(w, 0x2233);
	tern__wr_u32(w, 0x44556677u);
	tern__wr_u64(w, 0x8899aabbccddeeffULL);
	tern__wr_bytes(w, "xy", 2);
}

static void test_little_endian(void **state)
{
	uint8_t buf[sizeof(expect_bytes) + 4];
	struct tern__wr w;
	struct tern__rd r;

	(void)state;
	memset(buf, CANARY, sizeof(buf));
	tern__wr_init(&w, buf, sizeof(buf));
	write_all(&w);
	assert_int_equal(tern__wr_end(&w), sizeof(expect_bytes));
	assert_int_equal(tern__wr_left(&w), 4);
	assert_memory_equal(buf, expect_bytes, sizeof(expect_bytes));
	for (size_t i = sizeof(expect_bytes); i < sizeof(buf); i++)
		assert_int_equal(buf[i], CANARY);

	tern__rd_init(&r, expect_bytes, sizeof(expect_bytes));
	assert_int_equal(tern__rd_u8(&r), 0x11);
	assert_int_equal(tern__rd_u16(&r), 0x2233);
	assert_int_equal(tern__rd_u32(&r), 0x44556677u);
	assert_true(tern__rd_u64(&r) == 0x8899aabbccddeeffULL);
	assert_memory_equal(tern__rd_take(&r, 2), "xy", 2);
	assert_true(tern__rd_ok(&r));
	assert_int_equal(tern__rd_left(&r), 0);

	/* The unchecked helpers agree with the cursors. */
	assert_int_equal(tern__wire_get_u16(expect_bytes + 1), 0x2233);
	assert_int_equal(tern__wire_get_u32(expect_bytes + 3), 0x44556677u);
	assert_true(tern__wire_get_u64(expect_bytes + 7) ==
		    0x8899aabbccddeeffULL);
	memset(buf, 0, sizeof(buf));
	tern__wire_put_u16(buf, 0x2233);
	tern__wire_put_u32(buf + 2, 0x44556677u);
	tern__wire_put_u64(buf + 6, 0x8899aabbccddeeffULL);
	assert_memory_equal(buf, expect_bytes + 1, 14);
}

/* The top bit of every width survives the round trip (no sign games). */
static void test_extremes(void **state)
{
	uint8_t buf[15];
	struct tern__wr w;
	struct tern__rd r;

	(void)state;
	tern__wr_init(&w, buf, sizeof(buf));
	tern__wr_u8(&w, UINT8_MAX);
	tern__wr_u16(&w, UINT16_MAX);
	tern__wr_u32(&w, UINT32_MAX);
	tern__wr_u64(&w, UINT64_MAX);
	assert_int_equal(tern__wr_end(&w), sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xff);
	tern__rd_init(&r, buf, sizeof(buf));
	assert_int_equal(tern__rd_u8(&r), UINT8_MAX);
	assert_int_equal(tern__rd_u16(&r), UINT16_MAX);
	assert_int_equal(tern__rd_u32(&r), UINT32_MAX);
	assert_true(tern__rd_u64(&r) == UINT64_MAX);
	assert_true(tern__rd_ok(&r));
}

/* Put one value of @width bytes into a writer of @len bytes. */
static void put_width(struct tern__wr *w, size_t width)
{
	switch (width) {
	case 1:
		tern__wr_u8(w, 0x01);
		break;
	case 2:
		tern__wr_u16(w, 0x0102);
		break;
	case 4:
		tern__wr_u32(w, 0x01020304u);
		break;
	case 8:
		tern__wr_u64(w, 0x0102030405060708ULL);
		break;
	default:
		tern__wr_bytes(w, "0123456789abcdef", width);
	}
}

static uint64_t get_width(struct tern__rd *r, size_t width)
{
	switch (width) {
	case 1:
		return tern__rd_u8(r);
	case 2:
		return tern__rd_u16(r);
	case 4:
		return tern__rd_u32(r);
	case 8:
		return tern__rd_u64(r);
	default:
		return tern__rd_take(r, width) != NULL ? 1 : 0;
	}
}

static const size_t widths[] = { 1, 2, 4, 8, 3, 16 };

static void test_write_overrun(void **state)
{
	uint8_t buf[32];
	struct tern__wr w;

	(void)state;
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		size_t n = widths[i];

		/* Exactly enough room. */
		memset(buf, CANARY, sizeof(buf));
		tern__wr_init(&w, buf, n);
		put_width(&w, n);
		assert_int_equal(tern__wr_end(&w), n);
		assert_int_equal(buf[n], CANARY);

		/* One byte short, after a byte already written: nothing
		 * of the value lands, the error sticks, and a put that
		 * would fit afterwards is refused too. */
		memset(buf, CANARY, sizeof(buf));
		tern__wr_init(&w, buf, n);
		tern__wr_u8(&w, 0x42);
		put_width(&w, n);
		assert_int_equal(tern__wr_end(&w), -ENOSPC);
		assert_int_equal(tern__wr_left(&w), 0);
		assert_int_equal(buf[0], 0x42);
		for (size_t k = 1; k < sizeof(buf); k++)
			if (buf[k] != CANARY)
				fail_msg("width %zu: byte %zu written past "
					 "the end",
					 n, k);
		tern__wr_bytes(&w, NULL, 0);
		assert_int_equal(tern__wr_end(&w), -ENOSPC);
		assert_null(tern__wr_take(&w, 0));
	}
	/* A length that would wrap the offset is refused, not wrapped. */
	tern__wr_init(&w, buf, sizeof(buf));
	tern__wr_u8(&w, 0);
	assert_null(tern__wr_take(&w, SIZE_MAX));
	assert_int_equal(tern__wr_end(&w), -ENOSPC);
	/* Zero bytes fit anywhere, even with no source. */
	tern__wr_init(&w, buf, 0);
	tern__wr_bytes(&w, NULL, 0);
	assert_int_equal(tern__wr_end(&w), 0);
}

static void test_read_overrun(void **state)
{
	static const uint8_t src[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct tern__rd r;

	(void)state;
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		size_t n = widths[i];

		/* Exactly enough bytes. */
		tern__rd_init(&r, src, n);
		assert_true(get_width(&r, n) != 0);
		assert_true(tern__rd_ok(&r));
		assert_int_equal(tern__rd_left(&r), 0);

		/* One byte short: 0, the error, and it sticks even for a
		 * get that would fit. */
		tern__rd_init(&r, src, n);
		assert_int_equal(tern__rd_u8(&r), 1);
		assert_int_equal(get_width(&r, n), 0);
		assert_false(tern__rd_ok(&r));
		assert_int_equal(tern__rd_left(&r), 0);
		assert_int_equal(tern__rd_u8(&r), 0);
		assert_null(tern__rd_take(&r, 0));
		assert_false(tern__rd_ok(&r));
	}
	tern__rd_init(&r, src, sizeof(src));
	assert_null(tern__rd_take(&r, SIZE_MAX));
	assert_false(tern__rd_ok(&r));
	/* An empty buffer: zero bytes can be taken, one cannot. */
	tern__rd_init(&r, src, 0);
	assert_non_null(tern__rd_take(&r, 0));
	assert_true(tern__rd_ok(&r));
	assert_int_equal(tern__rd_u8(&r), 0);
	assert_false(tern__rd_ok(&r));
}

/* A nested codec writes at tern__wr_ptr() and the cursor takes what it
 * used; a reader hands the rest of its buffer the same way. */
static void test_nested(void **state)
{
	uint8_t buf[16];
	struct tern__wr w;
	struct tern__rd r;

	(void)state;
	tern__wr_init(&w, buf, sizeof(buf));
	tern__wr_u32(&w, 7);
	assert_ptr_equal(tern__wr_ptr(&w), buf + 4);
	assert_int_equal(tern__wr_left(&w), 12);
	memcpy(tern__wr_ptr(&w), "abc", 3);
	assert_ptr_equal(tern__wr_take(&w, 3), buf + 4);
	assert_int_equal(tern__wr_end(&w), 7);

	tern__rd_init(&r, buf, 7);
	assert_int_equal(tern__rd_u32(&r), 7);
	assert_ptr_equal(tern__rd_ptr(&r), buf + 4);
	assert_int_equal(tern__rd_left(&r), 3);
	assert_memory_equal(tern__rd_take(&r, 3), "abc", 3);
	assert_int_equal(tern__rd_left(&r), 0);
}

/* Control messages (docs/protocol.md): exact bytes, and every field
 * checked. */
static void test_ctrl(void **state)
{
	static const uint8_t want[TERN_CTRL_LEN] = { 'T',  'R',	 'N',  'C',
						     1,	   1,	 16,   0,
						     0x78, 0x56, 0x34, 0x12,
						     0,	   0,	 0,    0 };
	struct tern__ctrl_msg m = { .type = TERN_CTRL_IMM_ABORT,
				    .imm = 0x12345678 };
	struct tern__ctrl_msg got = { 0 }, untouched = { .imm = 7 };
	uint8_t buf[TERN_CTRL_LEN + 1];

	(void)state;
	assert_int_equal(tern__ctrl_pack(&m, buf, sizeof(buf)), TERN_CTRL_LEN);
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(tern__ctrl_pack(&m, buf, TERN_CTRL_LEN - 1), -ENOSPC);
	assert_int_equal(tern__ctrl_parse(want, sizeof(want), &got), 0);
	assert_int_equal(got.type, TERN_CTRL_IMM_ABORT);
	assert_int_equal(got.imm, 0x12345678);
	/* Any other length, even with the right bytes. */
	memcpy(buf, want, sizeof(want));
	buf[TERN_CTRL_LEN] = 0;
	got = untouched;
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got),
			 -TERN_EPROTO);
	assert_int_equal(tern__ctrl_parse(buf, TERN_CTRL_LEN - 1, &got),
			 -TERN_EPROTO);
	assert_int_equal(tern__ctrl_parse(buf, 0, &got), -TERN_EPROTO);
	assert_int_equal(tern__ctrl_parse(NULL, TERN_CTRL_LEN, &got),
			 -TERN_EPROTO);
	/* Each field. */
	for (size_t i = 0; i < TERN_CTRL_LEN; i++) {
		int ret;

		if (i >= 8 && i < 12)
			continue; /* the imm: any value */
		memcpy(buf, want, sizeof(want));
		buf[i] ^= 0x40;
		ret = tern__ctrl_parse(buf, TERN_CTRL_LEN, &got);
		assert_int_equal(ret, i == 4 ? -TERN_EVERSION : -TERN_EPROTO);
	}
	assert_memory_equal(&got, &untouched, sizeof(got));
}

/* A fence and its answer: exact bytes, the rail bounded, the token any
 * value. */
static void test_ctrl_fence(void **state)
{
	static const uint8_t want[TERN_CTRL_LEN] = { 'T',  'R',	 'N',  'C',
						     1,	   2,	 16,   0,
						     3,	   0,	 0,    0,
						     0xef, 0xbe, 0xad, 0xde };
	struct tern__ctrl_msg m = { .type = TERN_CTRL_FENCE,
				    .rail = 3,
				    .token = 0xdeadbeef };
	struct tern__ctrl_msg got = { 0 };
	uint8_t buf[TERN_CTRL_LEN];

	(void)state;
	assert_int_equal(tern__ctrl_pack(&m, buf, sizeof(buf)), TERN_CTRL_LEN);
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got), 0);
	assert_int_equal(got.type, TERN_CTRL_FENCE);
	assert_int_equal(got.rail, 3);
	assert_int_equal(got.token, 0xdeadbeef);
	m.type = TERN_CTRL_FENCED;
	assert_int_equal(tern__ctrl_pack(&m, buf, sizeof(buf)), TERN_CTRL_LEN);
	assert_int_equal(buf[5], 3);
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got), 0);
	assert_int_equal(got.type, TERN_CTRL_FENCED);
	/* A rail past the last one a ctx can have, and an unknown type. */
	buf[8] = TERN_CTRL_RAILS;
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got),
			 -TERN_EPROTO);
	buf[8] = TERN_CTRL_RAILS - 1;
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got), 0);
	assert_int_equal(got.rail, TERN_CTRL_RAILS - 1);
	buf[11] = 1;
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got),
			 -TERN_EPROTO);
	buf[11] = 0;
	buf[5] = 4;
	assert_int_equal(tern__ctrl_parse(buf, sizeof(buf), &got),
			 -TERN_EPROTO);
}

/* The same-host fd broker's messages: round trips, and every field a
 * hostile asker or answerer could get wrong refused with its name. */
static void test_local_broker(void **state)
{
	struct tern__lb_req r = { .what = TERN__LB_REGION,
				  .idx = 7,
				  .nonce = 0x1122334455667788ULL,
				  .nkeys = 2,
				  .keys = { 5, 0xffffffffffffffffULL } },
			    back;
	struct tern__lb_ans a = { .status = 0, .what = 1, .nfds = 2 }, ab;
	uint8_t buf[TERN__LB_REQ_MAX + 8];
	char why[128];
	ssize_t n;

	(void)state;
	n = tern__lb_req_pack(&r, buf, sizeof(buf));
	assert_int_equal(n, 24 + 16);
	assert_int_equal(
		tern__lb_req_parse(buf, (size_t)n, &back, why, sizeof(why)), 0);
	assert_int_equal(back.what, r.what);
	assert_int_equal(back.idx, 7);
	assert_true(back.nonce == r.nonce && back.nkeys == 2 &&
		    back.keys[1] == r.keys[1]);
	/* Short, long, a bad magic, what, entry or key count. */
	assert_int_equal(
		tern__lb_req_parse(buf, (size_t)n - 1, &back, why, sizeof(why)),
		-EPROTO);
	assert_non_null(strstr(why, "nkeys"));
	assert_int_equal(tern__lb_req_parse(buf, 10, &back, why, sizeof(why)),
			 -EPROTO);
	assert_non_null(strstr(why, "short"));
	buf[0] ^= 1;
	assert_int_equal(
		tern__lb_req_parse(buf, (size_t)n, &back, why, sizeof(why)),
		-EPROTO);
	assert_non_null(strstr(why, "magic"));
	buf[0] ^= 1;
	r.what = 9;
	n = tern__lb_req_pack(&r, buf, sizeof(buf));
	assert_int_equal(
		tern__lb_req_parse(buf, (size_t)n, &back, why, sizeof(why)),
		-EPROTO);
	assert_non_null(strstr(why, "what 9"));
	r.what = TERN__LB_REGION;
	r.idx = TERN__L_NREG;
	n = tern__lb_req_pack(&r, buf, sizeof(buf));
	assert_int_equal(
		tern__lb_req_parse(buf, (size_t)n, &back, why, sizeof(why)),
		-EPROTO);
	assert_non_null(strstr(why, "region 256"));
	r.nkeys = TERN__L_MAXKEYS + 1;
	assert_int_equal(tern__lb_req_pack(&r, buf, sizeof(buf)), -EINVAL);
	/* Answers: a round trip; fds with an error, too many, a status
	 * that is not an errno. */
	n = tern__lb_ans_pack(&a, buf, sizeof(buf));
	assert_int_equal(n, TERN__LB_ANS_LEN);
	assert_int_equal(
		tern__lb_ans_parse(buf, (size_t)n, &ab, why, sizeof(why)), 0);
	assert_int_equal(ab.nfds, 2);
	a.status = -EPERM;
	n = tern__lb_ans_pack(&a, buf, sizeof(buf));
	assert_int_equal(
		tern__lb_ans_parse(buf, (size_t)n, &ab, why, sizeof(why)),
		-EPROTO);
	a.nfds = 0;
	a.status = 5;
	n = tern__lb_ans_pack(&a, buf, sizeof(buf));
	assert_int_equal(
		tern__lb_ans_parse(buf, (size_t)n, &ab, why, sizeof(why)),
		-EPROTO);
	a.status = 0;
	a.nfds = 3;
	n = tern__lb_ans_pack(&a, buf, sizeof(buf));
	assert_int_equal(
		tern__lb_ans_parse(buf, (size_t)n, &ab, why, sizeof(why)),
		-EPROTO);
	assert_int_equal(
		tern__lb_ans_parse(buf, (size_t)n + 1, &ab, why, sizeof(why)),
		-EPROTO);
}

/* The inbox's checks: what a ring may claim, the header, the key hash. */
static void test_local_ring(void **state)
{
	struct tern__lhdr h = { .magic = TERN__L_MAGIC,
				.version = TERN__L_VERSION,
				.nreg = TERN__L_NREG,
				.npeer = TERN__L_NPEER,
				.ring = TERN__L_RING };
	uint64_t k1[2] = { 1, 2 }, k2[2] = { 1, 3 };

	(void)state;
	assert_int_equal(tern__lring_avail(10, 10), 0);
	assert_int_equal(tern__lring_avail(10, 10 + TERN__L_RING),
			 TERN__L_RING);
	assert_int_equal(tern__lring_avail(10, 11 + TERN__L_RING), -1);
	assert_int_equal(tern__lring_avail(10, 9), -1); /* behind the head */
	assert_int_equal(tern__lring_avail(UINT64_MAX, 1), 2); /* wraps */
	assert_null(tern__lhdr_check(&h));
	h.version = 2;
	assert_non_null(strstr(tern__lhdr_check(&h), "another layout"));
	h.version = TERN__L_VERSION;
	h.ring = 8;
	assert_non_null(strstr(tern__lhdr_check(&h), "sizes"));
	h.magic = 0;
	assert_non_null(strstr(tern__lhdr_check(&h), "magic"));
	assert_true(tern__lkeyhash(7, 2, k1) == tern__lkeyhash(7, 2, k1));
	assert_true(tern__lkeyhash(7, 2, k1) != tern__lkeyhash(7, 2, k2));
	assert_true(tern__lkeyhash(7, 2, k1) != tern__lkeyhash(8, 2, k1));
	assert_true(tern__lkeyhash(7, 1, k1) != tern__lkeyhash(7, 2, k1));
	assert_true(tern__lkeyhash(0, 0, NULL) != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_little_endian),
		cmocka_unit_test(test_extremes),
		cmocka_unit_test(test_write_overrun),
		cmocka_unit_test(test_read_overrun),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_ctrl),
		cmocka_unit_test(test_ctrl_fence),
		cmocka_unit_test(test_local_broker),
		cmocka_unit_test(test_local_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
