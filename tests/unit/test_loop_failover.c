/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of a failed rail routed around (src/engine/failover.c) over
 * the fake provider (loop_fixture.h), two rails to one peer: a part whose
 * completion says the path is gone goes again on the other rail with
 * that rail's key, the request completing once, clean; new operations
 * avoid the rail; what the target counts (an immediate) is repeated only
 * stamped, and counted once (its sender found by the CQ's source, or by
 * the tag of its card where the CQ names none), atomics never; after the
 * cooldown one plain write probes the rail; every rail down is the peer
 * gone; an error that is the operation's own, or failover turned off,
 * fails as before.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "fake_env.h"
#include "fake_prov.h"
#include "loop_fixture.h"

/* @n progress passes: a part queued again goes out in the pass after
 * its failure was read. */
static void passes(struct env *e, int n)
{
	while (n-- > 0)
		tern_progress(e->ctx);
}

static struct tern_peer_rail rail_state(struct env *e, unsigned int r)
{
	struct tern_peer_rail st[2];

	assert_int_equal(tern_peer_rails(&e->peer, st, 2), 2);
	return st[r];
}

/* The call made for a write of @len bytes from @buf to remote @raddr. */
static void assert_write(const struct fake_call *c, unsigned int rail,
			 const char *buf, uint64_t raddr, size_t len)
{
	assert_int_equal(c->op, FOP_WRITE);
	assert_int_equal(c->rail, rail);
	assert_int_equal(c->addr, PEER_ADDR + rail);
	assert_int_equal(c->rkey, RKEY + rail);
	assert_ptr_equal(c->buf, buf);
	assert_int_equal(c->raddr, raddr);
	assert_int_equal(c->len, len);
}

/* A striped write's parts on rail 1 fail with errors that say the path
 * is gone: each goes again on rail 0, with rail 0's key, to the same
 * place; the request completes once, with no error; the credits all come
 * back; the rail is down, its parts counted as moved. */
static void test_striped_parts_rerouted(void **state)
{
	struct env *e = *state;
	struct tracked w;
	struct tern_peer_rail st;

	two_rails(e, 1000);
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 4096, &e->rdesc,
				    0, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 4);
	for (unsigned int k = 0; k < 4; k++)
		assert_write(&fk.calls[k], k % 2, e->buf + 1024 * k,
			     RBASE + 1024 * k, 1024);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	tern_progress(e->ctx);
	assert_int_equal(e->peer.down, 2);
	tern_progress(e->ctx); /* the part goes again */
	assert_int_equal(fk.ncalls, 5);
	assert_write(&fk.calls[4], 0, e->buf + 1024, RBASE + 1024, 1024);
	assert_int_equal(w.calls, 0);
	cq_err_path(fk.calls[3].context, -TERN_EPROV);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	tern_progress(e->ctx);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 6);
	assert_write(&fk.calls[5], 0, e->buf + 3072, RBASE + 3072, 1024);
	cq_ok(fk.calls[4].context, 0, 0, 0);
	cq_ok(fk.calls[5].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_string_equal(w.req.errmsg, "");
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);
	st = rail_state(e, 1);
	assert_int_equal(st.up, 0);
	assert_int_equal(st.downs, 1);
	assert_int_equal(st.rerouted, 2);
	assert_int_equal(st.cooldown_ms, 1000);
	assert_int_equal(rail_state(e, 0).up, 1);
	assert_int_equal(e->ctx->rerouted, 2);
	assert_int_equal(e->ctx->rails_down, 1);
}

/* With rail 1 down, new writes (plain and striped) take rail 0 only; a
 * plain write on a rail that fails goes again on the next rail with the
 * key it was given for that one. */
static void test_new_ops_avoid_down_rail(void **state)
{
	struct env *e = *state;
	struct tracked w[4], s;

	two_rails(e, 60000);
	/* A plain write on rail 1 (round-robin: the second) fails. */
	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].rail, 1);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	tern_progress(e->ctx);
	tern_progress(e->ctx); /* queued again on rail 0: the next pass */
	assert_int_equal(fk.ncalls, 3);
	assert_write(&fk.calls[2], 0, e->buf + 64, RBASE + 64, 64);
	assert_int_equal(w[1].calls, 0);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w[0].status, 0);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].status, 0);
	/* From now on: rail 0, plain and striped. */
	assert_int_equal(write_nth(e, &w[2], 2), 0);
	assert_int_equal(write_nth(e, &w[3], 3), 0);
	track_init(&s);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &s.req),
			 0);
	tern_progress(e->ctx);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 7);
	for (size_t k = 3; k < 7; k++)
		assert_int_equal(fk.calls[k].rail, 0);
	assert_int_equal(fk.calls[5].rkey, RKEY);
	assert_int_equal(fk.calls[6].rkey, RKEY);
	/* All done, clean: the striped write gives its descriptor back. */
	for (size_t k = 3; k < 7; k++)
		cq_ok(fk.calls[k].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w[2].status, 0);
	assert_int_equal(w[3].status, 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.status, 0);
	assert_int_equal(e->peer.inflight, 0);
}

