/* SPDX-License-Identifier: MIT */
/* The bootstrap handshake's codec (boot.h, docs/protocol.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "boot.h"
#include "card.h"
#include "wire.h"
#include "../core/core.h"

#define BODY_HDR 8

/* The 16-byte header, every field read (none checked yet). */
struct hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t body;
	uint32_t reserved;
};

static int read_hdr(const uint8_t *buf, size_t len, struct hdr *h)
{
	struct tern__rd r;

	tern__rd_init(&r, buf, len);
	h->magic = tern__rd_u32(&r);
	h->version = tern__rd_u16(&r);
	h->type = tern__rd_u16(&r);
	h->body = tern__rd_u32(&r);
	h->reserved = tern__rd_u32(&r);
	return tern__rd_ok(&r);
}

ssize_t tern__boot_need(const uint8_t *buf, size_t len, char *why,
			size_t whylen)
{
	struct hdr h;

	if (!read_hdr(buf, len, &h))
		return 0;
	if (h.magic != TERN_BOOT_MAGIC) {
		snprintf(why, whylen,
			 "not a tern bootstrap message (magic 0x%08x)",
			 h.magic);
		return -TERN_EPROTO;
	}
	if (h.version == 0) {
		snprintf(why, whylen, "bootstrap version 0 is not valid");
		return -TERN_EPROTO;
	}
	/* A newer peer's message is read whole (within the size cap) so a
	 * refusal can be answered in our version. */
	if (h.reserved != 0 && h.version == TERN_BOOT_VERSION) {
		snprintf(why, whylen, "reserved header field is not zero");
		return -TERN_EPROTO;
	}
	if (h.body > TERN_BOOT_BODY_MAX) {
		snprintf(why, whylen,
			 "message body of %u bytes (the limit is %u)", h.body,
			 (unsigned int)TERN_BOOT_BODY_MAX);
		return -TERN_EPROTO;
	}
	return (ssize_t)(TERN_BOOT_HDR + h.body);
}

/* Printable ASCII only: a peer's text goes into our logs. */
static void printable(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
}

static int decode_info(const uint8_t *p, size_t n, struct tern__boot_msg *m,
		       char *why, size_t whylen)
{
	struct tern__card card;
	struct tern__rd r;
	size_t card_len, token_len, ndesc;
	const uint8_t *cp;
	uint16_t reserved;
	char cwhy[128];

	tern__rd_init(&r, p, n);
	card_len = tern__rd_u16(&r);
	token_len = tern__rd_u16(&r);
	ndesc = tern__rd_u16(&r);
	reserved = tern__rd_u16(&r);
	if (!tern__rd_ok(&r)) {
		snprintf(why, whylen, "hello body of %zu bytes is truncated",
			 n);
		return -TERN_EPROTO;
	}
	if (reserved != 0) {
		snprintf(why, whylen, "reserved hello field is not zero");
		return -TERN_EPROTO;
	}
	if (card_len == 0 || card_len > TERN_CARD_MAX) {
		snprintf(why, whylen, "card of %zu bytes (must be 1..%d)",
			 card_len, TERN_CARD_MAX);
		return -TERN_ECARD;
	}
	if (m->type == TERN_BOOT_WELCOME && token_len != 0 &&
	    token_len != TERN_BOOT_TICKET_LEN) {
		snprintf(why, whylen,
			 "welcome ticket of %zu bytes (must be 0 or %d)",
			 token_len, TERN_BOOT_TICKET_LEN);
		return -TERN_EPROTO;
	}
	if (token_len > TERN_BOOT_TOKEN_MAX) {
		snprintf(why, whylen, "token of %zu bytes (the limit is %d)",
			 token_len, TERN_BOOT_TOKEN_MAX);
		return -TERN_EPROTO;
	}
	if (ndesc > TERN_BOOT_DESCS_MAX) {
		snprintf(why, whylen,
			 "%zu memory descriptors (the limit is %d)", ndesc,
			 TERN_BOOT_DESCS_MAX);
		return -TERN_EDESC;
	}
	if (tern__rd_left(&r) < card_len + token_len) {
		snprintf(why, whylen,
			 "hello of %zu bytes cannot hold a %zu-byte card and a "
			 "%zu-byte token",
			 n, card_len, token_len);
		return -TERN_EPROTO;
	}
	cp = tern__rd_take(&r, card_len);
	if (tern__card_parse(cp, card_len, &card, cwhy, sizeof(cwhy))) {
		snprintf(why, whylen, "bad card: %s", cwhy);
		return -TERN_ECARD;
	}
	memcpy(m->info.card, cp, card_len);
	m->info.card_len = card_len;
	m->token = token_len ? tern__rd_take(&r, token_len) : NULL;
	m->token_len = token_len;
	if (m->type == TERN_BOOT_WELCOME && token_len != 0) {
		memcpy(m->info.ticket, m->token, token_len);
		m->info.ticket_len = token_len;
	}
	for (size_t i = 0; i < ndesc; i++) {
		ssize_t used = tern_mr_desc_unpack(
			tern__rd_ptr(&r), tern__rd_left(&r), &m->info.descs[i]);

		if (used < 0) {
			snprintf(why, whylen, "memory descriptor %zu: %s", i,
				 tern_strerror((int)used));
			return (int)used;
		}
		tern__rd_take(&r, (size_t)used);
	}
	m->info.ndesc = (unsigned int)ndesc;
	if (tern__rd_left(&r) != 0) {
		snprintf(why, whylen, "%zu unexpected bytes after the hello",
			 tern__rd_left(&r));
		return -TERN_EPROTO;
	}
	return 0;
}

