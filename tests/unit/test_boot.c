/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the bootstrap handshake's codec (src/wire/boot.c): HELLO,
 * WELCOME and REFUSE, the header checks, token comparison and address
 * splitting. Everything decoded here arrives from an untrusted peer.
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

#include "wire/boot.h"
#include "wire/card.h"
#include "core/core.h"
#include "wire/wire.h"

/* Offsets in a message: header, then the HELLO/WELCOME/REFUSE body. */
#define OFF_VERSION   4
#define OFF_TYPE      6
#define OFF_BODY_LEN  8
#define OFF_RESERVED  12
#define OFF_CARD_LEN  (TERN_BOOT_HDR + 0)
#define OFF_TOKEN_LEN (TERN_BOOT_HDR + 2)
#define OFF_NDESC     (TERN_BOOT_HDR + 4)
#define OFF_BODY_RSV  (TERN_BOOT_HDR + 6)
#define OFF_TEXT_LEN  (TERN_BOOT_HDR + 4)
#define OFF_TEXT      (TERN_BOOT_HDR + 8)

#define CANARY 0xa5

static uint8_t msg[TERN_BOOT_MSG_MAX + 64];
static char why[256];

/* A real card: two rails of 16-byte addresses. */
static size_t make_card(uint8_t *card, size_t cap)
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
	n = tern__card_pack(&c, card, cap);
	assert_int_equal(n, TERN_CARD_HDR + sizeof(addrs));
	return (size_t)n;
}

/* Descriptor @i: its own base, length, flags and 1 + i keys. */
static void make_desc(struct tern_mr_desc *d, unsigned int i)
{
	*d = (struct tern_mr_desc){
		.base = 0x7f0000000000ULL + ((uint64_t)i << 32),
		.len = 4096ULL << i,
		.flags = TERN_MR_DESC_VIRT_ADDR |
			 (i % 2 ? TERN_MR_DESC_REMOTE_WRITE
				: TERN_MR_DESC_REMOTE_READ),
		.nkeys = 1 + i,
	};
	for (unsigned int k = 0; k < d->nkeys; k++)
		d->keys[k] = 0x1000000000000000ULL * (k + 1) + i;
}

static void make_info(struct tern_boot_info *info, unsigned int ndesc)
{
	memset(info, 0, sizeof(*info));
	info->card_len = make_card(info->card, sizeof(info->card));
	for (unsigned int i = 0; i < ndesc; i++)
		make_desc(&info->descs[i], i);
	info->ndesc = ndesc;
}

static size_t info_size(const struct tern_boot_info *info, const char *token)
{
	size_t n = TERN_BOOT_HDR + 8 + info->card_len;

	if (token != NULL)
		n += strlen(token);
	for (unsigned int i = 0; i < info->ndesc; i++)
		n += TERN_MR_DESC_PACKED_SIZE(info->descs[i].nkeys);
	return n;
}

static size_t encode(uint16_t type, const struct tern_boot_info *info,
		     const char *token)
{
	ssize_t n = tern__boot_encode(msg, sizeof(msg), type, info, token);

	assert_int_equal(n, info_size(info, token));
	return (size_t)n;
}

/* A HELLO with a token and three descriptors, for the negative tests. */
static const char hello_token[] = "open sesame";

static size_t build_hello(void)
{
	struct tern_boot_info info;

	make_info(&info, 3);
	return encode(TERN_BOOT_HELLO, &info, hello_token);
}

static int decode(size_t len, struct tern__boot_msg *m)
{
	why[0] = '\0';
	return tern__boot_decode(msg, len, m, why, sizeof(why));
}

/*
 * @len bytes of msg must be refused with @want, and say why. They are
 * decoded from an exact-size heap copy, so a sanitizer sees overreads.
 */
static void refused(size_t len, int want, const char *what)
{
	struct tern__boot_msg m;
	uint8_t *cp = malloc(len > 0 ? len : 1);
	int ret;

	assert_non_null(cp);
	memcpy(cp, msg, len);
	why[0] = '\0';
	ret = tern__boot_decode(cp, len, &m, why, sizeof(why));
	free(cp);
	if (ret != want)
		fail_msg("%s (%zu bytes): decode %d, want %d (%s)", what, len,
			 ret, want, why);
	if (why[0] == '\0')
		fail_msg("%s: refused without a reason", what);
}