/* After the cooldown, the next write to the peer sends a probe beside it:
 * a write of 0 bytes of tern's own on the down rail, to the same place,
 * with delivery complete; the caller's write itself takes a live rail.
 * The probe's success brings the rail back. A failure soon after doubles
 * the wait (a flapping link); a failed probe, whose failure reaches
 * nobody, waits the same again. */
static void test_probe(void **state)
{
	struct env *e = *state;
	struct tracked w[6];

	two_rails(e, 5);
	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	tern_progress(e->ctx);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	passes(e, 2);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(e->peer.down, 2);
	/* Not due yet: no probe. */
	assert_int_equal(write_nth(e, &w[2], 2), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 4);
	assert_int_equal(fk.calls[3].rail, 0);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	tern_progress(e->ctx);
	sleep_ms(20);
	/* Due: the write takes rail 0, a probe of 0 bytes goes on rail 1. */
	assert_int_equal(write_nth(e, &w[3], 3), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 6);
	assert_write(&fk.calls[4], 0, e->buf + 3 * 64, RBASE + 3 * 64, 64);
	assert_int_equal(fk.calls[5].rail, 1);
	assert_int_equal(fk.calls[5].len, 0);
	assert_int_equal(fk.calls[5].rkey, RKEY + 1);
	assert_int_equal(fk.calls[5].raddr, RBASE + 3 * 64);
	assert_true(fk.calls[5].flags & TERN__PF_DELIVER);
	assert_int_equal(rail_state(e, 1).probes, 1);
	/* One probe at a time. */
	assert_int_equal(write_nth(e, &w[4], 4), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 7);
	assert_int_equal(fk.calls[6].rail, 0);
	cq_ok(fk.calls[4].context, 0, 0, 0);
	cq_ok(fk.calls[5].context, 0, 0, 0);
	cq_ok(fk.calls[6].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w[3].status, 0);
	assert_int_equal(w[4].status, 0);
	assert_int_equal(e->peer.down, 0);
	assert_int_equal(rail_state(e, 1).up, 1);
	assert_int_equal(e->ctx->rails_up, 1);
	assert_int_equal(e->peer.inflight, 0);
	/* Fails again at once: down, for twice as long. */
	assert_int_equal(write_nth(e, &w[0], 5), 0);
	assert_int_equal(write_nth(e, &w[1], 6), 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 9);
	assert_int_equal(fk.calls[8].rail, 1);
	cq_err_path(fk.calls[8].context, -TERN_EPROV);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 10);
	assert_int_equal(e->peer.down, 2);
	assert_int_equal(rail_state(e, 1).cooldown_ms, 10);
	assert_int_equal(rail_state(e, 1).downs, 2);
	cq_ok(fk.calls[7].context, 0, 0, 0);
	cq_ok(fk.calls[9].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w[1].status, 0);
	/* A probe that fails: still down, the same wait (the flap's, 10 ms)
	 * again; nobody told. */
	sleep_ms(30);
	assert_int_equal(write_nth(e, &w[5], 7), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 12);
	assert_int_equal(fk.calls[10].rail, 0);
	assert_int_equal(fk.calls[11].rail, 1);
	assert_int_equal(fk.calls[11].len, 0);
	cq_err_path(fk.calls[11].context, -TERN_EPROV);
	cq_ok(fk.calls[10].context, 0, 0, 0);
	passes(e, 3);
	assert_int_equal(fk.ncalls, 12);
	assert_int_equal(e->peer.down, 2);
	assert_int_equal(rail_state(e, 1).cooldown_ms, 10);
	assert_int_equal(rail_state(e, 1).downs, 2);
	assert_int_equal(rail_state(e, 1).probes, 2);
	assert_int_equal(w[5].calls, 1);
	assert_int_equal(w[5].status, 0);
	assert_int_equal(e->peer.inflight, 0);
}

/* A write with immediate is never posted twice: the target might count
 * it twice. Cut in parts (past max_rma_size), its parts without the
 * immediate go again; the last, carrying it, fails the request. */
