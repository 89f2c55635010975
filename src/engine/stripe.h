/* SPDX-License-Identifier: MIT */
/* Striping one write or read over a ctx's rails: chunk k of a transfer of
 * len bytes covers [k * chunk, min((k + 1) * chunk, len)) and goes to rail
 * (first + k) % nrails. Pure arithmetic, unit-tested on its own. */
#ifndef TERN_STRIPE_H
#define TERN_STRIPE_H

#include <stdint.h>

/* Chunks of a striped transfer (len > 0, chunk > 0). */
static inline uint64_t tern__stripe_count(uint64_t len, uint64_t chunk)
{
	return len / chunk + (len % chunk != 0);
}

/* Offset and length of chunk k (k < tern__stripe_count()). */
static inline void tern__stripe_chunk(uint64_t len, uint64_t chunk, uint64_t k,
				      uint64_t *off, uint64_t *clen)
{
	*off = k * chunk;
	*clen = len - *off < chunk ? len - *off : chunk;
}

/* The rail chunk k goes to. */
static inline unsigned int tern__stripe_rail(unsigned int first, uint64_t k,
					     unsigned int nrails)
{
	return (unsigned int)((first + k) % nrails);
}

/*
 * Cutting where a region's chunk ends (mr.c): a part of a transfer of len
 * bytes starting at @off is at most @chunk bytes and stays inside one
 * chunk of the local region (the transfer starts at its offset @loff,
 * chunks of 2^@lshift; 0: one chunk) and of the remote one (@roff,
 * 2^@rshift). Parts follow each other: the next starts where one ends.
 */
static inline uint64_t tern__cut_room(unsigned int shift, uint64_t at)
{
	if (shift == 0)
		return UINT64_MAX;
	return (1ULL << shift) - (at & ((1ULL << shift) - 1));
}

static inline uint64_t tern__cut_len(uint64_t len, uint64_t off, uint64_t chunk,
				     uint64_t loff, unsigned int lshift,
				     uint64_t roff, unsigned int rshift)
{
	uint64_t n = len - off, room;

	if (n > chunk)
		n = chunk;
	room = tern__cut_room(lshift, loff + off);
	if (n > room)
		n = room;
	room = tern__cut_room(rshift, roff + off);
	return n < room ? n : room;
}

/* Parts of the whole transfer (len > 0). */
static inline uint64_t tern__cut_count(uint64_t len, uint64_t chunk,
				       uint64_t loff, unsigned int lshift,
				       uint64_t roff, unsigned int rshift)
{
	uint64_t n = 0;

	if (lshift == 0 && rshift == 0)
		return tern__stripe_count(len, chunk);
	for (uint64_t off = 0; off < len; n++)
		off += tern__cut_len(len, off, chunk, loff, lshift, roff,
				     rshift);
	return n;
}

#endif /* TERN_STRIPE_H */
