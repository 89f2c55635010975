/* SPDX-License-Identifier: MIT */
/* CHECK(cond, fmt, ...): on failure, print where and why, and exit 1.
 * FAIL(fmt, ...): the same, unconditionally. */
#ifndef TERN_TEST_CHECK_H
#define TERN_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c, ...)                                                        \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define FAIL(...) CHECK(0, __VA_ARGS__)

#endif /* TERN_TEST_CHECK_H */
