/* SPDX-License-Identifier: MIT */
/*
 * A region registered in chunks (tern/mr.h, docs/api.md "Regions larger
 * than one registration"), one process, ctx a and ctx b peers both ways,
 * with $TERN_MR_CHUNK set by the test's environment:
 *
 *   a source region on a and a target region on b of --size bytes, whose
 *   descriptors say chunks of --chunk bytes and hold --expect-chunks
 *   chunks' keys (distinct: that many registrations); the descriptor
 *   packed (version 2) and unpacked unchanged, a one-chunk region's as
 *   version 1;
 *   writes and reads crossing chunks at different places on each side,
 *   spanning most of the region, 16 bytes straddling a boundary, inside
 *   one chunk: every byte of both regions checked against what it must
 *   hold (the range, and nothing else touched);
 *   a write with immediate crossing chunks counted exactly once by the
 *   target, its bytes there when it is counted;
 *   batched writes and reads with pieces crossing chunks or not; with
 *   immediates a crossing piece refused (-TERN_ENOTSUP), non-crossing
 *   ones counted n times;
 *   a fetch-and-add on the last word of chunk 0 and the first of chunk 1
 *   (skipped where the provider has none);
 *   implicit writes crossing chunks, completed by tern_quiet();
 *   a message crossing a chunk refused (-TERN_EBOUNDS), one inside a
 *   chunk delivered.
 *
 * usage: mr_chunk --provider PROV [--node ADDR] [--size SIZE]
 *        [--chunk SIZE] [--expect-chunks N] [--expect-refused]
 *        [--fake-violations N]
 * --expect-refused: only register --size bytes on a, which must fail
 * -TERN_EPROV (a provider refusing a registration that long, no
 * TERN_MR_CHUNK). --fake-violations N: the fake efa provider (loaded from
 * $FI_PROVIDER_PATH) counted N broken rules at the end.
 * Exit 0 when every check held, 1 otherwise (it says which).
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

#include "check.h"
#include "pair.h"

#define FILL 0xee /* what a region holds where nothing was written */
#define RIGHT \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE)
#define WAIT_MS 30000

static const char *prov, *node;
static struct tern_ctx *a, *b;
static struct tern_peer *ab, *ba;
static uint64_t size = 32ULL << 20, chunk = 1ULL << 20;
static uint8_t *abuf, *bbuf, *want; /* a's region, b's region, expected */
static struct tern_mr *amr, *bmr;
static struct tern_mr_desc ad, bd;
static int atomics;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void progress_both(int n)
{
	for (int i = 0; i < n; i++) {
		tern_progress(a);
		tern_progress(b);
	}
}

static void wait_req(struct tern_req *req, const char *what)
{
	double end = now_ms() + WAIT_MS;

	while (!req->done && now_ms() < end)
		progress_both(100);
	CHECK(req->done, "%s: not completed in %d ms", what, WAIT_MS);
	CHECK(req->status == 0, "%s: %s %s", what, tern_strerror(req->status),
	      req->errmsg);
}

/* A pseudo-random pattern of test @seed (xorshift64). */
static void pattern(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 24);
	}
}

/* The first byte where @got and @exp differ, or -1. */
static long long first_diff(const uint8_t *got, const uint8_t *exp, size_t len)
{
	if (memcmp(got, exp, len) == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (got[i] != exp[i])
			return (long long)i;
	}
	return -1;
}

/* Every byte of region @got (size bytes) as @want says: the ranges
 * written, and FILL everywhere else. */
static void check_region(const uint8_t *got, const char *what)
{
	long long d = first_diff(got, want, size);
	long long last = d;

	if (d < 0)
		return;
	for (size_t i = (size_t)d; i < size; i++) {
		if (got[i] != want[i])
			last = (long long)i;
	}
	CHECK(0,
	      "%s: bytes differ from %lld (chunk %llu, +%llu) to %lld: got "
	      "0x%02x want 0x%02x",
	      what, d, (unsigned long long)d / chunk,
	      (unsigned long long)d % chunk, last, got[d], want[d]);
}

/* A write lands at its target after it completes at its initiator on
 * tcp: progress until @got holds what @want does, for a bounded time. */
static void settle(const uint8_t *got)
{
	double end = now_ms() + WAIT_MS;

	while (memcmp(got, want, size) != 0 && now_ms() < end)
		progress_both(1000);
}

