/* SPDX-License-Identifier: MIT */
/*
 * Checks every world backend passes alike, shared by the world tests
 * (world.c: the file world; world_store.c: the store world).
 */
#ifndef TERN_TEST_WORLD_CHECK_H
#define TERN_TEST_WORLD_CHECK_H

#include <tern/tern.h>

/* A ctx of one rail over @prov (tcp: on 127.0.0.1), or exit 1. */
struct tern_ctx *world_check_ctx(const char *prov);

/*
 * A world of one rank (rank 0 of 1) of kind @kind: rank, size, kind,
 * alive; put/get, a republished name, a short buffer, a name never
 * published (the world's timeout must be short), bad names, a value one
 * byte too large and one of TERN_WORLD_VALUE_MAX, a rank out of range.
 */
void world_check_alone(struct tern_world *w, const char *kind);

/*
 * Register @region (@len bytes) on @ctx, publish its descriptor under
 * "region" as rank 0 and look it up again: the region, or exit 1.
 */
struct tern_mr *world_check_publish(struct tern_ctx *ctx, struct tern_world *w,
				    void *region, size_t len);

#endif /* TERN_TEST_WORLD_CHECK_H */
