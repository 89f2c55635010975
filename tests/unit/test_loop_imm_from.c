/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Counted completions that cannot hang
 * (tern_imm_expect_from()): deadlines, expectations from one peer (the CQ's
 * source attribution), and aborts sent over control messages when a write
 * with immediate fails.
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
#include "wire/ctrl.h"

/* ---- Counted completions that cannot hang (tern_imm_expect_from) ---- */

/* A deadline: the expectation fails -ETIMEDOUT with req->len the
 * arrivals, which stay counted. */
static void test_imm_deadline(void **state)
{
	struct env *e = *state;
	struct tracked x;

	cq_imm(5);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect_from(e->ctx, NULL, 5, 3, 0, &x.req),
			 0);
	assert_int_equal(x.calls, 0);
	/* The timer and the callback. */
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, -ETIMEDOUT);
	assert_int_equal(x.req.len, 1);
	assert_int_equal(tern_imm_count(e->ctx, 5), 1);
	assert_int_equal(e->ctx->nexpect, 0);
	assert_int_equal(e->ctx->ntimers, 0);

	/* The loop wakes for it: a wait with no deadline of its own. */
	track_init(&x);
	assert_int_equal(tern_imm_expect_from(e->ctx, NULL, 5, 3, 20, &x.req),
			 0);
	cq_imm(5);
	assert_int_equal(tern_wait(e->ctx, &x.req, 5000), 0);
	assert_int_equal(x.req.status, -ETIMEDOUT);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(tern_imm_count(e->ctx, 5), 2);

	/* Satisfied when posted: succeeds, even with a 0 deadline. */
	track_init(&x);
	assert_int_equal(tern_imm_expect_from(e->ctx, NULL, 5, 2, 0, &x.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(tern_imm_count(e->ctx, 5), 0);

	/* Met before its deadline: its timer goes with it. */
	track_init(&x);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, NULL, 6, 1, 60000, &x.req), 0);
	assert_int_equal(e->ctx->ntimers, 1);
	cq_imm(6);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(e->ctx->ntimers, 0);
	/* Cancelled: likewise. */
	track_init(&x);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, NULL, 6, 1, 60000, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(e->ctx->ntimers, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(x.req.len, 0);
	assert_int_equal(e->ctx->imm.used, 0);
}

/* Two peers whose arrivals the CQ attributes (FI_SOURCE): AV addresses
 * PEER_ADDR (source 1) and PEER_ADDR + 1 (source 2). */
static void sources_on(struct env *e, struct tern_peer *b)
{
	struct tern_rail *r = &e->ctx->rails[0];

	r->prov.source = 1;
	r->prov.source_rma = 1;
	e->ctx->imm_source = 1;
	r->nsrc_of = 16;
	r->src_of = calloc(r->nsrc_of, sizeof(*r->src_of));
	assert_non_null(r->src_of);
	e->peer.src_id = 1;
	r->src_of[PEER_ADDR] = 1;
	memset(b, 0, sizeof(*b));
	b->ctx = e->ctx;
	b->nrails = 1;
	b->fiaddr[0] = PEER_ADDR + 1;
	b->src_id = 2;
	r->src_of[PEER_ADDR + 1] = 2;
	e->ctx->peers = &e->peer;
	e->peer.next = b;
	b->prev = &e->peer;
}

static void sources_off(struct env *e)
{
	struct tern_rail *r = &e->ctx->rails[0];

	free(r->src_of);
	r->src_of = NULL;
	r->nsrc_of = 0;
	r->prov.source = 0;
	r->prov.source_rma = 0;
	e->ctx->peers = NULL;
	e->peer.next = NULL;
}

/* Sources on (A is e->peer, B @b): B's arrivals do not count toward an
 * expectation from A; those left over are anyone's. */
static void from_peer_counts(struct env *e, struct tern_peer *b)
{
	struct tracked x, y;

	track_init(&x);
	/* No source in the CQ: unsupported. */
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 9, 1, -1, &x.req),
		-TERN_ENOTSUP);
	sources_on(e, b);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 9, 2, -1, &x.req), 0);
	assert_int_equal(e->peer.inflight, 1);
	cq_imm_from(PEER_ADDR + 1, 9);
	cq_imm_from(PEER_ADDR + 1, 9);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 9), 2);
	cq_imm_from(PEER_ADDR, 9);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_imm_from(PEER_ADDR, 9);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(e->peer.inflight, 0);
	/* B's two are still there, for anyone. */
	assert_int_equal(tern_imm_count(e->ctx, 9), 2);
	track_init(&y);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 9, 1, 0, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(y.req.status, -ETIMEDOUT);
	assert_int_equal(y.req.len, 0);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 9, 2, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.req.status, 0);
	assert_int_equal(e->ctx->imm.used, 0);
}

