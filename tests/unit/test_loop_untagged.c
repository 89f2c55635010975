/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Untagged messaging (a provider without FI_TAGGED:
 * bounce.c): receives served from bounce buffers, messages before receives,
 * buffers held past the copy limit, immediates and errors on those buffers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "fake_env.h"
#include "fake_prov.h"
#include "loop_fixture.h"

/* ---- Untagged messaging (a provider without FI_TAGGED: bounce.c) ---- */

#define BOUNCES	   3
#define BOUNCE_LEN 64

/* Turn the hand-built ctx untagged: rail 0 gets BOUNCES message buffers
 * past its 8 tx slots, as tern_ctx_open() makes them, all posted. */
static struct tern__bounce *untagged(struct env *e)
{
	struct tern_rail *r = &e->ctx->rails[0];
	struct tern__bounce *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->n = BOUNCES;
	b->len = BOUNCE_LEN;
	b->buf = calloc(BOUNCES, BOUNCE_LEN);
	b->ent = calloc(BOUNCES, sizeof(*b->ent));
	b->mr = &e->mr;
	b->copy_max = 1 << 20;
	assert_non_null(b->buf);
	assert_non_null(b->ent);
	r->slots = realloc(r->slots, (8 + BOUNCES) * sizeof(*r->slots));
	assert_non_null(r->slots);
	memset(r->slots + 8, 0, BOUNCES * sizeof(*r->slots));
	r->slots_span = (8 + BOUNCES) * sizeof(*r->slots);
	e->ctx->caps.tagged = 0;
	e->ctx->bounce = b;
	e->ctx->max_msg_size = BOUNCE_LEN;
	assert_int_equal(tern__bounce_post_all(e->ctx), 0);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES);
	return b;
}

static void untagged_free(struct env *e)
{
	struct tern__bounce *b = e->ctx->bounce;
	struct tern__unexp *u;

	while ((u = b->head) != NULL) {
		b->head = u->next;
		if (u->bounce < 0)
			free(u);
	}
	free(b->buf);
	free(b->ent);
	free(b);
	e->ctx->bounce = NULL;
}

/* A message lands in buffer @i: its bytes, then its completion. */
static void bounce_arrive(struct env *e, unsigned int i, const char *text,
			  uint64_t flags, uint64_t data)
{
	struct tern__bounce *b = e->ctx->bounce;

	memcpy(b->buf + i * BOUNCE_LEN, text, strlen(text));
	cq_ok(e->ctx->rails[0].slots[8 + i].fictx, strlen(text), flags, data);
}

/* Receives never reach the provider; a message is copied into the oldest
 * queued one, and its buffer goes back to the provider at once. */
static void test_untagged_recv_then_message(void **state)
{
	struct env *e = *state;
	struct tracked r1, r2;

	untagged(e);
	track_init(&r1);
	track_init(&r2);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 32, &r1.req), 0);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf + 32, 32, &r2.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_RECV), 0);
	bounce_arrive(e, 1, "first", 0, 0);
	bounce_arrive(e, 0, "second!", TERN__CQ_IMM, 0x42);
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(r1.calls, 1);
	assert_int_equal(r1.status, 0);
	assert_int_equal(r1.req.len, 5);
	assert_memory_equal(e->buf, "first", 5);
	assert_false(r1.req.flags & TERN_REQ_F_IMM);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.req.len, 7);
	assert_memory_equal(e->buf + 32, "second!", 7);
	assert_true(r2.req.flags & TERN_REQ_F_IMM);
	assert_int_equal(r2.req.imm, 0x42);
	/* Both buffers were posted again, with their own contexts. */
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 2);
	assert_ptr_equal(fk.calls[fk.ncalls - 1].context,
			 e->ctx->rails[0].slots[8].fictx);
	assert_int_equal(fk.calls[fk.ncalls - 1].len, BOUNCE_LEN);
	assert_ptr_equal(fk.calls[fk.ncalls - 1].desc, &local_desc_token[0]);
	untagged_free(e);
}

/* A message before any receive waits (copied aside, its buffer posted
 * again); the next tern_recv() takes it, completing from progress; one
 * too long for the receive completes -TERN_ETRUNC with its length. */
static void test_untagged_message_then_recv(void **state)
{
	struct env *e = *state;
	struct tracked r1, r2;

	untagged(e);
	track_init(&r1);
	track_init(&r2);
	bounce_arrive(e, 2, "early bird", TERN__CQ_IMM, 7);
	bounce_arrive(e, 0, "0123456789", 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 2);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 32, &r1.req), 0);
	assert_int_equal(r1.calls, 0); /* callbacks only from progress */
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf + 32, 4, &r2.req), 0);
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(r1.status, 0);
	assert_int_equal(r1.req.len, 10);
	assert_memory_equal(e->buf, "early bird", 10);
	assert_int_equal(r1.req.imm, 7);
	assert_int_equal(r2.status, -TERN_ETRUNC);
	assert_int_equal(r2.req.len, 10);
	assert_memory_equal(e->buf + 32, "0123", 4);
	assert_int_equal(fake_count(FOP_RECV), 0);
	untagged_free(e);
}

/* Past the copy limit, buffers are held, not re-posted: once all are, the
 * provider takes no more messages (senders wait). A receive frees one. */
static void test_untagged_holds_buffers(void **state)
{
	struct env *e = *state;
	struct tern__bounce *b = untagged(e);
	struct tracked r;

	b->copy_max = 8;
	bounce_arrive(e, 0, "abcd", 0, 0);     /* copied: 4 of 8 */
	bounce_arrive(e, 1, "efghijkl", 0, 0); /* over: held */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(b->held, 1);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 1);
	/* Oldest first: the copied one, then the held one. */
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 32, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_memory_equal(e->buf, "abcd", 4);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 32, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.req.len, 8);
	assert_memory_equal(e->buf, "efghijkl", 8);
	assert_int_equal(b->held, 0);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 2);
	assert_ptr_equal(fk.calls[fk.ncalls - 1].context,
			 e->ctx->rails[0].slots[9].fictx);
	untagged_free(e);
}

/* Under FI_RX_CQ_DATA a write's immediate uses up a message buffer: it is
 * counted and the buffer posted again; a buffer's error completes no
 * request and the buffer goes back; a send above the buffers' size is
 * refused at the call; a queued receive is cancelled in tern. */
static void test_untagged_imm_error_limits(void **state)
{
	struct env *e = *state;
	struct tracked r, s;

	untagged(e);
	cq_ok(e->ctx->rails[0].slots[8 + 1].fictx, 0,
	      TERN__CQ_REMOTE_WRITE | TERN__CQ_IMM, 99);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_count(e->ctx, 99), 1);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 1);
	cq_err(e->ctx->rails[0].slots[8 + 2].fictx, -TERN_ETRUNC, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_BOUNCE_RECV), BOUNCES + 2);
	track_init(&s);
	assert_int_equal(
		tern_send(&e->peer, &e->mr, e->buf, BOUNCE_LEN + 1, &s.req),
		-EMSGSIZE);
	assert_int_equal(
		tern_send(&e->peer, &e->mr, e->buf, BOUNCE_LEN, &s.req), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 32, &r.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.status, -ECANCELED);
	assert_int_equal(fake_count(FOP_SEND), 1);
	assert_int_equal(fake_count(FOP_RECV), 0);
	untagged_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_untagged_recv_then_message),
		T(test_untagged_message_then_recv),
		T(test_untagged_holds_buffers),
		T(test_untagged_imm_error_limits),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
