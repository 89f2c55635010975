/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/): posting,
 * batching, credits, "try again", completions, errors, cancellation and
 * immediate-data counting. The engine is built over the fake provider
 * (fake_prov.c implements src/prov/prov.h, the engine's one view of
 * libfabric), so a hand-built ctx runs the real engine with no provider.
 * Every provider call is recorded; post results and completion queue
 * contents are scripted per test.
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
#include "wire/ctrl.h"

/* ---- A hand-built ctx whose rails use the fake provider: fake_env.c ---- */

/* Queue a write of 64 bytes from slot @i of the buffer to offset 64*i. */
static int write_nth(struct env *e, struct tracked *t, unsigned int i)
{
	track_init(t);
	return tern_write(&e->peer, &e->mr, e->buf + 64 * (i % 64), 64,
			  &e->rdesc, 64 * (uint64_t)i, &t->req);
}

static void *ctx_of(struct tracked *t)
{
	return tern__rp(&t->req)->fictx;
}

/* ---- 1. Posts only queue; progress posts them, fields intact ---- */

static void test_write_queues_until_progress(void **state)
{
	struct env *e = *state;
	struct tern_mr_desc plain = e->rdesc;
	struct tracked w, wi;
	struct fake_call *c;

	track_init(&w);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf + 16, 100,
				    &e->rdesc, 64, &w.req),
			 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(w.req.done, 0);
	assert_int_equal(e->peer.inflight, 1);

	plain.flags = TERN_MR_DESC_REMOTE_WRITE;
	plain.keys[0] = 0x55;
	track_init(&wi);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf + 200, 50,
					&plain, 128, 0xdeadbeef, &wi.req),
			 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(wi.calls, 0);

	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);

	c = &fk.calls[0];
	assert_int_equal(c->op, FOP_WRITE);
	assert_int_equal(c->addr, PEER_ADDR);
	assert_int_equal(c->raddr, RBASE + 64);
	assert_int_equal(c->rkey, RKEY);
	assert_int_equal(c->rlen, 100);
	assert_ptr_equal(c->buf, e->buf + 16);
	assert_int_equal(c->len, 100);
	assert_ptr_equal(c->desc, &local_desc_token[0]);
	assert_ptr_equal(c->context, ctx_of(&w));
	/* First of a batch of two: "more", and no remote CQ data. */
	assert_int_equal(c->flags, TERN__PF_MORE);

	c = &fk.calls[1];
	assert_int_equal(c->op, FOP_WRITE);
	assert_int_equal(c->addr, PEER_ADDR);
	assert_int_equal(c->raddr, 128);
	assert_int_equal(c->rkey, 0x55);
	assert_ptr_equal(c->buf, e->buf + 200);
	assert_int_equal(c->len, 50);
	assert_int_equal(c->data, 0xdeadbeef);
	assert_ptr_equal(c->context, ctx_of(&wi));
	assert_int_equal(c->flags, TERN__PF_IMM);

	/* Handed over, not completed; nothing is posted twice. */
	assert_int_equal(w.req.done, 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(e->ctx->posted.len, 2);
	assert_int_equal(e->ctx->rails[0].tx_credits, 6);
}

static void test_send_recv_posting(void **state)
{
	struct env *e = *state;
	struct tracked s, r;

	track_init(&s);
	track_init(&r);
	assert_int_equal(tern_send(&e->peer, &e->mr, e->buf, 10, &s.req), 0);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf + 100, 50, &r.req),
			 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	/* Receives are posted before sends; each queue is its own batch. */
	assert_int_equal(fk.calls[0].op, FOP_RECV);
	assert_int_equal(fk.calls[0].addr, TERN__PROV_ADDR_ANY);
	assert_ptr_equal(fk.calls[0].buf, e->buf + 100);
	assert_int_equal(fk.calls[0].len, 50);
	assert_ptr_equal(fk.calls[0].desc, &local_desc_token[0]);
	assert_ptr_equal(fk.calls[0].context, ctx_of(&r));
	assert_int_equal(fk.calls[0].flags, 0);
	assert_int_equal(fk.calls[1].op, FOP_SEND);
	assert_int_equal(fk.calls[1].addr, PEER_ADDR);
	assert_ptr_equal(fk.calls[1].buf, e->buf);
	assert_int_equal(fk.calls[1].len, 10);
	assert_ptr_equal(fk.calls[1].context, ctx_of(&s));
	assert_int_equal(fk.calls[1].flags, 0);
	/* (Receives match the tag sends carry: src/prov/'s constant.) */
	assert_int_equal(e->ctx->rails[0].rx_credits, 7);
	assert_int_equal(e->ctx->rails[0].tx_credits, 7);
}

/* ---- 2. Batching ---- */

static void test_batches_with_more(void **state)
{
	struct env *e = *state;
	struct tracked w[10];

	e->ctx->rails[0].tx_credits = 64;
	for (unsigned int i = 0; i < 10; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	assert_int_equal(fk.ncalls, 0);

	for (size_t pass = 0, first = 0; first < 10; pass++) {
		size_t want = first + 4 <= 10 ? 4 : 10 - first;

		assert_int_equal(tern_progress(e->ctx), 0);
		assert_int_equal(fk.ncalls, first + want);
		for (size_t i = first; i < first + want; i++) {
			const struct fake_call *c = &fk.calls[i];

			/* In order, "more" on all but the batch's last. */
			assert_ptr_equal(c->context, ctx_of(&w[i]));
			assert_int_equal(c->raddr, RBASE + 64 * i);
			assert_int_equal(c->flags, i + 1 < first + want
							   ? TERN__PF_MORE
							   : 0);
		}
		first += want;
		assert_true(pass < 3);
	}
	/* Queue empty: nothing more is posted. */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 10);
	assert_int_equal(e->ctx->posted.len, 10);
	assert_int_equal(e->ctx->rails[0].txq.len, 0);
}

/* ---- 3. Credits ---- */

static void test_tx_credits_limit_posts(void **state)
{
	struct env *e = *state;
	struct tracked w[5];

	e->ctx->rails[0].tx_credits = 2;
	for (unsigned int i = 0; i < 5; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);

	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	/* The batch is cut by credits and still ends without "more". */
	assert_int_equal(fk.calls[0].flags, TERN__PF_MORE);
	assert_int_equal(fk.calls[1].flags, 0);
	assert_int_equal(e->ctx->rails[0].tx_credits, 0);

	/* No completions, no credits, no posts. */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);

	/* One completion frees one credit: exactly one more post. */
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(fk.ncalls, 3);
	assert_ptr_equal(fk.calls[2].context, ctx_of(&w[2]));
	assert_int_equal(fk.calls[2].flags, 0);

	cq_ok(fk.calls[1].context, 64, 0, 0);
	cq_ok(fk.calls[2].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(fk.ncalls, 5);
	assert_ptr_equal(fk.calls[3].context, ctx_of(&w[3]));
	assert_ptr_equal(fk.calls[4].context, ctx_of(&w[4]));

	cq_ok(fk.calls[3].context, 64, 0, 0);
	cq_ok(fk.calls[4].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 2);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].status, 0);
	}
	assert_int_equal(e->ctx->rails[0].tx_credits, 2);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
}

static void test_rx_credits_limit_posts(void **state)
{
	struct env *e = *state;
	struct tracked r[3];

	e->ctx->rails[0].rx_credits = 1;
	for (int i = 0; i < 3; i++) {
		track_init(&r[i]);
		assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf + 100 * i,
					   100, &r[i].req),
				 0);
	}
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_RECV), 1);
	assert_ptr_equal(fk.calls[0].context, ctx_of(&r[0]));
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_RECV), 1);
	cq_ok(fk.calls[0].context, 10, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r[0].calls, 1);
	assert_int_equal(r[0].req.len, 10);
	assert_int_equal(fake_count(FOP_RECV), 2);
	assert_ptr_equal(fk.calls[1].context, ctx_of(&r[1]));
	assert_int_equal(r[2].req.done, 0);
	assert_int_equal(e->ctx->rails[0].rx_credits, 0);
}

