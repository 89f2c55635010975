/* SPDX-License-Identifier: MIT */
/* ops' many small writes (small): around the providers' inject sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

/* --- many small writes ---------------------------------------------------- */

/*
 * Writes around the providers' inject sizes (shm 4 KiB, tcp 64 B), which
 * tern hands over as copies the provider takes, with no completion of the
 * provider's ($TERN_INJECT, docs/api.md): each must still complete exactly
 * once, from progress (never inside its post), its source may be reused
 * in its callback, and every byte lands where it was sent. Then writes
 * with immediate of the same sizes, counted at the target, and a queued
 * small write cancelled before progress ever posts it: it completes once,
 * -ECANCELED, and its bytes never land. Run with TERN_INJECT=0, 1 and 2.
 */
#define SMALL_N	     2000 /* plain writes */
#define SMALL_IMM_N  500  /* then writes with immediate */
#define SMALL_ALL    (SMALL_N + SMALL_IMM_N)
#define SMALL_REGION (8 * MIB)

static const uint32_t small_sizes[] = { 1,   7,	   8,	 63,   64,   65,
					100, 1000, 4095, 4096, 4097, 24 };

#define SMALL_NSIZES (sizeof(small_sizes) / sizeof(small_sizes[0]))

/* Where write i lands and its length; [SMALL_ALL]: the cancelled one.
 * Writes are 3 bytes apart, so none overlaps another and the result says
 * nothing of ordering; the gaps must stay 0. */
static uint64_t small_offs[SMALL_ALL + 1];
static uint32_t small_lens[SMALL_ALL + 1];

static void small_layout(void)
{
	uint64_t off = 0;

	for (unsigned int i = 0; i <= SMALL_ALL; i++) {
		small_offs[i] = off;
		small_lens[i] = small_sizes[i % SMALL_NSIZES];
		off += small_lens[i] + 3;
	}
}

void small_target(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *buf = alloc_buf(SMALL_REGION, 0);
	uint8_t *want = alloc_buf(SMALL_REGION, 0);
	struct tern_mr *mr = reg(ctx, buf, SMALL_REGION,
				 TERN_ACCESS_REMOTE_WRITE);
	struct tern_req fence, imms;
	uint64_t next = 0;

	(void)arg;
	small_layout();
	mt_fill(want, SMALL_REGION, 23);
	send_card(ch->from_b[1], ctx);
	tern_req_init(&imms, NULL, NULL);
	CHECK(tern_imm_expect(ctx, 9, SMALL_IMM_N, &imms) == 0, "expect");
	tern_req_init(&fence, NULL, NULL);
	CHECK(tern_imm_expect(ctx, 5, 1, &fence) == 0, "expect");
	send_desc(ch->from_b[1], mr);
	wait_ok(ctx, &imms, "the writes with immediate");
	/* Sent once every write had completed at the initiator; it lands
	 * after them (one peer's commands, one connection). */
	wait_ok(ctx, &fence, "the fence");
	for (unsigned int k = 0; k <= SMALL_ALL; k++) {
		uint64_t o = small_offs[k], l = small_lens[k];

		for (uint64_t i = next; i < o; i++)
			CHECK(buf[i] == 0,
			      "byte %llu, between writes, is 0x%02x",
			      (unsigned long long)i, buf[i]);
		for (uint64_t i = o; i < o + l; i++) {
			if (k == SMALL_ALL)
				CHECK(buf[i] == 0,
				      "the cancelled write landed");
			else
				CHECK(buf[i] == want[i],
				      "write %u (%llu bytes at %llu): byte "
				      "%llu is 0x%02x, sent 0x%02x",
				      k, (unsigned long long)l,
				      (unsigned long long)o,
				      (unsigned long long)(i - o), buf[i],
				      want[i]);
		}
		next = o + l;
	}
	printf("ok: %u small writes and %u with immediate landed byte-exact; "
	       "the cancelled one did not\n",
	       SMALL_N, SMALL_IMM_N);
	target_has_it(ch);
	serve_until(ctx, ch->to_b[0]);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(buf);
	free(want);
}

