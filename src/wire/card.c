/* SPDX-License-Identifier: MIT */
/*
 * Card wire format, little-endian:
 *   0 u32 magic "TERC"  4 u8 version  5 u8 nrails  6 u16 addrlen
 *   8 u32 libfabric addr_format      12 addr[nrails][addrlen]
 */
#include <errno.h>
#include <stdio.h>

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
	if (need > TERN_CARD_MAX)
		return -EINVAL;
	if (len < need)
		return -ENOSPC;
	tern__wr_init(&w, buf, need);
	tern__wr_u32(&w, TERN_CARD_MAGIC);
	tern__wr_u8(&w, TERN_CARD_VERSION);
	tern__wr_u8(&w, (uint8_t)card->nrails);
	tern__wr_u16(&w, (uint16_t)card->addrlen);
	tern__wr_u32(&w, card->addr_format);
	tern__wr_bytes(&w, card->addrs, need - TERN_CARD_HDR);
	return tern__wr_end(&w);
}

int tern__card_parse(const void *buf, size_t len, struct tern__card *card,
		     char *why, size_t whylen)
{
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
	if (version != TERN_CARD_VERSION) {
		snprintf(why, whylen, "card version %u; this tern reads %u",
			 version, TERN_CARD_VERSION);
		return -TERN_ECARD;
	}
	if (nrails == 0 || nrails > TERN_MAX_RAILS || alen == 0 ||
	    alen > TERN_ADDR_MAX || tern__rd_left(&r) != nrails * alen) {
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
	card->nrails = (unsigned int)nrails;
	card->addrlen = alen;
	card->addr_format = addr_format;
	card->addrs = tern__rd_take(&r, nrails * alen);
	return 0;
}