/* ---- 4. The provider's "try again" never reaches the user ---- */

static void test_eagain_requeues(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { 0, -EAGAIN };
	struct tracked w[3];
	long last;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);

	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_ptr_equal(fk.calls[0].context, ctx_of(&w[0]));
	assert_ptr_equal(fk.calls[1].context, ctx_of(&w[1]));
	assert_int_equal(fk.calls[1].ret, -EAGAIN);
	/* The refused op is neither done nor failed, and holds no credit. */
	assert_int_equal(w[1].req.done, 0);
	assert_int_equal(w[1].calls, 0);
	assert_int_equal(w[1].req.status, 0);
	assert_string_equal(w[1].req.errmsg, "");
	assert_int_equal(e->ctx->rails[0].tx_credits, 7);
	assert_int_equal(e->ctx->posted.len, 1);

	/* Re-posted first on the next pass, order kept, batch flushed. */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 4);
	assert_ptr_equal(fk.calls[2].context, ctx_of(&w[1]));
	assert_ptr_equal(fk.calls[3].context, ctx_of(&w[2]));
	assert_int_equal(fk.calls[3].flags, 0);
	last = fake_last_ok_post();
	assert_int_equal(last, 3);
	assert_int_equal(fk.calls[last].flags & TERN__PF_MORE, 0);

	for (int i = 0; i < 3; i++)
		cq_ok(ctx_of(&w[i]), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].status, 0);
		assert_int_equal(w[i].req.done, 1);
	}
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
}

static void test_eagain_repeated_then_wait(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { -EAGAIN, -EAGAIN, -EAGAIN, -EAGAIN,
					-EAGAIN };
	struct tracked w;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	fk.auto_complete = 1;
	assert_int_equal(write_nth(e, &w, 0), 0);
	for (int i = 0; i < 5; i++) {
		assert_true(tern_progress(e->ctx) >= 0);
		assert_int_equal(w.req.done, 0);
		assert_int_equal(w.calls, 0);
	}
	assert_int_equal(fk.ncalls, 5);
	assert_int_equal(tern_wait(e->ctx, &w.req, 5000), 0);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(w.req.status, 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(fk.ncalls, 6);
	assert_int_equal(fk.calls[5].ret, 0);
	assert_int_equal(fk.calls[5].flags, 0);
}

static void test_eagain_mid_batch_is_flushed(void **state)
{
	struct env *e = *state;
	/* Third of the first batch refused, twice. */
	static const ssize_t rets[] = { 0, 0, -EAGAIN, -EAGAIN };
	struct tracked w[6];
	size_t pos = 0;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	fk.auto_complete = 1;
	for (unsigned int i = 0; i < 6; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	for (int pass = 0; pass < 10; pass++)
		assert_true(tern_progress(e->ctx) >= 0);
	/* Each op posted successfully exactly once, in order. */
	for (size_t i = 0; i < fk.ncalls; i++) {
		if (fk.calls[i].ret != 0)
			continue;
		assert_true(pos < 6);
		assert_ptr_equal(fk.calls[i].context, ctx_of(&w[pos]));
		pos++;
	}
	assert_int_equal(pos, 6);
	assert_int_equal(fk.calls[fake_last_ok_post()].flags & TERN__PF_MORE,
			 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].status, 0);
	}
}

/* ---- 5. Completions ---- */

static void test_completion_success_once(void **state)
{
	struct env *e = *state;
	struct tracked w;

	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(w.req.status, 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.done_in_cb, 1);
	assert_int_equal(w.req.len, 64);
	assert_string_equal(w.req.errmsg, "");
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(e->ctx->posted.len, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(fk.ncalls, 1);
}

static void test_completion_recv_len_and_imm(void **state)
{
	struct env *e = *state;
	struct tracked r;

	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 256, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 37, TERN__CQ_IMM, 0x1234);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, 0);
	assert_int_equal(r.req.len, 37);
	assert_int_equal(r.req.imm, 0x1234);
	assert_int_equal(e->ctx->rails[0].rx_credits, 8);
}

/* Write @w, the first post, and have the provider fail it: -TERN_EPROV with
 * provider errno 5; it completes in one progress pass. */
static void write_fails(struct env *e, struct tracked *w)
{
	assert_int_equal(write_nth(e, w, 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_err(fk.calls[0].context, -TERN_EPROV, 5, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
}

static void test_completion_error_provider(void **state)
{
	struct env *e = *state;
	struct tracked w;

	write_fails(e, &w);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(w.req.status, -TERN_EPROV);
	assert_int_equal(w.status, -TERN_EPROV);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.req.prov_errno, 5);
	assert_true(w.req.errmsg[0] != '\0');
	assert_non_null(strstr(w.req.errmsg, FAKE_PROV_TEXT));
	/* The credit comes back; nothing more happens afterwards. */
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(w.calls, 1);
}

/* A failure with no context and a transmit's flags, as shm's fast RMA
 * reports one (libfabric 1.17). */
static void cq_tx_orphan(void)
{
	struct fake_cqe c = {
		.is_err = 1,
		.err = { .status = -TERN_EPROV,
			 .prov_errno = 5,
			 .tx_orphan = 1 },
	};

	fake_cq_push(0, &c);
}

/* What rail_open() does on a sync_rma rail. */
static void sync_rail(struct env *e)
{
	struct tern_rail *rail = &e->ctx->rails[0];

	rail->sync_ring = calloc(8, sizeof(*rail->sync_ring));
	assert_non_null(rail->sync_ring);
	rail->sync_mask = 7;
}

/* Writes that complete inside their post come back in post order: a
 * failure with no context is the oldest outstanding one's, and only
 * plain writes and reads are counted among them. */
static void test_sync_rma_attributes_failures(void **state)
{
	struct env *e = *state;
	struct tern_rail *rail = &e->ctx->rails[0];
	struct tracked w[3], wi;

	sync_rail(e);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	track_init(&wi);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 9, &wi.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 4);
	assert_int_equal(rail->sync_n, 3); /* not the one with an imm */
	cq_ok(ctx_of(&w[0]), 64, 0, 0);
	cq_tx_orphan();
	cq_ok(ctx_of(&w[2]), 64, 0, 0);
	cq_ok(ctx_of(&wi), 64, 0, 0);
	while (tern_progress(e->ctx) > 0)
		;
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(w[0].status, 0);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].status, -TERN_EPROV);
	assert_non_null(strstr(w[1].req.errmsg, "could not be reached"));
	assert_int_equal(w[2].status, 0);
	assert_int_equal(wi.status, 0);
	assert_int_equal(rail->sync_n, 0);
	assert_int_equal(rail->orphan_errs, 0);
	assert_int_equal(rail->tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);
	/* With none outstanding, such a failure names nothing: counted. */
	cq_tx_orphan();
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(rail->orphan_errs, 1);
	assert_non_null(rail->sync_ring);
}

/* Once a noted write completes out of post order, order proves nothing:
 * the ring is dropped, and a failure with no context is only counted. */
