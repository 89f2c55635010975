/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Posting: posts only queue and progress hands them to
 * the provider, fields intact; batching ("more"), credits, the provider's
 * "try again", post errors, the checks refused before anything queues,
 * waiting, and what a post costs in CQ reads (latency).
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

/* ---- Posts only queue; progress posts them, fields intact ---- */

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

/* ---- Batching ---- */

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

/* ---- Credits ---- */

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

/* ---- The provider's "try again" never reaches the user ---- */

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

/* ---- Post errors complete from progress ---- */

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

/* ---- Checks refused before posting ---- */

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

/* ---- The request ---- */

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

/* ---- Latency ---- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_write_queues_until_progress),
		T(test_post_before_poll),
		T(test_no_cq_read_needed),
		T(test_send_recv_posting),
		T(test_batches_with_more),
		T(test_tx_credits_limit_posts),
		T(test_rx_credits_limit_posts),
		T(test_eagain_requeues),
		T(test_eagain_repeated_then_wait),
		T(test_eagain_mid_batch_is_flushed),
		T(test_post_error_completes_in_progress),
		T(test_post_error_mid_batch),
		T(test_checks_before_posting),
		T(test_req_size),
		T(test_wait),
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
