/* SPDX-License-Identifier: MIT */
/*
 * tern doctor's libfabric check in a process that holds two copies of
 * libfabric: the system's (linked) and a copy of the same file under
 * another name, loaded with dlopen(RTLD_LOCAL), as a plugin that bundles
 * its own libfabric does. The check must say ok before, fail after (naming
 * both files), and still fail once the copy's file is deleted.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/doctor.h"
#include "check.h"

/* The path of the libfabric this process linked, from /proc/self/maps. */
static void linked_libfabric(char *out, size_t len)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "r");

	CHECK(f != NULL, "/proc/self/maps");
	out[0] = '\0';
	while (out[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
		char *p = strchr(line, '/');

		line[strcspn(line, "\n")] = '\0';
		if (p != NULL && strstr(p, "/libfabric.so") != NULL)
			snprintf(out, len, "%s", p);
	}
	fclose(f);
	CHECK(out[0] != '\0', "no libfabric.so in /proc/self/maps");
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	CHECK(in >= 0, "open %s", from);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	CHECK(out >= 0, "create %s", to);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n, "write %s", to);
	CHECK(n == 0, "read %s", from);
	close(in);
	CHECK(close(out) == 0, "close %s", to);
}

/* Run the libfabric check alone; @return its finding (copied). */
static struct doctor_finding check_now(void)
{
	struct doctor_finding out;
	struct doctor d;
	const struct doctor_finding *x;

	doctor_init(&d, NULL, 1ULL << 30);
	doctor_check_libfabric(&d);
	x = doctor_find(&d, "libfabric");
	CHECK(x != NULL, "no libfabric finding");
	out = *x;
	doctor_cleanup(&d);
	printf("%s  %s\n", doctor_status_str(out.status), out.detail);
	return out;
}

int main(void)
{
	char sys[PATH_MAX], dir[] = "/tmp/tern-doctor-XXXXXX", copy[PATH_MAX];
	struct doctor_finding x;
	void *h;

	/* libfabric is linked, and tern has used it. */
	printf("libfabric %s\n", tern_fabric_version());
	linked_libfabric(sys, sizeof(sys));

	x = check_now();
	CHECK(x.status == DOCTOR_OK, "one copy: %s", x.detail);
	CHECK(strstr(x.detail, "one copy") != NULL, "%s", x.detail);

	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(copy, sizeof(copy), "%s/libfabric.so.1", dir);
	copy_file(sys, copy);
	h = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL, "dlopen %s: %s", copy, dlerror());

	x = check_now();
	CHECK(x.status == DOCTOR_FAIL, "two copies: %s", x.detail);
	CHECK(strstr(x.detail, "2 copies of libfabric") != NULL, "%s",
	      x.detail);
	CHECK(strstr(x.detail, copy) != NULL, "names %s: %s", copy, x.detail);
	CHECK(strstr(x.detail, sys) != NULL, "names %s: %s", sys, x.detail);

	/* Its file gone, the copy is still in the process. */
	unlink(copy);
	rmdir(dir);
	x = check_now();
	CHECK(x.status == DOCTOR_FAIL, "deleted copy: %s", x.detail);
	CHECK(strstr(x.detail, " (deleted)") != NULL, "%s", x.detail);

	dlclose(h);
	printf("PASS: doctor_copies\n");
	return 0;
}