/* A fresh test: @src's region gets pattern @seed, @dst's (and want)
 * FILL. */
static void prepare(uint8_t *src, uint8_t *dst, uint64_t seed)
{
	pattern(src, size, seed);
	memset(dst, FILL, size);
	memset(want, FILL, size);
}

/* One tern_write (a -> b) or tern_read (b -> a) of @len bytes, local
 * offset @loff, remote @roff, checked byte by byte. */
static void xfer(int write, uint64_t loff, uint64_t roff, uint64_t len,
		 uint64_t seed, const char *what)
{
	struct tern_req req;
	int ret;

	CHECK(loff + len <= size && roff + len <= size, "%s: out of range",
	      what);
	if (write)
		prepare(abuf, bbuf, seed);
	else
		prepare(bbuf, abuf, seed);
	tern_req_init(&req, NULL, NULL);
	ret = write ? tern_write(ab, amr, abuf + loff, len, &bd, roff, &req)
		    : tern_read(ab, amr, abuf + loff, len, &bd, roff, &req);
	CHECK(ret == 0, "%s: %s", what, tern_strerror(ret));
	wait_req(&req, what);
	CHECK(req.len == len, "%s: req.len %zu, want %llu", what, req.len,
	      (unsigned long long)len);
	if (write) {
		memcpy(want + roff, abuf + loff, len);
		settle(bbuf);
		check_region(bbuf, what);
	} else {
		memcpy(want + loff, bbuf + roff, len);
		check_region(abuf, what);
	}
}

struct xcase {
	uint64_t loff, roff, len;
	const char *what;
};

static void rma_cases(int write)
{
	const uint64_t C = chunk, S = size;
	const struct xcase cases[] = {
		{ C - 100, 2 * C - 3000, 3 * C + 777,
		  "crossing 4 chunks, boundaries apart" },
		{ 12345, C + 777, S - 2 * C, "spanning most of the region" },
		{ 3 * C - 8, 4 * C - 8, 16, "16 bytes straddling both" },
		{ 5 * C + 100, 4 * C - 8, 16,
		  "16 bytes straddling the remote boundary" },
		{ 4 * C - 8, 5 * C + 100, 16,
		  "16 bytes straddling the local boundary" },
		{ 5 * C + 1000, 5 * C + 2000, 4096, "inside chunk 5" },
		{ C, 2 * C, C, "all of chunk 1 to all of chunk 2" },
		{ 0, 0, S, "the whole region" },
		/* 0 bytes at a boundary and at the very end: one part of
		 * nothing, no chunk past the last. */
		{ 2 * C, 3 * C, 0, "0 bytes at a boundary" },
		{ S, S, 0, "0 bytes at the region's end" },
	};
	char what[160];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(what, sizeof(what),
			 "%s %s (loff %llu, roff %llu, len %llu)",
			 write ? "write" : "read", cases[i].what,
			 (unsigned long long)cases[i].loff,
			 (unsigned long long)cases[i].roff,
			 (unsigned long long)cases[i].len);
		xfer(write, cases[i].loff, cases[i].roff, cases[i].len,
		     (write ? 100 : 200) + i, what);
		printf("ok: %s\n", what);
	}
}

static uint64_t key_at(const struct tern_mr_desc *d, size_t i)
{
	if (d->flags & TERN_MR_DESC_KEY32)
		return (uint32_t)(d->keys[i / 2] >> (32 * (i & 1)));
	return d->keys[i];
}

static unsigned int log2u(uint64_t v)
{
	return 63 - (unsigned int)__builtin_clzll(v);
}