static void test_imm_never_repeated(void **state)
{
	struct env *e = *state;
	struct tracked w, x;

	two_rails(e, 60000);
	e->ctx->max_rma_size = 1024;
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 7, &w.req),
			 0);
	track_init(&x);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 3000,
					&e->rdesc, 0, 9, &x.req),
			 0);
	tern_progress(e->ctx);
	/* The short one on rail 0; the long one's first two parts from
	 * rail 1 (its last waits for them). */
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[1].rail, 1);
	assert_true(fk.calls[1].flags & TERN__PF_DELIVER);
	cq_err_path(fk.calls[0].context, -TERN_EPROV);
	tern_progress(e->ctx);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, -TERN_EPROV);
	assert_int_equal(e->peer.down, 1);
	/* Part 2 (rail 0, now down) failed: again on rail 1. */
	assert_int_equal(fk.calls[2].rail, 0);
	cq_err_path(fk.calls[2].context, -TERN_EPROV);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	tern_progress(e->ctx);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 4);
	assert_int_equal(fk.calls[3].rail, 1);
	assert_int_equal(fk.calls[3].rkey, RKEY + 1);
	assert_true(fk.calls[3].flags & TERN__PF_DELIVER);
	assert_int_equal(fk.calls[3].raddr, RBASE + 1024);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	tern_progress(e->ctx);
	tern_progress(e->ctx);
	/* The last, with the immediate, on a live rail; it fails: over. */
	assert_int_equal(fk.ncalls, 5);
	assert_int_equal(fk.calls[4].rail, 1);
	assert_true(fk.calls[4].flags & TERN__PF_IMM);
	assert_int_equal(x.calls, 0);
	cq_err_path(fk.calls[4].context, -TERN_EPROV);
	tern_progress(e->ctx);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -TERN_EPROV);
	assert_int_equal(fk.ncalls, 5);
	/* Every rail down: the peer is gone. */
	assert_int_equal(e->peer.gone, 1);
	assert_int_equal(write_nth(e, &w, 1), -TERN_EPEERGONE);
}

/* An error that is the operation's own (a bad key, refused access) says
 * nothing of the path: the request fails, the rail stays up. So with
 * failover off: every error reaches the caller, as with one rail. */
static void test_own_errors_and_off(void **state)
{
	struct env *e = *state;
	struct tracked w[2];

	two_rails(e, 60000);
	assert_int_equal(write_nth(e, &w[0], 0), 0);
	tern_progress(e->ctx);
	cq_err(fk.calls[0].context, -TERN_EACCESS, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w[0].status, -TERN_EACCESS);
	assert_int_equal(e->peer.down, 0);
	e->ctx->failover = 0;
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	tern_progress(e->ctx);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	tern_progress(e->ctx);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].status, -TERN_EPROV);
	assert_int_equal(e->peer.down, 0);
	assert_int_equal(fk.ncalls, 2);
}

/* A batch's piece that fails goes again on the other rail, with that
 * rail's key for its region; a batch with immediates does not. */
static void test_pieces_rerouted(void **state)
{
	struct env *e = *state;
	const struct tern_piece pc[3] = {
		{ .loff = 0, .roff = 4096, .len = 64 },
		{ .loff = 64, .roff = 8192, .len = 128 },
		{ .loff = 256, .roff = 0, .len = 32 },
	};
	struct tracked w;

	two_rails(e, 60000);
	track_init(&w);
	assert_int_equal(tern_write_pieces(&e->peer, &e->mr, pc, 3, &e->rdesc,
					   1, 0, 0, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[1].rail, 0);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	passes(e, 3); /* the fake reads up to an error entry per pass */
	assert_int_equal(fk.ncalls, 4);
	assert_write(&fk.calls[3], 1, e->buf + 64, RBASE + 8192, 128);
	assert_int_equal(w.calls, 0);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);
}

/* Rail 1 down, its probe due: the write takes rail 0, the probe rail 1. */
static void down_then_due(struct env *e, struct tracked *w)
{
	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	tern_progress(e->ctx);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	passes(e, 2);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(e->peer.down, 2);
	assert_int_equal(w[1].status, 0);
	sleep_ms(20);
}

/* A probe whose post fails (the provider refuses it at once, as tcp may
 * on a reset connection) is a failed try: the rail waits its cooldown
 * again, then is probed again; it is never left waiting on a probe that
 * will never complete. */
