/* SPDX-License-Identifier: MIT */
/*
 * Cross-memory attach in runs (docs/local.md, "Many small copies, one
 * system call"): two ctxs of one process, the target's region plain
 * anonymous memory (not mapped by its peer: process_vm_writev/readv),
 * over a real provider. The writer's count of those system calls
 * (tern__local.cma_calls) says how the operations went out:
 *   batch  64 writes of mixed sizes queued before a pass go out in one
 *          call, and 64 reads in one; 1500 writes in two (IOV_MAX a
 *          call); a change of direction ends a run, and a read after a
 *          write of the same bytes sees them; writes with immediate in a
 *          run count at the target; a batch of pieces (writes, with
 *          immediates, and reads) is one call. Every byte checked.
 *   fault  one page of the target's region is made unreachable
 *          (PROT_NONE, still registered): in a run of 8 writes, the one
 *          into that page fails -EFAULT and the 7 others complete 0
 *          with their bytes (and their immediates), in two calls; the
 *          same for reads, for a write that runs into the page half
 *          way, for the first and the last of a run; a batch of pieces
 *          fails -EFAULT with the pieces before the bad one landed and
 *          none after it.
 * usage: local_cma --provider P [--node ADDR] CASE. Exit 0 pass, 1 fail,
 * 77 skip (cross-memory attach refused here).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_fixture.h"

#include "../../src/engine/local_int.h"

#define REGION (4u << 20)
#define PG     4096u

/* The pair: @w writes into @t's region @tb (plain memory, cross-memory
 * attach) from its own @wb. */
struct pair {
	struct tern_ctx *t, *w;
	struct tern_mr *tmr, *wmr;
	struct tern_peer *wt;
	struct tern_mr_desc d;
	uint8_t *tb, *wb, *want;
};

static uint64_t calls(const struct pair *p)
{
	return p->w->local->cma_calls;
}

static void pair_open(struct pair *p)
{
	void *m = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	p->tb = m;
	CHECK(tern_mem_alloc(TERN_MEM_HOST, 0, REGION, (void **)&p->wb) == 0 &&
		      (p->want = malloc(REGION)) != NULL,
	      "alloc");
	p->t = open_ctx();
	p->w = open_ctx();
	memset(p->tb, 0xee, REGION);
	memcpy(p->want, p->tb, REGION);
	fill(p->wb, REGION, 1);
	CHECK(tern_mr_reg(p->t, p->tb, REGION, RW, &p->tmr) == 0, "reg t");
	CHECK(tern_mr_reg(p->w, p->wb, REGION, RW, &p->wmr) == 0, "reg w");
	tern_mr_desc(p->tmr, &p->d);
	p->wt = add(p->w, p->t);
	add(p->t, p->w);
	CHECK(tern_peer_path(p->wt) == TERN_PATH_LOCAL,
	      "a ctx of this process is not given the same-host path");
}

static void pair_close(struct pair *p)
{
	tern_ctx_close(p->w);
	tern_ctx_close(p->t);
	munmap(p->tb, REGION);
	tern_mem_free(TERN_MEM_HOST, p->wb);
	free(p->want);
}

/* Progress both ctxs until each of @n requests is done. */
static void pump(const struct pair *p, struct tern_req *r, unsigned int n)
{
	for (int i = 0; i < 2000000; i++) {
		unsigned int k = 0;

		while (k < n && r[k].done)
			k++;
		if (k == n)
			return;
		tern_progress(p->w);
		tern_progress(p->t);
	}
	CHECK(0, "requests never completed");
}

/* Post a write (imm != 0: with that immediate) or a read of @len bytes
 * between @p->wb + @loff and the target's region at @roff. */
static void post(struct pair *p, int write, uint32_t imm, size_t loff,
		 size_t roff, size_t len, struct tern_req *r)
{
	int ret;

	tern_req_init(r, NULL, NULL);
	if (!write)
		ret = tern_read(p->wt, p->wmr, p->wb + loff, len, &p->d, roff,
				r);
	else if (imm != 0)
		ret = tern_write_imm(p->wt, p->wmr, p->wb + loff, len, &p->d,
				     roff, imm, r);
	else
		ret = tern_write(p->wt, p->wmr, p->wb + loff, len, &p->d, roff,
				 r);
	CHECK(ret == 0, "post %s of %zu at %zu: %s", write ? "write" : "read",
	      len, roff, tern_strerror(ret));
	CHECK(!r->done, "completed inside the post");
	if (write)
		memcpy(p->want + roff, p->wb + loff, len);
}