/* Step 1: the descriptor of a region in chunks. */
static void check_desc(const struct tern_mr_desc *d, const char *whose,
		       uint64_t expect_chunks, unsigned int rails)
{
	unsigned int shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);
	uint64_t nchunks, nkeys;

	CHECK(d->len == size, "%s: len %llu", whose,
	      (unsigned long long)d->len);
	CHECK(shift == log2u(chunk), "%s: chunk shift %u, want %u (flags 0x%x)",
	      whose, shift, log2u(chunk), d->flags);
	nchunks = (d->len + (1ULL << shift) - 1) >> shift;
	CHECK(expect_chunks == 0 || nchunks == expect_chunks,
	      "%s: %llu chunks, want %llu", whose, (unsigned long long)nchunks,
	      (unsigned long long)expect_chunks);
	CHECK(d->nkeys == rails, "%s: %u keys per chunk, %u rails", whose,
	      d->nkeys, rails);
	nkeys = nchunks * d->nkeys;
	CHECK(!!(d->flags & TERN_MR_DESC_KEY32) ==
		      (nkeys > TERN_MR_DESC_KEYS_MAX),
	      "%s: %llu keys, TERN_MR_DESC_KEY32 %s", whose,
	      (unsigned long long)nkeys,
	      (d->flags & TERN_MR_DESC_KEY32) ? "set" : "clear");
	/* Each chunk its own registration: per rail, keys all different. */
	for (size_t i = 0; i < nkeys; i++) {
		for (size_t j = i + d->nkeys; j < nkeys; j += d->nkeys)
			CHECK(key_at(d, i) != key_at(d, j),
			      "%s: chunks %zu and %zu have the same key "
			      "0x%llx",
			      whose, i / d->nkeys, j / d->nkeys,
			      (unsigned long long)key_at(d, i));
	}
}

/* Step 2: pack and unpack. */
static void check_pack(const struct tern_mr_desc *d)
{
	unsigned int shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);
	uint64_t nkeys = ((d->len + (1ULL << shift) - 1) >> shift) * d->nkeys;
	int k32 = (d->flags & TERN_MR_DESC_KEY32) != 0;
	size_t words = k32 ? (size_t)(nkeys + 1) / 2 : (size_t)nkeys;
	size_t need = 24 + (size_t)nkeys * (k32 ? 4 : 8);
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc u;
	ssize_t n, m;

	n = tern_mr_desc_pack(d, buf, sizeof(buf));
	CHECK(n == (ssize_t)need, "pack: %zd, want %zu", n, need);
	CHECK(buf[4] == 2, "packed version %u, want 2", buf[4]);
	m = tern_mr_desc_pack(d, buf, need - 1);
	CHECK(m == -ENOSPC, "pack into %zu bytes: %zd", need - 1, m);
	n = tern_mr_desc_pack(d, buf, sizeof(buf));
	memset(&u, 0, sizeof(u));
	m = tern_mr_desc_unpack(buf, (size_t)n, &u);
	CHECK(m == n, "unpack: %zd (%s), want %zd", m,
	      m < 0 ? tern_strerror((int)m) : "-", n);
	CHECK(u.base == d->base && u.len == d->len && u.flags == d->flags &&
		      u.nkeys == d->nkeys,
	      "unpacked base/len/flags/nkeys 0x%llx/%llu/0x%x/%u, packed "
	      "0x%llx/%llu/0x%x/%u",
	      (unsigned long long)u.base, (unsigned long long)u.len, u.flags,
	      u.nkeys, (unsigned long long)d->base, (unsigned long long)d->len,
	      d->flags, d->nkeys);
	for (size_t i = 0; i < words; i++)
		CHECK(u.keys[i] == d->keys[i],
		      "key word %zu: 0x%llx, packed 0x%llx", i,
		      (unsigned long long)u.keys[i],
		      (unsigned long long)d->keys[i]);
	m = tern_mr_desc_unpack(buf, (size_t)n - 1, &u);
	CHECK(m == -TERN_EDESC, "unpack of %zd bytes: %zd", n - 1, m);
	printf("ok: packed %zd bytes, version 2, %llu keys%s, unpacked the "
	       "same\n",
	       n, (unsigned long long)nkeys, k32 ? " of 32 bits" : "");
}

/* Step 2: a region of one chunk packs as version 1. */
static void check_small(void)
{
	uint8_t *p = aligned_alloc(4096, 65536);
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc d, u;
	struct tern_mr *mr = NULL;
	ssize_t n;
	int ret;

	CHECK(p != NULL, "aligned_alloc");
	ret = tern_mr_reg(a, p, 65536, RIGHT, &mr);
	CHECK(ret == 0, "register 64 KiB: %s", tern_strerror(ret));
	tern_mr_desc(mr, &d);
	CHECK(TERN_MR_DESC_CHUNK_SHIFT(d.flags) == 0 &&
		      !(d.flags & TERN_MR_DESC_KEY32),
	      "one chunk: flags 0x%x", d.flags);
	n = tern_mr_desc_pack(&d, buf, sizeof(buf));
	CHECK(n == (ssize_t)TERN_MR_DESC_PACKED_SIZE(d.nkeys),
	      "one chunk packed: %zd, want %zu", n,
	      TERN_MR_DESC_PACKED_SIZE(d.nkeys));
	CHECK(buf[4] == 1, "one chunk: version %u, want 1", buf[4]);
	CHECK(tern_mr_desc_unpack(buf, (size_t)n, &u) == n &&
		      u.flags == d.flags && u.len == d.len &&
		      memcmp(u.keys, d.keys, d.nkeys * sizeof(d.keys[0])) == 0,
	      "one chunk: unpacked differs");
	CHECK(tern_mr_close(mr) == 0, "close the small region");
	free(p);
	printf("ok: a one-chunk region packs as version 1, %zd bytes\n", n);
}