static void test_sync_rma_out_of_order_stops(void **state)
{
	struct env *e = *state;
	struct tern_rail *rail = &e->ctx->rails[0];
	struct tracked w[2];

	sync_rail(e);
	for (unsigned int i = 0; i < 2; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(rail->sync_n, 2);
	cq_ok(ctx_of(&w[1]), 64, 0, 0);
	cq_tx_orphan();
	while (tern_progress(e->ctx) > 0)
		;
	assert_null(rail->sync_ring);
	assert_int_equal(rail->sync_n, 0);
	assert_int_equal(w[1].status, 0);
	assert_int_equal(w[0].calls, 0); /* still the provider's */
	assert_int_equal(rail->orphan_errs, 1);
	cq_ok(ctx_of(&w[0]), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[0].status, 0);
	assert_int_equal(rail->tx_credits, 8);
}

/* Small writes the provider takes as copies (TERN__PF_INJECT answered
 * TERN__PROV_TAKEN: fi_inject_write(), no completion will come) complete
 * from the progress pass that posted them, once, holding no credit and
 * never noted for sync_rma attribution; larger writes, reads, delivery
 * complete and device memory are not offered; a refusal re-posts it, a
 * failed post completes it with the error, a queued one cancels. */
/* Forget the calls recorded so far and any script (the rails stay). */
static void forget_calls(void)
{
	fk.ncalls = 0;
	fk.nscript = fk.script_pos = 0;
}

static void test_inject_small_writes(void **state)
{
	struct env *e = *state;
	struct tern_rail *rail = &e->ctx->rails[0];
	static const ssize_t rets[] = { -EAGAIN };
	struct tracked w[3], big, wi, rd, dc, fail, can;

	e->ctx->inject_max = 64;
	fk.inject_takes = 1;
	e->rdesc.flags |= TERN_MR_DESC_REMOTE_READ;
	sync_rail(e);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	track_init(&big);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 65, &e->rdesc, 0,
				    &big.req),
			 0);
	track_init(&wi);
	assert_int_equal(tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
					0, 9, &wi.req),
			 0);
	track_init(&rd);
	assert_int_equal(
		tern_read(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &rd.req),
		0);
	/* Posts only queue. */
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(w[0].calls, 0);
	/* One pass of 4 (post_batch), then the rest: each injected write's
	 * callback runs at the end of the pass that posted it. */
	assert_int_equal(tern_progress(e->ctx), 3);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fk.ncalls, 6);
	for (unsigned int i = 0; i < 3; i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].status, 0);
		assert_int_equal(w[i].done_in_cb, 1);
		assert_true(fk.calls[i].flags & TERN__PF_INJECT);
		assert_int_equal(fk.calls[i].ret, TERN__PROV_TAKEN);
	}
	assert_false(fk.calls[3].flags & TERN__PF_INJECT); /* 65 bytes */
	assert_true(fk.calls[4].flags & TERN__PF_INJECT);
	assert_true(fk.calls[4].flags & TERN__PF_IMM);
	assert_int_equal(fk.calls[4].data, 9);
	assert_false(fk.calls[5].flags & TERN__PF_INJECT); /* the read */
	assert_int_equal(wi.calls, 1);
	assert_int_equal(big.calls, 0);
	assert_int_equal(rd.calls, 0);
	/* Only the two the provider completes hold credits, are on the
	 * posted list and noted in post order. */
	assert_int_equal(rail->tx_credits, 6);
	assert_int_equal(e->ctx->posted.len, 2);
	assert_int_equal(rail->sync_n, 2);
	assert_int_equal(e->peer.inflight, 2);
	assert_int_equal(e->mr.inflight, 2);
	cq_ok(ctx_of(&big), 65, 0, 0);
	cq_ok(ctx_of(&rd), 8, 0, 0);
	while (tern_progress(e->ctx) > 0)
		;
	assert_int_equal(big.calls, 1);
	assert_int_equal(rd.calls, 1);
	assert_int_equal(rail->tx_credits, 8);
	assert_int_equal(rail->sync_n, 0);
	assert_non_null(rail->sync_ring);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(w[i].calls, 1);

	/* Refused: stays queued, re-posted as a copy on a later pass. */
	forget_calls();
	fake_script(TERN_ARRAY_SIZE(rets), rets);
	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(w[0].calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(fk.ncalls, 2);

	/* A failed post completes it with the error, once. */
	forget_calls();
	{
		static const ssize_t eio[] = { -TERN_EPROV };

		fake_script(TERN_ARRAY_SIZE(eio), eio);
	}
	assert_int_equal(write_nth(e, &fail, 0), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fail.calls, 1);
	assert_int_equal(fail.status, -TERN_EPROV);

	/* Cancelled while queued: -ECANCELED from progress, never posted. */
	forget_calls();
	assert_int_equal(write_nth(e, &can, 0), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &can.req), 0);
	assert_int_equal(can.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(can.calls, 1);
	assert_int_equal(can.status, -ECANCELED);
	assert_int_equal(fk.ncalls, 0);

	/* Delivery complete (staging's chunks) and device memory: never. */
	assert_int_equal(write_nth(e, &dc, 0), 0);
	tern__rp(&dc.req)->xflags |= TERN__XF_DELIVER;
	e->mr.kind = TERN_MEM_CUDA;
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	e->mr.kind = TERN_MEM_HOST;
	assert_int_equal(fk.ncalls, 2);
	assert_false(fk.calls[0].flags & TERN__PF_INJECT);
	assert_true(fk.calls[0].flags & TERN__PF_DELIVER);
	assert_false(fk.calls[1].flags & TERN__PF_INJECT);
	cq_ok(ctx_of(&dc), 64, 0, 0);
	cq_ok(ctx_of(&w[1]), 64, 0, 0);
	while (tern_progress(e->ctx) > 0)
		;
	assert_int_equal(dc.calls, 1);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(rail->tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);
}

/* A completed request is posted again without tern_req_init(): the post
 * clears the last results (an error's status, text and provider errno)
 * and keeps the callback and data. */
static void test_request_reposted_as_is(void **state)
{
	struct env *e = *state;
	struct tracked w;

	write_fails(e, &w);
	assert_int_equal(w.req.status, -TERN_EPROV);
	assert_true(w.req.errmsg[0] != '\0');
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 32, &e->rdesc, 0, &w.req),
		0);
	assert_int_equal(w.req.done, 0);
	assert_int_equal(w.req.status, 0);
	assert_int_equal(w.req.prov_errno, 0);
	assert_string_equal(w.req.errmsg, "");
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].len, 32);
	cq_ok(fk.calls[1].context, 0, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.calls, 2); /* the same callback, the same data */
	assert_int_equal(w.status, 0);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(w.req.len, 32);
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->peer.inflight, 0);
}

/* A completion error's status (src/prov/ translated it: test_codec
 * checks that) reaches the request as it is, with the provider's text. */
static void test_completion_error_codes(void **state)
{
	struct env *e = *state;
	static const int status[] = { -ECANCELED, -TERN_EACCESS, -ETIMEDOUT,
				      -ENOMEM, -TERN_EPROV };
	struct tracked w[TERN_ARRAY_SIZE(status)];

	for (unsigned int i = 0; i < TERN_ARRAY_SIZE(status); i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	/* Two passes: batch of 4, then 1. */
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, TERN_ARRAY_SIZE(status));
	for (unsigned int i = 0; i < TERN_ARRAY_SIZE(status); i++)
		cq_err(fk.calls[i].context, status[i], 0, 0);
	/* One error entry is read per pass. */
	for (unsigned int i = 0; i < TERN_ARRAY_SIZE(status); i++)
		assert_int_equal(tern_progress(e->ctx), 1);
	for (unsigned int i = 0; i < TERN_ARRAY_SIZE(status); i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].req.status, status[i]);
		assert_int_equal(w[i].req.prov_errno, 0);
		assert_true(w[i].req.errmsg[0] != '\0');
		/* No provider errno: no provider text. */
		assert_null(strstr(w[i].req.errmsg, FAKE_PROV_TEXT));
	}
}

static void test_completion_recv_truncated(void **state)
{
	struct env *e = *state;
	struct tracked r;

	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 16, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_err(fk.calls[0].context, -TERN_ETRUNC, 0, 16);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, -TERN_ETRUNC);
	assert_int_equal(r.req.len, 16);
	assert_int_equal(e->ctx->rails[0].rx_credits, 8);
}

