/* SPDX-License-Identifier: MIT */
/* The measuring loop of `tern bench`: an initiator and a responder. */
#ifndef BENCH_ENGINE_H
#define BENCH_ENGINE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>

#include "bench.h"

enum bench_op {
	BENCH_WRITE = 1,
	BENCH_WRITEDATA = 2, /* write with immediate */
	BENCH_READ = 3,
	BENCH_SEND = 4,
	BENCH_ATOMIC = 5, /* 64-bit fetch-add; size is always 8 */
	/* What registering costs (bench/register.c): never on the wire,
	 * its writes are BENCH_WRITE to the responder. */
	BENCH_REGISTER = 6,
};

#define BENCH_MAX_SIZES	 64
#define BENCH_MAX_SIZE	 (1ULL << 30)
#define BENCH_MAX_WINDOW 4096

/* --op register: regions of address space up to 64 GiB; 200 iterations
 * per size by default; the writes from a region are 4 KiB (or the size,
 * when smaller); --churn cycles at most. */
#define BENCH_REG_MAX_SIZE  (64ULL << 30)
#define BENCH_REG_ITERS	    200
#define BENCH_REG_WRITE	    4096
#define BENCH_REG_MAX_CHURN 10000000

/* How the initiator posts a window (bench_opts.model). */
enum bench_model {
	BENCH_EXPLICIT = 0, /* a request per operation */
	BENCH_IMPLICIT = 1, /* the *_nbi calls, one tern_quiet() (--implicit) */
	BENCH_BATCH = 2,    /* one tern_write_pieces() per window (--batch) */
};

/* iters 0 and duration 0: scaled by size; warmup AUTO: iters / 10. */
#define BENCH_AUTO UINT64_MAX

/* Where a side's buffers live: --mem host|cuda|cuda:N. */
struct bench_mem {
	enum tern_mem_kind kind;
	int device; /* CUDA device; 0 for host */
	int shared; /* host memory from TERN_MEM_SHARED (docs/local.md) */
};

/* The kind to allocate @m's buffers as. */
static inline enum tern_mem_kind bench_mem_alloc_kind(const struct bench_mem *m)
{
	return m->shared ? TERN_MEM_SHARED : m->kind;
}

#define BENCH_MEM_NAME 16 /* "host", "shared", "cuda:N" */

struct bench_opts {
	int op;
	size_t nsizes;
	uint64_t sizes[BENCH_MAX_SIZES];
	unsigned int window;
	uint64_t iters;	   /* timed ops per size; 0: duration, or by size */
	double duration_s; /* per size when iters is 0 */
	uint64_t warmup;   /* untimed ops per size, or BENCH_AUTO */
	int verify;
	/* BENCH_EXPLICIT, a request per operation; BENCH_IMPLICIT, each
	 * window's operations posted with the *_nbi calls, no request each,
	 * and completed by one tern_quiet() (--implicit); BENCH_BATCH, each
	 * window one tern_write_pieces() or tern_read_pieces() of --window
	 * pieces and one request (--batch). */
	int model;
	uint64_t seed;
	struct bench_mem mem;	     /* this side's buffers */
	int progress;		     /* a live line on stderr */
	volatile sig_atomic_t *stop; /* Ctrl-C, or NULL */
	/* --op register: register/close cycles after the sizes (--churn),
	 * 0 for none. */
	uint64_t churn;
};

const char *bench_op_name(int op);
int bench_op_parse(const char *s);
/* "explicit", "implicit" or "batch". */
const char *bench_model_name(int model);
/*
 * Whether @op has an implicit form: NULL if it has (write, writedata and
 * read as their *_nbi twins; atomic as tern_atomic_add_nbi(), an add
 * that fetches nothing), else why not, naming --implicit and the op.
 */
const char *bench_implicit_why(int op);
/*
 * Whether @op has a batch form: NULL if it has (write and read as
 * tern_write_pieces() and tern_read_pieces(), writedata as
 * tern_write_pieces() with TERN_PIECES_IMM), else why not, naming --batch
 * and the op.
 */
const char *bench_batch_why(int op);

/* "host", "cuda" (device 0) or "cuda:N": 0, or -EINVAL. */
int bench_mem_parse(const char *s, struct bench_mem *m);
/* "host" or "cuda:N" into @buf (BENCH_MEM_NAME bytes). */
const char *bench_mem_name(const struct bench_mem *m, char *buf, size_t len);

/*
 * Run the benchmark against a responder whose card is given; fills the
 * report (context from @ctx, one point per size; --op register: one per
 * size and measure, bench/register.c).
 * @return 0, or an error with @why set.
 */
int bench_run(struct tern_ctx *ctx, const void *card, size_t card_len,
	      const struct bench_opts *o, struct bench_report *rep, char *why,
	      size_t whylen);

/* Serve bench sessions until *stop (or, with @once, after one), the
 * target regions in memory @mem (NULL: host). */
int bench_serve(struct tern_ctx *ctx, volatile sig_atomic_t *stop, int once,
		const struct bench_mem *mem, FILE *log);

#endif /* BENCH_ENGINE_H */
