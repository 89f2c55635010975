/* SPDX-License-Identifier: MIT */
/* The record: JSON (bench_write_json()) and CSV (bench_write_csv()). */
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

#include "apps/json.h"
#include "report_int.h"

/* One "key": prefix; @first says whether a comma goes before it. */
static void json_key(FILE *f, bool *first, const char *pre, const char *key)
{
	if (!*first)
		fputc(',', f);
	*first = false;
	fprintf(f, "%s\"%s\": ", pre, key);
}

static void json_str(FILE *f, bool *first, const char *pre, const char *key,
		     const char *s, size_t cap)
{
	json_key(f, first, pre, key);
	app_json_string(f, s, cap);
}

static void json_u64(FILE *f, bool *first, const char *pre, const char *key,
		     uint64_t v)
{
	json_key(f, first, pre, key);
	fprintf(f, "%" PRIu64, v);
}

static void json_int(FILE *f, bool *first, const char *pre, const char *key,
		     long long v)
{
	json_key(f, first, pre, key);
	fprintf(f, "%lld", v);
}

static void json_dbl(FILE *f, bool *first, const char *pre, const char *key,
		     double v)
{
	char buf[64];

	json_key(f, first, pre, key);
	fputs(isfinite(v) ? report_fmt_exact(v, buf, sizeof(buf)) : "null", f);
}

#define JSON_STR(f, first, pre, s, field) \
	json_str(f, first, pre, #field, (s)->field, sizeof((s)->field))

static void json_context(FILE *f, const struct bench_context *c)
{
	const char *pre = "\n    ";
	bool first = true;

	fputs("  \"context\": {", f);
	JSON_STR(f, &first, pre, c, tern_version);
	JSON_STR(f, &first, pre, c, fabric_version);
	JSON_STR(f, &first, pre, c, provider);
	JSON_STR(f, &first, pre, c, fabric);
	JSON_STR(f, &first, pre, c, domain);
	JSON_STR(f, &first, pre, c, host);
	JSON_STR(f, &first, pre, c, date);
	JSON_STR(f, &first, pre, c, op);
	JSON_STR(f, &first, pre, c, model);
	json_u64(f, &first, pre, "link_bps", c->link_bps);
	json_u64(f, &first, pre, "window", c->window);
	json_u64(f, &first, pre, "rails", c->rails);
	json_u64(f, &first, pre, "iters", c->iters);
	json_dbl(f, &first, pre, "duration_s", c->duration_s);
	json_u64(f, &first, pre, "warmup", c->warmup);
	json_dbl(f, &first, pre, "mr_reg_ms", c->mr_reg_ms);
	json_u64(f, &first, pre, "mr_bytes", c->mr_bytes);
	json_int(f, &first, pre, "verify", c->verify);
	json_int(f, &first, pre, "wait_fd", c->wait_fd);
	JSON_STR(f, &first, pre, c, mem_local);
	JSON_STR(f, &first, pre, c, mem_peer);
	JSON_STR(f, &first, pre, c, path_local);
	JSON_STR(f, &first, pre, c, path_peer);
	JSON_STR(f, &first, pre, c, route);
	JSON_STR(f, &first, pre, c, rails_state);
	if (strncmp(c->op, "register", sizeof(c->op)) == 0) {
		json_str(f, &first, pre, "pages", "untouched",
			 sizeof("untouched"));
		json_u64(f, &first, pre, "write_bytes", c->write_bytes);
		json_int(f, &first, pre, "reg_cache", c->reg_cache);
		json_u64(f, &first, pre, "churn_cycles", c->churn_cycles);
		json_dbl(f, &first, pre, "churn_start_us", c->churn_start_us);
		json_dbl(f, &first, pre, "churn_middle_us", c->churn_middle_us);
		json_dbl(f, &first, pre, "churn_end_us", c->churn_end_us);
	}
	JSON_STR(f, &first, pre, c, command);
	fputs("\n  }", f);
}

/* --op register: a size, what was timed, and its latencies. */
static void json_reg_point(FILE *f, const struct bench_point *p)
{
	const char *pre = " ";
	bool first = true;

	fputs("    {", f);
	json_u64(f, &first, pre, "size", p->size);
	JSON_STR(f, &first, pre, p, measure);
	json_u64(f, &first, pre, "ops", p->ops);
	json_dbl(f, &first, pre, "lat_min_us", p->lat_min_us);
	json_dbl(f, &first, pre, "lat_p50_us", p->lat_p50_us);
	json_dbl(f, &first, pre, "lat_p99_us", p->lat_p99_us);
	json_dbl(f, &first, pre, "lat_max_us", p->lat_max_us);
	fputs(" }", f);
}

static void json_point(FILE *f, const struct bench_point *p)
{
	const char *pre = " ";
	bool first = true;

	fputs("    {", f);
	json_u64(f, &first, pre, "size", p->size);
	json_u64(f, &first, pre, "ops", p->ops);
	json_u64(f, &first, pre, "bytes", p->bytes);
	json_dbl(f, &first, pre, "seconds", p->seconds);
	json_dbl(f, &first, pre, "gbps", p->gbps);
	json_dbl(f, &first, pre, "gBps", p->gBps);
	json_dbl(f, &first, pre, "link_pct", p->link_pct);
	json_dbl(f, &first, pre, "mpps", p->mpps);
	json_dbl(f, &first, pre, "lat_min_us", p->lat_min_us);
	json_dbl(f, &first, pre, "lat_p50_us", p->lat_p50_us);
	json_dbl(f, &first, pre, "lat_p99_us", p->lat_p99_us);
	json_dbl(f, &first, pre, "lat_p999_us", p->lat_p999_us);
	json_dbl(f, &first, pre, "lat_max_us", p->lat_max_us);
	json_dbl(f, &first, pre, "cold_us", p->cold_us);
	json_int(f, &first, pre, "verified", p->verified);
	fputs(" }", f);
}

int bench_write_json(FILE *f, const struct bench_report *r)
{
	size_t n;
	int ret;

	ret = report_check(f, r);
	if (ret < 0)
		return ret;
	n = report_npoints(r);
	fputs("{\n", f);
	json_context(f, &r->ctx);
	fputs(",\n  \"results\": [", f);
	for (size_t i = 0; i < n; i++) {
		fputs(i == 0 ? "\n" : ",\n", f);
		if (bench_report_is_register(r))
			json_reg_point(f, &r->points[i]);
		else
			json_point(f, &r->points[i]);
	}
	fputs(n == 0 ? "]\n}\n" : "\n  ]\n}\n", f);
	return report_finish(f);
}

/* --- CSV ----------------------------------------------------------------- */

static void csv_dbl(FILE *f, double v)
{
	char buf[64];

	fputc(',', f);
	if (isfinite(v))
		fputs(report_fmt_exact(v, buf, sizeof(buf)), f);
}

/* A context word: letters, digits, '-' and '_' only, so that it needs no
 * quoting ("explicit", "implicit"); anything else is left out. */
static void csv_str(FILE *f, const char *s, size_t cap)
{
	size_t n = report_field_len(s, cap);

	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')
			fputc(ch, f);
	}
}

