/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor`'s findings on libfabric (apps/doctor.h): the copies of it
 * mapped into this process, the API version tern negotiates, the providers
 * tern may use (present, or absent and why) and the EFA devices.
 *
 * Facts the findings lean on (docs/cli.md cites them too):
 * - libfabric 2.x's efa provider turns device RDMA off for applications
 *   asking for an API below 1.18 (prov/efa/src/rdm/efa_rdm_util.c).
 * - efa-direct (libfabric 2.x) offers FI_RMA only where the device has
 *   RDMA read and write (efa_prov_info_alloc() in efa_prov_info.c); the
 *   efa fabric offers it either way, emulated where the device has none.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/doctor_int.h"

/* ---- what the fabric checks share ----------------------------------- */

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
	return doctor_starts(base, "libfabric.so") ||
	       (doctor_starts(base, "libfabric") &&
		strstr(base, ".so") != NULL);
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
	doctor_set(one.path, sizeof(one.path), line + off);
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

	f = fopen(doctor_at(d, maps, sizeof(maps), "/proc/self/maps"), "re");
	if (f == NULL) {
		doctor_add(d, "libfabric", DOCTOR_WARN,
			   "libfabric %s; the copies mapped into the process "
			   "could not be counted: %s: %s",
			   tern_fabric_version(), maps, strerror(errno));
		return;
	}
	while (getline(&line, &len, f) > 0)
		note_copy(line, copies, sizeof(copies) / sizeof(copies[0]), &n);
	free(line);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		doctor_cat(list_s, sizeof(list_s), "%s%s%s", i ? ", " : "",
			   copies[i].path,
			   copies[i].deleted ? " (deleted)" : "");
	if (n == 0) {
		doctor_add(d, "libfabric", DOCTOR_WARN,
			   "libfabric %s, but no libfabric.so is mapped (%s): "
			   "linked statically, so another copy in the process "
			   "could not be seen",
			   tern_fabric_version(), maps);
		return;
	}
	if (n > 1) {
		x = doctor_add(
			d, "libfabric", DOCTOR_FAIL,
			"%zu copies of libfabric are mapped into one process "
			"(%s): each keeps its own providers and state, so the "
			"copy a plugin loaded (NCCL's aws-ofi-nccl, a Python "
			"wheel's bundled one) can find no provider (-61) or "
			"other ones than tern's, and a program on it silently "
			"falls back to sockets",
			n, list_s);
		doctor_fix(
			x,
			"load one libfabric: remove or stop bundling the other "
			"copy, or point LD_LIBRARY_PATH at the one with your "
			"providers (AWS's EFA installer: /opt/amazon/efa/lib)");
		return;
	}
	if (copies[0].deleted) {
		x = doctor_add(d, "libfabric", DOCTOR_WARN,
			       "libfabric %s, one copy: %s, a file replaced or "
			       "removed on disk after it was loaded (upgraded "
			       "under a running program)",
			       tern_fabric_version(), list_s);
		doctor_fix(x, "restart the program so that it loads the "
			      "installed libfabric");
		return;
	}
	doctor_add(d, "libfabric", DOCTOR_OK, "libfabric %s, one copy: %s",
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
	doctor_set(run, sizeof(run), tern_fabric_version());
	doctor_set(api, sizeof(api), tern_fabric_api_version());
	doctor_scan(d);
	efa = d->nefa > 0 || efa_listed(d);
	if (ver(run) >= ver("2.0") && ver(api) < ver("1.18")) {
		x = doctor_add(
			d, "api", efa ? DOCTOR_WARN : DOCTOR_OK,
			"tern asks libfabric %s for API %s%s: below 1.18 the "
			"efa provider of libfabric 2.x turns device RDMA off, "
			"so every write is emulated with sends (and FI_HMEM "
			"with FI_ATOMIC is refused)%s",
			run, api, env != NULL ? " ($TERN_FI_API)" : "",
			efa ? "" : "; there is no EFA here, so nothing slows");
		doctor_fix(x,
			   "unset TERN_FI_API: tern then asks for the highest "
			   "version both it and libfabric %s know",
			   run);
		return;
	}
	doctor_add(d, "api", DOCTOR_OK,
		   "tern asks libfabric %s for API %s (%s; built with %s)%s",
		   run, api,
		   env != NULL && ver(env) == ver(api)
			   ? "set by $TERN_FI_API"
			   : "the highest both know",
		   tern_fabric_build_version(),
		   ver(run) >= ver("2.0") ? ": efa keeps device RDMA on (1.18+)"
					  : "");
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
		doctor_put(why, len,
			   "%s does not exist, so libfabric cannot open the "
			   "devices /sys shows (in a container: fi_info -p %s "
			   "returns -61, FI_ENODATA)",
			   doctor_at(d, path, sizeof(path), "/dev/infiniband"),
			   efa ? "efa" : "verbs");
		doctor_put(
			what, wlen,
			"give the container the devices: docker run "
			"--device=/dev/infiniband/uverbs0 (one per device)%s",
			efa ? ", or on Kubernetes request "
			      "vpc.amazonaws.com/efa from the EFA device plugin"
			    : ", or on Kubernetes an RDMA device plugin");
		return DOCTOR_FAIL;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		const struct doctor_dev *v = &d->devs[i];

		if (v->efa != efa)
			continue;
		if (v->uverbs[0] == '\0') {
			doctor_cat(why, len,
				   "%s%s has no uverbs device (%s/*/ibdev)",
				   why[0] ? "; " : "", v->name,
				   doctor_at(d, path, sizeof(path),
					     "/sys/class/infiniband_verbs"));
			doctor_put(what, wlen,
				   "load the kernel's user-verbs module: "
				   "modprobe ib_uverbs");
		} else if (v->open_err != 0) {
			doctor_cat(why, len, "%s%s: %s", why[0] ? "; " : "",
				   doctor_at(d, path, sizeof(path),
					     "/dev/infiniband/%s", v->uverbs),
				   strerror(v->open_err));
			if (what[0] == '\0')
				doctor_put(what, wlen,
					   "let this user open the device "
					   "(permissions, the device cgroup, "
					   "or docker run --device=%s)",
					   doctor_at(d, path, sizeof(path),
						     "/dev/infiniband/%s",
						     v->uverbs));
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
			doctor_cat(buf, len, "%s%s", n ? ", " : "", p->domain);
		else if (n == 4)
			doctor_cat(buf, len, ", ...");
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

	doctor_put(check, sizeof(check), "provider:%s", prov);
	n = domains(d, prov, 1, doms, sizeof(doms));
	if (n > 0) {
		const char *shm = doctor_at(d, path, sizeof(path), "/dev/shm");

		if (strcmp(prov, "shm") == 0 && access(shm, W_OK) != 0) {
			x = doctor_add(d, check, DOCTOR_WARN,
				       "shm is listed, but its endpoints keep "
				       "their queues in %s, which this process "
				       "cannot write (%s): opening one fails",
				       shm, strerror(errno));
			doctor_fix(x, "mount a writable tmpfs there (docker: "
				      "it is there unless --ipc=none)");
			return;
		}
		doctor_add(d, check, DOCTOR_OK, "listed on %zu domain(s): %s",
			   n, doms);
		return;
	}
	n = domains(d, prov, 0, doms, sizeof(doms));
	if (n > 0) {
		for (size_t i = 0; i < d->nprov; i++) {
			if (is_prov(d->prov[i].provider, prov)) {
				doctor_set(why, sizeof(why),
					   d->prov[i].why_not);
				break;
			}
		}
		x = doctor_add(d, check, DOCTOR_WARN,
			       "listed on %s, but tern cannot use it: %s", doms,
			       why);
		doctor_fix(x, "see tern info --all");
		return;
	}
	/* Absent: why. Hardware providers first by their devices. */
	if (hw) {
		int efa = strcmp(prov, "efa") == 0;
		enum doctor_status st;

		for (size_t i = 0; i < d->ndevs; i++)
			ndev += d->devs[i].efa == efa;
		if (ndev == 0) {
			doctor_add(d, check, DOCTOR_OK,
				   "absent, and no %s device under %s: nothing "
				   "to use",
				   efa ? "EFA" : "InfiniBand/RoCE",
				   doctor_at(d, path, sizeof(path),
					     "/sys/class/infiniband"));
			return;
		}
		st = reach(d, efa, why, sizeof(why), what, sizeof(what));
		if (st == DOCTOR_FAIL) {
			x = doctor_add(
				d, check, DOCTOR_FAIL,
				"absent, though %zu %s device(s) are there: %s",
				ndev, efa ? "EFA" : "RDMA", why);
			doctor_fix(x, "%s", what);
			return;
		}
	}
	if (excluded_by_env(prov)) {
		x = doctor_add(
			d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
			"absent: $FI_PROVIDER=%s leaves it out%s", fip,
			any_usable ? ""
				   : ", and no provider tern can use is left");
		doctor_fix(x, "unset FI_PROVIDER, or name %s in it", prov);
		return;
	}
	if (hw) {
		x = doctor_add(d, check, DOCTOR_FAIL,
			       "absent, though %zu device(s) are there and "
			       "open: libfabric %s was built without %s, or "
			       "could not load what it needs (rdma-core's %s)",
			       ndev, tern_fabric_version(), prov,
			       strcmp(prov, "efa") == 0
				       ? "libefa"
				       : "provider for the driver");
		doctor_fix(x, "%s",
			   strcmp(prov, "efa") == 0
				   ? "install AWS's EFA software (libfabric "
				     "and rdma-core in /opt/amazon/efa) and "
				     "load that libfabric; FI_LOG_LEVEL=info "
				     "tern info says why efa did not start"
				   : "install rdma-core's provider for the NIC "
				     "(ibverbs-providers); FI_LOG_LEVEL=info "
				     "tern info says why verbs did not start");
		return;
	}
	if (strcmp(prov, "shm") == 0 &&
	    access(doctor_at(d, path, sizeof(path), "/dev/shm"), W_OK) != 0) {
		x = doctor_add(d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
			       "absent: shm keeps its queues in %s, which this "
			       "process cannot write (%s)",
			       path, strerror(errno));
		doctor_fix(x, "mount a writable tmpfs on /dev/shm");
		return;
	}
	x = doctor_add(d, check, any_usable ? DOCTOR_WARN : DOCTOR_FAIL,
		       "absent: libfabric %s lists no %s provider (built "
		       "without it?)%s",
		       tern_fabric_version(), prov,
		       any_usable ? "" : "; no provider tern can use is left");
	doctor_fix(x, "install a libfabric with %s (Debian: libfabric1)", prov);
}

void doctor_check_providers(struct doctor *d)
{
	static const char *const provs[] = { "efa", "verbs", "tcp", "shm" };
	int any = 0;

	doctor_scan(d);
	list(d);
	if (d->list_err != 0) {
		struct doctor_finding *x;

		x = doctor_add(d, "providers", DOCTOR_FAIL,
			       "libfabric %s could not list its providers: %s",
			       tern_fabric_version(),
			       tern_strerror(d->list_err));
		doctor_fix(x, "FI_LOG_LEVEL=warn tern info says what libfabric "
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
		x = doctor_add(d, "efa-rdma", DOCTOR_WARN,
			       "$FI_EFA_USE_DEVICE_RDMA=%s turns the devices' "
			       "RDMA off: the efa fabric emulates every write "
			       "and read with sends",
			       getenv("FI_EFA_USE_DEVICE_RDMA"));
		doctor_fix(x, "unset FI_EFA_USE_DEVICE_RDMA");
		return;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		int r;

		if (!d->devs[i].efa)
			continue;
		r = direct_rma(d, d->devs[i].name);
		if (r == 1 && nyes++ < 4)
			doctor_cat(yes, sizeof(yes), "%s%s",
				   nyes > 1 ? ", " : "", d->devs[i].name);
		else if (r == 0 && nno++ < 4)
			doctor_cat(no, sizeof(no), "%s%s", nno > 1 ? ", " : "",
				   d->devs[i].name);
		else if (r < 0)
			nunk++;
	}
	if (nyes > 4)
		doctor_cat(yes, sizeof(yes), ", ...");
	if (nno > 4)
		doctor_cat(no, sizeof(no), ", ...");
	if (nno > 0) {
		x = doctor_add(
			d, "efa-rdma", DOCTOR_WARN,
			"libfabric's efa-direct offers no RMA on %zu of %zu "
			"EFA device(s) (%s): the device (or the rdma-core that "
			"reports it) has no RDMA read and write, so writes are "
			"emulated with sends on the efa fabric",
			nno, d->nefa, no);
		doctor_fix(
			x,
			"an instance type whose EFA does RDMA read and write "
			"(p4d, p5, trn1 and later), with rdma-core new enough "
			"to report RDMA write (AWS's EFA installer)");
		return;
	}
	if (nunk == 0) {
		doctor_add(
			d, "efa-rdma", DOCTOR_OK,
			"device RDMA read and write on all %zu EFA device(s) "
			"(libfabric's efa-direct offers RMA on %s)",
			nyes, yes);
		return;
	}
	doctor_add(d, "efa-rdma", DOCTOR_OK,
		   "whether the device does RDMA read and write could not be "
		   "determined: %s (efa-direct, libfabric 2.x, offers RMA only "
		   "where the device has it; the efa fabric offers it either "
		   "way, emulated where not)",
		   efa_listed(d) ? "libfabric lists no efa-direct fabric"
				 : "libfabric lists no efa provider");
}

void doctor_check_efa(struct doctor *d)
{
	char devs[DOCTOR_TEXT_MAX] = "", why[DOCTOR_TEXT_MAX];
	char what[DOCTOR_TEXT_MAX], path[PATH_MAX], drv[64];
	struct doctor_finding *x;
	size_t k = 0;

	doctor_scan(d);
	list(d);
	if (d->nefa == 0) {
		doctor_add(d, "efa", DOCTOR_OK,
			   "no EFA device under %s (not an EFA instance)",
			   doctor_at(d, path, sizeof(path),
				     "/sys/class/infiniband"));
		return;
	}
	for (size_t i = 0; i < d->ndevs; i++) {
		const struct doctor_dev *v = &d->devs[i];

		if (!v->efa)
			continue;
		if (k++ < 8)
			doctor_cat(devs, sizeof(devs), "%s%s (fw %s%s%s)",
				   k > 1 ? ", " : "", v->name,
				   v->fw[0] ? v->fw : "?",
				   v->uverbs[0] ? ", " : "", v->uverbs);
		else if (k == 9)
			doctor_cat(devs, sizeof(devs), ", ...");
	}
	if (doctor_read_line(
		    doctor_at(d, path, sizeof(path), "/sys/module/efa/version"),
		    drv, sizeof(drv)) != 0 ||
	    drv[0] == '\0')
		doctor_put(drv, sizeof(drv), "%s",
			   doctor_exists(doctor_at(d, path, sizeof(path),
						   "/sys/module/efa"))
				   ? "version not reported (the kernel's own "
				     "driver has none)"
				   : "module not seen under /sys/module");
	if (reach(d, 1, why, sizeof(why), what, sizeof(what)) != DOCTOR_OK) {
		x = doctor_add(d, "efa", DOCTOR_FAIL,
			       "%zu EFA device(s): %s; driver efa %s; but %s",
			       d->nefa, devs, drv, why);
		doctor_fix(x, "%s", what);
	} else {
		doctor_add(d, "efa", DOCTOR_OK,
			   "%zu EFA device(s): %s; driver efa %s", d->nefa,
			   devs, drv);
	}
	efa_rdma(d);
	x = doctor_add(
		d, "efa-network", DOCTOR_OK,
		"not checkable from this host: errors such as \"Unreachable "
		"remote\" or \"Unresponsive receiver\" on the first transfer "
		"to a peer that is running usually mean the security group "
		"lacks its self-referencing rule (EFA traffic must be allowed "
		"from and to the group itself)");
	doctor_fix(x, "in the instances' security group, allow all traffic "
		      "inbound from and outbound to that same security group");
}
