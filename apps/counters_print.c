/* SPDX-License-Identifier: MIT */
/*
 * RDMA NIC counters printed (apps/counters.h): one reading, or the change
 * between two with its rate, as text or JSON, each counter with its
 * meaning and a note where a NIC's traffic moved only as sends; each
 * port's link, which are down and since when, and how they changed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/counters.h"
#include "apps/json.h"

/* A counter's change, in its unit. */
struct change {
	int have;	/* there is a previous reading to subtract */
	int reset;	/* it went backwards: reset, or wrapped */
	uint64_t raw;	/* raw delta */
	uint64_t value; /* raw delta x scale */
	double secs;
};

static unsigned scale_of(const struct ctr_entry *e)
{
	return e->desc != NULL ? e->desc->scale : 1;
}

static uint64_t scaled(uint64_t raw, unsigned scale)
{
	return raw > UINT64_MAX / scale ? UINT64_MAX : raw * scale;
}

static struct change change_of(const struct ctr_snap *prev,
			       const struct ctr_snap *cur,
			       const struct ctr_entry *e)
{
	const struct ctr_entry *p = ctr_snap_find(prev, e);
	struct change c = { 0 };

	if (p == NULL || p->err != 0 || e->err != 0)
		return c;
	c.have = 1;
	c.secs = cur->t - prev->t;
	if (e->raw < p->raw) {
		c.reset = 1;
		return c;
	}
	c.raw = e->raw - p->raw;
	c.value = scaled(c.raw, scale_of(e));
	return c;
}

static const char *rate_text(const struct ctr_entry *e, const struct change *c,
			     char *buf, size_t len)
{
	double r;
	int bytes = e->desc != NULL && strcmp(e->desc->unit, "bytes") == 0;

	if (!c->have || c->reset || c->secs <= 0.0)
		return "";
	r = (double)c->value / c->secs;
	if (bytes) {
		r *= 8.0;
		if (r >= 1e9)
			snprintf(buf, len, "%.2f Gbit/s", r / 1e9);
		else if (r >= 1e6)
			snprintf(buf, len, "%.2f Mbit/s", r / 1e6);
		else if (r >= 1e3)
			snprintf(buf, len, "%.2f kbit/s", r / 1e3);
		else
			snprintf(buf, len, "%.0f bit/s", r);
	} else if (r >= 1e6) {
		snprintf(buf, len, "%.2fM/s", r / 1e6);
	} else if (r >= 1e3) {
		snprintf(buf, len, "%.2fk/s", r / 1e3);
	} else {
		snprintf(buf, len, "%.0f/s", r);
	}
	return buf;
}

/* The change of counter @name at @dev/@port (hw_counters), or -1 when
 * there is none to tell. */
static int64_t delta_of(const struct ctr_snap *prev, const struct ctr_snap *cur,
			size_t dev, unsigned port, const char *name)
{
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];
		struct change c;

		if (e->dev != dev || e->port != port ||
		    e->group != CTR_PORT_HW || strcmp(e->name, name) != 0)
			continue;
		c = change_of(prev, cur, e);
		return c.have && !c.reset && c.raw <= INT64_MAX ? (int64_t)c.raw
								: -1;
	}
	return -1;
}

/*
 * The misreading this command exists for: on EFA, rdma_read_* and
 * rdma_write_* count only RDMA the device carries. Traffic that moved as
 * sends (a send/recv workload, or RMA that libfabric carried in messages)
 * leaves them at 0, which is not "RDMA is broken" nor, by itself, proof
 * of emulation. @return the note for @dev/@port, or NULL.
 */
static const char *note_for(const struct ctr_set *set,
			    const struct ctr_snap *prev,
			    const struct ctr_snap *cur, size_t dev,
			    unsigned port)
{
	static const char *const rdma[] = { "rdma_write_bytes",
					    "rdma_read_bytes",
					    "rdma_write_recv_bytes",
					    "rdma_read_resp_bytes" };
	int64_t sent, recvd;

	if (prev == NULL || ctr_table_of(set->devs[dev].driver) == NULL ||
	    strcmp(ctr_table_of(set->devs[dev].driver), "efa") != 0)
		return NULL;
	sent = delta_of(prev, cur, dev, port, "send_bytes");
	recvd = delta_of(prev, cur, dev, port, "recv_bytes");
	if (sent <= 0 && recvd <= 0)
		return NULL;
	for (size_t i = 0; i < sizeof(rdma) / sizeof(rdma[0]); i++) {
		if (delta_of(prev, cur, dev, port, rdma[i]) != 0)
			return NULL; /* moved, or not exposed here */
	}
	return "data moved only as SEND/RECV, no device RDMA: rdma_read_* and "
	       "rdma_write_* count only RDMA the device carries. Sends from a "
	       "send/recv workload, or RMA that libfabric carried in messages "
	       "(its efa fabric without device RDMA, e.g. an API below 1.18 "
	       "on libfabric 2.x: see docs/efa.md), show in send_bytes and "
	       "recv_bytes";
}

