/* SPDX-License-Identifier: MIT */
/*
 * Card wire format, little-endian:
 *   0 u32 magic "TERC"  4 u8 version  5 u8 nrails  6 u16 addrlen
 *   8 u32 libfabric addr_format      12 addr[nrails][addrlen]
 * Version 2 goes on with u16 local_len and that many bytes: a same-host
 * identity (struct tern__card_local, 68 bytes: u32 "TERL", boot[16], u64
 * userns, start, inbox_ino, nonce, u32 uid, pid, inbox_fd, wake_fd), or
 * none (local_len 0). A longer identity is read for its first 68 bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <tern/ctx.h>

#include "card.h"
#include "wire.h"

ssize_t tern__card_pack(const struct tern__card *card, void *buf, size_t len)
{
	struct tern__wr w;
	size_t need;

	if (card->nrails == 0 || card->nrails > TERN_MAX_RAILS ||
	    card->addrlen == 0 || card->addrlen > TERN_ADDR_MAX)
		return -EINVAL;
	need = TERN_CARD_HDR + card->nrails * card->addrlen;
	if (card->local != NULL)
		need += 2 + TERN_CARD_LOCAL_LEN;
	if (need > TERN_CARD_MAX)
		return -EINVAL;
	if (len < need)
		return -ENOSPC;
	tern__wr_init(&w, buf, need);
	tern__wr_u32(&w, TERN_CARD_MAGIC);
	tern__wr_u8(&w, card->local != NULL ? TERN_CARD_VERSION_LOCAL
					    : TERN_CARD_VERSION);
	tern__wr_u8(&w, (uint8_t)card->nrails);
	tern__wr_u16(&w, (uint16_t)card->addrlen);
	tern__wr_u32(&w, card->addr_format);
	tern__wr_bytes(&w, card->addrs, card->nrails * card->addrlen);
	if (card->local != NULL) {
		const struct tern__card_local *l = card->local;

		tern__wr_u16(&w, TERN_CARD_LOCAL_LEN);
		tern__wr_u32(&w, TERN_CARD_LOCAL_MAGIC);
		tern__wr_bytes(&w, l->boot, sizeof(l->boot));
		tern__wr_u64(&w, l->userns);
		tern__wr_u64(&w, l->start);
		tern__wr_u64(&w, l->inbox_ino);
		tern__wr_u64(&w, l->nonce);
		tern__wr_u32(&w, l->uid);
		tern__wr_u32(&w, l->pid);
		tern__wr_u32(&w, l->inbox_fd);
		tern__wr_u32(&w, l->wake_fd);
	}
	return tern__wr_end(&w);
}

/* A version 2 card's tail: u16 length, then the identity or nothing. */
static int parse_local(struct tern__rd *r, struct tern__card *card, char *why,
		       size_t whylen)
{
	struct tern__card_local *l = &card->local_buf;
	size_t llen = tern__rd_u16(r);
	uint32_t magic;

	if (tern__rd_left(r) != llen ||
	    (llen != 0 && llen < TERN_CARD_LOCAL_LEN)) {
		snprintf(why, whylen,
			 "card's same-host part claims %zu bytes, has %zu "
			 "(at least %d)",
			 llen, tern__rd_left(r), TERN_CARD_LOCAL_LEN);
		return -TERN_ECARD;
	}
	if (llen == 0)
		return 0;
	magic = tern__rd_u32(r);
	if (magic != TERN_CARD_LOCAL_MAGIC) {
		snprintf(why, whylen, "card's same-host part: bad magic 0x%x",
			 magic);
		return -TERN_ECARD;
	}
	memcpy(l->boot, tern__rd_take(r, sizeof(l->boot)), sizeof(l->boot));
	l->userns = tern__rd_u64(r);
	l->start = tern__rd_u64(r);
	l->inbox_ino = tern__rd_u64(r);
	l->nonce = tern__rd_u64(r);
	l->uid = tern__rd_u32(r);
	l->pid = tern__rd_u32(r);
	l->inbox_fd = tern__rd_u32(r);
	l->wake_fd = tern__rd_u32(r);
	if (!tern__rd_ok(r)) {
		snprintf(why, whylen, "card's same-host part is truncated");
		return -TERN_ECARD;
	}
	card->local = l;
	return 0;
}

int tern__card_parse(const void *buf, size_t len, struct tern__card *card,
		     char *why, size_t whylen)
{
	struct tern__card tmp;
	struct tern__rd r;
	size_t nrails, alen;
	uint32_t magic, addr_format;
	uint8_t version;

	tern__rd_init(&r, buf, len);
	magic = tern__rd_u32(&r);
	version = tern__rd_u8(&r);
	nrails = tern__rd_u8(&r);
	alen = tern__rd_u16(&r);
	addr_format = tern__rd_u32(&r);
	if (!tern__rd_ok(&r) || magic != TERN_CARD_MAGIC) {
		snprintf(why, whylen, "not a tern card (%zu bytes)", len);
		return -TERN_ECARD;
	}
	if (version != TERN_CARD_VERSION &&
	    version != TERN_CARD_VERSION_LOCAL) {
		snprintf(why, whylen,
			 "card version %u; this tern reads 1 and 2", version);
		return -TERN_ECARD;
	}
	if (nrails == 0 || nrails > TERN_MAX_RAILS || alen == 0 ||
	    alen > TERN_ADDR_MAX ||
	    (version == TERN_CARD_VERSION
		     ? tern__rd_left(&r) != nrails * alen
		     : tern__rd_left(&r) < nrails * alen + 2)) {
		snprintf(why, whylen,
			 "card claims %zu rail(s) of %zu-byte addresses but "
			 "is %zu bytes",
			 nrails, alen, len);
		return -TERN_ECARD;
	}
	if (len > TERN_CARD_MAX) {
		snprintf(why, whylen, "card of %zu bytes exceeds %d", len,
			 TERN_CARD_MAX);
		return -TERN_ECARD;
	}
	/* @card is written only once the whole card is good. */
	tmp.nrails = (unsigned int)nrails;
	tmp.addrlen = alen;
	tmp.addr_format = addr_format;
	tmp.addrs = tern__rd_take(&r, nrails * alen);
	tmp.local = NULL;
	if (version == TERN_CARD_VERSION_LOCAL) {
		int ret = parse_local(&r, &tmp, why, whylen);

		if (ret != 0)
			return ret;
	}
	*card = tmp;
	if (tmp.local != NULL)
		card->local = &card->local_buf;
	return 0;
}
