/* SPDX-License-Identifier: MIT */
/*
 * The reporters of bench.h: the table users read, and JSON, CSV and SVG for
 * the record. Numbers are written the same whatever the C locale, strings
 * are escaped for their format (and bytes that are not UTF-8 replaced), and
 * a figure that is not finite is written as JSON null, an empty CSV field,
 * "-" in the table, and left out of the SVG.
 */
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

#include "bench.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* --- helpers ------------------------------------------------------------- */

static size_t report_npoints(const struct bench_report *r)
{
	if (r->npoints > ARRAY_SIZE(r->points))
		return ARRAY_SIZE(r->points);
	return r->npoints;
}

static int report_check(FILE *f, const struct bench_report *r)
{
	if (f == NULL || r == NULL || r->npoints > ARRAY_SIZE(r->points))
		return -EINVAL;
	return 0;
}

/* Flush and turn any write error on @f into a negative errno. */
static int report_finish(FILE *f)
{
	errno = 0;
	if (fflush(f) == EOF)
		return errno > 0 ? -errno : -EIO;
	if (ferror(f))
		return -EIO;
	return 0;
}

/* Replace the locale's decimal point in @buf (a C string) by '.'. */
static void fix_decimal_point(char *buf)
{
	const char *dp = localeconv()->decimal_point;
	size_t dplen;
	char *p;

	if (dp == NULL || strcmp(dp, ".") == 0 || dp[0] == '\0')
		return;
	p = strstr(buf, dp);
	if (p == NULL)
		return;
	dplen = strlen(dp);
	*p = '.';
	memmove(p + 1, p + dplen, strlen(p + dplen) + 1);
}

/* The shortest %g form of finite @v that reads back as @v. */
static const char *fmt_exact(double v, char *buf, size_t len)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fix_decimal_point(buf);
	return buf;
}

static const char *fmt_fixed(double v, int prec, char *buf, size_t len)
{
	snprintf(buf, len, "%.*f", prec, v);
	fix_decimal_point(buf);
	return buf;
}

static const char *fmt_g(double v, char *buf, size_t len)
{
	snprintf(buf, len, "%.4g", v);
	fix_decimal_point(buf);
	return buf;
}

/*
 * @bytes with a binary unit. @exact: only use a unit that divides @bytes
 * ("1536 B", "4 KiB"), as sizes are shown; otherwise one decimal in the
 * largest unit that fits ("1.5 MiB").
 */
static const char *fmt_size(uint64_t bytes, bool exact, char *buf, size_t len)
{
	static const char *const unit[] = { "B",   "KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB" };
	unsigned int u = 0;

	if (exact) {
		while (u + 1 < ARRAY_SIZE(unit) && bytes >= 1024 &&
		       bytes % 1024 == 0) {
			bytes /= 1024;
			u++;
		}
		snprintf(buf, len, "%" PRIu64 " %s", bytes, unit[u]);
		return buf;
	}
	while (u + 1 < ARRAY_SIZE(unit) && bytes >> (10 * (u + 1)) != 0)
		u++;
	if (u == 0 || bytes % (UINT64_C(1) << (10 * u)) == 0) {
		snprintf(buf, len, "%" PRIu64 " %s", bytes >> (10 * u),
			 unit[u]);
	} else {
		char num[32];

		fmt_fixed((double)bytes / (double)(UINT64_C(1) << (10 * u)), 1,
			  num, sizeof(num));
		snprintf(buf, len, "%s %s", num, unit[u]);
	}
	return buf;
}

/* A bit rate in SI units: "100 Gbit/s", "400 Mbit/s". */
static const char *fmt_rate(uint64_t bps, char *buf, size_t len)
{
	static const char *const unit[] = { "bit/s", "kbit/s", "Mbit/s",
					    "Gbit/s", "Tbit/s" };
	double v = (double)bps;
	unsigned int u = 0;
	char num[32];

	while (u + 1 < ARRAY_SIZE(unit) && v >= 1000.0) {
		v /= 1000.0;
		u++;
	}
	snprintf(buf, len, "%s %s", fmt_g(v, num, sizeof(num)), unit[u]);
	return buf;
}

