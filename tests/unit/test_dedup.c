/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the target's window of stamped writes with immediate
 * (src/engine/dedup.c): each number counted once whichever of its
 * original and repeats comes first; the window sliding, forgetting what
 * it must and remembering, past its end, what it cannot forget; numbers
 * wrapping from 2^30-1 to 1, or from 2^18-1 where tagged; the tag of a
 * card.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "engine/dedup.h"

#define R    TERN__STAMP_REPEAT
#define MAX  TERN__STAMP_SEQ_MAX
#define W    TERN__DEDUP_W
#define CNT  TERN__DEDUP_COUNT
#define DUP  TERN__DEDUP_DUP
#define ABRT TERN__DEDUP_ABORT
#define TMAX TERN__STAMP_TSEQ_MAX
#define TAG  0xabcU /* a tag */
#define T    (TERN__STAMP_TAGGED | TAG << TERN__STAMP_TAG_SHIFT)

static struct tern__dedup *win(void)
{
	struct tern__dedup *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	return w;
}

/* The original, then its repeats: counted once. A repeat first (its
 * original lost, or late), then the original: counted once. Writes
 * posted before the first to arrive, landing after it: first arrivals. */
static void test_once_either_order(void **state)
{
	struct tern__dedup *w = win();

	(void)state;
	assert_int_equal(tern__dedup_check(w, 10), CNT);
	assert_int_equal(tern__dedup_check(w, 10 | R), DUP);
	assert_int_equal(tern__dedup_check(w, 10 | R), DUP);
	/* 12's repeat comes first, its original late. */
	assert_int_equal(tern__dedup_check(w, 12 | R), CNT);
	assert_int_equal(tern__dedup_check(w, 11), CNT);
	assert_int_equal(tern__dedup_check(w, 12), DUP);
	/* A repeat repeated again: the second finds it seen. */
	assert_int_equal(tern__dedup_check(w, 12 | R), DUP);
	assert_int_equal(tern__dedup_check(w, 9), CNT);
	assert_int_equal(tern__dedup_check(w, 9 | R), DUP);
	assert_int_equal(tern__dedup_check(w, 3), CNT);
	/* A repeat first of all: the window was made around it. */
	free(w);
	w = win();
	assert_int_equal(tern__dedup_check(w, 77 | R), CNT);
	assert_int_equal(tern__dedup_check(w, 77), DUP);
	assert_int_equal(tern__dedup_check(w, 77 | R), DUP);
	/* An original seen through an original is another write: its
	 * sender numbers afresh. */
	assert_int_equal(tern__dedup_check(w, 78), CNT);
	assert_int_equal(tern__dedup_check(w, 78), CNT);
	free(w);
}

/* What cannot be checked: a repeat behind the window, a stamp without
 * a number. One far behind is a sender numbering afresh: the window
 * starts again around it. */
static void test_unchecked(void **state)
{
	struct tern__dedup *w = win();
	uint32_t base;

	(void)state;
	assert_int_equal(tern__dedup_check(w, 100000000), CNT);
	base = 100000000 - W / 2;
	assert_int_equal(w->base, base);
	assert_int_equal(tern__dedup_check(w, (base - 1) | R), ABRT);
	assert_int_equal(tern__dedup_check(w, base - 1), CNT);
	assert_int_equal(tern__dedup_check(w, base | R), CNT);
	assert_int_equal(tern__dedup_check(w, R), ABRT);
	assert_int_equal(tern__dedup_check(w, 0), CNT);
	assert_int_equal(tern__dedup_check(w, base - TERN__DEDUP_FAR), CNT);
	assert_int_equal(w->base, base);
	assert_int_equal(tern__dedup_check(w, base - TERN__DEDUP_FAR - 1), CNT);
	assert_int_equal(w->base, base - TERN__DEDUP_FAR - 1 - W / 2);
	assert_int_equal(tern__dedup_check(w, (base - TERN__DEDUP_FAR) | R),
			 CNT);
	/* The old numbering's repeat, far ahead of the new window: its
	 * original was counted in the window forgotten. */
	assert_int_equal(tern__dedup_check(w, 100000000 | R), ABRT);
	free(w);
}

/* Ahead of the window: it slides, and numbers sliding out unseen are
 * forgotten: their late originals count, their repeats cannot be
 * checked. A number whose repeat alone arrived, slid out, leaves a
 * horizon: an original not after it cannot be told from a duplicate. */
