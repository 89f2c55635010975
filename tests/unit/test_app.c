/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the app layer's pure codecs: the HELLO rendezvous message
 * and the ping parameters it carries. Both decoders read bytes straight
 * from a peer, so besides round trips every malformed shape must be refused
 * with the output left untouched.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include <tern/tern.h>

#include "apps/app.h"
#include "core/core.h"

/* The HELLO header, written out here so the tests check the layout. */
#define HDR	       20
#define OFF_VERSION    4
#define OFF_KIND       6
#define OFF_TOTAL      8
#define OFF_CARD_LEN   12
#define OFF_DESC_LEN   14
#define OFF_PARAMS_LEN 16

/* Room for the largest HELLO and a guard byte past it. */
#define HELLO_BUF \
	(HDR + TERN_CARD_MAX + TERN_MR_DESC_MAX + APP_HELLO_PARAMS + 1)

#define POISON 0xee

/* The valid HELLO the refusal tests start from. */
#define BASE_CARD   37
#define BASE_KEYS   3
#define BASE_DESC   TERN_MR_DESC_PACKED_SIZE(BASE_KEYS)
#define BASE_PARAMS 20
#define BASE_LEN    (HDR + BASE_CARD + BASE_DESC + BASE_PARAMS)

#define PING_BUF (16 + 4 * (APP_PING_MAX_SIZES + 1))

static uint8_t card[TERN_CARD_MAX + 1];
static uint8_t params[APP_HELLO_PARAMS + 1];
static uint8_t buf[HELLO_BUF];
static uint8_t work[HELLO_BUF];

/* Little-endian readers and writers of our own, independent of core.h. */
static uint32_t le16(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const uint8_t *p)
{
	return le16(p) | le16(p + 2) << 16;
}

static void set_le16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void set_le32(uint8_t *p, uint32_t v)
{
	set_le16(p, v);
	set_le16(p + 2, v >> 16);
}

/* The most bytes arrive() hands a decoder: a HELLO and 64 KiB past it. */
#define ARRIVE_MAX (HELLO_BUF + 0x10000)

/*
 * Bytes as a peer sent them: copied to the very end of a readable mapping
 * whose next page is inaccessible, so that a decoder reading one byte past
 * what arrived faults even without a sanitizer.
 */
static const uint8_t *arrive(const void *b, size_t len)
{
	static uint8_t *map;
	static size_t room;

	if (map == NULL) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		void *m;

		room = (ARRIVE_MAX + page - 1) / page * page;
		m = mmap(NULL, room + page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(m != MAP_FAILED);
		map = m;
		assert_int_equal(mprotect(map + room, page, PROT_NONE), 0);
	}
	assert_true(len <= room);
	memcpy(map + room - len, b, len);
	return map + room - len;
}