/* Which expectation claims which arrival. */
static void from_peer_one_each(struct env *e, struct tern_peer *b)
{
	struct tracked x, y, z;

	/* One per (peer, imm); any-peer and from-a-peer never mixed. */
	track_init(&x);
	track_init(&y);
	track_init(&z);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 10, 1, -1, &x.req), 0);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 10, 1, -1, &z.req),
		-EBUSY);
	assert_int_equal(tern_imm_expect(e->ctx, 10, 1, &z.req), -EBUSY);
	assert_int_equal(tern_imm_expect_from(e->ctx, b, 10, 1, -1, &y.req), 0);
	/* An unknown source counts for neither. */
	cq_imm_from(PEER_ADDR + 5, 10);
	cq_imm_from(TERN__PROV_ADDR_NONE, 10);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_imm_from(PEER_ADDR + 1, 10);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.req.status, 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_imm_count(e->ctx, 10), 2);
	/* Any-peer claims those of unknown source first. */
	cq_imm_from(PEER_ADDR, 10);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&z);
	assert_int_equal(tern_imm_expect(e->ctx, 10, 2, &z.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(tern_imm_count(e->ctx, 10), 1);
	track_init(&x);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 10, 1, -1, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, 0);
	/* ...then peers'. */
	cq_imm_from(PEER_ADDR, 11);
	cq_imm_from(PEER_ADDR + 1, 11);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&z);
	assert_int_equal(tern_imm_expect(e->ctx, 11, 2, &z.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(z.req.status, 0);
	assert_int_equal(e->ctx->imm.used, 0);
}

/* Expectations from a peer that is gone. */
static void from_peer_gone(struct env *e)
{
	struct tracked x, y;

	/* A peer gone: its expectations fail, later ones are refused, and
	 * any-peer ones stand. */
	track_init(&x);
	track_init(&y);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 12, 1, -1, &x.req), 0);
	assert_int_equal(tern_imm_expect(e->ctx, 13, 1, &y.req), 0);
	cq_imm_from(PEER_ADDR + 1, 12);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern__peer_gone(&e->peer), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, -TERN_EPEERGONE);
	assert_int_equal(x.req.len, 0);
	assert_int_equal(e->peer.nexpect, 0);
	assert_int_equal(e->peer.inflight, 0);
	track_init(&x);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 12, 1, -1, &x.req),
		-TERN_EPEERGONE);
	assert_int_equal(y.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	e->peer.gone = 0;
}

