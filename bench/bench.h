/* SPDX-License-Identifier: MIT */
/*
 * The benchmark engine behind `tern bench`: statistics, the measuring loop,
 * and the reporters (table, JSON, CSV, SVG). An internal library the CLI
 * calls; not installed.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* --- statistics ------------------------------------------------------------
 */

/*
 * A log-linear histogram of non-negative integer samples (nanoseconds):
 * values below 2^SUB_BITS are exact; above, each power-of-two range is cut
 * into 2^SUB_BITS equal buckets, so any percentile it reports is within
 * 1/2^SUB_BITS (0.8% with 7 bits) of a true sample value. Fixed memory
 * whatever the number of samples; min, max, count and mean are exact.
 */
#define BENCH_HIST_SUB_BITS 7
#define BENCH_HIST_SUB	    (1u << BENCH_HIST_SUB_BITS)
#define BENCH_HIST_BUCKETS  ((64 - BENCH_HIST_SUB_BITS + 1) * BENCH_HIST_SUB)

struct bench_hist {
	uint64_t count;
	uint64_t min;
	uint64_t max;
	/* Exact 128-bit sum of the samples, so add() stays integer-only (a
	 * long double is a soft-float call on aarch64). */
	uint64_t sum_lo;
	uint64_t sum_hi;
	uint64_t buckets[BENCH_HIST_BUCKETS];
};

void bench_hist_init(struct bench_hist *h);
void bench_hist_add(struct bench_hist *h, uint64_t v);
/* @n samples of value @v at once (n = 0 adds nothing). */
void bench_hist_add_n(struct bench_hist *h, uint64_t v, uint64_t n);
/* Merge @src into @dst. */
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);
/*
 * The q-quantile (0 <= q <= 1): the smallest bucket value v such that at
 * least ceil(q * count) samples are <= v, reported as the bucket's lower
 * bound clamped to [min, max]. q = 0 gives min, q = 1 gives max. 0 when
 * empty.
 */
uint64_t bench_hist_quantile(const struct bench_hist *h, double q);
double bench_hist_mean(const struct bench_hist *h);

/* Index of the bucket holding @v, and the lowest value of bucket @i. */
size_t bench_hist_index(uint64_t v);
uint64_t bench_hist_lower(size_t i);

/* --- results ----------------------------------------------------------- */

/* One size of one run. Rates use SI units: Gbit/s = 10^9 bit/s. */
struct bench_point {
	uint64_t size;	   /* bytes per operation */
	uint64_t ops;	   /* timed operations */
	uint64_t bytes;	   /* timed payload bytes */
	double seconds;	   /* first timed post to last timed completion */
	double gbps;	   /* payload Gbit/s (10^9) */
	double gBps;	   /* payload GB/s (10^9) */
	double link_pct;   /* % of link speed, < 0 when the link is n/a */
	double mpps;	   /* million operations per second */
	double lat_min_us; /* post-to-completion latency */
	double lat_p50_us;
	double lat_p99_us;
	double lat_p999_us;
	double lat_max_us;
	double cold_us; /* the very first operation of the run */
	int verified;	/* 1 checked equal, 0 not checked, -1 mismatch */
	/* --op register: what the latencies time ("cold", "cached",
	 * "first-write", "second-write"); "" for the other operations. */
	char measure[16];
};

struct bench_context {
	char tern_version[32];
	char fabric_version[32];
	char provider[64];
	char fabric[128];
	char domain[128];
	char host[128];
	char date[40]; /* ISO 8601, UTC */
	char op[16];   /* write, writedata, read, send, atomic, register */
	/* "explicit": a request per operation; "implicit": the *_nbi calls,
	 * one tern_quiet() per window (--implicit); "batch": one
	 * tern_write_pieces() or tern_read_pieces() per window (--batch). */
	char model[12];
	uint64_t link_bps; /* 0 when the provider reports none */
	unsigned int window;
	unsigned int rails;
	uint64_t iters;	   /* per size, 0 when --duration rules */
	double duration_s; /* per size, 0 when --iters rules */
	uint64_t warmup;
	double mr_reg_ms; /* registering the benchmark's buffers */
	uint64_t mr_bytes;
	int verify;
	/* 1: this side's completion queues have wait fds (--wait-fd);
	 * 0: it busy-polls without them (the default). */
	int wait_fd;
	/* Where each side's buffers live ("host", "cuda:0") and the path
	 * its region takes (tern_mr_path_str(): "host", "cuda zero-copy",
	 * "cuda staged"); "" when not known. */
	char mem_local[16];
	char mem_peer[16];
	char path_local[24];
	char path_peer[24];
	/* How tern reaches the peer (tern_peer_path()): "same host (local
	 * path)" or "provider"; "" when not known. */
	char route[32];
	/* Several rails: how each fared (tern_peer_rails()), "" when one
	 * rail: "2 up", or "rail 1 down 1 time(s), 25 moved; up" ... */
	char rails_state[160];
	char command[512]; /* the command line, for the record */
	/* --op register: the writes' size; whether the cached measure
	 * shared the cold region's registration (1: the registration cache;
	 * 0: registered apart, TERN_MR_CACHE=0); --churn's cycles and the
	 * median of a cycle over their first, middle and last tenth. */
	uint64_t write_bytes;
	int reg_cache;
	uint64_t churn_cycles;
	double churn_start_us;
	double churn_middle_us;
	double churn_end_us;
};

/* 64 sizes, up to 4 measures each (--op register). */
#define BENCH_MAX_POINTS 256

struct bench_report {
	struct bench_context ctx;
	size_t npoints;
	struct bench_point points[BENCH_MAX_POINTS];
};

/* Whether @r is of --op register: one point per size and measure, and
 * its own table, JSON results and CSV columns (no SVG). */
int bench_report_is_register(const struct bench_report *r);

/* The aligned table users read (stdout). */
void bench_print_table(FILE *f, const struct bench_report *r);
/* Every figure and the whole context; @return 0 or -errno. */
int bench_write_json(FILE *f, const struct bench_report *r);
/* One header line, then one line per size (--op register: per size and
 * measure), stable column order. */
int bench_write_csv(FILE *f, const struct bench_report *r);
/* A self-contained SVG: bandwidth (Gbit/s) and p99 latency (us) against
 * size, log-scaled size axis. -EINVAL for a --op register report. */
int bench_write_svg(FILE *f, const struct bench_report *r);

#endif /* BENCH_H */
