/* SPDX-License-Identifier: MIT */
/* The machine map from hwloc: NUMA nodes, cores, GPUs, RDMA NICs,
 * switches, link speeds; the map's accessors. */
#define _GNU_SOURCE /* sched_getcpu */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hwloc.h>

#include "../core/core.h"
#include "topo_int.h"

/* Copy text from hwloc (that is, possibly from an untrusted file): printable
 * ASCII only, truncated to fit. */
static void copy_clean(char *dst, size_t len, const char *src)
{
	size_t i = 0;

	if (src != NULL) {
		for (; src[i] != '\0' && i + 1 < len; i++) {
			unsigned char c = (unsigned char)src[i];

			dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
		}
	}
	dst[i] = '\0';
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* The first PU of every physical core inside @set (every PU when hwloc
 * reports no cores), ascending. */
static int collect_cores(hwloc_topology_t hw, hwloc_const_cpuset_t set,
			 unsigned **cores_p, size_t *n_p)
{
	hwloc_obj_type_t type = HWLOC_OBJ_CORE;
	unsigned *cores = NULL;
	size_t n = 0;
	int nobj;

	*cores_p = NULL;
	*n_p = 0;
	if (set == NULL)
		return 0;
	if (hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE) <= 0)
		type = HWLOC_OBJ_PU;
	nobj = hwloc_get_nbobjs_by_type(hw, type);
	if (nobj <= 0)
		return 0;
	cores = calloc((size_t)nobj, sizeof(*cores));
	if (cores == NULL)
		return -ENOMEM;
	for (int i = 0; i < nobj; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(hw, type, (unsigned)i);
		int first;

		if (o == NULL || o->cpuset == NULL ||
		    !hwloc_bitmap_isincluded(o->cpuset, set))
			continue;
		first = hwloc_bitmap_first(o->cpuset);
		if (first < 0)
			continue;
		cores[n++] = (unsigned)first;
	}
	qsort(cores, n, sizeof(*cores), cmp_unsigned);
	if (n == 0) {
		free(cores);
		cores = NULL;
	}
	*cores_p = cores;
	*n_p = n;
	return 0;
}

/* The NUMA node of an I/O object: its non-I/O ancestor's, when single. */
static int io_numa(hwloc_topology_t hw, hwloc_obj_t obj)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, obj);

	if (anc == NULL || anc->nodeset == NULL ||
	    hwloc_bitmap_weight(anc->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(anc->nodeset);
}

int tern__topo_is_below(hwloc_obj_t obj, hwloc_obj_t root)
{
	for (hwloc_obj_t p = obj->parent; p != NULL; p = p->parent) {
		if (p == root)
			return 1;
	}
	return 0;
}

void tern__topo_bridge_name(hwloc_obj_t b, char *buf, size_t len)
{
	const struct hwloc_bridge_attr_s *a = &b->attr->bridge;

	if (a->upstream_type == HWLOC_OBJ_BRIDGE_PCI)
		snprintf(buf, len, "%04x:%02x:%02x.%01x",
			 (unsigned)a->upstream.pci.domain, a->upstream.pci.bus,
			 a->upstream.pci.dev, a->upstream.pci.func & 0xf);
	else
		snprintf(buf, len, "%04x:[%02x-%02x]",
			 (unsigned)a->downstream.pci.domain,
			 a->downstream.pci.secondary_bus,
			 a->downstream.pci.subordinate_bus);
}

static int same_slot(hwloc_obj_t a, hwloc_obj_t b)
{
	return a->attr->pcidev.domain == b->attr->pcidev.domain &&
	       a->attr->pcidev.bus == b->attr->pcidev.bus &&
	       a->attr->pcidev.dev == b->attr->pcidev.dev;
}

/* Whether the subtree of @x holds a PCI device in another slot than @d's
 * (walked without recursion: the depth comes from the file). */
static int subtree_has_other(hwloc_obj_t x, hwloc_obj_t d)
{
	hwloc_obj_t o = x;

	for (;;) {
		if (o->type == HWLOC_OBJ_PCI_DEVICE && !same_slot(o, d))
			return 1;
		if (o->io_first_child != NULL) {
			o = o->io_first_child;
			continue;
		}
		while (o != x && o->next_sibling == NULL)
			o = o->parent;
		if (o == x)
			return 0;
		o = o->next_sibling;
	}
}

/* The PCIe switch a device sits under: the nearest bridge above it that
 * leads to another device (slot); its host bridge when none does. Each
 * level only looks at the branches not yet seen. */
static void device_switch(hwloc_obj_t dev, char *buf, size_t len)
{
	hwloc_obj_t from = dev, top = NULL;

	buf[0] = '\0';
	for (hwloc_obj_t b = dev->parent;
	     b != NULL && b->type == HWLOC_OBJ_BRIDGE;
	     from = b, b = b->parent) {
		top = b;
		for (hwloc_obj_t x = b->io_first_child; x != NULL;
		     x = x->next_sibling) {
			if (x != from && subtree_has_other(x, dev)) {
				tern__topo_bridge_name(b, buf, len);
				return;
			}
		}
	}
	if (top != NULL)
		tern__topo_bridge_name(top, buf, len);
}

static double pcie_gbps(hwloc_obj_t o)
{
	double v = (double)o->attr->pcidev.linkspeed * 8.0;

	return (isfinite(v) && v > 0.0 && v < 1e5) ? v : 0.0;
}

static void pci_busid(hwloc_obj_t o, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%01x",
		 (unsigned)o->attr->pcidev.domain, o->attr->pcidev.bus,
		 o->attr->pcidev.dev, o->attr->pcidev.func & 0xf);
}