/*
 * The length of the well-formed UTF-8 sequence (RFC 3629) at @s, at most
 * @n bytes long, or 0 if there is none.
 */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* A string from a fixed-size field: it may fill the field without NUL. */
static size_t field_len(const char *s, size_t cap)
{
	return strnlen(s, cap);
}

/* --- table --------------------------------------------------------------- */

static void table_cell(FILE *f, int width, int prec, double v)
{
	char buf[64];

	if (isfinite(v))
		fprintf(f, " %*s", width, fmt_fixed(v, prec, buf, sizeof(buf)));
	else
		fprintf(f, " %*s", width, "-");
}

/* A context string, control characters shown as '?' to keep the layout. */
static void table_str(FILE *f, const char *s, size_t cap)
{
	size_t n = field_len(s, cap);

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
	if (field_len(mem, memcap) == 0)
		fputc('?', f);
	else
		table_str(f, mem, memcap);
	if (field_len(path, pathcap) != 0) {
		fputs(" (", f);
		table_str(f, path, pathcap);
		fputc(')', f);
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
	table_field(f, "op", c->op, sizeof(c->op));
	fprintf(f, "  %-14s %u\n", "window", c->window);
	fprintf(f, "  %-14s %u\n", "rails", c->rails);
	fprintf(f, "  %-14s %s\n", "link speed",
		c->link_bps == 0 ? "n/a" : fmt_rate(c->link_bps, a, sizeof(a)));
	if (c->iters != 0)
		fprintf(f, "  %-14s %" PRIu64 " per size, %" PRIu64 " warmup\n",
			"iterations", c->iters, c->warmup);
	else if (c->duration_s > 0)
		fprintf(f, "  %-14s %s s per size, %" PRIu64 " warmup\n",
			"duration", fmt_g(c->duration_s, a, sizeof(a)),
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
	if (isfinite(c->mr_reg_ms))
		fmt_fixed(c->mr_reg_ms, 3, a, sizeof(a));
	else
		snprintf(a, sizeof(a), "-");
	fprintf(f, "  %-14s %s ms for %s\n", "memory reg.", a,
		fmt_size(c->mr_bytes, false, b, sizeof(b)));
	fprintf(f, "  %-14s %s\n", "rate base",
		"Gbit/s and GB/s are 10^9; sizes are binary (KiB = 1024 B)");
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

		fprintf(f, "%9s", fmt_size(p->size, true, a, sizeof(a)));
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

/* --- JSON ---------------------------------------------------------------- */

static void json_string(FILE *f, const char *s, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = field_len(s, cap);

	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq(u + i, n - i);

		if (len == 0) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (len > 1) {
			fwrite(u + i, 1, len, f);
			i += len;
			continue;
		}
		switch (u[i]) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (u[i] < 0x20 || u[i] == 0x7f)
				fprintf(f, "\\u%04x", u[i]);
			else
				fputc(u[i], f);
		}
		i++;
	}
	fputc('"', f);
}

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
	json_string(f, s, cap);
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
	fputs(isfinite(v) ? fmt_exact(v, buf, sizeof(buf)) : "null", f);
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
	JSON_STR(f, &first, pre, c, command);
	fputs("\n  }", f);
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
		fputs(fmt_exact(v, buf, sizeof(buf)), f);
}

int bench_write_csv(FILE *f, const struct bench_report *r)
{
	size_t n;
	int ret;

	ret = report_check(f, r);
	if (ret < 0)
		return ret;
	n = report_npoints(r);
	fputs("size,ops,bytes,seconds,gbps,gBps,link_pct,mpps,lat_min_us,"
	      "lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,cold_us,verified\n",
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
		fprintf(f, ",%d\n", p->verified);
	}
	return report_finish(f);
}

/* --- SVG ----------------------------------------------------------------- */

#define SVG_W 800
#define SVG_H 500

