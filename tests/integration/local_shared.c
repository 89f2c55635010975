/* SPDX-License-Identifier: MIT */
/*
 * local's shared case: ctxs of one process, a TERN_MEM_SHARED region
 * written, read and updated (atomics) byte-exact at odd sizes and
 * offsets; immediates counted per peer; a batch; a write past the end
 * refused before any copy; a closed region no longer written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "local_cases.h"

/* Three ctxs of this process: t owns the shared region tb, i writes
 * into it from ib (host memory), j from jb; @want is what tb must hold. */
struct trio {
	struct tern_ctx *t, *i, *j;
	struct tern_mr *tmr, *imr, *jmr;
	struct tern_peer *ti, *ij, *jt;
	struct tern_mr_desc d;
	uint8_t *tb, *ib, *jb, *want;
	unsigned int seed;
};

static void trio_open(struct trio *s)
{
	s->t = open_ctx();
	s->i = open_ctx();
	s->j = open_ctx();
	s->seed = 1;
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, REGION, (void **)&s->tb) == 0,
	      "shared alloc");
	CHECK(tern_mem_alloc(TERN_MEM_HOST, 0, REGION, (void **)&s->ib) == 0 &&
		      (s->jb = malloc(4096)) != NULL &&
		      (s->want = malloc(REGION)),
	      "alloc");
	memset(s->tb, 0xee, REGION);
	memcpy(s->want, s->tb, REGION);
	CHECK(tern_mr_reg(s->t, s->tb, REGION, RW, &s->tmr) == 0, "reg t");
	CHECK(tern_mr_reg(s->i, s->ib, REGION, RW, &s->imr) == 0, "reg i");
	CHECK(tern_mr_reg(s->j, s->jb, 4096, RW, &s->jmr) == 0, "reg j");
	tern_mr_desc(s->tmr, &s->d);
	s->ij = add(s->i, s->t);
	s->jt = add(s->j, s->t);
	s->ti = add(s->t, s->i);
	add(s->t, s->j);
	CHECK(tern_peer_path(s->ij) == TERN_PATH_LOCAL,
	      "a ctx of this process is not given the same-host path");
}

/* Writes at odd sizes and offsets, then read back; past the end:
 * refused at the post, nothing copied. */
static void shared_rw(struct trio *s)
{
	static const size_t sizes[] = {
		1, 7, 64, 4095, 4097, 65536 + 3, (1u << 20) + 5
	};
	static const size_t offs[] = { 0, 3, 4093, 1u << 20 };
	uint8_t *ib = s->ib, *tb = s->tb, *want = s->want;
	struct tern_req r;
	int ret;

	for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++) {
		for (size_t b = 0; b < sizeof(offs) / sizeof(offs[0]); b++) {
			size_t n = sizes[a], off = offs[b] + a;

			if (off + n > REGION)
				continue;
			fill(ib, n, ++s->seed);
			memcpy(want + off, ib, n);
			tern_req_init(&r, NULL, NULL);
			ret = tern_write(s->ij, s->imr, ib, n, &s->d, off, &r);
			CHECK(ret == 0, "write %zu at %zu: %s", n, off,
			      tern_strerror(ret));
			CHECK(!r.done, "completed inside the post");
			CHECK(pump(&r, s->i, NULL, NULL) == 0, "write status");
			CHECK(memcmp(tb, want, REGION) == 0,
			      "write %zu at %zu: bytes differ (or outside)", n,
			      off);
			memset(ib + REGION / 2, 0, n);
			tern_req_init(&r, NULL, NULL);
			ret = tern_read(s->ij, s->imr, ib + REGION / 2, n,
					&s->d, off, &r);
			CHECK(ret == 0 && pump(&r, s->i, NULL, NULL) == 0,
			      "read %zu at %zu", n, off);
			CHECK(memcmp(ib + REGION / 2, want + off, n) == 0,
			      "read %zu at %zu: bytes differ", n, off);
		}
	}
	printf("shared: writes and reads of 7 sizes at 4 offsets byte-exact\n");
	tern_req_init(&r, NULL, NULL);
	ret = tern_write(s->ij, s->imr, ib, 4096, &s->d, REGION - 4095, &r);
	CHECK(ret == -TERN_EBOUNDS, "past the end: %s", tern_strerror(ret));
	CHECK(memcmp(tb, want, REGION) == 0, "past the end: bytes moved");
}