static void fill_pattern(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

static struct tern_mr_desc make_desc(uint32_t nkeys)
{
	struct tern_mr_desc d = {
		.base = 0x00007f0012340000ull,
		.len = 1ull << 20,
		.flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_WRITE,
		.nkeys = nkeys,
	};

	for (uint32_t i = 0; i < nkeys; i++)
		d.keys[i] = 0x0101010101010101ull * (i + 1) ^ 0xabcdull;
	return d;
}

static void assert_desc_equal(const struct tern_mr_desc *got,
			      const struct tern_mr_desc *want)
{
	assert_int_equal(got->base, want->base);
	assert_int_equal(got->len, want->len);
	assert_int_equal(got->flags, want->flags);
	assert_int_equal(got->nkeys, want->nkeys);
	for (uint32_t i = 0; i < want->nkeys; i++)
		assert_int_equal(got->keys[i], want->keys[i]);
}

/*
 * Encode @h into buf, check every header byte and section, decode it and
 * check every field and that the pointers land inside buf where they
 * should. @return the encoded length.
 */
static size_t round_trip(const struct app_hello *h)
{
	uint8_t dbuf[TERN_MR_DESC_MAX];
	size_t dlen = 0, want;
	struct app_hello out;
	ssize_t n;

	if (h->has_desc) {
		n = tern_mr_desc_pack(&h->desc, dbuf, sizeof(dbuf));
		assert_true(n > 0);
		dlen = (size_t)n;
	}
	want = HDR + h->card_len + dlen + h->params_len;
	memset(buf, POISON, sizeof(buf));
	n = app_hello_encode(buf, sizeof(buf), h);
	assert_int_equal(n, want);
	assert_memory_equal(buf, "TRHL", 4);
	assert_int_equal(le16(buf + OFF_VERSION), APP_HELLO_VERSION);
	assert_int_equal(le16(buf + OFF_KIND), h->kind);
	assert_int_equal(le32(buf + OFF_TOTAL), want);
	assert_int_equal(le16(buf + OFF_CARD_LEN), h->card_len);
	assert_int_equal(le16(buf + OFF_DESC_LEN), dlen);
	assert_int_equal(le32(buf + OFF_PARAMS_LEN), h->params_len);
	if (h->card_len != 0)
		assert_memory_equal(buf + HDR, h->card, h->card_len);
	if (dlen != 0)
		assert_memory_equal(buf + HDR + h->card_len, dbuf, dlen);
	if (h->params_len != 0)
		assert_memory_equal(buf + HDR + h->card_len + dlen, h->params,
				    h->params_len);
	assert_int_equal(buf[want], POISON);

	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(app_hello_decode(buf, want, &out), 0);
	assert_int_equal(out.kind, h->kind);
	assert_ptr_equal(out.card, buf + HDR);
	assert_int_equal(out.card_len, h->card_len);
	if (h->card_len != 0)
		assert_memory_equal(out.card, h->card, h->card_len);
	assert_int_equal(out.has_desc, h->has_desc ? 1 : 0);
	if (h->has_desc)
		assert_desc_equal(&out.desc, &h->desc);
	assert_ptr_equal(out.params, buf + HDR + h->card_len + dlen);
	assert_int_equal(out.params_len, h->params_len);
	if (h->params_len != 0)
		assert_memory_equal(out.params, h->params, h->params_len);
	return want;
}

static void test_hello_round_trip_ping(void **state)
{
	struct app_ping_params pp = {
		.mode = APP_PING_SEND,
		.iters = 1000,
		.warmup = 10,
		.nsizes = 3,
		.sizes = { 8, 4096, 1 << 20 },
	};
	struct app_hello h = {
		.kind = APP_HELLO_PING,
		.card = card,
		.card_len = 200,
		.has_desc = 1,
		.desc = make_desc(4),
		.params = params,
	};
	ssize_t n;

	(void)state;
	fill_pattern(card, sizeof(card), 1);
	n = app_ping_params_encode(&pp, params, sizeof(params));
	assert_int_equal(n, 16 + 4 * 3);
	h.params_len = (size_t)n;
	assert_int_equal(round_trip(&h), HDR + 200 + 24 + 8 * 4 + 28);
}

static void test_hello_round_trip_ack(void **state)
{
	struct app_hello h = {
		.kind = APP_HELLO_ACK,
		.has_desc = 1,
		.desc = make_desc(2),
	};

	(void)state;
	h.desc.flags = TERN_MR_DESC_REMOTE_READ | TERN_MR_DESC_REMOTE_ATOMIC;
	assert_int_equal(round_trip(&h), HDR + 24 + 8 * 2);
}

static void test_hello_round_trip_error(void **state)
{
	static const char reason[] = "ping mode 7 is not one this server runs";
	struct app_hello h = {
		.kind = APP_HELLO_ERROR,
		.params = (const uint8_t *)reason,
		.params_len = sizeof(reason) - 1,
	};

	(void)state;
	assert_int_equal(round_trip(&h), HDR + sizeof(reason) - 1);
}

static void test_hello_round_trip_atomic(void **state)
{
	struct app_hello h = {
		.kind = APP_HELLO_ATOMIC,
		.card = card,
		.card_len = 61,
	};

	(void)state;
	fill_pattern(card, sizeof(card), 2);
	assert_int_equal(round_trip(&h), HDR + 61);
}

static void test_hello_round_trip_bye(void **state)
{
	struct app_hello h = { .kind = APP_HELLO_BYE };

	(void)state;
	assert_int_equal(round_trip(&h), HDR);
}

/* The codec itself does not tie sections to kinds: every kind carries all. */
static void test_hello_round_trip_every_kind(void **state)
{
	struct app_hello h = {
		.card = card,
		.card_len = 12,
		.has_desc = 1,
		.desc = make_desc(1),
		.params = params,
		.params_len = 9,
	};

	(void)state;
	fill_pattern(card, sizeof(card), 7);
	fill_pattern(params, sizeof(params), 8);
	for (uint16_t k = APP_HELLO_PING; k <= APP_HELLO_KIND_MAX; k++) {
		h.kind = k;
		assert_int_equal(round_trip(&h), HDR + 12 + 24 + 8 + 9);
	}
}

/* Every section at its largest is still accepted. */
static void test_hello_round_trip_limits(void **state)
{
	struct app_hello h = {
		.kind = APP_HELLO_PING,
		.card = card,
		.card_len = TERN_CARD_MAX,
		.has_desc = 1,
		.desc = make_desc(TERN_MAX_RAILS),
		.params = params,
		.params_len = APP_HELLO_PARAMS,
	};

	(void)state;
	fill_pattern(card, sizeof(card), 3);
	fill_pattern(params, sizeof(params), 4);
	assert_int_equal(round_trip(&h), HELLO_BUF - 1);
}

/* Encode the base HELLO (card, 3-key descriptor, params) into buf. */
static size_t base_hello(void)
{
	struct app_hello h = {
		.kind = APP_HELLO_PING,
		.card = card,
		.card_len = BASE_CARD,
		.has_desc = 1,
		.desc = make_desc(BASE_KEYS),
		.params = params,
		.params_len = BASE_PARAMS,
	};
	ssize_t n;

	fill_pattern(card, sizeof(card), 5);
	fill_pattern(params, sizeof(params), 6);
	memset(buf, 0, sizeof(buf));
	n = app_hello_encode(buf, sizeof(buf), &h);
	assert_int_equal(n, BASE_LEN);
	return (size_t)n;
}

/*
 * Decode @len bytes of @b as they arrived, expecting a refusal that leaves
 * the output alone. @return what decode returned.
 */
static int hello_refused(const uint8_t *b, size_t len)
{
	uint8_t before[sizeof(struct app_hello)];
	struct app_hello h;
	int ret;

	memset(&h, 0x5c, sizeof(h));
	memset(before, 0x5c, sizeof(before));
	ret = app_hello_decode(arrive(b, len), len, &h);
	if (ret >= 0)
		fail_msg("HELLO of %zu bytes accepted (%d)", len, ret);
	assert_memory_equal(&h, before, sizeof(h));
	return ret;
}

static void test_hello_truncated(void **state)
{
	size_t n;

	(void)state;
	n = base_hello();
	for (size_t len = 0; len < n; len++)
		hello_refused(buf, len);
	/* Again with the total-length field agreeing with the truncation, so
	 * that the section lengths themselves must catch it. */
	for (size_t len = HDR; len < n; len++) {
		memcpy(work, buf, n);
		set_le32(work + OFF_TOTAL, (uint32_t)len);
		hello_refused(work, len);
	}
}

static void test_hello_trailing(void **state)
{
	static uint8_t trail[BASE_LEN + 0x10000];
	size_t n;

	(void)state;
	n = base_hello();
	memcpy(work, buf, n);
	work[n] = 0;
	hello_refused(work, n + 1);
	set_le32(work + OFF_TOTAL, (uint32_t)(n + 1));
	hello_refused(work, n + 1);
	/* 64 KiB of trailer: the lengths agree with the total modulo 2^16. */
	memset(trail, 0, sizeof(trail));
	memcpy(trail, buf, n);
	set_le32(trail + OFF_TOTAL, (uint32_t)(n + 0x10000));
	hello_refused(trail, n + 0x10000);
}

static void test_hello_bad_magic(void **state)
{
	size_t n;

	(void)state;
	n = base_hello();
	for (int i = 0; i < 4; i++) {
		memcpy(work, buf, n);
		work[i] ^= 0x20;
		assert_int_equal(hello_refused(work, n), -TERN_EPROTO);
	}
	memcpy(work, buf, n);
	memcpy(work, "LHRT", 4);
	assert_int_equal(hello_refused(work, n), -TERN_EPROTO);
}

static void test_hello_bad_version(void **state)
{
	static const uint32_t versions[] = { 0, APP_HELLO_VERSION + 1, 0x0100,
					     0xffff };
	size_t n;

	(void)state;
	n = base_hello();
	for (size_t i = 0; i < TERN_ARRAY_SIZE(versions); i++) {
		memcpy(work, buf, n);
		set_le16(work + OFF_VERSION, versions[i]);
		assert_int_equal(hello_refused(work, n), -TERN_EVERSION);
	}
}

static void test_hello_bad_kind(void **state)
{
	static const uint32_t kinds[] = { 0, APP_HELLO_KIND_MAX + 1, 0x0100,
					  0xffff };
	size_t n;

	(void)state;
	n = base_hello();
	for (size_t i = 0; i < TERN_ARRAY_SIZE(kinds); i++) {
		memcpy(work, buf, n);
		set_le16(work + OFF_KIND, kinds[i]);
		assert_int_equal(hello_refused(work, n), -TERN_EPROTO);
	}
}

static void test_hello_bad_total(void **state)
{
	static const int64_t delta[] = { -1, 1, -(int64_t)BASE_LEN, 0x10000,
					 0x100000000ll - BASE_LEN - 1 };
	size_t n;

	(void)state;
	n = base_hello();
	for (size_t i = 0; i < TERN_ARRAY_SIZE(delta); i++) {
		memcpy(work, buf, n);
		set_le32(work + OFF_TOTAL, (uint32_t)((int64_t)n + delta[i]));
		assert_int_equal(hello_refused(work, n), -TERN_EPROTO);
	}
}

/* Patch the three section lengths of the base HELLO and decode. */
static int sections_refused(uint32_t card_len, uint32_t desc_len,
			    uint32_t params_len)
{
	memcpy(work, buf, BASE_LEN);
	set_le16(work + OFF_CARD_LEN, card_len);
	set_le16(work + OFF_DESC_LEN, desc_len);
	set_le32(work + OFF_PARAMS_LEN, params_len);
	return hello_refused(work, BASE_LEN);
}

static void test_hello_bad_sections(void **state)
{
	const uint32_t c = BASE_CARD, d = BASE_DESC, p = BASE_PARAMS;

	(void)state;
	base_hello();
	/* Each one too large on its own: the sum disagrees with the total. */
	sections_refused(0xffff, d, p);
	sections_refused(c, 0xffff, p);
	sections_refused(c, d, 0xffffffffu);
	sections_refused(c, d, 0x80000000u);
	sections_refused(c + 1, d, p);
	sections_refused(c, d + 1, p); /* the descriptor runs past the end */
	sections_refused(c, d, p + 1);
	sections_refused(c - 1, d, p);
	sections_refused(c, d - 1, p);
	sections_refused(c, d, p - 1);
	/* The sum still matches the total, but the sections are misplaced. */
	sections_refused(c + 1, d, p - 1); /* descriptor read one byte late */
	sections_refused(c - 1, d + 1, p); /* descriptor read one byte early */
	sections_refused(c, d + 8, p - 8); /* room for a key that is not */
	sections_refused(c, d - 8, p + 8); /* the descriptor cut short */
	sections_refused(c, d + p, 0);	   /* params inside the descriptor */
	sections_refused(c, 23, p + d - 23); /* shorter than any descriptor */
}

/* Limits with a consistent total: the decoder must refuse on the limit. */
static void test_hello_over_limits(void **state)
{
	static const uint32_t sec[][3] = {
		{ TERN_CARD_MAX + 1, 0, 0 },
		{ 0, TERN_MR_DESC_MAX + 8, 0 },
		{ 0, 0, APP_HELLO_PARAMS + 1 },
	};
	static uint8_t big[HDR + TERN_CARD_MAX + TERN_MR_DESC_MAX +
			   APP_HELLO_PARAMS + 16];

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(sec); i++) {
		size_t len = HDR + sec[i][0] + sec[i][1] + sec[i][2];

		memset(big, 0, sizeof(big));
		memcpy(big, "TRHL", 4);
		set_le16(big + OFF_VERSION, APP_HELLO_VERSION);
		set_le16(big + OFF_KIND, APP_HELLO_PING);
		set_le32(big + OFF_TOTAL, (uint32_t)len);
		set_le16(big + OFF_CARD_LEN, sec[i][0]);
		set_le16(big + OFF_DESC_LEN, sec[i][1]);
		set_le32(big + OFF_PARAMS_LEN, sec[i][2]);
		if (sec[i][1] != 0) {
			/* A well-formed descriptor with more keys than any
			 * ctx has rails. */
			struct tern_mr_desc d = make_desc(TERN_MAX_RAILS);

			assert_int_equal(
				tern_mr_desc_pack(&d, big + HDR, sizeof(big)),
				TERN_MR_DESC_MAX);
			big[HDR + 5] = TERN_MAX_RAILS + 1;
		}
		assert_int_equal(hello_refused(big, len), -TERN_EPROTO);
	}
}

