/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the benchmark engine's reporters (table, JSON, CSV, SVG,
 * --op register's), whose output is also fed to python3's parsers when it
 * is installed; bench_fixture.h.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <tern/util.h>

#include "bench.h"
#include "engine_int.h"
#include "bench_fixture.h"

#define PYTHON3 "/usr/bin/python3"

/* --- reporters ----------------------------------------------------------- */

/* With a quote, a newline, a backslash, a control byte and an '&'. */
#define PROVIDER      "tcp&rxm \"v2\"\nx\\y\x01"
#define PROVIDER_JSON "\"provider\": \"tcp&rxm \\\"v2\\\"\\nx\\\\y\\u0001\""

static void fill_report(struct bench_report *r, size_t n)
{
	static const uint64_t sizes[] = { 8, 4096, 65536, 1048576, 1536 };

	memset(r, 0, sizeof(*r));
	snprintf(r->ctx.tern_version, sizeof(r->ctx.tern_version), "0.1.0");
	snprintf(r->ctx.fabric_version, sizeof(r->ctx.fabric_version), "1.22");
	snprintf(r->ctx.provider, sizeof(r->ctx.provider), "%s", PROVIDER);
	snprintf(r->ctx.fabric, sizeof(r->ctx.fabric), "TCP-IP");
	snprintf(r->ctx.domain, sizeof(r->ctx.domain), "eth0 <lo>");
	snprintf(r->ctx.host, sizeof(r->ctx.host), "node1");
	snprintf(r->ctx.date, sizeof(r->ctx.date), "2024-06-01T12:00:00Z");
	snprintf(r->ctx.op, sizeof(r->ctx.op), "write");
	snprintf(r->ctx.model, sizeof(r->ctx.model), "implicit");
	/* Not UTF-8 (\xff), and UTF-8 that is (the micro sign). */
	snprintf(r->ctx.command, sizeof(r->ctx.command),
		 "tern bench --op write \xff \xc2\xb5s");
	r->ctx.link_bps = 0;
	r->ctx.window = 64;
	r->ctx.rails = 2;
	r->ctx.iters = 1000;
	r->ctx.warmup = 100;
	r->ctx.mr_reg_ms = 1.25;
	r->ctx.mr_bytes = 64 << 20;
	r->ctx.verify = 1;
	r->npoints = n;
	for (size_t i = 0; i < n; i++) {
		struct bench_point *p = &r->points[i];
		double s = (double)sizes[i % ARRAY_SIZE(sizes)];

		p->size = sizes[i % ARRAY_SIZE(sizes)];
		p->ops = 1000;
		p->bytes = p->size * p->ops;
		p->seconds = 0.001 * (double)(i + 1);
		p->gbps = (double)p->bytes * 8 / p->seconds / 1e9;
		p->gBps = p->gbps / 8;
		p->link_pct = -1.0;
		p->mpps = (double)p->ops / p->seconds / 1e6;
		p->lat_min_us = 1.5 + s / 1e4;
		p->lat_p50_us = 2.0 + s / 1e4;
		p->lat_p99_us = 3.25 + s / 1e4;
		p->lat_p999_us = 4.0 + s / 1e4;
		p->lat_max_us = 10.0 + s / 1e4;
		p->cold_us = 40.0;
		p->verified = (int)(i % 3) - 1;
	}
}

typedef int (*writer_fn)(FILE *f, const struct bench_report *r);

/* Run @fn into memory; returns the text (free it), or fails the test. */
static char *capture(writer_fn fn, const struct bench_report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(fn(f, r), 0);
	assert_int_equal(fclose(f), 0);
	assert_non_null(buf);
	assert_int_equal(strlen(buf), len);
	return buf;
}

static int print_table(FILE *f, const struct bench_report *r)
{
	bench_print_table(f, r);
	return 0;
}

