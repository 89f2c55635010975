/* SPDX-License-Identifier: MIT */
/*
 * RDMA NIC counters from sysfs (apps/counters.h): the devices under
 * /sys/class/infiniband and a snapshot of every counter file they expose.
 * What each counter means is in counters_desc.c; the printing of
 * snapshots and their differences in counters_print.c.
 */
#define _GNU_SOURCE /* strverscmp */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/counters.h"

/* ---- devices ------------------------------------------------------- */

/* A path from @fmt into @buf (PATH_MAX). @return 0, or -ENAMETOOLONG. */
__attribute__((format(printf, 2, 3))) static int path_fmt(char *buf,
							  const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_MAX, fmt, ap);
	va_end(ap);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* @src is shorter than CTR_NAME_MAX (checked by the callers). */
static void copy_name(char *dst, const char *src)
{
	memcpy(dst, src, strlen(src) + 1);
}

static int cmp_dev(const void *a, const void *b)
{
	return strverscmp(((const struct ctr_dev *)a)->name,
			  ((const struct ctr_dev *)b)->name);
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The device's kernel driver: the last part of DEV/device/driver. */
static void read_driver(const char *devdir, char *out, size_t len)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	out[0] = '\0';
	if (path_fmt(path, "%s/device/driver", devdir) != 0)
		return;
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	base = strrchr(link, '/');
	/* A driver name longer than @out is no driver we know: none. */
	if (snprintf(out, len, "%s", base != NULL ? base + 1 : link) >=
	    (int)len)
		out[0] = '\0';
}

/* Is @name one of the comma-separated @list? */
static int listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; *p != '\0';) {
		size_t n = strcspn(p, ",");

		if (n == len && strncmp(p, name, n) == 0)
			return 1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static void list_names(const struct ctr_dev *devs, size_t n, char *buf,
		       size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
				 devs[i].name);

		if (w < 0 || (size_t)w >= len - used) {
			snprintf(buf + (len > 4 ? len - 4 : 0),
				 len > 4 ? 4 : len, "...");
			return;
		}
		used += (size_t)w;
	}
}

/* Check @only against the devices found: every name must be there. */
static int check_only(const struct ctr_set *set, const struct ctr_dev *all,
		      size_t nall, const char *only, char *why, size_t len)
{
	char names[512];

	for (const char *p = only; *p != '\0' || p == only;) {
		size_t n = strcspn(p, ",");
		int found = 0;

		if (n == 0) {
			snprintf(why, len, "'%s': an empty device name", only);
			return -EINVAL;
		}
		for (size_t i = 0; i < nall && !found; i++)
			found = strlen(all[i].name) == n &&
				strncmp(all[i].name, p, n) == 0;
		if (!found) {
			list_names(all, nall, names, sizeof(names));
			snprintf(why, len,
				 "'%.*s': no such RDMA device in %s (%s%s)",
				 (int)n, p, set->dir, nall ? "there: " : "",
				 nall ? names : "it has none");
			return -ENODEV;
		}
		p += n;
		if (*p == '\0')
			break;
		p++;
		if (*p == '\0') {
			snprintf(why, len, "'%s': an empty device name", only);
			return -EINVAL;
		}
	}
	return 0;
}