static void test_cq_failure_is_reported(void **state)
{
	struct env *e = *state;
	struct tracked w;

	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	fk.cq_fail = -EIO;
	assert_int_equal(tern_progress(e->ctx), -TERN_EPROV);
	assert_int_equal(tern_wait(e->ctx, &w.req, 100), -TERN_EPROV);
	assert_int_equal(w.calls, 0);
	fk.cq_fail = 0;
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.req.status, 0);
}

static void test_cq_read_in_batches(void **state)
{
	struct env *e = *state;
	struct tracked w[100];
	size_t n = 0;

	e->ctx->post_batch = 100;
	e->ctx->rails[0].tx_credits = 100;
	for (unsigned int i = 0; i < 100; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 100);
	for (size_t i = 0; i < 100; i++)
		cq_ok(fk.calls[i].context, 64, 0, 0);
	fk.cq_reads = 0;
	/* More than one batch of completions is drained in one pass. */
	assert_int_equal(tern_progress(e->ctx), 100);
	assert_true(fk.cq_reads >= 2);
	assert_true(fk.cq_max_count > 1);
	for (int i = 0; i < 100; i++)
		n += w[i].calls;
	assert_int_equal(n, 100);
}

/* ---- 6. Post errors complete from progress ---- */

static void test_post_error_completes_in_progress(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { -TERN_EPROV };
	struct tracked w;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(w.req.done, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.req.status, -TERN_EPROV);
	assert_int_equal(w.req.prov_errno, TERN_EPROV);
	assert_true(w.req.errmsg[0] != '\0');
	/* Never handed over: no credit used, not on the posted list. */
	assert_int_equal(e->ctx->rails[0].tx_credits, 8);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(fk.ncalls, 1);
}

static void test_post_error_mid_batch(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { 0, -TERN_EACCESS, 0 };
	struct tracked w[3];

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(fk.ncalls, 3);
	assert_int_equal(fk.calls[0].flags, TERN__PF_MORE);
	assert_int_equal(fk.calls[2].flags, 0);
	assert_int_equal(w[0].calls, 0);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].req.status, -TERN_EACCESS);
	assert_int_equal(w[2].calls, 0);
	assert_int_equal(e->ctx->rails[0].tx_credits, 6);
	assert_int_equal(e->ctx->posted.len, 2);
}

/* ---- 7. Immediate-data counting ---- */

static void test_imm_arrivals_before_expect(void **state)
{
	struct env *e = *state;
	struct tracked x;

	for (int i = 0; i < 3; i++)
		cq_imm(42);
	cq_imm(43);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_count(e->ctx, 42), 3);
	assert_int_equal(tern_imm_count(e->ctx, 43), 1);
	assert_int_equal(tern_imm_count(e->ctx, 44), 0);

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 42, 3, &x.req), 0);
	/* Satisfied already, yet it completes in progress, not here. */
	assert_int_equal(x.calls, 0);
	assert_int_equal(x.req.done, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.done, 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 3);
	assert_int_equal(tern_imm_count(e->ctx, 42), 0);
	assert_int_equal(tern_imm_count(e->ctx, 43), 1);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	/* No provider call is involved in counting. */
	assert_int_equal(fk.ncalls, 0);
}

static void test_imm_arrivals_after_expect(void **state)
{
	struct env *e = *state;
	struct tracked x;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 7, 2, &x.req), 0);
	cq_imm(7);
	cq_imm(8);
	cq_imm(0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_imm_count(e->ctx, 7), 1);
	assert_int_equal(tern_imm_count(e->ctx, 8), 1);
	assert_int_equal(tern_imm_count(e->ctx, 0), 1);
	cq_imm(7);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, 0);
	assert_int_equal(x.req.len, 2);
	assert_int_equal(tern_imm_count(e->ctx, 7), 0);
	assert_int_equal(tern_imm_count(e->ctx, 8), 1);
}

static void test_imm_surplus_stays_counted(void **state)
{
	struct env *e = *state;
	struct tracked x, y;

	for (int i = 0; i < 5; i++)
		cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 99, 3, &x.req), 0);
	/* More arrive before the ready expectation is completed. */
	cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(tern_imm_count(e->ctx, 99), 3);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 99, 4, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(y.calls, 0);
	cq_imm(99);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 99), 0);
	assert_int_equal(e->ctx->imm.used, 0);
}

static void test_imm_expect_errors(void **state)
{
	struct env *e = *state;
	struct tracked x, y, before;

	track_init(&x);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 0, &x.req), -EINVAL);
	assert_int_equal(tern_imm_expect(NULL, 5, 1, &x.req), -EINVAL);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 1, NULL), -EINVAL);
	assert_int_equal(tern_imm_expect(e->ctx, 5, 2, &x.req), 0);
	before = y;
	assert_int_equal(tern_imm_expect(e->ctx, 5, 1, &y.req), -EBUSY);
	assert_memory_equal(&y, &before, sizeof(y));
	/* A satisfied-but-not-yet-completed one is pending too. */
	cq_imm(6);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_expect(e->ctx, 6, 1, &y.req), 0);
	assert_int_equal(tern_imm_expect(e->ctx, 6, 1, &before.req), -EBUSY);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(x.calls, 0);
	/* Closing ctx refuses new expectations. */
	e->ctx->closing = 1;
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 9, 1, &y.req), -ECANCELED);
	e->ctx->closing = 0;
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
}

static void test_imm_cancel(void **state)
{
	struct env *e = *state;
	struct tracked x, y;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 11, 3, &x.req), 0);
	cq_imm(11);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	/* Its callback runs from the next progress pass, never inside the
	 * cancel; until then it is not done, and cannot be cancelled. */
	assert_int_equal(x.calls, 0);
	assert_int_equal(x.req.done, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), -EALREADY);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.done_in_cb, 1);
	assert_int_equal(x.req.done, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), -EALREADY);
	/* The arrival stays counted and later ones do not touch x. */
	assert_int_equal(tern_imm_count(e->ctx, 11), 1);
	cq_imm(11);
	cq_imm(11);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	assert_int_equal(tern_imm_count(e->ctx, 11), 3);
	/* A new expectation is allowed and sees all three. */
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 11, 3, &y.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.req.status, 0);

	/* Cancel one that was already satisfied: cancelled, exactly once. */
	cq_imm(12);
	assert_int_equal(tern_progress(e->ctx), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 12, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(x.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_imm_count(e->ctx, 12), 1);

	/* Cancelling one with no arrivals leaves the table empty. */
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 13, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(x.req.status, -ECANCELED);
	assert_int_equal(tern_imm_count(e->ctx, 13), 0);
}

/* Spread keys, or keys that differ only in their high bits. */
static uint32_t imm_key(unsigned int i, int high)
{
	return high ? (uint32_t)i << 19 : 1000 + 7 * (uint32_t)i;
}

static void imm_many(struct env *e, int high, unsigned int n)
{
	struct tracked *x = calloc(n, sizeof(*x));
	int done;

	assert_non_null(x);
	/* Half the expectations come before any arrival. */
	for (unsigned int i = 0; i < n; i += 2) {
		track_init(&x[i]);
		assert_int_equal(
			tern_imm_expect(e->ctx, imm_key(i, high), 2, &x[i].req),
			0);
	}
	for (unsigned int i = 0; i < n; i++)
		cq_imm(imm_key(i, high));
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_true(e->ctx->imm.cap > 256);
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(tern_imm_count(e->ctx, imm_key(i, high)), 1);
	for (unsigned int i = 1; i < n; i += 2) {
		track_init(&x[i]);
		assert_int_equal(
			tern_imm_expect(e->ctx, imm_key(i, high), 2, &x[i].req),
			0);
	}
	assert_int_equal(tern_progress(e->ctx), 0);
	for (unsigned int i = 0; i < n; i++)
		cq_imm(imm_key(n - 1 - i, high));
	done = tern_progress(e->ctx);
	assert_int_equal(done, (int)n);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(x[i].calls, 1);
		assert_int_equal(x[i].req.status, 0);
		assert_int_equal(tern_imm_count(e->ctx, imm_key(i, high)), 0);
	}
	assert_int_equal(e->ctx->imm.used, 0);
	assert_int_equal(e->ctx->imm.dropped, 0);
	free(x);
}

