/* SPDX-License-Identifier: MIT */
/* The machine map's insides, shared by src/topo/scan.c (hwloc scan and the
 * map's accessors), policy.c (which NICs serve which GPU or NUMA node) and
 * pin.c (binding threads). Private to src/topo/. */
#ifndef TERN_TOPO_INT_H
#define TERN_TOPO_INT_H

#include <hwloc.h>

#include "topo.h"

#define VENDOR_AMAZON	0x1d0f
#define VENDOR_NVIDIA	0x10de
#define VENDOR_MELLANOX 0x15b3

#define INFO_LINK_SPEED "TernLinkSpeedGbps"

struct tern_topo {
	hwloc_topology_t hw;
	char *source;
	char machine[TERN_TOPO_NAME_LEN];
	int kind; /* mapped NIC kind, 0: none */
	size_t nnuma;
	struct tern_topo_numa *numa;
	size_t ngpus;
	struct tern_topo_gpu *gpus;
	hwloc_obj_t *gpu_obj;
	size_t nnics;
	struct tern_topo_nic *nics;
	hwloc_obj_t *nic_obj;
};

/* scan.c, for policy.c: whether @obj lies below @root; a bridge's name. */
int tern__topo_is_below(hwloc_obj_t obj, hwloc_obj_t root);
void tern__topo_bridge_name(hwloc_obj_t b, char *buf, size_t len);

/* policy.c, called while the map is made (tern__topo_open). */
int tern__topo_pick_kind(const struct tern_topo *t, int want);
int tern__topo_map_nics(struct tern_topo *t);

#endif /* TERN_TOPO_INT_H */
