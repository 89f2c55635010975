/* SPDX-License-Identifier: MIT */
/*
 * The target's window of stamped writes with immediate (dedup.h): serial
 * number arithmetic (RFC 1982) on the circle of numbers 1..max, of the
 * sender's layout (2^30-1 untagged, 2^18-1 tagged). A number less than
 * half the circle after the window's base is in it or ahead of it;
 * otherwise it is behind. Docs/protocol.md argues why this counts each
 * write once.
 */
#include <string.h>

#include "dedup.h"

uint32_t tern__stamp_tag(const void *card, size_t len)
{
	const uint8_t *p = card;
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, 64 bits */
	uint32_t t;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 32;
	h ^= h >> 16;
	t = (uint32_t)(h ^ (h >> 12)) & (TERN__STAMP_TAGS - 1);
	return t != 0 ? t : 1;
}

uint32_t tern__stamp_dist(uint32_t a, uint32_t b, uint32_t max)
{
	int64_t d = (int64_t)b - (int64_t)a;

	if (d < 0)
		d += (int64_t)max;
	return (uint32_t)d;
}

static uint32_t advance(uint32_t a, uint64_t k, uint32_t max)
{
	return (uint32_t)(((uint64_t)a - 1 + k) % max) + 1;
}

/* A window around @seq on the circle 1..@max, nothing seen: it sits in
 * the middle, so that the writes posted before it, landing after it,
 * are checked too. */
static void start(struct tern__dedup *w, uint32_t seq, uint32_t max)
{
	memset(w->seen, 0, sizeof(w->seen));
	memset(w->rep, 0, sizeof(w->rep));
	w->horizon = 0;
	w->head = 0;
	w->max = max;
	w->base = advance(seq, max - TERN__DEDUP_W / 2, max);
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
			w->horizon = advance(w->base, i, w->max);
		clear(w->seen, b);
		clear(w->rep, b);
	}
	w->head = (uint32_t)((w->head + k) & (TERN__DEDUP_W - 1));
	w->base = advance(w->base, k, w->max);
}

enum tern__dedup_verdict tern__dedup_check(struct tern__dedup *w,
					   uint32_t stamp)
{
	uint32_t max = tern__stamp_max(stamp), seq = stamp & max;
	uint32_t half = max / 2, far = max / 4, d, b;
	int repeat = (stamp & TERN__STAMP_REPEAT) != 0;

	if (far > TERN__DEDUP_FAR)
		far = TERN__DEDUP_FAR;
	if (seq == 0) /* no number: no sender of tern's stamps so */
		return repeat ? TERN__DEDUP_ABORT : TERN__DEDUP_COUNT;
	/* The first from this sender (or of another layout: another
	 * sender behind its card), or an original far behind: a sender
	 * that numbers afresh (it added this peer again), never a
	 * straggler. A repeat far behind is one: it is not counted. */
	if (w->base == 0 || w->max != max ||
	    (!repeat && tern__stamp_dist(seq, w->base, max) > far &&
	     tern__stamp_dist(seq, w->base, max) <= half))
		start(w, seq, max);
	d = tern__stamp_dist(w->base, seq, max);
	if (d > half) {
		/* Behind: forgotten. An original is a first arrival, unless
		 * a repeat of it may have been counted (the horizon). */
		if (repeat)
			return TERN__DEDUP_ABORT;
		if (w->horizon != 0 &&
		    tern__stamp_dist(seq, w->horizon, max) <= half)
			return TERN__DEDUP_ABORT;
		return TERN__DEDUP_COUNT;
	}
	if (d >= TERN__DEDUP_W) {
		/* A repeat is of a write posted before newer ones: far
		 * ahead of all that has arrived it is no new number but
		 * one from round the circle, behind what the window
		 * remembers. */
		if (repeat && d - TERN__DEDUP_W >= TERN__DEDUP_W / 2)
			return TERN__DEDUP_ABORT;
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