static void test_imm_table_grows(void **state)
{
	imm_many(*state, 0, 5000);
}

/*
 * Keys equal in their low bits (a peer may pick such values) must not pile
 * into one probe run: with a hash that kept only the low bits, 5000 of
 * them took seconds (slot_del re-inserts the rest of a run).
 */
static void test_imm_table_grows_high_bit_keys(void **state)
{
	imm_many(*state, 1, 5000);
}

/* Peers cannot make the table grow without bound: past its cap, arrivals
 * of new values are dropped (and counted), known values still count. */
static void test_imm_table_full(void **state)
{
	struct env *e = *state;
	struct tracked x, y;
	size_t n;

	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 0, 2, &x.req), 0);
	fk.gen_next = 0;
	fk.gen_left = 1u << 20;
	for (int i = 0; i < 10 && fk.gen_left > 0; i++)
		assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(fk.gen_left, 0);
	n = e->ctx->imm.used;
	assert_true(n >= 1u << 18);
	assert_true(n < 1u << 20);
	assert_int_equal(e->ctx->imm.dropped, (1u << 20) - n);
	assert_int_equal(tern_imm_count(e->ctx, (uint32_t)n - 1), 1);
	assert_int_equal(tern_imm_count(e->ctx, (uint32_t)n), 0);
	/* A new value has no room; a known one still counts and completes. */
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 1u << 30, 1, &y.req), -ENOSPC);
	assert_int_equal(x.calls, 0);
	cq_imm(0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.req.status, 0);
	/* Its slot is free again (no arrivals left): room for one more. */
	assert_int_equal(tern_imm_expect(e->ctx, 1u << 30, 1, &y.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &y.req), 0);
}

static void test_imm_ignores_plain_remote_write(void **state)
{
	struct env *e = *state;
	struct fake_cqe c = {
		.ent.e = { .flags = TERN__CQ_REMOTE_WRITE, .data = 42 },
	};

	fake_cq_push(0, &c);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(tern_imm_count(e->ctx, 42), 0);
}

/* ---- 8. Checks refused before posting ---- */

/* @ret must come back and leave @t exactly as it was. */
static void refused(struct env *e, struct tracked *t, int want, int ret,
		    const struct tracked *before)
{
	assert_int_equal(ret, want);
	assert_memory_equal(t, before, sizeof(*t));
	assert_int_equal(e->peer.inflight, 0);
}

static void test_checks_before_posting(void **state)
{
	struct env *e = *state;
	struct tern_mr_desc d = e->rdesc;
	struct tern_mr remote_only = e->mr;
	struct tracked t, before;
	char outside[16];

	track_init(&t);
	before = t;
	/* Beyond the remote region. */
	refused(e, &t, -TERN_EBOUNDS,
		tern_write(&e->peer, &e->mr, e->buf, 128, &e->rdesc, RLEN - 64,
			   &t.req),
		&before);
	refused(e, &t, -TERN_EBOUNDS,
		tern_write(&e->peer, &e->mr, e->buf, 0, &e->rdesc, RLEN + 1,
			   &t.req),
		&before);
	refused(e, &t, -TERN_EBOUNDS,
		tern_write_imm(&e->peer, &e->mr, e->buf, 64, &e->rdesc,
			       UINT64_MAX - 8, 1, &t.req),
		&before);
	/* A descriptor without remote-write rights: refused before posting. */
	d.flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_READ;
	refused(e, &t, -TERN_EACCESS,
		tern_write(&e->peer, &e->mr, e->buf, 8, &d, 0, &t.req),
		&before);
	d = e->rdesc;
	/* Local buffer outside the local region. */
	refused(e, &t, -TERN_EBOUNDS,
		tern_write(&e->peer, &e->mr, e->buf + ENV_BUF_LEN - 10, 20,
			   &e->rdesc, 0, &t.req),
		&before);
	refused(e, &t, -TERN_EBOUNDS,
		tern_write(&e->peer, &e->mr, outside, 8, &e->rdesc, 0, &t.req),
		&before);
	refused(e, &t, -TERN_EBOUNDS,
		tern_send(&e->peer, &e->mr, e->buf + 1, ENV_BUF_LEN, &t.req),
		&before);
	refused(e, &t, -TERN_EBOUNDS,
		tern_recv(e->ctx, &e->mr, e->buf + ENV_BUF_LEN, 1, &t.req),
		&before);
	/* A region without local access. */
	remote_only.access = TERN_ACCESS_REMOTE_WRITE;
	refused(e, &t, -TERN_EACCESS,
		tern_write(&e->peer, &remote_only, e->buf, 64, &e->rdesc, 0,
			   &t.req),
		&before);
	refused(e, &t, -TERN_EACCESS,
		tern_recv(e->ctx, &remote_only, e->buf, 64, &t.req), &before);
	/* Descriptors with too few or too many keys. */
	d.nkeys = 0;
	refused(e, &t, -TERN_EDESC,
		tern_write(&e->peer, &e->mr, e->buf, 64, &d, 0, &t.req),
		&before);
	d.nkeys = TERN_MAX_RAILS + 1;
	refused(e, &t, -TERN_EDESC,
		tern_write(&e->peer, &e->mr, e->buf, 64, &d, 0, &t.req),
		&before);
	/* Above the provider's message size. */
	e->ctx->max_msg_size = 32;
	refused(e, &t, -EMSGSIZE,
		tern_send(&e->peer, &e->mr, e->buf, 64, &t.req), &before);
	e->ctx->max_msg_size = 1ULL << 30;
	/* NULL arguments. */
	refused(e, &t, -EINVAL,
		tern_write(NULL, &e->mr, e->buf, 64, &e->rdesc, 0, &t.req),
		&before);
	refused(e, &t, -EINVAL,
		tern_write(&e->peer, &e->mr, e->buf, 64, NULL, 0, &t.req),
		&before);
	refused(e, &t, -EINVAL, tern_send(&e->peer, NULL, e->buf, 64, &t.req),
		&before);
	/* A closing ctx and a removed peer. */
	e->ctx->closing = 1;
	refused(e, &t, -ECANCELED,
		tern_recv(e->ctx, &e->mr, e->buf, 64, &t.req), &before);
	e->ctx->closing = 0;
	e->peer.removed = 1;
	refused(e, &t, -ECANCELED,
		tern_send(&e->peer, &e->mr, e->buf, 64, &t.req), &before);
	e->peer.removed = 0;

	/* None of it ever reaches the provider or completes. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(t.calls, 0);
	assert_int_equal(t.req.done, 0);

	/* The exact edges are accepted. */
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, ENV_BUF_LEN,
				    &e->rdesc, RLEN - ENV_BUF_LEN, &t.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(fk.calls[0].raddr, RBASE + RLEN - ENV_BUF_LEN);
}

/* ---- 9. Cancellation ---- */