static void assert_desc_equal(const struct tern_mr_desc *a,
			      const struct tern_mr_desc *b)
{
	assert_true(a->base == b->base);
	assert_true(a->len == b->len);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->nkeys, b->nkeys);
	for (unsigned int k = 0; k < a->nkeys; k++)
		assert_true(a->keys[k] == b->keys[k]);
}

static void round_trip(uint16_t type, unsigned int ndesc, const char *token)
{
	struct tern_boot_info info;
	struct tern__boot_msg m;
	struct tern__card card;
	size_t n, tl = token != NULL ? strlen(token) : 0;

	make_info(&info, ndesc);
	n = encode(type, &info, token);

	/* The header, as docs/protocol.md draws it. */
	assert_memory_equal(msg, "TRNB", 4);
	assert_int_equal(tern__wire_get_u16(msg + OFF_VERSION),
			 TERN_BOOT_VERSION);
	assert_int_equal(tern__wire_get_u16(msg + OFF_TYPE), type);
	assert_int_equal(tern__wire_get_u32(msg + OFF_BODY_LEN),
			 n - TERN_BOOT_HDR);
	assert_int_equal(tern__wire_get_u32(msg + OFF_RESERVED), 0);
	assert_int_equal(tern__wire_get_u16(msg + OFF_CARD_LEN), info.card_len);
	assert_int_equal(tern__wire_get_u16(msg + OFF_TOKEN_LEN), tl);
	assert_int_equal(tern__wire_get_u16(msg + OFF_NDESC), ndesc);
	assert_int_equal(tern__wire_get_u16(msg + OFF_BODY_RSV), 0);

	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
	memset(&m, 0xff, sizeof(m));
	assert_int_equal(decode(n, &m), 0);
	assert_int_equal(m.version, TERN_BOOT_VERSION);
	assert_int_equal(m.type, type);
	assert_int_equal(m.info.card_len, info.card_len);
	assert_memory_equal(m.info.card, info.card, info.card_len);
	assert_int_equal(m.info.ndesc, ndesc);
	for (unsigned int i = 0; i < ndesc; i++)
		assert_desc_equal(&m.info.descs[i], &info.descs[i]);
	assert_int_equal(m.token_len, tl);
	if (tl == 0) {
		assert_null(m.token);
	} else {
		/* The token points into the message, right after the card. */
		assert_ptr_equal(m.token,
				 msg + TERN_BOOT_HDR + 8 + info.card_len);
		assert_memory_equal(m.token, token, tl);
	}

	/* The card that came out is still a card. */
	assert_int_equal(tern__card_parse(m.info.card, m.info.card_len, &card,
					  why, sizeof(why)),
			 0);
	assert_int_equal(card.nrails, 2);
	assert_int_equal(card.addrlen, 16);
	assert_int_equal(card.addr_format, 2);
	assert_memory_equal(card.addrs, info.card + TERN_CARD_HDR, 32);
}

static void test_hello_round_trip(void **state)
{
	char big[TERN_BOOT_TOKEN_MAX + 1];

	(void)state;
	memset(big, 'k', TERN_BOOT_TOKEN_MAX);
	big[TERN_BOOT_TOKEN_MAX] = '\0';
	round_trip(TERN_BOOT_HELLO, 0, "s3cret");
	round_trip(TERN_BOOT_HELLO, 1, "s3cret");
	round_trip(TERN_BOOT_HELLO, 8, "s3cret");
	round_trip(TERN_BOOT_HELLO, 0, NULL);
	round_trip(TERN_BOOT_HELLO, 1, "");
	round_trip(TERN_BOOT_HELLO, TERN_BOOT_DESCS_MAX, big);
}

static void test_welcome_round_trip(void **state)
{
	(void)state;
	round_trip(TERN_BOOT_WELCOME, 0, NULL);
	round_trip(TERN_BOOT_WELCOME, 1, NULL);
	round_trip(TERN_BOOT_WELCOME, 8, "");
}