static void test_probe_post_fails(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { 0, -TERN_EPROV };
	struct tracked w[4];

	two_rails(e, 5);
	down_then_due(e, w);
	fake_script(TERN_ARRAY_SIZE(rets), rets);
	assert_int_equal(write_nth(e, &w[2], 2), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 5);
	assert_int_equal(fk.calls[3].rail, 0);
	assert_int_equal(fk.calls[4].rail, 1);
	assert_int_equal(fk.calls[4].len, 0);
	assert_int_equal(fk.calls[4].ret, -TERN_EPROV);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w[2].status, 0);
	assert_int_equal(e->peer.down, 2);
	assert_int_equal(rail_state(e, 1).probes, 1);
	assert_int_equal(rail_state(e, 1).cooldown_ms, 5);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);
	/* Due again: a second probe, which brings the rail back. */
	sleep_ms(30);
	assert_int_equal(write_nth(e, &w[3], 3), 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 7);
	assert_int_equal(fk.calls[6].rail, 1);
	assert_int_equal(fk.calls[6].len, 0);
	cq_ok(fk.calls[5].context, 0, 0, 0);
	cq_ok(fk.calls[6].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w[3].status, 0);
	assert_int_equal(e->peer.down, 0);
	assert_int_equal(rail_state(e, 1).probes, 2);
	assert_int_equal(e->peer.inflight, 0);
}

/* A part waiting to go again is work: a caller's own event loop
 * (tern_ctx_timeout()) is told to come back soon, not to sleep until a
 * completion that may never come; so while its post is refused. */
static void test_redo_wakes(void **state)
{
	struct env *e = *state;
	static const ssize_t again[] = { -EAGAIN };
	struct tracked w;

	two_rails(e, 60000);
	e->ctx->can_wait = 1;
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 2);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	passes(e, 1);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(e->peer.down, 2);
	assert_true(e->ctx->redo_head != NULL);
	assert_in_range(tern_ctx_timeout(e->ctx), 0, 1);
	fake_script(TERN_ARRAY_SIZE(again), again);
	passes(e, 1);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[2].ret, -EAGAIN);
	assert_true(e->ctx->redo_head != NULL);
	assert_in_range(tern_ctx_timeout(e->ctx), 0, 1);
	passes(e, 1);
	assert_int_equal(fk.ncalls, 4);
	assert_true(e->ctx->redo_head == NULL);
	cq_ok(fk.calls[3].context, 0, 0, 0);
	passes(e, 1);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_string_equal(w.req.errmsg, "");
	assert_int_equal(w.req.prov_errno, 0);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);
}

/* A part waiting to go again whose peer goes (or whose ctx closes) is
 * not posted: its request completes once, with the peer's fate, every
 * credit back and nothing left queued. */
static void test_redo_peer_gone_or_closing(void **state)
{
	struct env *e = *state;
	struct tracked w[2];

	two_rails(e, 60000);
	for (int k = 0; k < 2; k++) {
		size_t at = fk.ncalls;

		track_init(&w[k]);
		assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048,
					    &e->rdesc, 0, &w[k].req),
				 0);
		tern_progress(e->ctx);
		assert_int_equal(fk.ncalls, at + 2);
		cq_ok(fk.calls[at].context, 0, 0, 0);
		cq_err_path(fk.calls[at + 1].context, -TERN_EPROV);
		passes(e, 1);
		assert_true(e->ctx->redo_head != NULL);
		if (k == 0)
			assert_int_equal(tern__peer_gone(&e->peer), 0);
		else
			e->ctx->closing = 1;
		passes(e, 2);
		assert_int_equal(fk.ncalls, at + 2);
		assert_true(e->ctx->redo_head == NULL);
		assert_int_equal(w[k].calls, 1);
		assert_int_equal(w[k].status,
				 k == 0 ? -TERN_EPEERGONE : -ECANCELED);
		assert_int_equal(e->ctx->rails[0].tx_credits, 8);
		assert_int_equal(e->ctx->rails[1].tx_credits, 8);
		assert_int_equal(e->peer.inflight, 0);
		e->peer.gone = 0;
		e->peer.down = 0;
	}
	e->ctx->closing = 0;
}

/* ---- Writes with immediate stamped (dedup.h) ---- */

/* The fixed bits of the stamps the ctx sends (its tag, where tagged). */
static uint32_t stamp_hi;

/* @nrails rails to the peer, failover on, writes with immediate stamped
 * (remote CQ data of 8 bytes): the ctx is its own target, its arrivals
 * on rail r from the peer's address there (source id 1), so what a
 * write delivers (fake_call.data) comes back through deliver(). Where
 * @tagged the CQ names no source (tcp): the stamps carry the tag of the
 * peer's card, which is this ctx's own. */