/* Whether python3 accepts @text with @check (a command taking a file). */
static void python_check(const char *text, const char *check)
{
	char path[] = "/tmp/tern_test_bench_XXXXXX";
	char cmd[512];
	FILE *f;
	int fd, ret;

	if (access(PYTHON3, X_OK) != 0) {
		print_message("note: no " PYTHON3 ", output not parsed\n");
		return;
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null", check, path);
	ret = system(cmd);
	unlink(path);
	if (ret != 0)
		fail_msg("`%s` failed (%d) on:\n%s", check, ret, text);
}

#define JSON_CHECK PYTHON3 " -m json.tool"
#define XML_CHECK                                               \
	PYTHON3 " -c 'import sys, xml.etree.ElementTree as E; " \
		"E.parse(sys.argv[1])'"

void test_report_json(void **state)
{
	static const char *const keys[] = {
		"context",     "results",    "tern_version", "fabric_version",
		"provider",    "fabric",     "domain",	     "host",
		"date",	       "op",	     "model",	     "link_bps",
		"window",      "rails",	     "iters",	     "duration_s",
		"warmup",      "mr_reg_ms",  "mr_bytes",     "verify",
		"command",     "size",	     "ops",	     "bytes",
		"seconds",     "gbps",	     "gBps",	     "link_pct",
		"mpps",	       "lat_min_us", "lat_p50_us",   "lat_p99_us",
		"lat_p999_us", "lat_max_us", "cold_us",	     "verified",
	};
	struct bench_report *r = malloc(sizeof(*r));
	char key[64], *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 4);
	r->points[1].lat_p999_us = NAN;
	r->points[2].cold_us = INFINITY;
	r->points[3].mpps = -INFINITY;
	r->points[0].seconds = 0.1 + 0.2;
	s = capture(bench_write_json, r);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		snprintf(key, sizeof(key), "\"%s\": ", keys[i]);
		if (strstr(s, key) == NULL)
			fail_msg("no %s in:\n%s", key, s);
	}
	assert_non_null(strstr(s, PROVIDER_JSON));
	assert_non_null(strstr(s, "\"lat_p999_us\": null"));
	assert_non_null(strstr(s, "\"cold_us\": null"));
	assert_non_null(strstr(s, "\"mpps\": null"));
	assert_non_null(strstr(s, "\\ufffd \xc2\xb5s\""));
	assert_non_null(strstr(s, "\"mr_reg_ms\": 1.25,"));
	assert_non_null(strstr(s, "\"model\": \"implicit\""));
	/* Shortest exact form: 0.1 + 0.2 is not 0.3. */
	assert_non_null(strstr(s, "\"seconds\": 0.30000000000000004,"));
	assert_non_null(strstr(s, "\"seconds\": 0.002,"));
	assert_non_null(strstr(s, "\"size\": 1048576,"));
	assert_null(strstr(s, "nan"));
	assert_null(strstr(s, "inf"));
	python_check(s, JSON_CHECK);
	free(s);

	/* No points: still an object with an empty array. */
	fill_report(r, 0);
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"results\": []"));
	python_check(s, JSON_CHECK);
	free(s);
	free(r);
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		if (*s == c)
			n++;
	return n;
}

