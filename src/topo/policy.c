/* SPDX-License-Identifier: MIT */
/* Which NICs serve which GPU or NUMA node: the mapping policy. */
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

int tern__topo_pick_kind(const struct tern_topo *t, int want)
{
	size_t count[TERN_TOPO_NIC_ALL] = { 0 };
	int best = 0;

	if (want != 0)
		return want;
	for (size_t i = 0; i < t->nnics; i++) {
		if (t->nics[i].usable)
			count[t->nics[i].kind]++;
	}
	for (int k = TERN_TOPO_NIC_EFA; k <= TERN_TOPO_NIC_RDMA; k++) {
		if (count[k] > (best != 0 ? count[best] : 0))
			best = k;
	}
	return best;
}

/* The mapped NICs on the NUMA node(s) nearest to @node by hwloc's NUMA
 * distances (those not on @node itself: the caller found none there). */
static size_t nearest_nics(const struct tern_topo *t, int node, size_t *out)
{
	struct hwloc_distances_s *d = NULL;
	unsigned nr = 1;
	hwloc_obj_t from;
	uint64_t best = UINT64_MAX;
	size_t n = 0;
	int fi;

	from = hwloc_get_numanode_obj_by_os_index(t->hw, (unsigned)node);
	if (from == NULL ||
	    hwloc_distances_get_by_type(t->hw, HWLOC_OBJ_NUMANODE, &nr, &d, 0,
					0) != 0 ||
	    nr == 0 || d == NULL)
		return 0;
	fi = hwloc_distances_obj_index(d, from);
	for (int pass = 0; fi >= 0 && pass < 2; pass++) {
		for (size_t i = 0; i < t->nnics; i++) {
			const struct tern_topo_nic *nic = &t->nics[i];
			hwloc_obj_t to;
			uint64_t v;
			int ti;

			if (!nic->mapped || nic->numa < 0)
				continue;
			to = hwloc_get_numanode_obj_by_os_index(
				t->hw, (unsigned)nic->numa);
			ti = to != NULL ? hwloc_distances_obj_index(d, to) : -1;
			if (ti < 0)
				continue;
			v = d->values[(size_t)fi * d->nbobjs + (size_t)ti];
			if (pass == 0 && v < best)
				best = v;
			else if (pass == 1 && v == best)
				out[n++] = i;
		}
	}
	hwloc_distances_release(t->hw, d);
	return n;
}

/* The NICs for memory on NUMA node @node (-1: unknown): that node's, else
 * the nearest node's, else all of them. */
static void numa_nics(const struct tern_topo *t, int node, size_t *out,
		      size_t *n_p, enum tern_topo_path *path_p)
{
	size_t n = 0, all = 0;

	for (size_t i = 0; i < t->nnics; i++) {
		if (!t->nics[i].mapped)
			continue;
		all++;
		if (node >= 0 && t->nics[i].numa == node)
			out[n++] = i;
	}
	*path_p = TERN_TOPO_PATH_NUMA;
	if (all == 0) {
		*path_p = TERN_TOPO_PATH_NONE;
	} else if (n == 0 && node >= 0 &&
		   (n = nearest_nics(t, node, out)) > 0) {
		*path_p = TERN_TOPO_PATH_NEAR;
	} else if (n == 0) {
		for (size_t i = 0; i < t->nnics; i++) {
			if (t->nics[i].mapped)
				out[n++] = i;
		}
		*path_p = TERN_TOPO_PATH_SYSTEM;
	}
	*n_p = n;
}

/* The mapped NICs below the GPU's nearest bridge that has any. */
static size_t bridge_nics(struct tern_topo *t, size_t gi, size_t *out)
{
	struct tern_topo_gpu *g = &t->gpus[gi];
	hwloc_obj_t obj = t->gpu_obj[gi];

	if (obj->type != HWLOC_OBJ_PCI_DEVICE)
		return 0;
	for (hwloc_obj_t b = obj->parent;
	     b != NULL && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
		size_t n = 0;

		for (size_t i = 0; i < t->nnics; i++) {
			if (t->nics[i].mapped &&
			    tern__topo_is_below(t->nic_obj[i], b))
				out[n++] = i;
		}
		if (n == 0)
			continue;
		g->path = b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI
				  ? TERN_TOPO_PATH_SWITCH
				  : TERN_TOPO_PATH_HOSTBRIDGE;
		tern__topo_bridge_name(b, g->via, sizeof(g->via));
		return n;
	}
	return 0;
}