static void stamp_setup(struct env *e, unsigned int nrails, int tagged)
{
	two_rails(e, 60000);
	e->ctx->nrails = nrails;
	e->peer.nrails = nrails;
	e->rdesc.nkeys = nrails;
	for (unsigned int r = 2; r < nrails; r++) {
		e->peer.fiaddr[r] = PEER_ADDR + r;
		e->rdesc.keys[r] = RKEY + r;
	}
	e->ctx->stamp = 1;
	e->ctx->imm_source = !tagged;
	tern__stamp_layout(e->ctx, 0);
	e->peer.src_id = 1;
	for (unsigned int r = 0; r < nrails && !tagged; r++) {
		struct tern_rail *rail = &e->ctx->rails[r];

		rail->prov.source = 1;
		rail->prov.source_rma = 1;
		rail->nsrc_of = 16;
		rail->src_of = calloc(rail->nsrc_of, sizeof(*rail->src_of));
		assert_non_null(rail->src_of);
		rail->src_of[PEER_ADDR + r] = 1;
	}
	assert_int_equal(tern__stamps_get(e->ctx, &e->peer, NULL), 0);
	e->peer.stamps->seq = 0; /* numbered from 1 here */
	if (tagged)
		tern__stamp_layout(e->ctx, e->peer.stamps->tag);
	stamp_hi = e->ctx->stamp_hi;
}

static void stamping(struct env *e, unsigned int nrails)
{
	stamp_setup(e, nrails, 0);
}

/* Write @k (a provider call) landed at its target. */
static void deliver(unsigned int k)
{
	const struct fake_call *c = &fk.calls[k];

	assert_int_equal(c->op, FOP_WRITE);
	assert_true(c->flags & TERN__PF_IMM);
	cq_imm_data(c->rail, PEER_ADDR + c->rail, c->data);
}

/* Call @k carries immediate @imm stamped @seq, a repeat or not. */
static void assert_stamp(unsigned int k, uint32_t imm, uint32_t seq, int repeat)
{
	assert_int_equal((uint32_t)fk.calls[k].data, imm);
	assert_int_equal(fk.calls[k].data >> 32,
			 stamp_hi | seq | (repeat ? TERN__STAMP_REPEAT : 0));
}

static void expect(struct env *e, struct tracked *x, uint32_t imm,
		   uint64_t count)
{
	track_init(x);
	assert_int_equal(tern_imm_expect(e->ctx, imm, count, &x->req), 0);
}

/* One write with immediate 7 (the target expecting @count of them):
 * its first attempt, landed or not (@landed), completes with a path
 * error; call 1 is its repeat. */
static void imm_failed_once(struct env *e, struct tracked *w, struct tracked *x,
			    uint64_t count, int landed, int tagged)
{
	stamp_setup(e, 2, tagged);
	expect(e, x, 7, count);
	track_init(w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 7, &w->req),
			 0);
	tern_progress(e->ctx);
	if (landed)
		deliver(0);
	cq_err_path(fk.calls[0].context, -TERN_EPROV);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].rail, 1);
	assert_stamp(1, 7, 1, 1);
}

/* A write with immediate whose first attempt landed, then completed
 * with a path error: it goes again on the other rail, with its number
 * and REPEAT; the target drops the repeat. Counted once: the
 * expectation completes with the other write's arrival, nothing left
 * over; the writes complete clean. Stamped @tagged or not, numbered
 * after @from. */
static void repeat_after_delivery(struct env *e, int tagged, uint32_t from)
{
	struct tracked w[2], x;
	uint32_t first = from, second;

	stamp_setup(e, 2, tagged);
	e->peer.stamps->seq = from;
	tern__stamp_next(&first, e->ctx->stamp_max);
	second = first;
	tern__stamp_next(&second, e->ctx->stamp_max);
	expect(e, &x, 7, 2);
	for (int k = 0; k < 2; k++) {
		track_init(&w[k]);
		assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64,
						&e->rdesc, 0, 7, &w[k].req),
				 0);
	}
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[0].rail, 0);
	assert_stamp(0, 7, first, 0);
	assert_stamp(1, 7, second, 0);
	deliver(0);
	cq_err_path(fk.calls[0].context, -TERN_EPROV);
	passes(e, 2);
	assert_int_equal(e->peer.down, 1);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[2].rail, 1);
	assert_int_equal(fk.calls[2].rkey, RKEY + 1);
	assert_stamp(2, 7, first, 1);
	deliver(2);
	passes(e, 1);
	assert_int_equal(x.calls, 0); /* one write counted, not two */
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	assert_int_equal(e->ctx->imm_dups, 1);
	deliver(1);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	passes(e, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 0);
	assert_int_equal(e->ctx->imm_unchecked, 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(w[k].calls, 1);
		assert_int_equal(w[k].status, 0);
	}
	assert_int_equal(e->peer.inflight, 0);
}

static void test_imm_repeat_after_delivery(void **state)
{
	repeat_after_delivery(*state, 0, 0);
}

/* The first attempt failed before it landed: the repeat is the one
 * counted, once. */
