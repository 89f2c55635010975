/* SPDX-License-Identifier: MIT */
/*
 * MT19937-64, bit-exact with C++ std::mt19937_64 (Matsumoto & Nishimura's
 * 2004 64-bit Mersenne Twister with the standard's parameters).
 */
#include <tern/util.h>

#define MM	 156
#define MATRIX_A 0xB5026F5AA96619E9ULL
#define UPPER	 0xFFFFFFFF80000000ULL
#define LOWER	 0x7FFFFFFFULL

void tern_mt64_seed(struct tern_mt64 *rng, uint64_t seed)
{
	rng->mt[0] = seed;
	for (unsigned int i = 1; i < TERN_MT64_N; i++) {
		uint64_t prev = rng->mt[i - 1];

		rng->mt[i] = 6364136223846793005ULL * (prev ^ (prev >> 62)) + i;
	}
	rng->idx = TERN_MT64_N;
}

static inline uint64_t mix(uint64_t hi, uint64_t lo, uint64_t far)
{
	uint64_t x = (hi & UPPER) | (lo & LOWER);

	return far ^ (x >> 1) ^ ((x & 1ULL) ? MATRIX_A : 0);
}

static void twist(struct tern_mt64 *rng)
{
	uint64_t *mt = rng->mt;
	unsigned int i;

	for (i = 0; i < TERN_MT64_N - MM; i++)
		mt[i] = mix(mt[i], mt[i + 1], mt[i + MM]);
	for (; i < TERN_MT64_N - 1; i++)
		mt[i] = mix(mt[i], mt[i + 1], mt[i + MM - TERN_MT64_N]);
	mt[i] = mix(mt[i], mt[0], mt[MM - 1]);
	rng->idx = 0;
}

uint64_t tern_mt64_next(struct tern_mt64 *rng)
{
	uint64_t x;

	if (rng->idx >= TERN_MT64_N)
		twist(rng);
	x = rng->mt[rng->idx++];
	x ^= (x >> 29) & 0x5555555555555555ULL;
	x ^= (x << 17) & 0x71D67FFFEDA60000ULL;
	x ^= (x << 37) & 0xFFF7EEE000000000ULL;
	x ^= x >> 43;
	return x;
}

void tern_mt64_fill(struct tern_mt64 *rng, void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = tern_mt64_next(rng);

		for (int b = 0; b < 8; b++)
			p[i + b] = (unsigned char)(v >> (8 * b));
	}
	if (i < len) {
		uint64_t v = tern_mt64_next(rng);

		for (int b = 0; i < len; i++, b++)
			p[i] = (unsigned char)(v >> (8 * b));
	}
}