/* Let the target read its rings: what the writer pushed is counted. */
static void settle(const struct pair *p)
{
	for (int i = 0; i < 200; i++) {
		tern_progress(p->t);
		tern_progress(p->w);
	}
}

enum { BATCH_N = 64, BATCH_MANY = 1500 };

static const size_t batch_sizes[] = { 8, 4096, 1, 777 };

/* 64 writes of mixed sizes at scattered offsets, queued before a
 * pass: one call. */
static void batch_writes(struct pair *p, struct tern_req *r)
{
	uint64_t c0 = calls(p), copies0 = p->w->local->copies;

	for (unsigned int k = 0; k < BATCH_N; k++)
		post(p, 1, 0, k * 8192 + 3, k * 8192 + k % 7,
		     batch_sizes[k % 4] + k, &r[k]);
	pump(p, r, BATCH_N);
	for (unsigned int k = 0; k < BATCH_N; k++)
		CHECK(r[k].status == 0, "write %u: %s", k,
		      tern_strerror(r[k].status));
	CHECK(memcmp(p->tb, p->want, REGION) == 0, "writes: bytes differ");
	CHECK(p->w->local->copies - copies0 == BATCH_N,
	      "%llu operations counted on the same-host path (want %d)",
	      (unsigned long long)(p->w->local->copies - copies0), BATCH_N);
	CHECK(calls(p) - c0 == 1, "%d writes took %llu system calls (want 1)",
	      BATCH_N, (unsigned long long)(calls(p) - c0));
	printf("batch: %d writes of 8 B to 4 KiB, one process_vm_writev\n",
	       BATCH_N);
}

/* 64 reads of what they wrote, into the upper half: one call. */
static void batch_reads(struct pair *p, struct tern_req *r)
{
	uint64_t c0 = calls(p);

	memset(p->wb + REGION / 2, 0, REGION / 2);
	for (unsigned int k = 0; k < BATCH_N; k++)
		post(p, 0, 0, REGION / 2 + k * 8192 + 5, k * 8192 + k % 7,
		     batch_sizes[k % 4] + k, &r[k]);
	pump(p, r, BATCH_N);
	for (unsigned int k = 0; k < BATCH_N; k++) {
		CHECK(r[k].status == 0, "read %u: %s", k,
		      tern_strerror(r[k].status));
		CHECK(memcmp(p->wb + REGION / 2 + k * 8192 + 5,
			     p->want + k * 8192 + k % 7,
			     batch_sizes[k % 4] + k) == 0,
		      "read %u: bytes differ", k);
	}
	CHECK(calls(p) - c0 == 1, "%d reads took %llu system calls (want 1)",
	      BATCH_N, (unsigned long long)(calls(p) - c0));
	printf("batch: %d reads, one process_vm_readv\n", BATCH_N);
}

/* More than IOV_MAX: a call per IOV_MAX. */
static void batch_many(struct pair *p, struct tern_req *r)
{
	uint64_t c0 = calls(p);

	fill(p->wb, REGION / 2, 2);
	for (unsigned int k = 0; k < BATCH_MANY; k++)
		post(p, 1, 0, k * 8, REGION / 2 + k * 16, 8, &r[k]);
	pump(p, r, BATCH_MANY);
	for (unsigned int k = 0; k < BATCH_MANY; k++)
		CHECK(r[k].status == 0, "write %u of %d: %s", k, BATCH_MANY,
		      tern_strerror(r[k].status));
	CHECK(memcmp(p->tb, p->want, REGION) == 0, "%d writes: bytes differ",
	      BATCH_MANY);
	CHECK(calls(p) - c0 == (BATCH_MANY + LCMA_IOV - 1) / LCMA_IOV,
	      "%d writes took %llu system calls (want %d: %d a call)",
	      BATCH_MANY, (unsigned long long)(calls(p) - c0),
	      (BATCH_MANY + LCMA_IOV - 1) / LCMA_IOV, LCMA_IOV);
	printf("batch: %d writes in %d calls (IOV_MAX %d)\n", BATCH_MANY,
	       (BATCH_MANY + LCMA_IOV - 1) / LCMA_IOV, LCMA_IOV);
}

