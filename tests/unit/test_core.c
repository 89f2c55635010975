/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the core helpers: MT19937-64 against vectors from C++
 * std::mt19937_64 (g++ <random>), the hex codec, size parsing and printing,
 * error strings, log level parsing and the little-endian wire helpers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <tern/common.h>
#include <tern/util.h>

#include "core/core.h"
#include "wire/wire.h"

/* Outputs of std::mt19937_64(seed): the first five and the 1000th. */
struct mt64_vector {
	uint64_t seed;
	uint64_t first[5];
	uint64_t nth1000;
};

static const struct mt64_vector mt64_vectors[] = {
	{ 0ULL,
	  { 2947667278772165694ULL, 18301848765998365067ULL,
	    729919693006235833ULL, 11021831128136023278ULL,
	    10003392056472839596ULL },
	  13588344625309223635ULL },
	{ 1ULL,
	  { 2469588189546311528ULL, 2516265689700432462ULL,
	    8323445853463659930ULL, 387828560950575246ULL,
	    6472927700900931384ULL },
	  6281021426621908634ULL },
	{ 42ULL,
	  { 13930160852258120406ULL, 11788048577503494824ULL,
	    13874630024467741450ULL, 2513787319205155662ULL,
	    16662371453428439381ULL },
	  3828873268105487008ULL },
	{ 46468ULL,
	  { 17661250474522547595ULL, 6151681044693005143ULL,
	    14115382251807844409ULL, 11465853330738321829ULL,
	    3110337811035174421ULL },
	  14650264923442206908ULL },
	{ 18446744073709551615ULL,
	  { 478026398904862820ULL, 13243134898385798468ULL,
	    709236020254955927ULL, 9482188692832154854ULL,
	    17279096482229114326ULL },
	  10740104408641833802ULL },
	{ 0x123456789abcdefULL,
	  { 13169394222641354532ULL, 341231063478520994ULL,
	    9087906688904613890ULL, 14133500640045507207ULL,
	    10409822327491941954ULL },
	  5392944121040915686ULL },
	{ 5489ULL,
	  { 14514284786278117030ULL, 4620546740167642908ULL,
	    13109570281517897720ULL, 17462938647148434322ULL,
	    355488278567739596ULL },
	  10193180073869439881ULL },
};

static void test_mt64_default_seed(void **state)
{
	struct tern_mt64 rng;
	uint64_t v = 0;

	(void)state;
	tern_mt64_seed(&rng, 5489);
	for (int i = 0; i < 10000; i++)
		v = tern_mt64_next(&rng);
	/* The C++ standard's own check: the 10000th output. */
	assert_true(v == 9981545732273789042ULL);
}

static void test_mt64_vectors(void **state)
{
	struct tern_mt64 rng;

	(void)state;
	for (size_t t = 0; t < TERN_ARRAY_SIZE(mt64_vectors); t++) {
		const struct mt64_vector *vec = &mt64_vectors[t];
		uint64_t v = 0;
		int i;

		tern_mt64_seed(&rng, vec->seed);
		for (i = 0; i < 5; i++) {
			v = tern_mt64_next(&rng);
			if (v != vec->first[i])
				fail_msg("seed %llu output %d: %llu, want %llu",
					 (unsigned long long)vec->seed, i + 1,
					 (unsigned long long)v,
					 (unsigned long long)vec->first[i]);
		}
		for (; i < 1000; i++)
			v = tern_mt64_next(&rng);
		if (v != vec->nth1000)
			fail_msg("seed %llu output 1000: %llu, want %llu",
				 (unsigned long long)vec->seed,
				 (unsigned long long)v,
				 (unsigned long long)vec->nth1000);
	}
}

/* Outputs 312 and 313 straddle the first regeneration of the state. */
static void test_mt64_twist_boundary(void **state)
{
	struct tern_mt64 rng;
	uint64_t v311 = 0, v312 = 0;

	(void)state;
	tern_mt64_seed(&rng, 42);
	for (int i = 0; i < 313; i++) {
		uint64_t v = tern_mt64_next(&rng);

		if (i == 311)
			v311 = v;
		if (i == 312)
			v312 = v;
	}
	assert_true(v311 == 5750122803995977291ULL);
	assert_true(v312 == 16623992230603958570ULL);
}