/* Step 5: a write with immediate crossing chunks, counted once. */
static void write_imm_cases(void)
{
	const uint64_t C = chunk;
	const struct xcase cases[] = {
		{ C / 2 + 3, 3 * C - 5, 3 * C + 11, "" },
		{ 7 * C - 1, 9 * C + 1, 2 * C + 2, "" },
		{ 11 * C + 4096, 10 * C - 4096, C, "" },
	};

	for (int i = 0; i < 3; i++) {
		const struct xcase *x = &cases[i];
		uint32_t imm = 0x5100 + (uint32_t)i;
		struct tern_req w, e;
		int ret;

		prepare(abuf, bbuf, 300 + i);
		CHECK(tern_imm_count(b, imm) == 0, "imm 0x%x counted before",
		      imm);
		tern_req_init(&e, NULL, NULL);
		ret = tern_imm_expect(b, imm, 1, &e);
		CHECK(ret == 0, "tern_imm_expect: %s", tern_strerror(ret));
		tern_req_init(&w, NULL, NULL);
		ret = tern_write_imm(ab, amr, abuf + x->loff, x->len, &bd,
				     x->roff, imm, &w);
		CHECK(ret == 0, "write_imm %d: %s", i, tern_strerror(ret));
		wait_req(&w, "write_imm");
		wait_req(&e, "the expectation of the write_imm");
		CHECK(e.len == 1, "expectation len %zu", e.len);
		/* Counted after its bytes landed: checked at once. */
		memcpy(want + x->roff, abuf + x->loff, x->len);
		check_region(bbuf, "write_imm, when counted");
		/* Counted once: no second arrival for it. */
		progress_both(20000);
		CHECK(tern_imm_count(b, imm) == 0,
		      "write_imm 0x%x (%llu bytes) counted %llu more times "
		      "after the expectation of 1",
		      imm, (unsigned long long)x->len,
		      (unsigned long long)tern_imm_count(b, imm));
		printf("ok: write_imm 0x%x of %llu bytes (loff %llu, roff "
		       "%llu) counted once, its bytes there\n",
		       imm, (unsigned long long)x->len,
		       (unsigned long long)x->loff,
		       (unsigned long long)x->roff);
	}
}