/* Direction changes end a run, and runs keep queue order: W W W,
 * R R (of what the writes wrote), W W: three calls. */
static void batch_mixed(struct pair *p, struct tern_req *r)
{
	uint64_t c0 = calls(p);

	fill(p->wb, 4 * PG, 3);
	post(p, 1, 0, 0, 0, 100, &r[0]);
	post(p, 1, 0, 100, 1000, 100, &r[1]);
	post(p, 1, 0, 200, 2000, 100, &r[2]);
	memset(p->wb + 2 * PG, 0, 2 * PG);
	post(p, 0, 0, 2 * PG, 0, 100, &r[3]);
	post(p, 0, 0, 2 * PG + 100, 2000, 100, &r[4]);
	post(p, 1, 0, 300, 3000, 100, &r[5]);
	post(p, 1, 0, 400, 0, 100, &r[6]); /* after the read of it */
	pump(p, r, 7);
	for (unsigned int k = 0; k < 7; k++)
		CHECK(r[k].status == 0, "mixed %u: %s", k,
		      tern_strerror(r[k].status));
	CHECK(memcmp(p->wb + 2 * PG, p->wb, 100) == 0 &&
		      memcmp(p->wb + 2 * PG + 100, p->wb + 200, 100) == 0,
	      "a read after a write in the queue did not see its bytes");
	CHECK(memcmp(p->tb, p->want, REGION) == 0, "mixed: bytes differ");
	CHECK(calls(p) - c0 == 3,
	      "W W W R R W W took %llu system calls (want 3)",
	      (unsigned long long)(calls(p) - c0));
	printf("batch: a change of direction ends a run, queue order kept\n");
}

/* Writes with immediate inside a run: each counts, one call. */
static void batch_imm(struct pair *p, struct tern_req *r)
{
	uint64_t c0 = calls(p);

	fill(p->wb, BATCH_N * PG, 4);
	for (unsigned int k = 0; k < BATCH_N; k++)
		post(p, 1, k % 2 ? 55 : 0, k * PG, k * PG + 11, 64 + k, &r[k]);
	pump(p, r, BATCH_N);
	for (unsigned int k = 0; k < BATCH_N; k++)
		CHECK(r[k].status == 0, "write (imm) %u: %s", k,
		      tern_strerror(r[k].status));
	settle(p);
	CHECK(tern_imm_count(p->t, 55) == BATCH_N / 2,
	      "%llu immediates counted (want %d)",
	      (unsigned long long)tern_imm_count(p->t, 55), BATCH_N / 2);
	CHECK(memcmp(p->tb, p->want, REGION) == 0, "imm: bytes differ");
	CHECK(calls(p) - c0 == 1,
	      "%d writes, half with immediate, took %llu calls (want 1)",
	      BATCH_N, (unsigned long long)(calls(p) - c0));
	printf("batch: writes with immediate in a run, counted, one call\n");
}