static void test_mt64_reseed(void **state)
{
	struct tern_mt64 rng;

	(void)state;
	tern_mt64_seed(&rng, 1);
	for (int i = 0; i < 500; i++)
		tern_mt64_next(&rng);
	tern_mt64_seed(&rng, 1);
	assert_true(tern_mt64_next(&rng) == 2469588189546311528ULL);
	assert_true(tern_mt64_next(&rng) == 2516265689700432462ULL);
}

/* Expected bytes of @v stored little-endian, written out by hand. */
static void le_bytes(uint64_t v, uint8_t *out, size_t n)
{
	for (size_t b = 0; b < n; b++)
		out[b] = (uint8_t)((v >> (8 * b)) & 0xff);
}

static void test_mt64_fill_words(void **state)
{
	struct tern_mt64 rng;
	uint8_t buf[16], want[16];

	(void)state;
	/* Seed 0: word0 = 0x28e837c5cb41dc3e, stored low byte first. */
	tern_mt64_seed(&rng, 0);
	tern_mt64_fill(&rng, buf, 8);
	assert_int_equal(buf[0], 0x3e);
	assert_int_equal(buf[7], 0x28);
	le_bytes(2947667278772165694ULL, want, 8);
	assert_memory_equal(buf, want, 8);

	/* fill(16) == next() twice, each little-endian. */
	tern_mt64_seed(&rng, 42);
	tern_mt64_fill(&rng, buf, sizeof(buf));
	le_bytes(13930160852258120406ULL, want, 8);
	le_bytes(11788048577503494824ULL, want + 8, 8);
	assert_memory_equal(buf, want, sizeof(buf));
	/* ... and the stream goes on with word 2. */
	assert_true(tern_mt64_next(&rng) == 13874630024467741450ULL);
}

static void test_mt64_fill_partial(void **state)
{
	struct tern_mt64 rng;
	uint8_t buf[16], want[13];

	(void)state;
	memset(buf, 0xa5, sizeof(buf));
	tern_mt64_seed(&rng, 42);
	tern_mt64_fill(&rng, buf, 13);
	le_bytes(13930160852258120406ULL, want, 8);
	le_bytes(11788048577503494824ULL, want + 8, 5);
	assert_memory_equal(buf, want, 13);
	/* Nothing past the end is written. */
	for (size_t i = 13; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xa5);
	/* The rest of word 1 is discarded: the next output is word 2. */
	assert_true(tern_mt64_next(&rng) == 13874630024467741450ULL);

	/* A fill shorter than one word takes that word's low bytes. */
	tern_mt64_seed(&rng, 1);
	tern_mt64_fill(&rng, buf, 3);
	le_bytes(2469588189546311528ULL, want, 3);
	assert_memory_equal(buf, want, 3);
	assert_true(tern_mt64_next(&rng) == 2516265689700432462ULL);
}

static void test_mt64_fill_stream(void **state)
{
	struct tern_mt64 a, b;
	uint8_t one[4096], parts[4096];
	size_t off = 0;
	static const size_t cuts[] = { 8, 24, 0, 512, 2048, 1496, 8 };

	(void)state;
	tern_mt64_seed(&a, 46468);
	tern_mt64_fill(&a, one, sizeof(one));
	tern_mt64_seed(&b, 46468);
	for (size_t i = 0; i < TERN_ARRAY_SIZE(cuts); i++) {
		tern_mt64_fill(&b, parts + off, cuts[i]);
		off += cuts[i];
	}
	assert_int_equal(off, sizeof(parts));
	assert_memory_equal(one, parts, sizeof(one));
	/* Both generators are at the same place in the stream. */
	assert_true(tern_mt64_next(&a) == tern_mt64_next(&b));
}

static void test_mt64_fill_zero(void **state)
{
	struct tern_mt64 rng;
	uint8_t byte = 0x5a;

	(void)state;
	tern_mt64_seed(&rng, 0);
	tern_mt64_fill(&rng, &byte, 0);
	assert_int_equal(byte, 0x5a);
	assert_true(tern_mt64_next(&rng) == 2947667278772165694ULL);
}

