/* SPDX-License-Identifier: MIT */
/*
 * The shape of a descriptor (tern/mr.h): how many chunks, where key
 * (chunk, rail) lives. Checked once (tern__desc_shape()) by the codec and
 * by every operation handed a chunked descriptor, then read unchecked.
 */
#ifndef TERN_WIRE_DESC_H
#define TERN_WIRE_DESC_H

#include <stdint.h>

#include <tern/mr.h>

/* Smallest and largest chunk: a page; 2^62 bytes. */
#define TERN__DESC_SHIFT_MIN 12
#define TERN__DESC_SHIFT_MAX 62

/* Chunks of a region of @len bytes cut every 2^@shift (0: one). */
static inline uint64_t tern__desc_nchunks(uint64_t len, unsigned int shift)
{
	if (shift == 0)
		return 1;
	return (len >> shift) + ((len & ((1ULL << shift) - 1)) != 0);
}

/*
 * Keys @d holds in all (chunks times rails), or 0 when its shape is
 * wrong: no keys or more than TERN_MAX_RAILS per chunk, a chunk size
 * out of range, a chunked region of one chunk, more keys than fit, the
 * 32-bit flag without chunks. Flags outside TERN_MR_DESC_FLAGS_ALL and
 * the length are the caller's to check.
 */
static inline uint64_t tern__desc_shape(const struct tern_mr_desc *d)
{
	unsigned int shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);
	uint64_t n;

	if (d->nkeys == 0 || d->nkeys > TERN_MAX_RAILS)
		return 0;
	if (shift == 0)
		return (d->flags & TERN_MR_DESC_KEY32) ? 0 : d->nkeys;
	if (shift < TERN__DESC_SHIFT_MIN || shift > TERN__DESC_SHIFT_MAX)
		return 0;
	n = tern__desc_nchunks(d->len, shift);
	if (n < 2 || n > TERN_MR_DESC_KEYS32_MAX)
		return 0;
	n *= d->nkeys;
	if (n > ((d->flags & TERN_MR_DESC_KEY32) ? TERN_MR_DESC_KEYS32_MAX
						 : TERN_MR_DESC_KEYS_MAX))
		return 0;
	return n;
}

/* Key @i (chunk * nkeys + rail) of a descriptor whose shape is good. */
static inline uint64_t tern__desc_key_at(const struct tern_mr_desc *d,
					 uint64_t i)
{
	if (d->flags & TERN_MR_DESC_KEY32)
		return (uint32_t)(d->keys[i >> 1] >> (32 * (i & 1)));
	return d->keys[i];
}

static inline void tern__desc_set_key(struct tern_mr_desc *d, uint64_t i,
				      uint64_t key)
{
	if (d->flags & TERN_MR_DESC_KEY32) {
		unsigned int s = 32 * (unsigned int)(i & 1);

		d->keys[i >> 1] &= ~(0xffffffffULL << s);
		d->keys[i >> 1] |= (key & 0xffffffffULL) << s;
		return;
	}
	d->keys[i] = key;
}

/* The key @rail uses to reach offset @off of the region (its end, for
 * an operation of 0 bytes there: the last chunk's). */
static inline uint64_t tern__desc_key(const struct tern_mr_desc *d,
				      uint64_t off, unsigned int rail)
{
	unsigned int shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);
	uint64_t c, last;

	if (shift == 0)
		return d->keys[rail];
	c = off >> shift;
	last = tern__desc_nchunks(d->len, shift) - 1;
	return tern__desc_key_at(d, (c < last ? c : last) * d->nkeys + rail);
}

/* Where offset @off of the region is to the provider: the address, or
 * (offset addressing) the offset in its chunk's registration. */
static inline uint64_t tern__desc_raddr(const struct tern_mr_desc *d,
					uint64_t off)
{
	unsigned int shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);

	if (d->flags & TERN_MR_DESC_VIRT_ADDR)
		return d->base + off;
	return shift == 0 ? off : off & ((1ULL << shift) - 1);
}

/* Bytes from @off to the end of its chunk (UINT64_MAX: one chunk). */
static inline uint64_t tern__desc_room(unsigned int shift, uint64_t off)
{
	if (shift == 0)
		return UINT64_MAX;
	return (1ULL << shift) - (off & ((1ULL << shift) - 1));
}

#endif /* TERN_WIRE_DESC_H */