void test_report_csv(void **state)
{
	static const char header[] =
		"size,ops,bytes,seconds,gbps,gBps,link_pct,mpps,lat_min_us,"
		"lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,cold_us,"
		"verified,model\n";
	struct bench_report *r = malloc(sizeof(*r));
	size_t lines = 0;
	char *s, *line, *save = NULL;

	(void)state;
	assert_non_null(r);
	fill_report(r, 5);
	r->points[2].lat_p99_us = NAN;
	s = capture(bench_write_csv, r);
	assert_memory_equal(s, header, strlen(header));
	assert_int_equal(count_char(s, '\n'), 6);
	assert_non_null(strstr(s, "\n8,1000,8000,0.001,"));
	assert_null(strstr(s, "nan"));
	for (line = strtok_r(s, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (count_char(line, ',') != 15)
			fail_msg("not 16 fields: %s", line);
		/* The model closes every row but the header. */
		if (lines > 0 && strcmp(line + strlen(line) - 9, ",implicit"))
			fail_msg("no model: %s", line);
		lines++;
	}
	assert_int_equal(lines, 6);
	free(s);

	/* The explicit model; a model with a comma or a quote in it cannot
	 * break a row: only letters, digits, '-' and '_' are written. */
	fill_report(r, 1);
	snprintf(r->ctx.model, sizeof(r->ctx.model), "explicit");
	s = capture(bench_write_csv, r);
	assert_non_null(strstr(s, ",explicit\n"));
	free(s);
	snprintf(r->ctx.model, sizeof(r->ctx.model), "a,b\"c\nd");
	s = capture(bench_write_csv, r);
	assert_int_equal(count_char(s, '\n'), 2);
	assert_int_equal(count_char(s, ','), 2 * 15);
	assert_non_null(strstr(s, ",abcd\n"));
	free(s);

	fill_report(r, 0);
	s = capture(bench_write_csv, r);
	assert_string_equal(s, header);
	free(s);
	free(r);
}

static void check_svg(const char *s)
{
	const char *end = "</svg>\n";
	size_t len = strlen(s);

	if (strncmp(s, "<?xml", 5) == 0)
		s = strstr(s, "?>\n") + 3;
	assert_memory_equal(s, "<svg", 4);
	assert_true(len > strlen(end));
	assert_string_equal(s + strlen(s) - strlen(end), end);
	assert_null(strstr(s, "NaN"));
	assert_null(strstr(s, "nan"));
	assert_null(strstr(s, "inf"));
	assert_null(strstr(s, "Inf"));
	assert_null(strstr(s, "script"));
	assert_null(strstr(s, "href"));
	python_check(s, XML_CHECK);
}

void test_report_svg(void **state)
{
	struct bench_report *r = malloc(sizeof(*r));
	char *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 4);
	r->points[1].lat_p99_us = NAN;
	r->points[2].gbps = INFINITY;
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_non_null(strstr(s, "tcp&amp;rxm &quot;v2&quot;"));
	assert_null(strstr(s, "tcp&rxm"));
	assert_non_null(strstr(s, "eth0 &lt;lo&gt;"));
	assert_non_null(strstr(s, "<polyline"));
	assert_non_null(strstr(s, "<circle"));
	assert_non_null(strstr(s, ">1 MiB<"));
	assert_non_null(strstr(s, "tern bench: write (implicit) over "));
	free(s);

	/* Latency within a decade stays on a linear axis... */
	fill_report(r, 2);
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_null(strstr(s, "log scale"));
	free(s);

	/* ...and over decades on a log axis, with ticks at decades. */
	r->points[0].lat_p50_us = 0.8;
	r->points[1].lat_p99_us = 25000;
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_non_null(strstr(s, "log scale"));
	assert_non_null(strstr(s, ">0.1<"));
	assert_non_null(strstr(s, ">100000<"));
	free(s);

	/* 0 and 1 point, all values missing, and one size of 0 bytes. */
	for (size_t n = 0; n <= 1; n++) {
		fill_report(r, n);
		s = capture(bench_write_svg, r);
		check_svg(s);
		free(s);
	}
	fill_report(r, 3);
	for (size_t i = 0; i < 3; i++) {
		r->points[i].gbps = NAN;
		r->points[i].lat_p50_us = NAN;
		r->points[i].lat_p99_us = -INFINITY;
	}
	r->points[0].size = 0;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	/* Sizes up to 2^63 and enormous rates. */
	fill_report(r, 2);
	r->points[0].size = 1;
	r->points[1].size = UINT64_C(1) << 63;
	r->points[1].gbps = 1.7e308;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	fill_report(r, 1);
	r->points[0].size = UINT64_MAX;
	s = capture(bench_write_svg, r);
	check_svg(s);
	free(s);
	free(r);
}

void test_report_table(void **state)
{
	struct bench_report *r = malloc(sizeof(*r));
	char *s;

	(void)state;
	assert_non_null(r);
	fill_report(r, 5);
	r->points[4].lat_max_us = NAN;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "n/a"));
	assert_non_null(strstr(s, "10^9"));
	assert_non_null(strstr(s, "1.250 ms for 64 MiB"));
	assert_non_null(strstr(s, "     8 B"));
	assert_non_null(strstr(s, "   4 KiB"));
	assert_non_null(strstr(s, "   1 MiB"));
	assert_non_null(strstr(s, "1536 B"));
	assert_non_null(strstr(s, "FAIL"));
	assert_non_null(strstr(s, " ok\n"));
	assert_non_null(strstr(s, "p99.9"));
	/* The model and what latency then means. */
	assert_non_null(strstr(s, "  model          implicit: no request "));
	assert_non_null(strstr(s, "its window's first post to its quiet"));
	/* The provider's newline and control byte do not break the layout. */
	assert_non_null(strstr(s, "  provider       tcp&rxm \"v2\"?x\\y?\n"));
	assert_null(strstr(s, "nan"));
	free(s);

	snprintf(r->ctx.model, sizeof(r->ctx.model), "explicit");
	s = capture(print_table, r);
	assert_non_null(strstr(s, "  model          explicit: a request per "));
	assert_non_null(strstr(s, "post to completion; cold: the first "
				  "operation"));
	free(s);

	snprintf(r->ctx.model, sizeof(r->ctx.model), "batch");
	s = capture(print_table, r);
	assert_non_null(strstr(s, "  model          batch: one request "
				  "per window"));
	assert_non_null(strstr(s, "its window's post to its batch's "
				  "completion"));
	free(s);

	r->ctx.link_bps = UINT64_C(100000000000);
	r->points[0].link_pct = 12.5;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "100 Gbit/s"));
	assert_non_null(strstr(s, " 12.5 "));
	free(s);
	free(r);
}

