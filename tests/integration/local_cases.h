/* SPDX-License-Identifier: MIT */
/*
 * What the parts of local share (one program, its cases split by topic:
 * local_shared.c, local_child.c, local_broker.c, local_cuda.c): waiting
 * on requests, and a child process on two pipes. Built on
 * local_fixture.h.
 */
#ifndef TERN_TEST_LOCAL_CASES_H
#define TERN_TEST_LOCAL_CASES_H

#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#include "local_fixture.h"

#include "../../src/wire/card.h"

#define REGION (3u << 20)

/* Internal: a ctx's same-host identity (its nonce names its broker). */
const struct tern__card_local *tern__local_id(const struct tern_ctx *ctx);

/* Wait for @req, progressing every ctx given: its status. */
int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b,
	 struct tern_ctx *c);

/* ---- cases with a child process (local_child.c) -------------------- */

struct pipe2 {
	int to_child[2], to_parent[2];
};

/* Progress @ctx until @fd has something to read. */
void wait_msg(int fd, struct tern_ctx *ctx);

/* Fork a child that runs case @what (under uid 65534 if @other_uid,
 * with TERN_LOCAL=0 if @no_local), on the pipes @pp. */
pid_t spawn(struct pipe2 *pp, const char *what, int other_uid, int no_local);

/* Progress @ctx until the child says it is done. */
void wait_done(struct pipe2 *pp, struct tern_ctx *ctx);

/* ---- the fd broker (local_broker.c) --------------------------------- */

/* The parent's ctx, as the child of a "scmuid" case sees it (fork). */
extern struct tern_ctx *g_owner;

/*
 * Ask the broker of the ctx of nonce @owner, as the ctx of nonce @me, for
 * @what (@idx, showing @d's keys) and wait for its answer: the number of
 * fds it sent (in @fds, at most 2; @rdonly_p says how), or -errno: its
 * status, -ECONNREFUSED (no broker).
 */
int ask_broker(uint64_t owner, uint64_t me, uint32_t what, uint32_t idx,
	       const struct tern_mr_desc *d, int *fds, uint32_t *rdonly_p);

/* ---- GPU memory (local_cuda.c) -------------------------------------- */

/* The child of the cuda case: exits. */
void child_cuda(struct pipe2 *pp);

/* ---- the cases: 0 pass, 77 skip (a failed check exits 1) ------------ */

int case_shared(void);
/* cma, uid, kill, scm, scmuid: a case with a child process. */
int case_child(const char *what);
int case_scmuid(void);
int case_mixed(void);
int case_cuda(void);

#endif /* TERN_TEST_LOCAL_CASES_H */