/* A batch of pieces, with immediates: one call; read back: one. */
static void batch_pieces(struct pair *p, struct tern_req *r)
{
	struct tern_piece pcs[16];
	uint64_t c0;

	fill(p->wb, 16 * PG, 5);
	for (unsigned int k = 0; k < 16; k++) {
		pcs[k] = (struct tern_piece){ .loff = k * PG,
					      .roff = (15 - k) * PG * 2 + 9,
					      .len = 100 + k * 200 };
		memcpy(p->want + pcs[k].roff, p->wb + pcs[k].loff, pcs[k].len);
	}
	c0 = calls(p);
	tern_req_init(&r[0], NULL, NULL);
	CHECK(tern_write_pieces(p->wt, p->wmr, pcs, 16, &p->d, 1,
				TERN_PIECES_IMM, 56, &r[0]) == 0,
	      "write pieces");
	pump(p, r, 1);
	CHECK(r[0].status == 0, "pieces: %s", tern_strerror(r[0].status));
	settle(p);
	CHECK(tern_imm_count(p->t, 56) == 16, "pieces: %llu immediates",
	      (unsigned long long)tern_imm_count(p->t, 56));
	CHECK(memcmp(p->tb, p->want, REGION) == 0, "pieces: bytes differ");
	for (unsigned int k = 0; k < 16; k++)
		pcs[k].loff += 32 * PG;
	tern_req_init(&r[0], NULL, NULL);
	CHECK(tern_read_pieces(p->wt, p->wmr, pcs, 16, &p->d, 1, &r[0]) == 0,
	      "read pieces");
	pump(p, r, 1);
	CHECK(r[0].status == 0, "read pieces: %s", tern_strerror(r[0].status));
	for (unsigned int k = 0; k < 16; k++)
		CHECK(memcmp(p->wb + pcs[k].loff, p->want + pcs[k].roff,
			     pcs[k].len) == 0,
		      "read piece %u: bytes differ", k);
	CHECK(calls(p) - c0 == 2,
	      "a batch of 16 pieces written and one read took %llu calls "
	      "(want 2)",
	      (unsigned long long)(calls(p) - c0));
	printf("batch: 16 pieces in one call each way\n");
}

static int case_batch(void)
{
	struct tern_req *r = calloc(BATCH_MANY, sizeof(*r));
	struct pair p;

	CHECK(r != NULL, "alloc");
	pair_open(&p);
	batch_writes(&p, r);
	batch_reads(&p, r);
	batch_many(&p, r);
	batch_mixed(&p, r);
	batch_imm(&p, r);
	batch_pieces(&p, r);
	pair_close(&p);
	free(r);
	return 0;
}

/* 8 writes (or reads) of 256 B into pages 0-7 of the target's region,
 * but the @bad-th at @bad_off (in the page made unreachable, or running
 * into it): it fails -EFAULT, and the others complete 0 with their bytes
 * (and immediates), in @want_calls calls. */
static void run8(struct pair *p, int write, int imm, unsigned int bad,
		 size_t bad_off, unsigned int want_calls, const char *what)
{
	struct tern_req r[8];
	uint64_t c0 = calls(p), before[8];
	uint8_t *keep = malloc(REGION);

	CHECK(keep != NULL, "alloc");
	for (unsigned int k = 0; k < 8; k++)
		before[k] = tern_imm_count(p->t, 300 + k);
	fill(p->wb, 8 * PG, 10 + bad);
	memset(p->wb + 8 * PG, 0, 8 * PG);
	memcpy(keep, p->want, REGION);
	for (unsigned int k = 0; k < 8; k++) {
		size_t roff = k == bad ? bad_off : k * PG + 100;

		post(p, write, imm ? 300 + k : 0, (write ? 0 : 8 * PG) + k * PG,
		     roff, 256, &r[k]);
	}
	/* The bad one's bytes are not promised either way. */
	memcpy(p->want + bad_off, keep + bad_off, 256);
	free(keep);
	pump(p, r, 8);
	settle(p);
	for (unsigned int k = 0; k < 8; k++) {
		size_t roff = k == bad ? bad_off : k * PG + 100;

		if (k == bad) {
			CHECK(r[k].status == -EFAULT,
			      "%s: the bad one (%u) completed %s (want %s)",
			      what, k + 1, tern_strerror(r[k].status),
			      tern_strerror(-EFAULT));
			if (imm)
				CHECK(tern_imm_count(p->t, 300 + k) ==
					      before[k],
				      "%s: the bad one's immediate counted",
				      what);
			continue;
		}
		CHECK(r[k].status == 0, "%s: op %u of 8 failed: %s", what,
		      k + 1, tern_strerror(r[k].status));
		if (write)
			CHECK(memcmp(p->tb + roff, p->wb + k * PG, 256) == 0,
			      "%s: op %u's bytes differ", what, k + 1);
		else
			CHECK(memcmp(p->wb + 8 * PG + k * PG, p->tb + roff,
				     256) == 0,
			      "%s: op %u read wrong bytes", what, k + 1);
		if (imm)
			CHECK(tern_imm_count(p->t, 300 + k) == before[k] + 1,
			      "%s: op %u's immediate not counted", what, k + 1);
	}
	CHECK(calls(p) - c0 == want_calls, "%s: %llu system calls (want %u)",
	      what, (unsigned long long)(calls(p) - c0), want_calls);
	printf("fault: %s: op %u of 8 -EFAULT, the 7 others landed, %u "
	       "calls\n",
	       what, bad + 1, want_calls);
}