/* Text or attribute value: XML escapes, and nothing XML 1.0 forbids. */
static void svg_text(FILE *f, const char *s, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = field_len(s, cap);

	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq(u + i, n - i);

		if (len == 0) {
			fputs("\xef\xbf\xbd", f); /* U+FFFD */
			i++;
			continue;
		}
		if (len > 1) {
			fwrite(u + i, 1, len, f);
			i += len;
			continue;
		}
		switch (u[i]) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			/* Control characters cannot appear even escaped. */
			fputc(u[i] < 0x20 || u[i] == 0x7f ? ' ' : u[i], f);
		}
		i++;
	}
}

/* A coordinate, one decimal, locale-proof; callers pass finite values. */
static const char *svg_num(double v, char *buf, size_t len)
{
	return fmt_fixed(v, 1, buf, len);
}

/* A y tick label: 0.5, 20, 10000. */
static const char *svg_tick(double v, char *buf, size_t len)
{
	snprintf(buf, len, "%.6g", v);
	fix_decimal_point(buf);
	return buf;
}

struct svg_box {
	double x0, x1;	   /* plot area, left to right */
	double y0, y1;	   /* top to bottom */
	double xmin, xmax; /* log2(size) */
	bool ylog;	   /* log10 y axis from ymin, else linear from 0 */
	double ymin, ymax;
	double ystep; /* linear: between two ticks */
};

struct svg_series {
	const char *name;
	const char *color;
	const char *dash; /* NULL for a solid line */
	size_t off;	  /* offsetof the double in bench_point */
};

static double series_value(const struct bench_point *p,
			   const struct svg_series *s)
{
	return *(const double *)((const char *)p + s->off);
}

/* Whether point @p of series @s can be drawn in @b. */
static bool svg_point_ok(const struct svg_box *b, const struct bench_point *p,
			 const struct svg_series *s)
{
	double v = series_value(p, s);

	if (p->size == 0 || !isfinite(v) || v > b->ymax)
		return false;
	return b->ylog ? v > 0.0 : v >= 0.0;
}

static double svg_x(const struct svg_box *b, uint64_t size)
{
	double lx = log2((double)size);

	return b->x0 + (lx - b->xmin) / (b->xmax - b->xmin) * (b->x1 - b->x0);
}

