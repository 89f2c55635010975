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
 * values (ms), not a counter: it is skipped. With the counters, each port's
 * link: DEV/ports/N/state ("4: ACTIVE") and phys_state ("5: LinkUp").
 */
#ifndef APP_COUNTERS_H
#define APP_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

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

/* IB_PORT_ACTIVE, the kernel's number for a port that carries traffic. */
#define CTR_PORT_ACTIVE 4

/*
 * A port's link: the kernel's number and name from DEV/ports/N/state
 * ("4: ACTIVE"; also 1: DOWN, 2: INIT, 3: ARMED, 5: ACTIVE_DEFER) and
 * phys_state ("5: LinkUp"; 3: Disabled, 2: Polling, ...). A missing or
 * unreadable file is not there (have_* 0); a file that is not "N: NAME"
 * has number -1 and its text as the name.
 */
struct ctr_link {
	size_t dev;
	unsigned port;
	int have_state, have_phys;
	int state, phys;
	char state_name[CTR_NAME_MAX], phys_name[CTR_NAME_MAX];
	/* When not ACTIVE, since when, as seconds after the run's first
	 * reading and wall-clock time; down_t < 0: unknown, as it was not
	 * ACTIVE when first read, at first_t (0: the run's first reading). */
	double down_t;
	time_t down_wall;
	double first_t;
};

/* Every counter of a set at one moment. */
struct ctr_snap {
	struct ctr_entry *ent;
	size_t n, cap;
	struct ctr_link *link; /* ports with a state or phys_state file */
	size_t nlinks, link_cap;
	double t;    /* CLOCK_MONOTONIC seconds when the reading began */
	time_t wall; /* the same moment, wall clock (CLOCK_REALTIME) */
};

/* A change of a port's link between two readings, seen at the second. */
struct ctr_event {
	struct ctr_link from, to;
	double t;    /* seconds after the run's first reading */
	time_t wall; /* the same, wall clock */
};

struct ctr_events {
	struct ctr_event *ev;
	size_t n, cap;
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
 * sorted by device, port, group and the description table's order, and
 * every port's link, sorted by device and port, as if first read now.
 * A counter file that cannot be read is kept with its err. @return 0 or
 * -ENOMEM. */
int ctr_snap_read(const struct ctr_set *set, struct ctr_snap *snap);
void ctr_snap_cleanup(struct ctr_snap *snap);

/*
 * Carry what @prev knew of each link into @cur, the next reading of a run
 * whose first reading was at @t0: since when a port is not ACTIVE. Each
 * link whose state or phys_state differs from @prev's is added to @ev
 * once, seen at @cur's time. @return 0 or -ENOMEM (@ev then lacks the
 * changes it had no room for).
 */
int ctr_links_follow(const struct ctr_snap *prev, struct ctr_snap *cur,
		     double t0, struct ctr_events *ev);
void ctr_events_cleanup(struct ctr_events *ev);

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
 * its meaning; a NIC whose traffic moved only as sends gets a note. Then
 * each port's link, one line each (a port not ACTIVE marked "!"), the
 * @nev changes @ev seen at this reading, and which links are down.
 */
void ctr_print_text(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    const char *label, const struct ctr_event *ev, size_t nev);
/* The same as one JSON object (an element of "intervals"), without the
 * changes (ctr_print_json_events has them all). */
void ctr_print_json(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    unsigned index);
/* The changes of @ev as a JSON array (the run's "events"). */
void ctr_print_json_events(FILE *f, const struct ctr_set *set,
			   const struct ctr_events *ev);

#endif /* APP_COUNTERS_H */
