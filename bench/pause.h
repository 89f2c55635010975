/* SPDX-License-Identifier: MIT */
/*
 * A write target that polls less often: @n pause instructions after each
 * poll that found nothing (raw --target-pause, tern bench's
 * $TERN_BENCH_TARGET_PAUSE). How fast the target polls moves the
 * initiator's bandwidth: on shm its polls meet the initiator's posts on
 * the region's shared cache lines, on tcp it sets how large a piece of a
 * write each socket read takes (docs/performance.md). Header-only, so
 * that bench/raw stays a program on libfabric alone.
 */
#ifndef TERN_BENCH_PAUSE_H
#define TERN_BENCH_PAUSE_H

static inline void tern_bench_pause(long n)
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
