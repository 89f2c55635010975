/* SPDX-License-Identifier: MIT */
/* Random-fill protocol codecs and request checks. Every input is untrusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "apps/fill/proto.h"

static void put_hdr(uint8_t *p, uint16_t type, size_t len, uint64_t session)
{
	tern__put_u32(p, FILL_MAGIC);
	tern__put_u16(p + 4, FILL_VERSION);
	tern__put_u16(p + 6, type);
	tern__put_u32(p + 8, (uint32_t)len);
	tern__put_u32(p + 12, 0);
	tern__put_u64(p + 16, session);
}

int fill_hdr_parse(const void *buf, size_t len, struct fill_hdr *h)
{
	const uint8_t *p = buf;
	struct fill_hdr x;

	if (len < FILL_HDR)
		return -TERN_EPROTO;
	x.magic = tern__get_u32(p);
	x.version = tern__get_u16(p + 4);
	x.type = tern__get_u16(p + 6);
	x.length = tern__get_u32(p + 8);
	x.session = tern__get_u64(p + 16);
	if (x.magic != FILL_MAGIC)
		return -TERN_EPROTO;
	if (x.version != FILL_VERSION)
		return -TERN_EVERSION;
	if (x.length != len || tern__get_u32(p + 12) != 0)
		return -TERN_EPROTO;
	*h = x;
	return 0;
}

/* Parse a header and require @type and an exact body length (or at least
 * @min when @exact is 0). */
static int expect(const void *buf, size_t len, uint16_t type, size_t body,
		  int exact, struct fill_hdr *h)
{
	int ret = fill_hdr_parse(buf, len, h);

	if (ret != 0)
		return ret;
	if (h->type != type)
		return -TERN_EPROTO;
	if (exact ? len != FILL_HDR + body : len < FILL_HDR + body)
		return -TERN_EPROTO;
	return 0;
}

/*
 * CONNECT body: u16 card_len, u16 nregions, card, then nregions packed MR
 * descriptors. {header, card_len, card} is the same in every version.
 */
ssize_t fill_connect_encode(void *buf, size_t cap, uint64_t nonce,
			    const void *card, size_t card_len,
			    const struct tern_mr_desc *regions)
{
	uint8_t *p = buf;
	size_t off = FILL_HDR + 4;

	if (card_len == 0 || card_len > TERN_CARD_MAX)
		return -EINVAL;
	if (off + card_len > cap)
		return -ENOSPC;
	tern__put_u16(p + FILL_HDR, (uint16_t)card_len);
	tern__put_u16(p + FILL_HDR + 2, FILL_REGIONS);
	memcpy(p + off, card, card_len);
	off += card_len;
	for (int i = 0; i < FILL_REGIONS; i++) {
		ssize_t n = tern_mr_desc_pack(&regions[i], p + off, cap - off);

		if (n < 0)
			return n;
		off += (size_t)n;
	}
	put_hdr(p, FILL_CONNECT, off, nonce);
	return (ssize_t)off;
}

int fill_connect_card(const void *buf, size_t len, const uint8_t **card_p,
		      size_t *card_len_p)
{
	const uint8_t *p = buf;
	size_t card_len;

	if (len < FILL_HDR + 4 || tern__get_u32(p) != FILL_MAGIC ||
	    tern__get_u16(p + 6) != FILL_CONNECT)
		return -TERN_EPROTO;
	card_len = tern__get_u16(p + FILL_HDR);
	if (card_len == 0 || card_len > TERN_CARD_MAX ||
	    card_len > len - FILL_HDR - 4)
		return -TERN_EPROTO;
	*card_p = p + FILL_HDR + 4;
	*card_len_p = card_len;
	return 0;
}

int fill_connect_decode(const void *buf, size_t len, struct fill_connect *c)
{
	const uint8_t *p = buf;
	struct fill_connect x;
	struct fill_hdr h;
	size_t off;
	int ret;

	ret = expect(buf, len, FILL_CONNECT, 4, 0, &h);
	if (ret != 0)
		return ret;
	ret = fill_connect_card(buf, len, &x.card, &x.card_len);
	if (ret != 0)
		return ret;
	if (tern__get_u16(p + FILL_HDR + 2) != FILL_REGIONS)
		return -TERN_EPROTO;
	x.nonce = h.session;
	off = FILL_HDR + 4 + x.card_len;
	for (int i = 0; i < FILL_REGIONS; i++) {
		ssize_t n = tern_mr_desc_unpack(p + off, len - off,
						&x.regions[i]);

		if (n < 0)
			return (int)n;
		off += (size_t)n;
	}
	if (off != len)
		return -TERN_EPROTO;
	*c = x;
	return 0;
}

