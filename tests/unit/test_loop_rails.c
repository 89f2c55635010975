/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Several rails: writes alternate rails, long writes are
 * striped in chunks (the descriptor copied into the ctx's pool),
 * tern_read_pieces(), and completions read from every rail.
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

/* ---- Several rails ---- */

static size_t call_of(const struct tracked *t)
{
	for (size_t i = 0; i < fk.ncalls; i++) {
		if (fk.calls[i].context ==
		    (const void *)tern__rp(&t->req)->fictx)
			return i;
	}
	fail_msg("request never posted");
	return 0;
}

/* A write longer than the stripe chunk on two rails: chunks alternate
 * rails from the request's rail, each with that rail's key and address,
 * without "more"; the request completes once, after every chunk; a
 * failed chunk fails it, and the message names the rail. */
static void test_striping(void **state)
{
	struct env *e = *state;
	struct tracked w, x;
	const size_t len = 3 * 1024 + 5; /* chunks 1024, 1024, 1024, 5 */

	e->ctx->nrails = 2;
	e->ctx->stripe_chunk = 1024;
	e->peer.nrails = 2;
	e->peer.fiaddr[1] = PEER_ADDR + 1;
	e->rdesc.nkeys = 2;
	e->rdesc.keys[1] = RKEY + 1;
	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf + 7, len,
				    &e->rdesc, 100, &w.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 4);
	for (unsigned int k = 0; k < 4; k++) {
		const struct fake_call *c = &fk.calls[k];

		assert_int_equal(c->op, FOP_WRITE);
		assert_int_equal(c->rail, k % 2); /* first rail: 0 */
		assert_int_equal(c->addr, PEER_ADDR + k % 2);
		assert_int_equal(c->rkey, RKEY + k % 2);
		assert_ptr_equal(c->desc, &local_desc_token[k % 2]);
		assert_ptr_equal(c->buf, e->buf + 7 + 1024 * k);
		assert_int_equal(c->raddr, RBASE + 100 + 1024 * k);
		assert_int_equal(c->len, k < 3 ? 1024 : 5);
		assert_int_equal(c->flags & TERN__PF_MORE, 0);
	}
	assert_int_equal(e->ctx->rails[0].tx_credits, 6);
	assert_int_equal(e->ctx->rails[1].tx_credits, 6);
	for (unsigned int k = 0; k < 3; k++) {
		cq_ok(fk.calls[k].context, 0, 0, 0);
		tern_progress(e->ctx);
		assert_int_equal(w.calls, 0);
	}
	cq_ok(fk.calls[3].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.status, 0);
	assert_int_equal(w.req.len, len);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);

	/* The next one starts on rail 1; its chunk on rail 0 fails. */
	track_init(&x);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 2048, &e->rdesc,
				    0, &x.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 6);
	assert_int_equal(fk.calls[4].rail, 1);
	assert_int_equal(fk.calls[5].rail, 0);
	cq_err(fk.calls[5].context, -TERN_EPROV, 5, 0);
	tern_progress(e->ctx);
	assert_int_equal(x.calls, 0); /* its other chunk is still out */
	cq_ok(fk.calls[4].context, 0, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -TERN_EPROV);
	assert_non_null(strstr(x.req.errmsg, "rail 0: "));
	/* Short writes are not striped; neither is a write with
	 * immediate (its target counts one arrival). */
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 2048,
					&e->rdesc, 0, 9, &w.req),
			 0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 7);
	assert_int_equal(fk.calls[6].len, 2048);
}

/* tern_read_pieces(): rights and bounds checked before anything queues;
 * then every piece is a read (never carrying an immediate), batched with
 * "more", from its region into its local offset; one completion. */