static void test_cancel_queued(void **state)
{
	struct env *e = *state;
	struct tracked w[3], r;

	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(write_nth(e, &w[i], i), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->peer.inflight, 3);

	/* Cancelled now (the peer lets go of it), called back from the
	 * next progress pass: never inside tern_req_cancel(). */
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), 0);
	assert_int_equal(w[1].calls, 0);
	assert_int_equal(w[1].req.done, 0);
	assert_int_equal(e->peer.inflight, 2);
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), -EALREADY);

	/* The others go, the cancelled ones never reach the provider, and
	 * their callbacks run once, from this pass. */
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].done_in_cb, 1);
	assert_int_equal(w[1].req.status, -ECANCELED);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, -ECANCELED);
	assert_int_equal(tern_req_cancel(e->ctx, &w[1].req), -EALREADY);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_ptr_equal(fk.calls[0].context, ctx_of(&w[0]));
	assert_ptr_equal(fk.calls[1].context, ctx_of(&w[2]));
	assert_int_equal(fk.calls[1].flags, 0);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(r.calls, 1);

	/* A write the provider holds cannot be cancelled. */
	assert_int_equal(tern_req_cancel(e->ctx, &w[0].req), -EBUSY);
	assert_int_equal(fk.ncalls, 2);
	cq_ok(ctx_of(&w[0]), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(tern_req_cancel(e->ctx, &w[0].req), -EALREADY);
	assert_int_equal(w[0].calls, 1);
	assert_int_equal(w[0].req.status, 0);
	assert_int_equal(tern_req_cancel(NULL, &w[0].req), -EINVAL);
	assert_int_equal(tern_req_cancel(e->ctx, NULL), -EINVAL);
}

/* A wait on a cancelled request returns at once: one progress pass runs
 * its callback (it is not done before that, so a wait cannot skip it). */
static void test_cancel_then_wait(void **state)
{
	struct env *e = *state;
	struct tracked w;

	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_int_equal(w.calls, 0);
	assert_int_equal(tern_wait(e->ctx, &w.req, -1), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.done_in_cb, 1);
	assert_int_equal(w.req.status, -ECANCELED);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(e->peer.inflight, 0);
	/* Done now: a second wait runs no pass and no callback. */
	assert_int_equal(tern_wait(e->ctx, &w.req, -1), 0);
	assert_int_equal(w.calls, 1);
}

/* A callback run for a cancelled request may post it again at once: it
 * is off every list of tern's by then. */
struct repost {
	struct env *e;
	int calls;
	int ret;
};

static void repost_cb(struct tern_req *req)
{
	struct repost *rp = req->data;

	if (rp->calls++ == 0)
		rp->ret = tern_write(&rp->e->peer, &rp->e->mr, rp->e->buf, 8,
				     &rp->e->rdesc, 0, req);
}

static void test_cancelled_cb_reposts(void **state)
{
	struct env *e = *state;
	struct repost rp = { .e = e, .ret = 1 };
	struct tern_req req;

	tern_req_init(&req, repost_cb, &rp);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &req), 0);
	assert_int_equal(rp.calls, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(rp.calls, 1);
	assert_int_equal(rp.ret, 0);
	assert_int_equal(req.done, 0);
	assert_int_equal(fk.ncalls, 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(rp.calls, 2);
	assert_int_equal(req.status, 0);
}

/* Regions count what is in flight on them, as peers do: a queued or
 * posted operation pins its region (tern_mr_close() answers -EBUSY), and
 * lets go of it as it finishes, a cancelled one at the cancel. */
static void test_mr_inflight(void **state)
{
	struct env *e = *state;
	struct tracked w, r, x;

	assert_int_equal(write_nth(e, &w, 0), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->mr.inflight, 2);
	assert_int_equal(tern_mr_close(&e->mr), -EBUSY);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->mr.inflight, 2); /* posted: still pinned */
	assert_int_equal(tern_mr_close(&e->mr), -EBUSY);
	cq_ok(ctx_of(&w), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(e->mr.inflight, 1);
	/* A posted receive cancelled: the provider's completion lets go. */
	fk.cancel_completes = 1;
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.status, -ECANCELED);
	assert_int_equal(e->mr.inflight, 0);
	/* A queued write cancelled lets go at once, before its callback. */
	assert_int_equal(write_nth(e, &w, 1), 0);
	assert_int_equal(e->mr.inflight, 1);
	assert_int_equal(tern_req_cancel(e->ctx, &w.req), 0);
	assert_int_equal(e->mr.inflight, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	/* An expectation uses no region. */
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 4, 1, &x.req), 0);
	assert_int_equal(tern_req_cancel(e->ctx, &x.req), 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(e->mr.inflight, 0);
	assert_int_equal(tern_mr_close(NULL), 0);
}

static void test_cancel_posted_recv(void **state)
{
	struct env *e = *state;
	struct tracked r;

	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].op, FOP_CANCEL);
	assert_ptr_equal(fk.calls[1].context, fk.calls[0].context);
	/* It completes from progress, when the provider reports it. */
	assert_int_equal(r.calls, 0);
	assert_int_equal(r.req.done, 0);
	cq_err(fk.calls[0].context, -ECANCELED, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.req.status, -ECANCELED);
	assert_int_equal(e->ctx->rails[0].rx_credits, 8);

	/* A provider that refuses to cancel. */
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	fk.cancel_ret = -ENOENT;
	assert_int_equal(tern_req_cancel(e->ctx, &r.req), -TERN_EPROV);
	assert_int_equal(r.calls, 0);
}

/* A peer marked gone: what tern still queues for it fails from the next
 * progress pass (never inside the call), later posts fail at once, and
 * what the provider holds completes as the provider says. */
static void test_peer_gone(void **state)
{
	struct env *e = *state;
	struct tracked w[3], r, b, late;
	struct tern_piece pc[3] = { { .loff = 0, .roff = 0, .len = 64 },
				    { .loff = 64, .roff = 64, .len = 64 },
				    { .loff = 128, .roff = 128, .len = 64 } };
	struct tern_req before;

	assert_int_equal(write_nth(e, &w[0], 0), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 1);
	/* A batch with one piece out and two still queued. */
	e->ctx->rails[0].tx_credits = 1;
	track_init(&b);
	assert_int_equal(tern_write_pieces(&e->peer, &e->mr, pc, 3, &e->rdesc,
					   1, 0, 0, &b.req),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fake_count(FOP_WRITE), 2);
	assert_int_equal(write_nth(e, &w[1], 1), 0);
	assert_int_equal(write_nth(e, &w[2], 2), 0);
	track_init(&r);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	assert_int_equal(e->peer.inflight, 4);

	assert_int_equal(tern__peer_gone(&e->peer), 0);
	assert_int_equal(w[1].calls + w[2].calls + b.calls + w[0].calls, 0);
	assert_int_equal(w[1].req.done, 0);
	/* Posts fail at once, the request untouched. */
	track_init(&late);
	before = late.req;
	assert_int_equal(write_nth(e, &late, 3), -TERN_EPEERGONE);
	assert_memory_equal(&late.req, &before, sizeof(before));
	assert_int_equal(tern_send(&e->peer, &e->mr, e->buf, 8, &late.req),
			 -TERN_EPEERGONE);
	/* Again: nothing more happens. */
	assert_int_equal(tern__peer_gone(&e->peer), 0);
	assert_int_equal(tern__peer_gone(NULL), -EINVAL);

	e->ctx->rails[0].tx_credits = 8;
	assert_int_equal(tern_progress(e->ctx), 2);
	assert_int_equal(w[1].calls, 1);
	assert_int_equal(w[1].done_in_cb, 1);
	assert_int_equal(w[1].req.status, -TERN_EPEERGONE);
	assert_int_equal(w[2].req.status, -TERN_EPEERGONE);
	/* Nothing more went to the provider; the receive (no peer) stands. */
	assert_int_equal(fake_count(FOP_WRITE), 2);
	assert_int_equal(r.calls, 0);
	/* The batch ends once its piece out has. */
	assert_int_equal(b.calls, 0);
	assert_int_equal(w[0].calls, 0);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(w[0].req.status, 0);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.req.status, -TERN_EPEERGONE);
	assert_int_equal(e->peer.inflight, 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(fake_count(FOP_RECV), 1);
}

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
	e->ctx->peers = NULL;
	e->peer.next = NULL;
}

