/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the random-fill protocol (fill_proto_fixture.h): every
 * message's codec and the header checks; and main(), which runs these and
 * those of test_fill_proto_check.c. Everything here arrives from an
 * untrusted peer.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tern/tern.h>

#include "wire/card.h"
#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/proto.h"
#include "fill_proto_fixture.h"

static uint8_t card[TERN_CARD_MAX];
static size_t card_len;

/* A real card: two rails of 16-byte addresses. */
static void make_card(void)
{
	uint8_t addrs[32];
	struct tern__card c = {
		.nrails = 2,
		.addrlen = 16,
		.addr_format = 2,
		.addrs = addrs,
	};
	ssize_t n;

	for (size_t i = 0; i < sizeof(addrs); i++)
		addrs[i] = (uint8_t)(0x40 + i);
	n = tern__card_pack(&c, card, sizeof(card));
	assert_int_equal(n, TERN_CARD_HDR + 32);
	card_len = (size_t)n;
}

/* Builders: one well-formed message of each type. */
static size_t build_connect(uint8_t *buf)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	ssize_t n;

	make_card();
	make_regions(regions, 16 * MIB, 8 * MIB);
	n = fill_connect_encode(buf, FILL_MSG_MAX, NONCE, card, card_len,
				regions);
	assert_int_equal(n, FILL_HDR + 4 + card_len +
				    2 * TERN_MR_DESC_PACKED_SIZE(2));
	return (size_t)n;
}

static const struct fill_accept accept_msg = {
	.nonce = NONCE,
	.max_page_size = FILL_MAX_PAGE_SIZE,
	.max_pages = FILL_MAX_PAGES,
	.max_bytes = FILL_MAX_BYTES,
};

static size_t build_accept(uint8_t *buf)
{
	ssize_t n = fill_accept_encode(buf, FILL_MSG_MAX, SESSION, &accept_msg);

	assert_int_equal(n, FILL_HDR + 24);
	return (size_t)n;
}

static const uint32_t req_indices[] = { 0, 1, 0x01020304u, 0xfffffffeu, 77 };

static size_t build_request(uint8_t *buf)
{
	struct fill_request r = {
		.id = 0xabcd0001u,
		.page_size = 4096,
		.seed = 0x1122334455667788ULL,
		.page_count = TERN_ARRAY_SIZE(req_indices),
	};
	ssize_t n = fill_request_encode(buf, FILL_MSG_MAX, SESSION, &r,
					req_indices);

	assert_int_equal(n, FILL_HDR + 24 + 4 * r.page_count);
	return (size_t)n;
}

static const struct fill_result result_msg = {
	.id = 0xabcd0002u,
	.status = -TERN_EBOUNDS,
	.bytes = 0x0000000123456789ULL,
	.write_ns = 0xfedcba9876543210ULL,
};

static size_t build_result(uint8_t *buf)
{
	ssize_t n = fill_result_encode(buf, FILL_MSG_MAX, SESSION, &result_msg);

	assert_int_equal(n, FILL_HDR + 24);
	return (size_t)n;
}

static const char error_text[] = "page index 9000 outside your regions";

static size_t build_error(uint8_t *buf)
{
	ssize_t n = fill_error_encode(buf, FILL_MSG_MAX, SESSION, 0xabcd0003u,
				      -TERN_EREFUSED, error_text);

	assert_int_equal(n, FILL_HDR + 10 + strlen(error_text));
	return (size_t)n;
}

static size_t build_bye(uint8_t *buf)
{
	ssize_t n = fill_bye_encode(buf, FILL_MSG_MAX, SESSION);

	assert_int_equal(n, FILL_HDR);
	return (size_t)n;
}

/* Decoders with one signature, for the tables below. */
static int dec_connect(const void *buf, size_t len)
{
	struct fill_connect c;

	return fill_connect_decode(buf, len, &c);
}

static int dec_accept(const void *buf, size_t len)
{
	struct fill_accept a;

	return fill_accept_decode(buf, len, &a);
}

static int dec_request(const void *buf, size_t len)
{
	struct fill_request r;

	return fill_request_decode(buf, len, &r);
}