static void test_read_pieces(void **state)
{
	struct env *e = *state;
	struct tern_mr_desc rd[2];
	struct tern_piece pc[3] = {
		{ .loff = 0, .roff = 512, .len = 100, .region = 1 },
		{ .loff = 2048, .roff = 0, .len = 64, .region = 0 },
		{ .loff = 100, .roff = 4000, .len = 96, .region = 1 },
	};
	struct tracked r;

	rd[0] = e->rdesc;
	rd[1] = e->rdesc;
	rd[1].base = RBASE + 0x10000;
	rd[1].keys[0] = RKEY + 1;
	track_init(&r);
	/* The env's descriptor allows remote writes only. */
	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 3, rd, 2, &r.req),
		-TERN_EACCESS);
	rd[0].flags |= TERN_MR_DESC_REMOTE_READ;
	rd[1].flags |= TERN_MR_DESC_REMOTE_READ;
	pc[2].roff = RLEN;
	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 3, rd, 2, &r.req),
		-TERN_EBOUNDS);
	pc[2].roff = 4000;
	pc[1].loff = ENV_BUF_LEN - 63;
	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 3, rd, 2, &r.req),
		-TERN_EBOUNDS);
	pc[1].loff = 2048;
	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 3, rd, 1, &r.req),
		-EINVAL); /* region index 1 of 1 */
	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 0, rd, 2, &r.req),
		-EINVAL);
	assert_int_equal(fk.ncalls, 0);

	assert_int_equal(
		tern_read_pieces(&e->peer, &e->mr, pc, 3, rd, 2, &r.req), 0);
	assert_int_equal(r.req.len, 260);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 3);
	for (unsigned int k = 0; k < 3; k++) {
		const struct fake_call *c = &fk.calls[k];

		assert_int_equal(c->op, FOP_READ);
		assert_ptr_equal(c->buf, e->buf + pc[k].loff);
		assert_int_equal(c->len, pc[k].len);
		assert_int_equal(c->raddr, rd[pc[k].region].base + pc[k].roff);
		assert_int_equal(c->rkey, rd[pc[k].region].keys[0]);
		assert_int_equal(c->addr, PEER_ADDR);
		assert_ptr_equal(c->desc, &local_desc_token[0]);
		assert_int_equal(c->flags & TERN__PF_IMM, 0);
		assert_int_equal(c->flags & TERN__PF_MORE,
				 k < 2 ? TERN__PF_MORE : 0);
	}
	assert_int_equal(e->ctx->rails[0].tx_credits, 5);
	cq_ok(fk.calls[0].context, 100, 0, 0);
	cq_ok(fk.calls[2].context, 96, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(r.calls, 0);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	tern_progress(e->ctx);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.req.len, 260);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);

	/* The same list written: the direction is the batch's, not the
	 * last one's. */
	track_init(&r);
	rd[0].flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_WRITE;
	rd[1].flags = rd[0].flags;
	assert_int_equal(
		tern_write_pieces(&e->peer, &e->mr, pc, 3, rd, 2, 0, 0, &r.req),
		0);
	tern_progress(e->ctx);
	assert_int_equal(fk.ncalls, 6);
	for (unsigned int k = 3; k < 6; k++)
		assert_int_equal(fk.calls[k].op, FOP_WRITE);
}

/* A striped write copies the descriptor into the ctx's pool: the caller's
 * may go at once; the copy comes back when the write completes (or is
 * cancelled) and the next striped write reuses it. */
static void test_striping_desc_pool(void **state)
{
	struct env *e = *state;
	struct tern_mr_desc d;
	struct tern__desc *copy;
	struct tracked w;

	e->ctx->nrails = 2;
	e->ctx->stripe_chunk = 1024;
	e->peer.nrails = 2;
	e->peer.fiaddr[1] = PEER_ADDR + 1;
	d = e->rdesc;
	d.nkeys = 2;
	d.keys[1] = RKEY + 1;
	track_init(&w);
	assert_null(e->ctx->desc_free);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 2048, &d, 0, &w.req), 0);
	memset(&d, 0xa5, sizeof(d)); /* the caller's copy is gone */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[0].rkey, RKEY);
	assert_int_equal(fk.calls[1].rkey, RKEY + 1);
	cq_ok(fk.calls[0].context, 0, 0, 0);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.calls, 1);
	copy = e->ctx->desc_free;
	assert_non_null(copy);
	assert_null(copy->next_free);

	/* Reused, and given back by a cancel too. */
	d = e->rdesc;
	d.nkeys = 2;
	track_init(&w);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 2048, &d, 0, &w.req), 0);
	assert_null(e->ctx->desc_free);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_ptr_equal(e->ctx->desc_free, copy);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.status, -ECANCELED);
}

