/* SPDX-License-Identifier: MIT */
/*
 * Writes with immediate stamped so that a repeat after a rail failure is
 * counted once (docs/protocol.md, "The stamp of a write with immediate").
 * Where the provider's remote CQ data has 8 bytes, the immediate is the
 * low word and the high word is a stamp: bit 31 REPEAT, bit 30 TAGGED,
 * then a number, never 0, per sender and target. Untagged (a sender whose
 * CQ names the source of writes, shm: its target finds it so), the number
 * is bits 0..29. Tagged (a sender whose CQ does not: tcp), bits 18..29
 * are a tag of the sender's card, by which the target finds who sent it,
 * and the number is bits 0..17. The target keeps, per sender, a window of the
 * last TERN__DEDUP_W numbers it has seen. Pure arithmetic and bits,
 * unit-tested on its own (tests/unit/test_dedup.c).
 */
#ifndef TERN_DEDUP_H
#define TERN_DEDUP_H

#include <stddef.h>
#include <stdint.h>

/* The stamp: the high 32 bits of a write's remote CQ data. */
#define TERN__STAMP_REPEAT    0x80000000U /* posted again after a failure */
#define TERN__STAMP_TAGGED    0x40000000U /* carries its sender's tag */
#define TERN__STAMP_SEQ_MAX   0x3fffffffU /* untagged: numbers 1..this */
#define TERN__STAMP_TSEQ_MAX  0x3ffffU	  /* tagged: numbers 1..this */
#define TERN__STAMP_TAG_SHIFT 18
#define TERN__STAMP_TAGS      4096U /* tags 1..this - 1 */

/* Numbers a window holds (a power of two, under half of either circle). */
#define TERN__DEDUP_W 65536U
/* A number further behind the window than this (or than a quarter of
 * its circle, the nearer) is no straggler: its sender numbers afresh,
 * and the window starts again around it. */
#define TERN__DEDUP_FAR (1U << 24)

/* The last number of @stamp's circle (its layout). */
static inline uint32_t tern__stamp_max(uint32_t stamp)
{
	return (stamp & TERN__STAMP_TAGGED) ? TERN__STAMP_TSEQ_MAX
					    : TERN__STAMP_SEQ_MAX;
}

/* The tag of a tagged @stamp. */
static inline uint32_t tern__stamp_tag_of(uint32_t stamp)
{
	return (stamp >> TERN__STAMP_TAG_SHIFT) & (TERN__STAMP_TAGS - 1);
}

/* The number after @seq on the circle 1..@max (1 after the last, never
 * 0). */
static inline uint32_t tern__stamp_next(uint32_t *seq, uint32_t max)
{
	uint32_t s = *seq + 1;

	if (s > max)
		s = 1;
	*seq = s;
	return s;
}

/* The tag of a ctx whose card is @card (@len bytes): 1..TAGS-1. */
uint32_t tern__stamp_tag(const void *card, size_t len);

/*
 * The numbers a target has seen from one sender: [base, base + W) on the
 * circle 1..max, bit (head + k) % W for base + k, made around the first
 * arrival. A number slid out of the window whose only arrival was a
 * repeat (its original may still come) moves the horizon: an original
 * not after the horizon, behind the window, cannot be told from a late
 * duplicate.
 */
struct tern__dedup {
	uint32_t base;	  /* 0: nothing seen yet */
	uint32_t head;	  /* the bit of base */
	uint32_t horizon; /* 0: none */
	uint32_t max;	  /* the circle: of the sender's layout */
	uint64_t seen[TERN__DEDUP_W / 64];
	uint64_t rep[TERN__DEDUP_W / 64]; /* seen through a repeat only */
};

/* What an arrival is. */
enum tern__dedup_verdict {
	TERN__DEDUP_COUNT, /* a first arrival: count it */
	TERN__DEDUP_DUP,   /* already counted: drop it */
	TERN__DEDUP_ABORT, /* cannot be checked: tell its expectation */
};

/* Classify the arrival stamped @stamp (non-zero) in @w, and note it. */
enum tern__dedup_verdict tern__dedup_check(struct tern__dedup *w,
					   uint32_t stamp);

/* How far @b is after @a on the circle 1..@max (0..@max-1). */
uint32_t tern__stamp_dist(uint32_t a, uint32_t b, uint32_t max);

#endif /* TERN_DEDUP_H */