/* The largest message there can be: a full card, token and descriptors. */
static void test_largest(void **state)
{
	struct tern_boot_info info;
	struct tern__boot_msg m;
	char token[TERN_BOOT_TOKEN_MAX + 1];
	uint8_t addrs[TERN_MAX_RAILS * 64];
	struct tern__card c = {
		.nrails = TERN_MAX_RAILS,
		.addrlen = 64,
		.addrs = addrs,
	};
	ssize_t n;

	(void)state;
	memset(addrs, 0x5a, sizeof(addrs));
	memset(&info, 0, sizeof(info));
	n = tern__card_pack(&c, info.card, sizeof(info.card));
	assert_int_equal(n, TERN_CARD_MAX);
	info.card_len = (size_t)n;
	for (unsigned int i = 0; i < TERN_BOOT_DESCS_MAX; i++) {
		make_desc(&info.descs[i], i);
		info.descs[i].nkeys = TERN_MAX_RAILS;
	}
	info.ndesc = TERN_BOOT_DESCS_MAX;
	memset(token, 't', TERN_BOOT_TOKEN_MAX);
	token[TERN_BOOT_TOKEN_MAX] = '\0';

	n = tern__boot_encode(msg, TERN_BOOT_MSG_MAX, TERN_BOOT_HELLO, &info,
			      token);
	assert_int_equal(n, TERN_BOOT_MSG_MAX);
	assert_int_equal(tern__boot_need(msg, (size_t)n, why, sizeof(why)),
			 TERN_BOOT_MSG_MAX);
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_int_equal(m.info.card_len, TERN_CARD_MAX);
	assert_int_equal(m.info.ndesc, TERN_BOOT_DESCS_MAX);
	assert_int_equal(m.token_len, TERN_BOOT_TOKEN_MAX);
	assert_desc_equal(&m.info.descs[7], &info.descs[7]);
	/* One byte less room and it does not fit. */
	assert_int_equal(tern__boot_encode(msg, TERN_BOOT_MSG_MAX - 1,
					   TERN_BOOT_HELLO, &info, token),
			 -ENOSPC);
}

/* Decoding a card that is no card: the codec checks what it carries. */
static void test_bad_card(void **state)
{
	struct tern_boot_info info;
	size_t n;

	(void)state;
	make_info(&info, 1);
	info.card[0] ^= 0xff; /* magic */
	n = encode(TERN_BOOT_HELLO, &info, NULL);
	refused(n, -TERN_ECARD, "card of a bad magic");

	make_info(&info, 1);
	info.card_len--; /* shorter than its rails say */
	n = encode(TERN_BOOT_HELLO, &info, NULL);
	refused(n, -TERN_ECARD, "card one byte short");
}

/*
 * Every prefix of a valid message: need() says 0 until the header is in
 * and the full length after; decode refuses it. The same prefix with a
 * header that agrees with its length is refused by the body checks.
 */
static void test_truncated(void **state)
{
	struct tern__boot_msg m;
	size_t n, card_len;

	(void)state;
	n = build_hello();
	card_len = tern__wire_get_u16(msg + OFF_CARD_LEN);
	for (size_t len = 0; len < n; len++) {
		/* An exact-size heap copy, so a sanitizer sees overreads. */
		uint8_t *cp = malloc(len > 0 ? len : 1);
		ssize_t need;
		int ret;

		assert_non_null(cp);
		memcpy(cp, msg, len);
		need = tern__boot_need(cp, len, why, sizeof(why));
		if (len < TERN_BOOT_HDR)
			assert_int_equal(need, 0);
		else
			assert_int_equal(need, n);
		ret = tern__boot_decode(cp, len, &m, why, sizeof(why));
		if (ret != -TERN_EPROTO)
			fail_msg("prefix of %zu bytes: decode %d", len, ret);

		if (len >= TERN_BOOT_HDR) {
			size_t body = len - TERN_BOOT_HDR;
			int want;

			if (body < 8 + card_len + strlen(hello_token))
				want = -TERN_EPROTO;
			else
				want = -TERN_EDESC;
			tern__wire_put_u32(cp + OFF_BODY_LEN, (uint32_t)body);
			assert_int_equal(
				tern__boot_need(cp, len, why, sizeof(why)),
				len);
			ret = tern__boot_decode(cp, len, &m, why, sizeof(why));
			if (ret != want)
				fail_msg("body of %zu bytes: decode %d, want "
					 "%d",
					 body, ret, want);
		}
		free(cp);
	}
	/* The whole message, but the caller says it is one byte longer. */
	msg[n] = 0;
	refused(n + 1, -TERN_EPROTO, "length beyond the header's");
}

static void test_bad_magic(void **state)
{
	size_t n;

	(void)state;
	for (int i = 0; i < 4; i++) {
		n = build_hello();
		msg[i] ^= 0x20;
		assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)),
				 -TERN_EPROTO);
		refused(n, -TERN_EPROTO, "bad magic");
	}
}

