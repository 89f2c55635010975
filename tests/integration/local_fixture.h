/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the same-host path's tests (local, local_cma,
 * local_hostile: one program each, some split by topic): the provider
 * and address from the command line, ctxs opened on them, peers added
 * from each other's cards, a test pattern, and messages down the pipes
 * to a child process. Each helper exits 1 through CHECK (check.h),
 * saying why, when it fails.
 */
#ifndef TERN_TEST_LOCAL_FIXTURE_H
#define TERN_TEST_LOCAL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <tern/tern.h>

#include "check.h"

#define RW                                             \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | \
	 TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_ATOMIC)

/* --provider (shm unless given) and --node (NULL unless given). */
extern const char *g_prov;
extern const char *g_node;

/* Parse --provider and --node into g_prov and g_node: @return the case
 * named after them (exits 2 on an unknown option, 1 without a case,
 * printing "usage: @prog ..."). */
const char *local_args(int argc, char **argv, const char *prog);

/* A ctx on g_prov at g_node, one rail. */
struct tern_ctx *open_ctx(void);

/* @ctx's card into @card (TERN_CARD_MAX bytes): @return its length. */
size_t card_of(struct tern_ctx *ctx, uint8_t *card);

/* @to as a peer of @ctx, from @to's card. */
struct tern_peer *add(struct tern_ctx *ctx, struct tern_ctx *to);

/* @n bytes of the pattern of @seed. */
void fill(uint8_t *p, size_t n, unsigned int seed);

/* One message down a pipe (pipe.h), and one read from it (at most
 * @cap bytes): @return its length. */
void put(int fd, const void *p, size_t n);
size_t get(int fd, void *p, size_t cap);

/* The abstract socket name of the fd broker of the ctx of nonce @nonce
 * into @a: @return its length. */
socklen_t broker_addr(struct sockaddr_un *a, uint64_t nonce);

/* A connection to the fd broker of the ctx of nonce @owner (its
 * abstract socket name), or -1 (errno says why). */
int broker_connect(uint64_t owner);

#endif /* TERN_TEST_LOCAL_FIXTURE_H */
