/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the wire formats a peer sends us: cards, MR descriptors,
 * and the mapping of provider errors to tern codes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <rdma/fi_errno.h>

#include <tern/tern.h>

#include "wire/card.h"
#include "wire/desc.h"
#include "core/core.h"
#include "wire/wire.h"

/* From src/engine/engine.h, which pulls in the whole fabric layer. */
int tern__err_from_fi(int fi_err);

#define ADDR_FORMAT 0x11223344u

/* Room for a card one rail or one address byte past any limit. */
#define CARD_BUF (TERN_CARD_HDR + (TERN_MAX_RAILS + 1) * (TERN_ADDR_MAX + 1))

static uint8_t card_buf[CARD_BUF + 1];
static uint8_t addrs[TERN_MAX_RAILS * TERN_ADDR_MAX];

static void fill_addrs(unsigned int nrails, size_t addrlen)
{
	for (size_t i = 0; i < nrails * addrlen; i++)
		addrs[i] = (uint8_t)(i * 7 + 3);
}

/* Pack a card of @nrails addresses of @addrlen bytes into card_buf. */
static size_t pack_card(unsigned int nrails, size_t addrlen)
{
	struct tern__card c = {
		.nrails = nrails,
		.addrlen = addrlen,
		.addr_format = ADDR_FORMAT,
		.addrs = addrs,
	};
	ssize_t n;

	fill_addrs(nrails, addrlen);
	n = tern__card_pack(&c, card_buf, sizeof(card_buf));
	assert_int_equal(n, TERN_CARD_HDR + nrails * addrlen);
	return (size_t)n;
}

/* Parse, expecting a refusal with a reason, and the card left alone. */
static void card_refused(const uint8_t *buf, size_t len)
{
	struct tern__card c = { .nrails = 99 };
	char why[128] = "";
	int ret = tern__card_parse(buf, len, &c, why, sizeof(why));

	if (ret != -TERN_ECARD)
		fail_msg("card of %zu bytes: %d, want -TERN_ECARD", len, ret);
	assert_true(strlen(why) > 0);
	assert_int_equal(c.nrails, 99);
}

static void test_card_round_trip(void **state)
{
	static const struct {
		unsigned int nrails;
		size_t addrlen;
	} cases[] = {
		{ 1, 1 },
		{ 1, 16 },
		{ 1, TERN_ADDR_MAX },
		{ 4, 1 },
		{ 4, 24 },
		{ 4, 32 },
		{ 4, TERN_ADDR_MAX },
		{ 2, 56 },
		{ TERN_MAX_RAILS, 1 },
		{ TERN_MAX_RAILS, 64 },
	};

	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(cases); t++) {
		unsigned int nrails = cases[t].nrails;
		size_t addrlen = cases[t].addrlen;
		struct tern__card c = { 0 };
		char why[128] = "";
		size_t n = pack_card(nrails, addrlen);
		int ret;

		/* "TERC" little-endian, version 1, then the counts. */
		assert_memory_equal(card_buf, "TERC", 4);
		assert_int_equal(card_buf[4], TERN_CARD_VERSION);
		assert_int_equal(card_buf[5], nrails);
		assert_int_equal(tern__wire_get_u16(card_buf + 6), addrlen);
		assert_int_equal(tern__wire_get_u32(card_buf + 8), ADDR_FORMAT);

		ret = tern__card_parse(card_buf, n, &c, why, sizeof(why));
		if (ret != 0)
			fail_msg("%u x %zu: %d (%s)", nrails, addrlen, ret,
				 why);
		assert_int_equal(c.nrails, nrails);
		assert_int_equal(c.addrlen, addrlen);
		assert_int_equal(c.addr_format, ADDR_FORMAT);
		/* The addresses are not copied: they point into the card. */
		assert_ptr_equal(c.addrs, card_buf + TERN_CARD_HDR);
		assert_memory_equal(c.addrs, addrs, nrails * addrlen);
	}
}

static void test_card_truncated(void **state)
{
	size_t n;

	(void)state;
	n = pack_card(4, 24);
	for (size_t len = 0; len < n; len++)
		card_refused(card_buf, len);
	n = pack_card(1, 6);
	for (size_t len = 0; len < n; len++)
		card_refused(card_buf, len);
}

