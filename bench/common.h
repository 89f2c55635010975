/* SPDX-License-Identifier: MIT */
/*
 * What bench/raw, bench/inproc and tern bench share, so that they place
 * and pace their processes alike. Header-only, so that bench/raw stays a
 * program on libfabric alone. Include it after defining _GNU_SOURCE.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/*
 * A transfer buffer placed as tern_mem_alloc() places tern bench's
 * (src/hmem/thp.c, bench_mem_alloc()): @len rounded up to whole 2 MiB,
 * 2 MiB-aligned, and madvise(MADV_HUGEPAGE) where transparent huge pages
 * are in "madvise" mode, so that both tools' copies walk the same pages.
 * $TERN_THP=0: page-aligned, no advice, as tern then does. Free with
 * free(); NULL when out of memory.
 */
static inline void *bench_alloc_huge(size_t len)
{
	const size_t huge = (size_t)2 << 20;
	const char *v = getenv("TERN_THP");
	char line[128] = "";
	void *p = NULL;
	FILE *f;

	if (v != NULL && strcmp(v, "0") == 0)
		return posix_memalign(&p, 4096, len ? len : 1) == 0 ? p : NULL;
	len = len > 0 ? (len + huge - 1) & ~(huge - 1) : huge;
	if (posix_memalign(&p, huge, len) != 0)
		return NULL;
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f != NULL) {
		if (fgets(line, sizeof(line), f) == NULL)
			line[0] = '\0';
		fclose(f);
	}
	if (strstr(line, "[madvise]") != NULL)
		(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/*
 * $TERN_BENCH_CPUS="A,B": the initiator (@peer 0) runs on CPU A, its
 * peer or target (@peer 1) on B, so the tools meet the same placement run
 * after run. @who prefixes an error.
 */
static inline void bench_split_cpus(const char *who, int peer)
{
	const char *v = getenv("TERN_BENCH_CPUS");
	unsigned int a, b;
	cpu_set_t set;

	if (v == NULL || sscanf(v, "%u,%u", &a, &b) != 2 || a >= CPU_SETSIZE ||
	    b >= CPU_SETSIZE)
		return;
	CPU_ZERO(&set);
	CPU_SET(peer ? b : a, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fprintf(stderr, "%s: TERN_BENCH_CPUS: %s\n", who,
			strerror(errno));
}

/*
 * A write target that polls less often: @n pause instructions after each
 * poll that found nothing (raw --target-pause, tern bench's
 * $TERN_BENCH_TARGET_PAUSE). How fast the target polls moves the
 * initiator's bandwidth: on shm its polls meet the initiator's posts on
 * the region's shared cache lines, on tcp it sets how large a piece of a
 * write each socket read takes (docs/performance.md).
 */
static inline void bench_pause(long n)
{
	for (long i = 0; i < n; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield" ::: "memory");
#else
		__asm__ volatile("" ::: "memory");
#endif
	}
}

#endif