/* Arrivals of a source no peer has any more. */
static void from_peer_source_forgotten(struct env *e)
{
	struct tracked z;

	/* The last peer of a source goes: its arrivals count as unknown. */
	cq_imm_from(PEER_ADDR + 1, 14);
	assert_int_equal(tern_progress(e->ctx), 0);
	tern__imm_src_forget(e->ctx, 2);
	assert_int_equal(tern_imm_count(e->ctx, 14), 1);
	track_init(&z);
	assert_int_equal(tern_imm_expect(e->ctx, 14, 1, &z.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(z.req.status, 0);
	/* What is left: imm 12 from B (1), imm 10 unknown (1)... */
	assert_int_equal(tern_imm_count(e->ctx, 12), 1);
}

/* An expectation from A does not count B's writes of the same imm. */
static void test_imm_from_peer(void **state)
{
	struct env *e = *state;
	struct tern_peer b;

	from_peer_counts(e, &b);
	from_peer_one_each(e, &b);
	from_peer_gone(e);
	from_peer_source_forgotten(e);
	sources_off(e);
}

/* Control messages on rail 0: CTRL slots past its 8 tx slots, as
 * tern_ctx_open() makes them, the receives posted. */
#define NCTRL (TERN__CTRL_RECVS + TERN__CTRL_SENDS)

static void ctrl_on(struct env *e)
{
	struct tern_rail *r = &e->ctx->rails[0];
	struct tern__ctrl *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->buf = calloc(NCTRL, TERN__CTRL_LEN);
	assert_non_null(c->buf);
	c->mr = &e->mr;
	r->slots = realloc(r->slots, (8 + NCTRL) * sizeof(*r->slots));
	assert_non_null(r->slots);
	memset(r->slots + 8, 0, NCTRL * sizeof(*r->slots));
	r->slots_span = (8 + NCTRL) * sizeof(*r->slots);
	e->ctx->ctrl = c;
	assert_int_equal(tern__ctrl_post_all(e->ctx), 0);
	assert_int_equal(fake_count(FOP_CTRL_RECV), TERN__CTRL_RECVS);
}

static void ctrl_free(struct env *e)
{
	free(e->ctx->ctrl->buf);
	free(e->ctx->ctrl);
	e->ctx->ctrl = NULL;
}

/* An abort of @imm lands in control receive @i from AV address @src. */
static void ctrl_arrive(struct env *e, unsigned int i, uint64_t src,
			uint32_t imm)
{
	struct tern__ctrl_msg m = { .type = TERN_CTRL_IMM_ABORT, .imm = imm };

	assert_int_equal(tern__ctrl_pack(&m,
					 e->ctx->ctrl->buf + i * TERN__CTRL_LEN,
					 TERN__CTRL_LEN),
			 TERN_CTRL_LEN);
	cq_msg_from(e->ctx->rails[0].slots[8 + i].fictx, src, TERN_CTRL_LEN);
}

/* The last control message sent: its imm (and its peer's address). */
static uint32_t ctrl_sent_imm(uint64_t *addr_p)
{
	struct tern__ctrl_msg m;

	for (size_t i = fk.ncalls; i > 0; i--) {
		const struct fake_call *c = &fk.calls[i - 1];

		if (c->op != FOP_CTRL_SEND)
			continue;
		assert_int_equal(tern__ctrl_parse(c->buf, c->len, &m), 0);
		*addr_p = c->addr;
		return m.imm;
	}
	fail_msg("no control message sent");
	return 0;
}

/* The sender: a write with immediate that fails tells the target. */
static void test_imm_abort_sender(void **state)
{
	struct env *e = *state;
	struct tern_piece pc[2] = { { .loff = 0, .roff = 0, .len = 64 },
				    { .loff = 64, .roff = 64, .len = 64 } };
	struct tracked w, p;
	uint64_t addr = 0;

	ctrl_on(e);
	/* Cancelled while queued. */
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 77, &w.req),
			 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.req.status, -ECANCELED);
	assert_int_equal(fake_count(FOP_WRITE), 0);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 1);
	assert_int_equal(ctrl_sent_imm(&addr), 77);
	assert_int_equal(addr, PEER_ADDR);
	/* The send holds the peer until it completes. */
	assert_int_equal(e->peer.inflight, 1);
	cq_ok(fk.calls[fk.ncalls - 1].context, TERN_CTRL_LEN, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(e->ctx->ctrl->sent, 1);

	/* An error completion. */
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 78, &w.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_err(ctx_of(&w), -TERN_EPROV, 5, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.req.status, -TERN_EPROV);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 2);
	assert_int_equal(ctrl_sent_imm(&addr), 78);
	cq_ok(fk.calls[fk.ncalls - 1].context, TERN_CTRL_LEN, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);

	/* A batch with immediate, one piece failing: one abort, once the
	 * batch is done. */
	track_init(&p);
	assert_int_equal(tern_write_pieces(&e->peer, &e->mr, pc, 2, &e->rdesc,
					   1, TERN_PIECES_IMM, 79, &p.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 3);
	cq_err(fk.calls[fk.ncalls - 2].context, -TERN_EPROV, 5, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 2);
	cq_ok(fk.calls[fk.ncalls - 1].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(p.req.status, -TERN_EPROV);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 3);
	assert_int_equal(ctrl_sent_imm(&addr), 79);
	cq_ok(fk.calls[fk.ncalls - 1].context, TERN_CTRL_LEN, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);

	/* A plain write's failure tells nobody. */
	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_err(ctx_of(&w), -TERN_EPROV, 5, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 3);

	/* Its peer gone: queued writes fail, and the target is told; a
	 * refused abort is tried again for a while, then dropped. */
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 80, &w.req),
			 0);
	assert_int_equal(tern__peer_gone(&e->peer), 0);
	fake_script(1, (ssize_t[]){ -EAGAIN });
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.req.status, -TERN_EPEERGONE);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 4);
	assert_int_equal(e->ctx->ctrl_pending, 1);
	assert_int_equal(e->peer.inflight, 1);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 5);
	assert_int_equal(ctrl_sent_imm(&addr), 80);
	assert_int_equal(e->ctx->ctrl_pending, 0);
	cq_ok(fk.calls[fk.ncalls - 1].context, TERN_CTRL_LEN, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->peer.inflight, 0);
	/* Refused past its time: dropped, counted, the peer let go. */
	e->peer.gone = 0;
	track_init(&w);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 81, &w.req),
			 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	e->ctx->ctrl->queue[e->ctx->ctrl->qhead].until_ns = 1;
	fake_script(1, (ssize_t[]){ -EAGAIN });
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fake_count(FOP_CTRL_SEND), 6);
	assert_int_equal(e->ctx->ctrl->dropped, 1);
	assert_int_equal(e->ctx->ctrl_pending, 0);
	assert_int_equal(e->peer.inflight, 0);
	e->peer.gone = 0;
	ctrl_free(e);
}