int ctr_set_init(struct ctr_set *set, const char *root, const char *only,
		 char *why, size_t len)
{
	struct ctr_dev *all = NULL, *grown;
	size_t nall = 0, cap = 0, rlen;
	struct dirent *de;
	DIR *d;
	int ret;

	memset(set, 0, sizeof(*set));
	if (root == NULL)
		root = "";
	rlen = strlen(root);
	while (rlen > 1 && root[rlen - 1] == '/')
		rlen--; /* "DIR/" and "DIR" name the same tree */
	if (rlen == 1 && root[0] == '/')
		rlen = 0;
	if (snprintf(set->dir, sizeof(set->dir), "%.*s/sys/class/infiniband",
		     (int)rlen, root) >= (int)sizeof(set->dir)) {
		snprintf(why, len, "the path is too long");
		return -ENAMETOOLONG;
	}
	d = opendir(set->dir);
	if (d == NULL) {
		ret = -errno;
		if (ret == -ENOENT || ret == -ENOTDIR)
			snprintf(why, len, "%s does not exist", set->dir);
		else
			snprintf(why, len, "%s: %s", set->dir, strerror(-ret));
		return ret == -ENOTDIR ? -ENOENT : ret;
	}
	while ((de = readdir(d)) != NULL) {
		char path[PATH_MAX];

		if (de->d_name[0] == '.' || strlen(de->d_name) >= CTR_NAME_MAX)
			continue;
		if (path_fmt(path, "%s/%s", set->dir, de->d_name) != 0 ||
		    !is_dir(path))
			continue; /* in /sys, each device is a link to one */
		if (nall == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(all, cap * sizeof(*all));
			if (grown == NULL) {
				ret = -ENOMEM;
				goto err_free;
			}
			all = grown;
		}
		copy_name(all[nall].name, de->d_name);
		read_driver(path, all[nall].driver, sizeof(all[nall].driver));
		nall++;
	}
	closedir(d);
	d = NULL;
	if (nall > 1)
		qsort(all, nall, sizeof(*all), cmp_dev);
	if (only != NULL) {
		ret = check_only(set, all, nall, only, why, len);
		if (ret != 0)
			goto err_free;
		for (size_t i = 0; i < nall; i++) {
			if (listed(only, all[i].name))
				all[set->ndevs++] = all[i];
		}
	} else {
		set->ndevs = nall;
	}
	set->devs = all;
	return 0;

err_free:
	if (d != NULL)
		closedir(d);
	free(all);
	if (ret == -ENOMEM)
		snprintf(why, len, "%s", strerror(ENOMEM));
	return ret;
}

void ctr_set_cleanup(struct ctr_set *set)
{
	free(set->devs);
	set->devs = NULL;
	set->ndevs = 0;
}

/* ---- reading -------------------------------------------------------- */

/* A small file's text into @buf (@len > 1), NUL-terminated. @return 0, or
 * a negative errno. */
