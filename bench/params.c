/* SPDX-License-Identifier: MIT */
/*
 * tern bench, what both sides share: operation and memory names, the
 * HELLO parameters' codec, buffers' allocation, fill and sync.
 *
 * tern bench: the initiator keeps a window of operations in flight on the
 * library's normal data path (posts queue, progress posts them in FI_MORE
 * batches and reads completions in batches) and times every operation from
 * its post to its completion; the responder owns the target memory and, for
 * sends, keeps receives posted. Both meet through a HELLO (apps/).
 */
#define _GNU_SOURCE /* cpu_set_t, in bench/common.h */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/app.h"
#include "core/core.h"
#include "wire/wire.h"
#include "engine_int.h"
#include "common.h"

static const char *const op_names[] = {
	[BENCH_WRITE] = "write",   [BENCH_WRITEDATA] = "writedata",
	[BENCH_READ] = "read",	   [BENCH_SEND] = "send",
	[BENCH_ATOMIC] = "atomic", [BENCH_REGISTER] = "register",
};

const char *bench_op_name(int op)
{
	if (op < BENCH_WRITE || op > BENCH_REGISTER)
		return "?";
	return op_names[op];
}

int bench_op_parse(const char *s)
{
	for (int op = BENCH_WRITE; op <= BENCH_REGISTER; op++) {
		if (strcmp(s, op_names[op]) == 0)
			return op;
	}
	return -EINVAL;
}

const char *bench_model_name(int model)
{
	switch (model) {
	case BENCH_IMPLICIT:
		return "implicit";
	case BENCH_BATCH:
		return "batch";
	default:
		return "explicit";
	}
}

const char *bench_implicit_why(int op)
{
	switch (op) {
	case BENCH_WRITE:
	case BENCH_WRITEDATA:
	case BENCH_READ:
	case BENCH_ATOMIC:
		return NULL;
	case BENCH_SEND:
		return "--implicit: --op send has no implicit form (a send "
		       "meets a receive the peer posted: it takes a request); "
		       "write, writedata, read or atomic";
	case BENCH_REGISTER:
		return "--implicit: --op register times registrations and "
		       "single writes, each with a request; --implicit is for "
		       "write, writedata, read or atomic";
	default:
		return "--implicit: not an operation";
	}
}

const char *bench_batch_why(int op)
{
	switch (op) {
	case BENCH_WRITE:
	case BENCH_WRITEDATA:
	case BENCH_READ:
		return NULL;
	case BENCH_SEND:
		return "--batch: --op send has no batch form (each send meets "
		       "a receive the peer posted); write, writedata or read";
	case BENCH_ATOMIC:
		return "--batch: --op atomic has no batch form (pieces are "
		       "writes or reads); write, writedata or read";
	case BENCH_REGISTER:
		return "--batch: --op register times registrations and single "
		       "writes, each with a request; --batch is for write, "
		       "writedata or read";
	default:
		return "--batch: not an operation";
	}
}

int bench_mem_parse(const char *s, struct bench_mem *m)
{
	char *end;
	long dev;

	if (strcmp(s, "host") == 0) {
		*m = (struct bench_mem){ .kind = TERN_MEM_HOST };
		return 0;
	}
	/* Host memory a same-host peer maps (docs/local.md). */
	if (strcmp(s, "shared") == 0) {
		*m = (struct bench_mem){ .kind = TERN_MEM_HOST, .shared = 1 };
		return 0;
	}
	if (strcmp(s, "cuda") == 0) {
		*m = (struct bench_mem){ .kind = TERN_MEM_CUDA };
		return 0;
	}
	if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9')
		return -EINVAL;
	errno = 0;
	dev = strtol(s + 5, &end, 10);
	if (errno != 0 || *end != '\0' || dev > 1023)
		return -EINVAL;
	*m = (struct bench_mem){ .kind = TERN_MEM_CUDA, .device = (int)dev };
	return 0;
}

const char *bench_mem_name(const struct bench_mem *m, char *buf, size_t len)
{
	if (m != NULL && m->shared)
		snprintf(buf, len, "shared");
	else if (m == NULL || m->kind == TERN_MEM_HOST)
		snprintf(buf, len, "host");
	else
		snprintf(buf, len, "cuda:%d", m->device);
	return buf;
}

/* HELLO params of a bench: u32 op, u32 window, u64 max_size, u64 seed,
 * u32 verify, u32 0. BYE params: u64 messages sent. ACK of a BYE: u64
 * messages received, u64 of them wrong. */
void bench_params_encode(const struct bench_params *p, uint8_t *b)
{
	struct tern__wr w;

	tern__wr_init(&w, b, PARAMS_LEN);
	tern__wr_u32(&w, p->op);
	tern__wr_u32(&w, p->window);
	tern__wr_u64(&w, p->max_size);
	tern__wr_u64(&w, p->seed);
	tern__wr_u32(&w, p->verify);
	tern__wr_u32(&w, 0);
}

