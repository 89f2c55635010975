/* SPDX-License-Identifier: MIT */
/*
 * What the two sides of `tern bench` share (bench/params.c): the HELLO
 * parameters and their codec, and the buffers' allocation, fill and sync.
 * Private to bench/params.c, responder.c, initiator.c and register.c.
 */
#ifndef BENCH_ENGINE_INT_H
#define BENCH_ENGINE_INT_H

#include <stddef.h>
#include <stdint.h>

#include <tern/tern.h>

#include "engine.h"

#define BENCH_IMM	0x62656e63u /* "benc": data writes with immediate */
#define BENCH_BYE_IMM	0x62796521u /* marks the BYE among data messages */
#define RECV_MEM_MAX	(256ULL << 20)
#define CTRL_TIMEOUT_MS 10000

struct bench_params {
	uint32_t op;
	uint32_t window;
	uint64_t max_size;
	uint64_t seed;
	uint32_t verify;
};

#define PARAMS_LEN 32

/*
 * The ACK of a bench HELLO carries the target region's memory: u32 kind
 * (enum tern_mem_kind), u32 CUDA device, u32 path (enum tern_mr_path),
 * u32 0; none from a responder older than GPU memory: host.
 *
 * With a CUDA region, writes land in its host shadow when staged: the
 * initiator checks them with a CHECK, a bench HELLO amid the session whose
 * params are u64 length, u64 0. The responder syncs [0, length) in
 * (tern_mr_sync(SYNC_IN)), compares the GPU's bytes with the pattern and
 * answers an ACK of u32 1 (equal) or 0, u32 errno (0, or why it could not
 * check).
 */
#define MEMINFO_LEN 16
#define CHECK_LEN   16
#define CHECKED_LEN 8

/* What --op atomic meets on a staged region (tern_mr_regattr()). */
#define ATOMIC_CUDA_WHY                                                    \
	"--op atomic needs host memory on the target, or a provider with " \
	"FI_HMEM"

void bench_params_encode(const struct bench_params *p, uint8_t *b);
int bench_params_decode(const uint8_t *b, size_t len, struct bench_params *p,
			char *why, size_t whylen);
/* Page-aligned: a 4 KiB transfer then touches one page, not two. */
void *bench_alloc_aligned(size_t len);
/* The buffer a side transfers from or into: tern_mem_alloc(), host memory
 * rounded up to whole 2 MiB so that even a 1 MiB buffer is one huge page. */
int bench_mem_alloc(enum tern_mem_kind kind, int device, size_t len,
		    void **ptr_p);
void bench_mt_fill(void *buf, size_t len, uint64_t seed);
/* Fill @len bytes at @buf, memory of @kind, with MT(@seed) (@pattern) or
 * zeros; GPU memory through a bounce buffer. */
int bench_mem_fill(enum tern_mem_kind kind, void *buf, size_t len, int pattern,
		   uint64_t seed);
/* tern_mr_sync() of [0, @len) of @mr in direction @dir, waited for. */
int bench_mr_sync_wait(struct tern_ctx *ctx, struct tern_mr *mr, uint64_t len,
		       unsigned int dir);

/*
 * --op register (bench/register.c) over @peer, whose region @remote takes
 * the writes (@wlen bytes at most): a point per size and measure, and the
 * context's register fields, into @rep. @return 0, or an error with @why
 * set; *@stuck_p is set when a write never completed (its memory is then
 * kept: the provider may still read it).
 */
int bench_register(struct tern_ctx *ctx, struct tern_peer *peer,
		   const struct tern_mr_desc *remote, uint64_t wlen,
		   const struct bench_opts *o, struct bench_report *rep,
		   int *stuck_p, char *why, size_t whylen);

#endif /* BENCH_ENGINE_INT_H */