static void test_hello_bad_desc(void **state)
{
	const size_t at = HDR + BASE_CARD;
	size_t n;
	int ret;

	(void)state;
	n = base_hello();
	/* Wrong magic, each byte of it. */
	for (size_t i = 0; i < 4; i++) {
		memcpy(work, buf, n);
		work[at + i] ^= 0x01;
		ret = hello_refused(work, n);
		assert_int_equal(ret, -TERN_EDESC);
	}
	/* A newer descriptor version, no keys, more keys than the section
	 * holds, unknown flags, a zero length, base + len overflowing. */
	memcpy(work, buf, n);
	work[at + 4] += 1;
	hello_refused(work, n);
	memcpy(work, buf, n);
	work[at + 5] = 0;
	hello_refused(work, n);
	memcpy(work, buf, n);
	work[at + 5] = BASE_KEYS + 1;
	hello_refused(work, n);
	memcpy(work, buf, n);
	work[at + 5] = BASE_KEYS - 1;
	hello_refused(work, n);
	memcpy(work, buf, n);
	work[at + 7] = 0x80;
	hello_refused(work, n);
	memcpy(work, buf, n);
	memset(work + at + 16, 0, 8);
	hello_refused(work, n);
	memcpy(work, buf, n);
	memset(work + at + 8, 0xff, 8);
	hello_refused(work, n);
}

