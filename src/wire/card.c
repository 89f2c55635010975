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
#include "../core/core.h"

ssize_t tern__card_pack(const struct tern__card *card, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t need;

	if (card->nrails == 0 || card->nrails > TERN_MAX_RAILS ||
	    card->addrlen == 0 || card->addrlen > TERN_ADDR_MAX)
		return -EINVAL;
	need = TERN_CARD_HDR + card->nrails * card->addrlen;
	if (need > TERN_CARD_MAX)
		return -EINVAL;
	if (len < need)
		return -ENOSPC;
	tern__put_u32(p, TERN_CARD_MAGIC);
	p[4] = TERN_CARD_VERSION;
	p[5] = (uint8_t)card->nrails;
	tern__put_u16(p + 6, (uint16_t)card->addrlen);
	tern__put_u32(p + 8, card->addr_format);
	memcpy(p + TERN_CARD_HDR, card->addrs, need - TERN_CARD_HDR);
	return (ssize_t)need;
}

int tern__card_parse(const void *buf, size_t len, struct tern__card *card,
		     char *why, size_t whylen)
{
	const uint8_t *p = buf;
	size_t nrails, alen;

	if (len < TERN_CARD_HDR || tern__get_u32(p) != TERN_CARD_MAGIC) {
		snprintf(why, whylen, "not a tern card (%zu bytes)", len);
		return -TERN_ECARD;
	}
	if (p[4] != TERN_CARD_VERSION) {
		snprintf(why, whylen, "card version %u; this tern reads %u",
			 p[4], TERN_CARD_VERSION);
		return -TERN_ECARD;
	}
	nrails = p[5];
	alen = tern__get_u16(p + 6);
	if (nrails == 0 || nrails > TERN_MAX_RAILS || alen == 0 ||
	    alen > TERN_ADDR_MAX || len != TERN_CARD_HDR + nrails * alen) {
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
	card->addr_format = tern__get_u32(p + 8);
	card->addrs = p + TERN_CARD_HDR;
	return 0;
}
