/* SPDX-License-Identifier: MIT */
/* --world for tern bench and tern ping: one process per rank. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <tern/tern.h>
#include <tern/world.h>

#include "bench/bench_world.h"
#include "cli.h"

int cli_world(const char *cmd, const char *spec, const char *provider,
	      const char *node, const struct bench_world_opts *o,
	      const char *json, int ping)
{
	struct tern_ctx_attr attr = {
		.provider = provider,
		.node = node,
		.rails = 1,
		.flags = TERN_CTX_BUSY_POLL,
	};
	struct tern_world_attr wa;
	struct tern_world *w = NULL;
	struct tern_ctx *ctx = NULL;
	FILE *jf = NULL;
	char why[512] = "";
	int ret, rank;

	ret = tern_ctx_open(&attr, &ctx);
	if (ret != 0) {
		cli_err(cmd, "cannot open a ctx: %s", tern_strerror(ret));
		return 1;
	}
	tern_world_attr_init(&wa);
	ret = tern_world_open(ctx, spec, &wa, &w);
	if (ret != 0) {
		cli_err(cmd,
			"--world %s: %s (the log says why; see "
			"docs/world.md)",
			spec ? spec : "($TERN_WORLD)", tern_strerror(ret));
		tern_ctx_close(ctx);
		return 1;
	}
	rank = tern_world_rank(w);
	if (json != NULL && rank == 0) {
		jf = strcmp(json, "-") == 0 ? stdout : fopen(json, "w");
		if (jf == NULL) {
			cli_err(cmd, "--json=%s: %s", json, strerror(errno));
			ret = -errno;
		}
	}
	if (ret == 0)
		ret = ping ? bench_world_ping(ctx, w, o, jf, why, sizeof(why))
			   : bench_world_a2a(ctx, w, o, jf, why, sizeof(why));
	if (ret != 0)
		cli_err(cmd, "rank %d: %s", rank,
			why[0] ? why : tern_strerror(ret));
	else if (rank != 0)
		printf("%s: rank %d of %d done\n", cmd, rank,
		       tern_world_size(w));
	if (jf != NULL && jf != stdout)
		fclose(jf);
	tern_world_close(w);
	tern_ctx_close(ctx);
	return ret == 0 ? 0 : 1;
}