/* Encode refusals write nothing. */
static void encode_refused(const struct app_hello *h, size_t cap, int want)
{
	ssize_t n;

	memset(work, POISON, sizeof(work));
	n = app_hello_encode(work, cap, h);
	if (n != want)
		fail_msg("encode into %zu bytes: %zd, want %d", cap, n, want);
	for (size_t i = 0; i < sizeof(work); i++)
		assert_int_equal(work[i], POISON);
}

static void test_hello_encode_refused(void **state)
{
	struct app_hello h = {
		.kind = APP_HELLO_PING,
		.card = card,
		.card_len = BASE_CARD,
		.has_desc = 1,
		.desc = make_desc(BASE_KEYS),
		.params = params,
		.params_len = BASE_PARAMS,
	};

	(void)state;
	encode_refused(&h, BASE_LEN - 1, -ENOSPC);
	encode_refused(&h, HDR, -ENOSPC);
	encode_refused(&h, 0, -ENOSPC);
	assert_int_equal(app_hello_encode(work, BASE_LEN, &h), BASE_LEN);

	h.card_len = TERN_CARD_MAX + 1;
	encode_refused(&h, sizeof(work), -EINVAL);
	h.card_len = 0xffff;
	encode_refused(&h, sizeof(work), -EINVAL);
	h.card_len = BASE_CARD;
	h.params_len = APP_HELLO_PARAMS + 1;
	encode_refused(&h, sizeof(work), -EINVAL);
	h.params_len = (size_t)UINT32_MAX + 1;
	encode_refused(&h, sizeof(work), -EINVAL);
	h.params_len = BASE_PARAMS;
	/* A descriptor the decoder would refuse is not sent either. */
	h.desc.nkeys = 0;
	encode_refused(&h, sizeof(work), -EINVAL);
	h.desc.nkeys = TERN_MAX_RAILS + 1;
	encode_refused(&h, sizeof(work), -EINVAL);
}