static void test_card_trailing(void **state)
{
	size_t n;

	(void)state;
	n = pack_card(4, 24);
	card_buf[n] = 0;
	card_refused(card_buf, n + 1);
	n = pack_card(1, 1);
	card_refused(card_buf, n + 1);
}

static void test_card_bad_header(void **state)
{
	size_t n;

	(void)state;
	/* Wrong magic, in any byte. */
	for (int i = 0; i < 4; i++) {
		n = pack_card(4, 24);
		card_buf[i] ^= 0x20;
		card_refused(card_buf, n);
	}
	/* Wrong version, older or newer. */
	n = pack_card(4, 24);
	card_buf[4] = TERN_CARD_VERSION + 1;
	card_refused(card_buf, n);
	card_buf[4] = 0;
	card_refused(card_buf, n);
	card_buf[4] = 0xff;
	card_refused(card_buf, n);

	/* No rails: 12 bytes is consistent with 0 x 24. */
	n = pack_card(1, 24);
	card_buf[5] = 0;
	card_refused(card_buf, TERN_CARD_HDR);

	/* One rail too many, with a length that agrees. */
	n = pack_card(TERN_MAX_RAILS, 2);
	card_buf[5] = TERN_MAX_RAILS + 1;
	card_refused(card_buf, n + 2);

	/* Zero-length addresses: 12 bytes is consistent with 1 x 0. */
	n = pack_card(1, 24);
	tern__wire_put_u16(card_buf + 6, 0);
	card_refused(card_buf, TERN_CARD_HDR);

	/* An address one byte over the limit, with a length that agrees. */
	n = pack_card(1, TERN_ADDR_MAX);
	tern__wire_put_u16(card_buf + 6, TERN_ADDR_MAX + 1);
	card_refused(card_buf, n + 1);

	/* The addresses disagree with the length: 4 x 24 claimed as 4 x 23. */
	n = pack_card(4, 24);
	tern__wire_put_u16(card_buf + 6, 23);
	card_refused(card_buf, n);
}

static void test_card_pack_refused(void **state)
{
	struct tern__card c = {
		.nrails = 1,
		.addrlen = 16,
		.addr_format = ADDR_FORMAT,
		.addrs = addrs,
	};
	uint8_t small[TERN_CARD_HDR + 16];

	(void)state;
	fill_addrs(TERN_MAX_RAILS, TERN_ADDR_MAX);
	assert_int_equal(tern__card_pack(&c, small, sizeof(small)),
			 sizeof(small));
	assert_int_equal(tern__card_pack(&c, small, sizeof(small) - 1),
			 -ENOSPC);
	c.nrails = 0;
	assert_int_equal(tern__card_pack(&c, card_buf, CARD_BUF), -EINVAL);
	c.nrails = TERN_MAX_RAILS + 1;
	assert_int_equal(tern__card_pack(&c, card_buf, CARD_BUF), -EINVAL);
	c.nrails = 1;
	c.addrlen = 0;
	assert_int_equal(tern__card_pack(&c, card_buf, CARD_BUF), -EINVAL);
	c.addrlen = TERN_ADDR_MAX + 1;
	assert_int_equal(tern__card_pack(&c, card_buf, CARD_BUF), -EINVAL);
	/* Within each limit, but larger than TERN_CARD_MAX in all: a caller
	 * error however big the buffer. */
	c.nrails = TERN_MAX_RAILS;
	c.addrlen = 65;
	assert_int_equal(tern__card_pack(&c, card_buf, CARD_BUF), -EINVAL);
}