static int read_text(const char *path, char *buf, size_t len)
{
	size_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* A sysfs file comes in one read; anything else until its end. */
	while (n < len - 1) {
		ssize_t r = read(fd, buf + n, len - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return 0;
}

/* One counter file's value. @return 0, or a negative errno (-EINVAL: not
 * a number). */
static int read_value(const char *path, uint64_t *v_p)
{
	char buf[64], *end;
	unsigned long long v;
	int ret = read_text(path, buf, sizeof(buf));

	if (ret != 0)
		return ret;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (end == buf || buf[strspn(buf, " \t")] == '-' || errno != 0)
		return -EINVAL;
	end += strspn(end, " \t\r\n");
	if (*end != '\0')
		return -EINVAL;
	*v_p = v;
	return 0;
}

/* A port's state or phys_state file, "N: NAME" ("4: ACTIVE"), into
 * @num_p and @name (CTR_NAME_MAX). A file that says something else gives
 * -1 and its first line. @return 1, or 0 when it cannot be read. */
static int read_state(const char *path, int *num_p, char *name)
{
	char buf[CTR_NAME_MAX + 16], *p = buf, *end;
	long v;
	size_t n;

	if (read_text(path, buf, sizeof(buf)) != 0)
		return 0;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (end != buf && *end == ':' && errno == 0 && v >= 0 && v <= INT_MAX) {
		*num_p = (int)v;
		p = end + 1;
	} else {
		*num_p = -1;
	}
	p += strspn(p, " \t");
	n = strcspn(p, "\r\n");
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (n >= CTR_NAME_MAX)
		n = CTR_NAME_MAX - 1;
	memcpy(name, p, n);
	name[n] = '\0';
	return 1;
}

/* @arr, of capacity *@cap_p items of @size, with room for item @n: itself,
 * or grown (*@cap_p updated); NULL when out of memory (@arr is kept). */
static void *grow(void *arr, size_t *cap_p, size_t n, size_t size)
{
	size_t cap = *cap_p ? 2 * *cap_p : 16;
	void *grown;

	if (n < *cap_p)
		return arr;
	grown = realloc(arr, cap * size);
	if (grown != NULL)
		*cap_p = cap;
	return grown;
}

static int add_entry(struct ctr_snap *snap, struct ctr_entry *e)
{
	struct ctr_entry *ent = grow(snap->ent, &snap->cap, snap->n,
				     sizeof(*ent));

	if (ent == NULL)
		return -ENOMEM;
	snap->ent = ent;
	snap->ent[snap->n++] = *e;
	return 0;
}

/* The link of @dev's @port (dir: its ports/N), when it has a state or
 * phys_state file. */
static int read_link(struct ctr_snap *snap, size_t dev, unsigned port,
		     const char *dir)
{
	struct ctr_link l = { .dev = dev, .port = port, .down_t = -1.0 };
	struct ctr_link *link;
	char path[PATH_MAX];

	if (path_fmt(path, "%s/state", dir) == 0)
		l.have_state = read_state(path, &l.state, l.state_name);
	if (path_fmt(path, "%s/phys_state", dir) == 0)
		l.have_phys = read_state(path, &l.phys, l.phys_name);
	if (!l.have_state && !l.have_phys)
		return 0;
	link = grow(snap->link, &snap->link_cap, snap->nlinks, sizeof(*link));
	if (link == NULL)
		return -ENOMEM;
	snap->link = link;
	snap->link[snap->nlinks++] = l;
	return 0;
}

static int visible(const struct dirent *de)
{
	return de->d_name[0] != '.' && strlen(de->d_name) < CTR_NAME_MAX;
}

/* Every counter file in @dir (a missing directory has none), opened one
 * after the other in name order. */
static int read_group(struct ctr_snap *snap, const struct ctr_set *set,
		      size_t dev, unsigned port, enum ctr_group group,
		      const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, visible, alphasort), ret = 0;

	if (n < 0)
		return n < 0 && errno == ENOMEM ? -ENOMEM : 0;
	for (int i = 0; i < n; i++) {
		struct ctr_entry e = { .dev = dev,
				       .port = port,
				       .group = group };
		const char *name = names[i]->d_name;
		char path[PATH_MAX];
		struct stat st;

		/* The kernel's cache time for hw_counters, in ms. */
		if (ret != 0 ||
		    (group != CTR_PORT_PMA && strcmp(name, "lifespan") == 0) ||
		    path_fmt(path, "%s/%s", dir, name) != 0 ||
		    stat(path, &st) != 0 || S_ISDIR(st.st_mode))
			continue;
		copy_name(e.name, name);
		e.err = read_value(path, &e.raw);
		e.desc = ctr_describe(set->devs[dev].driver, group, e.name,
				      &e.rank);
		ret = add_entry(snap, &e);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* The port numbers under DEV/ports, sorted; at most @cap. */
static size_t list_ports(const char *devdir, unsigned *ports, size_t cap)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (path_fmt(path, "%s/ports", devdir) != 0)
		return 0;
	d = opendir(path);
	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < cap) {
		char *end;
		unsigned long p;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		p = strtoul(de->d_name, &end, 10);
		if (*end == '\0' && p > 0 && p <= 255)
			ports[n++] = (unsigned)p;
	}
	closedir(d);
	qsort(ports, n, sizeof(*ports), cmp_uint);
	return n;
}

static int group_rank(enum ctr_group g)
{
	return (int)g;
}

/* Device, port, group, the table's order, then the name. */
static int cmp_entry(const void *a, const void *b)
{
	const struct ctr_entry *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	/* Device-wide (port 0) after the ports: traffic first. */
	if (x->port != y->port)
		return x->port - 1u < y->port - 1u ? -1 : 1;
	if (x->group != y->group)
		return group_rank(x->group) - group_rank(y->group);
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

int ctr_snap_read(const struct ctr_set *set, struct ctr_snap *snap)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snap->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	snap->wall = time(NULL);
	snap->n = 0;
	snap->nlinks = 0;
	for (size_t i = 0; i < set->ndevs && ret == 0; i++) {
		char devdir[PATH_MAX], dir[PATH_MAX];
		unsigned ports[256];
		size_t np;

		if (path_fmt(devdir, "%s/%s", set->dir, set->devs[i].name) != 0)
			continue;
		if (path_fmt(dir, "%s/hw_counters", devdir) == 0)
			ret = read_group(snap, set, i, 0, CTR_DEV_HW, dir);
		np = list_ports(devdir, ports, 256);
		for (size_t p = 0; p < np && ret == 0; p++) {
			if (path_fmt(dir, "%s/ports/%u/counters", devdir,
				     ports[p]) == 0)
				ret = read_group(snap, set, i, ports[p],
						 CTR_PORT_PMA, dir);
			if (ret == 0 && path_fmt(dir, "%s/ports/%u/hw_counters",
						 devdir, ports[p]) == 0)
				ret = read_group(snap, set, i, ports[p],
						 CTR_PORT_HW, dir);
			if (ret == 0 &&
			    path_fmt(dir, "%s/ports/%u", devdir, ports[p]) == 0)
				ret = read_link(snap, i, ports[p], dir);
		}
	}
	if (snap->n > 1)
		qsort(snap->ent, snap->n, sizeof(*snap->ent), cmp_entry);
	return ret;
}

void ctr_snap_cleanup(struct ctr_snap *snap)
{
	free(snap->ent);
	free(snap->link);
	memset(snap, 0, sizeof(*snap));
}

const struct ctr_entry *ctr_snap_find(const struct ctr_snap *prev,
				      const struct ctr_entry *cur)
{
	if (prev == NULL || prev->n == 0)
		return NULL;
	return bsearch(cur, prev->ent, prev->n, sizeof(*prev->ent), cmp_entry);
}

/* ---- links ------------------------------------------------------------ */

static int cmp_link(const void *a, const void *b)
{
	const struct ctr_link *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->port > y->port) - (x->port < y->port);
}

