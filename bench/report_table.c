/* SPDX-License-Identifier: MIT */
/* The table users read (bench_print_table()). */
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

#include "report_int.h"

static void table_cell(FILE *f, int width, int prec, double v)
{
	char buf[64];

	if (isfinite(v))
		fprintf(f, " %*s", width,
			report_fmt_fixed(v, prec, buf, sizeof(buf)));
	else
		fprintf(f, " %*s", width, "-");
}

/* A context string, control characters shown as '?' to keep the layout. */
static void table_str(FILE *f, const char *s, size_t cap)
{
	size_t n = report_field_len(s, cap);

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		fputc(ch < 0x20 || ch == 0x7f ? '?' : ch, f);
	}
}

static void table_field(FILE *f, const char *name, const char *s, size_t cap)
{
	fprintf(f, "  %-14s ", name);
	table_str(f, s, cap);
	fputc('\n', f);
}

/* "cuda:0 (cuda staged)"; "?" for what is not known. */
static void table_mem(FILE *f, const char *mem, size_t memcap, const char *path,
		      size_t pathcap)
{
	if (report_field_len(mem, memcap) == 0)
		fputc('?', f);
	else
		table_str(f, mem, memcap);
	if (report_field_len(path, pathcap) != 0) {
		fputs(" (", f);
		table_str(f, path, pathcap);
		fputc(')', f);
	}
}

/* --op register: what each measure times, then a row per size and
 * measure. */
static void table_register(FILE *f, const struct bench_report *r)
{
	const struct bench_context *c = &r->ctx;
	size_t n = report_npoints(r);
	char a[64], b[64], m[64];

	fprintf(f, "  %-14s %s\n", "op",
		"register: tern_mr_reg() and tern_mr_close(), and writes from "
		"a region just registered");
	fprintf(f, "  %-14s %s\n", "memory",
		"a fresh mmap(MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE) per "
		"iteration, pages untouched; access local, remote read and "
		"write");
	fprintf(f, "  %-14s %" PRIu64 " per size, %" PRIu64 " warmup\n",
		"iterations", c->iters, c->warmup);
	if (c->route[0] != '\0')
		fprintf(f, "  %-14s %s\n", "peer path", c->route);
	fprintf(f, "  %-14s %s\n", "completion",
		c->wait_fd != 0 ? "wait fds (--wait-fd)"
				: "busy polling, no wait fd");
	fprintf(f, "  %-14s %s\n", "cold",
		"tern_mr_reg() + tern_mr_close() of a range no region covers");
	fprintf(f, "  %-14s %s\n", "cached",
		c->reg_cache != 0
			? "the same, of that range while the cold region is "
			  "open: shares its registration (the cache)"
			: "the same, of that range while the cold region is "
			  "open: registered apart (the cache is off, "
			  "TERN_MR_CACHE=0)");
	fprintf(f,
		"  %-14s %s from offset 0 to the peer, post to "
		"completion: the first from a region just registered, "
		"then a second\n",
		"writes", report_fmt_size(c->write_bytes, false, a, sizeof(a)));
	if (c->churn_cycles != 0) {
		fprintf(f,
			"  %-14s %" PRIu64 " tern_mr_reg() + tern_mr_close() "
			"cycles, 1 MiB to 1 GiB in turn, untouched: median "
			"per cycle %s us in the first tenth, %s in the "
			"middle, %s in the last\n",
			"churn", c->churn_cycles,
			report_fmt_fixed(c->churn_start_us, 2, a, sizeof(a)),
			report_fmt_fixed(c->churn_middle_us, 2, b, sizeof(b)),
			report_fmt_fixed(c->churn_end_us, 2, m, sizeof(m)));
	}
	fprintf(f, "  %-14s %s\n", "latency", "us");
	fprintf(f, "\n%9s  %-13s %8s %9s %9s %9s %9s\n", "size", "measure",
		"ops", "min", "p50", "p99", "max");
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];

		fprintf(f, "%9s  %-13.*s %8" PRIu64,
			report_fmt_size(p->size, true, a, sizeof(a)),
			(int)report_field_len(p->measure, sizeof(p->measure)),
			p->measure, p->ops);
		table_cell(f, 9, 2, p->lat_min_us);
		table_cell(f, 9, 2, p->lat_p50_us);
		table_cell(f, 9, 2, p->lat_p99_us);
		table_cell(f, 9, 2, p->lat_max_us);
		fputc('\n', f);
	}
}

