/* SPDX-License-Identifier: MIT */
/*
 * ops' atomics: fadd (initiator processes adding to the target's words,
 * every old value seen once) and cswap (compare-and-swap rounds).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

/* --- atomics ----------------------------------------------------------- */

#define FADD_PROCS 4
#define FADD_REPS  1000
#define FADD_WIN   16

static void atomic_target(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	uint64_t *words = alloc_buf(4096, 0);
	struct tern_ctx_info ci;
	struct tern_mr *mr;
	uint64_t want = *(uint64_t *)arg;
	char c;

	tern_ctx_query(ctx, &ci);
	/* Tell the parent what the provider offers before anything else. */
	c = (char)((ci.atomic_fadd ? 1 : 0) | (ci.atomic_cswap ? 2 : 0));
	CHECK(write(ch->from_b[1], &c, 1) == 1, "pipe");
	mr = reg(ctx, words, 4096, TERN_ACCESS_REMOTE_ATOMIC);
	send_card(ch->from_b[1], ctx);
	send_desc(ch->from_b[1], mr);
	serve_until(ctx, ch->to_b[0]);
	/* The target reads its own memory: the truth, not a remote view. */
	c = words[0] == want ? 'y' : 'n';
	if (c == 'n')
		fprintf(stderr, "target: word is %llu, want %llu\n",
			(unsigned long long)words[0], (unsigned long long)want);
	CHECK(write(ch->from_b[1], &c, 1) == 1, "pipe");
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(words);
}

struct fadd_arg {
	const uint8_t *card;
	uint32_t card_len;
	const struct tern_mr_desc *rd;
	int out; /* pipe for the old values */
};