static int dec_result(const void *buf, size_t len)
{
	struct fill_result r;

	return fill_result_decode(buf, len, &r);
}

static int dec_error(const void *buf, size_t len)
{
	struct fill_error e;

	return fill_error_decode(buf, len, &e);
}

static int dec_hdr(const void *buf, size_t len)
{
	struct fill_hdr h;

	return fill_hdr_parse(buf, len, &h);
}

static const struct kind {
	const char *name;
	uint16_t type;
	size_t (*build)(uint8_t *buf);
	int (*decode)(const void *buf, size_t len); /* NULL: no decoder */
} kinds[] = {
	{ "CONNECT", FILL_CONNECT, build_connect, dec_connect },
	{ "ACCEPT", FILL_ACCEPT, build_accept, dec_accept },
	{ "REQUEST", FILL_REQUEST, build_request, dec_request },
	{ "RESULT", FILL_RESULT, build_result, dec_result },
	{ "ERROR", FILL_ERROR, build_error, dec_error },
	{ "BYE", FILL_BYE, build_bye, NULL },
};

/* Both the header parser and the type's decoder must answer @want. */
static void refused(const struct kind *k, const uint8_t *buf, size_t len,
		    int want, const char *what)
{
	int ret = dec_hdr(buf, len);

	if (ret != want)
		fail_msg("%s %s (%zu bytes): header %d, want %d", k->name, what,
			 len, ret, want);
	if (k->decode == NULL)
		return;
	ret = k->decode(buf, len);
	if (ret != want)
		fail_msg("%s %s (%zu bytes): decode %d, want %d", k->name, what,
			 len, ret, want);
}

static void test_connect_round_trip(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_connect c;
	struct fill_hdr h;
	const uint8_t *cp;
	size_t n, cl;

	(void)state;
	n = build_connect(msg);
	make_regions(regions, 16 * MIB, 8 * MIB);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.magic, FILL_MAGIC);
	assert_int_equal(h.version, FILL_VERSION);
	assert_int_equal(h.type, FILL_CONNECT);
	assert_int_equal(h.length, n);
	assert_true(h.session == NONCE);
	assert_int_equal(tern__wire_get_u16(msg + FILL_HDR), card_len);
	assert_int_equal(tern__wire_get_u16(msg + FILL_HDR + 2), FILL_REGIONS);

	memset(&c, 0, sizeof(c));
	assert_int_equal(fill_connect_decode(msg, n, &c), 0);
	assert_true(c.nonce == NONCE);
	assert_int_equal(c.card_len, card_len);
	assert_ptr_equal(c.card, msg + FILL_HDR + 4);
	assert_memory_equal(c.card, card, card_len);
	for (int i = 0; i < FILL_REGIONS; i++) {
		assert_true(c.regions[i].base == regions[i].base);
		assert_true(c.regions[i].len == regions[i].len);
		assert_int_equal(c.regions[i].flags, regions[i].flags);
		assert_int_equal(c.regions[i].nkeys, 2);
		assert_true(c.regions[i].keys[0] == regions[i].keys[0]);
		assert_true(c.regions[i].keys[1] == regions[i].keys[1]);
	}

	assert_int_equal(fill_connect_card(msg, n, &cp, &cl), 0);
	assert_ptr_equal(cp, msg + FILL_HDR + 4);
	assert_int_equal(cl, card_len);
}

static void test_accept_round_trip(void **state)
{
	struct fill_accept a;
	struct fill_hdr h;
	size_t n;

	(void)state;
	n = build_accept(msg);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.type, FILL_ACCEPT);
	assert_true(h.session == SESSION);
	memset(&a, 0, sizeof(a));
	assert_int_equal(fill_accept_decode(msg, n, &a), 0);
	assert_true(a.nonce == accept_msg.nonce);
	assert_int_equal(a.max_page_size, accept_msg.max_page_size);
	assert_int_equal(a.max_pages, accept_msg.max_pages);
	assert_true(a.max_bytes == accept_msg.max_bytes);
}