static void test_slide(void **state)
{
	struct tern__dedup *w = win();

	(void)state;
	assert_int_equal(tern__dedup_check(w, 40000), CNT);
	assert_int_equal(w->base, 40000 - W / 2);
	assert_int_equal(tern__dedup_check(w, 40002 | R), CNT); /* lost */
	assert_int_equal(tern__dedup_check(w, 40000 + W / 2 - 1), CNT);
	assert_int_equal(w->base, 40000 - W / 2);
	assert_int_equal(tern__dedup_check(w, 40000 + W / 2), CNT);
	assert_int_equal(w->base, 40000 - W / 2 + 1);
	assert_int_equal(tern__dedup_check(w, 40000 - W / 2), CNT);
	assert_int_equal(tern__dedup_check(w, (40000 - W / 2) | R), ABRT);
	assert_int_equal(w->horizon, 0);
	/* 40002 slides out with its repeat alone seen. */
	assert_int_equal(tern__dedup_check(w, 40009 + W), CNT);
	assert_int_equal(w->base, 40010);
	assert_int_equal(w->horizon, 40002);
	assert_int_equal(tern__dedup_check(w, 40002), ABRT);
	assert_int_equal(tern__dedup_check(w, 40001), ABRT);
	assert_int_equal(tern__dedup_check(w, 40005), CNT);
	assert_int_equal(tern__dedup_check(w, 40005 | R), ABRT);
	/* Far ahead: everything forgotten but the horizon's rule. */
	assert_int_equal(tern__dedup_check(w, 10 * W), CNT);
	assert_int_equal(w->base, 9 * W + 1);
	assert_int_equal(tern__dedup_check(w, 10 * W | R), DUP);
	assert_int_equal(tern__dedup_check(w, 9 * W + 1), CNT);
	assert_int_equal(tern__dedup_check(w, (9 * W + 1) | R), DUP);
	assert_int_equal(tern__dedup_check(w, (40009 + W) | R), ABRT);
	assert_int_equal(tern__dedup_check(w, 40002), ABRT);
	free(w);
}

/* Numbers wrap from 2^30-1 to 1, never 0; the window across the wrap. */
static void test_wrap(void **state)
{
	struct tern__dedup *w = win();
	uint32_t seq = MAX - 2;

	(void)state;
	assert_int_equal(tern__stamp_next(&seq, MAX), MAX - 1);
	assert_int_equal(tern__stamp_next(&seq, MAX), MAX);
	assert_int_equal(tern__stamp_next(&seq, MAX), 1);
	assert_int_equal(tern__stamp_next(&seq, MAX), 2);
	assert_int_equal(tern__stamp_dist(MAX, 1, MAX), 1);
	assert_int_equal(tern__stamp_dist(1, MAX, MAX), MAX - 1);
	assert_int_equal(tern__dedup_check(w, MAX - 1), CNT);
	assert_int_equal(tern__dedup_check(w, 2 | R), CNT);
	assert_int_equal(tern__dedup_check(w, 1), CNT);
	assert_int_equal(tern__dedup_check(w, MAX), CNT);
	assert_int_equal(tern__dedup_check(w, MAX | R), DUP);
	assert_int_equal(tern__dedup_check(w, 2), DUP);
	assert_int_equal(tern__dedup_check(w, 1 | R), DUP);
	assert_int_equal(tern__dedup_check(w, MAX - 2), CNT);
	assert_int_equal(tern__dedup_check(w, (MAX - 2) | R), DUP);
	/* The window slides across the wrap. */
	assert_int_equal(tern__dedup_check(w, W), CNT);
	assert_int_equal(w->base, 1);
	assert_int_equal(tern__dedup_check(w, 1 | R), DUP);
	assert_int_equal(tern__dedup_check(w, 2 | R), DUP);
	assert_int_equal(tern__dedup_check(w, MAX | R), ABRT);
	assert_int_equal(tern__dedup_check(w, MAX), CNT);
	free(w);
}

/* Tagged (a sender whose CQ names no source of writes): the tag is no
 * part of the number, which wraps from 2^18-1 to 1; the window across
 * the wrap, as untagged. */