static int decode_refuse(const uint8_t *p, size_t n, struct tern__boot_msg *m,
			 char *why, size_t whylen)
{
	struct tern__rd r;
	uint16_t reserved;
	size_t tl;

	tern__rd_init(&r, p, n);
	m->code = tern__rd_u32(&r);
	tl = tern__rd_u16(&r);
	reserved = tern__rd_u16(&r);
	if (!tern__rd_ok(&r)) {
		snprintf(why, whylen, "refusal of %zu bytes", n);
		return -TERN_EPROTO;
	}
	if (tl > TERN_BOOT_TEXT_MAX || reserved != 0 ||
	    tern__rd_left(&r) != tl || m->code == 0 || m->code > 4096) {
		snprintf(why, whylen, "malformed refusal");
		return -TERN_EPROTO;
	}
	printable((uint8_t *)m->text, tern__rd_take(&r, tl), tl);
	m->text[tl] = '\0';
	return 0;
}

int tern__boot_decode(const uint8_t *buf, size_t len, struct tern__boot_msg *m,
		      char *why, size_t whylen)
{
	ssize_t need = tern__boot_need(buf, len, why, whylen);
	struct hdr h;
	size_t n;

	memset(m, 0, sizeof(*m));
	if (need < 0)
		return (int)need;
	if (need == 0 || (size_t)need != len) {
		snprintf(why, whylen,
			 "message of %zu bytes, its header says %zd", len,
			 need ? need : (ssize_t)TERN_BOOT_HDR);
		return -TERN_EPROTO;
	}
	read_hdr(buf, len, &h);
	m->version = h.version;
	m->type = h.type;
	if (m->version > TERN_BOOT_VERSION) {
		snprintf(why, whylen,
			 "bootstrap version %u not supported (this side "
			 "speaks %d)",
			 m->version, TERN_BOOT_VERSION);
		return -TERN_EVERSION;
	}
	n = len - TERN_BOOT_HDR;
	switch (m->type) {
	case TERN_BOOT_HELLO:
	case TERN_BOOT_WELCOME:
		return decode_info(buf + TERN_BOOT_HDR, n, m, why, whylen);
	case TERN_BOOT_REFUSE:
		return decode_refuse(buf + TERN_BOOT_HDR, n, m, why, whylen);
	default:
		snprintf(why, whylen, "unknown bootstrap message type %u",
			 m->type);
		return -TERN_EPROTO;
	}
}

static void put_hdr(struct tern__wr *w, uint16_t type, size_t body)
{
	tern__wr_u32(w, TERN_BOOT_MAGIC);
	tern__wr_u16(w, TERN_BOOT_VERSION);
	tern__wr_u16(w, type);
	tern__wr_u32(w, (uint32_t)body);
	tern__wr_u32(w, 0);
}

