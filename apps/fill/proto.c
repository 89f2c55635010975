/* SPDX-License-Identifier: MIT */
/* Random-fill protocol codecs and request checks. Every input is untrusted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/proto.h"

static void put_hdr(struct tern__wr *w, uint16_t type, size_t len,
		    uint64_t session)
{
	tern__wr_u32(w, FILL_MAGIC);
	tern__wr_u16(w, FILL_VERSION);
	tern__wr_u16(w, type);
	tern__wr_u32(w, (uint32_t)len);
	tern__wr_u32(w, 0);
	tern__wr_u64(w, session);
}

int fill_hdr_parse(const void *buf, size_t len, struct fill_hdr *h)
{
	struct tern__rd r;
	struct fill_hdr x;
	uint32_t reserved;

	if (len < FILL_HDR)
		return -TERN_EPROTO;
	tern__rd_init(&r, buf, len);
	x.magic = tern__rd_u32(&r);
	x.version = tern__rd_u16(&r);
	x.type = tern__rd_u16(&r);
	x.length = tern__rd_u32(&r);
	reserved = tern__rd_u32(&r);
	x.session = tern__rd_u64(&r);
	if (!tern__rd_ok(&r) || x.magic != FILL_MAGIC)
		return -TERN_EPROTO;
	if (x.version != FILL_VERSION)
		return -TERN_EVERSION;
	if (x.length != len || reserved != 0)
		return -TERN_EPROTO;
	*h = x;
	return 0;
}

/* Parse a header and require @type and an exact body length (or at least
 * @min when @exact is 0). On success @r is at the body. */
static int expect(const void *buf, size_t len, uint16_t type, size_t body,
		  int exact, struct fill_hdr *h, struct tern__rd *r)
{
	int ret = fill_hdr_parse(buf, len, h);

	if (ret != 0)
		return ret;
	if (h->type != type)
		return -TERN_EPROTO;
	if (exact ? len != FILL_HDR + body : len < FILL_HDR + body)
		return -TERN_EPROTO;
	tern__rd_init(r, buf, len);
	tern__rd_take(r, FILL_HDR);
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
	return fill_connect_encode_ticket(buf, cap, nonce, card, card_len,
					  regions, NULL, 0);
}

ssize_t fill_connect_encode_ticket(void *buf, size_t cap, uint64_t nonce,
				   const void *card, size_t card_len,
				   const struct tern_mr_desc *regions,
				   const void *ticket, size_t ticket_len)
{
	struct tern__wr w, h;
	ssize_t len;

	if (card_len == 0 || card_len > TERN_CARD_MAX ||
	    (ticket_len != 0 && ticket_len != FILL_TICKET_LEN) ||
	    (ticket_len != 0 && ticket == NULL))
		return -EINVAL;
	if (FILL_HDR + 4 + card_len > cap)
		return -ENOSPC;
	/* The body first: the header holds the whole length. */
	tern__wr_init(&w, buf, cap);
	tern__wr_take(&w, FILL_HDR);
	tern__wr_u16(&w, (uint16_t)card_len);
	tern__wr_u16(&w, FILL_REGIONS);
	tern__wr_bytes(&w, card, card_len);
	for (int i = 0; i < FILL_REGIONS; i++) {
		ssize_t n = tern_mr_desc_pack(&regions[i], tern__wr_ptr(&w),
					      tern__wr_left(&w));

		if (n < 0)
			return n;
		tern__wr_take(&w, (size_t)n);
	}
	/* Optional trailer: u16 ticket_len, u16 zero, the ticket. */
	if (ticket_len != 0) {
		tern__wr_u16(&w, (uint16_t)ticket_len);
		tern__wr_u16(&w, 0);
		tern__wr_bytes(&w, ticket, ticket_len);
	}
	len = tern__wr_end(&w);
	if (len < 0)
		return len;
	tern__wr_init(&h, buf, FILL_HDR);
	put_hdr(&h, FILL_CONNECT, (size_t)len, nonce);
	return len;
}

int fill_connect_card(const void *buf, size_t len, const uint8_t **card_p,
		      size_t *card_len_p)
{
	struct tern__rd r;
	uint32_t magic;
	uint16_t type;
	size_t card_len;

	/* Magic and type only: the prefix read here is that of every
	 * version, so a newer client's card can still be read. */
	tern__rd_init(&r, buf, len);
	magic = tern__rd_u32(&r);
	tern__rd_u16(&r); /* version */
	type = tern__rd_u16(&r);
	tern__rd_take(&r, FILL_HDR - 8);
	card_len = tern__rd_u16(&r);
	tern__rd_u16(&r); /* nregions */
	if (!tern__rd_ok(&r) || magic != FILL_MAGIC || type != FILL_CONNECT)
		return -TERN_EPROTO;
	if (card_len == 0 || card_len > TERN_CARD_MAX ||
	    card_len > tern__rd_left(&r))
		return -TERN_EPROTO;
	*card_p = tern__rd_take(&r, card_len);
	*card_len_p = card_len;
	return 0;
}

