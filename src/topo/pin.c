/* SPDX-License-Identifier: MIT */
/* Binding a thread near its memory or NIC. */
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

int tern__topo_bind_thread(const struct tern_topo *t, const unsigned *cpus,
			   size_t n)
{
	hwloc_const_cpuset_t allowed;
	hwloc_bitmap_t set;
	int ret = 0;

	if (t == NULL || cpus == NULL || n == 0)
		return -EINVAL;
	if (!hwloc_topology_is_thissystem(t->hw))
		return -ENOTSUP;
	set = hwloc_bitmap_alloc();
	if (set == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n && ret == 0; i++) {
		if (hwloc_bitmap_set(set, cpus[i]) != 0)
			ret = -ENOMEM;
	}
	allowed = hwloc_topology_get_allowed_cpuset(t->hw);
	if (ret == 0 && allowed != NULL &&
	    !hwloc_bitmap_isincluded(set, allowed))
		ret = -EINVAL;
	if (ret == 0 && hwloc_set_cpubind(t->hw, set, HWLOC_CPUBIND_THREAD)) {
		ret = errno == ENOSYS ? -ENOTSUP
				      : (errno > 0 ? -errno : -EINVAL);
		tern__warn("topo: binding the thread: %s", strerror(-ret));
	}
	hwloc_bitmap_free(set);
	return ret;
}

size_t tern__topo_format_cpus(const unsigned *cpus, size_t n, char *buf,
			      size_t len)
{
	size_t used = 0;

	if (len > 0)
		buf[0] = '\0';
	for (size_t i = 0; i < n;) {
		size_t j = i;
		char part[32];
		int w;

		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (j == i)
			w = snprintf(part, sizeof(part), "%s%u", i ? "," : "",
				     cpus[i]);
		else
			w = snprintf(part, sizeof(part), "%s%u-%u",
				     i ? "," : "", cpus[i], cpus[j]);
		if (w > 0) {
			if (used + (size_t)w < len)
				memcpy(buf + used, part, (size_t)w + 1);
			else if (used < len)
				buf[used] = '\0';
			used += (size_t)w;
		}
		i = j + 1;
	}
	return used;
}

/* The NUMA node (OS index) holding PU @cpu, or -1. */
static int numa_of_cpu(const struct tern_topo *t, unsigned cpu)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t->hw, cpu);
	hwloc_obj_t o;

	for (o = pu; o != NULL; o = o->parent) {
		if (o->memory_arity > 0 && o->memory_first_child != NULL &&
		    o->memory_first_child->type == HWLOC_OBJ_NUMANODE)
			return (int)o->memory_first_child->os_index;
	}
	return -1;
}

int tern__topo_pin_near(const char *domain, char *desc, size_t desclen)
{
	struct tern_topo *t = NULL;
	const struct tern_topo_numa *numa = NULL;
	const char *why = "the node this thread runs on";
	char cpus[128];
	int ret, cpu, nic;

	ret = tern__topo_open(NULL, &t);
	if (ret != 0)
		return ret;
	nic = domain != NULL ? tern__topo_nic_find(t, domain) : -ENOENT;
	if (nic >= 0 && tern__topo_nic_get(t, (size_t)nic)->numa >= 0) {
		numa = tern__topo_numa_find(
			t, tern__topo_nic_get(t, (size_t)nic)->numa);
		why = "the NIC's node";
	}
	if (numa == NULL && (cpu = sched_getcpu()) >= 0)
		numa = tern__topo_numa_find(t, numa_of_cpu(t, (unsigned)cpu));
	if (numa == NULL && tern__topo_numa_count(t) > 0) {
		numa = tern__topo_numa_get(t, 0);
		why = "the first node";
	}
	if (numa == NULL || numa->ncores == 0) {
		tern__topo_close(t);
		return -ENOENT;
	}
	ret = tern__topo_bind_thread(t, numa->cores, numa->ncores);
	if (ret == 0) {
		tern__topo_format_cpus(numa->cores, numa->ncores, cpus,
				       sizeof(cpus));
		snprintf(desc, desclen, "cores %s (NUMA node %d, %s)", cpus,
			 numa->os_index, why);
	}
	tern__topo_close(t);
	return ret;
}