static double svg_y(const struct svg_box *b, double v)
{
	double t;

	if (b->ylog)
		t = (log10(v) - log10(b->ymin)) /
		    (log10(b->ymax) - log10(b->ymin));
	else
		t = v / b->ymax;
	return b->y1 - t * (b->y1 - b->y0);
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for [0, max]. */
static double nice_step(double max)
{
	double raw = max / 5.0;
	double mag = pow(10.0, floor(log10(raw)));
	double norm = raw / mag;

	if (norm <= 1.0)
		return mag;
	if (norm <= 2.0)
		return 2.0 * mag;
	if (norm <= 5.0)
		return 5.0 * mag;
	return 10.0 * mag;
}

/*
 * The y axis of @ns series in @b. Linear from 0 to the first tick at or
 * above the largest value; when @may_log and the values span more than
 * LOG_SPAN, log10 from decade to decade instead.
 */
#define LOG_SPAN 50.0

static void svg_yaxis(struct svg_box *b, const struct bench_report *r,
		      const struct svg_series *s, size_t ns, bool may_log)
{
	size_t n = report_npoints(r);
	double max = 0.0, minpos = INFINITY;

	/* Only values far enough from overflow that the axis stays finite. */
	b->ylog = false;
	b->ymax = DBL_MAX / 100;
	for (size_t j = 0; j < ns; j++) {
		for (size_t i = 0; i < n; i++) {
			double v = series_value(&r->points[i], &s[j]);

			if (!svg_point_ok(b, &r->points[i], &s[j]))
				continue;
			if (v > max)
				max = v;
			if (v > 0.0 && v < minpos)
				minpos = v;
		}
	}
	if (!(max > 0.0))
		max = 1.0;
	if (may_log && isfinite(minpos) && max / minpos > LOG_SPAN &&
	    minpos > 1e-300) {
		b->ylog = true;
		b->ymin = pow(10.0, floor(log10(minpos)));
		b->ymax = pow(10.0, ceil(log10(max)));
		return;
	}
	b->ymin = 0.0;
	b->ystep = nice_step(max);
	b->ymax = ceil(max / b->ystep * (1 - 1e-12)) * b->ystep;
}

/*
 * Powers of two between labelled sizes in [2^kmin, 2^kmax]: 1, 2, 5, 10 or
 * 20, so that labels fall on whole KiB, MiB, ... and are at most 6.
 */
static long size_step(long kmin, long kmax)
{
	static const long steps[] = { 1, 2, 5, 10, 20 };
	size_t i;

	for (i = 0; i + 1 < ARRAY_SIZE(steps); i++) {
		long count = 0;

		for (long k = kmin; k <= kmax; k++)
			if (k % steps[i] == 0)
				count++;
		if (count <= 6)
			break;
	}
	return steps[i];
}

static void svg_line(FILE *f, double x0, double y0, double x1, double y1,
		     const char *style)
{
	char a[32], b[32], c[32], d[32];

	fprintf(f, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" %s/>\n",
		svg_num(x0, a, sizeof(a)), svg_num(y0, b, sizeof(b)),
		svg_num(x1, c, sizeof(c)), svg_num(y1, d, sizeof(d)), style);
}

static void svg_label(FILE *f, double x, double y, const char *anchor,
		      const char *extra, const char *text)
{
	char a[32], b[32];

	fprintf(f, "<text x=\"%s\" y=\"%s\" text-anchor=\"%s\"%s>",
		svg_num(x, a, sizeof(a)), svg_num(y, b, sizeof(b)), anchor,
		extra);
	svg_text(f, text, strlen(text));
	fputs("</text>\n", f);
}

#define SVG_GRID       "stroke=\"#dddddd\" stroke-width=\"1\""
#define SVG_GRID_MINOR "stroke=\"#f0f0f0\" stroke-width=\"1\""
#define SVG_AXIS       "stroke=\"#000000\" stroke-width=\"1\""

/* One y tick at @v: grid line, tick mark, and a label if @label. */
static void svg_ytick(FILE *f, const struct svg_box *b, double v, bool label)
{
	double y = svg_y(b, v);
	char buf[64];

	if (y < b->y1 - 0.5)
		svg_line(f, b->x0, y, b->x1, y,
			 label ? SVG_GRID : SVG_GRID_MINOR);
	if (!label)
		return;
	svg_line(f, b->x0 - 5, y, b->x0, y, SVG_AXIS);
	svg_label(f, b->x0 - 8, y + 4, "end", "",
		  svg_tick(v, buf, sizeof(buf)));
}

static void svg_yticks(FILE *f, const struct svg_box *b)
{
	int decades;

	if (!b->ylog) {
		for (int i = 0; i * b->ystep <= b->ymax * (1 + 1e-9); i++)
			svg_ytick(f, b, i * b->ystep, true);
		return;
	}
	/* Each decade labelled; 2 and 5 times it too while they are few. */
	decades = (int)lround(log10(b->ymax / b->ymin));

	for (int d = 0; d <= decades; d++) {
		double v = b->ymin * pow(10.0, d);

		svg_ytick(f, b, v, true);
		if (d == decades)
			break;
		for (int m = 2; m <= 9; m++)
			svg_ytick(f, b, v * m,
				  decades <= 3 && (m == 2 || m == 5));
	}
}

static void svg_axes(FILE *f, const struct svg_box *b, const char *title,
		     const char *ylabel)
{
	long kmin = (long)ceil(b->xmin), kmax = (long)floor(b->xmax);
	long kstep;
	char buf[64], extra[96], n1[32], n2[32];

	if (kmin < 0)
		kmin = 0;
	if (kmax > 63)
		kmax = 63;
	kstep = size_step(kmin, kmax);
	/* A grid line at each power of two, a label every kstep of them. */
	for (long k = kmin; k <= kmax; k++) {
		double x = svg_x(b, UINT64_C(1) << k);

		if (k % kstep != 0) {
			svg_line(f, x, b->y0, x, b->y1, SVG_GRID_MINOR);
			continue;
		}
		svg_line(f, x, b->y0, x, b->y1, SVG_GRID);
		svg_line(f, x, b->y1, x, b->y1 + 5, SVG_AXIS);
		svg_label(f, x, b->y1 + 18, "middle", "",
			  fmt_size(UINT64_C(1) << k, true, buf, sizeof(buf)));
	}
	svg_yticks(f, b);
	svg_line(f, b->x0, b->y1, b->x1, b->y1, SVG_AXIS);
	svg_line(f, b->x0, b->y0, b->x0, b->y1, SVG_AXIS);
	svg_label(f, (b->x0 + b->x1) / 2, b->y0 - 10, "middle",
		  " font-weight=\"bold\"", title);
	svg_label(f, (b->x0 + b->x1) / 2, b->y1 + 38, "middle", "",
		  "message size");
	snprintf(extra, sizeof(extra), " transform=\"rotate(-90 %s %s)\"",
		 svg_num(b->x0 - 52, n1, sizeof(n1)),
		 svg_num((b->y0 + b->y1) / 2, n2, sizeof(n2)));
	svg_label(f, b->x0 - 52, (b->y0 + b->y1) / 2, "middle", extra, ylabel);
}

static void svg_series(FILE *f, const struct svg_box *b,
		       const struct bench_report *r, const struct svg_series *s)
{
	size_t n = report_npoints(r);
	bool open = false;
	char dash[64] = "", xs[32], ys[32], buf[64], val[64];

	if (s->dash != NULL)
		snprintf(dash, sizeof(dash), " stroke-dasharray=\"%s\"",
			 s->dash);
	/* A gap (a point that cannot be drawn) breaks the line. */
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];

		if (!svg_point_ok(b, p, s)) {
			if (open)
				fputs("\"/>\n", f);
			open = false;
			continue;
		}
		if (!open)
			fprintf(f,
				"<polyline fill=\"none\" stroke=\"%s\" "
				"stroke-width=\"2\"%s points=\"",
				s->color, dash);
		else
			fputc(' ', f);
		open = true;
		fprintf(f, "%s,%s", svg_num(svg_x(b, p->size), xs, sizeof(xs)),
			svg_num(svg_y(b, series_value(p, s)), ys, sizeof(ys)));
	}
	if (open)
		fputs("\"/>\n", f);
	for (size_t i = 0; i < n; i++) {
		const struct bench_point *p = &r->points[i];

		if (!svg_point_ok(b, p, s))
			continue;
		fprintf(f, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\">",
			svg_num(svg_x(b, p->size), xs, sizeof(xs)),
			svg_num(svg_y(b, series_value(p, s)), ys, sizeof(ys)),
			s->color);
		/* A tooltip in viewers that show titles. */
		fprintf(f, "<title>%s: %s %s</title></circle>\n",
			fmt_size(p->size, true, buf, sizeof(buf)),
			fmt_g(series_value(p, s), val, sizeof(val)), s->name);
	}
}