/* ACCEPT body: u64 nonce, u32 max_page_size, u32 max_pages, u64 max_bytes */
ssize_t fill_accept_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_accept *a)
{
	uint8_t *p = buf;
	size_t len = FILL_HDR + 24;

	if (cap < len)
		return -ENOSPC;
	put_hdr(p, FILL_ACCEPT, len, session);
	tern__put_u64(p + 24, a->nonce);
	tern__put_u32(p + 32, a->max_page_size);
	tern__put_u32(p + 36, a->max_pages);
	tern__put_u64(p + 40, a->max_bytes);
	return (ssize_t)len;
}

int fill_accept_decode(const void *buf, size_t len, struct fill_accept *a)
{
	const uint8_t *p = buf;
	struct fill_hdr h;
	int ret = expect(buf, len, FILL_ACCEPT, 24, 1, &h);

	if (ret != 0)
		return ret;
	a->nonce = tern__get_u64(p + 24);
	a->max_page_size = tern__get_u32(p + 32);
	a->max_pages = tern__get_u32(p + 36);
	a->max_bytes = tern__get_u64(p + 40);
	return 0;
}

/* REQUEST body: u32 id, u32 page_size, u64 seed, u32 count, u32 0, u32[] */
ssize_t fill_request_encode(void *buf, size_t cap, uint64_t session,
			    const struct fill_request *r,
			    const uint32_t *indices)
{
	uint8_t *p = buf;
	size_t len = FILL_HDR + 24 + 4 * (size_t)r->page_count;

	if (cap < len)
		return -ENOSPC;
	put_hdr(p, FILL_REQUEST, len, session);
	tern__put_u32(p + 24, r->id);
	tern__put_u32(p + 28, r->page_size);
	tern__put_u64(p + 32, r->seed);
	tern__put_u32(p + 40, r->page_count);
	tern__put_u32(p + 44, 0);
	for (uint32_t k = 0; k < r->page_count; k++)
		tern__put_u32(p + 48 + 4 * k, indices[k]);
	return (ssize_t)len;
}

int fill_request_decode(const void *buf, size_t len, struct fill_request *r)
{
	const uint8_t *p = buf;
	struct fill_hdr h;
	uint32_t count;
	int ret = expect(buf, len, FILL_REQUEST, 24, 0, &h);

	if (ret != 0)
		return ret;
	count = tern__get_u32(p + 40);
	if (tern__get_u32(p + 44) != 0)
		return -TERN_EPROTO;
	/* The index list must be exactly page_count long. */
	if ((len - FILL_HDR - 24) / 4 != count ||
	    (len - FILL_HDR - 24) % 4 != 0)
		return -TERN_EPROTO;
	r->id = tern__get_u32(p + 24);
	r->page_size = tern__get_u32(p + 28);
	r->seed = tern__get_u64(p + 32);
	r->page_count = count;
	r->indices = p + 48;
	return 0;
}

uint32_t fill_request_index(const struct fill_request *r, uint32_t k)
{
	return tern__get_u32(r->indices + 4 * (size_t)k);
}

/* RESULT body: u32 id, i32 status, u64 bytes, u64 write_ns */
ssize_t fill_result_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_result *r)
{
	uint8_t *p = buf;
	size_t len = FILL_HDR + 24;

	if (cap < len)
		return -ENOSPC;
	put_hdr(p, FILL_RESULT, len, session);
	tern__put_u32(p + 24, r->id);
	tern__put_u32(p + 28, (uint32_t)r->status);
	tern__put_u64(p + 32, r->bytes);
	tern__put_u64(p + 40, r->write_ns);
	return (ssize_t)len;
}

int fill_result_decode(const void *buf, size_t len, struct fill_result *r)
{
	const uint8_t *p = buf;
	struct fill_hdr h;
	int ret = expect(buf, len, FILL_RESULT, 24, 1, &h);

	if (ret != 0)
		return ret;
	r->id = tern__get_u32(p + 24);
	r->status = (int32_t)tern__get_u32(p + 28);
	r->bytes = tern__get_u64(p + 32);
	r->write_ns = tern__get_u64(p + 40);
	return 0;
}

