/* SPDX-License-Identifier: MIT */
/**
 * @file tern/util.h
 * Small helpers users of tern need too: MT19937-64 (bit-exact with C++
 * std::mt19937_64, so either side of a transfer can be written in C or C++)
 * and hex encoding of cards and descriptors. Pure functions on caller-owned
 * state; thread-safe as long as each state is used by one thread.
 */
#ifndef TERN_UTIL_H
#define TERN_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_MT64_N 312

/** MT19937-64 state. Caller-owned; initialise with tern_mt64_seed(). */
struct tern_mt64 {
	uint64_t mt[TERN_MT64_N];
	unsigned int idx;
};

/** Seed like std::mt19937_64(seed); 5489 is the C++ default seed. */
TERN_API void tern_mt64_seed(struct tern_mt64 *rng, uint64_t seed);

/** Next 64-bit output, identical to std::mt19937_64::operator(). */
TERN_API uint64_t tern_mt64_next(struct tern_mt64 *rng);

/**
 * Fill @p len bytes with the generator's stream: each output word is
 * stored little-endian, and a partial last word uses its low bytes first
 * (the remaining bytes of that word are discarded). Consecutive calls with
 * lengths that are multiples of 8 continue one stream.
 */
TERN_API void tern_mt64_fill(struct tern_mt64 *rng, void *buf, size_t len);

/**
 * Encode @p len bytes as lowercase hex into @p out (2*len+1 bytes, NUL
 * terminated).
 * @return 2*len, or -ENOSPC if @p outlen is too small.
 */
TERN_API ssize_t tern_hex_encode(const void *buf, size_t len, char *out,
				 size_t outlen);

/**
 * Decode hex (either case, no separators, even length) into @p out.
 * @return the number of bytes written, -EINVAL on a non-hex character or odd
 * length, -ENOSPC if @p outlen is too small.
 */
TERN_API ssize_t tern_hex_decode(const char *hex, void *out, size_t outlen);

/**
 * Parse a byte size such as "4096", "4K", "1M", "1MiB", "2G" (binary
 * multiples). @return 0 and *val_p, or -EINVAL / -ERANGE.
 */
TERN_API int tern_parse_size(const char *s, uint64_t *val_p);

/** Format @p bytes as "1 MiB", "4 KiB", "1000 B" into buf. @return buf */
TERN_API const char *tern_format_size(uint64_t bytes, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif /* TERN_UTIL_H */
