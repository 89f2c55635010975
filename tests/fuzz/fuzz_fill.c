/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the random-fill protocol (apps/fill/proto.h): every
 * decoder sees every input. What decodes must encode to the same bytes
 * and decode to the same fields, and a request the server's check passes
 * must land inside the client's regions. Any mismatch aborts. Each input
 * is tried as it is and with its header's length set to its size.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[FILL_MSG_MAX];
static uint32_t scratch[FILL_MAX_PAGES];

static void want(int ok)
{
	if (!ok)
		abort();
}

static int known(int ret)
{
	return ret == -TERN_EPROTO || ret == -TERN_EVERSION ||
	       ret == -TERN_EDESC;
}

/* A page the server would write: inside its region, whole. */
static void check_target(const struct tern_mr_desc *regions, uint32_t page_size,
			 uint32_t index, int must)
{
	unsigned int r = FILL_REGIONS;
	uint64_t off = UINT64_MAX;
	int ret = fill_page_target(regions, page_size, index, &r, &off);

	if (ret == -TERN_EBOUNDS && !must)
		return;
	want(ret == 0 && r < FILL_REGIONS && page_size != 0 &&
	     off % page_size == 0 && off <= regions[r].len &&
	     page_size <= regions[r].len - off);
}

static void fuzz_connect(const uint8_t *data, size_t size)
{
	struct fill_connect c, c2;
	const uint8_t *card;
	size_t card_len;
	ssize_t n;
	int ret;

	ret = fill_connect_card(data, size, &card, &card_len);
	if (ret == 0)
		want(card_len != 0 && card_len <= TERN_CARD_MAX &&
		     card >= data && card_len <= size &&
		     card - data <= (ptrdiff_t)(size - card_len));
	else
		want(ret == -TERN_EPROTO);

	ret = fill_connect_decode(data, size, &c);
	if (ret != 0) {
		want(known(ret));
		return;
	}
	n = fill_connect_encode_ticket(out, sizeof(out), c.nonce, c.card,
				       c.card_len, c.regions, c.ticket,
				       c.ticket_len);
	want(n >= 0 && (size_t)n == size && memcmp(out, data, size) == 0);
	want(fill_connect_decode(out, (size_t)n, &c2) == 0);
	want(c2.nonce == c.nonce && c2.card_len == c.card_len &&
	     memcmp(c2.card, c.card, c.card_len) == 0 &&
	     memcmp(c2.regions, c.regions, sizeof(c.regions)) == 0 &&
	     c2.ticket_len == c.ticket_len &&
	     (c.ticket_len == 0 ||
	      memcmp(c2.ticket, c.ticket, c.ticket_len) == 0));

	/* The client's regions as the server would use them. */
	check_target(c.regions, (uint32_t)c.nonce, (uint32_t)(c.nonce >> 32),
		     0);
	check_target(c.regions, 4096, (uint32_t)c.nonce, 0);
}

static void fuzz_accept(const uint8_t *data, size_t size)
{
	struct fill_accept a, a2;
	struct fill_hdr h;
	ssize_t n;
	int ret = fill_accept_decode(data, size, &a);

	if (ret != 0) {
		want(known(ret));
		return;
	}
	want(fill_hdr_parse(data, size, &h) == 0);
	n = fill_accept_encode(out, sizeof(out), h.session, &a);
	want(n >= 0 && (size_t)n == size && memcmp(out, data, size) == 0);
	want(fill_accept_decode(out, (size_t)n, &a2) == 0 &&
	     memcmp(&a, &a2, sizeof(a)) == 0);
}