/* Step 6: pieces. */
static void pieces_cases(void)
{
	const uint64_t C = chunk;
	/* Remote ranges disjoint; pieces at most 1 MiB (efa-direct's
	 * largest RMA). */
	const struct tern_piece pcs[] = {
		{ .loff = C - 50, .roff = 3 * C - 70, .len = 300 },
		{ .loff = 2 * C + 10, .roff = 5 * C + 20, .len = 1000 },
		{ .loff = 4 * C - 100000, .roff = 7 * C - 5000, .len = 200000 },
		{ .loff = 6 * C + 5, .roff = 9 * C - 1, .len = 2 },
		{ .loff = 8 * C - 3, .roff = 10 * C + 100, .len = 64 },
		{ .loff = 10 * C + 12345, .roff = 12 * C + 777, .len = C },
		{ .loff = 14 * C, .roff = 15 * C, .len = 4096 },
	};
	const size_t n = sizeof(pcs) / sizeof(pcs[0]);
	uint64_t total = 0;
	struct tern_req req, e;
	int ret;

	for (size_t i = 0; i < n; i++)
		total += pcs[i].len;
	/* Written. */
	prepare(abuf, bbuf, 400);
	tern_req_init(&req, NULL, NULL);
	ret = tern_write_pieces(ab, amr, pcs, n, &bd, 1, 0, 0, &req);
	CHECK(ret == 0, "write_pieces: %s", tern_strerror(ret));
	wait_req(&req, "write_pieces");
	CHECK(req.len == total, "write_pieces: len %zu, want %llu", req.len,
	      (unsigned long long)total);
	for (size_t i = 0; i < n; i++)
		memcpy(want + pcs[i].roff, abuf + pcs[i].loff, pcs[i].len);
	settle(bbuf);
	check_region(bbuf, "write_pieces");
	printf("ok: write_pieces, %zu pieces, 5 crossing chunks\n", n);

	/* Read. */
	prepare(bbuf, abuf, 401);
	tern_req_init(&req, NULL, NULL);
	ret = tern_read_pieces(ab, amr, pcs, n, &bd, 1, &req);
	CHECK(ret == 0, "read_pieces: %s", tern_strerror(ret));
	wait_req(&req, "read_pieces");
	CHECK(req.len == total, "read_pieces: len %zu, want %llu", req.len,
	      (unsigned long long)total);
	for (size_t i = 0; i < n; i++)
		memcpy(want + pcs[i].loff, bbuf + pcs[i].roff, pcs[i].len);
	check_region(abuf, "read_pieces");
	printf("ok: read_pieces, %zu pieces, 5 crossing chunks\n", n);

	/* With immediates, a piece crossing a chunk (either side) is
	 * refused before anything is queued. */
	for (size_t i = 0; i < 5; i++) {
		if (i == 1)
			continue; /* piece 1 crosses nothing */
		tern_req_init(&req, NULL, NULL);
		ret = tern_write_pieces(ab, amr, &pcs[i], 1, &bd, 1,
					TERN_PIECES_IMM, 0x5200, &req);
		CHECK(ret == -TERN_ENOTSUP,
		      "write_pieces with imm, piece %zu crossing: %s", i,
		      tern_strerror(ret));
		CHECK(!req.done, "a refused post completed");
	}
	tern_req_init(&req, NULL, NULL);
	ret = tern_write_pieces(ab, amr, pcs, n, &bd, 1, TERN_PIECES_IMM,
				0x5200, &req);
	CHECK(ret == -TERN_ENOTSUP, "write_pieces with imm, all: %s",
	      tern_strerror(ret));
	printf("ok: write_pieces with immediates, a piece crossing a chunk "
	       "refused (-TERN_ENOTSUP)\n");

	/* With immediates, none crossing: counted n times. */
	{
		const struct tern_piece ok[] = {
			{ .loff = 2 * C + 10, .roff = 5 * C + 20, .len = 1000 },
			{ .loff = 14 * C, .roff = 15 * C, .len = 4096 },
			{ .loff = 3 * C + 5,
			  .roff = 16 * C + C / 2,
			  .len = C / 2 },
		};
		const uint32_t imm = 0x5201;

		prepare(abuf, bbuf, 402);
		tern_req_init(&e, NULL, NULL);
		ret = tern_imm_expect(b, imm, 3, &e);
		CHECK(ret == 0, "tern_imm_expect: %s", tern_strerror(ret));
		tern_req_init(&req, NULL, NULL);
		ret = tern_write_pieces(ab, amr, ok, 3, &bd, 1, TERN_PIECES_IMM,
					imm, &req);
		CHECK(ret == 0, "write_pieces with imm: %s",
		      tern_strerror(ret));
		wait_req(&req, "write_pieces with imm");
		wait_req(&e, "the expectation of write_pieces with imm");
		for (size_t i = 0; i < 3; i++)
			memcpy(want + ok[i].roff, abuf + ok[i].loff, ok[i].len);
		check_region(bbuf, "write_pieces with imm, when counted");
		progress_both(20000);
		CHECK(tern_imm_count(b, imm) == 0,
		      "write_pieces with imm counted %llu more times",
		      (unsigned long long)tern_imm_count(b, imm));
		printf("ok: write_pieces with immediates, 3 pieces inside "
		       "chunks, counted 3 times\n");
	}
}