static void test_request_round_trip(void **state)
{
	struct fill_request r;
	struct fill_hdr h;
	size_t n;

	(void)state;
	n = build_request(msg);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.type, FILL_REQUEST);
	assert_true(h.session == SESSION);
	/* Indices travel little-endian from offset 48. */
	assert_int_equal(msg[48 + 8], 0x04);
	assert_int_equal(msg[48 + 9], 0x03);
	assert_int_equal(msg[48 + 10], 0x02);
	assert_int_equal(msg[48 + 11], 0x01);

	memset(&r, 0, sizeof(r));
	assert_int_equal(fill_request_decode(msg, n, &r), 0);
	assert_int_equal(r.id, 0xabcd0001u);
	assert_int_equal(r.page_size, 4096);
	assert_true(r.seed == 0x1122334455667788ULL);
	assert_int_equal(r.page_count, TERN_ARRAY_SIZE(req_indices));
	assert_ptr_equal(r.indices, msg + 48);
	for (uint32_t k = 0; k < r.page_count; k++)
		assert_int_equal(fill_request_index(&r, k), req_indices[k]);
}

static void test_request_empty(void **state)
{
	struct fill_request in = { .id = 1, .page_size = 4096 }, r;
	ssize_t n;

	(void)state;
	/* A request of no pages is well formed; the server's check refuses
	 * it. */
	n = fill_request_encode(msg, sizeof(msg), SESSION, &in, NULL);
	assert_int_equal(n, FILL_HDR + 24);
	assert_int_equal(fill_request_decode(msg, (size_t)n, &r), 0);
	assert_int_equal(r.page_count, 0);
}

static void test_result_round_trip(void **state)
{
	struct fill_result r;
	struct fill_hdr h;
	size_t n;

	(void)state;
	n = build_result(msg);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.type, FILL_RESULT);
	memset(&r, 0, sizeof(r));
	assert_int_equal(fill_result_decode(msg, n, &r), 0);
	assert_int_equal(r.id, result_msg.id);
	/* A negative status survives the trip through a u32. */
	assert_int_equal(r.status, -TERN_EBOUNDS);
	assert_true(r.bytes == result_msg.bytes);
	assert_true(r.write_ns == result_msg.write_ns);
}

static void test_error_round_trip(void **state)
{
	struct fill_error e;
	struct fill_hdr h;
	size_t n;
	ssize_t m;

	(void)state;
	n = build_error(msg);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.type, FILL_ERROR);
	memset(&e, 0, sizeof(e));
	assert_int_equal(fill_error_decode(msg, n, &e), 0);
	assert_int_equal(e.id, 0xabcd0003u);
	assert_int_equal(e.code, -TERN_EREFUSED);
	assert_string_equal(e.text, error_text);

	/* An empty text. */
	m = fill_error_encode(msg, sizeof(msg), SESSION, 9, -EBUSY, "");
	assert_int_equal(m, FILL_HDR + 10);
	memset(&e, 'x', sizeof(e));
	assert_int_equal(fill_error_decode(msg, (size_t)m, &e), 0);
	assert_int_equal(e.id, 9);
	assert_int_equal(e.code, -EBUSY);
	assert_string_equal(e.text, "");
}

static void test_bye(void **state)
{
	struct fill_hdr h;
	size_t n;

	(void)state;
	n = build_bye(msg);
	/* magic "TRFL", version 1 (u16), type 6 (u16) */
	assert_memory_equal(msg, "TRFL\x01\x00\x06\x00", 8);
	/* length 24 (u32), reserved (u32) */
	assert_memory_equal(msg + 8, "\x18\x00\x00\x00\x00\x00\x00\x00", 8);
	/* session (u64) */
	assert_memory_equal(msg + 16, "\xef\xcd\xab\x89\x67\x45\x23\x01", 8);
	assert_int_equal(fill_hdr_parse(msg, n, &h), 0);
	assert_int_equal(h.type, FILL_BYE);
	assert_int_equal(h.length, FILL_HDR);
	assert_true(h.session == SESSION);
}

static void test_hdr_bad_magic(void **state)
{
	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		for (int i = 0; i < 4; i++) {
			size_t n = kinds[t].build(msg);

			msg[i] ^= 0x40;
			refused(&kinds[t], msg, n, -TERN_EPROTO, "bad magic");
		}
	}
}