/* --op register: @n sizes, four measures each. */
static void fill_reg_report(struct bench_report *r, size_t n)
{
	static const char *const measures[] = { "cold", "cached", "first-write",
						"second-write" };

	fill_report(r, 0);
	snprintf(r->ctx.op, sizeof(r->ctx.op), "register");
	r->ctx.model[0] = '\0';
	r->ctx.iters = 200;
	r->ctx.warmup = 20;
	r->ctx.write_bytes = 4096;
	r->ctx.reg_cache = 1;
	r->ctx.churn_cycles = 10000;
	r->ctx.churn_start_us = 0.25;
	r->ctx.churn_middle_us = 0.5;
	r->ctx.churn_end_us = 0.75;
	snprintf(r->ctx.route, sizeof(r->ctx.route), "provider");
	for (size_t i = 0; i < n; i++) {
		for (size_t m = 0; m < ARRAY_SIZE(measures); m++) {
			struct bench_point *p = &r->points[r->npoints++];

			p->size = UINT64_C(4096) << (6 * i);
			p->ops = 200;
			snprintf(p->measure, sizeof(p->measure), "%s",
				 measures[m]);
			p->lat_min_us = 0.5 + (double)m;
			p->lat_p50_us = 1.0 + (double)m;
			p->lat_p99_us = 2.0 + (double)m;
			p->lat_max_us = 3.0 + (double)m;
			p->lat_p999_us = p->lat_max_us;
		}
	}
}

void test_report_register(void **state)
{
	static const char *const keys[] = {
		"pages",	"write_bytes",	  "reg_cache",
		"churn_cycles", "churn_start_us", "churn_middle_us",
		"churn_end_us", "measure",	  "lat_min_us",
		"lat_p50_us",	"lat_p99_us",	  "lat_max_us",
	};
	struct bench_report *r = malloc(sizeof(*r));
	char key[64], *s;
	FILE *f;

	(void)state;
	assert_non_null(r);
	fill_reg_report(r, 6); /* 4 KiB to 4 TiB */
	assert_int_equal(r->npoints, 24);
	assert_int_equal(bench_report_is_register(r), 1);

	s = capture(bench_write_json, r);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		snprintf(key, sizeof(key), "\"%s\": ", keys[i]);
		if (strstr(s, key) == NULL)
			fail_msg("no %s in:\n%s", key, s);
	}
	assert_non_null(strstr(s, "\"op\": \"register\""));
	assert_non_null(strstr(s, "\"pages\": \"untouched\""));
	assert_non_null(strstr(s, "\"size\": 68719476736, \"measure\": "
				  "\"cached\", \"ops\": 200, "
				  "\"lat_min_us\": 1.5,"));
	/* Bandwidth has no meaning here: not written. */
	assert_null(strstr(s, "\"gbps\""));
	python_check(s, JSON_CHECK);
	free(s);

	/* No churn: its figures are null. */
	r->ctx.churn_cycles = 0;
	r->ctx.churn_start_us = NAN;
	r->ctx.churn_middle_us = NAN;
	r->ctx.churn_end_us = NAN;
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"churn_start_us\": null"));
	python_check(s, JSON_CHECK);
	free(s);

	s = capture(bench_write_csv, r);
	assert_memory_equal(s,
			    "size,measure,ops,lat_min_us,lat_p50_us,"
			    "lat_p99_us,lat_max_us\n4096,cold,200,0.5,1,2,3\n",
			    strlen("size,measure,ops,lat_min_us,lat_p50_us,"
				   "lat_p99_us,lat_max_us\n4096,cold,200,0.5,"
				   "1,2,3\n"));
	assert_int_equal(count_char(s, '\n'), 25);
	assert_int_equal(count_char(s, ','), 25 * 6);
	assert_non_null(
		strstr(s, "\n68719476736,second-write,200,3.5,4,5,6\n"));
	free(s);

	fill_reg_report(r, 6);
	s = capture(print_table, r);
	assert_non_null(strstr(s, "pages untouched"));
	assert_non_null(strstr(s, "shares its registration (the cache)"));
	assert_non_null(strstr(s, "4 KiB from offset 0"));
	assert_non_null(strstr(s, "10000 tern_mr_reg() + tern_mr_close() "
				  "cycles"));
	assert_non_null(strstr(s, "0.25 us in the first tenth, 0.50 in the "
				  "middle, 0.75 in the last"));
	assert_non_null(strstr(s, "   64 GiB  first-write        200 "));
	assert_non_null(strstr(s, "    4 TiB  cold "));
	assert_null(strstr(s, "Gbit/s"));
	free(s);
	r->ctx.reg_cache = 0;
	r->ctx.churn_cycles = 0;
	s = capture(print_table, r);
	assert_non_null(strstr(s, "registered apart (the cache is off"));
	assert_null(strstr(s, "churn"));
	free(s);

	/* No chart: four measures per size and no bandwidth. */
	f = fopen("/dev/null", "w");
	assert_non_null(f);
	assert_int_equal(bench_write_svg(f, r), -EINVAL);
	fclose(f);
	free(r);
}

