/* SPDX-License-Identifier: MIT */
/* tern counters: RDMA NIC counters over an interval, each with its meaning. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "apps/counters.h"
#include "apps/json.h"
#include "cli.h"
#include "opts.h"

#define INTERVAL_MAX 3600.0
#define INTERVAL_MIN 0.01 /* the kernel caches hw_counters for 10 ms */
#define COUNT_MAX    1000000

struct counters_cli {
	double interval;
	uint64_t count;
	int json;
	const char *json_file;
	const char *root;
	const char *root_opt; /* --root as given */
	const char *only;
	volatile sig_atomic_t *stop;
	FILE *text; /* NULL with --json alone */
	FILE *jf;   /* NULL without --json */
};

static const int counters_keys[] = { CLI_INTERVAL, 'c', 'j', CLI_ROOT,
				     CLI_DEVICE,   'h', 0 };

static void usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f, "usage: tern counters [--interval S] [--count N] "
		   "[--json[=FILE]] [--root DIR]\n"
		   "                     [--device NAME,...]\n"
		   "\n"
		   "Read the RDMA NICs' counters from /sys/class/infiniband "
		   "(EFA, ConnectX and\nany other RDMA driver) and print how "
		   "much each moved over --interval S\n(default 1) for --count "
		   "N intervals (default 1), each with what it counts.\n"
		   "On EFA, rdma_write_* and rdma_read_* count only RDMA the "
		   "device carries: 0\nthere while send_bytes moves means the "
		   "data went as sends, not that nothing\nmoved. --interval 0 "
		   "prints the absolute values once. port_xmit_data and\n"
		   "port_rcv_data count 4-byte words: they are shown in bytes. "
		   "Each port's link\n(ports/N/state, phys_state) follows; one "
		   "not ACTIVE is marked '!' and listed\nunder \"links down\" "
		   "with since when (\"down at start\": down at the first\n"
		   "reading), and a change between two readings is printed "
		   "once, with its time.\nWith no RDMA "
		   "device it says so and exits 0; a --device "
		   "that is not there exits 2.\nCtrl-C prints the interval so "
		   "far and exits 1. Meanings and sources:\ndocs/cli.md.\n\n");
	cli_opts_help(p, f);
}

