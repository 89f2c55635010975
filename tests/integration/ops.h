/* SPDX-License-Identifier: MIT */
/*
 * The fixture of ops (one program, its tests split by topic: ops_rma.c,
 * ops_atomic.c, ops_pieces.c, ops_access.c, ops_small.c): the options,
 * the pipes between the parent, the target B and the initiators A, and
 * the fabric helpers each side uses. Each helper exits 1 through CHECK
 * (check.h), saying why, when it fails.
 */
#ifndef TERN_TEST_OPS_H
#define TERN_TEST_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#include "check.h"

#define SKIP 77
#define MIB  (1u << 20)

struct opts {
	const char *provider;
	const char *node;
};

extern struct opts g_opts;

/* --- pipes ------------------------------------------------------------ */

/* One message of @len bytes down @fd, and one read from it (at most @cap
 * bytes): @return its length. */
void put_blob(int fd, const void *buf, uint32_t len);
uint32_t get_blob(int fd, void *buf, uint32_t cap);

/* --- processes -------------------------------------------------------- */

struct chan {
	int to_b[2];   /* parent/A -> B */
	int from_b[2]; /* B -> parent/A */
};

/* Fork: the child runs @fn(@ch, @arg) and exits 0. */
pid_t spawn(void (*fn)(struct chan *, void *), struct chan *ch, void *arg);

/* After the last spawn: the parent keeps only to_b[1] and from_b[0], so
 * a child that dies shows as end-of-file instead of a hang. */
void parent_ends(struct chan *ch);

/* Wait for @pid: its exit status (128 if it did not exit). */
int reap(pid_t pid);

/* Exit SKIP, saying why, unless the provider offers @what (@have). */
void need(int have, const char *what);

/* --- fabric helpers --------------------------------------------------- */

struct tern_ctx *open_ctx(void);

/* @len bytes aligned to 128, every byte @fill. */
void *alloc_buf(size_t len, int fill);

struct tern_mr *reg(struct tern_ctx *ctx, void *buf, size_t len,
		    uint64_t access);

/* @mr's descriptor, packed, down @fd; and one read from @fd into @d. */
void send_desc(int fd, const struct tern_mr *mr);
void get_desc(int fd, struct tern_mr_desc *d);

/* @ctx's card down @fd; and the peer of the card read from @fd. */
void send_card(int fd, struct tern_ctx *ctx);
struct tern_peer *get_peer(int fd, struct tern_ctx *ctx);

/* Wait for @req (20 s at most): it must complete 0. */
void wait_ok(struct tern_ctx *ctx, struct tern_req *req, const char *what);

/* Drive progress (targets must, on manual-progress providers) until a
 * byte arrives on @fd; return it. */
int serve_until(struct tern_ctx *ctx, int fd);

/*
 * An initiator's local completion does not mean its data reached the
 * target, and a process that closes its sockets early can lose what is
 * still in flight (tcp). Targets say 'D' once they have everything
 * (target_has_it); initiators wait for it before they go (wait_target).
 */
void target_has_it(struct chan *ch);
void wait_target(struct tern_ctx *ctx, struct chan *ch);

/* @len bytes of the Mersenne Twister stream of @seed. */
void mt_fill(void *buf, size_t len, uint64_t seed);

/* --- the tests: a target B and its initiators, or a whole test --------- */

void read_target(struct chan *ch, void *arg);
void read_initiator(struct chan *ch, void *arg);
void sendimm_target(struct chan *ch, void *arg);
void sendimm_initiator(struct chan *ch, void *arg);
void test_fadd(struct chan *ch);
void test_cswap(struct chan *ch);
void pieces_target(struct chan *ch, void *arg);
void pieces_initiator(struct chan *ch, void *arg);
void pieces_initiator_arrays(struct chan *ch, void *arg);
void test_access(struct chan *ch);
void badaddr_target(struct chan *ch, void *arg);
void badaddr_initiator(struct chan *ch, void *arg);
void small_target(struct chan *ch, void *arg);
void small_initiator(struct chan *ch, void *arg);

#endif /* TERN_TEST_OPS_H */