/* A locale with a decimal comma must not leak into JSON, CSV or SVG. */
void test_report_locale(void **state)
{
	static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8",
					     "fr_FR.UTF-8", "fr_FR.utf8" };
	struct bench_report *r = malloc(sizeof(*r));
	const char *name = NULL;
	char *s;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < ARRAY_SIZE(names) && name == NULL; i++)
		if (setlocale(LC_NUMERIC, names[i]) != NULL)
			name = names[i];
	if (name == NULL) {
		print_message("note: no decimal-comma locale, not tested\n");
		free(r);
		return;
	}
	fill_report(r, 3);
	s = capture(bench_write_json, r);
	assert_non_null(strstr(s, "\"mr_reg_ms\": 1.25,"));
	python_check(s, JSON_CHECK);
	free(s);
	s = capture(bench_write_csv, r);
	assert_non_null(strstr(s, "\n8,1000,8000,0.001,"));
	assert_int_equal(count_char(s, ','), 4 * 15);
	free(s);
	s = capture(bench_write_svg, r);
	check_svg(s);
	assert_null(strstr(s, "\"80,0\""));
	free(s);
	s = capture(print_table, r);
	assert_non_null(strstr(s, "1.250 ms"));
	free(s);
	setlocale(LC_NUMERIC, "C");
	free(r);
}

void test_report_errors(void **state)
{
	static const writer_fn writers[] = { bench_write_json, bench_write_csv,
					     bench_write_svg };
	struct bench_report *r = malloc(sizeof(*r));
	FILE *f;

	(void)state;
	assert_non_null(r);
	for (size_t i = 0; i < ARRAY_SIZE(writers); i++) {
		fill_report(r, 3);
		/* A read-only stream: every write fails. */
		f = fopen("/dev/null", "r");
		assert_non_null(f);
		assert_int_equal(writers[i](f, r), -EIO);
		fclose(f);
		/* A full device: the error surfaces on the flush. */
		f = fopen("/dev/full", "w");
		if (f != NULL) {
			int ret = writers[i](f, r);

			assert_true(ret == -ENOSPC || ret == -EIO);
			fclose(f);
		}
		r->npoints = ARRAY_SIZE(r->points) + 1;
		f = fopen("/dev/null", "w");
		assert_non_null(f);
		assert_int_equal(writers[i](f, r), -EINVAL);
		assert_int_equal(writers[i](NULL, r), -EINVAL);
		assert_int_equal(writers[i](f, NULL), -EINVAL);
		fclose(f);
	}
	free(r);
}