static int parse_interval(const char *val, double *out)
{
	double v;
	char *end;

	errno = 0;
	v = strtod(val, &end);
	/* Digits and a point only: no "nan", "inf", hex, exponent, sign or
	 * blank. */
	if (val[strspn(val, "0123456789.")] != '\0' || *end != '\0' ||
	    errno != 0 || !(v >= 0.0) || v > INTERVAL_MAX ||
	    (v > 0.0 && v < INTERVAL_MIN)) {
		cli_err("counters",
			"--interval '%s': expected 0 (absolute values once) "
			"or seconds from %.2f to %.0f",
			val, INTERVAL_MIN, INTERVAL_MAX);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* --root or $TERN_COUNTERS_ROOT (empty: unset) must be a directory. */
static int check_root(struct counters_cli *s, const char *opt)
{
	const char *env = getenv("TERN_COUNTERS_ROOT");
	const char *bad = NULL;
	struct stat st;

	if (opt == NULL && env != NULL && env[0] != '\0')
		s->root = env;
	else
		s->root = opt;
	if (s->root == NULL)
		return 0;
	if (stat(s->root, &st) != 0)
		bad = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		bad = "not a directory";
	if (bad != NULL) {
		cli_err("counters", "%s '%s': %s",
			opt != NULL ? "--root" : "$TERN_COUNTERS_ROOT", s->root,
			bad);
		return -EINVAL;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep until @t (CLOCK_MONOTONIC seconds) in slices of at most 0.2 s,
 * so that Ctrl-C is seen at once. @return 1 if it was pressed. */
static int wait_until(double t, volatile sig_atomic_t *stop)
{
	double left;

	while (!*stop && (left = t - now_s()) > 0.0) {
		struct timespec ts;

		if (left > 0.2)
			left = 0.2;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL); /* EINTR: look at *stop again */
	}
	return *stop != 0;
}

static void json_head(const struct counters_cli *s, const struct ctr_set *set)
{
	FILE *f = s->jf;

	fprintf(f, "{\"dir\": ");
	app_json_string(f, set->dir, SIZE_MAX);
	fprintf(f, ", \"mode\": \"%s\", \"interval_s\": ",
		s->interval > 0.0 ? "delta" : "absolute");
	if (s->interval > 0.0)
		fprintf(f, "%.6g", s->interval);
	else
		fprintf(f, "null");
	fprintf(f, ", \"count\": %" PRIu64 ",\n \"devices\": [", s->count);
	for (size_t i = 0; i < set->ndevs; i++) {
		fprintf(f, "%s{\"name\": ", i ? ", " : "");
		app_json_string(f, set->devs[i].name, SIZE_MAX);
		fprintf(f, ", \"driver\": ");
		app_json_string(f, set->devs[i].driver, SIZE_MAX);
		fprintf(f, "}");
	}
	fprintf(f, "],\n \"intervals\": [");
	fflush(f);
}

static void json_tail(const struct counters_cli *s, const struct ctr_set *set,
		      const struct ctr_events *ev, int stopped,
		      const char *note)
{
	fprintf(s->jf, "],\n \"events\": ");
	ctr_print_json_events(s->jf, set, ev);
	fprintf(s->jf,
		",\n \"stopped\": %s, \"note\": ", stopped ? "true" : "false");
	if (note != NULL)
		app_json_string(s->jf, note, SIZE_MAX);
	else
		fprintf(s->jf, "null");
	fprintf(s->jf, "}\n");
}

/* Nothing to watch: say so (it is an answer, not an error). */
static void no_devices(const struct counters_cli *s, const struct ctr_set *set,
		       const char *why)
{
	char note[4200];

	/* A reason past the buffer is cut: the note still reads. */
	if (snprintf(note, sizeof(note),
		     "no RDMA devices: %s (no RDMA driver is loaded here; in "
		     "a container, /sys/class/infiniband comes from the "
		     "host's /sys)",
		     why) >= (int)sizeof(note))
		note[sizeof(note) - 1] = '\0';
	if (s->text != NULL)
		fprintf(s->text, "counters: %s\n", note);
	if (s->jf != NULL) {
		json_head(s, set);
		json_tail(s, set, NULL, 0, note);
	}
}

/* The readings; @return the exit status. */
static int watch(struct counters_cli *s, const struct ctr_set *set)
{
	struct ctr_snap a = { 0 }, b = { 0 }, *prev = &a, *cur = &b, *t;
	struct ctr_events ev = { 0 };
	int stopped = 0, ret;
	double t0;

	if (s->jf != NULL)
		json_head(s, set);
	ret = ctr_snap_read(set, prev);
	if (ret != 0)
		goto out;
	if (s->interval == 0.0) {
		if (s->text != NULL)
			ctr_print_text(s->text, set, NULL, prev, "", NULL, 0);
		if (s->jf != NULL)
			ctr_print_json(s->jf, set, NULL, prev, 1);
		goto out;
	}
	t0 = prev->t;
	for (uint64_t i = 1; i <= s->count; i++) {
		size_t seen = ev.n;
		char label[96];

		stopped = wait_until(t0 + (double)i * s->interval, s->stop);
		ret = ctr_snap_read(set, cur);
		if (ret == 0)
			ret = ctr_links_follow(prev, cur, t0, &ev);
		if (ret != 0)
			break;
		snprintf(label, sizeof(label),
			 "interval %" PRIu64 " of %" PRIu64 "%s", i, s->count,
			 stopped ? ", cut short by Ctrl-C" : "");
		if (s->text != NULL) {
			if (i > 1)
				fprintf(s->text, "\n");
			ctr_print_text(s->text, set, prev, cur, label,
				       ev.n > seen ? ev.ev + seen : NULL,
				       ev.n - seen);
		}
		if (s->jf != NULL) {
			fprintf(s->jf, "%s\n  ", i > 1 ? "," : "");
			ctr_print_json(s->jf, set, prev, cur, (unsigned)i);
		}
		t = prev;
		prev = cur;
		cur = t;
		if (stopped)
			break;
	}
out:
	if (s->jf != NULL)
		json_tail(s, set, &ev, stopped, NULL);
	ctr_snap_cleanup(&a);
	ctr_snap_cleanup(&b);
	ctr_events_cleanup(&ev);
	if (ret != 0) {
		cli_err("counters", "reading the counters: %s", strerror(-ret));
		return 1;
	}
	return stopped ? 1 : 0;
}

static int counters_option(void *data, int c, const char *arg)
{
	struct counters_cli *s = data;

	switch (c) {
	case CLI_INTERVAL:
		return parse_interval(arg, &s->interval);
	case 'c':
		return cli_uint("counters", "--count", arg, 1, COUNT_MAX,
				&s->count);
	case 'j':
		s->json = 1;
		s->json_file = arg;
		break;
	case CLI_ROOT:
		s->root_opt = arg;
		break;
	case CLI_DEVICE:
		s->only = arg;
		break;
	}
	return 0;
}

static const struct cli_cmd counters_cmd = {
	.name = "counters",
	.keys = counters_keys,
	.usage = usage,
	.option = counters_option,
};

int cmd_counters(int argc, char **argv)
{
	struct counters_cli s = { .interval = 1.0, .count = 1 };
	struct ctr_set set;
	char why[4200];
	int ret;

	ret = cli_parse(&counters_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	if (s.interval == 0.0 && s.count > 1) {
		cli_err("counters",
			"--count %" PRIu64 " with --interval 0: absolute "
			"values are read once (give an --interval for deltas)",
			s.count);
		return 2;
	}
	if (check_root(&s, s.root_opt) != 0)
		return 2;
	ret = ctr_set_init(&set, s.root, s.only, why, sizeof(why));
	if (ret == -ENOENT && s.only != NULL) {
		cli_err("counters", "--device '%s': no RDMA devices here (%s)",
			s.only, why);
		return 2;
	}
	if (ret == -ENODEV || ret == -EINVAL) {
		cli_err("counters", "--device %s", why);
		return 2;
	}
	if (ret != 0 && ret != -ENOENT) {
		cli_err("counters", "%s", why);
		return 1;
	}
	s.text = s.json && s.json_file == NULL ? NULL : stdout;
	if (s.json && s.json_file != NULL) {
		s.jf = fopen(s.json_file, "w");
		if (s.jf == NULL) {
			cli_err("counters", "--json=%s: %s", s.json_file,
				strerror(errno));
			ctr_set_cleanup(&set);
			return 1;
		}
	} else if (s.json) {
		s.jf = stdout;
	}
	s.stop = cli_catch_signals();
	if (ret == -ENOENT) {
		no_devices(&s, &set, why);
		ret = 0;
	} else if (set.ndevs == 0) {
		snprintf(why, sizeof(why), "%s is empty", set.dir);
		no_devices(&s, &set, why);
		ret = 0;
	} else {
		ret = watch(&s, &set);
	}
	ctr_set_cleanup(&set);
	if (s.jf != NULL && s.jf != stdout && fclose(s.jf) != 0) {
		cli_err("counters", "--json=%s: writing it: %s", s.json_file,
			strerror(errno));
		return 1;
	}
	return ret;
}
