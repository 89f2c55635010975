/* SPDX-License-Identifier: MIT */
/* The card wire format (docs/protocol.md); pure codec, no fabric. */
#ifndef TERN_CARD_H
#define TERN_CARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TERN_CARD_MAGIC		0x43524554u /* "TERC" little-endian */
#define TERN_CARD_VERSION	1	    /* addresses only */
#define TERN_CARD_VERSION_LOCAL 2 /* addresses, then a same-host identity */
#define TERN_CARD_HDR		12
#define TERN_CARD_LOCAL_MAGIC	0x4c524554u /* "TERL" little-endian */
#define TERN_CARD_LOCAL_LEN	68

/*
 * Who made a card, for the same-host path (src/engine/local_*.c): which
 * boot of which host, which user namespace and uid, which process (pid
 * and start time: a pid alone may be reused), and where its ctx's inbox
 * memfd and wake eventfd are in that process's fd table.
 */
struct tern__card_local {
	uint8_t boot[16];   /* /proc/sys/kernel/random/boot_id */
	uint64_t userns;    /* inode of /proc/self/ns/user */
	uint64_t start;	    /* process start, clock ticks after boot */
	uint64_t inbox_ino; /* the inbox memfd's inode */
	uint64_t nonce;	    /* the ctx's random id */
	uint32_t uid;
	uint32_t pid;
	uint32_t inbox_fd;
	uint32_t wake_fd;
};

/* A parsed card; addrs points into the buffer it was parsed from. */
struct tern__card {
	unsigned int nrails;
	size_t addrlen;
	uint32_t addr_format; /* libfabric's address format */
	const uint8_t *addrs; /* nrails * addrlen bytes */
	/* Version 2: the maker's same-host identity, or NULL (pack: none
	 * written, version 1; parse: none in the card). */
	const struct tern__card_local *local;
	struct tern__card_local local_buf; /* parse: where local points */
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