/* Parse refuses what pack would never write: a card above TERN_CARD_MAX. */
static void test_card_parse_too_big(void **state)
{
	static uint8_t buf[12 + TERN_MAX_RAILS * TERN_ADDR_MAX];
	struct tern__card c = { 0 };
	char why[128] = "";

	(void)state;
	tern__wire_put_u32(buf, TERN_CARD_MAGIC);
	buf[4] = TERN_CARD_VERSION;
	buf[5] = TERN_MAX_RAILS;
	tern__wire_put_u16(buf + 6, TERN_ADDR_MAX);
	assert_int_equal(
		tern__card_parse(buf, sizeof(buf), &c, why, sizeof(why)),
		-TERN_ECARD);
	assert_int_equal(c.nrails, 0);
	assert_non_null(strstr(why, "exceeds"));
}

/* Pack never writes a descriptor unpack would refuse. */
static void test_desc_pack_refuses_invalid(void **state)
{
	struct tern_mr_desc d = { .base = 4096, .len = 4096, .nkeys = 1 };
	uint8_t buf[TERN_MR_DESC_MAX];

	(void)state;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 32);
	d.flags = 0x10;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
	d.flags = 0;
	d.len = 0;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
	d.len = 8192;
	d.base = UINT64_MAX - 4095;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
}

/* A descriptor with @nkeys distinct keys. */
static struct tern_mr_desc make_desc(uint32_t nkeys, uint32_t flags)
{
	struct tern_mr_desc d = {
		.base = 0x00007f1234560000ULL,
		.len = 16ULL << 20,
		.flags = flags,
		.nkeys = nkeys,
	};

	for (uint32_t i = 0; i < nkeys; i++)
		d.keys[i] = 0xa5a5000000000000ULL ^ ((uint64_t)i << 40) ^
			    (i * 0x10001ULL + 1);
	return d;
}

static void assert_desc_equal(const struct tern_mr_desc *a,
			      const struct tern_mr_desc *b)
{
	assert_true(a->base == b->base);
	assert_true(a->len == b->len);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->nkeys, b->nkeys);
	for (uint32_t i = 0; i < a->nkeys; i++)
		assert_true(a->keys[i] == b->keys[i]);
}

/* Unpack, expecting @want and @out left alone. */
static void desc_refused(const uint8_t *buf, size_t len, int want)
{
	struct tern_mr_desc out = { .nkeys = 99 };
	ssize_t ret = tern_mr_desc_unpack(buf, len, &out);

	if (ret != want)
		fail_msg("descriptor of %zu bytes: %zd, want %d", len, ret,
			 want);
	assert_int_equal(out.nkeys, 99);
}

static void test_desc_round_trip(void **state)
{
	static const uint32_t nkeys[] = { 1, 2, 3, TERN_MAX_RAILS };
	static const uint32_t flags[] = { 0, TERN_MR_DESC_VIRT_ADDR };
	uint8_t buf[TERN_MR_DESC_MAX + 8];

	(void)state;
	assert_int_equal(TERN_MR_DESC_PACKED_SIZE(1), 32);
	assert_int_equal(TERN_MR_DESC_PACKED_SIZE(2), 40);
	assert_int_equal(TERN_MR_DESC_MAX, 24 + 8 * TERN_MAX_RAILS);
	for (size_t k = 0; k < TERN_ARRAY_SIZE(nkeys); k++) {
		for (size_t f = 0; f < TERN_ARRAY_SIZE(flags); f++) {
			struct tern_mr_desc d = make_desc(nkeys[k], flags[f]);
			struct tern_mr_desc out = { 0 };
			size_t need = TERN_MR_DESC_PACKED_SIZE(nkeys[k]);

			/* Exactly the advertised size, no more. */
			assert_int_equal(tern_mr_desc_pack(&d, buf, need),
					 need);
			assert_int_equal(tern_mr_desc_unpack(buf, need, &out),
					 need);
			assert_desc_equal(&d, &out);
			/* Bytes after a descriptor are not consumed. */
			memset(&out, 0, sizeof(out));
			assert_int_equal(
				tern_mr_desc_unpack(buf, need + 8, &out), need);
			assert_desc_equal(&d, &out);
		}
	}
}

/* A region of @len bytes in chunks of 2^@shift on @nkeys rails, its keys
 * distinct (32-bit ones with @key32). */