int fill_connect_decode(const void *buf, size_t len, struct fill_connect *c)
{
	struct fill_connect x;
	struct fill_hdr h;
	struct tern__rd r;
	int ret;

	ret = expect(buf, len, FILL_CONNECT, 4, 0, &h, &r);
	if (ret != 0)
		return ret;
	ret = fill_connect_card(buf, len, &x.card, &x.card_len);
	if (ret != 0)
		return ret;
	tern__rd_u16(&r); /* card_len, checked above */
	if (tern__rd_u16(&r) != FILL_REGIONS)
		return -TERN_EPROTO;
	tern__rd_take(&r, x.card_len);
	x.nonce = h.session;
	for (int i = 0; i < FILL_REGIONS; i++) {
		ssize_t n = tern_mr_desc_unpack(
			tern__rd_ptr(&r), tern__rd_left(&r), &x.regions[i]);

		if (n < 0)
			return (int)n;
		tern__rd_take(&r, (size_t)n);
	}
	x.ticket = NULL;
	x.ticket_len = 0;
	if (tern__rd_ok(&r) && tern__rd_left(&r) != 0) {
		/* The ticket trailer: exactly u16 16, u16 0, 16 bytes. */
		x.ticket_len = tern__rd_u16(&r);
		if (tern__rd_u16(&r) != 0 || x.ticket_len != FILL_TICKET_LEN ||
		    tern__rd_left(&r) != FILL_TICKET_LEN)
			return -TERN_EPROTO;
		x.ticket = tern__rd_take(&r, FILL_TICKET_LEN);
	}
	if (!tern__rd_ok(&r) || tern__rd_left(&r) != 0)
		return -TERN_EPROTO;
	*c = x;
	return 0;
}

/* ACCEPT body: u64 nonce, u32 max_page_size, u32 max_pages, u64 max_bytes */
ssize_t fill_accept_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_accept *a)
{
	size_t len = FILL_HDR + 24;
	struct tern__wr w;

	if (cap < len)
		return -ENOSPC;
	tern__wr_init(&w, buf, len);
	put_hdr(&w, FILL_ACCEPT, len, session);
	tern__wr_u64(&w, a->nonce);
	tern__wr_u32(&w, a->max_page_size);
	tern__wr_u32(&w, a->max_pages);
	tern__wr_u64(&w, a->max_bytes);
	return tern__wr_end(&w);
}

int fill_accept_decode(const void *buf, size_t len, struct fill_accept *a)
{
	struct fill_hdr h;
	struct tern__rd r;
	int ret = expect(buf, len, FILL_ACCEPT, 24, 1, &h, &r);

	if (ret != 0)
		return ret;
	a->nonce = tern__rd_u64(&r);
	a->max_page_size = tern__rd_u32(&r);
	a->max_pages = tern__rd_u32(&r);
	a->max_bytes = tern__rd_u64(&r);
	return 0;
}

/* REQUEST body: u32 id, u32 page_size, u64 seed, u32 count, u32 0, u32[] */
ssize_t fill_request_encode(void *buf, size_t cap, uint64_t session,
			    const struct fill_request *r,
			    const uint32_t *indices)
{
	size_t len = FILL_HDR + 24 + 4 * (size_t)r->page_count;
	struct tern__wr w;

	if (cap < len)
		return -ENOSPC;
	tern__wr_init(&w, buf, len);
	put_hdr(&w, FILL_REQUEST, len, session);
	tern__wr_u32(&w, r->id);
	tern__wr_u32(&w, r->page_size);
	tern__wr_u64(&w, r->seed);
	tern__wr_u32(&w, r->page_count);
	tern__wr_u32(&w, 0);
	for (uint32_t k = 0; k < r->page_count; k++)
		tern__wr_u32(&w, indices[k]);
	return tern__wr_end(&w);
}

int fill_request_decode(const void *buf, size_t len, struct fill_request *r)
{
	struct fill_hdr h;
	struct tern__rd rd;
	uint32_t id, page_size, count, reserved;
	uint64_t seed;
	size_t left;
	int ret = expect(buf, len, FILL_REQUEST, 24, 0, &h, &rd);

	if (ret != 0)
		return ret;
	id = tern__rd_u32(&rd);
	page_size = tern__rd_u32(&rd);
	seed = tern__rd_u64(&rd);
	count = tern__rd_u32(&rd);
	reserved = tern__rd_u32(&rd);
	if (reserved != 0)
		return -TERN_EPROTO;
	/* The index list must be exactly page_count long. */
	left = tern__rd_left(&rd);
	if (left / 4 != count || left % 4 != 0)
		return -TERN_EPROTO;
	r->id = id;
	r->page_size = page_size;
	r->seed = seed;
	r->page_count = count;
	r->indices = tern__rd_take(&rd, left);
	return 0;
}

/* Entry @k of a decoded request's index list, whose length
 * fill_request_decode() checked. */
uint32_t fill_request_index(const struct fill_request *r, uint32_t k)
{
	return tern__wire_get_u32(r->indices + 4 * (size_t)k);
}