static void test_hdr_bad_version(void **state)
{
	static const uint16_t versions[] = { 0, FILL_VERSION + 1, 0x100,
					     0xffff };

	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		for (size_t v = 0; v < TERN_ARRAY_SIZE(versions); v++) {
			size_t n = kinds[t].build(msg);

			tern__wire_put_u16(msg + 4, versions[v]);
			refused(&kinds[t], msg, n, -TERN_EVERSION,
				"bad version");
		}
	}
}

static void test_hdr_bad_length(void **state)
{
	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		size_t n = kinds[t].build(msg);

		tern__wire_put_u32(msg + 8, (uint32_t)n + 1);
		refused(&kinds[t], msg, n, -TERN_EPROTO, "length + 1");
		tern__wire_put_u32(msg + 8, (uint32_t)n - 1);
		refused(&kinds[t], msg, n, -TERN_EPROTO, "length - 1");
		tern__wire_put_u32(msg + 8, 0);
		refused(&kinds[t], msg, n, -TERN_EPROTO, "length 0");
		tern__wire_put_u32(msg + 8, UINT32_MAX);
		refused(&kinds[t], msg, n, -TERN_EPROTO, "length max");
		/* One byte more arrived than the header announces. */
		tern__wire_put_u32(msg + 8, (uint32_t)n);
		msg[n] = 0;
		refused(&kinds[t], msg, n + 1, -TERN_EPROTO, "extra byte");
	}
}

static void test_hdr_reserved(void **state)
{
	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		for (int i = 12; i < 16; i++) {
			size_t n = kinds[t].build(msg);

			msg[i] = 0x01;
			refused(&kinds[t], msg, n, -TERN_EPROTO, "reserved");
		}
	}
}

static void test_truncated(void **state)
{
	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		const struct kind *k = &kinds[t];
		size_t n = k->build(msg);

		/* Cut short in flight: the header's length disagrees. */
		for (size_t len = 0; len < n; len++)
			refused(k, msg, len, -TERN_EPROTO, "truncated");

		/* Cut short by the sender, header length made to agree: the
		 * body checks must catch it. */
		for (size_t len = FILL_HDR; len < n; len++) {
			int ret;

			k->build(msg);
			tern__wire_put_u32(msg + 8, (uint32_t)len);
			assert_int_equal(dec_hdr(msg, len), 0);
			if (k->decode == NULL)
				continue;
			ret = k->decode(msg, len);
			if (ret != -TERN_EPROTO &&
			    !(k->type == FILL_CONNECT && ret == -TERN_EDESC))
				fail_msg("%s cut to %zu of %zu bytes: %d",
					 k->name, len, n, ret);
		}
	}
}

/* Bytes after a complete body, with the header length made to agree. */
static void test_trailing_body(void **state)
{
	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		const struct kind *k = &kinds[t];

		if (k->decode == NULL)
			continue;
		for (size_t extra = 1; extra <= 8; extra++) {
			size_t n = k->build(msg);
			int ret;

			memset(msg + n, 0, extra);
			tern__wire_put_u32(msg + 8, (uint32_t)(n + extra));
			assert_int_equal(dec_hdr(msg, n + extra), 0);
			ret = k->decode(msg, n + extra);
			if (ret != -TERN_EPROTO && ret != -TERN_EDESC)
				fail_msg("%s with %zu byte(s) more: %d",
					 k->name, extra, ret);
		}
	}
}

static void test_wrong_type(void **state)
{
	const uint8_t *cp;
	size_t cl;

	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(kinds); t++) {
		size_t n = kinds[t].build(msg);

		for (size_t d = 0; d < TERN_ARRAY_SIZE(kinds); d++) {
			int ret;

			if (d == t || kinds[d].decode == NULL)
				continue;
			ret = kinds[d].decode(msg, n);
			if (ret != -TERN_EPROTO)
				fail_msg("%s decoded as %s: %d", kinds[t].name,
					 kinds[d].name, ret);
		}
		if (kinds[t].type != FILL_CONNECT)
			assert_int_equal(fill_connect_card(msg, n, &cp, &cl),
					 -TERN_EPROTO);
	}

	/* A type nobody knows. */
	for (size_t d = 0; d < TERN_ARRAY_SIZE(kinds); d++) {
		size_t n = build_accept(msg);

		tern__wire_put_u16(msg + 6, 0x7777);
		if (kinds[d].decode != NULL)
			assert_int_equal(kinds[d].decode(msg, n), -TERN_EPROTO);
	}
}