static struct tern_mr_desc make_chunked(uint32_t nkeys, uint64_t len,
					unsigned int shift, int key32)
{
	struct tern_mr_desc d = {
		.base = 0x00007f0000000000ULL,
		.len = len,
		.flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_WRITE |
			 (shift << 8) | (key32 ? TERN_MR_DESC_KEY32 : 0),
		.nkeys = nkeys,
	};
	uint64_t n = tern__desc_shape(&d);

	assert_true(n != 0);
	for (uint64_t i = 0; i < n; i++)
		tern__desc_set_key(&d, i,
				   key32 ? 0x80000000u + 7 * i
					 : 0xa5a5000000000000ULL + i);
	return d;
}

/* Version 2: every chunk's keys, 8 or 4 bytes each, round trip; the
 * keys are found by offset and rail; one-chunk descriptors stay
 * version 1. */
static void test_desc_chunked(void **state)
{
	struct tern_mr_desc d, out;
	uint8_t buf[TERN_MR_DESC_MAX];
	const uint64_t M = 1ULL << 20;

	(void)state;
	/* 10 chunks of 1 MiB (the last short) on 2 rails: 20 u64 keys. */
	d = make_chunked(2, 10 * M - 5, 20, 0);
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 24 + 20 * 8);
	assert_int_equal(buf[4], 2);
	assert_int_equal(tern_mr_desc_pack(&d, buf, 24 + 20 * 8 - 1), -ENOSPC);
	memset(&out, 0, sizeof(out));
	assert_int_equal(tern_mr_desc_unpack(buf, sizeof(buf), &out),
			 24 + 20 * 8);
	assert_memory_equal(&d, &out, sizeof(d));
	assert_true(tern__desc_key(&out, 3 * M + 1, 1) ==
		    0xa5a5000000000000ULL + 7);
	assert_true(tern__desc_raddr(&out, 3 * M + 1) == d.base + 3 * M + 1);
	out.flags &= ~TERN_MR_DESC_VIRT_ADDR;
	assert_true(tern__desc_raddr(&out, 3 * M + 1) == 1);
	/* Truncated anywhere in its keys: refused. */
	for (size_t n = 24; n < 24 + 20 * 8; n += 7)
		desc_refused(buf, n, -TERN_EDESC);

	/* 64 chunks of 4 KiB on one rail: 64 keys of 32 bits. */
	d = make_chunked(1, 64 * 4096, 12, 1);
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 24 + 64 * 4);
	memset(&out, 0, sizeof(out));
	assert_int_equal(tern_mr_desc_unpack(buf, sizeof(buf), &out),
			 24 + 64 * 4);
	assert_memory_equal(&d, &out, sizeof(d));
	assert_true(tern__desc_key(&out, 63 * 4096, 0) == 0x80000000u + 7 * 63);
	assert_true(tern__desc_key(&out, 4095, 0) == 0x80000000u);

	/* One chunk: version 1, as before. */
	d = make_desc(2, 0);
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)),
			 TERN_MR_DESC_PACKED_SIZE(2));
	assert_int_equal(buf[4], 1);
}

/* What a chunked descriptor may not be, packed or unpacked. */
static void test_desc_chunked_refused(void **state)
{
	struct tern_mr_desc d, bad;
	uint8_t buf[TERN_MR_DESC_MAX];
	ssize_t n;

	(void)state;
	d = make_chunked(2, 10 << 20, 20, 0);
	n = tern_mr_desc_pack(&d, buf, sizeof(buf));
	assert_true(n > 0);
	/* Version 1 knows no chunks; version 2 is nothing else. */
	buf[4] = 1;
	desc_refused(buf, (size_t)n, -TERN_EDESC);
	buf[4] = 3;
	desc_refused(buf, (size_t)n, -TERN_EVERSION);
	buf[4] = 2;
	buf[7] = 0; /* flags' high byte: the chunk size gone */
	desc_refused(buf, (size_t)n, -TERN_EDESC);
	d = make_desc(2, 0);
	n = tern_mr_desc_pack(&d, buf, sizeof(buf));
	buf[4] = 2;
	desc_refused(buf, (size_t)n, -TERN_EDESC);

	/* Shapes pack refuses (and unpack would). */
	d = make_chunked(2, 10 << 20, 20, 0);
	bad = d;
	bad.flags = (bad.flags & ~TERN_MR_DESC_CHUNK_MASK) | (11U << 8);
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
	bad = d;
	bad.flags = (bad.flags & ~TERN_MR_DESC_CHUNK_MASK) | (63U << 8);
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
	bad = d;
	bad.len = 1 << 20; /* one chunk */
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
	bad = d;
	bad.len = 17ULL << 20; /* 34 u64 keys */
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
	bad.flags |= TERN_MR_DESC_KEY32; /* 34 of 32 bits fit */
	assert_true(tern_mr_desc_pack(&bad, buf, sizeof(buf)) > 0);
	bad.len = 33ULL << 20; /* 66 */
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
	bad = make_desc(2, TERN_MR_DESC_KEY32); /* 32-bit, one chunk */
	assert_int_equal(tern_mr_desc_pack(&bad, buf, sizeof(buf)), -EINVAL);
}

