/* SPDX-License-Identifier: MIT */
/* tern doctor: what makes RDMA fail or silently slow here, and the fixes. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tern/tern.h>

#include "apps/doctor.h"
#include "cli.h"
#include "opts.h"

#define REGION_DEFAULT (1ULL << 30)
#define REGION_MAX     (1ULL << 50)

static const int doctor_keys[] = { 'j', CLI_ROOT, CLI_REGION_SIZE, 'h', 0 };

static void usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f,
		"usage: tern doctor [--json[=FILE]] [--root DIR] "
		"[--region-size SIZE]\n"
		"\n"
		"Check this machine for what makes RDMA fail or silently "
		"slow, and print one\nline per finding: ok, warn or fail, "
		"why, and the fix. It checks the\nlibfabric this process "
		"loaded (a second copy in one process fails), the\nAPI "
		"version tern negotiates, the efa, verbs, tcp and shm "
		"providers (absent,\nand why), EFA devices (firmware, driver, "
		"device RDMA), the locked-memory\nlimit against a region of "
		"--region-size SIZE (default 1G), Yama's\nptrace_scope (shm's "
		"single copy), huge pages, and the CUDA driver\n(dma-buf, "
		"nvidia-peermem). Exit 0 when nothing fails (tern can run), "
		"1 when\nsomething does, 2 for a bad option. --root DIR (or "
		"$TERN_DOCTOR_ROOT)\nreads DIR/sys, DIR/proc and DIR/dev "
		"instead of the host's: fixtures.\nEach check and its fix: "
		"docs/cli.md.\n\n");
	cli_opts_help(p, f);
}

/* --root or $TERN_DOCTOR_ROOT (empty: unset) must be a directory. */
static int check_root(const char *opt, const char **root_p)
{
	const char *env = getenv("TERN_DOCTOR_ROOT");
	const char *root = opt, *bad = NULL;
	struct stat st;

	if (opt == NULL && env != NULL && env[0] != '\0')
		root = env;
	*root_p = root;
	if (root == NULL)
		return 0;
	if (stat(root, &st) != 0)
		bad = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		bad = "not a directory";
	if (bad != NULL) {
		cli_err("doctor", "%s '%s': %s",
			opt != NULL ? "--root" : "$TERN_DOCTOR_ROOT", root,
			bad);
		return -EINVAL;
	}
	return 0;
}

struct doctor_cli {
	int json;
	const char *json_file;
	const char *root_opt;
	uint64_t region;
};

static int doctor_option(void *data, int c, const char *arg)
{
	struct doctor_cli *s = data;

	switch (c) {
	case 'j':
		s->json = 1;
		s->json_file = arg;
		break;
	case CLI_ROOT:
		s->root_opt = arg;
		break;
	case CLI_REGION_SIZE:
		return cli_size("doctor", "--region-size", arg, 1, REGION_MAX,
				&s->region);
	}
	return 0;
}

static const struct cli_cmd doctor_cmd = {
	.name = "doctor",
	.keys = doctor_keys,
	.usage = usage,
	.option = doctor_option,
	.args = CLI_ARG_SEE_HELP,
};

int cmd_doctor(int argc, char **argv)
{
	struct doctor_cli s = { .region = REGION_DEFAULT };
	const char *root;
	struct doctor d;
	int saved, ret;

	ret = cli_parse(&doctor_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	if (check_root(s.root_opt, &root) != 0)
		return 2;
	doctor_init(&d, root, s.region);
	doctor_run(&d);
	saved = cli_stdout_to("doctor", s.json_file);
	if (saved == -1) {
		doctor_cleanup(&d);
		return 1;
	}
	if (s.json)
		doctor_print_json(&d, stdout);
	if (!s.json || s.json_file != NULL) {
		/* --json=FILE keeps the text on the terminal. */
		ret = cli_stdout_back("doctor", saved);
		saved = -2;
		if (ret != 0) {
			doctor_cleanup(&d);
			return 1;
		}
		doctor_print_text(&d, stdout);
	}
	ret = doctor_worst(&d) == DOCTOR_FAIL ? 1 : 0;
	doctor_cleanup(&d);
	if (cli_stdout_back("doctor", saved) != 0)
		return 1;
	return ret;
}