/* Step 7: fetch-and-add either side of the first boundary. */
static void atomic_cases(void)
{
	const uint64_t offs[2] = { chunk - 8, chunk };
	struct tern_req req;
	uint64_t v;
	int ret;

	if (!atomics) {
		printf("ok: atomics skipped: %s offers no 64-bit "
		       "fetch-and-add\n",
		       prov);
		return;
	}
	prepare(abuf, bbuf, 500);
	for (int i = 0; i < 2; i++) {
		v = 1000 * (uint64_t)(i + 1);
		memcpy(bbuf + offs[i], &v, 8);
		memcpy(want + offs[i], &v, 8);
	}
	for (int i = 0; i < 2; i++) {
		tern_req_init(&req, NULL, NULL);
		ret = tern_atomic_fetch_add(ab, &bd, offs[i], 5 + i, &req);
		if (ret == -TERN_ENOTSUP) {
			printf("ok: atomics skipped: %s (-TERN_ENOTSUP)\n",
			       prov);
			return;
		}
		CHECK(ret == 0, "fetch_add at %llu: %s",
		      (unsigned long long)offs[i], tern_strerror(ret));
		wait_req(&req, "fetch_add");
		CHECK(req.value == 1000 * (uint64_t)(i + 1),
		      "fetch_add at %llu: old value %llu, want %llu",
		      (unsigned long long)offs[i],
		      (unsigned long long)req.value,
		      (unsigned long long)(1000 * (i + 1)));
		v = 1000 * (uint64_t)(i + 1) + 5 + (uint64_t)i;
		memcpy(want + offs[i], &v, 8);
	}
	settle(bbuf);
	check_region(bbuf, "fetch_add");
	printf("ok: fetch_add on the last word of chunk 0 and the first of "
	       "chunk 1\n");
}

/* Step 8: implicit writes, completed by a quiet. */
static void nbi_cases(void)
{
	const uint64_t C = chunk;
	const struct xcase cases[] = {
		{ C - 100, 2 * C - 3000, 3 * C + 777, "" },
		{ 6 * C - 7, 8 * C + 9, 16, "" },
		{ 9 * C + 3, 10 * C - 1, 5 * C, "" },
		{ 16 * C + 100, 16 * C + 200, 4096, "" },
	};
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct tern_req q;
	int ret;

	prepare(abuf, bbuf, 600);
	for (size_t i = 0; i < n; i++) {
		ret = tern_write_nbi(ab, amr, abuf + cases[i].loff,
				     cases[i].len, &bd, cases[i].roff);
		CHECK(ret == 0, "write_nbi %zu: %s", i, tern_strerror(ret));
		memcpy(want + cases[i].roff, abuf + cases[i].loff,
		       cases[i].len);
	}
	tern_req_init(&q, NULL, NULL);
	ret = tern_quiet(a, ab, &q);
	CHECK(ret == 0, "tern_quiet: %s", tern_strerror(ret));
	wait_req(&q, "tern_quiet");
	CHECK(q.len == n && q.value == 0,
	      "quiet: %zu operations, %llu failed (%s)", q.len,
	      (unsigned long long)q.value, q.errmsg);
	/* Delivery complete: the bytes are there once it completed. */
	check_region(bbuf, "write_nbi, after the quiet");
	printf("ok: %zu write_nbi crossing chunks, tern_quiet\n", n);
}

/* Step 10: a descriptor whose chunk fields lie (a caller's or a peer's
 * bytes written into the struct) is refused before anything reads its
 * keys or posts: more keys than it holds, a chunk size out of range, one
 * chunk, 32-bit keys without chunks. Under ASan a read past keys[]
 * would fail this test. */
