/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of host memory placement for transparent huge pages
 * (src/hmem/thp.c): reading the kernel's mode, and that tern_mem_alloc()
 * aligns, rounds and advises as that mode says. Whether a range was
 * advised is read back from the kernel: the "hg" flag of its mapping in
 * /proc/self/smaps (MADV_HUGEPAGE).
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <tern/tern.h>

#include "hmem/thp.h"

#define MIB ((size_t)1 << 20)

/* The mapping that holds @p: its bounds and whether it is advised "hg". */
struct vma {
	uintptr_t start, end;
	int hg;
};

static int vma_of(const void *p, struct vma *v)
{
	uintptr_t a = (uintptr_t)p, s, e;
	char line[512];
	int in = 0, found = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		/* "start-end perms ...": no field line ("Size:") parses */
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &s, &e) == 2) {
			in = a >= s && a < e;
			if (in) {
				v->start = s;
				v->end = e;
			}
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			v->hg = strstr(line, " hg") != NULL;
			found = 1;
			in = 0;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

/* Without THP in the kernel, madvise(MADV_HUGEPAGE) fails: no flag. */
static int kernel_has_thp(void)
{
	struct stat st;

	return stat("/sys/kernel/mm/transparent_hugepage", &st) == 0;
}

static void test_thp_parse(void **state)
{
	(void)state;
	assert_int_equal(tern__thp_parse("always [madvise] never\n"),
			 TERN__THP_MADVISE);
	assert_int_equal(tern__thp_parse("[always] madvise never"),
			 TERN__THP_ALWAYS);
	assert_int_equal(tern__thp_parse("always madvise [never]\n"),
			 TERN__THP_NEVER);
	assert_int_equal(tern__thp_parse("always madvise never"),
			 TERN__THP_UNKNOWN);
	assert_int_equal(tern__thp_parse("[inherit]"), TERN__THP_UNKNOWN);
	assert_int_equal(tern__thp_parse(""), TERN__THP_UNKNOWN);
	assert_int_equal(tern__thp_parse(NULL), TERN__THP_UNKNOWN);
	assert_string_equal(tern__thp_name(TERN__THP_MADVISE), "madvise");
	assert_string_equal(tern__thp_name(TERN__THP_ABSENT), "absent");
}

/* The mode of a fixture tree, and of one with no THP at all. */
static void test_thp_mode_root(void **state)
{
	char root[] = "/tmp/tern-thp-XXXXXX", path[256];
	const char *dirs[] = { "/sys", "/sys/kernel", "/sys/kernel/mm",
			       "/sys/kernel/mm/transparent_hugepage" };
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(root));
	assert_int_equal(tern__thp_mode(root), TERN__THP_ABSENT);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
		assert_int_equal(mkdir(path, 0700), 0);
	}
	snprintf(path, sizeof(path), "%s%s", root, TERN__THP_PATH);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("always madvise [never]\n", f);
	fclose(f);
	assert_int_equal(tern__thp_mode(root), TERN__THP_NEVER);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("[always] madvise never\n", f);
	fclose(f);
	assert_int_equal(tern__thp_mode(root), TERN__THP_ALWAYS);
	unlink(path);
	for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i > 0; i--) {
		snprintf(path, sizeof(path), "%s%s", root, dirs[i - 1]);
		rmdir(path);
	}
	rmdir(root);
}

/*
 * From 2 MiB: aligned and rounded up under every mode; advised only in
 * "madvise" mode, over the whole rounded length.
 */
static void test_alloc_follows_mode(void **state)
{
	static const enum tern__thp modes[] = {
		TERN__THP_MADVISE, TERN__THP_ALWAYS,  TERN__THP_NEVER,
		TERN__THP_ABSENT,  TERN__THP_UNKNOWN,
	};
	struct vma v;
	void *p;

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		int advise = modes[i] == TERN__THP_MADVISE;

		assert_int_equal(tern__mem_host_alloc(3 * MIB, 1, modes[i], &p),
				 0);
		assert_int_equal((uintptr_t)p % (2 * MIB), 0);
		memset(p, 1, 3 * MIB);
		assert_int_equal(vma_of(p, &v), 0);
		if (kernel_has_thp())
			assert_int_equal(v.hg, advise);
		if (advise && kernel_has_thp()) {
			/* advice splits the mapping at exactly the range */
			assert_int_equal(v.start, (uintptr_t)p);
			assert_int_equal(v.end - v.start, 4 * MIB);
		}
		free(p);
	}
}

/* Under 2 MiB: page-aligned, not rounded, not advised. */
static void test_alloc_small(void **state)
{
	struct vma v;
	void *p;

	(void)state;
	assert_int_equal(
		tern__mem_host_alloc(2 * MIB - 4096, 1, TERN__THP_MADVISE, &p),
		0);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_int_equal(vma_of(p, &v), 0);
	assert_false(v.hg);
	free(p);
	assert_int_equal(tern__mem_host_alloc(4096, 1, TERN__THP_MADVISE, &p),
			 0);
	assert_int_equal((uintptr_t)p % 4096, 0);
	free(p);
}

/* $TERN_THP=0 (on 0): page-aligned and never advised, even in madvise. */
static void test_alloc_off(void **state)
{
	struct vma v;
	void *p;

	(void)state;
	assert_int_equal(
		tern__mem_host_alloc(16 * MIB, 0, TERN__THP_MADVISE, &p), 0);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_int_equal(vma_of(p, &v), 0);
	assert_false(v.hg);
	free(p);
}

static void test_alloc_overflow(void **state)
{
	void *p = (void *)&p;

	(void)state;
	assert_int_equal(
		tern__mem_host_alloc(SIZE_MAX - 5, 1, TERN__THP_MADVISE, &p),
		-ENOMEM);
	assert_ptr_equal(p, (void *)&p); /* untouched on failure */
}

/* The public call: $TERN_THP and this host's mode decide. */
static void test_mem_alloc_env(void **state)
{
	enum tern__thp mode = tern__thp_mode(NULL);
	struct vma v;
	void *p;

	(void)state;
	assert_int_equal(setenv("TERN_THP", "0", 1), 0);
	assert_int_equal(tern_mem_alloc(TERN_MEM_HOST, -1, 8 * MIB, &p), 0);
	assert_int_equal(vma_of(p, &v), 0);
	assert_false(v.hg);
	assert_int_equal(tern_mem_free(TERN_MEM_HOST, p), 0);

	assert_int_equal(unsetenv("TERN_THP"), 0);
	assert_int_equal(tern_mem_alloc(TERN_MEM_HOST, -1, 8 * MIB, &p), 0);
	assert_int_equal((uintptr_t)p % (2 * MIB), 0);
	assert_int_equal(vma_of(p, &v), 0);
	if (kernel_has_thp())
		assert_int_equal(v.hg, mode == TERN__THP_MADVISE);
	assert_int_equal(tern_mem_free(TERN_MEM_HOST, p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thp_parse),
		cmocka_unit_test(test_thp_mode_root),
		cmocka_unit_test(test_alloc_follows_mode),
		cmocka_unit_test(test_alloc_small),
		cmocka_unit_test(test_alloc_off),
		cmocka_unit_test(test_alloc_overflow),
		cmocka_unit_test(test_mem_alloc_env),
	};

	/*
	 * Every buffer here from its own mapping, unmapped when freed: with
	 * glibc's sliding threshold a freed buffer's advice could stay on
	 * heap memory the next test is given.
	 */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