static void test_tagged_wrap(void **state)
{
	struct tern__dedup *w = win();
	uint32_t seq = TMAX - 1;

	(void)state;
	assert_int_equal(tern__stamp_tag_of(T | 5 | R), TAG);
	assert_int_equal(tern__stamp_max(T | 5), TMAX);
	assert_int_equal(tern__stamp_max(5 | R), MAX);
	assert_int_equal(tern__stamp_next(&seq, TMAX), TMAX);
	assert_int_equal(tern__stamp_next(&seq, TMAX), 1);
	assert_int_equal(tern__stamp_dist(TMAX, 1, TMAX), 1);
	assert_int_equal(tern__dedup_check(w, T | (TMAX - 1)), CNT);
	assert_int_equal(w->max, TMAX);
	assert_int_equal(w->base, TMAX - 1 - W / 2);
	assert_int_equal(tern__dedup_check(w, T | 2 | R), CNT);
	assert_int_equal(tern__dedup_check(w, T | 1), CNT);
	assert_int_equal(tern__dedup_check(w, T | TMAX), CNT);
	assert_int_equal(tern__dedup_check(w, T | TMAX | R), DUP);
	assert_int_equal(tern__dedup_check(w, T | 2), DUP);
	assert_int_equal(tern__dedup_check(w, T | 1 | R), DUP);
	/* The window slides across the wrap. */
	assert_int_equal(tern__dedup_check(w, T | W), CNT);
	assert_int_equal(w->base, 1);
	assert_int_equal(tern__dedup_check(w, T | 2 | R), DUP);
	/* A straggler behind: its original counts, its repeat cannot be
	 * checked. A repeat far behind is one too; an original far behind
	 * (a quarter of the circle) is a sender numbering afresh. */
	assert_int_equal(tern__dedup_check(w, T | (TMAX - 100) | R), ABRT);
	assert_int_equal(tern__dedup_check(w, T | (TMAX - 100)), CNT);
	assert_int_equal(tern__dedup_check(w, T | (TMAX - TMAX / 4 - 1) | R),
			 ABRT);
	assert_int_equal(w->base, 1);
	assert_int_equal(tern__dedup_check(w, T | (TMAX - TMAX / 4 - 1)), CNT);
	assert_int_equal(w->base, TMAX - TMAX / 4 - 1 - W / 2);
	/* Another layout behind the same card: another sender, a new
	 * window. */
	assert_int_equal(tern__dedup_check(w, 5 | R), CNT);
	assert_int_equal(w->max, MAX);
	assert_int_equal(tern__dedup_check(w, 5), DUP);
	free(w);
}

/* A repeat is of a write posted before those that arrived: one far
 * ahead of the window is from round the circle (its original counted
 * long ago), never a new number: it cannot be checked. On the tagged
 * circle of 2^18-1, a repeat 200000 numbers late is such. */
static void test_repeat_far_ahead(void **state)
{
	struct tern__dedup *w = win();
	uint32_t base;

	(void)state;
	assert_int_equal(tern__dedup_check(w, 1000), CNT);
	base = w->base;
	assert_int_equal(tern__dedup_check(w, (1000 + W) | R), ABRT);
	assert_int_equal(w->base, base);
	assert_int_equal(tern__dedup_check(w, (1000 + W - 1) | R), CNT);
	assert_int_equal(w->base, 1000);
	assert_int_equal(tern__dedup_check(w, 1000 + W - 1), DUP);
	free(w);

	w = win();
	assert_int_equal(tern__dedup_check(w, T | 1), CNT);
	for (uint32_t s = W / 2; s <= 200000; s += W / 2)
		assert_int_equal(tern__dedup_check(w, T | s), CNT);
	assert_int_equal(tern__dedup_check(w, T | 200000), CNT);
	assert_int_equal(w->base, 200000 - W + 1);
	assert_int_equal(tern__dedup_check(w, T | 1 | R), ABRT);
	assert_int_equal(w->base, 200000 - W + 1);
	free(w);
}

/* The tag of a card: the same for the same bytes, 1..4095, never 0 (a
 * card whose hash folds to 0 has tag 1). */
static void test_tag(void **state)
{
	const char a[] = "TERC card of one ctx", b[] = "TERC card of another";
	const uint8_t zero[4] = { 0x7f, 0x10, 0, 0 };

	(void)state;
	assert_int_equal(tern__stamp_tag(a, sizeof(a)),
			 tern__stamp_tag(a, sizeof(a)));
	assert_int_not_equal(tern__stamp_tag(a, sizeof(a)),
			     tern__stamp_tag(b, sizeof(b)));
	assert_in_range(tern__stamp_tag(a, sizeof(a)), 1, 4095);
	assert_int_equal(tern__stamp_tag(zero, sizeof(zero)), 1);
	assert_in_range(tern__stamp_tag(NULL, 0), 1, 4095);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_once_either_order),
		cmocka_unit_test(test_unchecked),
		cmocka_unit_test(test_slide),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_tagged_wrap),
		cmocka_unit_test(test_repeat_far_ahead),
		cmocka_unit_test(test_tag),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