static void test_version_zero(void **state)
{
	size_t n;

	(void)state;
	n = build_hello();
	tern__wire_put_u16(msg + OFF_VERSION, 0);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)),
			 -TERN_EPROTO);
	refused(n, -TERN_EPROTO, "version 0");
}

/* A newer peer's message is read whole, then refused as a version. */
static void test_version_newer(void **state)
{
	size_t n;

	(void)state;
	n = build_hello();
	tern__wire_put_u16(msg + OFF_VERSION, TERN_BOOT_VERSION + 1);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
	refused(n, -TERN_EVERSION, "version + 1");

	/* Its body is not looked at: reserved fields, type, garbage. */
	tern__wire_put_u16(msg + OFF_VERSION, 0xffff);
	tern__wire_put_u16(msg + OFF_TYPE, 0x7777);
	tern__wire_put_u32(msg + OFF_RESERVED, 0xdeadbeef);
	memset(msg + TERN_BOOT_HDR, 0xee, n - TERN_BOOT_HDR);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
	refused(n, -TERN_EVERSION, "version 0xffff with garbage");
}

static void test_reserved(void **state)
{
	size_t n;

	(void)state;
	n = build_hello();
	tern__wire_put_u32(msg + OFF_RESERVED, 1u << 31);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)),
			 -TERN_EPROTO);
	refused(n, -TERN_EPROTO, "header reserved field");

	n = build_hello();
	tern__wire_put_u16(msg + OFF_BODY_RSV, 1);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
	refused(n, -TERN_EPROTO, "hello reserved field");

	n = (size_t)tern__boot_encode_refuse(msg, sizeof(msg), TERN_EREFUSED,
					     "no");
	tern__wire_put_u16(msg + TERN_BOOT_HDR + 6, 0x100);
	refused(n, -TERN_EPROTO, "refuse reserved field");
}

static void test_body_too_large(void **state)
{
	size_t n;

	(void)state;
	n = build_hello();
	/* need() answers from the header alone. */
	tern__wire_put_u32(msg + OFF_BODY_LEN, TERN_BOOT_BODY_MAX);
	assert_int_equal(tern__boot_need(msg, TERN_BOOT_HDR, why, sizeof(why)),
			 TERN_BOOT_MSG_MAX);
	tern__wire_put_u32(msg + OFF_BODY_LEN, TERN_BOOT_BODY_MAX + 1);
	assert_int_equal(tern__boot_need(msg, TERN_BOOT_HDR, why, sizeof(why)),
			 -TERN_EPROTO);
	tern__wire_put_u32(msg + OFF_BODY_LEN, UINT32_MAX);
	assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)),
			 -TERN_EPROTO);
	refused(n, -TERN_EPROTO, "body length 4 GiB");

	memset(msg + n, 0, TERN_BOOT_MSG_MAX + 1 - n);
	tern__wire_put_u32(msg + OFF_BODY_LEN, TERN_BOOT_BODY_MAX + 1);
	refused(TERN_BOOT_MSG_MAX + 1, -TERN_EPROTO, "body over the limit");
}

static void test_card_len(void **state)
{
	struct tern_boot_info info;
	size_t n;

	(void)state;
	n = build_hello();
	tern__wire_put_u16(msg + OFF_CARD_LEN, 0);
	refused(n, -TERN_ECARD, "card length 0");
	tern__wire_put_u16(msg + OFF_CARD_LEN, TERN_CARD_MAX + 1);
	refused(n, -TERN_ECARD, "card length over the limit");
	tern__wire_put_u16(msg + OFF_CARD_LEN, 0xffff);
	refused(n, -TERN_ECARD, "card length 0xffff");

	/* Nor will the encoder write one. */
	make_info(&info, 0);
	info.card_len = 0;
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   &info, NULL),
			 -EINVAL);
	info.card_len = TERN_CARD_MAX + 1;
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   &info, NULL),
			 -EINVAL);
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   NULL, NULL),
			 -EINVAL);
}

