/* SPDX-License-Identifier: MIT */
/* `tern bench --world` and `tern ping --world` (bench/bench_world.c). */
#ifndef BENCH_WORLD_H
#define BENCH_WORLD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>
#include <tern/world.h>

/* A row travels as one world value of 4-byte figures. */
#define BENCH_WORLD_MAX_RANKS (TERN_WORLD_VALUE_MAX / 4)
/* Each rank's source and target buffers: ranks x the largest size. */
#define BENCH_WORLD_MAX_BUF (1ULL << 30)

struct bench_world_opts {
	size_t nsizes;
	const uint64_t *sizes;
	uint64_t iters;	 /* timed writes (round trips) per pair and size */
	uint64_t warmup; /* untimed ones before */
	unsigned int window;
	int verify; /* writes with immediate, counted, every byte checked */
};

/*
 * The all-to-all: every rank writes to every other, rank 0 prints the
 * N x N bandwidth matrix (and writes it to @json when not NULL).
 * Collective: every rank calls it with the same options.
 * @return 0; -TERN_EVERIFY; another error with @why set.
 */
int bench_world_a2a(struct tern_ctx *ctx, struct tern_world *w,
		    const struct bench_world_opts *o, FILE *json, char *why,
		    size_t whylen);

/* The latency matrix (8 B writes with immediate, ping-pong), likewise. */
int bench_world_ping(struct tern_ctx *ctx, struct tern_world *w,
		     const struct bench_world_opts *o, FILE *json, char *why,
		     size_t whylen);

#endif /* BENCH_WORLD_H */