/* An expectation from A does not count B's writes of the same imm. */
static void test_imm_from_peer(void **state)
{
	struct env *e = *state;
	struct tern_peer b;
	struct tracked x, y, z;

	track_init(&x);
	/* No source in the CQ: unsupported. */
	assert_int_equal(
		tern_imm_expect_from(e->ctx, &e->peer, 9, 1, -1, &x.req),
		-TERN_ENOTSUP);
	sources_on(e, &b);
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
	assert_int_equal(tern_imm_expect_from(e->ctx, &b, 10, 1, -1, &y.req),
			 0);
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

/* ---- 10. Callbacks may post ---- */

struct chain {
	struct env *e;
	struct tern_req first;
	struct tracked next;
	int calls;
	int ret;
	size_t ncalls_before, ncalls_after;
};

static void chain_cb(struct tern_req *req)
{
	struct chain *ch = req->data;

	ch->calls++;
	ch->ncalls_before = fk.ncalls;
	ch->ret = write_nth(ch->e, &ch->next, 9);
	ch->ncalls_after = fk.ncalls;
}

static void test_callback_posts(void **state)
{
	struct env *e = *state;
	struct chain ch = { .e = e };

	tern_req_init(&ch.first, chain_cb, &ch);
	assert_int_equal(tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0,
				    &ch.first),
			 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	assert_true(tern_progress(e->ctx) >= 1);
	assert_int_equal(ch.calls, 1);
	assert_int_equal(ch.ret, 0);
	/* The post inside the callback only queued. */
	assert_int_equal(ch.ncalls_after, ch.ncalls_before);
	assert_int_equal(ch.next.calls, 0);
	/* It is handed over by this progress pass or the next. */
	if (fk.ncalls == 1)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_ptr_equal(fk.calls[1].context, ctx_of(&ch.next));
	assert_int_equal(fk.calls[1].raddr, RBASE + 64 * 9);
	cq_ok(fk.calls[1].context, 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(ch.next.calls, 1);
	assert_int_equal(ch.next.req.status, 0);
	assert_int_equal(ch.calls, 1);
	assert_int_equal(e->peer.inflight, 0);
}

/* A callback may reuse its own request for the next operation. */
struct again {
	struct env *e;
	struct tern_req req;
	int calls;
};

static void again_cb(struct tern_req *req)
{
	struct again *a = req->data;

	if (++a->calls < 3)
		assert_int_equal(tern_write(&a->e->peer, &a->e->mr, a->e->buf,
					    16, &a->e->rdesc, 16 * a->calls,
					    req),
				 0);
}

static void test_callback_reuses_request(void **state)
{
	struct env *e = *state;
	struct again a = { .e = e };

	fk.auto_complete = 1;
	tern_req_init(&a.req, again_cb, &a);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 16, &e->rdesc, 0, &a.req),
		0);
	for (int i = 0; i < 20 && a.calls < 3; i++)
		assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(a.calls, 3);
	assert_int_equal(fk.ncalls, 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(fk.calls[i].raddr, RBASE + 16 * i);
	assert_int_equal(a.req.done, 1);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
}

/* A callback on an immediate expectation may expect again. */
struct reexpect {
	struct tern_ctx *ctx;
	struct tern_req req;
	int calls;
	int ret;
};

static void reexpect_cb(struct tern_req *req)
{
	struct reexpect *r = req->data;

	if (++r->calls == 1)
		r->ret = tern_imm_expect(r->ctx, 77, 2, req);
}

static void test_callback_reexpects(void **state)
{
	struct env *e = *state;
	struct reexpect r = { .ctx = e->ctx };

	tern_req_init(&r.req, reexpect_cb, &r);
	assert_int_equal(tern_imm_expect(e->ctx, 77, 1, &r.req), 0);
	cq_imm(77);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.ret, 0);
	assert_int_equal(r.req.done, 0);
	cq_imm(77);
	cq_imm(77);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 77), 0);
}

/* An expectation made in a callback, mid-batch, while more of its
 * immediates follow in the same batch: completes once, at the next pass. */
struct mid {
	struct tern_ctx *ctx;
	struct tracked x;
	int ret;
};

static void mid_cb(struct tern_req *req)
{
	struct mid *m = req->data;

	track_init(&m->x);
	m->ret = tern_imm_expect(m->ctx, 55, 1, &m->x.req);
}

static void test_callback_expects_mid_batch(void **state)
{
	struct env *e = *state;
	struct mid m = { .ctx = e->ctx };
	struct tern_req w;

	cq_imm(55);
	assert_int_equal(tern_progress(e->ctx), 0);
	tern_req_init(&w, mid_cb, &m);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &w), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	cq_ok(fk.calls[0].context, 8, 0, 0);
	cq_imm(55);
	assert_true(tern_progress(e->ctx) >= 1);
	assert_int_equal(m.ret, 0);
	assert_true(m.x.calls <= 1);
	assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(m.x.calls, 1);
	assert_int_equal(m.x.req.status, 0);
	assert_int_equal(tern_imm_count(e->ctx, 55), 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(m.x.calls, 1);
}

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

/* What a request costs: the header says so (req.h). */
static void test_req_size(void **state)
{
	(void)state;
	assert_int_equal(sizeof(((struct tern_req *)0)->_priv),
			 TERN_REQ_PRIV_SIZE);
	assert_true(sizeof(struct tern__req_priv) <= TERN_REQ_PRIV_SIZE);
	if (sizeof(void *) == 8)
		assert_int_equal(sizeof(struct tern_req), 344);
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

/* ---- Closing: everything in flight completes -ECANCELED ---- */

static void test_drain_cancels_everything(void **state)
{
	struct env *e = *state;
	struct tracked a, r, b, r2, x, y, c;
	size_t ncalls;

	track_init(&a);
	track_init(&r);
	assert_int_equal(write_nth(e, &a, 0), 0);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r.req), 0);
	track_init(&x);
	assert_int_equal(tern_imm_expect(e->ctx, 1, 1, &x.req), 0);
	cq_imm(2);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	/* Queued requests and a satisfied, not yet completed expectation. */
	assert_int_equal(write_nth(e, &b, 1), 0);
	track_init(&r2);
	assert_int_equal(tern_recv(e->ctx, &e->mr, e->buf, 64, &r2.req), 0);
	track_init(&y);
	assert_int_equal(tern_imm_expect(e->ctx, 2, 1, &y.req), 0);
	/* The posted write finishes on its own; the receive is cancelled. */
	cq_ok(ctx_of(&a), 64, 0, 0);
	fk.cancel_completes = 1;
	ncalls = fk.ncalls;
	e->ctx->closing = 1;
	tern__loop_drain(e->ctx);

	assert_int_equal(a.calls, 1);
	assert_int_equal(a.status, 0);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.status, -ECANCELED);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.status, -ECANCELED);
	assert_int_equal(x.calls, 1);
	assert_int_equal(x.status, -ECANCELED);
	assert_int_equal(y.calls, 1);
	assert_int_equal(y.status, -ECANCELED);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ECANCELED);
	/* Only the cancel reached the provider, for the posted receive. */
	assert_int_equal(fk.ncalls, ncalls + 1);
	assert_int_equal(fk.calls[ncalls].op, FOP_CANCEL);
	assert_ptr_equal(fk.calls[ncalls].context, ctx_of(&r));
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);

	/* What the provider still holds after that is cancelled by tern. */
	e->ctx->closing = 0;
	assert_int_equal(write_nth(e, &c, 2), 0);
	assert_int_equal(tern_progress(e->ctx), 0);
	assert_int_equal(e->ctx->posted.len, 1);
	tern__loop_cancel_posted(e->ctx);
	/* ctx close then runs their callbacks (tern__ctx_finish_close()). */
	assert_int_equal(c.calls, 0);
	assert_int_equal(tern__ready_run(e->ctx), 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.status, -ECANCELED);
	assert_int_equal(e->ctx->posted.len, 0);
	assert_int_equal(e->peer.inflight, 0);
}