static void test_rails(void **state)
{
	struct env *e = *state;
	struct tracked w[6], s, r;
	const struct fake_call *c;

	e->ctx->nrails = 2;
	e->peer.nrails = 2;
	e->peer.fiaddr[1] = PEER_ADDR + 1;
	e->rdesc.nkeys = 2;
	e->rdesc.keys[1] = RKEY + 1;
	/* A descriptor with fewer keys than the peer has rails. */
	track_init(&w[0]);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8,
			   &(struct tern_mr_desc){ .len = 64, .nkeys = 1 }, 0,
			   &w[0].req),
		-TERN_EDESC);

	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	track_init(&s);
	track_init(&r);
	assert_int_equal(tern_send(&e->peer, &e->mr, e->buf, 10, &s.req), 0);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 10, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 6);

	/* Writes alternate rails, each with that rail's address, key and
	 * local descriptor; messages stay on rail 0. */
	for (unsigned int i = 0; i < 4; i++) {
		c = &fk.calls[call_of(&w[i])];
		assert_int_equal(c->rail, i % 2);
		assert_int_equal(c->addr, PEER_ADDR + i % 2);
		assert_int_equal(c->rkey, RKEY + i % 2);
		assert_ptr_equal(c->desc, &local_desc_token[i % 2]);
	}
	assert_int_equal(fk.calls[call_of(&s)].rail, 0);
	assert_int_equal(fk.calls[call_of(&s)].addr, PEER_ADDR);
	assert_int_equal(fk.calls[call_of(&r)].rail, 0);
	/* Each rail's batch ends without "more". */
	assert_int_equal(fk.calls[call_of(&w[2])].flags, TERN__PF_MORE);
	assert_int_equal(fk.calls[call_of(&s)].flags, 0);
	assert_int_equal(fk.calls[call_of(&w[1])].flags, TERN__PF_MORE);
	assert_int_equal(fk.calls[call_of(&w[3])].flags, 0);
	assert_int_equal(e->ctx->rails[0].tx_credits, 5);
	assert_int_equal(e->ctx->rails[0].rx_credits, 7);
	assert_int_equal(e->ctx->rails[1].tx_credits, 6);

	/* Completions and immediates are read from every rail. */
	cq_ok(ctx_of(&w[1]), 64, 0, 0);
	cq_imm_on(1, 5);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(tern_imm_count(e->ctx, 5), 1);
	assert_int_equal(e->ctx->rails[1].tx_credits, 7);
	assert_int_equal(e->ctx->rails[0].tx_credits, 5);
	cq_ok(ctx_of(&w[0]), 64, 0, 0);
	cq_ok(ctx_of(&w[2]), 64, 0, 0);
	cq_ok(ctx_of(&w[3]), 64, 0, 0);
	cq_ok(ctx_of(&s), 10, 0, 0);
	cq_ok(ctx_of(&r), 10, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 5);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->rails[0].rx_credits, 8);
	assert_int_equal(e->ctx->rails[1].tx_credits, 8);

	/* A one-rail peer: every local rail uses its only key. */
	e->peer.nrails = 1;
	e->peer.fiaddr[1] = PEER_ADDR;
	e->rdesc.nkeys = 1;
	assert_int_equal(write_nth(e, &w[4], 4), 0);
	assert_int_equal(write_nth(e, &w[5], 5), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.calls[call_of(&w[4])].rkey, RKEY);
	assert_int_equal(fk.calls[call_of(&w[5])].rkey, RKEY);
	assert_int_not_equal(fk.calls[call_of(&w[4])].rail,
			     fk.calls[call_of(&w[5])].rail);
	assert_int_equal(e->peer.inflight, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_striping),
		T(test_read_pieces),
		T(test_rails),
		T(test_striping_desc_pool),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
