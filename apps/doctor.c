/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor` (apps/doctor.h): what makes RDMA fail or silently slow on
 * this machine, each finding with its reason and its fix.
 *
 * Facts the findings lean on (docs/cli.md cites them too):
 * - libfabric 2.x's efa provider turns device RDMA off for applications
 *   asking for an API below 1.18 (prov/efa/src/rdm/efa_rdm_util.c).
 * - efa-direct (libfabric 2.x) offers FI_RMA only where the device has
 *   RDMA read and write (efa_prov_info_alloc() in efa_prov_info.c); the
 *   efa fabric offers it either way, emulated where the device has none.
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
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/doctor.h"
#include "apps/json.h"
#include "core/thp.h"

#define CAP_IPC_LOCK_BIT   14
#define CAP_SYS_PTRACE_BIT 19
#define UNLIMITED	   UINT64_MAX

/* Copy @src into @dst of @len bytes, cut where it does not fit. */
static void set(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- findings ------------------------------------------------------- */

static struct doctor_finding *add(struct doctor *d, const char *check,
				  enum doctor_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static struct doctor_finding *add(struct doctor *d, const char *check,
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
	set(x->check, sizeof(x->check), check);
	x->status = st;
	va_start(ap, fmt);
	vsnprintf(x->detail, sizeof(x->detail), fmt, ap);
	va_end(ap);
	return x;
}

static void fix(struct doctor_finding *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fix(struct doctor_finding *x, const char *fmt, ...)
{
	va_list ap;

	if (x == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(x->fix, sizeof(x->fix), fmt, ap);
	va_end(ap);
}

/* Append to a string being built in @buf. */
static void cat(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void cat(char *buf, size_t len, const char *fmt, ...)
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
static void put(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- files under the root ------------------------------------------- */

/* <root> followed by the path @fmt makes, into @buf. */
static const char *at(const struct doctor *d, char *buf, size_t len,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static const char *at(const struct doctor *d, char *buf, size_t len,
		      const char *fmt, ...)
{
	size_t off;
	va_list ap;

	set(buf, len, d->root);
	off = strlen(buf);
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
	return buf;
}

/* The first line of @path (without its newline). @return 0 or -errno. */
static int read_line(const char *path, char *buf, size_t len)
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

static int exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* ---- what several checks share -------------------------------------- */

static int dev_cmp(const void *a, const void *b)
{
	return strcmp(((const struct doctor_dev *)a)->name,
		      ((const struct doctor_dev *)b)->name);
}

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void scan_dev(const struct doctor *d, struct doctor_dev *v)
{
	char path[PATH_MAX], link[PATH_MAX];
	ssize_t n;

	at(d, path, sizeof(path), "/sys/class/infiniband/%s/device/driver",
	   v->name);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		const char *slash;

		link[n] = '\0';
		slash = strrchr(link, '/');
		set(v->driver, sizeof(v->driver), slash ? slash + 1 : link);
	}
	v->efa = strcmp(v->driver, "efa") == 0 ||
		 (v->driver[0] == '\0' &&
		  (starts(v->name, "rdmap") || starts(v->name, "efa_")));
	at(d, path, sizeof(path), "/sys/class/infiniband/%s/fw_ver", v->name);
	read_line(path, v->fw, sizeof(v->fw));
}

/* Which uverbsN belongs to which device (infiniband_verbs/uverbsN/ibdev),
 * and whether /dev/infiniband/uverbsN opens. */
static void scan_uverbs(struct doctor *d)
{
	char path[PATH_MAX], ibdev[64];
	struct dirent *e;
	DIR *dp;

	dp = opendir(at(d, path, sizeof(path), "/sys/class/infiniband_verbs"));
	if (dp == NULL)
		return;
	while ((e = readdir(dp)) != NULL) {
		if (!starts(e->d_name, "uverbs"))
			continue;
		at(d, path, sizeof(path),
		   "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		if (read_line(path, ibdev, sizeof(ibdev)) != 0)
			continue;
		for (size_t i = 0; i < d->ndevs; i++) {
			if (strcmp(d->devs[i].name, ibdev) == 0)
				set(d->devs[i].uverbs,
				    sizeof(d->devs[i].uverbs), e->d_name);
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
		fd = open(at(d, path, sizeof(path), "/dev/infiniband/%s",
			     v->uverbs),
			  O_RDWR | O_CLOEXEC);
		v->open_err = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
}

static void scan(struct doctor *d)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *dp;

	if (d->scanned)
		return;
	d->scanned = 1;
	d->devdir_err = exists(at(d, path, sizeof(path), "/dev/infiniband"))
				? 0
				: errno;
	dp = opendir(at(d, path, sizeof(path), "/sys/class/infiniband"));
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
		set(v->name, sizeof(v->name), e->d_name);
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

static void list(struct doctor *d)
{
	if (d->listed)
		return;
	d->listed = 1;
	d->list_err = tern_info_list(NULL, &d->prov, &d->nprov);
	if (d->list_err != 0) {
		d->prov = NULL;
		d->nprov = 0;
	}
}

/* This process's effective capabilities (<root>/proc/self/status). */
static int has_cap(struct doctor *d, int bit)
{
	char path[PATH_MAX], line[256];
	FILE *f;

	if (!d->caps_known) {
		d->caps_known = 1;
		f = fopen(at(d, path, sizeof(path), "/proc/self/status"), "re");
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

/* Is @name's first component (before ';') @prov? "tcp;ofi_rxm" is tcp. */
static int is_prov(const char *name, const char *prov)
{
	size_t len = strlen(prov);

	return strncmp(name, prov, len) == 0 &&
	       (name[len] == '\0' || name[len] == ';');
}

/* Does $FI_PROVIDER leave @prov out? (A list of names; "^" excludes.) */
static int excluded_by_env(const char *prov)
{
	const char *env = getenv("FI_PROVIDER");
	const char *p;
	int neg, found = 0;

	if (env == NULL || env[0] == '\0')
		return 0;
	neg = env[0] == '^';
	p = env + neg;
	while (*p != '\0') {
		size_t len = strcspn(p, ",");

		if (len == strlen(prov) && strncmp(p, prov, len) == 0)
			found = 1;
		p += len + (p[len] == ',');
	}
	return neg ? found : !found;
}

static int env_false(const char *name)
{
	const char *v = getenv(name);

	return v != NULL &&
	       (strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 ||
		strcasecmp(v, "no") == 0 || strcasecmp(v, "off") == 0);
}

static int env_true(const char *name)
{
	const char *v = getenv(name);

	return v != NULL &&
	       (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
		strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0);
}

static int efa_listed(struct doctor *d)
{
	list(d);
	for (size_t i = 0; i < d->nprov; i++) {
		if (is_prov(d->prov[i].provider, "efa"))
			return 1;
	}
	return 0;
}

/* ---- libfabric: the copies in this process ---------------------------- */

struct copy {
	char path[PATH_MAX];
	char dev[16];
	unsigned long long inode;
	int deleted;
};

/* libfabric.so, libfabric.so.1, libfabric.so.1.20.0, libfabric-1.so... */
static int is_libfabric(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return starts(base, "libfabric.so") ||
	       (starts(base, "libfabric") && strstr(base, ".so") != NULL);
}

/* Add the mapping of @line if it is a libfabric not seen yet. */
static void note_copy(const char *line, struct copy *c, size_t cap, size_t *n)
{
	struct copy one = { 0 };
	char *path;
	int off = 0;
	size_t len;

	if (sscanf(line, "%*s %*s %*s %15s %llu %n", one.dev, &one.inode,
		   &off) < 2 ||
	    off == 0 || line[off] != '/')
		return;
	set(one.path, sizeof(one.path), line + off);
	path = one.path;
	path[strcspn(path, "\n")] = '\0';
	len = strlen(path);
	if (len > 10 && strcmp(path + len - 10, " (deleted)") == 0) {
		path[len - 10] = '\0';
		one.deleted = 1;
	}
	if (!is_libfabric(path))
		return;
	/* One file is one copy, whatever its name (the loader compares
	 * device and inode); the same name with another inode is another
	 * file (replaced on disk after it was loaded). */
	for (size_t i = 0; i < *n; i++) {
		if (one.inode != 0 ? (c[i].inode == one.inode &&
				      strcmp(c[i].dev, one.dev) == 0)
				   : strcmp(c[i].path, path) == 0)
			return;
	}
	if (*n < cap)
		c[(*n)++] = one;
}

void doctor_check_libfabric(struct doctor *d)
{
	char maps[PATH_MAX], list_s[DOCTOR_TEXT_MAX] = "";
	struct doctor_finding *x;
	struct copy copies[8];
	size_t n = 0, len = 0;
	char *line = NULL;
	FILE *f;

	f = fopen(at(d, maps, sizeof(maps), "/proc/self/maps"), "re");
	if (f == NULL) {
		add(d, "libfabric", DOCTOR_WARN,
		    "libfabric %s; the copies mapped into the process could "
		    "not be counted: %s: %s",
		    tern_fabric_version(), maps, strerror(errno));
		return;
	}
	while (getline(&line, &len, f) > 0)
		note_copy(line, copies, sizeof(copies) / sizeof(copies[0]), &n);
	free(line);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		cat(list_s, sizeof(list_s), "%s%s%s", i ? ", " : "",
		    copies[i].path, copies[i].deleted ? " (deleted)" : "");
	if (n == 0) {
		add(d, "libfabric", DOCTOR_WARN,
		    "libfabric %s, but no libfabric.so is mapped (%s): linked "
		    "statically, so another copy in the process could not be "
		    "seen",
		    tern_fabric_version(), maps);
		return;
	}
	if (n > 1) {
		x = add(d, "libfabric", DOCTOR_FAIL,
			"%zu copies of libfabric are mapped into one process "
			"(%s): each keeps its own providers and state, so the "
			"copy a plugin loaded (NCCL's aws-ofi-nccl, a Python "
			"wheel's bundled one) can find no provider (-61) or "
			"other ones than tern's, and a program on it silently "
			"falls back to sockets",
			n, list_s);
		fix(x, "load one libfabric: remove or stop bundling the other "
		       "copy, or point LD_LIBRARY_PATH at the one with your "
		       "providers (AWS's EFA installer: /opt/amazon/efa/lib)");
		return;
	}
	if (copies[0].deleted) {
		x = add(d, "libfabric", DOCTOR_WARN,
			"libfabric %s, one copy: %s, a file replaced or "
			"removed "
			"on disk after it was loaded (upgraded under a running "
			"program)",
			tern_fabric_version(), list_s);
		fix(x, "restart the program so that it loads the installed "
		       "libfabric");
		return;
	}
	add(d, "libfabric", DOCTOR_OK, "libfabric %s, one copy: %s",
	    tern_fabric_version(), list_s);
}

/* ---- the API version tern negotiates -------------------------------- */

static unsigned ver(const char *s)
{
	unsigned major = 0, minor = 0;

	if (sscanf(s, "%u.%u", &major, &minor) != 2)
		return 0;
	return major << 16 | minor;
}

void doctor_check_api(struct doctor *d)
{
	const char *env = getenv("TERN_FI_API");
	char run[16], api[16];
	struct doctor_finding *x;
	int efa;

	/* Copied: each call returns the same static buffer. */
	set(run, sizeof(run), tern_fabric_version());
	set(api, sizeof(api), tern_fabric_api_version());
	scan(d);
	efa = d->nefa > 0 || efa_listed(d);
	if (ver(run) >= ver("2.0") && ver(api) < ver("1.18")) {
		x = add(d, "api", efa ? DOCTOR_WARN : DOCTOR_OK,
			"tern asks libfabric %s for API %s%s: below 1.18 the "
			"efa provider of libfabric 2.x turns device RDMA off, "
			"so every write is emulated with sends (and FI_HMEM "
			"with FI_ATOMIC is refused)%s",
			run, api, env != NULL ? " ($TERN_FI_API)" : "",
			efa ? "" : "; there is no EFA here, so nothing slows");
		fix(x,
		    "unset TERN_FI_API: tern then asks for the highest "
		    "version both it and libfabric %s know",
		    run);
		return;
	}
	add(d, "api", DOCTOR_OK,
	    "tern asks libfabric %s for API %s (%s; built with %s)%s", run, api,
	    env != NULL && ver(env) == ver(api) ? "set by $TERN_FI_API"
						: "the highest both know",
	    tern_fabric_build_version(),
	    ver(run) >= ver("2.0") ? ": efa keeps device RDMA on (1.18+)" : "");
}

/* ---- providers ------------------------------------------------------ */

/* The devices of one kind (EFA or not) that libfabric cannot reach, and
 * why: the status (DOCTOR_OK when none is wrong) with its sentence. */
static enum doctor_status reach(struct doctor *d, int efa, char *why,
				size_t len, char *what, size_t wlen)
{
	char path[PATH_MAX];

	why[0] = what[0] = '\0';
	if (d->devdir_err != 0) {
		put(why, len,
		    "%s does not exist, so libfabric cannot open the "
		    "devices /sys shows (in a container: fi_info -p %s "
		    "returns -61, FI_ENODATA)",
		    at(d, path, sizeof(path), "/dev/infiniband"),
		    efa ? "efa" : "verbs");
		put(what, wlen,
		    "give the container the devices: docker run "
		    "--device=/dev/infiniband/uverbs0 (one per device)%s",
		    efa ? ", or on Kubernetes request "
			  "vpc.amazonaws.com/efa from the EFA device "
			  "plugin"
			: ", or on Kubernetes an RDMA device plugin");
		return DOCTOR_FAIL;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		const struct doctor_dev *v = &d->devs[i];

		if (v->efa != efa)
			continue;
		if (v->uverbs[0] == '\0') {
			cat(why, len, "%s%s has no uverbs device (%s/*/ibdev)",
			    why[0] ? "; " : "", v->name,
			    at(d, path, sizeof(path),
			       "/sys/class/infiniband_verbs"));
			put(what, wlen,
			    "load the kernel's user-verbs module: "
			    "modprobe ib_uverbs");
		} else if (v->open_err != 0) {
			cat(why, len, "%s%s: %s", why[0] ? "; " : "",
			    at(d, path, sizeof(path), "/dev/infiniband/%s",
			       v->uverbs),
			    strerror(v->open_err));
			if (what[0] == '\0')
				put(what, wlen,
				    "let this user open the device "
				    "(permissions, the device cgroup, or "
				    "docker run --device=%s)",
				    at(d, path, sizeof(path),
				       "/dev/infiniband/%s", v->uverbs));
		}
	}
	return why[0] != '\0' ? DOCTOR_FAIL : DOCTOR_OK;
}

/* Domains of @prov that libfabric lists, for the sentence. */
static size_t domains(const struct doctor *d, const char *prov, int usable,
		      char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->nprov; i++) {
		const struct tern_prov_info *p = &d->prov[i];
		int seen = 0;

		if (!is_prov(p->provider, prov) || p->usable != usable)
			continue;
		for (size_t j = 0; j < i; j++) {
			if (is_prov(d->prov[j].provider, prov) &&
			    d->prov[j].usable == usable &&
			    strcmp(d->prov[j].domain, p->domain) == 0)
				seen = 1;
		}
		if (seen)
			continue;
		if (n < 4)
			cat(buf, len, "%s%s", n ? ", " : "", p->domain);
		else if (n == 4)
			cat(buf, len, ", ...");
		n++;
	}
	return n;
}

static void one_provider(struct doctor *d, const char *prov, int any_usable)
{
	char check[DOCTOR_CHECK_MAX], doms[256], why[DOCTOR_TEXT_MAX];
	char what[DOCTOR_TEXT_MAX], path[PATH_MAX];
	const char *fip = getenv("FI_PROVIDER");
	int hw = strcmp(prov, "efa") == 0 || strcmp(prov, "verbs") == 0;
	struct doctor_finding *x;
	size_t n, ndev = 0;

	put(check, sizeof(check), "provider:%s", prov);
	n = domains(d, prov, 1, doms, sizeof(doms));
	if (n > 0) {
		const char *shm = at(d, path, sizeof(path), "/dev/shm");

		if (strcmp(prov, "shm") == 0 && access(shm, W_OK) != 0) {
			x = add(d, check, DOCTOR_WARN,
				"shm is listed, but its endpoints keep their "
				"queues in %s, which this process cannot "
				"write (%s): opening one fails",
				shm, strerror(errno));
			fix(x, "mount a writable tmpfs there (docker: it is "
			       "there unless --ipc=none)");
			return;
		}
		add(d, check, DOCTOR_OK, "listed on %zu domain(s): %s", n,
		    doms);
		return;
	}
	n = domains(d, prov, 0, doms, sizeof(doms));
	if (n > 0) {
		for (size_t i = 0; i < d->nprov; i++) {
			if (is_prov(d->prov[i].provider, prov)) {
				set(why, sizeof(why), d->prov[i].why_not);
				break;
			}
		}
		x = add(d, check, DOCTOR_WARN,
			"listed on %s, but tern cannot use it: %s", doms, why);
		fix(x, "see tern info --all");
		return;
	}
	/* Absent: why. Hardware providers first by their devices. */
	if (hw) {
		int efa = strcmp(prov, "efa") == 0;
		enum doctor_status st;

		for (size_t i = 0; i < d->ndevs; i++)
			ndev += d->devs[i].efa == efa;
		if (ndev == 0) {
			add(d, check, DOCTOR_OK,
			    "absent, and no %s device under %s: nothing to "
			    "use",
			    efa ? "EFA" : "InfiniBand/RoCE",
			    at(d, path, sizeof(path), "/sys/class/infiniband"));
			return;
		}
		st = reach(d, efa, why, sizeof(why), what, sizeof(what));
		if (st == DOCTOR_FAIL) {
			x = add(d, check, DOCTOR_FAIL,
				"absent, though %zu %s device(s) are there: "
				"%s",
				ndev, efa ? "EFA" : "RDMA", why);
			fix(x, "%s", what);
			return;
		}
	}
	if (excluded_by_env(prov)) {
		x = add(d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
			"absent: $FI_PROVIDER=%s leaves it out%s", fip,
			any_usable ? ""
				   : ", and no provider tern can use is "
				     "left");
		fix(x, "unset FI_PROVIDER, or name %s in it", prov);
		return;
	}
	if (hw) {
		x = add(d, check, DOCTOR_FAIL,
			"absent, though %zu device(s) are there and open: "
			"libfabric %s was built without %s, or could not load "
			"what it needs (rdma-core's %s)",
			ndev, tern_fabric_version(), prov,
			strcmp(prov, "efa") == 0 ? "libefa"
						 : "provider for "
						   "the driver");
		fix(x, "%s",
		    strcmp(prov, "efa") == 0
			    ? "install AWS's EFA software (libfabric and "
			      "rdma-core in /opt/amazon/efa) and load that "
			      "libfabric; FI_LOG_LEVEL=info tern info says "
			      "why efa did not start"
			    : "install rdma-core's provider for the NIC "
			      "(ibverbs-providers); FI_LOG_LEVEL=info tern "
			      "info says why verbs did not start");
		return;
	}
	if (strcmp(prov, "shm") == 0 &&
	    access(at(d, path, sizeof(path), "/dev/shm"), W_OK) != 0) {
		x = add(d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
			"absent: shm keeps its queues in %s, which this "
			"process cannot write (%s)",
			path, strerror(errno));
		fix(x, "mount a writable tmpfs on /dev/shm");
		return;
	}
	x = add(d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
		"absent: libfabric %s lists no %s provider (built without "
		"it?)%s",
		tern_fabric_version(), prov,
		any_usable ? "" : "; no provider tern can use is left");
	fix(x, "install a libfabric with %s (Debian: libfabric1)", prov);
}

void doctor_check_providers(struct doctor *d)
{
	static const char *const provs[] = { "efa", "verbs", "tcp", "shm" };
	int any = 0;

	scan(d);
	list(d);
	if (d->list_err != 0) {
		struct doctor_finding *x;

		x = add(d, "providers", DOCTOR_FAIL,
			"libfabric %s could not list its providers: %s",
			tern_fabric_version(), tern_strerror(d->list_err));
		fix(x, "FI_LOG_LEVEL=warn tern info says what libfabric "
		       "refused");
		return;
	}
	for (size_t i = 0; i < d->nprov; i++) {
		for (size_t k = 0; k < 4; k++) {
			if (is_prov(d->prov[i].provider, provs[k]) &&
			    d->prov[i].usable)
				any = 1;
		}
	}
	for (size_t k = 0; k < 4; k++)
		one_provider(d, provs[k], any);
}

/* ---- EFA devices ---------------------------------------------------- */

/* libfabric's efa-direct offering on @dev: 1 with FI_RMA, 0 without,
 * -1 none (libfabric 1.x has no efa-direct). */
static int direct_rma(const struct doctor *d, const char *dev)
{
	size_t len = strlen(dev);

	for (size_t i = 0; i < d->nprov; i++) {
		const struct tern_prov_info *p = &d->prov[i];

		if (is_prov(p->provider, "efa") &&
		    strcmp(p->fabric, "efa-direct") == 0 &&
		    strncmp(p->domain, dev, len) == 0 &&
		    (p->domain[len] == '\0' || p->domain[len] == '-'))
			return p->rma ? 1 : 0;
	}
	return -1;
}

static void efa_rdma(struct doctor *d)
{
	char yes[DOCTOR_TEXT_MAX] = "", no[DOCTOR_TEXT_MAX] = "";
	struct doctor_finding *x;
	size_t nyes = 0, nno = 0, nunk = 0;

	if (env_false("FI_EFA_USE_DEVICE_RDMA")) {
		x = add(d, "efa-rdma", DOCTOR_WARN,
			"$FI_EFA_USE_DEVICE_RDMA=%s turns the devices' RDMA "
			"off: the efa fabric emulates every write and read "
			"with sends",
			getenv("FI_EFA_USE_DEVICE_RDMA"));
		fix(x, "unset FI_EFA_USE_DEVICE_RDMA");
		return;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		int r;

		if (!d->devs[i].efa)
			continue;
		r = direct_rma(d, d->devs[i].name);
		if (r == 1 && nyes++ < 4)
			cat(yes, sizeof(yes), "%s%s", nyes > 1 ? ", " : "",
			    d->devs[i].name);
		else if (r == 0 && nno++ < 4)
			cat(no, sizeof(no), "%s%s", nno > 1 ? ", " : "",
			    d->devs[i].name);
		else if (r < 0)
			nunk++;
	}
	if (nyes > 4)
		cat(yes, sizeof(yes), ", ...");
	if (nno > 4)
		cat(no, sizeof(no), ", ...");
	if (nno > 0) {
		x = add(d, "efa-rdma", DOCTOR_WARN,
			"libfabric's efa-direct offers no RMA on %zu of %zu "
			"EFA "
			"device(s) (%s): the device (or the rdma-core that "
			"reports it) has no RDMA read and write, so writes "
			"are emulated with sends on the efa fabric",
			nno, d->nefa, no);
		fix(x, "an instance type whose EFA does RDMA read and write "
		       "(p4d, p5, trn1 and later), with rdma-core new enough "
		       "to report RDMA write (AWS's EFA installer)");
		return;
	}
	if (nunk == 0) {
		add(d, "efa-rdma", DOCTOR_OK,
		    "device RDMA read and write on all %zu EFA device(s) "
		    "(libfabric's efa-direct offers RMA on %s)",
		    nyes, yes);
		return;
	}
	add(d, "efa-rdma", DOCTOR_OK,
	    "whether the device does RDMA read and write could not be "
	    "determined: %s (efa-direct, libfabric 2.x, offers RMA only "
	    "where the device has it; the efa fabric offers it either way, "
	    "emulated where not)",
	    efa_listed(d) ? "libfabric lists no efa-direct fabric"
			  : "libfabric lists no efa provider");
}

void doctor_check_efa(struct doctor *d)
{
	char devs[DOCTOR_TEXT_MAX] = "", why[DOCTOR_TEXT_MAX];
	char what[DOCTOR_TEXT_MAX], path[PATH_MAX], drv[64];
	struct doctor_finding *x;
	size_t k = 0;

	scan(d);
	list(d);
	if (d->nefa == 0) {
		add(d, "efa", DOCTOR_OK,
		    "no EFA device under %s (not an EFA instance)",
		    at(d, path, sizeof(path), "/sys/class/infiniband"));
		return;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		const struct doctor_dev *v = &d->devs[i];

		if (!v->efa)
			continue;
		if (k++ < 8)
			cat(devs, sizeof(devs), "%s%s (fw %s%s%s)",
			    k > 1 ? ", " : "", v->name, v->fw[0] ? v->fw : "?",
			    v->uverbs[0] ? ", " : "", v->uverbs);
		else if (k == 9)
			cat(devs, sizeof(devs), ", ...");
	}
	if (read_line(at(d, path, sizeof(path), "/sys/module/efa/version"), drv,
		      sizeof(drv)) != 0 ||
	    drv[0] == '\0')
		put(drv, sizeof(drv), "%s",
		    exists(at(d, path, sizeof(path), "/sys/module/efa"))
			    ? "version not reported (the kernel's own "
			      "driver has none)"
			    : "module not seen under /sys/module");
	if (reach(d, 1, why, sizeof(why), what, sizeof(what)) != DOCTOR_OK) {
		x = add(d, "efa", DOCTOR_FAIL,
			"%zu EFA device(s): %s; driver efa %s; but %s", d->nefa,
			devs, drv, why);
		fix(x, "%s", what);
	} else {
		add(d, "efa", DOCTOR_OK, "%zu EFA device(s): %s; driver efa %s",
		    d->nefa, devs, drv);
	}
	efa_rdma(d);
	x = add(d, "efa-network", DOCTOR_OK,
		"not checkable from this host: errors such as \"Unreachable "
		"remote\" or \"Unresponsive receiver\" on the first transfer "
		"to a peer that is running usually mean the security group "
		"lacks its self-referencing rule (EFA traffic must be allowed "
		"from and to the group itself)");
	fix(x, "in the instances' security group, allow all traffic "
	       "inbound from and outbound to that same security group");
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
			put(why, len, "getrlimit: %s", strerror(errno));
			return -1;
		}
		*soft = rl.rlim_cur == RLIM_INFINITY ? UNLIMITED : rl.rlim_cur;
		*hard = rl.rlim_max == RLIM_INFINITY ? UNLIMITED : rl.rlim_max;
		return 0;
	}
	f = fopen(at(d, path, sizeof(path), "/proc/self/limits"), "re");
	if (f == NULL) {
		put(why, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		if (starts(line, "Max locked memory") &&
		    sscanf(line + 17, "%31s %31s", s, h) == 2 &&
		    parse_limit(s, soft) == 0 && parse_limit(h, hard) == 0)
			found = 1;
	}
	fclose(f);
	if (!found) {
		put(why, len, "%s has no readable \"Max locked memory\"", path);
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

	scan(d);
	if (memlock(d, &soft, &hard, why, sizeof(why)) != 0) {
		add(d, "memlock", DOCTOR_WARN,
		    "the locked-memory limit could not be read: %s", why);
		return;
	}
	if (soft == UNLIMITED) {
		add(d, "memlock", DOCTOR_OK,
		    "no limit on locked memory (RLIMIT_MEMLOCK unlimited): a "
		    "region of %s registers",
		    tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	if (soft >= d->region) {
		add(d, "memlock", DOCTOR_OK,
		    "%s of memory may be locked (RLIMIT_MEMLOCK): enough to "
		    "register a region of %s",
		    size_str(soft, a, sizeof(a)),
		    tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	if (has_cap(d, CAP_IPC_LOCK_BIT)) {
		add(d, "memlock", DOCTOR_OK,
		    "only %s of memory may be locked (RLIMIT_MEMLOCK), but "
		    "this process has CAP_IPC_LOCK, which lets it pin past "
		    "the limit: a region of %s registers",
		    size_str(soft, a, sizeof(a)),
		    tern_format_size(d->region, b, sizeof(b)));
		return;
	}
	rdma = d->ndevs > 0;
	x = add(d, "memlock", rdma ? DOCTOR_FAIL : DOCTOR_WARN,
		"only %s of memory may be locked (RLIMIT_MEMLOCK): efa and "
		"verbs pin every byte they register, so a region of %s fails "
		"to register (ENOMEM)%s",
		size_str(soft, a, sizeof(a)),
		tern_format_size(d->region, b, sizeof(b)),
		rdma ? ""
		     : "; no RDMA device here, and tcp and shm pin "
		       "nothing");
	if (hard == UNLIMITED)
		fix(x, "ulimit -l unlimited in the shell that starts tern (the "
		       "hard limit allows it)");
	else if (hard >= d->region)
		fix(x,
		    "ulimit -l %" PRIu64 " (KiB) in the shell that starts "
		    "tern: the hard limit, %s, allows that much",
		    hard / 1024, size_str(hard, c, sizeof(c)));
	else
		fix(x, "raise the hard limit: \"* - memlock unlimited\" in "
		       "/etc/security/limits.conf (then log in again), "
		       "LimitMEMLOCK=infinity for a systemd service, docker "
		       "run --ulimit memlock=-1");
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

	scan(d);
	if (user && (tern_parse_size(v, &chunk) != 0 || chunk < 4096)) {
		x = add(d, "region", DOCTOR_FAIL,
			"TERN_MR_CHUNK=%s is not a size of at least 4K: tern "
			"ignores it",
			v);
		fix(x, "TERN_MR_CHUNK=64G (a power of two; K, M, G)");
		return;
	}
	if (user)
		chunk = 1ULL << (63 - __builtin_clzll(chunk));
	else if (d->ndevs > 0)
		chunk = 1ULL << 36;
	if (chunk == 0 || d->region <= chunk) {
		add(d, "region", DOCTOR_OK,
		    "a region of %s is one registration%s%s",
		    tern_format_size(d->region, a, sizeof(a)),
		    chunk != 0 ? "; longer ones are registered in chunks of "
			       : "",
		    chunk != 0 ? tern_format_size(chunk, b, sizeof(b)) : "");
		return;
	}
	n = d->region / chunk + (d->region % chunk != 0);
	if (n <= TERN_MR_DESC_KEYS32_MAX || !user) {
		while (n > TERN_MR_DESC_KEYS32_MAX) {
			chunk <<= 1;
			n = d->region / chunk + (d->region % chunk != 0);
		}
		add(d, "region", DOCTOR_OK,
		    "a region of %s is registered in %" PRIu64
		    " chunks of %s (%s), on up to %" PRIu64
		    " rails (a descriptor holds %d keys of 32 bits)",
		    tern_format_size(d->region, a, sizeof(a)), n,
		    tern_format_size(chunk, b, sizeof(b)),
		    user ? "TERN_MR_CHUNK" : "EFA's and verbs' default",
		    TERN_MR_DESC_KEYS32_MAX / n, TERN_MR_DESC_KEYS32_MAX);
		return;
	}
	x = add(d, "region", DOCTOR_FAIL,
		"a region of %s in chunks of %s (TERN_MR_CHUNK) needs %" PRIu64
		" chunks: a descriptor holds %d keys, so its registration "
		"is refused (E2BIG)",
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
	fix(x,
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
		x = add(d, "ptrace", DOCTOR_WARN,
			"$FI_SHM_DISABLE_CMA=%s turns off shm's single copy "
			"(process_vm_writev/readv): large transfers between "
			"processes go through bounce buffers in /dev/shm, two "
			"copies instead of one",
			getenv("FI_SHM_DISABLE_CMA"));
		fix(x, "unset FI_SHM_DISABLE_CMA");
		return;
	}
	at(d, path, sizeof(path), "/proc/sys/kernel/yama/ptrace_scope");
	err = read_line(path, val, sizeof(val));
	if (err == -ENOENT) {
		add(d, "ptrace", DOCTOR_OK,
		    "no Yama (%s missing): shm copies between processes of "
		    "one user with process_vm_writev/readv",
		    path);
		return;
	}
	if (err != 0 || sscanf(val, "%d", &scope) != 1) {
		add(d, "ptrace", DOCTOR_WARN,
		    "%s could not be read (%s): whether shm can copy between "
		    "processes in one step is not known",
		    path, err != 0 ? strerror(-err) : "not a number");
		return;
	}
	cap = has_cap(d, CAP_SYS_PTRACE_BIT);
	if (scope <= 0) {
		add(d, "ptrace", DOCTOR_OK,
		    "Yama ptrace_scope %d: shm copies between processes of one "
		    "user with process_vm_writev/readv",
		    scope);
		return;
	}
	if (scope < 3 && cap) {
		add(d, "ptrace", DOCTOR_OK,
		    "Yama ptrace_scope %d, but this process has "
		    "CAP_SYS_PTRACE: shm's process_vm_writev/readv reaches "
		    "its peers",
		    scope);
		return;
	}
	if (scope == 1)
		x = add(d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope 1: process_vm_writev/readv, shm's "
			"single copy, reaches only a process's descendants, "
			"so between processes started side by side (ranks of "
			"one launcher) shm's large transfers go through bounce "
			"buffers in /dev/shm, two copies instead of one");
	else if (scope == 2)
		x = add(d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope 2: only processes with "
			"CAP_SYS_PTRACE may use process_vm_writev/readv, "
			"shm's single copy, so its large transfers go through "
			"bounce buffers in /dev/shm, two copies instead of "
			"one");
	else
		x = add(d, "ptrace", DOCTOR_WARN,
			"Yama ptrace_scope %d: no process, not even root, may "
			"use process_vm_writev/readv, shm's single copy, and "
			"the setting cannot be lowered until reboot: shm's "
			"large transfers go through bounce buffers in "
			"/dev/shm, two copies instead of one",
			scope);
	if (scope >= 3)
		fix(x, "set kernel.yama.ptrace_scope = 0 (or 1) in "
		       "/etc/sysctl.d/ and reboot");
	else
		fix(x, "sysctl -w kernel.yama.ptrace_scope=0 (AWS's EFA "
		       "setup does this on Ubuntu), or run both processes "
		       "as one user with CAP_SYS_PTRACE");
}

/* ---- huge pages ----------------------------------------------------- */

void doctor_check_hugepages(struct doctor *d)
{
	unsigned long long total = 0, freep = 0, kb = 0;
	char path[PATH_MAX], line[256], buf[32];
	struct doctor_finding *x;
	int seen = 0, on;
	FILE *f;

	scan(d);
	f = fopen(at(d, path, sizeof(path), "/proc/meminfo"), "re");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		seen |= sscanf(line, "HugePages_Total: %llu", &total) == 1;
		sscanf(line, "HugePages_Free: %llu", &freep);
		sscanf(line, "Hugepagesize: %llu kB", &kb);
	}
	if (f != NULL)
		fclose(f);
	if (!seen) {
		add(d, "hugepages", DOCTOR_OK,
		    "%s shows no huge pages (none configured)", path);
	} else if (freep == 0 && d->nefa > 0) {
		x = add(d, "hugepages", DOCTOR_WARN,
			"%llu huge page(s) of %s reserved, none free: efa's "
			"own packet buffers use huge pages when there are "
			"free ones, a small gain (fi_efa(7), "
			"FI_EFA_USE_HUGE_PAGE)",
			total, tern_format_size(kb * 1024, buf, sizeof(buf)));
		fix(x, "reserve some: sysctl -w vm.nr_hugepages=N");
	} else if (total == 0) {
		add(d, "hugepages", DOCTOR_OK,
		    "no huge pages reserved (%s pages; HugePages_Total 0): "
		    "nothing here needs them",
		    tern_format_size(kb * 1024, buf, sizeof(buf)));
	} else {
		add(d, "hugepages", DOCTOR_OK,
		    "%llu of %llu huge page(s) of %s free", freep, total,
		    tern_format_size(kb * 1024, buf, sizeof(buf)));
	}

	/*
	 * Transparent huge pages: "always [madvise] never", and what tern
	 * does for its own buffers under it (src/hmem/thp.c).
	 */
	if (read_line(at(d, path, sizeof(path), TERN__THP_PATH), line,
		      sizeof(line)) != 0) {
		add(d, "thp", DOCTOR_OK,
		    "no transparent huge pages (%s missing)", path);
		return;
	}
	on = tern__thp_on();
	switch (tern__thp_parse(line)) {
	case TERN__THP_NEVER:
		x = add(d, "thp", DOCTOR_WARN,
			"transparent huge pages: never: every buffer sits on "
			"4 KiB pages, tern's too, so shm's copies between "
			"processes walk and pin 512 times as many pages as on "
			"2 MiB ones (about half the bandwidth at 16 MiB) and "
			"registering a region gives the NIC as many more "
			"translations to hold");
		fix(x, "echo madvise > "
		       "/sys/kernel/mm/transparent_hugepage/enabled (or "
		       "always)");
		break;
	case TERN__THP_MADVISE:
		add(d, "thp", DOCTOR_OK,
		    "transparent huge pages: madvise: %s; a program's own "
		    "buffers get 2 MiB pages where it asks (madvise "
		    "MADV_HUGEPAGE)",
		    tern__thp_policy(TERN__THP_MADVISE, on));
		break;
	case TERN__THP_ALWAYS:
		add(d, "thp", DOCTOR_OK, "transparent huge pages: always: %s",
		    tern__thp_policy(TERN__THP_ALWAYS, on));
		break;
	default:
		add(d, "thp", DOCTOR_OK, "transparent huge pages: %s", line);
		break;
	}
}

/* ---- CUDA ----------------------------------------------------------- */

/*
 * The CUDA driver, probed here on its own (as bench/copy_limit.c does)
 * rather than through the library: the doctor asks the machine, not
 * tern's loader ($TERN_FAKE_CUDA would answer for the fake), and needs one
 * attribute libtern has no use for.
 */
#define DMA_BUF_SUPPORTED 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
#define NO_DEVICE	  100 /* CUDA_ERROR_NO_DEVICE */

struct cuda_api {
	int (*init)(unsigned);
	int (*version)(int *);
	int (*count)(int *);
	int (*get)(int *, int);
	int (*attr)(int *, int, int);
	int (*errstr)(int, const char **);
};

static const char *cu_err(const struct cuda_api *cu, int r)
{
	const char *s = NULL;

	if (cu->errstr == NULL || cu->errstr(r, &s) != 0 || s == NULL)
		return "unknown error";
	return s;
}

/* The module that lets a NIC register GPU memory without dma-buf:
 * NVIDIA's nvidia_peermem, or AWS's efa_nv_peermem. @return its name. */
static const char *peermem(const struct doctor *d)
{
	static const char *const mods[] = { "nvidia_peermem",
					    "efa_nv_peermem" };
	char path[PATH_MAX], line[256];
	const char *found = NULL;
	FILE *f;

	for (size_t i = 0; i < 2; i++) {
		if (exists(at(d, path, sizeof(path), "/sys/module/%s",
			      mods[i])))
			return mods[i];
	}
	f = fopen(at(d, path, sizeof(path), "/proc/modules"), "re");
	while (f != NULL && found == NULL && fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < 2; i++) {
			size_t len = strlen(mods[i]);

			if (strncmp(line, mods[i], len) == 0 &&
			    line[len] == ' ')
				found = mods[i];
		}
	}
	if (f != NULL)
		fclose(f);
	return found;
}

void doctor_check_cuda(struct doctor *d)
{
	struct cuda_api cu = { 0 };
	int r, ver = 0, ndev = 0, dmabuf = 0, unknown = 0, nic;
	const char *peer;
	struct doctor_finding *x;
	char gpus[64];
	void *h;

	scan(d);
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		add(d, "cuda", DOCTOR_OK,
		    "no CUDA driver (libcuda.so.1 not found): GPU paths not "
		    "needed");
		return;
	}
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.version = dlsym(h, "cuDriverGetVersion");
	*(void **)&cu.count = dlsym(h, "cuDeviceGetCount");
	*(void **)&cu.get = dlsym(h, "cuDeviceGet");
	*(void **)&cu.attr = dlsym(h, "cuDeviceGetAttribute");
	*(void **)&cu.errstr = dlsym(h, "cuGetErrorString");
	if (cu.init == NULL || cu.count == NULL || cu.get == NULL) {
		add(d, "cuda", DOCTOR_WARN,
		    "libcuda.so.1 lacks cuInit, cuDeviceGetCount or "
		    "cuDeviceGet: not a CUDA driver tern can use");
		return;
	}
	r = cu.init(0);
	if (r == NO_DEVICE) {
		add(d, "cuda", DOCTOR_OK,
		    "CUDA driver found, but no GPU: GPU paths not needed");
		return;
	}
	if (r != 0) {
		x = add(d, "cuda", DOCTOR_WARN,
			"the CUDA driver is there, but cuInit failed: %s (%d): "
			"tern cannot use GPU memory",
			cu_err(&cu, r), r);
		fix(x, "nvidia-smi says whether the driver and the GPUs are "
		       "well");
		return;
	}
	if (cu.version != NULL)
		cu.version(&ver);
	if (cu.count(&ndev) != 0)
		ndev = 0;
	for (int i = 0; i < ndev; i++) {
		int dev, v = 0;

		if (cu.attr == NULL || cu.get(&dev, i) != 0 ||
		    cu.attr(&v, DMA_BUF_SUPPORTED, dev) != 0)
			unknown++;
		else if (v != 0)
			dmabuf++;
	}
	peer = peermem(d);
	nic = d->ndevs > 0;
	put(gpus, sizeof(gpus), "CUDA %d.%d, %d GPU(s)", ver / 1000,
	    ver % 1000 / 10, ndev);
	if (dmabuf > 0 || peer != NULL) {
		char how[256] = "";

		if (dmabuf > 0)
			cat(how, sizeof(how), "dma-buf on %d of %d", dmabuf,
			    ndev);
		if (peer != NULL)
			cat(how, sizeof(how), "%s%s loaded", how[0] ? ", " : "",
			    peer);
		add(d, "cuda", DOCTOR_OK,
		    "%s; a NIC can reach GPU memory: %s (zero-copy also needs "
		    "a libfabric with CUDA: tern info says which path GPU "
		    "buffers take)",
		    gpus, how);
		return;
	}
	x = add(d, "cuda", nic ? DOCTOR_WARN : DOCTOR_OK,
		"%s, but %s and no peer-memory module (nvidia_peermem, "
		"efa_nv_peermem) is loaded: no NIC can "
		"reach GPU memory, so tern stages GPU buffers through host "
		"memory%s",
		gpus,
		unknown == ndev ? "dma-buf support is not known"
				: "no dma-buf support",
		nic ? "" : " (and with no RDMA device here, it would anyway)");
	if (nic)
		fix(x, "modprobe nvidia-peermem (on EFA: efa_nv_peermem, from "
		       "AWS's EFA installer), or a driver and kernel with "
		       "dma-buf (NVIDIA's open kernel modules, Linux 5.12 or "
		       "later)");
}

/* ---- the report ----------------------------------------------------- */

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

const struct doctor_finding *doctor_find(const struct doctor *d,
					 const char *check)
{
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->f[i].check, check) == 0)
			return &d->f[i];
	}
	return NULL;
}

enum doctor_status doctor_worst(const struct doctor *d)
{
	enum doctor_status w = d->nomem ? DOCTOR_FAIL : DOCTOR_OK;

	for (size_t i = 0; i < d->n; i++) {
		if (d->f[i].status > w)
			w = d->f[i].status;
	}
	return w;
}

const char *doctor_status_str(enum doctor_status s)
{
	return s == DOCTOR_FAIL ? "fail" : s == DOCTOR_WARN ? "warn" : "ok";
}

void doctor_print_text(const struct doctor *d, FILE *f)
{
	size_t warn = 0, fail = 0;

	for (size_t i = 0; i < d->n; i++) {
		const struct doctor_finding *x = &d->f[i];

		fprintf(f, "%-4s  %-14s %s%s%s\n", doctor_status_str(x->status),
			x->check, x->detail, x->fix[0] ? "; fix: " : "",
			x->fix);
		warn += x->status == DOCTOR_WARN;
		fail += x->status == DOCTOR_FAIL;
	}
	if (d->nomem)
		fprintf(f, "fail  doctor         out of memory: findings "
			   "are missing\n");
	if (fail > 0 || d->nomem)
		fprintf(f,
			"\n%zu failure(s), %zu warning(s): fix the "
			"failures before running tern here\n",
			fail, warn);
	else
		fprintf(f, "\nno failure, %zu warning(s): tern can run here\n",
			warn);
}

void doctor_print_json(const struct doctor *d, FILE *f)
{
	fprintf(f, "{\"findings\": [");
	for (size_t i = 0; i < d->n; i++) {
		const struct doctor_finding *x = &d->f[i];

		fprintf(f, "%s\n  {\"check\": ", i ? "," : "");
		app_json_string(f, x->check, sizeof(x->check));
		fprintf(f, ", \"status\": \"%s\", \"detail\": ",
			doctor_status_str(x->status));
		app_json_string(f, x->detail, sizeof(x->detail));
		fprintf(f, ", \"fix\": ");
		app_json_string(f, x->fix, sizeof(x->fix));
		fprintf(f, "}");
	}
	fprintf(f, "\n], \"ok\": %s}\n",
		doctor_worst(d) == DOCTOR_FAIL ? "false" : "true");
}
