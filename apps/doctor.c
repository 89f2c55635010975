/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor` (apps/doctor.h): what makes RDMA fail or silently slow on
 * this machine, each finding with its reason and its fix. This file holds
 * what the checks share (storing findings, reading files under the root,
 * the RDMA devices, found once) and runs the checks in their order: they
 * are in doctor_fabric.c (libfabric, its providers, EFA), doctor_host.c
 * (locked memory, regions, ptrace, huge pages) and doctor_cuda.c;
 * doctor_report.c reads and prints the findings.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/doctor_int.h"

/* ---- findings ------------------------------------------------------- */

struct doctor_finding *doctor_add(struct doctor *d, const char *check,
				  enum doctor_status st, const char *fmt, ...)
{
	struct doctor_finding *x;
	va_list ap;

	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct doctor_finding *f = realloc(d->f, cap * sizeof(*f));

		if (f == NULL) {
			d->nomem = 1;
			return NULL;
		}
		d->f = f;
		d->cap = cap;
	}
	x = &d->f[d->n++];
	memset(x, 0, sizeof(*x));
	doctor_set(x->check, sizeof(x->check), check);
	x->status = st;
	va_start(ap, fmt);
	vsnprintf(x->detail, sizeof(x->detail), fmt, ap);
	va_end(ap);
	return x;
}

void doctor_fix(struct doctor_finding *x, const char *fmt, ...)
{
	va_list ap;

	if (x == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(x->fix, sizeof(x->fix), fmt, ap);
	va_end(ap);
}

/* Append to a string being built in @buf. */
void doctor_cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t off = strlen(buf);
	va_list ap;

	if (off + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
}

/* Write into @buf what @fmt makes, cut where it does not fit. */
void doctor_put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- files under the root ------------------------------------------- */

/* <root> followed by the path @fmt makes, into @buf. */
const char *doctor_at(const struct doctor *d, char *buf, size_t len,
		      const char *fmt, ...)
{
	size_t off;
	va_list ap;

	doctor_set(buf, len, d->root);
	off = strlen(buf);
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
	return buf;
}

/* The first line of @path (without its newline). @return 0 or -errno. */
int doctor_read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int err;

	buf[0] = '\0';
	if (f == NULL)
		return -errno;
	if (fgets(buf, (int)len, f) == NULL) {
		err = ferror(f) ? -EIO : 0;
		fclose(f);
		return err;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* ---- what several checks share -------------------------------------- */

static int dev_cmp(const void *a, const void *b)
{
	return strcmp(((const struct doctor_dev *)a)->name,
		      ((const struct doctor_dev *)b)->name);
}

static void scan_dev(const struct doctor *d, struct doctor_dev *v)
{
	char path[PATH_MAX], link[PATH_MAX];
	ssize_t n;

	doctor_at(d, path, sizeof(path),
		  "/sys/class/infiniband/%s/device/driver", v->name);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		const char *slash;

		link[n] = '\0';
		slash = strrchr(link, '/');
		doctor_set(v->driver, sizeof(v->driver),
			   slash ? slash + 1 : link);
	}
	v->efa = strcmp(v->driver, "efa") == 0 ||
		 (v->driver[0] == '\0' && (doctor_starts(v->name, "rdmap") ||
					   doctor_starts(v->name, "efa_")));
	doctor_at(d, path, sizeof(path), "/sys/class/infiniband/%s/fw_ver",
		  v->name);
	doctor_read_line(path, v->fw, sizeof(v->fw));
}

/* Which uverbsN belongs to which device (infiniband_verbs/uverbsN/ibdev),
 * and whether /dev/infiniband/uverbsN opens. */
static void scan_uverbs(struct doctor *d)
{
	char path[PATH_MAX], ibdev[64];
	struct dirent *e;
	DIR *dp;

	dp = opendir(doctor_at(d, path, sizeof(path),
			       "/sys/class/infiniband_verbs"));
	if (dp == NULL)
		return;
	while ((e = readdir(dp)) != NULL) {
		if (!doctor_starts(e->d_name, "uverbs"))
			continue;
		doctor_at(d, path, sizeof(path),
			  "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		if (doctor_read_line(path, ibdev, sizeof(ibdev)) != 0)
			continue;
		for (size_t i = 0; i < d->ndevs; i++) {
			if (strcmp(d->devs[i].name, ibdev) == 0)
				doctor_set(d->devs[i].uverbs,
					   sizeof(d->devs[i].uverbs),
					   e->d_name);
		}
	}
	closedir(dp);
	for (size_t i = 0; i < d->ndevs; i++) {
		struct doctor_dev *v = &d->devs[i];
		int fd;

		if (v->uverbs[0] == '\0')
			continue;
		/* What libfabric (rdma-core) does with it: open it read-write.
		 * A device cgroup refuses even root here. */
		fd = open(doctor_at(d, path, sizeof(path), "/dev/infiniband/%s",
				    v->uverbs),
			  O_RDWR | O_CLOEXEC);
		v->open_err = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
}

void doctor_scan(struct doctor *d)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *dp;

	if (d->scanned)
		return;
	d->scanned = 1;
	d->devdir_err = doctor_exists(doctor_at(d, path, sizeof(path),
						"/dev/infiniband"))
				? 0
				: errno;
	dp = opendir(doctor_at(d, path, sizeof(path), "/sys/class/infiniband"));
	while (dp != NULL && (e = readdir(dp)) != NULL) {
		struct doctor_dev *v;

		if (e->d_name[0] == '.')
			continue;
		v = realloc(d->devs, (d->ndevs + 1) * sizeof(*v));
		if (v == NULL)
			break;
		d->devs = v;
		v = &d->devs[d->ndevs++];
		memset(v, 0, sizeof(*v));
		doctor_set(v->name, sizeof(v->name), e->d_name);
		scan_dev(d, v);
	}
	if (dp != NULL)
		closedir(dp);
	if (d->ndevs > 1)
		qsort(d->devs, d->ndevs, sizeof(*d->devs), dev_cmp);
	scan_uverbs(d);
	for (size_t i = 0; i < d->ndevs; i++)
		d->nefa += d->devs[i].efa ? 1 : 0;
}

/* ---- running the checks --------------------------------------------- */

void doctor_init(struct doctor *d, const char *root, uint64_t region)
{
	memset(d, 0, sizeof(*d));
	d->root = root != NULL ? root : "";
	d->region = region;
}

void doctor_cleanup(struct doctor *d)
{
	free(d->f);
	free(d->devs);
	tern_info_free(d->prov);
	memset(d, 0, sizeof(*d));
}

void doctor_run(struct doctor *d)
{
	doctor_check_libfabric(d);
	doctor_check_api(d);
	doctor_check_providers(d);
	doctor_check_efa(d);
	doctor_check_memlock(d);
	doctor_check_region(d);
	doctor_check_ptrace(d);
	doctor_check_hugepages(d);
	doctor_check_cuda(d);
}