static hwloc_obj_t child_osdev(hwloc_obj_t pci, hwloc_obj_osdev_type_t type,
			       const char *subtype)
{
	for (hwloc_obj_t c = pci->io_first_child; c != NULL;
	     c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE ||
		    c->attr->osdev.type != type)
			continue;
		if (subtype == NULL ||
		    (c->subtype != NULL && strcmp(c->subtype, subtype) == 0))
			return c;
	}
	return NULL;
}

static int is_gpu(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;

	return o->attr->pcidev.vendor_id == VENDOR_NVIDIA &&
	       (cls == 0x0300 || cls == 0x0302);
}

static int nic_kind(hwloc_obj_t o, int *rdma_p)
{
	unsigned vendor = o->attr->pcidev.vendor_id;
	unsigned device = o->attr->pcidev.device_id;
	unsigned base = o->attr->pcidev.class_id >> 8;
	int rdma = child_osdev(o, HWLOC_OBJ_OSDEV_OPENFABRICS, NULL) != NULL;

	*rdma_p = rdma;
	if (vendor == VENDOR_AMAZON && (device & 0xfff0) == 0xefa0)
		return TERN_TOPO_NIC_EFA;
	if (vendor == VENDOR_MELLANOX &&
	    (base == 0x02 || o->attr->pcidev.class_id == 0x0c06))
		return TERN_TOPO_NIC_MLX;
	return rdma ? TERN_TOPO_NIC_RDMA : 0;
}

static const char *info(hwloc_obj_t o, const char *name)
{
	return o == NULL ? NULL : hwloc_obj_get_info_by_name(o, name);
}

/* One GPU: a PCI device (@pci), or a CUDA/NVML OS device hwloc could not
 * place on PCI (@osdev, @pci NULL). */
static int add_gpu(struct tern_topo *t, hwloc_obj_t pci, hwloc_obj_t osdev)
{
	struct tern_topo_gpu *g = &t->gpus[t->ngpus];
	hwloc_obj_t cuda = NULL, nvml = NULL, ocl = NULL, where;
	const char *model;
	hwloc_obj_t anc;
	int ret;

	if (pci != NULL) {
		cuda = child_osdev(pci, HWLOC_OBJ_OSDEV_COPROC, "CUDA");
		nvml = child_osdev(pci, HWLOC_OBJ_OSDEV_GPU, "NVML");
		ocl = child_osdev(pci, HWLOC_OBJ_OSDEV_COPROC, "OpenCL");
		pci_busid(pci, g->busid, sizeof(g->busid));
		g->vendor_id = pci->attr->pcidev.vendor_id;
		g->device_id = pci->attr->pcidev.device_id;
		g->pcie_gbps = pcie_gbps(pci);
		device_switch(pci, g->sw, sizeof(g->sw));
		where = pci;
	} else {
		if (osdev->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC)
			cuda = osdev;
		else
			nvml = osdev;
		where = osdev;
	}
	if (cuda != NULL)
		copy_clean(g->cuda, sizeof(g->cuda), cuda->name);
	if (nvml != NULL)
		copy_clean(g->nvml, sizeof(g->nvml), nvml->name);
	model = info(cuda, "GPUModel");
	if (model == NULL)
		model = info(nvml, "GPUModel");
	if (model == NULL)
		model = info(ocl, "GPUModel");
	if (model == NULL)
		model = info(pci, "PCIDevice");
	copy_clean(g->model, sizeof(g->model), model);
	g->numa = io_numa(t->hw, where);
	anc = hwloc_get_non_io_ancestor_obj(t->hw, where);
	ret = collect_cores(t->hw, anc != NULL ? anc->cpuset : NULL, &g->cores,
			    &g->ncores);
	if (ret != 0)
		return ret;
	t->gpu_obj[t->ngpus++] = where;
	return 0;
}

