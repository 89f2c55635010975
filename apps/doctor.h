/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor` (apps/doctor*.c): checks of this machine for what makes
 * RDMA fail or silently slow, each a finding (ok, warn or fail) with one
 * sentence of why and, where there is something to do, the fix.
 *
 * Every file a check reads under /sys, /proc or /dev is read under a root
 * prefix (NULL or "": the host), so that the checks run against fixture
 * trees (tests/data/doctor/). What the running process knows by itself
 * is not under the root: the libfabric it loaded and what that lists
 * (tern_info_list()), its environment ($FI_PROVIDER, ...), getrlimit()
 * when no root is given, and the CUDA driver it can load.
 */
#ifndef APP_DOCTOR_H
#define APP_DOCTOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/info.h>

enum doctor_status {
	DOCTOR_OK = 0,	 /* nothing to do */
	DOCTOR_WARN = 1, /* tern runs, but slower or with less than it could */
	DOCTOR_FAIL = 2, /* something tern or RDMA needs is missing */
};

#define DOCTOR_CHECK_MAX 24
#define DOCTOR_TEXT_MAX	 768

struct doctor_finding {
	char check[DOCTOR_CHECK_MAX]; /* "libfabric", "memlock", ... */
	enum doctor_status status;
	char detail[DOCTOR_TEXT_MAX]; /* what was found, and why it matters */
	char fix[DOCTOR_TEXT_MAX];    /* what to do; "" when nothing */
};

/* An RDMA device under <root>/sys/class/infiniband. */
struct doctor_dev {
	char name[64];
	char driver[64]; /* device/driver's name; "" when there is no link */
	char fw[64];	 /* fw_ver; "" when unreadable */
	char uverbs[32]; /* its uverbsN (infiniband_verbs/uverbsN/ibdev) */
	int efa;      /* driver efa, or named rdmap* / efa_* without a link */
	int open_err; /* opening <root>/dev/infiniband/uverbsN: 0 or errno */
};

struct doctor {
	const char *root; /* prefix of every /sys, /proc, /dev path; "" */
	uint64_t region;  /* the region size memlock is checked against */
	struct doctor_finding *f;
	size_t n, cap;
	int nomem; /* a finding could not be stored */
	/* What the checks share, gathered on first use. */
	int scanned;
	struct doctor_dev *devs;
	size_t ndevs, nefa;
	int devdir_err; /* stat <root>/dev/infiniband: 0 or errno */
	int listed;	/* tern_info_list() was called */
	int list_err;	/* what it returned */
	struct tern_prov_info *prov;
	size_t nprov;
	int caps_known; /* CapEff was read */
	uint64_t caps;	/* CapEff of this process (<root>/proc/self/status) */
};

/* @root: NULL or "" for the host. @region: bytes (memlock). */
void doctor_init(struct doctor *d, const char *root, uint64_t region);
void doctor_cleanup(struct doctor *d);

/*
 * The checks, each adding one or more findings. doctor_run() runs them
 * all in the order of docs/cli.md: libfabric (the copies mapped into this
 * process, from <root>/proc/self/maps), api (the version tern negotiates,
 * and EFA's rule below 1.18 on libfabric 2.x), provider:efa, :verbs, :tcp,
 * :shm (present, or absent and why), efa, efa-rdma, efa-network (EFA
 * devices only), memlock, ptrace, hugepages, thp and cuda.
 */
void doctor_check_libfabric(struct doctor *d);
void doctor_check_api(struct doctor *d);
void doctor_check_providers(struct doctor *d);
void doctor_check_efa(struct doctor *d);
void doctor_check_memlock(struct doctor *d);
void doctor_check_region(struct doctor *d);
void doctor_check_ptrace(struct doctor *d);
void doctor_check_hugepages(struct doctor *d);
void doctor_check_cuda(struct doctor *d);
void doctor_run(struct doctor *d);

/* The finding of @check, or NULL. */
const struct doctor_finding *doctor_find(const struct doctor *d,
					 const char *check);
/* The worst status of all findings. */
enum doctor_status doctor_worst(const struct doctor *d);
/* "ok", "warn" or "fail". */
const char *doctor_status_str(enum doctor_status s);

/* One line per finding, then a verdict. */
void doctor_print_text(const struct doctor *d, FILE *f);
/* {"findings": [{"check", "status", "detail", "fix"}], "ok": bool} */
void doctor_print_json(const struct doctor *d, FILE *f);

#endif /* APP_DOCTOR_H */