/* --op register: a row per size and measure. */
static int csv_register(FILE *f, const struct bench_report *r)
{
	size_t n = report_npoints(r);

	fputs("size,measure,ops,lat_min_us,lat_p50_us,lat_p99_us,"
	      "lat_max_us\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];

		fprintf(f, "%" PRIu64 ",", p->size);
		csv_str(f, p->measure, sizeof(p->measure));
		fprintf(f, ",%" PRIu64, p->ops);
		csv_dbl(f, p->lat_min_us);
		csv_dbl(f, p->lat_p50_us);
		csv_dbl(f, p->lat_p99_us);
		csv_dbl(f, p->lat_max_us);
		fputc('\n', f);
	}
	return report_finish(f);
}

int bench_write_csv(FILE *f, const struct bench_report *r)
{
	size_t n;
	int ret;

	ret = report_check(f, r);
	if (ret < 0)
		return ret;
	if (bench_report_is_register(r))
		return csv_register(f, r);
	n = report_npoints(r);
	/* The model last: the columns before it keep their places. */
	fputs("size,ops,bytes,seconds,gbps,gBps,link_pct,mpps,lat_min_us,"
	      "lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,cold_us,verified,"
	      "model\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];

		fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64, p->size, p->ops,
			p->bytes);
		csv_dbl(f, p->seconds);
		csv_dbl(f, p->gbps);
		csv_dbl(f, p->gBps);
		csv_dbl(f, p->link_pct);
		csv_dbl(f, p->mpps);
		csv_dbl(f, p->lat_min_us);
		csv_dbl(f, p->lat_p50_us);
		csv_dbl(f, p->lat_p99_us);
		csv_dbl(f, p->lat_p999_us);
		csv_dbl(f, p->lat_max_us);
		csv_dbl(f, p->cold_us);
		fprintf(f, ",%d,", p->verified);
		csv_str(f, r->ctx.model, sizeof(r->ctx.model));
		fputc('\n', f);
	}
	return report_finish(f);
}