static int add_nic(struct tern_topo *t, hwloc_obj_t pci, int kind, int rdma)
{
	struct tern_topo_nic *n = &t->nics[t->nnics];
	hwloc_obj_t ofed = child_osdev(pci, HWLOC_OBJ_OSDEV_OPENFABRICS, NULL);
	hwloc_obj_t net = child_osdev(pci, HWLOC_OBJ_OSDEV_NETWORK, NULL);

	if (ofed != NULL)
		copy_clean(n->name, sizeof(n->name), ofed->name);
	if (net != NULL)
		copy_clean(n->netdev, sizeof(n->netdev), net->name);
	copy_clean(n->model, sizeof(n->model), info(pci, "PCIDevice"));
	pci_busid(pci, n->busid, sizeof(n->busid));
	device_switch(pci, n->sw, sizeof(n->sw));
	n->vendor_id = pci->attr->pcidev.vendor_id;
	n->device_id = pci->attr->pcidev.device_id;
	n->class_id = pci->attr->pcidev.class_id;
	n->kind = (enum tern_topo_nic_kind)kind;
	n->numa = io_numa(t->hw, pci);
	n->pcie_gbps = pcie_gbps(pci);
	/* Without an RDMA driver there is no device to open. */
	n->usable = rdma && n->name[0] != '\0';
	t->nic_obj[t->nnics++] = ofed != NULL ? ofed : pci;
	return 0;
}

/* Devices sort by PCI bus id: fixed-width lower-case hex sorts like the
 * numbers. Sorting moves each device with its hwloc object. */
struct by_busid {
	const char *busid;
	size_t idx;
};

static int cmp_busid(const void *a, const void *b)
{
	return strcmp(((const struct by_busid *)a)->busid,
		      ((const struct by_busid *)b)->busid);
}

static int sort_devices(struct tern_topo *t)
{
	size_t n = TERN_MAX(t->ngpus, t->nnics);
	struct by_busid *keys = calloc(n + 1, sizeof(*keys));
	struct tern_topo_gpu *gpus = calloc(t->ngpus + 1, sizeof(*gpus));
	struct tern_topo_nic *nics = calloc(t->nnics + 1, sizeof(*nics));
	hwloc_obj_t *objs = calloc(n + 1, sizeof(*objs));
	int ret = -ENOMEM;

	if (keys == NULL || gpus == NULL || nics == NULL || objs == NULL)
		goto out;
	for (size_t i = 0; i < t->ngpus; i++)
		keys[i] = (struct by_busid){ t->gpus[i].busid, i };
	qsort(keys, t->ngpus, sizeof(*keys), cmp_busid);
	for (size_t i = 0; i < t->ngpus; i++) {
		gpus[i] = t->gpus[keys[i].idx];
		objs[i] = t->gpu_obj[keys[i].idx];
	}
	memcpy(t->gpus, gpus, t->ngpus * sizeof(*gpus));
	memcpy(t->gpu_obj, objs, t->ngpus * sizeof(*objs));
	for (size_t i = 0; i < t->nnics; i++)
		keys[i] = (struct by_busid){ t->nics[i].busid, i };
	qsort(keys, t->nnics, sizeof(*keys), cmp_busid);
	for (size_t i = 0; i < t->nnics; i++) {
		nics[i] = t->nics[keys[i].idx];
		objs[i] = t->nic_obj[keys[i].idx];
	}
	memcpy(t->nics, nics, t->nnics * sizeof(*nics));
	memcpy(t->nic_obj, objs, t->nnics * sizeof(*objs));
	ret = 0;
out:
	free(objs);
	free(nics);
	free(gpus);
	free(keys);
	return ret;
}