/* The initiator's callbacks: calls per write, and whether one ran where
 * it must not (inside a post or cancel, or on a request not done). */
static unsigned int small_calls[SMALL_ALL + 1];
static int small_in_post, small_bad;
static uint8_t *small_src;

static void small_cb(struct tern_req *req)
{
	unsigned int i = (unsigned int)((unsigned int *)req->data -
					small_calls);

	small_calls[i]++;
	if (small_in_post || !req->done)
		small_bad = 1;
	/* Its source is free once it completed: scribble on it. */
	memset(small_src + small_offs[i], 0xee, small_lens[i]);
}

void small_initiator(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	struct tern_mr *mr;
	struct tern_peer *peer = get_peer(ch->from_b[0], ctx);
	struct tern_req *reqs = calloc(SMALL_ALL + 1, sizeof(*reqs));
	struct tern_req fence;
	struct tern_mr_desc rd;
	char c = 'x';

	(void)arg;
	CHECK(reqs != NULL, "alloc");
	small_layout();
	small_src = alloc_buf(SMALL_REGION, 0);
	mt_fill(small_src, SMALL_REGION, 23);
	mr = reg(ctx, small_src, SMALL_REGION, TERN_ACCESS_LOCAL);
	get_desc(ch->from_b[0], &rd);
	small_in_post = 1;
	for (unsigned int i = 0; i < SMALL_ALL; i++) {
		uint64_t o = small_offs[i];
		int ret;

		tern_req_init(&reqs[i], small_cb, &small_calls[i]);
		ret = i < SMALL_N ? tern_write(peer, mr, small_src + o,
					       small_lens[i], &rd, o, &reqs[i])
				  : tern_write_imm(peer, mr, small_src + o,
						   small_lens[i], &rd, o, 9,
						   &reqs[i]);
		CHECK(ret == 0, "post %u: %s", i, tern_strerror(ret));
	}
	/* A small write queued and cancelled before any progress: the
	 * provider never sees it. */
	tern_req_init(&reqs[SMALL_ALL], small_cb, &small_calls[SMALL_ALL]);
	CHECK(tern_write(peer, mr, small_src + small_offs[SMALL_ALL],
			 small_lens[SMALL_ALL], &rd, small_offs[SMALL_ALL],
			 &reqs[SMALL_ALL]) == 0,
	      "post");
	CHECK(tern_req_cancel(ctx, &reqs[SMALL_ALL]) == 0, "cancel");
	small_in_post = 0;
	CHECK(small_bad == 0, "a callback ran inside a post or the cancel");
	for (unsigned int i = 0; i <= SMALL_ALL; i++) {
		int ret = tern_wait(ctx, &reqs[i], 20000);

		CHECK(ret == 0, "write %u: wait: %s", i, tern_strerror(ret));
		CHECK(reqs[i].status == (i == SMALL_ALL ? -ECANCELED : 0),
		      "write %u: %s (%s)", i, tern_strerror(reqs[i].status),
		      reqs[i].errmsg);
	}
	/* Exactly once each, even after more progress. */
	for (int k = 0; k < 50; k++)
		tern_wait(ctx, NULL, 2);
	for (unsigned int i = 0; i <= SMALL_ALL; i++)
		CHECK(small_calls[i] == 1, "write %u: %u completions", i,
		      small_calls[i]);
	CHECK(small_bad == 0, "a callback ran on a request not done");
	tern_req_init(&fence, NULL, NULL);
	CHECK(tern_write_imm(peer, mr, small_src, 0, &rd, 0, 5, &fence) == 0,
	      "fence");
	wait_ok(ctx, &fence, "fence");
	wait_target(ctx, ch);
	printf("ok: %u small writes completed once each, never inside a post; "
	       "a queued one cancels\n",
	       SMALL_ALL);
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	tern_peer_remove(peer);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(reqs);
	free(small_src);
}