static void test_connect_card_any_version(void **state)
{
	struct fill_connect c;
	const uint8_t *cp = NULL;
	size_t n, cl = 0;

	(void)state;
	n = build_connect(msg);
	tern__wire_put_u16(msg + 4, FILL_VERSION + 1);
	assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EVERSION);
	assert_int_equal(fill_connect_card(msg, n, &cp, &cl), 0);
	assert_ptr_equal(cp, msg + FILL_HDR + 4);
	assert_int_equal(cl, card_len);
	assert_memory_equal(cp, card, card_len);

	/* A future version with another body after the card. */
	n = FILL_HDR + 4 + card_len + 16;
	tern__wire_put_u16(msg + 4, 0x0100);
	tern__wire_put_u32(msg + 8, (uint32_t)n);
	tern__wire_put_u16(msg + FILL_HDR + 2, 7);
	memset(msg + FILL_HDR + 4 + card_len, 0xee, 16);
	cp = NULL;
	cl = 0;
	assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EVERSION);
	assert_int_equal(fill_connect_card(msg, n, &cp, &cl), 0);
	assert_ptr_equal(cp, msg + FILL_HDR + 4);
	assert_int_equal(cl, card_len);

	/* The prefix itself is still checked. */
	n = build_connect(msg);
	msg[0] ^= 0x40;
	assert_int_equal(fill_connect_card(msg, n, &cp, &cl), -TERN_EPROTO);
	n = build_connect(msg);
	assert_int_equal(fill_connect_card(msg, FILL_HDR + 3, &cp, &cl),
			 -TERN_EPROTO);
	assert_int_equal(
		fill_connect_card(msg, FILL_HDR + 4 + card_len - 1, &cp, &cl),
		-TERN_EPROTO);
	tern__wire_put_u16(msg + FILL_HDR, 0);
	assert_int_equal(fill_connect_card(msg, n, &cp, &cl), -TERN_EPROTO);
}

static void test_connect_bad_body(void **state)
{
	struct fill_connect c;
	size_t n;

	(void)state;
	/* No card. */
	n = build_connect(msg);
	tern__wire_put_u16(msg + FILL_HDR, 0);
	assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EPROTO);

	/* A card longer than any card. */
	n = build_connect(msg);
	tern__wire_put_u16(msg + FILL_HDR, TERN_CARD_MAX + 1);
	memset(msg + n, 0, TERN_CARD_MAX + 1);
	tern__wire_put_u32(msg + 8, (uint32_t)(n + TERN_CARD_MAX + 1));
	assert_int_equal(fill_connect_decode(msg, n + TERN_CARD_MAX + 1, &c),
			 -TERN_EPROTO);

	/* A card longer than the message. */
	n = build_connect(msg);
	tern__wire_put_u16(msg + FILL_HDR, (uint16_t)(n - FILL_HDR - 3));
	assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EPROTO);

	/* Another number of regions. */
	for (uint16_t nr = 0; nr < 4; nr++) {
		if (nr == FILL_REGIONS)
			continue;
		n = build_connect(msg);
		tern__wire_put_u16(msg + FILL_HDR + 2, nr);
		assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EPROTO);
	}

	/* A byte after the second descriptor. */
	n = build_connect(msg);
	msg[n] = 0;
	tern__wire_put_u32(msg + 8, (uint32_t)n + 1);
	assert_int_equal(fill_connect_decode(msg, n + 1, &c), -TERN_EPROTO);

	/* A malformed descriptor: the second region has no length. */
	n = build_connect(msg);
	tern__wire_put_u64(msg + n - TERN_MR_DESC_PACKED_SIZE(2) + 16, 0);
	assert_int_equal(fill_connect_decode(msg, n, &c), -TERN_EDESC);
}

