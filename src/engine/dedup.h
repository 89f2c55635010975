/* SPDX-License-Identifier: MIT */
/*
 * Writes with immediate stamped so that a repeat after a rail failure is
 * counted once (docs/protocol.md, "The stamp of a write with immediate").
 * Where the provider's remote CQ data has 8 bytes, the immediate is the
 * low word and the high word is a stamp: bit 31 REPEAT, bits 0..30 a
 * number, never 0, per sender and target. The target keeps, per sender,
 * a window of the last TERN__DEDUP_W numbers it has seen. Pure
 * arithmetic and bits, unit-tested on its own (tests/unit/test_dedup.c).
 */
#ifndef TERN_DEDUP_H
#define TERN_DEDUP_H

#include <stdint.h>

/* The stamp: the high 32 bits of a write's remote CQ data. */
#define TERN__STAMP_REPEAT  0x80000000U /* posted again after a failure */
#define TERN__STAMP_SEQ_MAX 0x7fffffffU /* numbers 1..this, then 1 again */

/* Numbers a window holds (a power of two). */
#define TERN__DEDUP_W 65536U
/* A number further behind the window than this is no straggler: its
 * sender numbers afresh, and the window starts again around it. */
#define TERN__DEDUP_FAR (1U << 24)

/* The number after @seq (1 after the last, never 0). */
static inline uint32_t tern__stamp_next(uint32_t *seq)
{
	uint32_t s = *seq + 1;

	if (s > TERN__STAMP_SEQ_MAX)
		s = 1;
	*seq = s;
	return s;
}

/*
 * The numbers a target has seen from one sender: [base, base + W), bit
 * (head + k) % W for base + k, made around the first arrival. A number
 * slid out of the window whose only arrival was a repeat (its original
 * may still come) moves the horizon: an original not after the horizon,
 * behind the window, cannot be told from a late duplicate.
 */
struct tern__dedup {
	uint32_t base;	  /* 0: nothing seen yet */
	uint32_t head;	  /* the bit of base */
	uint32_t horizon; /* 0: none */
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

/* How far @b is after @a in the numbers' circle (0..SEQ_MAX-1). */
uint32_t tern__stamp_dist(uint32_t a, uint32_t b);

#endif /* TERN_DEDUP_H */