static void test_imm_repeat_after_loss(void **state)
{
	struct env *e = *state;
	struct tracked w, x;

	imm_failed_once(e, &w, &x, 1, 0, 0);
	deliver(1);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	passes(e, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, 0);
	assert_int_equal(w.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 0);
	assert_int_equal(e->ctx->imm_dups, 0);
	assert_int_equal(e->ctx->imm_unchecked, 0);
}

/* The repeat lands first, the original late (its rail's CQ read after
 * the other's): the repeat counts, the original is dropped. A count of 2
 * met by one write and its repeat would be a count reached early: the
 * expectation still waits. */
static void test_imm_original_late(void **state)
{
	struct env *e = *state;
	struct tracked w, x;

	imm_failed_once(e, &w, &x, 2, 0, 0);
	deliver(1);
	passes(e, 1);
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	deliver(0); /* the original, on rail 0, read after */
	cq_ok(fk.calls[1].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	assert_int_equal(e->ctx->imm_dups, 1);
	assert_int_equal(w.status, 0);
	/* A second write: the count is met, exactly. */
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 7, &w.req),
			 0);
	passes(e, 1);
	assert_int_equal(fk.ncalls, 3);
	assert_stamp(2, 7, 2, 0);
	deliver(2);
	cq_ok(fk.calls[2].context, 0, 0, 0);
	passes(e, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 0);
}

/* A piece with an immediate (TERN_PIECES_IMM) over three rails: its
 * rail fails before it lands; the repeat lands, then its rail fails
 * too; it goes again, still a repeat with the same number. The target
 * counts it once. */
static void test_imm_repeat_fails_again(void **state)
{
	struct env *e = *state;
	const struct tern_piece pc = { .loff = 0, .roff = 4096, .len = 64 };
	struct tracked w, x;

	stamping(e, 3);
	expect(e, &x, 5, 1);
	track_init(&w);
	assert_int_equal(tern_write_pieces(&e->peer, &e->mr, &pc, 1, &e->rdesc,
					   1, TERN_PIECES_IMM, 5, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 1);
	assert_stamp(0, 5, 1, 0);
	cq_err_path(fk.calls[0].context, -TERN_EPROV);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].rail, 1);
	assert_stamp(1, 5, 1, 1);
	deliver(1);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	passes(e, 3);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, 0);
	assert_int_equal(e->peer.down, 3);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[2].rail, 2);
	assert_int_equal(fk.calls[2].rkey, RKEY + 2);
	assert_int_equal(fk.calls[2].raddr, RBASE + 4096);
	assert_stamp(2, 5, 1, 1);
	deliver(2);
	deliver(0); /* and the first, late after all */
	cq_ok(fk.calls[2].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 5), 0);
	assert_int_equal(e->ctx->imm_dups, 2);
	assert_int_equal(e->ctx->rails[2].tx_credits, 8);
}

/* A write with immediate cut in parts (past max_rma_size), stamped: a
 * part without the immediate fails and goes again; the part with the
 * immediate waits for it to land (never early); it fails after landing
 * and goes again, a repeat, which the target drops. */
static void test_imm_cut_repeat(void **state)
{
	struct env *e = *state;
	struct tracked w, x;

	stamping(e, 3);
	e->ctx->max_rma_size = 1024;
	expect(e, &x, 9, 1);
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 3000,
					&e->rdesc, 0, 9, &w.req),
			 0);
	passes(e, 1);
	assert_int_equal(fk.ncalls, 2); /* the last waits */
	assert_int_equal(fk.calls[1].rail, 1);
	cq_err_path(fk.calls[1].context, -TERN_EPROV);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	passes(e, 3);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[2].rail, 2);
	assert_int_equal(fk.calls[2].raddr, RBASE + 1024);
	assert_false(fk.calls[2].flags & TERN__PF_IMM);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 3); /* the repeat has not landed */
	cq_ok(fk.calls[2].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(fk.ncalls, 4);
	assert_int_equal(fk.calls[3].rail, 2);
	assert_int_equal(fk.calls[3].raddr, RBASE + 2048);
	assert_stamp(3, 9, 1, 0);
	deliver(3);
	cq_err_path(fk.calls[3].context, -TERN_EPROV);
	passes(e, 3);
	assert_int_equal(x.calls, 1);
	assert_int_equal(fk.ncalls, 5);
	assert_int_equal(fk.calls[4].rail, 0);
	assert_int_equal(fk.calls[4].raddr, RBASE + 2048);
	assert_int_equal(fk.calls[4].len, 3000 - 2048);
	assert_stamp(4, 9, 1, 1);
	deliver(4);
	cq_ok(fk.calls[4].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 9), 0);
	assert_int_equal(e->ctx->imm_dups, 1);
}