static void test_token_too_long(void **state)
{
	struct tern_boot_info info;
	char token[TERN_BOOT_TOKEN_MAX + 2];
	size_t n;

	(void)state;
	memset(token, 'x', TERN_BOOT_TOKEN_MAX + 1);
	token[TERN_BOOT_TOKEN_MAX + 1] = '\0';
	make_info(&info, 0);
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   &info, token),
			 -EINVAL);

	/* A 256-byte token, then its length field says 257 and the body
	 * grows by one byte to match. */
	token[TERN_BOOT_TOKEN_MAX] = '\0';
	n = encode(TERN_BOOT_HELLO, &info, token);
	msg[n] = 'x';
	n++;
	tern__wire_put_u32(msg + OFF_BODY_LEN, (uint32_t)(n - TERN_BOOT_HDR));
	tern__wire_put_u16(msg + OFF_TOKEN_LEN, TERN_BOOT_TOKEN_MAX + 1);
	refused(n, -TERN_EPROTO, "token of 257 bytes");
	/* Card and token longer than the body. */
	tern__wire_put_u16(msg + OFF_TOKEN_LEN, TERN_BOOT_TOKEN_MAX);
	tern__wire_put_u16(msg + OFF_CARD_LEN, TERN_CARD_MAX);
	refused(n, -TERN_EPROTO, "card and token beyond the body");
}

static void test_welcome_with_token(void **state)
{
	struct tern_boot_info info;
	size_t n;

	(void)state;
	make_info(&info, 1);
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_WELCOME,
					   &info, "t"),
			 -EINVAL);
	/* The same bytes are a fine HELLO. */
	n = build_hello();
	tern__wire_put_u16(msg + OFF_TYPE, TERN_BOOT_WELCOME);
	refused(n, -TERN_EPROTO, "welcome with a token");
}

static void test_too_many_descs(void **state)
{
	struct tern_boot_info info;
	ssize_t extra;
	size_t n;

	(void)state;
	n = build_hello();
	tern__wire_put_u16(msg + OFF_NDESC, TERN_BOOT_DESCS_MAX + 1);
	refused(n, -TERN_EDESC, "9 descriptors");
	tern__wire_put_u16(msg + OFF_NDESC, 0xffff);
	refused(n, -TERN_EDESC, "65535 descriptors");
	/* More descriptors announced than carried. */
	tern__wire_put_u16(msg + OFF_NDESC, 4);
	refused(n, -TERN_EDESC, "4 descriptors announced, 3 sent");
	/* Fewer: the last one is left over. */
	tern__wire_put_u16(msg + OFF_NDESC, 2);
	refused(n, -TERN_EPROTO, "2 descriptors announced, 3 sent");

	/* Nine well-formed descriptors. */
	make_info(&info, TERN_BOOT_DESCS_MAX);
	n = encode(TERN_BOOT_HELLO, &info, NULL);
	extra = tern_mr_desc_pack(&info.descs[0], msg + n, sizeof(msg) - n);
	assert_int_equal(extra, TERN_MR_DESC_PACKED_SIZE(1));
	n += (size_t)extra;
	tern__wire_put_u32(msg + OFF_BODY_LEN, (uint32_t)(n - TERN_BOOT_HDR));
	tern__wire_put_u16(msg + OFF_NDESC, TERN_BOOT_DESCS_MAX + 1);
	refused(n, -TERN_EDESC, "9 well-formed descriptors");

	info.ndesc = TERN_BOOT_DESCS_MAX + 1;
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   &info, NULL),
			 -EINVAL);
	/* A descriptor pack would refuse stops the encoder too. */
	make_info(&info, 2);
	info.descs[1].nkeys = 0;
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_HELLO,
					   &info, NULL),
			 -EINVAL);
}

static void test_bad_desc(void **state)
{
	size_t n, off;

	(void)state;
	n = build_hello();
	/* The second descriptor's version byte. */
	off = n - TERN_MR_DESC_PACKED_SIZE(3) - TERN_MR_DESC_PACKED_SIZE(2) + 4;
	assert_int_equal(msg[off], 1);
	msg[off] = 3;
	refused(n, -TERN_EVERSION, "descriptor of a newer version");
	/* Version 2 is a region in chunks: these flags carry none. */
	msg[off] = 2;
	refused(n, -TERN_EDESC, "descriptor of version 2 without chunks");
	msg[off] = 0;
	refused(n, -TERN_EDESC, "descriptor of version 0");
}

static void test_trailing(void **state)
{
	size_t n;

	(void)state;
	for (size_t extra = 1; extra <= 9; extra += 8) {
		n = build_hello();
		memset(msg + n, 0, extra);
		n += extra;
		tern__wire_put_u32(msg + OFF_BODY_LEN,
				   (uint32_t)(n - TERN_BOOT_HDR));
		assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
		refused(n, -TERN_EPROTO, "trailing bytes");
	}

	n = (size_t)tern__boot_encode_refuse(msg, sizeof(msg), TERN_EREFUSED,
					     "busy");
	msg[n] = 'x';
	n++;
	tern__wire_put_u32(msg + OFF_BODY_LEN, (uint32_t)(n - TERN_BOOT_HDR));
	refused(n, -TERN_EPROTO, "refuse with a trailing byte");
}