static void lying_desc_cases(void)
{
	struct tern_mr_desc bad[5];
	struct tern_piece pc = { .loff = 0, .roff = 0, .len = 64 };
	struct tern_req req;
	int ret;

	for (int i = 0; i < 5; i++)
		bad[i] = bd;
	/* 2^12-byte chunks over the whole region: far more than 64 keys. */
	bad[0].flags = (bd.flags & ~TERN_MR_DESC_CHUNK_MASK) | (12U << 8) |
		       TERN_MR_DESC_KEY32;
	bad[1].flags = (bd.flags & ~TERN_MR_DESC_CHUNK_MASK) | (11U << 8);
	bad[2].flags = (bd.flags & ~TERN_MR_DESC_CHUNK_MASK) | (63U << 8);
	bad[3].flags = (bd.flags & ~TERN_MR_DESC_CHUNK_MASK) | (62U << 8);
	bad[4].flags = (bd.flags & ~(TERN_MR_DESC_CHUNK_MASK)) |
		       TERN_MR_DESC_KEY32;
	for (int i = 0; i < 5; i++) {
		tern_req_init(&req, NULL, NULL);
		ret = tern_write(ab, amr, abuf, 64, &bad[i], size - 64, &req);
		CHECK(ret == -TERN_EDESC, "lying descriptor %d, write: %s", i,
		      tern_strerror(ret));
		ret = tern_read(ab, amr, abuf, 64, &bad[i], size - 64, &req);
		CHECK(ret == -TERN_EDESC, "lying descriptor %d, read: %s", i,
		      tern_strerror(ret));
		ret = tern_write_nbi(ab, amr, abuf, 64, &bad[i], 0);
		CHECK(ret == -TERN_EDESC, "lying descriptor %d, write_nbi: %s",
		      i, tern_strerror(ret));
		ret = tern_write_pieces(ab, amr, &pc, 1, &bad[i], 1, 0, 0,
					&req);
		CHECK(ret == -TERN_EDESC, "lying descriptor %d, pieces: %s", i,
		      tern_strerror(ret));
		if (atomics) {
			ret = tern_atomic_fetch_add(ab, &bad[i], size - 8, 1,
						    &req);
			CHECK(ret == -TERN_EDESC,
			      "lying descriptor %d, fetch_add: %s", i,
			      tern_strerror(ret));
		}
		CHECK(!req.done, "a refused operation completed");
	}
	printf("ok: 5 descriptors with lying chunk fields refused "
	       "(-TERN_EDESC) by write, read, write_nbi, pieces%s\n",
	       atomics ? ", fetch_add" : "");
}

/* Step 9: a message is one registration's. */
static void msg_cases(void)
{
	struct tern_req s, r;
	int ret;

	tern_req_init(&s, NULL, NULL);
	ret = tern_send(ab, amr, abuf + chunk - 10, 20, &s);
	CHECK(ret == -TERN_EBOUNDS, "send crossing a chunk: %s",
	      tern_strerror(ret));
	CHECK(!s.done, "a refused send completed");
	tern_req_init(&r, NULL, NULL);
	ret = tern_recv(b, bmr, bbuf + 3 * chunk - 1, 64, &r);
	CHECK(ret == -TERN_EBOUNDS, "recv crossing a chunk: %s",
	      tern_strerror(ret));
	/* Inside one chunk (not the first): delivered. */
	prepare(abuf, bbuf, 700);
	ret = tern_recv(b, bmr, bbuf + 3 * chunk + 64, 64, &r);
	CHECK(ret == 0, "recv inside chunk 3: %s", tern_strerror(ret));
	ret = tern_send(ab, amr, abuf + 2 * chunk - 20, 20, &s);
	CHECK(ret == 0, "send at the end of chunk 1: %s", tern_strerror(ret));
	wait_req(&s, "send");
	wait_req(&r, "recv");
	CHECK(r.len == 20, "received %zu bytes", r.len);
	memcpy(want + 3 * chunk + 64, abuf + 2 * chunk - 20, 20);
	check_region(bbuf, "message inside a chunk");
	printf("ok: a message crossing a chunk refused (-TERN_EBOUNDS), one "
	       "inside a chunk delivered\n");
}

/* What the fake efa provider counted (tests/fakeefa/README.md), or -1
 * when it is not loaded. */
static int fake_violations(void)
{
	const char *dir = getenv("FI_PROVIDER_PATH");
	int (*fn)(void);
	char path[4096];
	void *h;
	int n;

	if (dir == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/libefa-fi.so", dir);
	h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL)
		return -1;
	*(void **)&fn = dlsym(h, "fakeefa_violations");
	n = fn != NULL ? fn() : -1;
	dlclose(h);
	return n;
}

static void *region(void)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, size) == 0, "posix_memalign(%llu)",
	      (unsigned long long)size);
	memset(p, FILL, size);
	return p;
}

/* Without TERN_MR_CHUNK, the whole region in one registration is
 * refused (-TERN_EPROV). */
static void refused_case(void)
{
	int ret = tern_mr_reg(a, abuf, size, RIGHT, &amr);

	CHECK(ret == -TERN_EPROV,
	      "registering %llu bytes without chunks: %s, want "
	      "-TERN_EPROV",
	      (unsigned long long)size, tern_strerror(ret));
	printf("ok: %llu bytes in one registration refused "
	       "(-TERN_EPROV)\n",
	       (unsigned long long)size);
}