static void svg_legend(FILE *f, int x, int y, const struct svg_series *s)
{
	char dash[64] = "";

	if (s->dash != NULL)
		snprintf(dash, sizeof(dash), " stroke-dasharray=\"%s\"",
			 s->dash);
	fprintf(f,
		"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
		"stroke-width=\"2\"%s/>\n",
		x, y, x + 24, y, s->color, dash);
	fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"3\" fill=\"%s\"/>\n",
		x + 12, y, s->color);
	svg_label(f, x + 30, y + 4, "start", "", s->name);
}

/* The size axis shared by both panels: log2 of the smallest and largest
 * sizes, at least two powers of two apart. */
static void svg_xaxis(const struct bench_report *r, double *xmin_p,
		      double *xmax_p)
{
	size_t n = report_npoints(r);
	double xmin = INFINITY, xmax = -INFINITY;

	for (size_t i = 0; i < n; i++) {
		double lx;

		if (r->points[i].size == 0)
			continue;
		lx = log2((double)r->points[i].size);
		if (lx < xmin)
			xmin = lx;
		if (lx > xmax)
			xmax = lx;
	}
	if (!(xmin <= xmax)) {
		/* Nothing to place: axes from 8 B to 1 MiB. */
		xmin = 3;
		xmax = 20;
	} else if (xmax - xmin < 1.0) {
		xmin -= 1.0;
		xmax += 1.0;
	}
	*xmin_p = xmin;
	*xmax_p = xmax;
}