/* The target: an abort fails the expectation, or is remembered for the
 * next one; malformed messages are dropped and counted. */
static void test_imm_abort_target(void **state)
{
	struct env *e = *state;
	struct tern_peer b;
	struct tracked x, y;
	uint8_t *buf;

	ctrl_on(e);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 33, 4, &x.req), 0);
	cq_imm(33);
	ctrl_arrive(e, 0, PEER_ADDR, 33);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, -TERN_EABORTED);
	assert_int_equal(x.req.len, 1);
	assert_int_equal(tern_imm_count(e->ctx, 33), 1);
	/* The receive went back to the provider. */
	assert_int_equal(fake_count(FOP_CTRL_RECV), TERN__CTRL_RECVS + 1);

	/* Before the expectation: remembered, for the next one only. */
	ctrl_arrive(e, 1, PEER_ADDR, 34);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->naborts, 1);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 34, 1, &x.req), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, -TERN_EABORTED);
	assert_int_equal(e->ctx->naborts, 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 34, 1, &x.req), 0);
	cq_imm(34);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.req.status, 0);

	/* Malformed: dropped, counted, nothing else. */
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 35, 1, &x.req), 0);
	ctrl_arrive(e, 2, PEER_ADDR, 35);
	buf = e->ctx->ctrl->buf + 2 * TERN__CTRL_LEN;
	buf[0] ^= 1; /* magic */
	ctrl_arrive(e, 3, PEER_ADDR, 35);
	buf = e->ctx->ctrl->buf + 3 * TERN__CTRL_LEN;
	buf[4] = 2; /* version */
	ctrl_arrive(e, 4, PEER_ADDR, 35);
	buf = e->ctx->ctrl->buf + 4 * TERN__CTRL_LEN;
	buf[12] = 1; /* reserved */
	ctrl_arrive(e, 5, PEER_ADDR, 35);
	buf = e->ctx->ctrl->buf + 5 * TERN__CTRL_LEN;
	buf[5] = 9; /* type */
	cq_msg_from(e->ctx->rails[0].slots[8 + 6].fictx, PEER_ADDR, 15);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->ctrl->bad, 5);
	assert_int_equal(x.calls, 0);
	assert_int_equal(e->ctx->naborts, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);

	/* With sources: an abort from B fails an expectation from B, not
	 * one from A; remembered per source, and bounded per source. */
	sources_on(e, &b);
	track_init(&x);
	track_init(&y);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 36, 1, -1, &x.req), 0);
	assert_int_equal(tern_imm_expect_from(e->ctx, &b, 36, 1, -1, &y.req),
			 0);
	ctrl_arrive(e, 7, PEER_ADDR + 1, 36);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.req.status, -TERN_EABORTED);
	assert_int_equal(x.calls, 0);
	ctrl_arrive(e, 0, PEER_ADDR + 1, 37);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->naborts, 1);
	track_init(&y);
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 37, 1, -1, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(y.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	for (uint32_t i = 0; i < 3 * TERN__ABORTS_PER_SRC; i++) {
		ctrl_arrive(e, i % TERN__CTRL_RECVS, PEER_ADDR + 1, 100 + i);
		assert_int_equal(tern_progress(e->ctx), 0);
	}
	assert_int_equal(e->ctx->naborts, TERN__ABORTS_PER_SRC);
	ctrl_arrive(e, 0, PEER_ADDR, 38);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->naborts, TERN__ABORTS_PER_SRC + 1);
	/* The oldest of B's were forgotten, the newest kept. */
	track_init(&y);
	assert_int_equal(tern_imm_expect_from(e->ctx, &b, 100, 1, -1, &y.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(y.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &y.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 2);
	track_init(&y);
	assert_int_equal(tern_imm_expect_from(
				 e->ctx, &b, 100 + 3 * TERN__ABORTS_PER_SRC - 1,
				 1, -1, &y.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.req.status, -TERN_EABORTED);
	sources_off(e);
	ctrl_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_imm_deadline),
		T(test_imm_from_peer),
		T(test_imm_abort_sender),
		T(test_imm_abort_target),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