static void test_desc_layout(void **state)
{
	struct tern_mr_desc d = {
		.base = 0x1122334455667788ULL,
		.len = 0x8000000000100000ULL,
		.flags = TERN_MR_DESC_VIRT_ADDR,
		.nkeys = 2,
		.keys = { 0x08090a0b0c0d0e0fULL, 0xf0f1f2f3f4f5f6f7ULL },
	};
	uint8_t buf[TERN_MR_DESC_MAX];

	(void)state;
	memset(buf, 0xcc, sizeof(buf));
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 40);
	/* magic "TRMD", version 1, 2 keys, flags VIRT_ADDR (u16) */
	assert_memory_equal(buf, "TRMD\x01\x02\x01\x00", 8);
	/* base, then len, then the keys, each a little-endian u64 */
	assert_memory_equal(buf + 8, "\x88\x77\x66\x55\x44\x33\x22\x11", 8);
	assert_memory_equal(buf + 16, "\x00\x00\x10\x00\x00\x00\x00\x80", 8);
	assert_memory_equal(buf + 24, "\x0f\x0e\x0d\x0c\x0b\x0a\x09\x08", 8);
	assert_memory_equal(buf + 32, "\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0", 8);
	/* Nothing written past the descriptor. */
	assert_int_equal(buf[40], 0xcc);
}

static void test_desc_truncated(void **state)
{
	static const uint32_t nkeys[] = { 1, 3, TERN_MAX_RAILS };
	uint8_t buf[TERN_MR_DESC_MAX];

	(void)state;
	for (size_t k = 0; k < TERN_ARRAY_SIZE(nkeys); k++) {
		struct tern_mr_desc d = make_desc(nkeys[k], 0);
		size_t need = TERN_MR_DESC_PACKED_SIZE(nkeys[k]);

		assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), need);
		for (size_t len = 0; len < need; len++)
			desc_refused(buf, len, -TERN_EDESC);
	}
}

static void test_desc_bad_fields(void **state)
{
	/* Room for one key more than allowed. */
	uint8_t buf[TERN_MR_DESC_PACKED_SIZE(TERN_MAX_RAILS + 1)];
	struct tern_mr_desc d = make_desc(2, TERN_MR_DESC_VIRT_ADDR);
	size_t n = TERN_MR_DESC_PACKED_SIZE(2);

	(void)state;
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < 4; i++) {
		assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), n);
		buf[i] ^= 0x01;
		desc_refused(buf, n, -TERN_EDESC);
	}

	/* No keys (24 bytes agrees with 0 keys). */
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), n);
	buf[5] = 0;
	desc_refused(buf, n, -TERN_EDESC);
	desc_refused(buf, TERN_MR_DESC_PACKED_SIZE(0), -TERN_EDESC);

	/* One key too many, with room for all of them. */
	buf[5] = TERN_MAX_RAILS + 1;
	desc_refused(buf, sizeof(buf), -TERN_EDESC);

	/* Unknown flag bits, low and high. */
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), n);
	tern__wire_put_u16(buf + 6, TERN_MR_DESC_VIRT_ADDR | 0x0010);
	desc_refused(buf, n, -TERN_EDESC);
	tern__wire_put_u16(buf + 6, 0x8000);
	desc_refused(buf, n, -TERN_EDESC);

	/* An empty region. */
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), n);
	tern__wire_put_u64(buf + 16, 0);
	desc_refused(buf, n, -TERN_EDESC);

	/* base + len wraps around. */
	tern__wire_put_u64(buf + 8, UINT64_MAX - 10);
	tern__wire_put_u64(buf + 16, 12);
	desc_refused(buf, n, -TERN_EDESC);
	tern__wire_put_u64(buf + 8, 1);
	tern__wire_put_u64(buf + 16, UINT64_MAX);
	desc_refused(buf, n, -TERN_EDESC);
}