static void block_header(FILE *f, const struct ctr_set *set,
			 const struct ctr_entry *e)
{
	const struct ctr_dev *d = &set->devs[e->dev];

	fprintf(f, "\n%s (%s)", d->name, d->driver[0] ? d->driver : "driver ?");
	if (e->group == CTR_DEV_HW)
		fprintf(f, " device-wide\n");
	else
		fprintf(f, " port %u\n", e->port);
}

static void text_line(FILE *f, const struct ctr_snap *prev,
		      const struct ctr_snap *cur, const struct ctr_entry *e)
{
	const char *meaning = e->desc ? e->desc->meaning : "no description";
	struct change c;
	char val[32], rate[32];

	if (e->err != 0) {
		fprintf(f, "  %-31s %15s %*sunreadable: %s\n", e->name, "-",
			prev != NULL ? 15 : 1, "",
			e->err == -EINVAL ? "not a number" : strerror(-e->err));
		return;
	}
	if (prev == NULL) {
		snprintf(val, sizeof(val), "%" PRIu64,
			 scaled(e->raw, scale_of(e)));
		fprintf(f, "  %-31s %15s  %s\n", e->name, val, meaning);
		return;
	}
	c = change_of(prev, cur, e);
	if (!c.have)
		snprintf(val, sizeof(val), "new");
	else if (c.reset)
		snprintf(val, sizeof(val), "reset");
	else
		snprintf(val, sizeof(val), "%" PRIu64, c.value);
	fprintf(f, "  %-31s %15s %13s  %s\n", e->name, val,
		rate_text(e, &c, rate, sizeof(rate)), meaning);
}

/* ---- links ------------------------------------------------------------ */

static int link_down(const struct ctr_link *l)
{
	return l->have_state && l->state != CTR_PORT_ACTIVE;
}

static const char *word(const char *name)
{
	return name[0] != '\0' ? name : "?";
}

static const char *utc_text(time_t t, char *buf, size_t len)
{
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "?");
	return buf;
}

/* Since when @l is down: "down since +12.5 s (2026-11-29T02:31:07Z)",
 * "down at start" (so at the run's first reading: since when is not
 * known), or "down when first read at +3.0 s". */
static const char *since_text(const struct ctr_link *l, char *buf, size_t len)
{
	char utc[32];

	if (l->down_t >= 0.0)
		snprintf(buf, len, "down since +%.1f s (%s)", l->down_t,
			 utc_text(l->down_wall, utc, sizeof(utc)));
	else if (l->first_t <= 0.0)
		snprintf(buf, len, "down at start");
	else
		snprintf(buf, len, "down when first read at +%.1f s",
			 l->first_t);
	return buf;
}

/* One line per port: "  mlx5_0 port 1: ACTIVE (LinkUp)", marked "!" when
 * it is not ACTIVE. */
static void text_links(FILE *f, const struct ctr_set *set,
		       const struct ctr_snap *cur)
{
	fprintf(f, "\nlinks (ports/N/state, phys_state):\n");
	for (size_t i = 0; i < cur->nlinks; i++) {
		const struct ctr_link *l = &cur->link[i];
		char since[96];

		fprintf(f, "%c %s port %u: ", link_down(l) ? '!' : ' ',
			set->devs[l->dev].name, l->port);
		if (l->have_state)
			fprintf(f, "%s", word(l->state_name));
		if (l->have_phys)
			fprintf(f, l->have_state ? " (%s)" : "phys_state %s",
				word(l->phys_name));
		if (link_down(l))
			fprintf(f, ", %s", since_text(l, since, sizeof(since)));
		fprintf(f, "\n");
	}
}

/* "link change: mlx5_0 port 1: ACTIVE -> DOWN (LinkUp -> Disabled) at
 * +12.5 s (2026-11-29T02:31:07Z)". */
static void text_event(FILE *f, const struct ctr_set *set,
		       const struct ctr_event *e)
{
	const struct ctr_link *a = &e->from, *b = &e->to;
	char utc[32];

	fprintf(f, "link change: %s port %u: %s", set->devs[b->dev].name,
		b->port, word(a->state_name));
	if (a->state != b->state || strcmp(a->state_name, b->state_name) != 0)
		fprintf(f, " -> %s", word(b->state_name));
	if (a->have_phys && b->have_phys &&
	    (a->phys != b->phys || strcmp(a->phys_name, b->phys_name) != 0))
		fprintf(f, " (%s -> %s)", word(a->phys_name),
			word(b->phys_name));
	fprintf(f, " at +%.1f s (%s)\n", e->t,
		utc_text(e->wall, utc, sizeof(utc)));
}

