/* SPDX-License-Identifier: MIT */
/* What the reporters (bench/report*.c) share: checks, number and size
 * formatting that ignores the C locale, UTF-8 scanning. Private to them. */
#ifndef BENCH_REPORT_INT_H
#define BENCH_REPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

size_t report_npoints(const struct bench_report *r);
int report_check(FILE *f, const struct bench_report *r);
int report_finish(FILE *f);
void report_fix_decimal_point(char *buf);
const char *report_fmt_exact(double v, char *buf, size_t len);
const char *report_fmt_fixed(double v, int prec, char *buf, size_t len);
const char *report_fmt_g(double v, char *buf, size_t len);
const char *report_fmt_size(uint64_t bytes, bool exact, char *buf, size_t len);
const char *report_fmt_rate(uint64_t bps, char *buf, size_t len);
size_t report_field_len(const char *s, size_t cap);

#endif /* BENCH_REPORT_INT_H */