/* Does a successful decode stay inside [b, b + len)? */
static void check_accepted(const uint8_t *b, size_t len,
			   const struct app_hello *h, uint64_t iter)
{
	const uint8_t *end = b + len;

	if (h->card != b + HDR || h->card_len > TERN_CARD_MAX ||
	    h->card_len > len - HDR || h->card + h->card_len > end ||
	    h->params < h->card + h->card_len || h->params > end ||
	    h->params_len > APP_HELLO_PARAMS ||
	    h->params_len > (size_t)(end - h->params) ||
	    h->params + h->params_len != end)
		fail_msg("iteration %llu: accepted %zu bytes with card %zu+%zu "
			 "params %zu+%zu",
			 (unsigned long long)iter, len, (size_t)(h->card - b),
			 h->card_len, (size_t)(h->params - b), h->params_len);
	if (h->kind < APP_HELLO_PING || h->kind > APP_HELLO_KIND_MAX)
		fail_msg("iteration %llu: accepted kind %u",
			 (unsigned long long)iter, h->kind);
	if (h->has_desc &&
	    (h->desc.nkeys == 0 || h->desc.nkeys > TERN_MAX_RAILS ||
	     h->desc.len == 0 || h->desc.base + h->desc.len < h->desc.base))
		fail_msg("iteration %llu: accepted a bad descriptor",
			 (unsigned long long)iter);
}

