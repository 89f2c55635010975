/* SPDX-License-Identifier: MIT */
/*
 * The benchmark engine's unit tests (the program test_bench, of several
 * sources): test_bench.c holds the statistics and parameters' cases and
 * main(); test_bench_report.c the reporters'. Here: what both use.
 */
#ifndef TERN_TEST_BENCH_FIXTURE_H
#define TERN_TEST_BENCH_FIXTURE_H

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The cases of test_bench_report.c, which main() runs. */
void test_report_json(void **state);
void test_report_csv(void **state);
void test_report_svg(void **state);
void test_report_table(void **state);
void test_report_register(void **state);
void test_report_locale(void **state);
void test_report_errors(void **state);

#endif /* TERN_TEST_BENCH_FIXTURE_H */
