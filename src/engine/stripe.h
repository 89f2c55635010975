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

#endif /* TERN_STRIPE_H */
