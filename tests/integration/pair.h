/* SPDX-License-Identifier: MIT */
/* Two ctxs of one test process: open one, make each the other's peer.
 * Each exits 1 through CHECK (check.h), saying why, when it fails. */
#ifndef TERN_TEST_PAIR_H
#define TERN_TEST_PAIR_H

#include <stdint.h>

#include <tern/tern.h>

#include "check.h"

/* A ctx on @prov (@node: the address to bind, or NULL). */
static inline struct tern_ctx *pair_open(const char *prov, const char *node)
{
	struct tern_ctx_attr attr = { .provider = prov, .node = node };
	struct tern_ctx *ctx = NULL;
	int ret = tern_ctx_open(&attr, &ctx);

	CHECK(ret == 0, "tern_ctx_open(%s): %s", prov, tern_strerror(ret));
	return ctx;
}

/* @y as a peer of @x, from @y's card. */
static inline struct tern_peer *pair_peer(struct tern_ctx *x,
					  struct tern_ctx *y)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p = NULL;
	ssize_t len = tern_ctx_card(y, card, sizeof(card));
	int ret = len > 0 ? tern_peer_add(x, card, (size_t)len, &p) : (int)len;

	CHECK(ret == 0, "tern_peer_add: %s", tern_strerror(ret));
	return p;
}

#endif /* TERN_TEST_PAIR_H */