void bench_print_table(FILE *f, const struct bench_report *r)
{
	const struct bench_context *c = &r->ctx;
	size_t n = report_npoints(r);
	char a[64], b[64];

	fputs("tern bench ", f);
	table_str(f, c->tern_version, sizeof(c->tern_version));
	fputs(" (libfabric ", f);
	table_str(f, c->fabric_version, sizeof(c->fabric_version));
	fputs(") on ", f);
	table_str(f, c->host, sizeof(c->host));
	fputs(", ", f);
	table_str(f, c->date, sizeof(c->date));
	fputc('\n', f);
	table_field(f, "provider", c->provider, sizeof(c->provider));
	table_field(f, "fabric", c->fabric, sizeof(c->fabric));
	table_field(f, "domain", c->domain, sizeof(c->domain));
	if (bench_report_is_register(r)) {
		table_register(f, r);
		return;
	}
	table_field(f, "op", c->op, sizeof(c->op));
	if (strncmp(c->model, "implicit", sizeof(c->model)) == 0)
		fprintf(f, "  %-14s %s\n", "model",
			"implicit: no request each (the *_nbi calls), one "
			"tern_quiet() per window");
	else if (strncmp(c->model, "batch", sizeof(c->model)) == 0)
		fprintf(f, "  %-14s %s\n", "model",
			"batch: one request per window (the *_pieces calls), "
			"a piece per operation");
	else if (strncmp(c->model, "explicit", sizeof(c->model)) == 0)
		fprintf(f, "  %-14s %s\n", "model",
			"explicit: a request per operation");
	fprintf(f, "  %-14s %u\n", "window", c->window);
	fprintf(f, "  %-14s %u\n", "rails", c->rails);
	fprintf(f, "  %-14s %s\n", "link speed",
		c->link_bps == 0 ? "n/a"
				 : report_fmt_rate(c->link_bps, a, sizeof(a)));
	if (c->iters != 0)
		fprintf(f, "  %-14s %" PRIu64 " per size, %" PRIu64 " warmup\n",
			"iterations", c->iters, c->warmup);
	else if (c->duration_s > 0)
		fprintf(f, "  %-14s %s s per size, %" PRIu64 " warmup\n",
			"duration", report_fmt_g(c->duration_s, a, sizeof(a)),
			c->warmup);
	else
		fprintf(f, "  %-14s %s\n", "iterations",
			"by size, 100000 at 8 B to 200 at 16 MiB; warmup a "
			"tenth");
	fprintf(f, "  %-14s %s\n", "verify", c->verify != 0 ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "completion",
		c->wait_fd != 0 ? "wait fds (--wait-fd)"
				: "busy polling, no wait fd");
	if (c->mem_local[0] != '\0' || c->mem_peer[0] != '\0') {
		fprintf(f, "  %-14s local ", "memory");
		table_mem(f, c->mem_local, sizeof(c->mem_local), c->path_local,
			  sizeof(c->path_local));
		fputs(", peer ", f);
		table_mem(f, c->mem_peer, sizeof(c->mem_peer), c->path_peer,
			  sizeof(c->path_peer));
		fputc('\n', f);
	}
	if (c->route[0] != '\0')
		fprintf(f, "  %-14s %s\n", "peer path", c->route);
	if (c->rails_state[0] != '\0')
		fprintf(f, "  %-14s %s\n", "rail health", c->rails_state);
	if (isfinite(c->mr_reg_ms))
		report_fmt_fixed(c->mr_reg_ms, 3, a, sizeof(a));
	else
		snprintf(a, sizeof(a), "-");
	fprintf(f, "  %-14s %s ms for %s\n", "memory reg.", a,
		report_fmt_size(c->mr_bytes, false, b, sizeof(b)));
	fprintf(f, "  %-14s %s\n", "rate base",
		"Gbit/s and GB/s are 10^9; sizes are binary (KiB = 1024 B)");
	if (strncmp(c->model, "implicit", sizeof(c->model)) == 0)
		fprintf(f, "  %-14s %s\n", "latency",
			"us, its window's first post to its quiet; cold: the "
			"first window");
	else if (strncmp(c->model, "batch", sizeof(c->model)) == 0)
		fprintf(f, "  %-14s %s\n", "latency",
			"us, its window's post to its batch's completion; "
			"cold: the first window");
	else
		fprintf(f, "  %-14s %s\n", "latency",
			"us, post to completion; cold: the first operation");
	fprintf(f, "\n%9s %9s %8s %6s %8s %8s %8s %8s %8s %8s %8s %8s\n",
		"size", "Gbit/s", "GB/s", "%link", "Mpps", "lat min", "p50",
		"p99", "p99.9", "max", "cold", "verified");
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];
		const char *v = "-";

		if (p->verified > 0)
			v = "ok";
		else if (p->verified < 0)
			v = "FAIL";

		fprintf(f, "%9s", report_fmt_size(p->size, true, a, sizeof(a)));
		table_cell(f, 9, 3, p->gbps);
		table_cell(f, 8, 3, p->gBps);
		if (p->link_pct >= 0.0)
			table_cell(f, 6, 1, p->link_pct);
		else
			fprintf(f, " %6s", "n/a");
		table_cell(f, 8, 3, p->mpps);
		table_cell(f, 8, 2, p->lat_min_us);
		table_cell(f, 8, 2, p->lat_p50_us);
		table_cell(f, 8, 2, p->lat_p99_us);
		table_cell(f, 8, 2, p->lat_p999_us);
		table_cell(f, 8, 2, p->lat_max_us);
		table_cell(f, 8, 2, p->cold_us);
		fprintf(f, " %8s\n", v);
	}
}
