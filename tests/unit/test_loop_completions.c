/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the progress engine (src/engine/) over the fake provider
 * (loop_fixture.h). Completions: success and error entries, what a request
 * says after them (length, immediate, status, provider text), sync_rma
 * attribution of failures with no context, small writes the provider takes
 * as copies, a request posted again as is, and CQ reads in batches.
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

/* ---- Completions ---- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
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
#undef T
	};

	/* Post and completion errors are expected here; keep stderr quiet. */
	tern_log_set_level(TERN_LOG_NONE);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
