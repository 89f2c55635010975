/* SPDX-License-Identifier: MIT */
/*
 * RDMA NIC counters from sysfs, for `tern counters` (apps/counters*.c):
 * the devices under <root>/sys/class/infiniband, a snapshot of every
 * counter file they expose, the difference of two snapshots, and what each
 * counter means, printed as text or JSON.
 *
 * Files read, per device DEV and port N:
 *   DEV/hw_counters/NAME          device-wide driver counters (EFA: its
 *                                 admin queue and verbs error counts)
 *   DEV/ports/N/hw_counters/NAME  the driver's per-port counters
 *   DEV/ports/N/counters/NAME     the InfiniBand standard port counters
 * "lifespan" in a hw_counters directory is how long the kernel caches the
 * values (ms), not a counter: it is skipped.
 */
#ifndef APP_COUNTERS_H
#define APP_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTR_NAME_MAX 64

/* Where a counter file lives under DEV/. */
enum ctr_group {
	CTR_DEV_HW,   /* hw_counters/ */
	CTR_PORT_PMA, /* ports/N/counters/ */
	CTR_PORT_HW,  /* ports/N/hw_counters/ */
};

/* What one counter means, from the table in apps/counters_desc.c. */
struct ctr_desc {
	const char *driver; /* "efa", "mlx5"; NULL: IB standard (counters/) */
	const char *name;
	unsigned scale;	  /* the file's value times scale is in unit */
	const char *unit; /* "bytes", "packets", "work requests", ... */
	const char *meaning;
};

struct ctr_dev {
	char name[CTR_NAME_MAX];
	/* The kernel driver (device/driver's name): "efa", "mlx5_core";
	 * "" when the device has none (a software device, or a tree
	 * without the link). */
	char driver[CTR_NAME_MAX];
};

/* The devices a run watches. */
struct ctr_set {
	char dir[4096]; /* <root>/sys/class/infiniband */
	struct ctr_dev *devs;
	size_t ndevs;
};

struct ctr_entry {
	size_t dev;    /* index into ctr_set.devs */
	unsigned port; /* 0 for CTR_DEV_HW */
	enum ctr_group group;
	char name[CTR_NAME_MAX];
	uint64_t raw; /* the file's value */
	int err;      /* 0, or the negative errno reading it failed with */
	const struct ctr_desc *desc; /* NULL: no description */
	size_t rank; /* its place in the description table (order) */
};

/* Every counter of a set at one moment. */
struct ctr_snap {
	struct ctr_entry *ent;
	size_t n, cap;
	double t; /* CLOCK_MONOTONIC seconds when the reading began */
};

/*
 * Find the RDMA devices under @root (NULL or "": the real /sys) whose name
 * is in the comma-separated @only (NULL: all), sorted by name.
 * @return 0 (ndevs may be 0: a directory with no device); -ENOENT when
 * the class directory does not exist (no RDMA driver loaded); -ENODEV when
 * a name in @only is not there; -ENAMETOOLONG; -ENOMEM; another negative
 * errno when the directory cannot be read. @why says which, naming the
 * path or the device, except for 0.
 */
int ctr_set_init(struct ctr_set *set, const char *root, const char *only,
		 char *why, size_t len);
void ctr_set_cleanup(struct ctr_set *set);

/* Read every counter of @set into @snap (its old contents replaced),
 * sorted by device, port, group and the description table's order.
 * A file that cannot be read is kept with its err. @return 0 or -ENOMEM. */
int ctr_snap_read(const struct ctr_set *set, struct ctr_snap *snap);
void ctr_snap_cleanup(struct ctr_snap *snap);

/* The description of counter @name in @group for a device of kernel driver
 * @driver ("efa", "mlx5_core", ...), or NULL. */
const struct ctr_desc *ctr_describe(const char *driver, enum ctr_group group,
				    const char *name, size_t *rank_p);
/* The description table's name for kernel driver @driver ("efa" for efa,
 * "mlx5" for mlx5_core), or NULL when the table has none of its counters. */
const char *ctr_table_of(const char *driver);

/* The counter of @cur at the same device, port, group and name in @prev,
 * or NULL. */
const struct ctr_entry *ctr_snap_find(const struct ctr_snap *prev,
				      const struct ctr_entry *cur);

/*
 * One reading as text on @f: with @prev, the change since it over
 * cur->t - prev->t seconds (and the rate); without, the absolute values.
 * @label heads it ("interval 1 of 3"). Each counter gets one line with
 * its meaning; a NIC whose traffic moved only as sends gets a note.
 */
void ctr_print_text(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    const char *label);
/* The same as one JSON object (an element of "intervals"). */
void ctr_print_json(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    unsigned index);

#endif /* APP_COUNTERS_H */