static void test_refuse_round_trip(void **state)
{
	struct tern__boot_msg m;
	ssize_t n;

	(void)state;
	n = tern__boot_encode_refuse(msg, sizeof(msg), TERN_EREFUSED,
				     "bad token");
	assert_int_equal(n, TERN_BOOT_HDR + 8 + 9);
	assert_int_equal(tern__wire_get_u16(msg + OFF_TYPE), TERN_BOOT_REFUSE);
	assert_int_equal(tern__wire_get_u16(msg + OFF_TEXT_LEN), 9);
	assert_int_equal(tern__boot_need(msg, (size_t)n, why, sizeof(why)), n);
	memset(&m, 0xff, sizeof(m));
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_int_equal(m.type, TERN_BOOT_REFUSE);
	assert_int_equal(m.version, TERN_BOOT_VERSION);
	assert_int_equal(m.code, TERN_EREFUSED);
	assert_string_equal(m.text, "bad token");

	/* No text, and the largest code. */
	n = tern__boot_encode_refuse(msg, sizeof(msg), 4096, "");
	assert_int_equal(n, TERN_BOOT_HDR + 8);
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_int_equal(m.code, 4096);
	assert_string_equal(m.text, "");
}

static void test_refuse_text(void **state)
{
	struct tern__boot_msg m;
	char text[TERN_BOOT_TEXT_MAX + 51];
	ssize_t n;

	(void)state;
	/* The encoder makes the text printable... */
	n = tern__boot_encode_refuse(msg, sizeof(msg), EBUSY,
				     "a\tb\x01"
				     "c\x7f\xc3\xa9!");
	assert_int_equal(n, TERN_BOOT_HDR + 8 + 9);
	assert_memory_equal(msg + OFF_TEXT, "a?b?c?\?\?!", 9);
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_string_equal(m.text, "a?b?c?\?\?!");

	/* ...and so does the decoder, whatever a peer put there. */
	n = tern__boot_encode_refuse(msg, sizeof(msg), EBUSY, "abcdef");
	msg[OFF_TEXT + 1] = 0;
	msg[OFF_TEXT + 3] = '\n';
	msg[OFF_TEXT + 5] = 0xff;
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_string_equal(m.text, "a?c?e?");

	/* Cut at 200 bytes. */
	memset(text, 'z', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	n = tern__boot_encode_refuse(msg, sizeof(msg), EBUSY, text);
	assert_int_equal(n, TERN_BOOT_HDR + 8 + TERN_BOOT_TEXT_MAX);
	assert_int_equal(decode((size_t)n, &m), 0);
	assert_int_equal(strlen(m.text), TERN_BOOT_TEXT_MAX);

	/* A peer's text length over 200 (with the body to match). */
	memset(msg + n, 'z', 1);
	tern__wire_put_u16(msg + OFF_TEXT_LEN, TERN_BOOT_TEXT_MAX + 1);
	tern__wire_put_u32(msg + OFF_BODY_LEN, 8 + TERN_BOOT_TEXT_MAX + 1);
	refused((size_t)n + 1, -TERN_EPROTO, "text of 201 bytes");
	/* A text length that disagrees with the body. */
	tern__wire_put_u16(msg + OFF_TEXT_LEN, 10);
	refused((size_t)n + 1, -TERN_EPROTO, "text length 10");
}

static void test_refuse_code(void **state)
{
	size_t n;

	(void)state;
	assert_int_equal(tern__boot_encode_refuse(msg, sizeof(msg), 0, "x"),
			 -EINVAL);
	assert_int_equal(tern__boot_encode_refuse(msg, sizeof(msg), 4097, "x"),
			 -EINVAL);
	n = (size_t)tern__boot_encode_refuse(msg, sizeof(msg), EBUSY, "x");
	tern__wire_put_u32(msg + TERN_BOOT_HDR, 0);
	refused(n, -TERN_EPROTO, "refuse code 0");
	tern__wire_put_u32(msg + TERN_BOOT_HDR, 4097);
	refused(n, -TERN_EPROTO, "refuse code 4097");
	tern__wire_put_u32(msg + TERN_BOOT_HDR, (uint32_t)-TERN_EREFUSED);
	refused(n, -TERN_EPROTO, "negative refuse code");
	/* Shorter than a refusal's body header. */
	tern__wire_put_u32(msg + OFF_BODY_LEN, 7);
	refused(TERN_BOOT_HDR + 7, -TERN_EPROTO, "refuse of 7 bytes");
}

static void test_unknown_type(void **state)
{
	static const uint16_t types[] = { 0, 4, 0x100, 0xffff };
	struct tern_boot_info info;
	size_t n;

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(types); i++) {
		n = build_hello();
		tern__wire_put_u16(msg + OFF_TYPE, types[i]);
		assert_int_equal(tern__boot_need(msg, n, why, sizeof(why)), n);
		refused(n, -TERN_EPROTO, "unknown type");
	}
	make_info(&info, 0);
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), TERN_BOOT_REFUSE,
					   &info, NULL),
			 -EINVAL);
	assert_int_equal(tern__boot_encode(msg, sizeof(msg), 0, &info, NULL),
			 -EINVAL);
}