/* ---- Waiting ---- */

static void test_wait(void **state)
{
	struct env *e = *state;
	struct tracked w;

	assert_int_equal(tern_progress(NULL), -EINVAL);
	assert_int_equal(tern_wait(NULL, NULL, 0), -EINVAL);
	/* Nothing completes: a bounded wait times out, the op stays. */
	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_int_equal(tern_wait(e->ctx, &w.req, 20), -ETIMEDOUT);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(w.req.done, 0);
	assert_int_equal(tern_wait(e->ctx, NULL, 0), -ETIMEDOUT);
	/* Any completion ends a wait without a request. */
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_wait(e->ctx, NULL, 1000), 0);
	assert_int_equal(w.calls, 1);
	assert_int_equal(w.req.status, 0);
}

/* A failed post's callback cancels a sibling queued behind it. The post's
 * failure goes to the ready list, so progress finishes posting the queue
 * before any callback runs: the sibling is out by then and cannot be
 * cancelled (once the callback ran mid-walk and progress posted the
 * vanished request: NULL deref). */
struct sib {
	struct tern_ctx *ctx;
	struct tern_req *victim;
	int cancel_ret;
	int calls;
};

static void sib_cb(struct tern_req *req)
{
	struct sib *b = req->data;

	b->calls++;
	b->cancel_ret = tern_req_cancel(b->ctx, b->victim);
}

static void test_failed_post_cb_cancels_sibling(void **state)
{
	struct env *e = *state;
	static const ssize_t rets[] = { -TERN_EPROV };
	struct sib b = { .ctx = e->ctx };
	struct tern_req a;
	struct tracked v;

	fake_script(TERN_ARRAY_SIZE(rets), rets);
	tern_req_init(&a, sib_cb, &b);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &a), 0);
	assert_int_equal(write_nth(e, &v, 1), 0);
	b.victim = &v.req;
	/* Posting alone runs no callback, even for a failed post. */
	assert_int_equal(tern_flush(e->ctx), 0);
	assert_int_equal(b.calls, 0);
	assert_int_equal(a.done, 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(a.status, -TERN_EPROV);
	assert_int_equal(b.cancel_ret, -EBUSY);
	assert_int_equal(v.calls, 0);
	cq_ok(ctx_of(&v), 64, 0, 0);
	assert_int_equal(tern_progress(e->ctx), 1);
	assert_int_equal(v.calls, 1);
	assert_int_equal(v.req.status, 0);
	assert_int_equal(fk.ncalls, 2);
}

/* Latency: a queued operation is handed to the provider before progress
 * reads the CQ (on tcp a CQ read means reading sockets). */
static void test_post_before_poll(void **state)
{
	struct env *e = *state;
	struct tracked w, w2;
	size_t reads;

	track_init(&w);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &w.req),
		0);
	reads = fk.cq_reads;
	assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(fk.calls[0].cq_reads, reads);
	assert_true(fk.cq_reads > reads);
	/* Again with a completion waiting: the new write still goes out
	 * before the read that reaps the old one. */
	cq_ok(fk.calls[0].context, 8, 0, 0);
	track_init(&w2);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &w2.req),
		0);
	reads = fk.cq_reads;
	assert_true(tern_progress(e->ctx) >= 1);
	assert_int_equal(w.req.done, 1);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.calls[1].cq_reads, reads);
}

/* Latency: waiting on a request that already completed reads no CQ (on
 * tcp a CQ read polls the sockets and resets the provider's signal: a
 * ping-pong paid a system call pair per message), and queued operations
 * can be handed over without one (tern ping, before its clock starts). */
static void test_no_cq_read_needed(void **state)
{
	struct env *e = *state;
	struct tracked w, w2;
	size_t reads;

	assert_int_equal(write_nth(e, &w, 0), 0);
	assert_true(tern_progress(e->ctx) >= 0);
	assert_int_equal(fk.ncalls, 1);
	cq_ok(fk.calls[0].context, 64, 0, 0);
	assert_int_equal(tern_wait(e->ctx, &w.req, 1000), 0);
	assert_int_equal(w.req.done, 1);
	reads = fk.cq_reads;
	assert_int_equal(tern_wait(e->ctx, &w.req, 1000), 0);
	assert_int_equal(tern_wait(e->ctx, &w.req, 0), 0);
	assert_int_equal(fk.cq_reads, reads);
	/* Posting without reading: the write reaches the provider, the CQ
	 * is not read, and the write is still in flight. */
	assert_int_equal(tern_flush(NULL), -EINVAL);
	track_init(&w2);
	assert_int_equal(
		tern_write(&e->peer, &e->mr, e->buf, 8, &e->rdesc, 0, &w2.req),
		0);
	assert_int_equal(fk.ncalls, 1);
	assert_int_equal(tern_flush(e->ctx), 0);
	assert_int_equal(fk.ncalls, 2);
	assert_int_equal(fk.cq_reads, reads);
	assert_int_equal(w2.req.done, 0);
	cq_ok(fk.calls[1].context, 8, 0, 0);
	assert_int_equal(tern_wait(e->ctx, &w2.req, 1000), 0);
	assert_true(fk.cq_reads > reads);
	assert_int_equal(w2.calls, 1);
}

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
	e->ctx->tagged = 0;
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
		T(test_write_queues_until_progress),
		T(test_post_before_poll),
		T(test_no_cq_read_needed),
		T(test_failed_post_cb_cancels_sibling),
		T(test_send_recv_posting),
		T(test_untagged_recv_then_message),
		T(test_untagged_message_then_recv),
		T(test_untagged_holds_buffers),
		T(test_untagged_imm_error_limits),
		T(test_batches_with_more),
		T(test_tx_credits_limit_posts),
		T(test_rx_credits_limit_posts),
		T(test_eagain_requeues),
		T(test_eagain_repeated_then_wait),
		T(test_eagain_mid_batch_is_flushed),
		T(test_completion_success_once),
		T(test_completion_recv_len_and_imm),
		T(test_completion_error_provider),
		T(test_sync_rma_attributes_failures),
		T(test_sync_rma_out_of_order_stops),
		T(test_inject_small_writes),
		T(test_request_reposted_as_is),
		T(test_completion_error_codes),
		T(test_completion_recv_truncated),
		T(test_cq_failure_is_reported),
		T(test_cq_read_in_batches),
		T(test_post_error_completes_in_progress),
		T(test_post_error_mid_batch),
		T(test_imm_arrivals_before_expect),
		T(test_imm_arrivals_after_expect),
		T(test_imm_surplus_stays_counted),
		T(test_imm_expect_errors),
		T(test_imm_cancel),
		T(test_imm_table_grows),
		T(test_imm_table_grows_high_bit_keys),
		T(test_imm_table_full),
		T(test_imm_ignores_plain_remote_write),
		T(test_checks_before_posting),
		T(test_cancel_queued),
		T(test_cancel_then_wait),
		T(test_peer_gone),
		T(test_imm_deadline),
		T(test_imm_from_peer),
		T(test_imm_abort_sender),
		T(test_imm_abort_target),
		T(test_mr_inflight),
		T(test_cancelled_cb_reposts),
		T(test_cancel_posted_recv),
		T(test_callback_posts),
		T(test_callback_reuses_request),
		T(test_callback_reexpects),
		T(test_callback_expects_mid_batch),
		T(test_striping),
		T(test_read_pieces),
		T(test_rails),
		T(test_striping_desc_pool),
		T(test_req_size),
		T(test_drain_cancels_everything),
		T(test_wait),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