/* "links down: mlx5_0 port 1 (DOWN, Disabled) down at start; ...". */
static void text_down(FILE *f, const struct ctr_set *set,
		      const struct ctr_snap *cur)
{
	int n = 0;

	for (size_t i = 0; i < cur->nlinks; i++) {
		const struct ctr_link *l = &cur->link[i];
		char since[96];

		if (!link_down(l))
			continue;
		fprintf(f, "%s%s port %u (%s",
			n++ ? "; " : "links down: ", set->devs[l->dev].name,
			l->port, word(l->state_name));
		if (l->have_phys)
			fprintf(f, ", %s", word(l->phys_name));
		fprintf(f, ") %s", since_text(l, since, sizeof(since)));
	}
	if (n > 0)
		fprintf(f, "\n");
}

void ctr_print_text(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    const char *label, const struct ctr_event *ev, size_t nev)
{
	const struct ctr_entry *last = NULL;
	const char *note;

	if (prev != NULL)
		fprintf(f,
			"counters: deltas over %.3f s (%s), %zu device(s) "
			"under %s\n",
			cur->t - prev->t, label, set->ndevs, set->dir);
	else
		fprintf(f,
			"counters: absolute values (since the driver "
			"loaded), %zu device(s) under %s\n",
			set->ndevs, set->dir);
	if (prev != NULL)
		fprintf(f, "  %-31s %15s %13s  %s\n", "counter", "delta",
			"per second", "meaning");
	else
		fprintf(f, "  %-31s %15s  %s\n", "counter", "value", "meaning");
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];

		if (last == NULL || last->dev != e->dev ||
		    last->port != e->port ||
		    (last->group == CTR_DEV_HW) != (e->group == CTR_DEV_HW)) {
			if (last != NULL && last->port != 0) {
				note = note_for(set, prev, cur, last->dev,
						last->port);
				if (note != NULL)
					fprintf(f, "  note: %s\n", note);
			}
			block_header(f, set, e);
		}
		text_line(f, prev, cur, e);
		last = e;
	}
	if (last != NULL && last->port != 0) {
		note = note_for(set, prev, cur, last->dev, last->port);
		if (note != NULL)
			fprintf(f, "  note: %s\n", note);
	}
	for (size_t i = 0; i < set->ndevs; i++) {
		int any = 0;

		for (size_t j = 0; j < cur->n && !any; j++)
			any = cur->ent[j].dev == i;
		if (!any)
			fprintf(f,
				"\n%s (%s): no counters (no hw_counters or "
				"ports/N/counters directory)\n",
				set->devs[i].name,
				set->devs[i].driver[0] ? set->devs[i].driver
						       : "driver ?");
	}
	if (cur->nlinks > 0)
		text_links(f, set, cur);
	for (size_t i = 0; i < nev; i++)
		text_event(f, set, &ev[i]);
	text_down(f, set, cur);
	fflush(f);
}

static void json_str(FILE *f, const char *s)
{
	app_json_string(f, s, SIZE_MAX);
}

static const char *group_dir(enum ctr_group g)
{
	return g == CTR_PORT_PMA ? "counters" : "hw_counters";
}

static void json_entry(FILE *f, const struct ctr_set *set,
		       const struct ctr_snap *prev, const struct ctr_snap *cur,
		       const struct ctr_entry *e)
{
	const struct ctr_dev *d = &set->devs[e->dev];
	struct change c = change_of(prev, cur, e);

	fprintf(f, "{\"device\": ");
	json_str(f, d->name);
	fprintf(f, ", \"driver\": ");
	json_str(f, d->driver);
	if (e->group == CTR_DEV_HW)
		fprintf(f, ", \"port\": null");
	else
		fprintf(f, ", \"port\": %u", e->port);
	fprintf(f, ", \"dir\": \"%s\", \"name\": ", group_dir(e->group));
	json_str(f, e->name);
	fprintf(f, ", \"unit\": ");
	json_str(f, e->desc ? e->desc->unit : "");
	fprintf(f, ", \"scale\": %u", scale_of(e));
	if (e->err != 0) {
		fprintf(f, ", \"raw\": null, \"value\": null, \"error\": ");
		json_str(f, e->err == -EINVAL ? "not a number"
					      : strerror(-e->err));
	} else {
		fprintf(f,
			", \"raw\": %" PRIu64 ", \"value\": %" PRIu64
			", \"error\": null",
			e->raw, scaled(e->raw, scale_of(e)));
	}
	if (c.have && !c.reset)
		fprintf(f,
			", \"raw_delta\": %" PRIu64 ", \"delta\": %" PRIu64
			", \"per_second\": %.3f, \"reset\": false",
			c.raw, c.value,
			c.secs > 0.0 ? (double)c.value / c.secs : 0.0);
	else
		fprintf(f,
			", \"raw_delta\": null, \"delta\": null, "
			"\"per_second\": null, \"reset\": %s",
			c.reset ? "true" : "false");
	fprintf(f,
		", \"known\": %s, \"meaning\": ", e->desc ? "true" : "false");
	json_str(f, e->desc ? e->desc->meaning : "no description");
	fprintf(f, "}");
}

