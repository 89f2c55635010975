/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor`'s findings on what this host's kernel and limits allow
 * (apps/doctor.h): locked memory, regions larger than one registration,
 * Yama's ptrace_scope (shm's single copy) and huge pages.
 *
 * Facts the findings lean on (docs/cli.md cites them too):
 * - shm copies in one step with process_vm_writev/readv (CMA) where its
 *   probe of the peer succeeds (smr_cma_check(), prov/shm); where it does
 *   not, large transfers go through bounce buffers in /dev/shm. Yama's
 *   ptrace_scope filters process_vm_* as it does PTRACE_ATTACH: 1 allows
 *   only descendants, 2 only CAP_SYS_PTRACE, 3 nothing until reboot.
 * - Registering memory on efa or verbs pins it (ib_umem_get): beyond
 *   RLIMIT_MEMLOCK the registration fails with ENOMEM, unless the process
 *   has CAP_IPC_LOCK. tcp and shm pin nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include <tern/tern.h>

#include "apps/doctor_int.h"
#include "core/thp.h"

#define CAP_IPC_LOCK_BIT   14
#define CAP_SYS_PTRACE_BIT 19
#define UNLIMITED	   UINT64_MAX

/* This process's effective capabilities (<root>/proc/self/status). */
static int has_cap(struct doctor *d, int bit)
{
	char path[PATH_MAX], line[256];
	FILE *f;

	if (!d->caps_known) {
		d->caps_known = 1;
		f = fopen(doctor_at(d, path, sizeof(path), "/proc/self/status"),
			  "re");
		while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
			unsigned long long v;

			if (sscanf(line, "CapEff: %llx", &v) == 1)
				d->caps = v;
		}
		if (f != NULL)
			fclose(f);
	}
	return (d->caps >> bit) & 1;
}

static int env_true(const char *name)
{
	const char *v = getenv(name);

	return v != NULL &&
	       (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
		strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0);
}

/* ---- memlock -------------------------------------------------------- */

static int parse_limit(const char *s, uint64_t *v)
{
	char *end;

	if (strcmp(s, "unlimited") == 0) {
		*v = UNLIMITED;
		return 0;
	}
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno != 0 || end == s || *end != '\0' ? -EINVAL : 0;
}

/* RLIMIT_MEMLOCK: from <root>/proc/self/limits when there is a root. */
static int memlock(struct doctor *d, uint64_t *soft, uint64_t *hard, char *why,
		   size_t len)
{
	char path[PATH_MAX], line[256], s[32], h[32];
	struct rlimit rl;
	int found = 0;
	FILE *f;

	if (d->root[0] == '\0') {
		if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
			doctor_put(why, len, "getrlimit: %s", strerror(errno));
			return -1;
		}
		*soft = rl.rlim_cur == RLIM_INFINITY ? UNLIMITED : rl.rlim_cur;
		*hard = rl.rlim_max == RLIM_INFINITY ? UNLIMITED : rl.rlim_max;
		return 0;
	}
	f = fopen(doctor_at(d, path, sizeof(path), "/proc/self/limits"), "re");
	if (f == NULL) {
		doctor_put(why, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if (doctor_starts(line, "Max locked memory") &&
		    sscanf(line + 17, "%31s %31s", s, h) == 2 &&
		    parse_limit(s, soft) == 0 && parse_limit(h, hard) == 0)
			found = 1;
	}
	fclose(f);
	if (!found) {
		doctor_put(why, len, "%s has no readable \"Max locked memory\"",
			   path);
		return -1;
	}
	return 0;
}

static const char *size_str(uint64_t v, char *buf, size_t len)
{
	if (v == UNLIMITED)
		return "unlimited";
	return tern_format_size(v, buf, len);
}

void doctor_check_memlock(struct doctor *d)
{
	char why[DOCTOR_TEXT_MAX], a[32], b[32], c[32];
	uint64_t soft, hard;
	struct doctor_finding *x;
	int rdma;

	doctor_scan(d);
	if (memlock(d, &soft, &hard, why, sizeof(why)) != 0) {
		doctor_add(d, "memlock", DOCTOR_WARN,
			   "the locked-memory limit could not be read: %s",
			   why);
		return;
	}
	if (soft == UNLIMITED) {
		doctor_add(d, "memlock", DOCTOR_OK,
			   "no limit on locked memory (RLIMIT_MEMLOCK "
			   "unlimited): a region of %s registers",
			   tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	if (soft >= d->region) {
		doctor_add(d, "memlock", DOCTOR_OK,
			   "%s of memory may be locked (RLIMIT_MEMLOCK): "
			   "enough to register a region of %s",
			   size_str(soft, a, sizeof(a)),
			   tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	if (has_cap(d, CAP_IPC_LOCK_BIT)) {
		doctor_add(d, "memlock", DOCTOR_OK,
			   "only %s of memory may be locked (RLIMIT_MEMLOCK), "
			   "but this process has CAP_IPC_LOCK, which lets it "
			   "pin past the limit: a region of %s registers",
			   size_str(soft, a, sizeof(a)),
			   tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	rdma = d->ndevs > 0;
	x = doctor_add(
		d, "memlock", rdma ? DOCTOR_FAIL : DOCTOR_WARN,
		"only %s of memory may be locked (RLIMIT_MEMLOCK): efa and "
		"verbs pin every byte they register, so a region of %s fails "
		"to register (ENOMEM)%s",
		size_str(soft, a, sizeof(a)),
		tern_format_size(d->region, b, sizeof(b)),
		rdma ? ""
		     : "; no RDMA device here, and tcp and shm pin nothing");
	if (hard == UNLIMITED)
		doctor_fix(x, "ulimit -l unlimited in the shell that starts "
			      "tern (the hard limit allows it)");
	else if (hard >= d->region)
		doctor_fix(x,
			   "ulimit -l %" PRIu64
			   " (KiB) in the shell that starts tern: the hard "
			   "limit, %s, allows that much",
			   hard / 1024, size_str(hard, c, sizeof(c)));
	else
		doctor_fix(x, "raise the hard limit: \"* - memlock unlimited\" "
			      "in /etc/security/limits.conf (then log in "
			      "again), LimitMEMLOCK=infinity for a systemd "
			      "service, docker run --ulimit memlock=-1");
}

/* ---- regions larger than one registration --------------------------- */

/*
 * How tern will register a region of --region-size (src/engine/mr.c):
 * in one registration, or in chunks of TERN_MR_CHUNK (on EFA and verbs
 * 64 GiB when unset, doubled until the keys fit a descriptor). A chunk
 * size the user set is never widened: past TERN_MR_DESC_KEYS32_MAX keys
 * (chunks times rails) the registration is refused.
 */
void doctor_check_region(struct doctor *d)
{
	const char *v = getenv("TERN_MR_CHUNK");
	char a[32], b[32];
	struct doctor_finding *x;
	uint64_t chunk = 0, n;
	int user = v != NULL && v[0] != '\0';

	doctor_scan(d);
	if (user && (tern_parse_size(v, &chunk) != 0 || chunk < 4096)) {
		x = doctor_add(d, "region", DOCTOR_FAIL,
			       "TERN_MR_CHUNK=%s is not a size of at least 4K: "
			       "tern ignores it",
			       v);
		doctor_fix(x, "TERN_MR_CHUNK=64G (a power of two; K, M, G)");
		return;
	}
	if (user)
		chunk = 1ULL << (63 - __builtin_clzll(chunk));
	else if (d->ndevs > 0)
		chunk = 1ULL << 36;
	if (chunk == 0 || d->region <= chunk) {
		doctor_add(
			d, "region", DOCTOR_OK,
			"a region of %s is one registration%s%s",
			tern_format_size(d->region, a, sizeof(a)),
			chunk != 0
				? "; longer ones are registered in chunks of "
				: "",
			chunk != 0 ? tern_format_size(chunk, b, sizeof(b))
				   : "");
		return;
	}
	n = d->region / chunk + (d->region % chunk != 0);
	if (n <= TERN_MR_DESC_KEYS32_MAX || !user) {
		while (n > TERN_MR_DESC_KEYS32_MAX) {
			chunk <<= 1;
			n = d->region / chunk + (d->region % chunk != 0);
		}
		doctor_add(d, "region", DOCTOR_OK,
			   "a region of %s is registered in %" PRIu64
			   " chunks of %s (%s), on up to %" PRIu64
			   " rails (a descriptor holds %d keys of 32 bits)",
			   tern_format_size(d->region, a, sizeof(a)), n,
			   tern_format_size(chunk, b, sizeof(b)),
			   user ? "TERN_MR_CHUNK" : "EFA's and verbs' default",
			   TERN_MR_DESC_KEYS32_MAX / n,
			   TERN_MR_DESC_KEYS32_MAX);
		return;
	}
	x = doctor_add(
		d, "region", DOCTOR_FAIL,
		"a region of %s in chunks of %s (TERN_MR_CHUNK) needs %" PRIu64
		" chunks: a descriptor holds %d keys, so its registration is "
		"refused (E2BIG)",
		tern_format_size(d->region, a, sizeof(a)),
		tern_format_size(chunk, b, sizeof(b)), n,
		TERN_MR_DESC_KEYS32_MAX);
	while (n > TERN_MR_DESC_KEYS32_MAX) {
		chunk <<= 1;
		n = d->region / chunk + (d->region % chunk != 0);
	}
	/* As the variable takes it: a power of two of at least 4K. */
	if (chunk >= (1ULL << 30))
		snprintf(b, sizeof(b), "%" PRIu64 "G", chunk >> 30);
	else if (chunk >= (1ULL << 20))
		snprintf(b, sizeof(b), "%" PRIu64 "M", chunk >> 20);
	else
		snprintf(b, sizeof(b), "%" PRIu64 "K", chunk >> 10);
	doctor_fix(x,
		   "TERN_MR_CHUNK=%s or more (unset on EFA and verbs: tern "
		   "chooses)",
		   b);
}

/* ---- Yama ptrace_scope and shm's single copy (CMA) ------------------ */

void doctor_check_ptrace(struct doctor *d)
{
	char path[PATH_MAX], val[32];
	struct doctor_finding *x;
	int scope, cap, err;

	if (env_true("FI_SHM_DISABLE_CMA")) {
		x = doctor_add(d, "ptrace", DOCTOR_WARN,
			       "$FI_SHM_DISABLE_CMA=%s turns off shm's single "
			       "copy (process_vm_writev/readv): large "
			       "transfers between processes go through bounce "
			       "buffers in /dev/shm, two copies instead of one",
			       getenv("FI_SHM_DISABLE_CMA"));
		doctor_fix(x, "unset FI_SHM_DISABLE_CMA");
		return;
	}
	doctor_at(d, path, sizeof(path), "/proc/sys/kernel/yama/ptrace_scope");
	err = doctor_read_line(path, val, sizeof(val));
	if (err == -ENOENT) {
		doctor_add(d, "ptrace", DOCTOR_OK,
			   "no Yama (%s missing): shm copies between processes "
			   "of one user with process_vm_writev/readv",
			   path);
		return;
	}
	if (err != 0 || sscanf(val, "%d", &scope) != 1) {
		doctor_add(d, "ptrace", DOCTOR_WARN,
			   "%s could not be read (%s): whether shm can copy "
			   "between processes in one step is not known",
			   path, err != 0 ? strerror(-err) : "not a number");
		return;
	}
	cap = has_cap(d, CAP_SYS_PTRACE_BIT);
	if (scope <= 0) {
		doctor_add(d, "ptrace", DOCTOR_OK,
			   "Yama ptrace_scope %d: shm copies between processes "
			   "of one user with process_vm_writev/readv",
			   scope);
		return;
	}
	if (scope < 3 && cap) {
		doctor_add(d, "ptrace", DOCTOR_OK,
			   "Yama ptrace_scope %d, but this process has "
			   "CAP_SYS_PTRACE: shm's process_vm_writev/readv "
			   "reaches its peers",
			   scope);
		return;
	}
	if (scope == 1)
		x = doctor_add(
			d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope 1: process_vm_writev/readv, shm's "
			"single copy, reaches only a process's descendants, so "
			"between processes started side by side (ranks of one "
			"launcher) shm's large transfers go through bounce "
			"buffers in /dev/shm, two copies instead of one");
	else if (scope == 2)
		x = doctor_add(
			d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope 2: only processes with "
			"CAP_SYS_PTRACE may use process_vm_writev/readv, shm's "
			"single copy, so its large transfers go through bounce "
			"buffers in /dev/shm, two copies instead of one");
	else
		x = doctor_add(
			d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope %d: no process, not even root, may "
			"use process_vm_writev/readv, shm's single copy, and "
			"the setting cannot be lowered until reboot: shm's "
			"large transfers go through bounce buffers in "
			"/dev/shm, two copies instead of one",
			scope);
	if (scope >= 3)
		doctor_fix(x, "set kernel.yama.ptrace_scope = 0 (or 1) in "
			      "/etc/sysctl.d/ and reboot");
	else
		doctor_fix(x, "sysctl -w kernel.yama.ptrace_scope=0 (AWS's EFA "
			      "setup does this on Ubuntu), or run both "
			      "processes as one user with CAP_SYS_PTRACE");
}

/* ---- huge pages ----------------------------------------------------- */

void doctor_check_hugepages(struct doctor *d)
{
	unsigned long long total = 0, freep = 0, kb = 0;
	char path[PATH_MAX], line[256], buf[32];
	struct doctor_finding *x;
	int seen = 0, on;
	FILE *f;

	doctor_scan(d);
	f = fopen(doctor_at(d, path, sizeof(path), "/proc/meminfo"), "re");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		seen |= sscanf(line, "HugePages_Total: %llu", &total) == 1;
		sscanf(line, "HugePages_Free: %llu", &freep);
		sscanf(line, "Hugepagesize: %llu kB", &kb);
	}
	if (f != NULL)
		fclose(f);
	if (!seen) {
		doctor_add(d, "hugepages", DOCTOR_OK,
			   "%s shows no huge pages (none configured)", path);
	} else if (freep == 0 && d->nefa > 0) {
		x = doctor_add(
			d, "hugepages", DOCTOR_WARN,
			"%llu huge page(s) of %s reserved, none free: efa's "
			"own packet buffers use huge pages when there are free "
			"ones, a small gain (fi_efa(7), FI_EFA_USE_HUGE_PAGE)",
			total, tern_format_size(kb * 1024, buf, sizeof(buf)));
		doctor_fix(x, "reserve some: sysctl -w vm.nr_hugepages=N");
	} else if (total == 0) {
		doctor_add(d, "hugepages", DOCTOR_OK,
			   "no huge pages reserved (%s pages; HugePages_Total "
			   "0): nothing here needs them",
			   tern_format_size(kb * 1024, buf, sizeof(buf)));
	} else {
		doctor_add(d, "hugepages", DOCTOR_OK,
			   "%llu of %llu huge page(s) of %s free", freep, total,
			   tern_format_size(kb * 1024, buf, sizeof(buf)));
	}

	/*
	 * Transparent huge pages: "always [madvise] never", and what tern
	 * does for its own buffers under it (src/hmem/thp.c).
	 */
	if (doctor_read_line(doctor_at(d, path, sizeof(path), TERN__THP_PATH),
			     line, sizeof(line)) != 0) {
		doctor_add(d, "thp", DOCTOR_OK,
			   "no transparent huge pages (%s missing)", path);
		return;
	}
	on = tern__thp_on();
	switch (tern__thp_parse(line)) {
	case TERN__THP_NEVER:
		x = doctor_add(
			d, "thp", DOCTOR_WARN,
			"transparent huge pages: never: every buffer sits on 4 "
			"KiB pages, tern's too, so shm's copies between "
			"processes walk and pin 512 times as many pages as on "
			"2 MiB ones (about half the bandwidth at 16 MiB) and "
			"registering a region gives the NIC as many more "
			"translations to hold");
		doctor_fix(x, "echo madvise > "
			      "/sys/kernel/mm/transparent_hugepage/enabled (or "
			      "always)");
		break;
	case TERN__THP_MADVISE:
		doctor_add(d, "thp", DOCTOR_OK,
			   "transparent huge pages: madvise: %s; a program's "
			   "own buffers get 2 MiB pages where it asks (madvise "
			   "MADV_HUGEPAGE)",
			   tern__thp_policy(TERN__THP_MADVISE, on));
		break;
	case TERN__THP_ALWAYS:
		doctor_add(d, "thp", DOCTOR_OK,
			   "transparent huge pages: always: %s",
			   tern__thp_policy(TERN__THP_ALWAYS, on));
		break;
	default:
		doctor_add(d, "thp", DOCTOR_OK, "transparent huge pages: %s",
			   line);
		break;
	}
}