/* ERROR body: u32 id, i32 code, u16 text_len, text (printable ASCII) */
ssize_t fill_error_encode(void *buf, size_t cap, uint64_t session, uint32_t id,
			  int32_t code, const char *text)
{
	size_t tlen = TERN_MIN(strlen(text), (size_t)FILL_TEXT_MAX);
	size_t len = FILL_HDR + 10 + tlen;
	uint8_t *p = buf;

	if (cap < len)
		return -ENOSPC;
	put_hdr(p, FILL_ERROR, len, session);
	tern__put_u32(p + 24, id);
	tern__put_u32(p + 28, (uint32_t)code);
	tern__put_u16(p + 32, (uint16_t)tlen);
	memcpy(p + 34, text, tlen);
	return (ssize_t)len;
}

int fill_error_decode(const void *buf, size_t len, struct fill_error *e)
{
	const uint8_t *p = buf;
	struct fill_hdr h;
	size_t tlen;
	int ret = expect(buf, len, FILL_ERROR, 10, 0, &h);

	if (ret != 0)
		return ret;
	tlen = tern__get_u16(p + 32);
	if (tlen > FILL_TEXT_MAX || len != FILL_HDR + 10 + tlen)
		return -TERN_EPROTO;
	e->id = tern__get_u32(p + 24);
	e->code = (int32_t)tern__get_u32(p + 28);
	/* The text is shown to a user: keep printable ASCII only. */
	for (size_t i = 0; i < tlen; i++) {
		char c = (char)p[34 + i];

		e->text[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
	}
	e->text[tlen] = '\0';
	return 0;
}

ssize_t fill_bye_encode(void *buf, size_t cap, uint64_t session)
{
	if (cap < FILL_HDR)
		return -ENOSPC;
	put_hdr(buf, FILL_BYE, FILL_HDR, session);
	return FILL_HDR;
}

uint64_t fill_region_pages(uint64_t len, uint32_t page_size)
{
	return page_size ? len / page_size : 0;
}

int fill_page_target(const struct tern_mr_desc *regions, uint32_t page_size,
		     uint32_t index, unsigned int *region_p, uint64_t *offset_p)
{
	uint64_t i = index;

	for (unsigned int r = 0; r < FILL_REGIONS; r++) {
		uint64_t n = fill_region_pages(regions[r].len, page_size);

		if (i < n) {
			*region_p = r;
			*offset_p = i * page_size;
			return 0;
		}
		i -= n;
	}
	return -TERN_EBOUNDS;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int fill_request_check(const struct fill_request *r,
		       const struct tern_mr_desc *regions, uint32_t *scratch,
		       char *why, size_t whylen)
{
	uint64_t total = 0;

	for (int i = 0; i < FILL_REGIONS; i++)
		total += fill_region_pages(regions[i].len, r->page_size);
	if (r->page_size == 0 || r->page_size > FILL_MAX_PAGE_SIZE) {
		snprintf(why, whylen, "page size %u outside [1, %u]",
			 r->page_size, FILL_MAX_PAGE_SIZE);
		return -TERN_EREFUSED;
	}
	if (r->page_count == 0 || r->page_count > FILL_MAX_PAGES) {
		snprintf(why, whylen, "page count %u outside [1, %u]",
			 r->page_count, FILL_MAX_PAGES);
		return -TERN_EREFUSED;
	}
	if ((uint64_t)r->page_size * r->page_count > FILL_MAX_BYTES) {
		snprintf(why, whylen,
			 "%u pages of %u bytes exceed the %u-byte limit",
			 r->page_count, r->page_size, FILL_MAX_BYTES);
		return -TERN_EREFUSED;
	}
	for (uint32_t k = 0; k < r->page_count; k++) {
		scratch[k] = fill_request_index(r, k);
		if (scratch[k] >= total) {
			snprintf(why, whylen,
				 "page index %u (entry %u) outside the %llu "
				 "pages of %u bytes your regions hold",
				 scratch[k], k, (unsigned long long)total,
				 r->page_size);
			return -TERN_EBOUNDS;
		}
	}
	qsort(scratch, r->page_count, sizeof(*scratch), cmp_u32);
	for (uint32_t k = 1; k < r->page_count; k++) {
		if (scratch[k] == scratch[k - 1]) {
			snprintf(why, whylen, "page index %u listed twice",
				 scratch[k]);
			return -TERN_EREFUSED;
		}
	}
	return 0;
}