#define FUZZ_ITERS 20000

/*
 * Mutate the base HELLO at random: flip bytes anywhere or in the headers,
 * write random values into the length fields, sometimes cut or extend it.
 * Decoding must never crash or read outside what arrived, and anything it
 * accepts must be consistent.
 */
static void test_hello_fuzz(void **state)
{
	static const size_t fields[] = { OFF_TOTAL, OFF_CARD_LEN, OFF_DESC_LEN,
					 OFF_PARAMS_LEN };
	static struct tern_mt64 rng;
	unsigned int accepted = 0, refused = 0;
	uint8_t orig[BASE_LEN];

	(void)state;
	base_hello();
	memcpy(orig, buf, BASE_LEN);
	tern_mt64_seed(&rng, 20000);
	for (uint64_t it = 0; it < FUZZ_ITERS; it++) {
		uint64_t r = tern_mt64_next(&rng);
		unsigned int nmut = 1 + (unsigned int)(r % 4);
		size_t len = BASE_LEN;
		struct app_hello h;
		const uint8_t *b;
		int ret;

		memcpy(work, orig, BASE_LEN);
		work[BASE_LEN] = (uint8_t)(r >> 56);
		for (unsigned int m = 0; m < nmut; m++) {
			uint64_t x = tern_mt64_next(&rng);
			uint8_t flip = (uint8_t)(x >> 8) != 0
					       ? (uint8_t)(x >> 8)
					       : 0xff;
			uint32_t v = (uint32_t)(x >> 32);
			size_t at;

			if ((x >> 20) % 2 == 0)
				v %= BASE_LEN + 2;
			switch (x % 4) {
			case 0: /* anywhere */
				at = (size_t)(x >> 16) % BASE_LEN;
				work[at] ^= flip;
				break;
			case 1: /* the HELLO or the descriptor header */
				at = (size_t)(x >> 16) % (HDR + 24);
				if (at >= HDR)
					at += BASE_CARD;
				work[at] ^= flip;
				break;
			case 2: /* a length field: a small or a wild value */
				at = fields[(x >> 16) % 4];
				if (at == OFF_CARD_LEN || at == OFF_DESC_LEN)
					set_le16(work + at, v);
				else
					set_le32(work + at, v);
				break;
			default: /* cut it, or add the extra byte */
				len = (size_t)(x >> 16) % (BASE_LEN + 2);
				break;
			}
		}
		b = arrive(work, len);
		memset(&h, 0, sizeof(h));
		ret = app_hello_decode(b, len, &h);
		if (ret == 0) {
			check_accepted(b, len, &h, it);
			accepted++;
		} else if (ret > 0) {
			fail_msg("iteration %llu: decode returned %d",
				 (unsigned long long)it, ret);
		} else {
			refused++;
		}
	}
	/* The loop exercised both outcomes. */
	assert_true(accepted > FUZZ_ITERS / 50);
	assert_true(refused > FUZZ_ITERS / 2);
}

/* --- ping parameters --------------------------------------------------- */

static void ping_round_trip(const struct app_ping_params *p)
{
	uint8_t b[PING_BUF + 1];
	struct app_ping_params out;
	char why[128] = "";
	size_t want = 16 + 4 * (size_t)p->nsizes;
	ssize_t n;

	memset(b, POISON, sizeof(b));
	n = app_ping_params_encode(p, b, want);
	assert_int_equal(n, want);
	assert_int_equal(b[want], POISON);
	assert_int_equal(le32(b), p->mode);
	assert_int_equal(le32(b + 4), p->iters);
	assert_int_equal(le32(b + 8), p->warmup);
	assert_int_equal(le32(b + 12), p->nsizes);
	for (uint32_t i = 0; i < p->nsizes; i++)
		assert_int_equal(le32(b + 16 + 4 * i), p->sizes[i]);

	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(
		app_ping_params_decode(b, want, &out, why, sizeof(why)), 0);
	assert_int_equal(out.mode, p->mode);
	assert_int_equal(out.iters, p->iters);
	assert_int_equal(out.warmup, p->warmup);
	assert_int_equal(out.nsizes, p->nsizes);
	for (uint32_t i = 0; i < p->nsizes; i++)
		assert_int_equal(out.sizes[i], p->sizes[i]);
}

