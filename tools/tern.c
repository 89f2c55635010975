/* SPDX-License-Identifier: MIT */
/* tern: one binary, git-style subcommands. Logic lives in the library. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "cli.h"
#include "opts.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "info", cmd_info, "what the fabric providers here offer" },
	{ "fill", cmd_fill,
	  "verified random fill: ask a server, or be one (--listen)" },
	{ "demo", cmd_demo, "fill server + client as two processes here" },
	{ "ping", cmd_ping, "latency ping-pong (send or write with imm)" },
	{ "atomic", cmd_atomic, "remote fetch-add / compare-swap demo" },
	{ "bench", cmd_bench, "bandwidth, message rate, latency percentiles" },
	{ "topo", cmd_topo, "GPUs, RDMA NICs, NUMA nodes, cores: the map" },
	{ "counters", cmd_counters,
	  "RDMA NIC counters over an interval, with what each means" },
	{ "doctor", cmd_doctor,
	  "what makes RDMA fail or slow here, and the fixes" },
};

/* Commands that were renamed: refused naming the new spelling (exit 2),
 * never run, as an option's old spelling is (tools/opts.c). */
static const struct {
	const char *old;
	const char *now;
	const char *note;
} moved[] = {
	{ "serve", "tern fill --listen [HOST:PORT]", " (same options)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tern <command> [options]   (tern <command> --help)\n"
		   "\n"
		   "Move memory between processes and hosts with RDMA, over "
		   "libfabric.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "  %-8s %s\n", "version", "tern and libfabric versions");
	fprintf(f, "\nEvery option means the same in every command "
		   "(docs/cli.md). A server is\n`tern CMD --listen "
		   "[HOST:PORT]`; a client names it by card hex or "
		   "HOST:PORT.\n");
	cli_env_help(f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "version") == 0 ||
	    strcmp(argv[1], "--version") == 0) {
		if (argc > 2 && (strcmp(argv[2], "--help") == 0 ||
				 strcmp(argv[2], "-h") == 0)) {
			printf("usage: tern version\n\nPrint tern's version, "
			       "the running libfabric's, the API version\n"
			       "asked for ($TERN_FI_API) and the one tern "
			       "was built with.\n");
			return 0;
		}
		if (argc > 2) {
			fprintf(stderr,
				"tern %s: %s '%s' (see tern version --help)\n",
				argv[1],
				argv[2][0] == '-' ? "unknown option"
						  : "unexpected argument",
				argv[2]);
			return 2;
		}
		printf("tern %s (libfabric %s at run time, API %s, built "
		       "with %s)\n",
		       tern_version(), tern_fabric_version(),
		       tern_fabric_api_version(), tern_fabric_build_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	}
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		if (strcmp(argv[1], moved[i].old) == 0) {
			cli_err(moved[i].old, "'tern %s' is now '%s'%s",
				moved[i].old, moved[i].now, moved[i].note);
			return 2;
		}
	}
	fprintf(stderr, "tern: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