static void svg_header(FILE *f, const struct bench_context *c)
{
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n",
		SVG_W, SVG_H, SVG_W, SVG_H);
	fputs("<desc>tern bench ", f);
	svg_text(f, c->tern_version, sizeof(c->tern_version));
	fputs(", ", f);
	svg_text(f, c->date, sizeof(c->date));
	fputs(": ", f);
	svg_text(f, c->command, sizeof(c->command));
	fputs("</desc>\n", f);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
		SVG_W, SVG_H);

	fprintf(f,
		"<text x=\"%d\" y=\"28\" text-anchor=\"middle\" "
		"font-size=\"18\">tern bench: ",
		SVG_W / 2);
	svg_text(f, c->op, sizeof(c->op));
	fputs(" over ", f);
	svg_text(f, c->provider, sizeof(c->provider));
	fprintf(f, ", window %u, %u rail%s</text>\n", c->window, c->rails,
		c->rails == 1 ? "" : "s");
	fprintf(f,
		"<text x=\"%d\" y=\"50\" text-anchor=\"middle\" "
		"fill=\"#555555\">",
		SVG_W / 2);
	svg_text(f, c->fabric, sizeof(c->fabric));
	fputs(" / ", f);
	svg_text(f, c->domain, sizeof(c->domain));
	fputs(" on ", f);
	svg_text(f, c->host, sizeof(c->host));
	fputs(", ", f);
	svg_text(f, c->date, sizeof(c->date));
	fputs("</text>\n", f);
}

int bench_write_svg(FILE *f, const struct bench_report *r)
{
	static const struct svg_series bw[] = {
		{ "Gbit/s", "#1f77b4", NULL,
		  offsetof(struct bench_point, gbps) },
	};
	static const struct svg_series lat[] = {
		{ "p99 latency (us)", "#d62728", NULL,
		  offsetof(struct bench_point, lat_p99_us) },
		{ "p50 latency (us)", "#2ca02c", "5,3",
		  offsetof(struct bench_point, lat_p50_us) },
	};
	struct svg_box left = { .x0 = 80, .x1 = 370, .y0 = 100, .y1 = 400 };
	struct svg_box right = { .x0 = 490, .x1 = 780, .y0 = 100, .y1 = 400 };
	int ret;

	ret = report_check(f, r);
	if (ret < 0)
		return ret;
	svg_xaxis(r, &left.xmin, &left.xmax);
	right.xmin = left.xmin;
	right.xmax = left.xmax;
	/* Bandwidth saturates: linear. Latency spans decades: log if so. */
	svg_yaxis(&left, r, bw, ARRAY_SIZE(bw), false);
	svg_yaxis(&right, r, lat, ARRAY_SIZE(lat), true);

	svg_header(f, &r->ctx);
	svg_axes(f, &left, "bandwidth", "Gbit/s (10^9 bit/s)");
	for (size_t j = 0; j < ARRAY_SIZE(bw); j++)
		svg_series(f, &left, r, &bw[j]);
	svg_axes(f, &right, "latency",
		 right.ylog ? "microseconds (log scale)" : "microseconds");
	for (size_t j = 0; j < ARRAY_SIZE(lat); j++)
		svg_series(f, &right, r, &lat[j]);

	svg_legend(f, 200, 475, &bw[0]);
	svg_legend(f, 360, 475, &lat[0]);
	svg_legend(f, 560, 475, &lat[1]);
	fputs("</svg>\n", f);
	return report_finish(f);
}