static void test_ping_round_trip_one(void **state)
{
	struct app_ping_params p = {
		.mode = APP_PING_SEND,
		.iters = 1000,
		.warmup = 0,
		.nsizes = 1,
		.sizes = { 4096 },
	};

	(void)state;
	ping_round_trip(&p);
}

static void test_ping_round_trip_max(void **state)
{
	struct app_ping_params p = {
		.mode = APP_PING_WRITE,
		.iters = APP_PING_MAX_ITERS,
		.warmup = APP_PING_MAX_ITERS,
		.nsizes = APP_PING_MAX_SIZES,
	};

	(void)state;
	for (uint32_t i = 0; i < APP_PING_MAX_SIZES; i++)
		p.sizes[i] = 1u << (i % 25);
	p.sizes[0] = 1;
	p.sizes[APP_PING_MAX_SIZES - 1] = APP_PING_MAX_SIZE;
	ping_round_trip(&p);
	p.iters = 1;
	ping_round_trip(&p);
}

/* A valid encoding of @nsizes sizes, for the refusal tests to spoil. */
static size_t ping_valid(uint8_t *b, uint32_t nsizes)
{
	set_le32(b, APP_PING_SEND);
	set_le32(b + 4, 100);
	set_le32(b + 8, 5);
	set_le32(b + 12, nsizes);
	for (uint32_t i = 0; i < nsizes; i++)
		set_le32(b + 16 + 4 * i, 64u << (i % 10));
	return 16 + 4 * (size_t)nsizes;
}

/*
 * Decode expecting a refusal whose reason contains @needle, with the
 * output left alone.
 */
static void ping_refused(const uint8_t *b, size_t len, const char *needle)
{
	uint8_t before[sizeof(struct app_ping_params)];
	struct app_ping_params p;
	char why[128] = "";
	int ret;

	memset(&p, 0x5c, sizeof(p));
	memset(before, 0x5c, sizeof(before));
	ret = app_ping_params_decode(arrive(b, len), len, &p, why, sizeof(why));
	if (ret >= 0)
		fail_msg("ping params of %zu bytes accepted (%d)", len, ret);
	if (why[0] == '\0' || strstr(why, needle) == NULL)
		fail_msg("reason \"%s\" does not name \"%s\"", why, needle);
	assert_memory_equal(&p, before, sizeof(p));
}

static void test_ping_refused_length(void **state)
{
	uint8_t b[PING_BUF];
	size_t n;

	(void)state;
	n = ping_valid(b, 3);
	for (size_t len = 0; len < 16; len++)
		ping_refused(b, len, "truncated");
	for (size_t len = 16; len < n; len++) {
		char want[64];

		snprintf(want, sizeof(want), "3 sizes in %zu bytes", len);
		ping_refused(b, len, want);
	}
	/* One size too many, and nsizes claiming one too few or too many. */
	n = ping_valid(b, 4);
	set_le32(b + 12, 3);
	ping_refused(b, n, "3 sizes in 32 bytes");
	set_le32(b + 12, 5);
	ping_refused(b, n, "5 sizes in 32 bytes");
}

static void test_ping_refused_nsizes(void **state)
{
	uint8_t b[PING_BUF];
	size_t n;

	(void)state;
	n = ping_valid(b, 0);
	ping_refused(b, n, "0 sizes");
	n = ping_valid(b, APP_PING_MAX_SIZES + 1);
	ping_refused(b, n, "65 sizes");
	n = ping_valid(b, 1);
	set_le32(b + 12, 0xffffffffu);
	ping_refused(b, n, "4294967295 sizes");
	/* 16 + 4 * nsizes wraps to 16 in 32 bits. */
	set_le32(b + 12, 0x40000000u);
	ping_refused(b, 16, "1073741824 sizes");
}

static void test_ping_refused_mode(void **state)
{
	uint8_t b[PING_BUF];
	size_t n;

	(void)state;
	n = ping_valid(b, 2);
	set_le32(b, 0);
	ping_refused(b, n, "mode 0");
	set_le32(b, 3);
	ping_refused(b, n, "mode 3");
	set_le32(b, 0xffffffffu);
	ping_refused(b, n, "mode 4294967295");
}

