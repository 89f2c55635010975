/* SPDX-License-Identifier: MIT */
/*
 * local_hostile's peers that misuse their rings: hol (a peer that never
 * reads its ring holds up no other), scribble (a peer's junk in its own
 * ring) and stuck (a peer that says it is copying, for ever).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "local_hostile_fixture.h"

#include "../../src/engine/local_int.h"
#include "../../src/wire/local.h"

/* ---- hol: a full ring holds up only its own peer ------------------- */

#define HOL_EXTRA 100

int case_hol(void)
{
	struct tern_ctx *w = open_ctx(), *slow = open_ctx(), *fast = open_ctx();
	uint8_t *sb, *fb, src[64];
	struct tern_mr *smr, *fmr, *wmr;
	struct tern_mr_desc sd, fd;
	struct tern_peer *ps, *pf;
	struct tern_req *rs, r, x;
	uint64_t t0;
	int done = 0;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&sb) == 0 &&
		      tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&fb) ==
			      0,
	      "shared alloc");
	rs = calloc(TERN__L_RING + HOL_EXTRA, sizeof(*rs));
	CHECK(rs != NULL, "alloc");
	CHECK(tern_mr_reg(slow, sb, MEM, RW, &smr) == 0 &&
		      tern_mr_reg(fast, fb, MEM, RW, &fmr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(smr, &sd);
	tern_mr_desc(fmr, &fd);
	add(slow, w);
	add(fast, w);
	ps = add(w, slow);
	pf = add(w, fast);
	CHECK(tern_peer_path(ps) == TERN_PATH_LOCAL &&
		      tern_peer_path(pf) == TERN_PATH_LOCAL,
	      "no same-host path");
	/* slow never progresses: its ring from w fills at 4096. */
	memset(src, 0x42, sizeof(src));
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++) {
		tern_req_init(&rs[k], NULL, NULL);
		CHECK(tern_write_imm(ps, wmr, src, 8, &sd, 8 * (k % 64), 1,
				     &rs[k]) == 0,
		      "post %d", k);
	}
	for (int k = 0; k < 200; k++)
		tern_progress(w);
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		done += rs[k].done;
	CHECK(done == TERN__L_RING,
	      "%d of %d writes with immediates to a peer that never reads "
	      "completed (want %d: the ring's room)",
	      done, TERN__L_RING + HOL_EXTRA, TERN__L_RING);
	/* fast is served at once, writes and immediates. */
	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(fast, 2, 3, &x) == 0, "expect");
	t0 = now_ms();
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(pf, wmr, src, sizeof(src), &fd, 64, 2,
				     &r) == 0 &&
			      pump(&r, w, fast) == 0,
		      "fast: write_imm: %s", tern_strerror(r.status));
	}
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(pf, wmr, src, sizeof(src), &fd, 0, &r) == 0 &&
		      pump(&r, w, fast) == 0,
	      "fast: write");
	CHECK(pump(&x, fast, w) == 0, "fast: its immediates");
	CHECK(now_ms() - t0 < 500, "fast waited %llu ms behind slow",
	      (unsigned long long)(now_ms() - t0));
	CHECK(memcmp(fb, src, sizeof(src)) == 0, "fast's bytes");
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		CHECK(k < TERN__L_RING || !rs[k].done,
		      "a queued write to slow completed meanwhile");
	/* slow reads at last: the rest go. */
	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(slow, 1, TERN__L_RING + HOL_EXTRA, &x) == 0,
	      "expect");
	CHECK(pump(&x, slow, w) == 0, "slow: its immediates");
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		CHECK(pump(&rs[k], w, slow) == 0, "slow %d", k);
	printf("hol: %d writes with immediates to a peer that never read: "
	       "%d completed, %d queued; another peer served in %llu ms\n",
	       TERN__L_RING + HOL_EXTRA, TERN__L_RING, HOL_EXTRA,
	       (unsigned long long)(now_ms() - t0));
	tern_mr_close(smr);
	tern_mr_close(fmr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(slow);
	tern_ctx_close(fast);
	tern_mem_free(TERN_MEM_SHARED, sb);
	tern_mem_free(TERN_MEM_SHARED, fb);
	free(rs);
	return 0;
}

/* ---- scribble: a peer's junk in its own ring ------------------------ */

/* The ring in @w's inbox (it writes it: a hostile peer scribbles its
 * own memory) pointed at the ctx of nonce @target. */
static struct tern__lout *ring_to(struct tern_ctx *w, uint64_t target)
{
	for (int i = 0; i < TERN__L_NPEER; i++) {
		struct tern__lout *o = tern__l_out(w->local->map, i);

		if (atomic_load(&o->target) == target)
			return o;
	}
	FAIL("no ring to %llx", (unsigned long long)target);
	return NULL;
}