/* Too small a buffer: -ENOSPC, and nothing written past its end. */
static void test_encode_no_space(void **state)
{
	static uint8_t buf[1024];
	struct tern_boot_info info;
	ssize_t n, ret;

	(void)state;
	make_info(&info, 3);
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info, "tok");
	assert_int_equal(n, info_size(&info, "tok"));
	for (size_t len = 0; len < (size_t)n; len++) {
		memset(buf, CANARY, sizeof(buf));
		ret = tern__boot_encode(buf, len, TERN_BOOT_HELLO, &info,
					"tok");
		if (ret != -ENOSPC)
			fail_msg("encode into %zu bytes: %zd", len, ret);
		for (size_t i = len; i < sizeof(buf); i++)
			if (buf[i] != CANARY)
				fail_msg("encode into %zu bytes wrote byte %zu",
					 len, i);
	}
	for (size_t len = 0; len < TERN_BOOT_HDR + 8 + 5; len++) {
		memset(buf, CANARY, sizeof(buf));
		ret = tern__boot_encode_refuse(buf, len, EBUSY, "hello");
		if (ret != -ENOSPC)
			fail_msg("refuse into %zu bytes: %zd", len, ret);
		for (size_t i = len; i < sizeof(buf); i++)
			if (buf[i] != CANARY)
				fail_msg("refuse into %zu bytes wrote byte %zu",
					 len, i);
	}
	/* A buffer of exactly the refusal's length: nothing past it (the
	 * text copy used to write a NUL one byte after the message). */
	for (size_t tl = 0; tl <= 5; tl++) {
		size_t len = TERN_BOOT_HDR + 8 + tl;

		memset(buf, CANARY, sizeof(buf));
		ret = tern__boot_encode_refuse(buf, len, EBUSY,
					       "hello" + (5 - tl));
		assert_int_equal(ret, len);
		for (size_t i = len; i < sizeof(buf); i++)
			if (buf[i] != CANARY)
				fail_msg("refuse of %zu bytes wrote byte %zu",
					 len, i);
	}
}

static void test_token_eq(void **state)
{
	static const uint8_t abc[] = "abc";
	uint8_t big[TERN_BOOT_TOKEN_MAX + 1];
	char want[TERN_BOOT_TOKEN_MAX + 2];

	(void)state;
	assert_true(tern__boot_token_eq(abc, 3, "abc"));
	assert_false(tern__boot_token_eq(abc, 3, "abd"));
	assert_false(tern__boot_token_eq(abc, 3, "xbc"));
	/* Bytes that differ only in their top bit. */
	assert_false(tern__boot_token_eq((const uint8_t *)"\xe9", 1, "i"));
	/* Prefixes either way. */
	assert_false(tern__boot_token_eq(abc, 2, "abc"));
	assert_false(tern__boot_token_eq(abc, 3, "ab"));
	/* The NUL after "abc" is not part of the token. */
	assert_false(tern__boot_token_eq(abc, 4, "abc"));
	/* No token sent, none wanted; one but not the other. */
	assert_true(tern__boot_token_eq(NULL, 0, NULL));
	assert_true(tern__boot_token_eq(NULL, 0, ""));
	assert_true(tern__boot_token_eq(abc, 0, NULL));
	assert_false(tern__boot_token_eq(NULL, 0, "abc"));
	assert_false(tern__boot_token_eq(abc, 3, NULL));
	assert_false(tern__boot_token_eq(abc, 3, ""));

	/* 256 bytes: equal, then the last byte differs. */
	memset(big, 'q', sizeof(big));
	memset(want, 'q', sizeof(want));
	want[TERN_BOOT_TOKEN_MAX] = '\0';
	assert_true(tern__boot_token_eq(big, TERN_BOOT_TOKEN_MAX, want));
	want[TERN_BOOT_TOKEN_MAX - 1] = 'r';
	assert_false(tern__boot_token_eq(big, TERN_BOOT_TOKEN_MAX, want));
	/* A wanted token over the limit never matches, even itself. */
	want[TERN_BOOT_TOKEN_MAX - 1] = 'q';
	want[TERN_BOOT_TOKEN_MAX] = 'q';
	want[TERN_BOOT_TOKEN_MAX + 1] = '\0';
	assert_false(tern__boot_token_eq(big, TERN_BOOT_TOKEN_MAX + 1, want));
}