/* Two batches with immediates (TERN_PIECES_IMM), one on each rail; rail
 * 0 fails with two of its three pieces landed: all three go again on
 * rail 1. Every piece counted once: the expectation of all six is met
 * exactly. */
static void test_imm_pieces_rail_fails(void **state)
{
	struct env *e = *state;
	const struct tern_piece pc[3] = {
		{ .loff = 0, .roff = 4096, .len = 64 },
		{ .loff = 64, .roff = 8192, .len = 128 },
		{ .loff = 256, .roff = 0, .len = 32 },
	};
	struct tracked w[2], x;

	stamping(e, 2);
	expect(e, &x, 5, 6);
	for (int k = 0; k < 2; k++) {
		track_init(&w[k]);
		assert_int_equal(
			tern_write_pieces(&e->peer, &e->mr, pc, 3, &e->rdesc, 1,
					  TERN_PIECES_IMM, 5, &w[k].req),
			0);
	}
	passes(e, 1);
	assert_int_equal(fk.ncalls, 6);
	for (unsigned int k = 0; k < 6; k++) {
		assert_int_equal(fk.calls[k].rail, k / 3);
		assert_stamp(k, 5, k + 1, 0);
	}
	deliver(0);
	deliver(1);
	for (unsigned int k = 0; k < 3; k++)
		cq_err_path(fk.calls[k].context, -TERN_EPROV);
	for (unsigned int k = 3; k < 6; k++) {
		deliver(k);
		cq_ok(fk.calls[k].context, 0, 0, 0);
	}
	passes(e, 5);
	assert_int_equal(w[1].status, 0);
	assert_int_equal(fk.ncalls, 9);
	for (unsigned int k = 6; k < 9; k++) {
		assert_int_equal(fk.calls[k].rail, 1);
		assert_stamp(k, 5, k - 5, 1);
		deliver(k);
		cq_ok(fk.calls[k].context, 0, 0, 0);
	}
	passes(e, 2);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, 0);
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(w[0].status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 5), 0);
	assert_int_equal(e->ctx->imm_dups, 2);
}

/* A repeat from a source this ctx cannot name (the CQ gives no address
 * it knows) cannot be checked: it is the sender's abort, told to the
 * expectation (-TERN_EABORTED), never a second count. A stamped
 * original from there counts. */
static void test_imm_repeat_unknown_source(void **state)
{
	struct env *e = *state;
	struct tracked w, x;

	imm_failed_once(e, &w, &x, 3, 1, 0);
	e->ctx->rails[1].src_of[PEER_ADDR + 1] = 0;
	cq_imm_data(1, PEER_ADDR + 1, 7 | (uint64_t)40 << 32);
	passes(e, 1);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 2);
	deliver(1); /* on rail 1: of no known source */
	cq_ok(fk.calls[1].context, 0, 0, 0);
	passes(e, 2);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -TERN_EABORTED);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(e->ctx->imm_unchecked, 1);
	assert_int_equal(w.status, 0);
}

/* One rail, or remote CQ data of 4 bytes (efa, verbs): nothing is
 * stamped, the high word stays 0. */
static void test_imm_unstamped(void **state)
{
	struct env *e = *state;
	struct tracked w;

	two_rails(e, 60000);
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 7, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(fk.calls[0].data, 7);
	/* A high word from elsewhere that is not a stamp counts. */
	cq_imm_data(0, 0, 8);
	passes(e, 1);
	assert_int_equal(tern_imm_count(e->ctx, 8), 1);
}

/* Tagged (tcp: the CQ names no source of writes): the target finds the
 * sender by the tag its stamps carry, and counts a repeat once as where
 * the CQ names it; the numbers wrap from 2^18-1 to 1. */
static void test_imm_tagged_counted_once(void **state)
{
	struct env *e = *state;

	repeat_after_delivery(e, 1, TERN__STAMP_TSEQ_MAX - 1);
	assert_int_equal(e->ctx->imm_source, 0);
	assert_true(stamp_hi & TERN__STAMP_TAGGED);
	assert_int_equal(tern__stamp_tag_of(stamp_hi), e->peer.stamps->tag);
	assert_int_equal(fk.calls[0].data >> 32,
			 stamp_hi | TERN__STAMP_TSEQ_MAX);
	assert_int_equal(fk.calls[1].data >> 32, stamp_hi | 1);
}

/* A tag no peer's card has: an original counts (of an unknown
 * source's), a repeat cannot be checked and is told as aborted. */