static void test_ping_refused_iters(void **state)
{
	uint8_t b[PING_BUF];
	size_t n;

	(void)state;
	n = ping_valid(b, 2);
	set_le32(b + 4, 0);
	ping_refused(b, n, "iterations 0");
	set_le32(b + 4, APP_PING_MAX_ITERS + 1);
	ping_refused(b, n, "iterations 10000001");
	set_le32(b + 4, 0xffffffffu);
	ping_refused(b, n, "iterations 4294967295");
	n = ping_valid(b, 2);
	set_le32(b + 8, APP_PING_MAX_ITERS + 1);
	ping_refused(b, n, "warm-up 10000001");
	set_le32(b + 8, 0xffffffffu);
	ping_refused(b, n, "warm-up 4294967295");
}

static void test_ping_refused_size(void **state)
{
	static const uint32_t bad[] = { 0, APP_PING_MAX_SIZE + 1, 0xffffffffu };
	static const uint32_t where[] = { 0, 1, APP_PING_MAX_SIZES - 1 };

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
		for (size_t j = 0; j < TERN_ARRAY_SIZE(where); j++) {
			uint8_t b[PING_BUF];
			char want[32];
			size_t n = ping_valid(b, APP_PING_MAX_SIZES);

			set_le32(b + 16 + 4 * where[j], bad[i]);
			snprintf(want, sizeof(want), "size %u ", bad[i]);
			ping_refused(b, n, want);
		}
	}
}

static void test_ping_encode_refused(void **state)
{
	struct app_ping_params p = {
		.mode = APP_PING_SEND,
		.iters = 10,
		.nsizes = 2,
		.sizes = { 1, 2 },
	};
	uint8_t b[PING_BUF];

	(void)state;
	memset(b, POISON, sizeof(b));
	assert_int_equal(app_ping_params_encode(&p, b, 23), -ENOSPC);
	assert_int_equal(app_ping_params_encode(&p, b, 16), -ENOSPC);
	assert_int_equal(app_ping_params_encode(&p, b, 0), -ENOSPC);
	p.nsizes = APP_PING_MAX_SIZES;
	assert_int_equal(app_ping_params_encode(&p, b, 16 + 4 * 64 - 1),
			 -ENOSPC);
	p.nsizes = APP_PING_MAX_SIZES + 1;
	assert_int_equal(app_ping_params_encode(&p, b, sizeof(b)), -EINVAL);
	p.nsizes = 0xffffffffu;
	assert_int_equal(app_ping_params_encode(&p, b, sizeof(b)), -EINVAL);
	for (size_t i = 0; i < sizeof(b); i++)
		assert_int_equal(b[i], POISON);
	p.nsizes = 2;
	assert_int_equal(app_ping_params_encode(&p, b, 24), 24);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_round_trip_ping),
		cmocka_unit_test(test_hello_round_trip_ack),
		cmocka_unit_test(test_hello_round_trip_error),
		cmocka_unit_test(test_hello_round_trip_atomic),
		cmocka_unit_test(test_hello_round_trip_bye),
		cmocka_unit_test(test_hello_round_trip_every_kind),
		cmocka_unit_test(test_hello_round_trip_limits),
		cmocka_unit_test(test_hello_truncated),
		cmocka_unit_test(test_hello_trailing),
		cmocka_unit_test(test_hello_bad_magic),
		cmocka_unit_test(test_hello_bad_version),
		cmocka_unit_test(test_hello_bad_kind),
		cmocka_unit_test(test_hello_bad_total),
		cmocka_unit_test(test_hello_bad_sections),
		cmocka_unit_test(test_hello_over_limits),
		cmocka_unit_test(test_hello_bad_desc),
		cmocka_unit_test(test_hello_encode_refused),
		cmocka_unit_test(test_hello_fuzz),
		cmocka_unit_test(test_ping_round_trip_one),
		cmocka_unit_test(test_ping_round_trip_max),
		cmocka_unit_test(test_ping_refused_length),
		cmocka_unit_test(test_ping_refused_nsizes),
		cmocka_unit_test(test_ping_refused_mode),
		cmocka_unit_test(test_ping_refused_iters),
		cmocka_unit_test(test_ping_refused_size),
		cmocka_unit_test(test_ping_encode_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