int bench_params_decode(const uint8_t *b, size_t len, struct bench_params *p,
			char *why, size_t whylen)
{
	struct tern__rd r;

	if (len != PARAMS_LEN) {
		snprintf(why, whylen, "bench parameters of %zu bytes", len);
		return -TERN_EPROTO;
	}
	tern__rd_init(&r, b, len);
	p->op = tern__rd_u32(&r);
	p->window = tern__rd_u32(&r);
	p->max_size = tern__rd_u64(&r);
	p->seed = tern__rd_u64(&r);
	p->verify = tern__rd_u32(&r);
	if (p->op < BENCH_WRITE || p->op > BENCH_ATOMIC || p->window == 0 ||
	    p->window > BENCH_MAX_WINDOW || p->max_size == 0 ||
	    p->max_size > BENCH_MAX_SIZE || p->verify > 1 ||
	    tern__rd_u32(&r) != 0) {
		snprintf(why, whylen,
			 "bench op %u, window %u, size %" PRIu64
			 " outside limits (window 1..%d, size 1..%llu)",
			 p->op, p->window, p->max_size, BENCH_MAX_WINDOW,
			 BENCH_MAX_SIZE);
		return -TERN_EREFUSED;
	}
	return 0;
}

/* Page-aligned: a 4 KiB transfer then touches one page, not two (the
 * kernel copies of shm and tcp pin and walk every page they touch; EFA
 * needs only 128-byte alignment). */
void *bench_alloc_aligned(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, 4096, len ? len : 1) == 0 ? p : NULL;
}

/*
 * Rounded up to 2 MiB, tern_mem_alloc() places host memory on 2 MiB
 * boundaries and advises huge pages (src/hmem/thp.c): a transfer then
 * walks 2 MiB pages, not 4 KiB ones, at every size. bench/raw places its
 * buffer the same way, so the comparison stays even; $TERN_THP=0 turns
 * both back to plain pages (the rounding alone changes nothing).
 */
int bench_mem_alloc(enum tern_mem_kind kind, int device, size_t len,
		    void **ptr_p)
{
	const size_t huge = (size_t)2 << 20;

	if (kind == TERN_MEM_HOST && len > 0 && len <= SIZE_MAX - huge)
		len = (len + huge - 1) & ~(huge - 1);
	return tern_mem_alloc(kind, device, len, ptr_p);
}

void bench_mt_fill(void *buf, size_t len, uint64_t seed)
{
	struct tern_mt64 rng;

	tern_mt64_seed(&rng, seed);
	tern_mt64_fill(&rng, buf, len);
}

/* Fill @len bytes at @buf, memory of @kind, with MT(@seed) (@pattern) or
 * zeros. GPU memory is never touched from the host: it is filled through
 * a bounce buffer with tern_mem_copy(). */
int bench_mem_fill(enum tern_mem_kind kind, void *buf, size_t len, int pattern,
		   uint64_t seed)
{
	const size_t chunk = 1 << 20; /* a multiple of 8: one MT stream */
	struct tern_mt64 rng;
	uint8_t *tmp;
	int ret = 0;

	if (kind == TERN_MEM_HOST) {
		if (pattern)
			bench_mt_fill(buf, len, seed);
		else
			memset(buf, 0, len);
		return 0;
	}
	tmp = bench_alloc_aligned(TERN_MIN(len, chunk));
	if (tmp == NULL)
		return -ENOMEM;
	memset(tmp, 0, TERN_MIN(len, chunk));
	tern_mt64_seed(&rng, seed);
	for (size_t off = 0; off < len && ret == 0; off += chunk) {
		size_t n = TERN_MIN(chunk, len - off);

		if (pattern)
			tern_mt64_fill(&rng, tmp, n);
		ret = tern_mem_copy((uint8_t *)buf + off, tmp, n);
	}
	free(tmp);
	return ret;
}

/* tern_mr_sync() of [0, @len) of @mr in direction @dir, waited for. */
int bench_mr_sync_wait(struct tern_ctx *ctx, struct tern_mr *mr, uint64_t len,
		       unsigned int dir)
{
	struct tern_req req;
	int ret;

	tern_req_init(&req, NULL, NULL);
	ret = tern_mr_sync(mr, 0, len, dir, &req);
	if (ret != 0)
		return ret;
	ret = tern_wait(ctx, &req, CTRL_TIMEOUT_MS);
	if (ret != 0 && !req.done && tern_req_cancel(ctx, &req) >= 0)
		tern_wait(ctx, &req, 2000);
	return ret != 0 ? ret : req.status;
}

/* --- responder -------------------------------------------------------------
 */