/* Same NICs, found the same way (same bridge, or same fallback). */
static int same_set(const struct tern_topo_gpu *a,
		    const struct tern_topo_gpu *b)
{
	return a->path == b->path && strcmp(a->via, b->via) == 0 &&
	       a->nnics == b->nnics &&
	       memcmp(a->nics, b->nics, a->nnics * sizeof(*a->nics)) == 0;
}

/* GPUs that found the same NICs the same way divide them evenly when they
 * can. */
static void divide_sets(struct tern_topo *t)
{
	for (size_t i = 0; i < t->ngpus; i++) {
		struct tern_topo_gpu *g = &t->gpus[i];
		size_t k = 0, n, per, rank;

		if (g->share != 0 || g->nnics == 0)
			continue; /* already divided, or nothing to divide */
		for (size_t j = i; j < t->ngpus; j++)
			k += t->gpus[j].share == 0 && same_set(g, &t->gpus[j]);
		n = g->nnics;
		if (k < 2 || n < k || n % k != 0)
			continue;
		per = n / k;
		for (size_t j = t->ngpus; j-- > i;) {
			struct tern_topo_gpu *m = &t->gpus[j];

			if (m->share != 0 || !same_set(g, m))
				continue;
			rank = --k;
			memmove(m->nics, m->nics + rank * per,
				per * sizeof(*m->nics));
			m->nnics = per;
			m->share = 1; /* mark as divided */
		}
	}
}

int tern__topo_map_nics(struct tern_topo *t)
{
	size_t cap = t->nnics > 0 ? t->nnics : 1;
	unsigned *users;

	for (size_t i = 0; i < t->ngpus; i++) {
		struct tern_topo_gpu *g = &t->gpus[i];

		g->nics = calloc(cap, sizeof(*g->nics));
		if (g->nics == NULL)
			return -ENOMEM;
		g->nnics = bridge_nics(t, i, g->nics);
		if (g->nnics == 0)
			numa_nics(t, g->numa, g->nics, &g->nnics, &g->path);
	}
	divide_sets(t);
	users = calloc(cap, sizeof(*users));
	if (users == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < t->ngpus; i++) {
		for (size_t j = 0; j < t->gpus[i].nnics; j++)
			users[t->gpus[i].nics[j]]++;
	}
	for (size_t i = 0; i < t->ngpus; i++) {
		struct tern_topo_gpu *g = &t->gpus[i];

		g->share = 0;
		for (size_t j = 0; j < g->nnics; j++)
			g->share = TERN_MAX(g->share, users[g->nics[j]]);
	}
	free(users);
	for (size_t i = 0; i < t->nnuma; i++) {
		struct tern_topo_numa *m = &t->numa[i];

		m->nics = calloc(cap, sizeof(*m->nics));
		if (m->nics == NULL)
			return -ENOMEM;
		numa_nics(t, m->os_index, m->nics, &m->nnics, &m->path);
	}
	return 0;
}

int tern__topo_gpu_nics(const char *xml_path, unsigned gpu,
			char (*names)[TERN_TOPO_NAME_LEN], size_t max,
			char *why, size_t whylen)
{
	struct tern_topo_attr attr = { .xml_path = xml_path };
	const struct tern_topo_gpu *g;
	struct tern_topo *t = NULL;
	int ret, n = 0;

	ret = tern__topo_open(&attr, &t);
	if (ret != 0) {
		snprintf(why, whylen, "cannot read the machine map: %s",
			 strerror(-ret));
		return ret;
	}
	if (gpu >= tern__topo_gpu_count(t)) {
		snprintf(why, whylen,
			 "gpu=%u: %zu GPU(s) on %s (see tern topo)", gpu,
			 tern__topo_gpu_count(t), tern__topo_source(t));
		ret = -ENOENT;
		goto out;
	}
	g = tern__topo_gpu_get(t, gpu);
	for (size_t i = 0; i < g->nnics && (size_t)n < max; i++) {
		const struct tern_topo_nic *nic = tern__topo_nic_get(
			t, g->nics[i]);

		if (nic->name[0] == '\0')
			continue;
		snprintf(names[n++], TERN_TOPO_NAME_LEN, "%s", nic->name);
	}
	ret = n;
	if (n == 0) {
		snprintf(why, whylen, "gpu=%u (%s) has no RDMA NIC on %s", gpu,
			 g->busid, tern__topo_source(t));
		ret = -ENOENT;
	}
out:
	tern__topo_close(t);
	return ret;
}