static void test_hex_round_trip(void **state)
{
	uint8_t bin[256], back[256];
	char hex[2 * 256 + 1];
	ssize_t n;

	(void)state;
	for (int i = 0; i < 256; i++)
		bin[i] = (uint8_t)i;
	n = tern_hex_encode(bin, sizeof(bin), hex, sizeof(hex));
	assert_int_equal(n, 512);
	assert_int_equal(strlen(hex), 512);
	assert_memory_equal(hex, "000102030405060708090a0b0c0d0e0f", 32);
	assert_string_equal(hex + 480, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
	n = tern_hex_decode(hex, back, sizeof(back));
	assert_int_equal(n, 256);
	assert_memory_equal(bin, back, sizeof(bin));

	/* Empty input encodes to an empty string and decodes to nothing. */
	n = tern_hex_encode(bin, 0, hex, 1);
	assert_int_equal(n, 0);
	assert_string_equal(hex, "");
	assert_int_equal(tern_hex_decode("", back, 0), 0);
}

static void test_hex_upper_case(void **state)
{
	static const uint8_t want[] = { 0xde, 0xad, 0xbe, 0xef, 0x0a };
	uint8_t out[8];

	(void)state;
	assert_int_equal(tern_hex_decode("DEADBEEF0A", out, sizeof(out)), 5);
	assert_memory_equal(out, want, sizeof(want));
	memset(out, 0, sizeof(out));
	assert_int_equal(tern_hex_decode("dEaDbEeF0a", out, sizeof(out)), 5);
	assert_memory_equal(out, want, sizeof(want));
}

static void test_hex_bad_input(void **state)
{
	static const char *const bad[] = {
		"abc", "0", "zz", "0g", "g0", "12 4", "0x12", "12:34", "1-",
	};
	uint8_t out[16];

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
		ssize_t n = tern_hex_decode(bad[i], out, sizeof(out));

		if (n != -EINVAL)
			fail_msg("hex \"%s\": %zd, want -EINVAL", bad[i], n);
	}
}

static void test_hex_no_space(void **state)
{
	static const uint8_t bin[4] = { 1, 2, 3, 4 };
	uint8_t out[4];
	char hex[9];

	(void)state;
	/* The encoder needs room for the NUL too. */
	assert_int_equal(tern_hex_encode(bin, 4, hex, 8), -ENOSPC);
	assert_int_equal(tern_hex_encode(bin, 4, hex, 0), -ENOSPC);
	assert_int_equal(tern_hex_encode(bin, 4, hex, 9), 8);
	assert_string_equal(hex, "01020304");

	assert_int_equal(tern_hex_decode("0102030405", out, 4), -ENOSPC);
	assert_int_equal(tern_hex_decode("01020304", out, 3), -ENOSPC);
	assert_int_equal(tern_hex_decode("01020304", out, 4), 4);
	assert_memory_equal(out, bin, 4);
}

static void test_parse_size_good(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "4096", 4096 },
		{ "0", 0 },
		{ "4K", 4096 },
		{ "4k", 4096 },
		{ "1KiB", 1024 },
		{ "1M", 1ULL << 20 },
		{ "1MiB", 1ULL << 20 },
		{ "1m", 1ULL << 20 },
		{ "16MB", 16ULL << 20 },
		{ "2G", 2ULL << 30 },
		{ "3g", 3ULL << 30 },
		{ "512B", 512 },
		{ "18446744073709551615", UINT64_MAX },
		/* The largest multiple of 1 GiB that fits in 64 bits. */
		{ "17179869183G", 17179869183ULL << 30 },
	};

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(good); i++) {
		uint64_t v = 12345;
		int ret = tern_parse_size(good[i].s, &v);

		if (ret != 0 || v != good[i].v)
			fail_msg("\"%s\": ret %d value %llu, want 0 and %llu",
				 good[i].s, ret, (unsigned long long)v,
				 (unsigned long long)good[i].v);
	}
}