static void split_ok(const char *addr, const char *host, const char *port)
{
	char h[64], p[16];
	int ret;

	why[0] = '\0';
	ret = tern__boot_split(addr, h, sizeof(h), p, sizeof(p), why,
			       sizeof(why));
	if (ret != 0)
		fail_msg("split '%s': %d (%s)", addr, ret, why);
	if (strcmp(h, host) != 0 || strcmp(p, port) != 0)
		fail_msg("split '%s': host '%s' port '%s', want '%s' '%s'",
			 addr, h, p, host, port);
}

static void split_bad(const char *addr)
{
	char h[64], p[16];
	int ret;

	why[0] = '\0';
	ret = tern__boot_split(addr, h, sizeof(h), p, sizeof(p), why,
			       sizeof(why));
	if (ret != -EINVAL)
		fail_msg("split '%s': %d, want -EINVAL", addr ? addr : "(null)",
			 ret);
	if (why[0] == '\0')
		fail_msg("split '%s': no reason given", addr ? addr : "(null)");
}

static void test_split(void **state)
{
	char dflt[8];

	(void)state;
	snprintf(dflt, sizeof(dflt), "%d", TERN_BOOT_PORT);
	split_ok("1.2.3.4:80", "1.2.3.4", "80");
	split_ok("[2001:db8::1]:7000", "2001:db8::1", "7000");
	split_ok("[::1]", "::1", dflt);
	split_ok("::1", "::1", dflt);
	split_ok("2001:db8::1", "2001:db8::1", dflt);
	split_ok(":7000", "", "7000");
	split_ok("host", "host", dflt);
	split_ok("host.example:0", "host.example", "0");
	split_ok("h:65535", "h", "65535");

	split_bad("[::1");
	split_bad("[::1]7000");
	split_bad("[::1]:");
	split_bad("h:99999");
	split_bad("h:65536");
	split_bad("h:123456");
	split_bad("h:");
	split_bad("h:12a");
	split_bad("h:-1");
	split_bad("");
	split_bad(NULL);
}

/* A host longer than the caller's buffer is refused. */
static void test_split_small_buffers(void **state)
{
	char h[4], p[3];

	(void)state;
	assert_int_equal(tern__boot_split("abc:80", h, sizeof(h), p, sizeof(p),
					  why, sizeof(why)),
			 0);
	assert_string_equal(h, "abc");
	assert_string_equal(p, "80");
	assert_int_equal(tern__boot_split("abcd:80", h, sizeof(h), p, sizeof(p),
					  why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(tern__boot_split("[abcd]:80", h, sizeof(h), p,
					  sizeof(p), why, sizeof(why)),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_round_trip),
		cmocka_unit_test(test_welcome_round_trip),
		cmocka_unit_test(test_largest),
		cmocka_unit_test(test_bad_card),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_version_zero),
		cmocka_unit_test(test_version_newer),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_body_too_large),
		cmocka_unit_test(test_card_len),
		cmocka_unit_test(test_token_too_long),
		cmocka_unit_test(test_welcome_with_token),
		cmocka_unit_test(test_too_many_descs),
		cmocka_unit_test(test_bad_desc),
		cmocka_unit_test(test_trailing),
		cmocka_unit_test(test_refuse_round_trip),
		cmocka_unit_test(test_refuse_text),
		cmocka_unit_test(test_refuse_code),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_encode_no_space),
		cmocka_unit_test(test_token_eq),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_split_small_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
