/* SPDX-License-Identifier: MIT */
/*
 * The target's window of stamped writes with immediate (dedup.h): serial
 * number arithmetic (RFC 1982) on the circle of numbers 1..2^31-1. A
 * number less than half the circle after the window's base is in it or
 * ahead of it; otherwise it is behind. Docs/protocol.md argues why this
 * counts each write once.
 */
#include <string.h>

#include "dedup.h"

#define SEQ_N (uint64_t) TERN__STAMP_SEQ_MAX /* numbers on the circle */

uint32_t tern__stamp_dist(uint32_t a, uint32_t b)
{
	int64_t d = (int64_t)b - (int64_t)a;

	if (d < 0)
		d += (int64_t)SEQ_N;
	return (uint32_t)d;
}

static uint32_t advance(uint32_t a, uint64_t k)
{
	return (uint32_t)(((uint64_t)a - 1 + k) % SEQ_N) + 1;
}

/* A window around @seq, nothing seen: it sits in the middle, so that
 * the writes posted before it, landing after it, are checked too. */
static void start(struct tern__dedup *w, uint32_t seq)
{
	memset(w->seen, 0, sizeof(w->seen));
	memset(w->rep, 0, sizeof(w->rep));
	w->horizon = 0;
	w->head = 0;
	w->base = advance(seq, SEQ_N - TERN__DEDUP_W / 2);
}

static int bit(const uint64_t *map, uint32_t i)
{
	return (map[i / 64] >> (i % 64)) & 1;
}

static void set(uint64_t *map, uint32_t i)
{
	map[i / 64] |= 1ULL << (i % 64);
}

static void clear(uint64_t *map, uint32_t i)
{
	map[i / 64] &= ~(1ULL << (i % 64));
}

/* Move the window @k numbers forward: the numbers leaving it are
 * forgotten, but one seen through its repeat only moves the horizon. */
static void slide(struct tern__dedup *w, uint64_t k)
{
	uint64_t n = k < TERN__DEDUP_W ? k : TERN__DEDUP_W;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t b = (w->head + (uint32_t)i) & (TERN__DEDUP_W - 1);

		if (bit(w->rep, b))
			w->horizon = advance(w->base, i);
		clear(w->seen, b);
		clear(w->rep, b);
	}
	w->head = (uint32_t)((w->head + k) & (TERN__DEDUP_W - 1));
	w->base = advance(w->base, k);
}

enum tern__dedup_verdict tern__dedup_check(struct tern__dedup *w,
					   uint32_t stamp)
{
	uint32_t seq = stamp & TERN__STAMP_SEQ_MAX, d, b;
	int repeat = (stamp & TERN__STAMP_REPEAT) != 0;

	if (seq == 0) /* no number: no sender of tern's stamps so */
		return repeat ? TERN__DEDUP_ABORT : TERN__DEDUP_COUNT;
	/* The first from this sender, or one far behind: a sender that
	 * numbers afresh (it added this peer again), never a straggler. */
	if (w->base == 0 ||
	    (tern__stamp_dist(seq, w->base) > TERN__DEDUP_FAR &&
	     tern__stamp_dist(seq, w->base) <= TERN__STAMP_SEQ_MAX / 2))
		start(w, seq);
	d = tern__stamp_dist(w->base, seq);
	if (d > TERN__STAMP_SEQ_MAX / 2) {
		/* Behind: forgotten. An original is a first arrival, unless
		 * a repeat of it may have been counted (the horizon). */
		if (repeat)
			return TERN__DEDUP_ABORT;
		if (w->horizon != 0 && tern__stamp_dist(seq, w->horizon) <=
					       TERN__STAMP_SEQ_MAX / 2)
			return TERN__DEDUP_ABORT;
		return TERN__DEDUP_COUNT;
	}
	if (d >= TERN__DEDUP_W) {
		slide(w, (uint64_t)d - TERN__DEDUP_W + 1);
		d = TERN__DEDUP_W - 1;
	}
	b = (w->head + d) & (TERN__DEDUP_W - 1);
	if (bit(w->seen, b)) {
		/* A repeat: its first arrival was counted. An original
		 * after its repeat: the repeat was; after that only
		 * repeats can come, which find it seen. An original seen
		 * through an original is not this write's (originals go
		 * once): its sender numbers afresh. */
		if (repeat)
			return TERN__DEDUP_DUP;
		if (bit(w->rep, b)) {
			clear(w->rep, b);
			return TERN__DEDUP_DUP;
		}
		return TERN__DEDUP_COUNT;
	}
	set(w->seen, b);
	if (repeat)
		set(w->rep, b);
	return TERN__DEDUP_COUNT;
}