static void test_parse_size_bad(void **state)
{
	static const char *const bad[] = {
		"",    "x",   "1X", "-1",   "1Mx", " 1",   "1 K",  "K",
		"1KK", "1iB", "+4", "4KB5", "1Bi", "0x10", "1.5M",
	};
	static const char *const range[] = {
		"99999999999G",
		"17179869184G",
		"18446744073709551616",
		"99999999999999999999999",
	};

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
		uint64_t v = 12345;
		int ret = tern_parse_size(bad[i], &v);

		if (ret != -EINVAL)
			fail_msg("\"%s\": %d, want -EINVAL", bad[i], ret);
		/* Out-parameters are written only on success. */
		assert_true(v == 12345);
	}
	for (size_t i = 0; i < TERN_ARRAY_SIZE(range); i++) {
		uint64_t v = 12345;
		int ret = tern_parse_size(range[i], &v);

		if (ret != -ERANGE && ret != -EINVAL)
			fail_msg("\"%s\": %d, want -ERANGE", range[i], ret);
		assert_true(v == 12345);
	}
	assert_int_equal(tern_parse_size(NULL, NULL), -EINVAL);
}

static void test_format_size(void **state)
{
	static const struct {
		uint64_t v;
		const char *s;
	} cases[] = {
		{ 1048576, "1 MiB" },
		{ 1000, "1000 B" },
		{ 4096, "4 KiB" },
		{ 0, "0 B" },
		{ 1023, "1023 B" },
		{ 1536, "1536 B" },
		{ 3ULL << 30, "3 GiB" },
		{ 1ULL << 40, "1 TiB" },
		{ 1ULL << 50, "1024 TiB" },
		{ 5ULL << 20 | 1ULL << 10, "5121 KiB" },
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(cases); i++) {
		memset(buf, 'z', sizeof(buf));
		assert_ptr_equal(tern_format_size(cases[i].v, buf, sizeof(buf)),
				 buf);
		assert_string_equal(buf, cases[i].s);
	}
}

static void test_strerror(void **state)
{
	(void)state;
	assert_string_equal(tern_strerror(0), "success");
	for (int e = TERN_EBASE; e < TERN_ELAST; e++) {
		const char *s = tern_strerror(-e);

		assert_non_null(s);
		if (s[0] == '\0' || strcmp(s, "unknown error") == 0)
			fail_msg("code %d has no description", e);
		/* Every code has a description of its own. */
		for (int o = TERN_EBASE; o < e; o++) {
			if (strcmp(s, tern_strerror(-o)) == 0)
				fail_msg("codes %d and %d share \"%s\"", o, e,
					 s);
		}
	}
	assert_string_equal(tern_strerror(-EINVAL), strerror(EINVAL));
	assert_string_equal(tern_strerror(-ETIMEDOUT), strerror(ETIMEDOUT));
	assert_string_equal(tern_strerror(-ENOMEM), strerror(ENOMEM));
	assert_string_equal(tern_strerror(9999), "unknown error");
	assert_string_equal(tern_strerror(-9999), "unknown error");
	assert_string_equal(tern_strerror(-TERN_ELAST), "unknown error");
}

static void test_log_parse_level(void **state)
{
	static const char *const bad[] = {
		"", "4", "-1", "00", "1 ", " 1", "verbose", "warning", "nonex",
	};

	(void)state;
	assert_int_equal(tern_log_parse_level("none"), TERN_LOG_NONE);
	assert_int_equal(tern_log_parse_level("warn"), TERN_LOG_WARN);
	assert_int_equal(tern_log_parse_level("info"), TERN_LOG_INFO);
	assert_int_equal(tern_log_parse_level("debug"), TERN_LOG_DEBUG);
	assert_int_equal(tern_log_parse_level("0"), TERN_LOG_NONE);
	assert_int_equal(tern_log_parse_level("1"), TERN_LOG_WARN);
	assert_int_equal(tern_log_parse_level("2"), TERN_LOG_INFO);
	assert_int_equal(tern_log_parse_level("3"), TERN_LOG_DEBUG);
	assert_int_equal(tern_log_parse_level(NULL), -EINVAL);
	for (size_t i = 0; i < TERN_ARRAY_SIZE(bad); i++) {
		int ret = tern_log_parse_level(bad[i]);

		if (ret != -EINVAL)
			fail_msg("level \"%s\": %d, want -EINVAL", bad[i], ret);
	}
}

static void test_log_set_level(void **state)
{
	enum tern_log_level old = tern_log_get_level();

	(void)state;
	tern_log_set_level(TERN_LOG_DEBUG);
	assert_int_equal(tern_log_get_level(), TERN_LOG_DEBUG);
	tern_log_set_level(TERN_LOG_NONE);
	assert_int_equal(tern_log_get_level(), TERN_LOG_NONE);
	tern_log_set_level(old);
	assert_int_equal(tern_log_get_level(), old);
}