static void fuzz_request(const uint8_t *data, size_t size)
{
	/* The client's two regions: 1 MiB and 64 KiB. */
	static const struct tern_mr_desc regions[FILL_REGIONS] = {
		{ .base = 0x10000000, .len = 1 << 20, .nkeys = 1 },
		{ .base = 0x20000000, .len = 1 << 16, .nkeys = 1 },
	};
	struct fill_request r, r2;
	struct fill_hdr h;
	uint32_t *idx;
	char why[256];
	ssize_t n;
	int ret = fill_request_decode(data, size, &r);

	if (ret != 0) {
		want(known(ret));
		return;
	}
	want(r.indices == data + 48 && (size - 48) / 4 == r.page_count &&
	     (size - 48) % 4 == 0);
	want(fill_hdr_parse(data, size, &h) == 0);
	idx = malloc(4 * (size_t)r.page_count + 1);
	want(idx != NULL);
	for (uint32_t k = 0; k < r.page_count; k++)
		idx[k] = fill_request_index(&r, k);
	n = fill_request_encode(out, sizeof(out), h.session, &r, idx);
	want(n >= 0 && (size_t)n == size && memcmp(out, data, size) == 0);
	want(fill_request_decode(out, (size_t)n, &r2) == 0 && r2.id == r.id &&
	     r2.page_size == r.page_size && r2.seed == r.seed &&
	     r2.page_count == r.page_count);

	ret = fill_request_check(&r, regions, scratch, why, sizeof(why));
	if (ret == 0) {
		want(r.page_size != 0 && r.page_size <= FILL_MAX_PAGE_SIZE &&
		     r.page_count != 0 && r.page_count <= FILL_MAX_PAGES &&
		     (uint64_t)r.page_size * r.page_count <= FILL_MAX_BYTES);
		for (uint32_t k = 0; k < r.page_count; k++)
			check_target(regions, r.page_size, idx[k], 1);
	} else {
		want(ret == -TERN_EREFUSED || ret == -TERN_EBOUNDS);
	}
	free(idx);
}

static void fuzz_result(const uint8_t *data, size_t size)
{
	struct fill_result r, r2;
	struct fill_hdr h;
	ssize_t n;
	int ret = fill_result_decode(data, size, &r);

	if (ret != 0) {
		want(known(ret));
		return;
	}
	want(fill_hdr_parse(data, size, &h) == 0);
	n = fill_result_encode(out, sizeof(out), h.session, &r);
	want(n >= 0 && (size_t)n == size && memcmp(out, data, size) == 0);
	want(fill_result_decode(out, (size_t)n, &r2) == 0 &&
	     memcmp(&r, &r2, sizeof(r)) == 0);
}

static void fuzz_error(const uint8_t *data, size_t size)
{
	struct fill_error e, e2;
	struct fill_hdr h;
	size_t tl;
	ssize_t n;
	int ret = fill_error_decode(data, size, &e);

	if (ret != 0) {
		want(known(ret));
		return;
	}
	tl = strlen(e.text);
	want(tl <= FILL_TEXT_MAX && size == FILL_HDR + 10 + tl);
	for (size_t i = 0; i < tl; i++)
		want(e.text[i] >= 0x20 && e.text[i] < 0x7f);
	want(fill_hdr_parse(data, size, &h) == 0);
	n = fill_error_encode(out, sizeof(out), h.session, e.id, e.code,
			      e.text);
	want(n >= 0 && (size_t)n == size);
	/* The same bytes, unless the decoder replaced unprintable ones. */
	if (memcmp(data + 34, e.text, tl) == 0)
		want(memcmp(out, data, size) == 0);
	want(fill_error_decode(out, (size_t)n, &e2) == 0 && e2.id == e.id &&
	     e2.code == e.code && strcmp(e2.text, e.text) == 0);
}

static void check_msg(const uint8_t *data, size_t size)
{
	struct fill_hdr h;
	int ret;

	ret = fill_hdr_parse(data, size, &h);
	if (ret == 0)
		want(h.magic == FILL_MAGIC && h.version == FILL_VERSION &&
		     h.length == size && size >= FILL_HDR);
	else
		want(ret == -TERN_EPROTO || ret == -TERN_EVERSION);

	fuzz_connect(data, size);
	fuzz_accept(data, size);
	fuzz_request(data, size);
	fuzz_result(data, size);
	fuzz_error(data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint16_t type;

	check_msg(data, size);

	/* Again with the header's length (and those of an ERROR's text and a
	 * REQUEST's index list) made right, so the fuzzer need not find them
	 * to reach the checks behind them. */
	if (size < FILL_HDR || tern__wire_get_u32(data + 8) == size ||
	    size > UINT32_MAX)
		return 0;
	fixed = malloc(size);
	want(fixed != NULL);
	memcpy(fixed, data, size);
	tern__wire_put_u32(fixed + 8, (uint32_t)size);
	type = tern__wire_get_u16(fixed + 6);
	if (type == FILL_ERROR && size >= FILL_HDR + 10 &&
	    size - FILL_HDR - 10 <= UINT16_MAX)
		tern__wire_put_u16(fixed + 32,
				   (uint16_t)(size - FILL_HDR - 10));
	if (type == FILL_REQUEST && size >= FILL_HDR + 24)
		tern__wire_put_u32(fixed + 40,
				   (uint32_t)((size - FILL_HDR - 24) / 4));
	check_msg(fixed, size);
	free(fixed);
	return 0;
}