static void fadd_worker(struct chan *ch, void *arg)
{
	struct fadd_arg *a = arg;
	struct tern_ctx *ctx = open_ctx();
	struct tern_req req[FADD_WIN];
	uint64_t old[FADD_REPS];
	struct tern_peer *peer;
	int posted = 0, done = 0;

	(void)ch;
	CHECK(tern_peer_add(ctx, a->card, a->card_len, &peer) == 0, "peer");
	/* A window of fetch-adds in flight, like real users run them. */
	while (done < FADD_REPS) {
		while (posted < FADD_REPS && posted - done < FADD_WIN) {
			struct tern_req *r = &req[posted % FADD_WIN];

			tern_req_init(r, NULL, NULL);
			CHECK(tern_atomic_fetch_add(peer, a->rd, 0, 1, r) == 0,
			      "post fadd");
			posted++;
		}
		wait_ok(ctx, &req[done % FADD_WIN], "fetch-add");
		old[done] = req[done % FADD_WIN].value;
		done++;
	}
	CHECK(write(a->out, old, sizeof(old)) == sizeof(old), "pipe");
	tern_peer_remove(peer);
	tern_ctx_close(ctx);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static int run_atomic_target(struct chan *ch, uint64_t want, pid_t *b,
			     uint8_t *card, uint32_t *card_len,
			     struct tern_mr_desc *rd, int need_what)
{
	static uint64_t want_s;
	char caps;

	want_s = want;
	*b = spawn(atomic_target, ch, &want_s);
	CHECK(read(ch->from_b[0], &caps, 1) == 1, "pipe");
	if (!(caps & need_what)) {
		kill(*b, SIGTERM);
		reap(*b);
		need(0, need_what == 1 ? "64-bit fetch-and-add"
				       : "64-bit compare-and-swap");
	}
	*card_len = get_blob(ch->from_b[0], card, TERN_CARD_MAX);
	get_desc(ch->from_b[0], rd);
	return 0;
}

void test_fadd(struct chan *ch)
{
	uint8_t card[TERN_CARD_MAX];
	static uint64_t all[FADD_PROCS * FADD_REPS];
	struct fadd_arg a[FADD_PROCS];
	pid_t b, w[FADD_PROCS];
	struct tern_mr_desc rd;
	uint32_t card_len;
	int pipes[FADD_PROCS][2];
	char c = 'x';

	run_atomic_target(ch, FADD_PROCS * FADD_REPS, &b, card, &card_len, &rd,
			  1);
	for (int i = 0; i < FADD_PROCS; i++) {
		CHECK(pipe(pipes[i]) == 0, "pipe");
		a[i] = (struct fadd_arg){ card, card_len, &rd, pipes[i][1] };
		w[i] = spawn(fadd_worker, ch, &a[i]);
		close(pipes[i][1]);
	}
	parent_ends(ch);
	for (int i = 0; i < FADD_PROCS; i++) {
		size_t got = 0, want = sizeof(uint64_t) * FADD_REPS;

		while (got < want) {
			ssize_t n = read(pipes[i][0],
					 (char *)&all[i * FADD_REPS] + got,
					 want - got);

			CHECK(n > 0, "worker %d sent %zu of %zu bytes", i, got,
			      want);
			got += (size_t)n;
		}
		CHECK(reap(w[i]) == 0, "worker %d failed", i);
	}
	qsort(all, FADD_PROCS * FADD_REPS, sizeof(all[0]), cmp_u64);
	for (uint64_t i = 0; i < FADD_PROCS * FADD_REPS; i++)
		CHECK(all[i] == i, "old values not 0..%d each once (at %llu)",
		      FADD_PROCS * FADD_REPS - 1, (unsigned long long)i);
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	CHECK(read(ch->from_b[0], &c, 1) == 1 && c == 'y',
	      "final counter is not %d", FADD_PROCS * FADD_REPS);
	CHECK(reap(b) == 0, "target failed");
	printf("ok: %d processes x %d fetch-adds: counter %d, every old value "
	       "unique\n",
	       FADD_PROCS, FADD_REPS, FADD_PROCS * FADD_REPS);
}

static uint64_t cas(struct tern_ctx *ctx, struct tern_peer *peer,
		    const struct tern_mr_desc *rd, uint64_t cmp, uint64_t swp)
{
	struct tern_req req;

	tern_req_init(&req, NULL, NULL);
	CHECK(tern_atomic_cswap(peer, rd, 0, cmp, swp, &req) == 0, "post cas");
	wait_ok(ctx, &req, "compare-swap");
	return req.value;
}

static void cswap_worker(struct chan *ch, void *arg)
{
	struct fadd_arg *a = arg;
	struct tern_ctx *ctx = open_ctx();
	struct tern_peer *peer;
	struct tern_req req;

	(void)ch;
	CHECK(tern_peer_add(ctx, a->card, a->card_len, &peer) == 0, "peer");
	CHECK(cas(ctx, peer, a->rd, 0, 1) == 0, "acquire of a free lock");
	CHECK(cas(ctx, peer, a->rd, 0, 2) == 1, "acquire of a held lock");
	CHECK(cas(ctx, peer, a->rd, 1, 0) == 1, "release");
	CHECK(cas(ctx, peer, a->rd, 0, 7) == 0, "re-acquire");
	/* Misaligned: refused before posting. */
	tern_req_init(&req, NULL, NULL);
	CHECK(tern_atomic_cswap(peer, a->rd, 4, 0, 1, &req) == -EINVAL,
	      "misaligned atomic not refused");
	tern_peer_remove(peer);
	tern_ctx_close(ctx);
}

void test_cswap(struct chan *ch)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_mr_desc rd;
	struct fadd_arg a;
	uint32_t card_len;
	pid_t b, w;
	char c = 'x';

	run_atomic_target(ch, 7, &b, card, &card_len, &rd, 2);
	a = (struct fadd_arg){ card, card_len, &rd, -1 };
	w = spawn(cswap_worker, ch, &a);
	parent_ends(ch);
	CHECK(reap(w) == 0, "worker failed");
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	CHECK(read(ch->from_b[0], &c, 1) == 1 && c == 'y',
	      "lock word is not 7 at the end");
	CHECK(reap(b) == 0, "target failed");
	printf("ok: compare-and-swap lock: acquire, contend, release, "
	       "re-acquire\n");
}