static int find_devices(struct tern_topo *t)
{
	hwloc_obj_t o = NULL;
	size_t npci = 0, nos = 0;
	int ret;

	while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL)
		npci++;
	while ((o = hwloc_get_next_osdev(t->hw, o)) != NULL)
		nos++;
	if (npci > TERN_TOPO_PCI_MAX || nos > TERN_TOPO_PCI_MAX) {
		tern__info("topo: %zu PCI and %zu OS devices: more than %u, "
			   "refusing the topology",
			   npci, nos, TERN_TOPO_PCI_MAX);
		return -E2BIG;
	}
	t->gpus = calloc(npci + nos + 1, sizeof(*t->gpus));
	t->gpu_obj = calloc(npci + nos + 1, sizeof(*t->gpu_obj));
	t->nics = calloc(npci + 1, sizeof(*t->nics));
	t->nic_obj = calloc(npci + 1, sizeof(*t->nic_obj));
	if (t->gpus == NULL || t->gpu_obj == NULL || t->nics == NULL ||
	    t->nic_obj == NULL)
		return -ENOMEM;
	while ((o = hwloc_get_next_pcidev(t->hw, o)) != NULL) {
		int kind, rdma;

		if (is_gpu(o)) {
			ret = add_gpu(t, o, NULL);
			if (ret != 0)
				return ret;
			continue;
		}
		kind = nic_kind(o, &rdma);
		if (kind != 0) {
			ret = add_nic(t, o, kind, rdma);
			if (ret != 0)
				return ret;
		}
	}
	/* CUDA (else NVML) devices hwloc saw but could not place on PCI. */
	for (int pass = 0; pass < 2; pass++) {
		size_t before = t->ngpus;

		while ((o = hwloc_get_next_osdev(t->hw, o)) != NULL) {
			const char *want = pass == 0 ? "CUDA" : "NVML";

			if (o->subtype == NULL || strcmp(o->subtype, want) != 0)
				continue;
			if (o->parent != NULL &&
			    o->parent->type == HWLOC_OBJ_PCI_DEVICE)
				continue;
			ret = add_gpu(t, NULL, o);
			if (ret != 0)
				return ret;
		}
		if (t->ngpus > before)
			break;
	}
	return sort_devices(t);
}

static int find_numa(struct tern_topo *t)
{
	int n = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE);
	int ret;

	if (n <= 0)
		return 0;
	t->numa = calloc((size_t)n, sizeof(*t->numa));
	if (t->numa == NULL)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE,
						      (unsigned)i);
		struct tern_topo_numa *m = &t->numa[t->nnuma];

		if (o == NULL)
			continue;
		m->os_index = (int)o->os_index;
		m->memory = o->attr->numanode.local_memory;
		if (o->cpuset != NULL) {
			int w = hwloc_bitmap_weight(o->cpuset);

			m->npus = w > 0 ? (size_t)w : 0;
		}
		t->nnuma++;
		ret = collect_cores(t->hw, o->cpuset, &m->cores, &m->ncores);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static void link_speeds(struct tern_topo *t, const struct tern_topo_attr *a)
{
	for (size_t i = 0; i < t->nnics; i++) {
		struct tern_topo_nic *n = &t->nics[i];
		struct tern_topo_fabric f;
		const char *v;

		if (!n->usable)
			continue;
		if (a != NULL && a->fabric_lookup != NULL) {
			memset(&f, 0, sizeof(f));
			if (a->fabric_lookup(a->fabric_arg, n->name, &f) == 0) {
				f.domain[sizeof(f.domain) - 1] = '\0';
				copy_clean(n->domain, sizeof(n->domain),
					   f.domain);
				if (f.link_bps > 0) {
					n->link_bps = f.link_bps;
					n->link_src = TERN_TOPO_SPEED_FABRIC;
					continue;
				}
			}
		}
		v = info(t->nic_obj[i], INFO_LINK_SPEED);
		if (v != NULL) {
			char *end;
			double g;

			/* Plain decimal only: no sign, exponent, hex, nan. */
			errno = 0;
			g = strtod(v, &end);
			if (v[strspn(v, "0123456789.")] == '\0' && errno == 0 &&
			    end != v && *end == '\0' && isfinite(g) &&
			    g > 0.0 && g <= 1e5) {
				n->link_bps = (uint64_t)(g * 1e9 + 0.5);
				n->link_src = TERN_TOPO_SPEED_XML;
			} else {
				char shown[33];

				copy_clean(shown, sizeof(shown), v);
				tern__warn("topo: %s: ignoring %s \"%s\" "
					   "(expected Gbit/s, 0 < x <= 100000)",
					   n->name, INFO_LINK_SPEED, shown);
			}
		}
	}
}