static void test_desc_limits_accepted(void **state)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc d = make_desc(1, 0), out;

	(void)state;
	/* The last byte of the address space is addressable. */
	d.base = UINT64_MAX - 10;
	d.len = 10;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 32);
	assert_int_equal(tern_mr_desc_unpack(buf, 32, &out), 32);
	assert_desc_equal(&d, &out);
	d.base = 0;
	d.len = UINT64_MAX;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), 32);
	assert_int_equal(tern_mr_desc_unpack(buf, 32, &out), 32);
	assert_desc_equal(&d, &out);
}

static void test_desc_version(void **state)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc d = make_desc(2, 0);
	size_t n = TERN_MR_DESC_PACKED_SIZE(2);

	(void)state;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), n);
	assert_int_equal(buf[4], 1);
	/* Version 3 is newer than this tern (2: test_desc_chunked*). */
	buf[4] = 3;
	desc_refused(buf, n, -TERN_EVERSION);
	buf[4] = 0xff;
	desc_refused(buf, n, -TERN_EVERSION);
	/* Version 0 was never valid. */
	buf[4] = 0;
	desc_refused(buf, n, -TERN_EDESC);
}

static void test_desc_pack_refused(void **state)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc d = make_desc(3, TERN_MR_DESC_VIRT_ADDR);
	size_t n = TERN_MR_DESC_PACKED_SIZE(3);

	(void)state;
	assert_int_equal(tern_mr_desc_pack(&d, buf, n - 1), -ENOSPC);
	assert_int_equal(tern_mr_desc_pack(&d, buf, 0), -ENOSPC);
	assert_int_equal(tern_mr_desc_pack(&d, buf, n), n);
	assert_int_equal(tern_mr_desc_pack(NULL, buf, n), -EINVAL);
	assert_int_equal(tern_mr_desc_pack(&d, NULL, n), -EINVAL);
	d.nkeys = 0;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
	d.nkeys = TERN_MAX_RAILS + 1;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
	d.nkeys = 3;
	d.flags = 0x10000;
	assert_int_equal(tern_mr_desc_pack(&d, buf, sizeof(buf)), -EINVAL);
}

static void test_err_from_fi(void **state)
{
	static const int prov[] = {
		FI_EIO,	    FI_EOTHER, FI_EINVAL,	FI_ENOSYS,
		FI_ENODATA, FI_EAVAIL, FI_ECONNREFUSED, FI_EADDRNOTAVAIL,
	};

	(void)state;
	assert_int_equal(tern__err_from_fi(FI_ECANCELED), -ECANCELED);
	assert_int_equal(tern__err_from_fi(FI_ETRUNC), -TERN_ETRUNC);
	assert_int_equal(tern__err_from_fi(FI_EACCES), -TERN_EACCESS);
	assert_int_equal(tern__err_from_fi(FI_EPERM), -TERN_EACCESS);
	assert_int_equal(tern__err_from_fi(FI_ETIMEDOUT), -ETIMEDOUT);
	assert_int_equal(tern__err_from_fi(FI_ENOMEM), -ENOMEM);
	for (size_t i = 0; i < TERN_ARRAY_SIZE(prov); i++) {
		int ret = tern__err_from_fi(prov[i]);

		if (ret != -TERN_EPROV)
			fail_msg("FI error %d: %d, want -TERN_EPROV", prov[i],
				 ret);
	}
}