/* RESULT body: u32 id, i32 status, u64 bytes, u64 write_ns */
ssize_t fill_result_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_result *r)
{
	size_t len = FILL_HDR + 24;
	struct tern__wr w;

	if (cap < len)
		return -ENOSPC;
	tern__wr_init(&w, buf, len);
	put_hdr(&w, FILL_RESULT, len, session);
	tern__wr_u32(&w, r->id);
	tern__wr_u32(&w, (uint32_t)r->status);
	tern__wr_u64(&w, r->bytes);
	tern__wr_u64(&w, r->write_ns);
	return tern__wr_end(&w);
}

int fill_result_decode(const void *buf, size_t len, struct fill_result *r)
{
	struct fill_hdr h;
	struct tern__rd rd;
	int ret = expect(buf, len, FILL_RESULT, 24, 1, &h, &rd);

	if (ret != 0)
		return ret;
	r->id = tern__rd_u32(&rd);
	r->status = (int32_t)tern__rd_u32(&rd);
	r->bytes = tern__rd_u64(&rd);
	r->write_ns = tern__rd_u64(&rd);
	return 0;
}

/* ERROR body: u32 id, i32 code, u16 text_len, text (printable ASCII) */
ssize_t fill_error_encode(void *buf, size_t cap, uint64_t session, uint32_t id,
			  int32_t code, const char *text)
{
	size_t tlen = TERN_MIN(strlen(text), (size_t)FILL_TEXT_MAX);
	size_t len = FILL_HDR + 10 + tlen;
	struct tern__wr w;

	if (cap < len)
		return -ENOSPC;
	tern__wr_init(&w, buf, len);
	put_hdr(&w, FILL_ERROR, len, session);
	tern__wr_u32(&w, id);
	tern__wr_u32(&w, (uint32_t)code);
	tern__wr_u16(&w, (uint16_t)tlen);
	tern__wr_bytes(&w, text, tlen);
	return tern__wr_end(&w);
}

int fill_error_decode(const void *buf, size_t len, struct fill_error *e)
{
	struct fill_hdr h;
	struct tern__rd r;
	const uint8_t *text;
	uint32_t id, code;
	size_t tlen;
	int ret = expect(buf, len, FILL_ERROR, 10, 0, &h, &r);

	if (ret != 0)
		return ret;
	id = tern__rd_u32(&r);
	code = tern__rd_u32(&r);
	tlen = tern__rd_u16(&r);
	if (tlen > FILL_TEXT_MAX || tern__rd_left(&r) != tlen)
		return -TERN_EPROTO;
	e->id = id;
	e->code = (int32_t)code;
	/* The text is shown to a user: keep printable ASCII only. */
	text = tern__rd_take(&r, tlen);
	for (size_t i = 0; i < tlen; i++) {
		char c = (char)text[i];

		e->text[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
	}
	e->text[tlen] = '\0';
	return 0;
}

ssize_t fill_bye_encode(void *buf, size_t cap, uint64_t session)
{
	struct tern__wr w;

	if (cap < FILL_HDR)
		return -ENOSPC;
	tern__wr_init(&w, buf, FILL_HDR);
	put_hdr(&w, FILL_BYE, FILL_HDR, session);
	return tern__wr_end(&w);
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

void fill_connect_why(const void *buf, size_t len, int err, char *why,
		      size_t whylen)
{
	const uint8_t *p = buf;
	size_t card_len, nreg;
	uint32_t reserved;

	if (len < FILL_HDR + 4) {
		snprintf(why, whylen,
			 "shorter than its header and counts (%d bytes)",
			 FILL_HDR + 4);
		return;
	}
	reserved = tern__wire_get_u32(p + 12);
	card_len = tern__wire_get_u16(p + FILL_HDR);
	nreg = tern__wire_get_u16(p + FILL_HDR + 2);
	if (tern__wire_get_u32(p + 8) != len)
		snprintf(why, whylen, "length field says %u bytes; %zu arrived",
			 tern__wire_get_u32(p + 8), len);
	else if (reserved != 0)
		snprintf(why, whylen,
			 "header's reserved field is 0x%08x; it must be 0",
			 reserved);
	else if (card_len == 0 || card_len > TERN_CARD_MAX ||
		 card_len > len - FILL_HDR - 4)
		snprintf(why, whylen,
			 "card_len %zu: must be 1..%d and fit the message",
			 card_len, TERN_CARD_MAX);
	else if (nreg != FILL_REGIONS)
		snprintf(why, whylen,
			 "nregions %zu: this server takes exactly %d", nreg,
			 FILL_REGIONS);
	else if (err == -TERN_EDESC || err == -TERN_EVERSION)
		snprintf(why, whylen, "region descriptor: %s",
			 tern_strerror(err));
	else
		snprintf(why, whylen,
			 "bytes after the regions are not a ticket trailer "
			 "(u16 %d, u16 0, %d bytes)",
			 FILL_TICKET_LEN, FILL_TICKET_LEN);
}