static int check_file(const char *path)
{
	struct stat st;
	int fd, ret = 0;

	/* O_NONBLOCK: a FIFO given as the file must not hang us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		tern__info("topo: cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) != 0) {
		ret = -errno;
	} else if (S_ISDIR(st.st_mode)) {
		ret = -EISDIR;
	} else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		ret = -EINVAL;
		tern__info("topo: %s: %s", path,
			   S_ISREG(st.st_mode) ? "empty"
					       : "not a regular file");
	} else if ((uint64_t)st.st_size > TERN_TOPO_XML_MAX) {
		ret = -EFBIG;
		tern__info("topo: %s: %lld bytes, more than %u", path,
			   (long long)st.st_size, TERN_TOPO_XML_MAX);
	}
	close(fd);
	return ret;
}

int tern__topo_open(const struct tern_topo_attr *attr,
		    struct tern_topo **topo_p)
{
	const char *path = attr != NULL ? attr->xml_path : NULL;
	int want = attr != NULL ? attr->nic_kind : 0;
	struct tern_topo *t;
	hwloc_obj_t root;
	int ret;

	if (topo_p == NULL || want < 0 || want > TERN_TOPO_NIC_ALL)
		return -EINVAL;
	if (path != NULL) {
		ret = check_file(path);
		if (ret != 0)
			return ret;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->source = strdup(path != NULL ? path : "this host");
	if (t->source == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	if (hwloc_topology_init(&t->hw) != 0) {
		t->hw = NULL;
		ret = -ENOMEM;
		goto err_close;
	}
	/* PCI devices, bridges and OS devices; empty bridges dropped. */
	hwloc_topology_set_io_types_filter(t->hw,
					   HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/*
	 * Linux's own sysfs discovery finds PCI devices: the libpciaccess
	 * plugin only adds a leak. OpenCL would start every GPU's driver (a
	 * CUDA context each, seconds on 8 GPUs) for names we have from PCI,
	 * and GL probes X displays. CUDA and NVML stay where built in.
	 */
	hwloc_topology_set_components(
		t->hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
	hwloc_topology_set_components(
		t->hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
	hwloc_topology_set_components(
		t->hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
	if (path != NULL && hwloc_topology_set_xml(t->hw, path) != 0) {
		ret = -EINVAL;
		tern__info("topo: hwloc cannot read %s", path);
		goto err_close;
	}
	if (hwloc_topology_load(t->hw) != 0) {
		ret = path != NULL ? -EINVAL : (errno > 0 ? -errno : -EIO);
		/* Without its libxml2 plugin hwloc parses XML itself, and
		 * reads little beyond its own output (no comments). */
		tern__info("topo: hwloc cannot load %s: %s%s", t->source,
			   strerror(-ret),
			   path != NULL ? " (not a topology hwloc can read; "
					  "for files not written by hwloc, "
					  "install libhwloc-plugins)"
					: "");
		goto err_close;
	}
	if (path == NULL && !hwloc_topology_is_thissystem(t->hw)) {
		/* hwloc's environment (HWLOC_XMLFILE, ...) chose the source. */
		const char *x = getenv("HWLOC_XMLFILE");
		char *src = malloc(strlen(x != NULL ? x : "") + 64);

		if (src == NULL) {
			ret = -ENOMEM;
			goto err_close;
		}
		if (x != NULL)
			sprintf(src, "HWLOC_XMLFILE=%s", x);
		else
			strcpy(src, "hwloc's environment (not this host)");
		free(t->source);
		t->source = src;
	}
	root = hwloc_get_root_obj(t->hw);
	copy_clean(t->machine, sizeof(t->machine),
		   info(root, "DMIProductName"));
	ret = find_numa(t);
	if (ret == 0)
		ret = find_devices(t);
	if (ret != 0)
		goto err_close;
	t->kind = tern__topo_pick_kind(t, want);
	for (size_t i = 0; i < t->nnics; i++) {
		struct tern_topo_nic *n = &t->nics[i];

		n->mapped = n->usable && t->kind != 0 &&
			    (t->kind == TERN_TOPO_NIC_ALL ||
			     (int)n->kind == t->kind);
	}
	link_speeds(t, attr);
	ret = tern__topo_map_nics(t);
	if (ret != 0)
		goto err_close;
	*topo_p = t;
	return 0;

err_close:
	tern__topo_close(t);
	return ret;
}

int tern__topo_close(struct tern_topo *t)
{
	if (t == NULL)
		return 0;
	for (size_t i = 0; i < t->nnuma; i++) {
		free(t->numa[i].cores);
		free(t->numa[i].nics);
	}
	for (size_t i = 0; i < t->ngpus; i++) {
		free(t->gpus[i].cores);
		free(t->gpus[i].nics);
	}
	free(t->numa);
	free(t->gpus);
	free(t->gpu_obj);
	free(t->nics);
	free(t->nic_obj);
	if (t->hw != NULL)
		hwloc_topology_destroy(t->hw);
	free(t->source);
	free(t);
	return 0;
}

const char *tern__topo_source(const struct tern_topo *t)
{
	return t->source;
}

const char *tern__topo_machine(const struct tern_topo *t)
{
	return t->machine;
}

int tern__topo_mapped_kind(const struct tern_topo *t)
{
	return t->kind;
}

size_t tern__topo_numa_count(const struct tern_topo *t)
{
	return t->nnuma;
}

const struct tern_topo_numa *tern__topo_numa_get(const struct tern_topo *t,
						 size_t i)
{
	return i < t->nnuma ? &t->numa[i] : NULL;
}

const struct tern_topo_numa *tern__topo_numa_find(const struct tern_topo *t,
						  int os_index)
{
	for (size_t i = 0; i < t->nnuma; i++) {
		if (t->numa[i].os_index == os_index)
			return &t->numa[i];
	}
	return NULL;
}

size_t tern__topo_gpu_count(const struct tern_topo *t)
{
	return t->ngpus;
}

const struct tern_topo_gpu *tern__topo_gpu_get(const struct tern_topo *t,
					       size_t i)
{
	return i < t->ngpus ? &t->gpus[i] : NULL;
}

size_t tern__topo_nic_count(const struct tern_topo *t)
{
	return t->nnics;
}

const struct tern_topo_nic *tern__topo_nic_get(const struct tern_topo *t,
					       size_t i)
{
	return i < t->nnics ? &t->nics[i] : NULL;
}

int tern__topo_nic_find(const struct tern_topo *t, const char *key)
{
	size_t klen;

	if (key == NULL || key[0] == '\0')
		return -ENOENT;
	klen = strlen(key);
	for (size_t i = 0; i < t->nnics; i++) {
		const struct tern_topo_nic *n = &t->nics[i];
		size_t nlen = strlen(n->name);

		if (nlen > 0 && strncmp(key, n->name, nlen) == 0 &&
		    (key[nlen] == '\0' || key[nlen] == '-'))
			return (int)i;
		if (strcmp(key, n->busid) == 0 ||
		    (klen == 7 && strcmp(key, n->busid + 5) == 0))
			return (int)i;
	}
	return -ENOENT;
}

uint64_t tern__topo_nics_bps(const struct tern_topo *t, const size_t *nics,
			     size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		if (nics[i] >= t->nnics || t->nics[nics[i]].link_bps == 0)
			return 0;
		sum += t->nics[nics[i]].link_bps;
	}
	return sum;
}

const char *tern__topo_path_str(enum tern_topo_path path)
{
	switch (path) {
	case TERN_TOPO_PATH_SWITCH:
		return "switch";
	case TERN_TOPO_PATH_HOSTBRIDGE:
		return "hostbridge";
	case TERN_TOPO_PATH_NUMA:
		return "numa";
	case TERN_TOPO_PATH_NEAR:
		return "near";
	case TERN_TOPO_PATH_SYSTEM:
		return "system";
	case TERN_TOPO_PATH_NONE:
		break;
	}
	return "none";
}

const char *tern__topo_kind_str(int kind)
{
	switch (kind) {
	case TERN_TOPO_NIC_EFA:
		return "efa";
	case TERN_TOPO_NIC_MLX:
		return "mlx";
	case TERN_TOPO_NIC_RDMA:
		return "rdma";
	case TERN_TOPO_NIC_ALL:
		return "all";
	}
	return "none";
}
