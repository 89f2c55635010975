/* SPDX-License-Identifier: MIT */
/*
 * The engine's unit tests' fixture: a hand-built ctx whose rails use the
 * fake provider (fake_prov.c), one peer, one local region, one remote
 * descriptor; and a request that records its callbacks.
 */
#ifndef TERN_TEST_FAKE_ENV_H
#define TERN_TEST_FAKE_ENV_H

#include "engine/engine.h"
#include "fake_prov.h"

#define ENV_BUF_LEN 4096
#define RBASE	    0x7f0000100000ULL
#define RLEN	    (1ULL << 20)
#define RKEY	    0xabc123ULL
#define PEER_ADDR   7

struct env {
	struct tern_ctx *ctx;
	struct tern_peer peer;
	struct tern_mr mr;
	struct tern_mr_desc rdesc;
	char buf[ENV_BUF_LEN];
};

/* What the local region's descriptors are, per rail. */
extern int local_desc_token[FAKE_RAILS];

/* cmocka's setup and teardown of a struct env in *state. */
int setup(void **state);
int teardown(void **state);

/* A request that records its callbacks. */
struct tracked {
	struct tern_req req;
	int calls;
	int status;
	int done_in_cb;
};

void track_init(struct tracked *t);

#endif /* TERN_TEST_FAKE_ENV_H */
