/* SPDX-License-Identifier: MIT */
/* The abi tests' checks, and memory that ends at a guard page: a struct
 * placed against it faults on any byte read or written past its end. */
#ifndef TERN_TEST_ABI_CHECK_H
#define TERN_TEST_ABI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

/* @size bytes that end where an inaccessible page begins. */
static inline void *at_guard(size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap");
	CHECK(mprotect(p + page, (size_t)page, PROT_NONE) == 0, "mprotect");
	return p + page - size;
}

#endif /* TERN_TEST_ABI_CHECK_H */