static void test_request_index_count(void **state)
{
	size_t n, count = TERN_ARRAY_SIZE(req_indices);

	(void)state;
	/* page_count says one more, or one fewer, than the list holds. */
	n = build_request(msg);
	tern__wire_put_u32(msg + 40, (uint32_t)count + 1);
	assert_int_equal(dec_request(msg, n), -TERN_EPROTO);
	tern__wire_put_u32(msg + 40, (uint32_t)count - 1);
	assert_int_equal(dec_request(msg, n), -TERN_EPROTO);
	tern__wire_put_u32(msg + 40, 0);
	assert_int_equal(dec_request(msg, n), -TERN_EPROTO);
	tern__wire_put_u32(msg + 40, UINT32_MAX);
	assert_int_equal(dec_request(msg, n), -TERN_EPROTO);

	/* One index too many, header length made to agree. */
	n = build_request(msg);
	tern__wire_put_u32(msg + n, 5);
	tern__wire_put_u32(msg + 8, (uint32_t)n + 4);
	assert_int_equal(dec_request(msg, n + 4), -TERN_EPROTO);

	/* Half an index more. */
	n = build_request(msg);
	tern__wire_put_u32(msg + 8, (uint32_t)n + 2);
	assert_int_equal(dec_request(msg, n + 2), -TERN_EPROTO);

	/* One index too few. */
	n = build_request(msg);
	tern__wire_put_u32(msg + 8, (uint32_t)n - 4);
	assert_int_equal(dec_request(msg, n - 4), -TERN_EPROTO);

	/* The reserved word after page_count. */
	n = build_request(msg);
	tern__wire_put_u32(msg + 44, 1);
	assert_int_equal(dec_request(msg, n), -TERN_EPROTO);

	/* Control: the unmodified request decodes. */
	n = build_request(msg);
	assert_int_equal(dec_request(msg, n), 0);
}

static void test_error_text_sanitised(void **state)
{
	static const char text[] = "ok"
				   "\x01"
				   "\x1f"
				   "\x7f"
				   "\x80"
				   "\xff"
				   "\t"
				   "\n"
				   " ~end";
	struct fill_error e;
	ssize_t n;

	(void)state;
	n = fill_error_encode(msg, sizeof(msg), SESSION, 1, -TERN_EPROTO, text);
	assert_int_equal(n, FILL_HDR + 10 + strlen(text));
	/* The bytes travel as sent; only the decoder replaces them. */
	assert_memory_equal(msg + FILL_HDR + 10, text, strlen(text));
	assert_int_equal(fill_error_decode(msg, (size_t)n, &e), 0);
	assert_string_equal(e.text, "ok??????? ~end");
}

static void test_error_text_too_long(void **state)
{
	size_t base = FILL_HDR + 10;
	struct fill_error e;
	char text[FILL_TEXT_MAX + 1];
	ssize_t n;

	(void)state;
	memset(text, 'a', FILL_TEXT_MAX);
	text[FILL_TEXT_MAX] = '\0';
	n = fill_error_encode(msg, sizeof(msg), SESSION, 1, -TERN_EPROTO, text);
	assert_int_equal(n, base + FILL_TEXT_MAX);
	assert_int_equal(fill_error_decode(msg, (size_t)n, &e), 0);
	assert_int_equal(strlen(e.text), FILL_TEXT_MAX);

	/* One byte over, with every length consistent. */
	msg[n] = 'a';
	tern__wire_put_u16(msg + 32, FILL_TEXT_MAX + 1);
	tern__wire_put_u32(msg + 8, (uint32_t)n + 1);
	assert_int_equal(fill_error_decode(msg, (size_t)n + 1, &e),
			 -TERN_EPROTO);

	/* The longest text the field can announce. */
	memset(msg + base, 'a', UINT16_MAX);
	tern__wire_put_u16(msg + 32, UINT16_MAX);
	tern__wire_put_u32(msg + 8, (uint32_t)(base + UINT16_MAX));
	assert_int_equal(fill_error_decode(msg, base + UINT16_MAX, &e),
			 -TERN_EPROTO);

	/* A text length that disagrees with the message length. */
	n = fill_error_encode(msg, sizeof(msg), SESSION, 1, -TERN_EPROTO,
			      "hello");
	tern__wire_put_u16(msg + 32, 4);
	assert_int_equal(fill_error_decode(msg, (size_t)n, &e), -TERN_EPROTO);
	tern__wire_put_u16(msg + 32, 6);
	assert_int_equal(fill_error_decode(msg, (size_t)n, &e), -TERN_EPROTO);
}

