/* SPDX-License-Identifier: MIT */
/* The card wire format (docs/protocol.md); pure codec, no fabric. */
#ifndef TERN_CARD_H
#define TERN_CARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TERN_CARD_MAGIC	  0x43524554u /* "TERC" little-endian */
#define TERN_CARD_VERSION 1
#define TERN_CARD_HDR	  12

/* A parsed card; addrs points into the buffer it was parsed from. */
struct tern__card {
	unsigned int nrails;
	size_t addrlen;
	uint32_t addr_format; /* libfabric's address format */
	const uint8_t *addrs; /* nrails * addrlen bytes */
};

/*
 * Write a card of @nrails addresses of @addrlen bytes each, stored one
 * after another at @addrs. @return its length, -ENOSPC, or -EINVAL.
 */
ssize_t tern__card_pack(const struct tern__card *card, void *buf, size_t len);

/*
 * Check and parse an untrusted card. @return 0, or -TERN_ECARD with the
 * reason in @why (magic, version, counts, or a length that disagrees).
 */
int tern__card_parse(const void *buf, size_t len, struct tern__card *card,
		     char *why, size_t whylen);

#endif /* TERN_CARD_H */
