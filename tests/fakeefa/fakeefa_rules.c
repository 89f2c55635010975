// SPDX-License-Identifier: MIT
/*
 * fakeefa's knobs and the rules it counts: the TERN_FAKEEFA_* environment
 * (read where each is used, so a test may change it between calls, except
 * TERN_FAKEEFA_MAX_RDMA, read at load), the count of broken rules with its
 * report at exit, the registration faults it injects (TERN_FAKEEFA_MEMLOCK,
 * TERN_FAKEEFA_MAX_MR_SIZE), and the stubs that fill unset ops slots.
 *
 * Environment: TERN_FAKEEFA_PROFILE=direct|efa|both (default both),
 * TERN_FAKEEFA_NICS (default 4), TERN_FAKEEFA_MAX_RDMA (bytes),
 * TERN_FAKEEFA_MEMLOCK=1, TERN_FAKEEFA_MAX_MR_SIZE=N,
 * TERN_FAKEEFA_FAIL=NIC:AFTER:MS[,...] (a link down: see fake_link_down()),
 * TERN_FAKEEFA_VERBOSE (each broken rule and each remote key looked up on
 * stderr), TERN_FAKEEFA_REPORT=path: at exit the fake writes
 * "violations N" there (N = rule violations refused or failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fakeefa.h"

static int violations;
size_t fake_max_rdma = 1 << 20;

void fake_rules_init(void)
{
	const char *m = getenv("TERN_FAKEEFA_MAX_RDMA");

	if (m && strtoull(m, NULL, 0))
		fake_max_rdma = strtoull(m, NULL, 0);
}

void fake_violate(const char *what)
{
	violations++;
	if (getenv("TERN_FAKEEFA_VERBOSE"))
		fprintf(stderr, "fakeefa: rule broken: %s\n", what);
}

/* For tests: dlopen(RTLD_NOLOAD) this library and look this up. */
int fakeefa_violations(void);
__attribute__((visibility("default"))) int fakeefa_violations(void)
{
	return violations;
}

__attribute__((destructor)) static void fake_report(void)
{
	const char *p = getenv("TERN_FAKEEFA_REPORT");
	FILE *f;

	if (!p || !(f = fopen(p, "a")))
		return;
	fprintf(f, "violations %d\n", violations);
	fclose(f);
}

static ssize_t fake_nosys(void)
{
	return -FI_ENOSYS;
}

/* A tagged or atomic op on efa-direct: refused and counted. */
static ssize_t fake_forbidden(void)
{
	fake_violate("tagged or atomic operation on efa-direct");
	return -FI_ENOSYS;
}

/* Fill every unset function slot of an ops table (after its size field)
 * with @fn. */
static void fill_fn(void *ops, size_t sz, ssize_t (*fn)(void))
{
	char *p = (char *)ops + sizeof(size_t);
	void *zero = NULL;

	for (; p + sizeof(fn) <= (char *)ops + sz; p += sizeof(fn))
		if (!memcmp(p, &zero, sizeof(zero)))
			memcpy(p, &fn, sizeof(fn));
}

void fake_fill_nosys(void *ops, size_t sz)
{
	fill_fn(ops, sz, fake_nosys);
}

void fake_fill_forbidden(void *ops, size_t sz)
{
	fill_fn(ops, sz, fake_forbidden);
}

/* ---- profiles ---- */
const char *fake_profile(void)
{
	const char *p = getenv("TERN_FAKEEFA_PROFILE");

	return p && *p ? p : "both";
}

int fake_nnics(void)
{
	const char *n = getenv("TERN_FAKEEFA_NICS");
	int v = n ? atoi(n) : 4;

	return v > 0 && v <= 32 ? v : 4;
}

/* ---- link faults ---- */
/*
 * TERN_FAKEEFA_FAIL=NIC:AFTER:MS[,NIC:AFTER:MS...]: on fake NIC NIC, the
 * first AFTER RMA and atomic operations posted in this process go as
 * usual; then the link is down for MS milliseconds (0: for good), and
 * every such operation completes with FI_EHOSTUNREACH, as EFA's device
 * reports an unreachable peer, moving no byte; after that it is up again.
 */
#define FAKE_FAILS 4

struct fake_fail {
	int nic;
	long after, ms;
	long seen;
	uint64_t down_ns; /* when it went down; 0: not yet */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int fake_link_down(int nic)
{
	static struct fake_fail fails[FAKE_FAILS];
	static int nfails = -1;
	const char *e;

	if (nfails < 0) {
		nfails = 0;
		e = getenv("TERN_FAKEEFA_FAIL");
		while (e != NULL && *e != '\0' && nfails < FAKE_FAILS) {
			struct fake_fail *f = &fails[nfails];

			if (sscanf(e, "%d:%ld:%ld", &f->nic, &f->after,
				   &f->ms) != 3)
				break;
			nfails++;
			e = strchr(e, ',');
			if (e != NULL)
				e++;
		}
	}
	for (int i = 0; i < nfails; i++) {
		struct fake_fail *f = &fails[i];

		if (f->nic != nic || f->seen++ < f->after)
			continue;
		if (f->down_ns == 0) {
			f->down_ns = now_ns();
			if (getenv("TERN_FAKEEFA_VERBOSE"))
				fprintf(stderr, "fakeefa: NIC %d: link down\n",
					nic);
		}
		if (f->ms == 0 ||
		    now_ns() - f->down_ns < (uint64_t)f->ms * 1000000)
			return 1;
	}
	return 0;
}

/* ---- registration faults ---- */
/*
 * TERN_FAKEEFA_MEMLOCK=1: registrations pin their pages as EFA's and
 * verbs' do (ib_umem_get()), counted against RLIMIT_MEMLOCK's soft limit:
 * past it the registration fails -FI_ENOMEM, as the kernel's -ENOMEM for
 * a process without CAP_IPC_LOCK (the fake ignores the capability, so
 * that a test run as root meets the limit too). @pinned: the bytes the
 * fake's live registrations pin.
 */
int fake_memlock_refuses(uint64_t pinned, uint64_t len)
{
	const char *e = getenv("TERN_FAKEEFA_MEMLOCK");
	struct rlimit rl;

	if (e == NULL || strcmp(e, "1") != 0 ||
	    getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return pinned + len > (uint64_t)rl.rlim_cur;
}

/*
 * TERN_FAKEEFA_MAX_MR_SIZE=N: a registration longer than N bytes fails
 * -FI_EINVAL, as ibv_reg_mr() past the device's max_mr_size does (EFA,
 * verbs); libfabric reports no such limit, so nothing else says it.
 */
int fake_max_mr_refuses(uint64_t len)
{
	const char *e = getenv("TERN_FAKEEFA_MAX_MR_SIZE");
	unsigned long long max;
	char *end;

	if (e == NULL)
		return 0;
	max = strtoull(e, &end, 0);
	if (*end != '\0' || max == 0)
		return 0;
	if (len <= max)
		return 0;
	fake_violate("registration past TERN_FAKEEFA_MAX_MR_SIZE");
	return 1;
}