static void test_error_text_encode_truncates(void **state)
{
	char text[FILL_TEXT_MAX + 100];
	struct fill_error e;
	ssize_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(text) - 1; i++)
		text[i] = (char)('a' + i % 26);
	text[sizeof(text) - 1] = '\0';
	n = fill_error_encode(msg, sizeof(msg), SESSION, 2, -EIO, text);
	assert_int_equal(n, FILL_HDR + 10 + FILL_TEXT_MAX);
	assert_int_equal(tern__wire_get_u16(msg + 32), FILL_TEXT_MAX);
	assert_int_equal(fill_error_decode(msg, (size_t)n, &e), 0);
	assert_int_equal(strlen(e.text), FILL_TEXT_MAX);
	assert_memory_equal(e.text, text, FILL_TEXT_MAX);
}

static void test_encode_no_space(void **state)
{
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_request r = { .page_size = 1, .page_count = 3 };
	static const uint32_t three[3] = { 0, 1, 2 };
	static const uint8_t big[TERN_CARD_MAX + 1];
	size_t need;

	(void)state;
	make_card();
	make_regions(regions, MIB, MIB);
	need = FILL_HDR + 4 + card_len + 2 * TERN_MR_DESC_PACKED_SIZE(2);
	assert_int_equal(
		fill_connect_encode(msg, need - 1, 1, card, card_len, regions),
		-ENOSPC);
	assert_int_equal(fill_connect_encode(msg, FILL_HDR + 3, 1, card,
					     card_len, regions),
			 -ENOSPC);
	/* A card too large or empty is a caller error, not a short buffer. */
	assert_int_equal(fill_connect_encode(msg, sizeof(msg), 1, big,
					     sizeof(big), regions),
			 -EINVAL);
	assert_int_equal(
		fill_connect_encode(msg, sizeof(msg), 1, card, 0, regions),
		-EINVAL);
	assert_int_equal(
		fill_connect_encode(msg, need, 1, card, card_len, regions),
		need);
	assert_int_equal(fill_accept_encode(msg, FILL_HDR + 23, 1, &accept_msg),
			 -ENOSPC);
	assert_int_equal(
		fill_request_encode(msg, FILL_HDR + 24 + 11, 1, &r, three),
		-ENOSPC);
	assert_int_equal(fill_result_encode(msg, FILL_HDR + 23, 1, &result_msg),
			 -ENOSPC);
	assert_int_equal(
		fill_error_encode(msg, FILL_HDR + 10 + 4, 1, 1, 1, "hello"),
		-ENOSPC);
	assert_int_equal(fill_bye_encode(msg, FILL_HDR - 1, 1), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_round_trip),
		cmocka_unit_test(test_accept_round_trip),
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_request_empty),
		cmocka_unit_test(test_result_round_trip),
		cmocka_unit_test(test_error_round_trip),
		cmocka_unit_test(test_bye),
		cmocka_unit_test(test_hdr_bad_magic),
		cmocka_unit_test(test_hdr_bad_version),
		cmocka_unit_test(test_hdr_bad_length),
		cmocka_unit_test(test_hdr_reserved),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_trailing_body),
		cmocka_unit_test(test_wrong_type),
		cmocka_unit_test(test_connect_card_any_version),
		cmocka_unit_test(test_connect_bad_body),
		cmocka_unit_test(test_request_index_count),
		cmocka_unit_test(test_error_text_sanitised),
		cmocka_unit_test(test_error_text_too_long),
		cmocka_unit_test(test_error_text_encode_truncates),
		cmocka_unit_test(test_encode_no_space),
		cmocka_unit_test(test_region_pages),
		cmocka_unit_test(test_page_target),
		cmocka_unit_test(test_page_target_uneven),
		cmocka_unit_test(test_check_good),
		cmocka_unit_test(test_check_page_size),
		cmocka_unit_test(test_check_page_count),
		cmocka_unit_test(test_check_bytes),
		cmocka_unit_test(test_check_bounds),
		cmocka_unit_test(test_check_duplicate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