/* Step 1: the regions and their descriptors (@expect_chunks each). */
static void reg_regions(const struct tern_ctx_info *info,
			uint64_t expect_chunks)
{
	uint64_t access = RIGHT;
	int ret;

	CHECK(size >= 18 * chunk, "--size: 18 chunks at least (%llu bytes)",
	      (unsigned long long)(18 * chunk));
	bbuf = region();
	want = region();
	atomics = info->atomic_fadd;
	if (atomics)
		access |= TERN_ACCESS_REMOTE_ATOMIC;
	ret = tern_mr_reg(a, abuf, size, access, &amr);
	CHECK(ret == 0, "register %llu bytes on a: %s",
	      (unsigned long long)size, tern_strerror(ret));
	ret = tern_mr_reg(b, bbuf, size, access, &bmr);
	CHECK(ret == 0, "register %llu bytes on b: %s",
	      (unsigned long long)size, tern_strerror(ret));
	tern_mr_desc(amr, &ad);
	tern_mr_desc(bmr, &bd);
	check_desc(&ad, "a's region", expect_chunks, info->rails);
	check_desc(&bd, "b's region", expect_chunks, info->rails);
	printf("ok: %llu bytes registered in %llu chunks of %llu bytes, %u "
	       "rail(s), flags 0x%x\n",
	       (unsigned long long)size,
	       (unsigned long long)((size + chunk - 1) / chunk),
	       (unsigned long long)chunk, info->rails, bd.flags);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "expect-chunks", required_argument, NULL, 'e' },
		{ "expect-refused", no_argument, NULL, 'r' },
		{ "fake-violations", required_argument, NULL, 'v' },
		{ 0 },
	};
	uint64_t expect_chunks = 0;
	int refused = 0, violations = -1, c;
	struct tern_ctx_info info;
	char *end;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			node = optarg;
		else if (c == 's')
			CHECK(tern_parse_size(optarg, &size) == 0 &&
				      size >= 4096,
			      "--size %s", optarg);
		else if (c == 'c')
			CHECK(tern_parse_size(optarg, &chunk) == 0 &&
				      chunk >= 4096 &&
				      (chunk & (chunk - 1)) == 0,
			      "--chunk %s: a power of two, 4K at least",
			      optarg);
		else if (c == 'e')
			expect_chunks = strtoull(optarg, &end, 10);
		else if (c == 'r')
			refused = 1;
		else if (c == 'v')
			violations = atoi(optarg);
		else
			return 2;
	}
	CHECK(prov != NULL,
	      "usage: mr_chunk --provider PROV [--node ADDR] [--size SIZE] "
	      "[--chunk SIZE] [--expect-chunks N] [--expect-refused] "
	      "[--fake-violations N]");
	a = pair_open(prov, node);
	b = pair_open(prov, node);
	ab = pair_peer(a, b);
	ba = pair_peer(b, a); /* b knows a: the same host, efa-direct's RMA */
	(void)ba;
	CHECK(tern_ctx_query(a, &info) == 0, "tern_ctx_query");
	abuf = region();

	if (refused) {
		refused_case();
		goto out;
	}
	reg_regions(&info, expect_chunks);
	/* Step 2. */
	check_pack(&bd);
	check_small();
	/* Steps 3 and 4. */
	rma_cases(1);
	rma_cases(0);
	/* Steps 5-9. */
	write_imm_cases();
	pieces_cases();
	atomic_cases();
	nbi_cases();
	msg_cases();
	lying_desc_cases();
	CHECK(tern_mr_close(amr) == 0, "close a's region");
	CHECK(tern_mr_close(bmr) == 0, "close b's region");
out:
	if (violations >= 0) {
		int n = fake_violations();

		CHECK(n == violations,
		      "the fake efa counted %d broken rules, "
		      "want %d",
		      n, violations);
		printf("ok: the fake efa counted %d broken rule(s)\n", n);
	}
	printf("mr_chunk %s (%s, %s): ok\n", prov, info.fabric,
	       tern_peer_path(ab) == TERN_PATH_LOCAL ? "same-host path"
						     : "provider");
	tern_ctx_close(a);
	tern_ctx_close(b);
	free(abuf);
	free(bbuf);
	free(want);
	return 0;
}