static int case_fault(void)
{
	const size_t bad = 32 * PG; /* the page made unreachable */
	struct tern_piece pcs[8];
	struct tern_req r;
	struct pair p;
	uint64_t c0;

	pair_open(&p);
	/* Still registered, now out of the kernel's reach. */
	CHECK(mprotect(p.tb + bad, PG, PROT_NONE) == 0, "mprotect: %s",
	      strerror(errno));
	run8(&p, 1, 0, 3, bad + 100, 2, "writes, the 4th into the page");
	run8(&p, 0, 0, 3, bad + 100, 2, "reads, the 4th from the page");
	run8(&p, 1, 1, 3, bad + 100, 2, "writes with immediate");
	run8(&p, 1, 0, 3, bad - 100, 2, "the 4th runs into the page");
	run8(&p, 1, 0, 0, bad + 100, 2, "the 1st into the page");
	run8(&p, 1, 0, 7, bad + 100, 1, "the 8th into the page");
	CHECK(memcmp(p.tb, p.want, bad - 100) == 0 &&
		      memcmp(p.tb + bad + PG, p.want + bad + PG,
			     REGION - bad - PG) == 0,
	      "bytes outside the bad page differ");

	/* Pieces: the 4th in the page fails the batch; the 3 before it
	 * landed, none after it. */
	fill(p.wb, 8 * PG, 20);
	for (unsigned int k = 0; k < 8; k++)
		pcs[k] = (struct tern_piece){
			.loff = k * PG,
			.roff = k == 3 ? bad + 8 : 64 * PG + k * PG,
			.len = 512,
		};
	c0 = calls(&p);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write_pieces(p.wt, p.wmr, pcs, 8, &p.d, 1, 0, 0, &r) == 0,
	      "write pieces");
	pump(&p, &r, 1);
	CHECK(r.status == -EFAULT, "pieces with a bad one: %s (want %s)",
	      tern_strerror(r.status), tern_strerror(-EFAULT));
	for (unsigned int k = 0; k < 8; k++) {
		if (k == 3)
			continue;
		if (k < 3)
			CHECK(memcmp(p.tb + pcs[k].roff, p.wb + pcs[k].loff,
				     512) == 0,
			      "piece %u before the bad one did not land", k);
		else
			CHECK(memcmp(p.tb + pcs[k].roff, p.want + pcs[k].roff,
				     512) == 0,
			      "piece %u after the bad one was written", k);
	}
	CHECK(calls(&p) - c0 == 1, "pieces: %llu calls (want 1)",
	      (unsigned long long)(calls(&p) - c0));
	printf("fault: pieces: the 4th -EFAULT, 3 landed before it, none "
	       "after\n");
	CHECK(mprotect(p.tb + bad, PG, PROT_READ | PROT_WRITE) == 0,
	      "mprotect back");
	pair_close(&p);
	return 0;
}

/* Cross-memory attach on ourselves: refused only by a filter (seccomp)
 * or a kernel without it. */
static int cma_works(void)
{
	uint64_t a = 1, b = 0;
	struct iovec li = { &b, sizeof(b) }, ri = { &a, sizeof(a) };

	return process_vm_readv(getpid(), &li, 1, &ri, 1, 0) ==
		       (ssize_t)sizeof(a) &&
	       b == 1;
}

int main(int argc, char **argv)
{
	const char *what = local_args(argc, argv, "local_cma");
	int ret = 1;

	if (!cma_works()) {
		printf("SKIP: cross-memory attach refused here (%s)\n",
		       strerror(errno));
		return 77;
	}
	if (strcmp(what, "batch") == 0)
		ret = case_batch();
	else if (strcmp(what, "fault") == 0)
		ret = case_fault();
	else
		CHECK(0, "unknown case %s", what);
	if (ret == 0)
		printf("PASS local_cma %s over %s\n", what, g_prov);
	return ret;
}
