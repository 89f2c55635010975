/* SPDX-License-Identifier: MIT */
/* The record as a picture: SVG (bench_write_svg()). */
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

#define SVG_W 800
#define SVG_H 500

/* Text or attribute value: XML escapes, and nothing XML 1.0 forbids. */
static void svg_text(FILE *f, const char *s, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = report_field_len(s, cap);

	for (size_t i = 0; i < n;) {
		size_t len = app_utf8_seq(u + i, n - i);

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
	return report_fmt_fixed(v, 1, buf, len);
}

/* A y tick label: 0.5, 20, 10000. */
static const char *svg_tick(double v, char *buf, size_t len)
{
	snprintf(buf, len, "%.6g", v);
	report_fix_decimal_point(buf);
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
			  report_fmt_size(UINT64_C(1) << k, true, buf,
					  sizeof(buf)));
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
			report_fmt_size(p->size, true, buf, sizeof(buf)),
			report_fmt_g(series_value(p, s), val, sizeof(val)),
			s->name);
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
	if (report_field_len(c->model, sizeof(c->model)) != 0) {
		fputs(" (", f);
		svg_text(f, c->model, sizeof(c->model));
		fputc(')', f);
	}
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
	/* Four measures per size, no bandwidth: not this chart. */
	if (bench_report_is_register(r))
		return -EINVAL;
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