/* Did the link change? phys_state only where both readings have it. */
static int link_changed(const struct ctr_link *a, const struct ctr_link *b)
{
	if (a->state != b->state || strcmp(a->state_name, b->state_name) != 0)
		return 1;
	return a->have_phys && b->have_phys &&
	       (a->phys != b->phys || strcmp(a->phys_name, b->phys_name) != 0);
}

static int add_event(struct ctr_events *ev, const struct ctr_link *from,
		     const struct ctr_link *to, const struct ctr_snap *cur,
		     double t0)
{
	struct ctr_event *grown = grow(ev->ev, &ev->cap, ev->n, sizeof(*grown));

	if (grown == NULL)
		return -ENOMEM;
	ev->ev = grown;
	ev->ev[ev->n++] = (struct ctr_event){
		.from = *from, .to = *to, .t = cur->t - t0, .wall = cur->wall
	};
	return 0;
}

int ctr_links_follow(const struct ctr_snap *prev, struct ctr_snap *cur,
		     double t0, struct ctr_events *ev)
{
	int ret = 0;

	for (size_t i = 0; i < cur->nlinks; i++) {
		struct ctr_link *l = &cur->link[i];
		const struct ctr_link *p = NULL;

		if (prev->nlinks > 0)
			p = bsearch(l, prev->link, prev->nlinks,
				    sizeof(*prev->link), cmp_link);
		/* Nothing to follow (read for the first time, or no state
		 * file): what is known of it starts here. */
		if (p == NULL || !p->have_state || !l->have_state) {
			l->first_t = cur->t - t0;
			continue;
		}
		l->first_t = p->first_t;
		if (l->state == CTR_PORT_ACTIVE) {
			l->down_t = -1.0;
		} else if (p->state == CTR_PORT_ACTIVE) {
			l->down_t = cur->t - t0;
			l->down_wall = cur->wall;
		} else {
			l->down_t = p->down_t;
			l->down_wall = p->down_wall;
		}
		if (link_changed(p, l) && ret == 0)
			ret = add_event(ev, p, l, cur, t0);
	}
	return ret;
}

void ctr_events_cleanup(struct ctr_events *ev)
{
	free(ev->ev);
	memset(ev, 0, sizeof(*ev));
}