ssize_t tern__boot_encode(uint8_t *buf, size_t len, uint16_t type,
			  const struct tern_boot_info *info, const char *token)
{
	size_t tl = token != NULL ? strlen(token) : 0;
	struct tern__wr w, h;
	ssize_t total;

	if (info == NULL || info->card_len == 0 ||
	    info->card_len > TERN_CARD_MAX ||
	    info->ndesc > TERN_BOOT_DESCS_MAX || tl > TERN_BOOT_TOKEN_MAX ||
	    (type != TERN_BOOT_HELLO && type != TERN_BOOT_WELCOME) ||
	    (type == TERN_BOOT_WELCOME && tl != 0))
		return -EINVAL;
	/* A welcome's token field carries its ticket. */
	if (type == TERN_BOOT_WELCOME) {
		if (info->ticket_len != 0 &&
		    info->ticket_len != TERN_BOOT_TICKET_LEN)
			return -EINVAL;
		token = (const char *)info->ticket;
		tl = info->ticket_len;
	}
	if (len < TERN_BOOT_HDR + BODY_HDR + info->card_len + tl)
		return -ENOSPC;
	/* The body first: its length goes into the headers. */
	tern__wr_init(&w, buf, len);
	tern__wr_take(&w, TERN_BOOT_HDR + BODY_HDR);
	tern__wr_bytes(&w, info->card, info->card_len);
	tern__wr_bytes(&w, token, tl);
	for (unsigned int i = 0; i < info->ndesc; i++) {
		ssize_t n = tern_mr_desc_pack(&info->descs[i], tern__wr_ptr(&w),
					      tern__wr_left(&w));

		if (n < 0)
			return n;
		tern__wr_take(&w, (size_t)n);
	}
	total = tern__wr_end(&w);
	if (total < 0)
		return total;
	tern__wr_init(&h, buf, TERN_BOOT_HDR + BODY_HDR);
	put_hdr(&h, type, (size_t)total - TERN_BOOT_HDR);
	tern__wr_u16(&h, (uint16_t)info->card_len);
	tern__wr_u16(&h, (uint16_t)tl);
	tern__wr_u16(&h, (uint16_t)info->ndesc);
	tern__wr_u16(&h, 0);
	if (tern__wr_end(&h) < 0)
		return -ENOSPC;
	return total;
}

ssize_t tern__boot_encode_refuse(uint8_t *buf, size_t len, uint32_t code,
				 const char *text)
{
	size_t tl = TERN_MIN(strlen(text), (size_t)TERN_BOOT_TEXT_MAX);
	struct tern__wr w;
	uint8_t *tp;

	if (code == 0 || code > 4096)
		return -EINVAL;
	if (len < TERN_BOOT_HDR + 8 + tl)
		return -ENOSPC;
	tern__wr_init(&w, buf, len);
	put_hdr(&w, TERN_BOOT_REFUSE, 8 + tl);
	tern__wr_u32(&w, code);
	tern__wr_u16(&w, (uint16_t)tl);
	tern__wr_u16(&w, 0);
	tp = tern__wr_take(&w, tl);
	if (tp != NULL)
		printable(tp, (const uint8_t *)text, tl);
	return tern__wr_end(&w);
}

int tern__boot_token_eq(const uint8_t *a, size_t alen, const char *want)
{
	size_t wlen = want != NULL ? strlen(want) : 0;
	unsigned int diff;

	if (wlen > TERN_BOOT_TOKEN_MAX)
		return 0;
	/* Every byte up to the limit is looked at, whatever the inputs, so
	 * the time taken says nothing about how much of a guess was right. */
	diff = alen != wlen;
	for (size_t i = 0; i < TERN_BOOT_TOKEN_MAX; i++) {
		uint8_t x = i < alen ? a[i] : 0;
		uint8_t y = i < wlen ? (uint8_t)want[i] : 0;

		diff |= (unsigned int)(x ^ y);
	}
	return diff == 0;
}

static int put(char *dst, size_t dlen, const char *src, size_t n)
{
	if (n >= dlen)
		return -1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

int tern__boot_split(const char *addr, char *host, size_t hostlen, char *port,
		     size_t portlen, char *why, size_t whylen)
{
	const char *colon, *p = addr;
	char dflt[8];

	snprintf(dflt, sizeof(dflt), "%d", TERN_BOOT_PORT);
	if (addr == NULL || *addr == '\0') {
		snprintf(why, whylen, "empty address");
		return -EINVAL;
	}
	if (*p == '[') {
		const char *end = strchr(p, ']');

		if (end == NULL || (end[1] != '\0' && end[1] != ':') ||
		    put(host, hostlen, p + 1, (size_t)(end - p - 1))) {
			snprintf(why, whylen,
				 "'%s': expected [IPV6]:PORT, e.g. "
				 "[2001:db8::1]:%d",
				 addr, TERN_BOOT_PORT);
			return -EINVAL;
		}
		colon = end[1] == ':' ? end + 1 : NULL;
	} else {
		colon = strrchr(p, ':');
		/* A bare IPv6 address (two colons or more): no port. */
		if (colon != NULL && strchr(p, ':') != colon)
			colon = NULL;
		if (put(host, hostlen, p,
			colon ? (size_t)(colon - p) : strlen(p))) {
			snprintf(why, whylen, "host name too long");
			return -EINVAL;
		}
	}
	if (colon == NULL)
		p = dflt;
	else
		p = colon + 1;
	if (*p == '\0' || strlen(p) > 5 ||
	    strspn(p, "0123456789") != strlen(p) ||
	    strtoul(p, NULL, 10) > 65535) {
		snprintf(why, whylen, "'%s': port '%s' is not a number 0-65535",
			 addr, p);
		return -EINVAL;
	}
	if (put(port, portlen, p, strlen(p))) {
		snprintf(why, whylen, "port buffer too small");
		return -EINVAL;
	}
	return 0;
}