/* Version 2: the same-host part round-trips; a truncated, short or
 * mislabelled one is refused with a reason; local_len 0 is no part. */
static void test_card_local(void **state)
{
	struct tern__card_local l = { .userns = 0x1122334455667788ULL,
				      .start = 987654321,
				      .inbox_ino = 42,
				      .nonce = 0xdeadbeefcafef00dULL,
				      .uid = 1000,
				      .pid = 4242,
				      .inbox_fd = 7,
				      .wake_fd = 9 };
	struct tern__card c = { .nrails = 2,
				.addrlen = 24,
				.addr_format = ADDR_FORMAT,
				.addrs = addrs,
				.local = &l };
	struct tern__card out = { 0 };
	char why[128] = "";
	size_t base = TERN_CARD_HDR + 2 * 24;
	ssize_t n;

	(void)state;
	for (int i = 0; i < 16; i++)
		l.boot[i] = (uint8_t)(i * 17);
	fill_addrs(2, 24);
	n = tern__card_pack(&c, card_buf, sizeof(card_buf));
	assert_int_equal(n, base + 2 + TERN_CARD_LOCAL_LEN);
	assert_int_equal(card_buf[4], TERN_CARD_VERSION_LOCAL);
	assert_int_equal(
		tern__card_parse(card_buf, (size_t)n, &out, why, sizeof(why)),
		0);
	assert_non_null(out.local);
	assert_memory_equal(out.local->boot, l.boot, 16);
	assert_true(out.local->userns == l.userns &&
		    out.local->start == l.start &&
		    out.local->inbox_ino == l.inbox_ino &&
		    out.local->nonce == l.nonce && out.local->uid == l.uid &&
		    out.local->pid == l.pid && out.local->inbox_fd == 7 &&
		    out.local->wake_fd == 9);
	assert_memory_equal(out.addrs, addrs, 2 * 24);
	/* Every shorter length is refused. */
	for (size_t len = 0; len < (size_t)n; len++)
		card_refused(card_buf, len);
	/* A bad magic in the same-host part. */
	card_buf[base + 2] ^= 0xff;
	card_refused(card_buf, (size_t)n);
	card_buf[base + 2] ^= 0xff;
	/* A part shorter than 68 bytes that says so. */
	tern__wire_put_u16(card_buf + base, 10);
	card_refused(card_buf, base + 2 + 10);
	/* local_len 0: a version 2 card without the part. */
	tern__wire_put_u16(card_buf + base, 0);
	memset(&out, 0, sizeof(out));
	assert_int_equal(
		tern__card_parse(card_buf, base + 2, &out, why, sizeof(why)),
		0);
	assert_null(out.local);
	/* A longer part from a later tern: its first 68 bytes are read. */
	n = tern__card_pack(&c, card_buf, sizeof(card_buf));
	tern__wire_put_u16(card_buf + base, TERN_CARD_LOCAL_LEN + 8);
	memset(card_buf + n, 0xab, 8);
	assert_int_equal(tern__card_parse(card_buf, (size_t)n + 8, &out, why,
					  sizeof(why)),
			 0);
	assert_true(out.local != NULL && out.local->pid == 4242);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_card_round_trip),
		cmocka_unit_test(test_card_truncated),
		cmocka_unit_test(test_card_local),
		cmocka_unit_test(test_card_trailing),
		cmocka_unit_test(test_card_bad_header),
		cmocka_unit_test(test_card_pack_refused),
		cmocka_unit_test(test_card_parse_too_big),
		cmocka_unit_test(test_desc_pack_refuses_invalid),
		cmocka_unit_test(test_desc_round_trip),
		cmocka_unit_test(test_desc_layout),
		cmocka_unit_test(test_desc_chunked),
		cmocka_unit_test(test_desc_chunked_refused),
		cmocka_unit_test(test_desc_truncated),
		cmocka_unit_test(test_desc_bad_fields),
		cmocka_unit_test(test_desc_limits_accepted),
		cmocka_unit_test(test_desc_version),
		cmocka_unit_test(test_desc_pack_refused),
		cmocka_unit_test(test_err_from_fi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