/* "state": 4, "state_name": "ACTIVE", "phys_state": 5,
 * "phys_state_name": "LinkUp" (null: no such file; a number null with a
 * name: the file is not "N: NAME"). */
static void json_state(FILE *f, const char *key, int have, int num,
		       const char *name)
{
	fprintf(f, "\"%s\": ", key);
	if (have && num >= 0)
		fprintf(f, "%d", num);
	else
		fprintf(f, "null");
	fprintf(f, ", \"%s_name\": ", key);
	if (have)
		json_str(f, name);
	else
		fprintf(f, "null");
}

static void json_link_state(FILE *f, const struct ctr_link *l)
{
	json_state(f, "state", l->have_state, l->state, l->state_name);
	fprintf(f, ", ");
	json_state(f, "phys_state", l->have_phys, l->phys, l->phys_name);
}

static void json_link(FILE *f, const struct ctr_set *set,
		      const struct ctr_link *l)
{
	char utc[32];

	fprintf(f, "{\"device\": ");
	json_str(f, set->devs[l->dev].name);
	fprintf(f, ", \"port\": %u, ", l->port);
	json_link_state(f, l);
	fprintf(f, ", \"active\": %s",
		!l->have_state ? "null"
		: link_down(l) ? "false"
			       : "true");
	if (link_down(l) && l->down_t >= 0.0)
		fprintf(f,
			", \"down_since_s\": %.3f, \"down_since_utc\": \"%s\"",
			l->down_t, utc_text(l->down_wall, utc, sizeof(utc)));
	else
		fprintf(f,
			", \"down_since_s\": null, \"down_since_utc\": null");
	fprintf(f, ", \"down_at_start\": %s}",
		link_down(l) && l->down_t < 0.0 && l->first_t <= 0.0 ? "true"
								     : "false");
}

void ctr_print_json_events(FILE *f, const struct ctr_set *set,
			   const struct ctr_events *ev)
{
	char utc[32];

	fprintf(f, "[");
	for (size_t i = 0; ev != NULL && i < ev->n; i++) {
		const struct ctr_event *e = &ev->ev[i];

		fprintf(f, "%s\n  {\"device\": ", i ? "," : "");
		json_str(f, set->devs[e->to.dev].name);
		fprintf(f,
			", \"port\": %u, \"at_s\": %.3f, \"at_utc\": \"%s\""
			", \"from\": {",
			e->to.port, e->t, utc_text(e->wall, utc, sizeof(utc)));
		json_link_state(f, &e->from);
		fprintf(f, "}, \"to\": {");
		json_link_state(f, &e->to);
		fprintf(f, "}}");
	}
	fprintf(f, "]");
}

void ctr_print_json(FILE *f, const struct ctr_set *set,
		    const struct ctr_snap *prev, const struct ctr_snap *cur,
		    unsigned index)
{
	const struct ctr_entry *last = NULL;
	int nnotes = 0;

	fprintf(f, "{\"index\": %u, \"seconds\": ", index);
	if (prev != NULL)
		fprintf(f, "%.6f", cur->t - prev->t);
	else
		fprintf(f, "null");
	fprintf(f, ",\n   \"counters\": [");
	for (size_t i = 0; i < cur->n; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_entry(f, set, prev, cur, &cur->ent[i]);
	}
	fprintf(f, "],\n   \"notes\": [");
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctr_entry *e = &cur->ent[i];
		const char *note;

		if (e->port == 0 || (last != NULL && last->dev == e->dev &&
				     last->port == e->port))
			continue;
		last = e;
		note = note_for(set, prev, cur, e->dev, e->port);
		if (note == NULL)
			continue;
		fprintf(f, "%s\n    {\"device\": ", nnotes++ ? "," : "");
		json_str(f, set->devs[e->dev].name);
		fprintf(f, ", \"port\": %u, \"text\": ", e->port);
		json_str(f, note);
		fprintf(f, "}");
	}
	fprintf(f, "],\n   \"links\": [");
	for (size_t i = 0; i < cur->nlinks; i++) {
		fprintf(f, "%s\n    ", i ? "," : "");
		json_link(f, set, &cur->link[i]);
	}
	fprintf(f, "]}");
	fflush(f);
}
