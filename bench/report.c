/* SPDX-License-Identifier: MIT */
/*
 * The reporters of bench.h (report_table.c, report_data.c, report_svg.c),
 * and what they share (here): the table users read, and JSON, CSV and SVG for
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

#include "report_int.h"

size_t report_npoints(const struct bench_report *r)
{
	if (r->npoints > ARRAY_SIZE(r->points))
		return ARRAY_SIZE(r->points);
	return r->npoints;
}

int bench_report_is_register(const struct bench_report *r)
{
	return strncmp(r->ctx.op, "register", sizeof(r->ctx.op)) == 0;
}

int report_check(FILE *f, const struct bench_report *r)
{
	if (f == NULL || r == NULL || r->npoints > ARRAY_SIZE(r->points))
		return -EINVAL;
	return 0;
}

/* Flush and turn any write error on @f into a negative errno. */
int report_finish(FILE *f)
{
	errno = 0;
	if (fflush(f) == EOF)
		return errno > 0 ? -errno : -EIO;
	if (ferror(f))
		return -EIO;
	return 0;
}

/* Replace the locale's decimal point in @buf (a C string) by '.'. */
void report_fix_decimal_point(char *buf)
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
const char *report_fmt_exact(double v, char *buf, size_t len)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	report_fix_decimal_point(buf);
	return buf;
}

const char *report_fmt_fixed(double v, int prec, char *buf, size_t len)
{
	snprintf(buf, len, "%.*f", prec, v);
	report_fix_decimal_point(buf);
	return buf;
}

const char *report_fmt_g(double v, char *buf, size_t len)
{
	snprintf(buf, len, "%.4g", v);
	report_fix_decimal_point(buf);
	return buf;
}

/*
 * @bytes with a binary unit. @exact: only use a unit that divides @bytes
 * ("1536 B", "4 KiB"), as sizes are shown; otherwise one decimal in the
 * largest unit that fits ("1.5 MiB").
 */
const char *report_fmt_size(uint64_t bytes, bool exact, char *buf, size_t len)
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

		report_fmt_fixed((double)bytes /
					 (double)(UINT64_C(1) << (10 * u)),
				 1, num, sizeof(num));
		snprintf(buf, len, "%s %s", num, unit[u]);
	}
	return buf;
}

/* A bit rate in SI units: "100 Gbit/s", "400 Mbit/s". */
const char *report_fmt_rate(uint64_t bps, char *buf, size_t len)
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
	snprintf(buf, len, "%s %s", report_fmt_g(v, num, sizeof(num)), unit[u]);
	return buf;
}

/* A string from a fixed-size field: it may fill the field without NUL. */
size_t report_field_len(const char *s, size_t cap)
{
	return strnlen(s, cap);
}
