/* SPDX-License-Identifier: MIT */
/*
 * The machine map tern places work by: NUMA nodes and their cores, NVIDIA
 * GPUs, RDMA NICs and the PCIe switches between them, from hwloc (the only
 * component that calls hwloc) on this host or from an hwloc XML export.
 *
 * For each GPU, the NICs to use are the RDMA NICs of the mapped kind below
 * its nearest PCI bridge that has any (its PCIe switch, else its host
 * bridge); else those of its NUMA node; else those of the nearest NUMA node
 * by hwloc's NUMA distances; else every one. GPUs that found the same set
 * the same way divide it evenly, in PCI order, when it divides evenly
 * (p5en: 2 GPUs and 4 EFA under a switch, 2 each) and share it otherwise
 * (p4d: 2 GPUs, 1 EFA). Host memory on a NUMA node uses the NUMA rule.
 *
 * Nothing here is thread-safe; a topology is read-only once opened.
 */
#ifndef TERN_TOPO_H
#define TERN_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define TERN_TOPO_NAME_LEN  64
#define TERN_TOPO_BUSID_LEN 24

/* An XML file larger than this is refused (real exports are < 1 MiB), and
 * so is a topology with more PCI or OS devices than this. */
#define TERN_TOPO_XML_MAX (64u << 20)
#define TERN_TOPO_PCI_MAX 16384u

/* What a NIC is, from its PCI ids. */
enum tern_topo_nic_kind {
	TERN_TOPO_NIC_EFA = 1,	/* Amazon EFA (1d0f:efaX) */
	TERN_TOPO_NIC_MLX = 2,	/* Mellanox/NVIDIA ConnectX, BlueField */
	TERN_TOPO_NIC_RDMA = 3, /* any other device with an RDMA driver */
	TERN_TOPO_NIC_ALL = 4,	/* as a selection: every kind */
};

/* How a GPU's (or a NUMA node's) NICs were found. */
enum tern_topo_path {
	TERN_TOPO_PATH_NONE = 0,   /* no NIC of the mapped kind anywhere */
	TERN_TOPO_PATH_SWITCH,	   /* below the same PCIe switch */
	TERN_TOPO_PATH_HOSTBRIDGE, /* below the same PCI host bridge */
	TERN_TOPO_PATH_NUMA,	   /* on the same NUMA node */
	TERN_TOPO_PATH_NEAR,	   /* on the nearest NUMA node with NICs */
	TERN_TOPO_PATH_SYSTEM,	   /* anywhere (no locality known) */
};

/* Where a NIC's network link speed came from. */
enum tern_topo_speed_src {
	TERN_TOPO_SPEED_NONE = 0,
	TERN_TOPO_SPEED_FABRIC, /* the caller's lookup (libfabric) */
	TERN_TOPO_SPEED_XML,	/* info TernLinkSpeedGbps in the topology */
};

struct tern_topo_nic {
	/* RDMA device name, which libfabric domain names are built from
	 * ("rdmap79s0" -> "rdmap79s0-rdm", "mlx5_0"); "" when the device has
	 * no RDMA driver (no OpenFabrics OS device). */
	char name[TERN_TOPO_NAME_LEN];
	char domain[TERN_TOPO_NAME_LEN]; /* libfabric domain, from the lookup */
	char busid[TERN_TOPO_BUSID_LEN]; /* "0000:4f:00.0" */
	char model[TERN_TOPO_NAME_LEN];	 /* PCI device name, or "" */
	char netdev[TERN_TOPO_NAME_LEN]; /* its network interface, or "" */
	/* The PCIe switch it sits under (the nearest bridge leading to other
	 * devices) as a bus id, or its host bridge as "0000:[30-31]". */
	char sw[TERN_TOPO_BUSID_LEN];
	uint16_t vendor_id;
	uint16_t device_id;
	uint16_t class_id;
	enum tern_topo_nic_kind kind;
	int numa;	   /* NUMA node (OS index); -1: not a single node */
	double pcie_gbps;  /* PCIe link from hwloc, Gbit/s; 0: unknown */
	uint64_t link_bps; /* network link, bit/s; 0: unknown */
	enum tern_topo_speed_src link_src;
	int usable; /* has an RDMA driver */
	int mapped; /* usable and of the kind GPUs are mapped to */
};

struct tern_topo_gpu {
	char busid[TERN_TOPO_BUSID_LEN];
	char model[TERN_TOPO_NAME_LEN];
	char cuda[16];		      /* "cuda3" when hwloc saw CUDA, else "" */
	char nvml[16];		      /* "nvml3" when hwloc saw NVML, else "" */
	char sw[TERN_TOPO_BUSID_LEN]; /* as for NICs */
	uint16_t vendor_id;
	uint16_t device_id;
	int numa;
	double pcie_gbps;
	enum tern_topo_path path;
	char via[TERN_TOPO_BUSID_LEN]; /* the bridge its NICs are below */
	unsigned share;	 /* most GPUs using one of its NICs (1: own) */
	size_t nnics;	 /* its NICs, as indexes into the NIC list */
	size_t *nics;	 /* (ascending, i.e. in PCI order) */
	size_t ncores;	 /* its local cores: the OS index of the first */
	unsigned *cores; /* PU of each physical core (no siblings) */
};