/* Immediates per peer: j's writes of the same imm do not count. */
static void shared_imm(struct trio *s)
{
	struct tern_req r, x;
	int ret;

	tern_req_init(&x, NULL, NULL);
	ret = tern_imm_expect_from(s->t, s->ti, 77, 3, 20000, &x);
	CHECK(ret == 0, "expect from a local peer: %s", tern_strerror(ret));
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(s->jt, s->jmr, s->jb, 8, &s->d,
				     8 * (size_t)k, 77, &r) == 0 &&
			      pump(&r, s->j, s->t, NULL) == 0,
		      "j's write_imm");
	}
	for (int k = 0; k < 100; k++)
		tern_progress(s->t);
	CHECK(!x.done, "another peer's immediates completed the expectation");
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(s->ij, s->imr, s->ib, 16, &s->d, 64, 77,
				     &r) == 0 &&
			      pump(&r, s->i, NULL, NULL) == 0,
		      "i's write_imm");
	}
	CHECK(pump(&x, s->t, s->i, s->j) == 0 && x.len == 3,
	      "expectation from i: %s", tern_strerror(x.status));
	printf("shared: immediates counted per peer (3 from j did not "
	       "count)\n");
}

/* Atomics on the shared word, beside the owner's own. */
static void shared_atomics(struct trio *s)
{
	struct tern_peer *ij = s->ij;
	struct tern_req r;
	uint64_t *word;

	word = (uint64_t *)(void *)(s->tb + 4096);
	*word = 40;
	__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_fetch_add(ij, &s->d, 4096, 5, &r) == 0 &&
		      pump(&r, s->i, NULL, NULL) == 0 && r.value == 41 &&
		      *word == 46,
	      "fetch-add: got %llu, word %llu", (unsigned long long)r.value,
	      (unsigned long long)*word);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_cswap(ij, &s->d, 4096, 46, 9, &r) == 0 &&
		      pump(&r, s->i, NULL, NULL) == 0 && r.value == 46 &&
		      *word == 9,
	      "compare-swap");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_cswap(ij, &s->d, 4096, 46, 1, &r) == 0 &&
		      pump(&r, s->i, NULL, NULL) == 0 && r.value == 9 &&
		      *word == 9,
	      "compare-swap that must not swap");
	printf("shared: fetch-add and compare-swap on the shared word\n");
}

/* A batch with immediates. */
static void shared_pieces(struct trio *s)
{
	struct tern_piece pc[3] = {
		{ .loff = 0, .roff = 100000, .len = 3000 },
		{ .loff = 5000, .roff = 200001, .len = 1 },
		{ .loff = 9000, .roff = 300007, .len = 70000 },
	};
	uint8_t *ib = s->ib, *tb = s->tb;
	struct tern_req r, x;

	fill(ib, 80000, ++s->seed);
	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(s->t, 5, 3, &x) == 0, "expect");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write_pieces(s->ij, s->imr, pc, 3, &s->d, 1, TERN_PIECES_IMM,
				5, &r) == 0,
	      "pieces");
	/* Shared memory mapped here: copied inside the call, the request
	 * completing from progress. */
	CHECK(!r.done, "a batch completed inside its post");
	for (int k = 0; k < 3; k++)
		CHECK(memcmp(tb + pc[k].roff, ib + pc[k].loff, pc[k].len) == 0,
		      "piece %d not copied inside the call", k);
	CHECK(pump(&r, s->i, NULL, NULL) == 0, "pieces");
	CHECK(pump(&x, s->t, NULL, NULL) == 0, "pieces' immediates");
	for (int k = 0; k < 3; k++)
		CHECK(memcmp(tb + pc[k].roff, ib + pc[k].loff, pc[k].len) == 0,
		      "piece %d differs", k);
	printf("shared: a batch of 3 pieces with immediates\n");
}

/* Closed by its owner: no longer written. */
static void shared_closed(struct trio *s)
{
	struct tern_req r;
	int ret;

	tern_mr_close(s->tmr);
	memset(s->tb, 0x11, 4096);
	tern_req_init(&r, NULL, NULL);
	ret = tern_write(s->ij, s->imr, s->ib, 4096, &s->d, 0, &r);
	if (ret == 0)
		ret = pump(&r, s->i, s->t, NULL);
	CHECK(ret != 0, "a write into a closed region succeeded");
	for (int k = 0; k < 4096; k++)
		CHECK(s->tb[k] == 0x11, "a closed region was written");
	printf("shared: a closed region refuses writes (%s)\n",
	       tern_strerror(ret));
}

int case_shared(void)
{
	struct trio s;

	trio_open(&s);
	shared_rw(&s);
	shared_imm(&s);
	shared_atomics(&s);
	shared_pieces(&s);
	shared_closed(&s);
	CHECK(tern_ctx_close(s.i) == 0 && tern_ctx_close(s.j) == 0 &&
		      tern_ctx_close(s.t) == 0,
	      "close");
	CHECK(tern_mem_free(TERN_MEM_SHARED, s.tb) == 0, "free");
	tern_mem_free(TERN_MEM_HOST, s.ib);
	free(s.jb);
	free(s.want);
	return 0;
}