static void test_le_put(void **state)
{
	static const uint8_t w16[] = { 0xaa, 0x34, 0x12, 0xaa };
	static const uint8_t w32[] = { 0xaa, 0x78, 0x56, 0x34, 0x12, 0xaa };
	static const uint8_t w64[] = { 0xaa, 0x08, 0x07, 0x06, 0x05,
				       0x04, 0x03, 0x02, 0x01, 0xaa };
	uint8_t buf[10];

	(void)state;
	/* At an odd offset: no alignment needed, no neighbour touched. */
	memset(buf, 0xaa, sizeof(buf));
	tern__wire_put_u16(buf + 1, 0x1234);
	assert_memory_equal(buf, w16, sizeof(w16));

	memset(buf, 0xaa, sizeof(buf));
	tern__wire_put_u32(buf + 1, 0x12345678u);
	assert_memory_equal(buf, w32, sizeof(w32));

	memset(buf, 0xaa, sizeof(buf));
	tern__wire_put_u64(buf + 1, 0x0102030405060708ULL);
	assert_memory_equal(buf, w64, sizeof(w64));
}

static void test_le_get(void **state)
{
	static const uint8_t b[] = { 0x00, 0x08, 0x07, 0x06, 0x05,
				     0x04, 0x03, 0x02, 0x01 };
	static const uint8_t ff[] = { 0xff, 0xff, 0xff, 0xff,
				      0xff, 0xff, 0xff, 0xff };
	static const uint8_t top[] = { 0, 0, 0, 0x80, 0, 0, 0, 0x80 };

	(void)state;
	assert_int_equal(tern__wire_get_u16(b + 1), 0x0708);
	assert_int_equal(tern__wire_get_u32(b + 1), 0x05060708u);
	assert_true(tern__wire_get_u64(b + 1) == 0x0102030405060708ULL);
	/* High bits set: no sign extension. */
	assert_int_equal(tern__wire_get_u16(ff), 0xffff);
	assert_int_equal(tern__wire_get_u32(ff), 0xffffffffu);
	assert_true(tern__wire_get_u64(ff) == UINT64_MAX);
	assert_int_equal(tern__wire_get_u32(top), 0x80000000u);
	assert_true(tern__wire_get_u64(top) == 0x8000000080000000ULL);
}

static void test_le_round_trip(void **state)
{
	static const uint64_t vals[] = {
		0,
		1,
		0xff,
		0x100,
		0x8000,
		0xffff,
		0x80000000u,
		0xffffffffu,
		0x0123456789abcdefULL,
		0x8000000000000000ULL,
		UINT64_MAX,
	};
	uint8_t buf[8];

	(void)state;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(vals); i++) {
		uint64_t v = vals[i];

		tern__wire_put_u16(buf, (uint16_t)v);
		assert_int_equal(tern__wire_get_u16(buf), (uint16_t)v);
		tern__wire_put_u32(buf, (uint32_t)v);
		assert_int_equal(tern__wire_get_u32(buf), (uint32_t)v);
		tern__wire_put_u64(buf, v);
		assert_true(tern__wire_get_u64(buf) == v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mt64_default_seed),
		cmocka_unit_test(test_mt64_vectors),
		cmocka_unit_test(test_mt64_twist_boundary),
		cmocka_unit_test(test_mt64_reseed),
		cmocka_unit_test(test_mt64_fill_words),
		cmocka_unit_test(test_mt64_fill_partial),
		cmocka_unit_test(test_mt64_fill_stream),
		cmocka_unit_test(test_mt64_fill_zero),
		cmocka_unit_test(test_hex_round_trip),
		cmocka_unit_test(test_hex_upper_case),
		cmocka_unit_test(test_hex_bad_input),
		cmocka_unit_test(test_hex_no_space),
		cmocka_unit_test(test_parse_size_good),
		cmocka_unit_test(test_parse_size_bad),
		cmocka_unit_test(test_format_size),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_log_parse_level),
		cmocka_unit_test(test_log_set_level),
		cmocka_unit_test(test_le_put),
		cmocka_unit_test(test_le_get),
		cmocka_unit_test(test_le_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