int case_scribble(void)
{
	struct tern_ctx *o = open_ctx(), *bad = open_ctx(), *good = open_ctx();
	struct tern_peer *obad, *ogood, *pb, *pg;
	struct tern_mr *omr, *bmr, *gmr;
	struct tern_mr_desc d;
	struct tern_req r, xb, xg;
	struct tern__lout *ring;
	uint8_t *ob, src[64];
	uint64_t tail;
	char *log;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&ob) == 0,
	      "shared alloc");
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0 &&
		      tern_mr_reg(bad, src, sizeof(src), RW, &bmr) == 0 &&
		      tern_mr_reg(good, src, sizeof(src), RW, &gmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	obad = add(o, bad);
	ogood = add(o, good);
	pb = add(bad, o);
	pg = add(good, o);
	CHECK(tern_peer_path(pb) == TERN_PATH_LOCAL &&
		      tern_peer_path(pg) == TERN_PATH_LOCAL,
	      "no same-host path");
	/* One honest write_imm from bad: its ring exists, and counts. */
	tern_req_init(&xb, NULL, NULL);
	CHECK(tern_imm_expect_from(o, obad, 55, 2, 20000, &xb) == 0,
	      "expect from bad");
	tern_req_init(&xg, NULL, NULL);
	CHECK(tern_imm_expect_from(o, ogood, 55, 3, 20000, &xg) == 0,
	      "expect from good");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write_imm(pb, bmr, src, 8, &d, 0, 55, &r) == 0 &&
		      pump(&r, bad, o) == 0,
	      "bad's honest write_imm");
	spin(o, NULL, 5);
	CHECK(!xb.done, "one immediate completed an expectation of two");
	/* Then junk: its tail far ahead, entries of 55 everywhere. */
	ring = ring_to(bad, tern__local_id(o)->nonce);
	for (int k = 0; k < TERN__L_RING; k++)
		ring->ring[k] = 55;
	tail = atomic_load(&ring->tail);
	atomic_store(&ring->tail, tail + 1000000);
	cap_begin();
	for (int k = 0; k < 2000; k++)
		tern_progress(o);
	/* good's three count for good alone. */
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(pg, gmr, src, 8, &d, 64, 55, &r) == 0 &&
			      pump(&r, good, o) == 0,
		      "good's write_imm");
	}
	CHECK(pump(&xg, o, good) == 0 && xg.len == 3, "good's immediates");
	/* And it scribbles on. */
	atomic_store(&ring->tail, tail + 2000000);
	spin(o, good, 20);
	log = cap_end();
	CHECK(count(log, "no longer read") == 1,
	      "the scribbled ring was named %d times (want once)",
	      count(log, "no longer read"));
	CHECK(!xb.done, "bad's junk completed its expectation");
	CHECK(o->local->dropped == 1, "dropped %llu",
	      (unsigned long long)o->local->dropped);
	CHECK(tern_imm_count(o, 55) == 1,
	      "%llu immediates of 55 counted (want bad's one honest one)",
	      (unsigned long long)tern_imm_count(o, 55));
	good_peer(o, "scribble");
	tern_req_cancel(o, &xb);
	spin(o, NULL, 2);
	printf("scribble: a ring 1000000 entries ahead read no more (said "
	       "once), nothing of it counted; another peer's 3 counted for "
	       "it alone\n");
	tern_mr_close(omr);
	tern_mr_close(bmr);
	tern_mr_close(gmr);
	tern_ctx_close(bad);
	tern_ctx_close(good);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(log);
	return 0;
}

/* ---- stuck: a peer that says it is copying, for ever ---------------- */

/* A peer whose ring to us says "copying into region i" and never stops
 * (it writes its own memory: a hung or hostile one) holds our close of
 * that region for 1 s, once: then it loses the path (its entry is no
 * longer live, said once), and later closes do not wait for it. */
int case_stuck(void)
{
	struct tern_ctx *o = open_ctx(), *bad = open_ctx();
	struct tern_peer *pb;
	struct tern_mr *omr, *omr2, *bmr;
	struct tern_mr_desc d;
	struct tern_req r;
	struct tern__lout *ring;
	uint8_t *ob, src[64];
	uint64_t t0, t1, t2;
	char *log;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&ob) == 0,
	      "shared alloc");
	memset(src, 7, sizeof(src));
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0 &&
		      tern_mr_reg(bad, src, sizeof(src), RW, &bmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(o, bad);
	pb = add(bad, o);
	CHECK(tern_peer_path(pb) == TERN_PATH_LOCAL, "no same-host path");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(pb, bmr, src, 8, &d, 0, &r) == 0 &&
		      pump(&r, bad, o) == 0,
	      "bad's honest write");
	/* Then it claims a copy into that region and never ends it. */
	ring = ring_to(bad, tern__local_id(o)->nonce);
	atomic_store(&ring->busy, (uint64_t)omr->local_idx + 1);
	cap_begin();
	t0 = now_ms();
	CHECK(tern_mr_close(omr) == 0, "close");
	t1 = now_ms();
	CHECK(t1 - t0 >= 900 && t1 - t0 < 3000,
	      "the first close waited %llu ms (want about 1 s)",
	      (unsigned long long)(t1 - t0));
	CHECK(tern_peer_path(pb) == TERN_PATH_FABRIC,
	      "a peer stuck copying for 1 s kept the same-host path");
	/* A second region: its close does not wait for the stuck peer. */
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr2) == 0, "reg 2");
	atomic_store(&ring->busy, (uint64_t)omr2->local_idx + 1);
	t1 = now_ms();
	CHECK(tern_mr_close(omr2) == 0, "close 2");
	t2 = now_ms();
	log = cap_end();
	CHECK(t2 - t1 < 200,
	      "the second close waited %llu ms for a peer "
	      "that lost the path",
	      (unsigned long long)(t2 - t1));
	CHECK(count(log, "still copying") == 1,
	      "the stuck peer was named %d times (want once)",
	      count(log, "still copying"));
	atomic_store(&ring->busy, 0);
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0, "reg 3");
	good_peer(o, "stuck");
	printf("stuck: a peer copying for ever held the first close %llu ms, "
	       "lost the path (said once), and the next close waited %llu "
	       "ms\n",
	       (unsigned long long)(t1 - t0 > 0 ? t1 - t0 : 0),
	       (unsigned long long)(t2 - t1));
	tern_mr_close(omr);
	tern_mr_close(bmr);
	tern_ctx_close(bad);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(log);
	return 0;
}