struct tern_topo_numa {
	int os_index;
	uint64_t memory; /* local memory, bytes; 0: unknown */
	size_t npus;	 /* PUs, hyperthreads included */
	size_t ncores;
	unsigned *cores; /* first PU of each physical core, ascending */
	enum tern_topo_path path; /* how its NICs were found */
	size_t nnics;		  /* NICs for host memory on this node */
	size_t *nics;
};

struct tern_topo_fabric {
	char domain[TERN_TOPO_NAME_LEN]; /* the libfabric domain name */
	uint64_t link_bps;		 /* 0: not reported */
};

struct tern_topo_attr {
	/* hwloc XML file to read instead of this host (untrusted input). */
	const char *xml_path;
	/* Kind of NIC to map GPUs to: 0 picks the kind with the most usable
	 * NICs (ties: EFA, then MLX, then others), or a TERN_TOPO_NIC_*. */
	int nic_kind;
	/* Optional: what libfabric says of an RDMA device. Return 0 and fill
	 * @out when it knows @name, anything else when not. Called once per
	 * usable NIC during tern__topo_open(). */
	int (*fabric_lookup)(void *arg, const char *name,
			     struct tern_topo_fabric *out);
	void *fabric_arg;
};

struct tern_topo;

/*
 * Discover this host (I/O devices included) or read @attr->xml_path, and
 * build the map. @attr may be NULL (this host, automatic kind).
 * @return 0 and *topo_p; -EINVAL (bad attribute, or the file is not an
 * hwloc XML topology), -ENOENT / -EACCES / -EISDIR and other errno values
 * from opening the file, -EFBIG (file above TERN_TOPO_XML_MAX), -E2BIG
 * (more than TERN_TOPO_PCI_MAX devices), -ENOMEM.
 * Each failure is logged once with the reason.
 */
int tern__topo_open(const struct tern_topo_attr *attr,
		    struct tern_topo **topo_p);

/* Free everything. NULL is fine. @return 0. */
int tern__topo_close(struct tern_topo *topo);

/* "this host" or the XML path. */
const char *tern__topo_source(const struct tern_topo *topo);
/* The machine's product name (DMI), or "". */
const char *tern__topo_machine(const struct tern_topo *topo);
/* The NIC kind GPUs are mapped to; 0 when there is no usable NIC. */
int tern__topo_mapped_kind(const struct tern_topo *topo);

size_t tern__topo_numa_count(const struct tern_topo *topo);
const struct tern_topo_numa *tern__topo_numa_get(const struct tern_topo *topo,
						 size_t i);
/* The NUMA node with this OS index, or NULL. */
const struct tern_topo_numa *tern__topo_numa_find(const struct tern_topo *topo,
						  int os_index);

size_t tern__topo_gpu_count(const struct tern_topo *topo);
const struct tern_topo_gpu *tern__topo_gpu_get(const struct tern_topo *topo,
					       size_t i);

size_t tern__topo_nic_count(const struct tern_topo *topo);
const struct tern_topo_nic *tern__topo_nic_get(const struct tern_topo *topo,
					       size_t i);

/*
 * Find a NIC by RDMA device name ("rdmap79s0"), libfabric domain name (the
 * device name followed by "-" and a suffix: "rdmap79s0-rdm"), or PCI bus
 * id ("0000:4f:00.0" or "4f:00.0").
 * @return its index, or -ENOENT.
 */
int tern__topo_nic_find(const struct tern_topo *topo, const char *key);

/*
 * Sum of the network link speeds of @n NICs (indexes), in bit/s.
 * @return the sum, or 0 when a speed is unknown or @n is 0.
 */
uint64_t tern__topo_nics_bps(const struct tern_topo *topo, const size_t *nics,
			     size_t n);

/*
 * Pin the calling thread to the PUs listed (OS indexes), e.g. a GPU's
 * cores, before allocating memory or opening domains near them.
 * @return 0; -EINVAL (empty list, or a PU this process may not use);
 * -ENOTSUP (the topology was read from XML, or binding is not supported
 * here); -ENOMEM; another -errno from the system.
 */
int tern__topo_bind_thread(const struct tern_topo *topo, const unsigned *cpus,
			   size_t n);

/* Write a PU list as ranges ("0-47,96"). Like snprintf, @return the length
 * the whole text needs; what does not fit is left out, whole ranges at a
 * time, and @buf is always terminated when @len > 0. */
size_t tern__topo_format_cpus(const unsigned *cpus, size_t n, char *buf,
			      size_t len);

/*
 * Pin the calling thread to the physical cores of the NUMA node nearest
 * libfabric domain @domain (its NIC's node when the host map has it, else
 * the node the thread runs on now), and describe what was done in @desc.
 * @return 0; -ENOENT (no node with cores); errors of tern__topo_open()
 * and tern__topo_bind_thread().
 */
int tern__topo_pin_near(const char *domain, char *desc, size_t desclen);

/*
 * The RDMA device names of the NICs mapped to GPU @gpu (its index in
 * `tern topo`'s list), on this host or in @xml_path: what a ctx opens as
 * rails for "gpu=N". At most @max names of TERN_TOPO_NAME_LEN bytes.
 * @return how many; -ENOENT (no such GPU, or it has no NICs) with @why;
 * errors of tern__topo_open().
 */
int tern__topo_gpu_nics(const char *xml_path, unsigned gpu,
			char (*names)[TERN_TOPO_NAME_LEN], size_t max,
			char *why, size_t whylen);

const char *tern__topo_path_str(enum tern_topo_path path);
const char *tern__topo_kind_str(int kind);

#endif /* TERN_TOPO_H */