static void test_imm_tagged_unknown_tag(void **state)
{
	struct env *e = *state;
	struct tracked x;
	uint32_t other;

	stamp_setup(e, 2, 1);
	other = TERN__STAMP_TAGGED |
		(e->peer.stamps->tag % (TERN__STAMP_TAGS - 1) + 1)
			<< TERN__STAMP_TAG_SHIFT;
	expect(e, &x, 7, 3);
	cq_imm_data(0, PEER_ADDR, 7 | (uint64_t)(other | 40) << 32);
	passes(e, 1);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	cq_imm_data(1, PEER_ADDR + 1,
		    7 | (uint64_t)(other | 40 | TERN__STAMP_REPEAT) << 32);
	passes(e, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -TERN_EABORTED);
	assert_int_equal(x.req.len, 1);
	assert_int_equal(e->ctx->imm_unchecked, 1);
	assert_int_equal(e->ctx->imm_dups, 0);
}

/* A write with immediate 7 (call @k, number @seq) lands, then fails
 * with a path error; its repeat (call @k + 1) lands too. */
static void imm_landed_repeated(struct env *e, struct tracked *w,
				unsigned int k, uint32_t seq)
{
	track_init(w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 7, &w->req),
			 0);
	passes(e, 1);
	assert_int_equal(fk.ncalls, k + 1);
	assert_stamp(k, 7, seq, 0);
	deliver(k);
	cq_err_path(fk.calls[k].context, -TERN_EPROV);
	passes(e, 2);
	assert_int_equal(fk.ncalls, k + 2);
	assert_stamp(k + 1, 7, seq, 1);
	deliver(k + 1);
	cq_ok(fk.calls[k + 1].context, 0, 0, 0);
	passes(e, 1);
	assert_int_equal(w->status, 0);
}

/* Peers of one card share its tag (no collision). Two cards of one tag:
 * their repeats cannot be checked (told as aborted, never counted
 * twice); once the other is released the tag names the peer again. */
static void test_imm_tagged_shared(void **state)
{
	/* A card of the same tag as the fixture's peer's (empty) card. */
	static const uint8_t card[4] = { 0xa8, 0x18, 0, 0 };
	struct env *e = *state;
	struct tern_peer *twin, *other;
	struct tracked w[2], x;
	uint32_t tag;

	stamp_setup(e, 3, 1);
	tag = e->peer.stamps->tag;
	assert_int_equal(tern__stamp_tag(card, sizeof(card)), tag);
	assert_int_equal(e->ctx->tag_src[tag], 1);
	twin = calloc(1, sizeof(*twin));
	assert_non_null(twin);
	twin->src_id = 1;
	assert_int_equal(tern__stamps_get(e->ctx, twin, &e->peer), 0);
	assert_int_equal(e->ctx->tag_src[tag], 1);
	tern__stamps_put(e->ctx, twin);
	free(twin);
	assert_int_equal(e->ctx->tag_src[tag], 1);
	other = calloc(1, sizeof(*other) + sizeof(card));
	assert_non_null(other);
	memcpy(other->card, card, sizeof(card));
	other->card_len = sizeof(card);
	other->src_id = 2;
	assert_int_equal(tern__stamps_get(e->ctx, other, NULL), 0);
	assert_int_equal(e->ctx->tag_src[tag], TERN__TAG_SHARED);
	e->ctx->peers = &e->peer;

	expect(e, &x, 7, 2);
	imm_landed_repeated(e, &w[0], 0, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -TERN_EABORTED);
	assert_int_equal(x.req.len, 1);
	assert_int_equal(e->ctx->imm_unchecked, 1);

	tern__stamps_put(e->ctx, other);
	free(other);
	assert_int_equal(e->ctx->tag_src[tag], 1);
	/* The one counted stays, the expectation that waited for it gone;
	 * the next write, repeated, counts once. */
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	imm_landed_repeated(e, &w[1], 2, 2);
	assert_int_equal(tern_imm_count(e->ctx, 7), 2);
	assert_int_equal(e->ctx->imm_dups, 1);
	assert_int_equal(e->ctx->imm_unchecked, 1);
	e->ctx->peers = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_striped_parts_rerouted),
		T(test_new_ops_avoid_down_rail),
		T(test_probe),
		T(test_imm_never_repeated),
		T(test_own_errors_and_off),
		T(test_pieces_rerouted),
		T(test_probe_post_fails),
		T(test_redo_wakes),
		T(test_redo_peer_gone_or_closing),
		T(test_imm_repeat_after_delivery),
		T(test_imm_repeat_after_loss),
		T(test_imm_original_late),
		T(test_imm_repeat_fails_again),
		T(test_imm_cut_repeat),
		T(test_imm_pieces_rail_fails),
		T(test_imm_repeat_unknown_source),
		T(test_imm_unstamped),
		T(test_imm_tagged_counted_once),
		T(test_imm_tagged_unknown_tag),
		T(test_imm_tagged_shared),
#undef T
	};

	/* Rails going down are logged; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
