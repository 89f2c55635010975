/* SPDX-License-Identifier: MIT */
/*
 * The fixture of local_hostile (one program, its cases split by topic:
 * local_hostile_forge.c, _regions.c, _rings.c, _broker.c): a victim's
 * memory at one address in every forked process, children that end
 * with a failed check, what a case looks at (fd tables, pidfds, our own
 * log), child processes on pipes, and a good peer served after an
 * attack. Built on local_fixture.h.
 */
#ifndef TERN_TEST_LOCAL_HOSTILE_FIXTURE_H
#define TERN_TEST_LOCAL_HOSTILE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#include "local_fixture.h"

#include "../../src/wire/card.h"

#define MEM 65536

/* A victim's memory: at the same address in every forked process. */
extern uint8_t g_mem[MEM];

/* The test's own process (not a child's). */
extern pid_t g_main;

/* Children to end if a check fails (exit with them alive would keep
 * the test's output open): kid() records one, kill_kids() (at exit, in
 * g_main only) ends them. */
void kid(pid_t pid);
void kill_kids(void);

/* @card (a real one, for its fabric address) with the same-host part
 * @loc: what a forger sends. @return its length. */
size_t card_splice(const uint8_t *card, size_t len,
		   const struct tern__card_local *loc, uint8_t *out);

/* The same-host part of @card. */
struct tern__card_local local_of(const uint8_t *card, size_t len);

/* Progress @a (and @b, unless NULL) until @req is done: its status. */
int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b);

/* Progress @a (and @b, unless NULL) for about @ms ms. */
void spin(struct tern_ctx *a, struct tern_ctx *b, int ms);

uint64_t now_ms(void);

/* ---- what a case looks at ------------------------------------------ */

/* /proc/@pid/fd as text: "fd -> target" lines, sorted by fd; sockets
 * left out when @no_sockets (a provider's connections: the fabric's).
 * fd_table(): all of them. The caller frees it. */
char *fd_table_of(pid_t pid, int no_sockets);
char *fd_table(pid_t pid);

/* Does @pid hold a pidfd of @target (/proc/PID/fdinfo's "Pid:")? */
int holds_pidfd(pid_t pid, pid_t target);

/* Capturing our own stderr (tern logs there): begin, then end, which
 * hands back what was written (the caller frees it) and echoes it to
 * the real stderr. */
void cap_begin(void);
char *cap_end(void);

/* How many times @what stands in @text. */
int count(const char *text, const char *what);

/* ---- child processes ------------------------------------------------ */

struct chan {
	int in, out; /* ours */
};

/* Fork; the child runs @fn with its end of two pipes and exits. */
pid_t fork_child(struct chan *parent_end, void (*fn)(struct chan *));

/* Wait for @pid: it must have exited 0. */
void reap(pid_t pid);

/* B: a ctx with a region on g_mem; sends its card and descriptor, then
 * on "add" adds the card it is given; "check" compares g_mem with the
 * pattern it is sent; progresses while it waits. */
void owner_main(struct chan *c);

/* Does B's g_mem hold @want (MEM bytes)? */
int owner_has(struct chan *c, const uint8_t *want);

/* A good peer pair after an attack: @owner adds a fresh ctx and the ctx
 * adds it; a write lands at once on the same-host path. */
void good_peer(struct tern_ctx *owner, const char *after);

/* Not root: say that @what is skipped, and @return 1. */
int need_root(const char *what);

/* ---- the cases: 0 pass, 77 skip (a failed check exits 1) ------------ */

int case_spoof(void);
int case_forged(void);
int case_unsealed(void);
int case_noregion(void);
int case_resize(void);
int case_hol(void);
int case_scribble(void);
int case_stuck(void);
int case_silent(void);
int case_serve(void);

#endif /* TERN_TEST_LOCAL_HOSTILE_FIXTURE_H */
