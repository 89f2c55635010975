/* SPDX-License-Identifier: MIT */
/*
 * local's cases with a child process: cma (a forked initiator writes and
 * reads the parent's malloc() memory), uid (a child under another uid is
 * never given the path), kill (a writer killed mid-copy), scm (the fd
 * broker where the kernel refuses pidfd_getfd()) and mixed (a local peer
 * and one over the provider); the child's side of each, and the pipes
 * and waits they share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_cases.h"

#include "../../src/wire/local.h"

/* ---- waiting, and the child's plumbing ---------------------------- */

int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b,
	 struct tern_ctx *c)
{
	for (int i = 0; i < 2000000 && !req->done; i++) {
		tern_progress(a);
		if (b != NULL)
			tern_progress(b);
		if (c != NULL)
			tern_progress(c);
	}
	CHECK(req->done, "request never completed");
	return req->status;
}

/* Progress @ctx until @fd has something to read. */
void wait_msg(int fd, struct tern_ctx *ctx)
{
	for (;;) {
		struct timespec ts = { 0, 100000 };
		fd_set fds;

		FD_ZERO(&fds);
		FD_SET(fd, &fds);
		tern_progress(ctx);
		if (pselect(fd + 1, &fds, NULL, NULL, &ts, NULL) > 0)
			return;
	}
}

/* The kernel refuses us pidfd_getfd() and cross-memory attach, as Yama
 * ptrace_scope 1 does between siblings (EPERM). */
static void deny_ptrace_rule(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_getfd, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1,
			 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
		      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0,
	      "seccomp: %s", strerror(errno));
	CHECK(syscall(SYS_pidfd_getfd, 0, 0, 0) < 0 && errno == EPERM,
	      "the seccomp filter does not refuse pidfd_getfd");
}

/* Progress @ctx until @p has the same-host path (at most 3 s: a broker
 * answers in a later pass). */
static int wait_path(struct tern_ctx *ctx, struct tern_peer *p)
{
	for (int i = 0; i < 3000 && tern_peer_path(p) != TERN_PATH_LOCAL; i++) {
		tern_progress(ctx);
		usleep(1000);
	}
	return tern_peer_path(p);
}

/* Child: open a ctx, trade cards and a descriptor with the parent, then
 * @what: "cma" write+read back, "uid" only look at the path, "loop"
 * write without end, "fabric" write once. */
static void child(struct pipe2 *pp, const char *what)
{
	uint8_t card[TERN_CARD_MAX], *buf;
	struct tern_mr_desc d;
	struct tern_ctx *ctx;
	struct tern_peer *p;
	struct tern_mr *mr;
	struct tern_req r;
	ssize_t n;
	size_t len;
	int path;

	if (strcmp(what, "cuda") == 0)
		child_cuda(pp);
	if (strcmp(what, "scmuid") == 0) {
		uint64_t owner = tern__local_id(g_owner)->nonce;
		int fds[2], ret;

		ret = ask_broker(owner, 1, TERN__LB_INBOX, 0, NULL, fds, NULL);
		CHECK(ret == -EPERM,
		      "uid %u asked the parent's broker for its inbox: %s "
		      "(want refused)",
		      (unsigned int)getuid(), strerror(-ret));
		ret = ask_broker(owner, 1, TERN__LB_REGION, 0, NULL, fds, NULL);
		CHECK(ret == -EPERM, "uid %u asked for a region: %s",
		      (unsigned int)getuid(), strerror(-ret));
		put(pp->to_parent[1], "done", 4);
		exit(0);
	}
	if (strcmp(what, "scm") == 0)
		deny_ptrace_rule();
	ctx = open_ctx();
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp->to_parent[1], card, (size_t)n);
	len = get(pp->to_child[0], card, sizeof(card));
	CHECK(tern_peer_add(ctx, card, len, &p) == 0, "child: peer add");
	get(pp->to_child[0], &d, sizeof(d));
	path = strcmp(what, "uid") == 0 ? tern_peer_path(p) : wait_path(ctx, p);
	put(pp->to_parent[1], &path, sizeof(path));
	if (strcmp(what, "uid") == 0)
		exit(0);
	buf = malloc(REGION);
	CHECK(buf != NULL && tern_mr_reg(ctx, buf, REGION, RW, &mr) == 0,
	      "child: reg");
	fill(buf, REGION, 9);
	do {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, mr, buf + 1, REGION - 8, &d, 5, &r) == 0 &&
			      pump(&r, ctx, NULL, NULL) == 0,
		      "child: write: %s", tern_strerror(r.status));
	} while (strcmp(what, "loop") == 0);
	if (strcmp(what, "cma") == 0 || strcmp(what, "scm") == 0) {
		uint8_t *orig = malloc(REGION);

		CHECK(orig != NULL, "alloc");
		memcpy(orig, buf, REGION);
		memset(buf, 0, REGION);
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_read(p, mr, buf, REGION - 8, &d, 5, &r) == 0 &&
			      pump(&r, ctx, NULL, NULL) == 0,
		      "child: read");
		CHECK(memcmp(buf, orig + 1, REGION - 8) == 0,
		      "child: what it read back differs");
		free(orig);
	}
	put(pp->to_parent[1], "done", 4);
	/* Wait for the parent, progressing: over tcp the provider may still
	 * be sending what it called complete. */
	wait_msg(pp->to_child[0], ctx);
	get(pp->to_child[0], card, sizeof(card));
	tern_ctx_close(ctx);
	exit(0);
}

pid_t spawn(struct pipe2 *pp, const char *what, int other_uid, int no_local)
{
	pid_t pid;

	CHECK(pipe(pp->to_child) == 0 && pipe(pp->to_parent) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* Only our ends: a parent that dies ends our reads. */
		close(pp->to_child[1]);
		close(pp->to_parent[0]);
		if (other_uid && (setgid(65534) != 0 || setuid(65534) != 0))
			FAIL("setuid(65534): %s", strerror(errno));
		if (no_local)
			setenv("TERN_LOCAL", "0", 1);
		child(pp, what);
	}
	close(pp->to_child[0]);
	close(pp->to_parent[1]);
	return pid;
}

/* Parent side of a child case: its ctx, a region, the cards traded. */
static int parent(const char *what, int other_uid, int no_local,
		  struct tern_ctx *ctx, uint8_t *buf, struct tern_mr *mr,
		  struct tern_peer **peer_p, pid_t *pid_p, struct pipe2 *pp)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_mr_desc d;
	int path;
	size_t len;
	ssize_t n;

	(void)buf;
	*pid_p = spawn(pp, what, other_uid, no_local);
	len = get(pp->to_parent[0], card, sizeof(card));
	CHECK(tern_peer_add(ctx, card, len, peer_p) == 0, "peer add");
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp->to_child[1], card, (size_t)n);
	tern_mr_desc(mr, &d);
	put(pp->to_child[1], &d, sizeof(d));
	get(pp->to_parent[0], &path, sizeof(path));
	return path;
}

void wait_done(struct pipe2 *pp, struct tern_ctx *ctx)
{
	char done[8];

	/* The parent progresses while the child works (the provider's
	 * path needs the target's progress). */
	for (;;) {
		struct timespec ts = { 0, 0 };
		fd_set fds;

		FD_ZERO(&fds);
		FD_SET(pp->to_parent[0], &fds);
		tern_progress(ctx);
		if (pselect(pp->to_parent[0] + 1, &fds, NULL, NULL, &ts, NULL) >
		    0)
			break;
	}
	get(pp->to_parent[0], done, sizeof(done));
}

/* The fabric's write completes at the writer before its bytes land here
 * (tcp: transmit complete): progress until @buf holds @want, up to 10 s. */
static int landed(struct tern_ctx *ctx, const uint8_t *buf, const uint8_t *want,
		  size_t off, size_t len)
{
	for (int i = 0; i < 100000; i++) {
		if (memcmp(buf + off, want + off, len) == 0)
			return 1;
		tern_progress(ctx);
		usleep(100);
	}
	return 0;
}

static int child_case(const char *what, struct tern_ctx *ctx, uint8_t *buf,
		      uint8_t *want);

/* A case with a child: the parent's ctx and region, freed after. */
int case_child(const char *what)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *buf = NULL, *want = malloc(REGION);
	int ret;

	/* The broker hands out shared memory only. */
	if (strcmp(what, "scm") == 0)
		CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, REGION,
				     (void **)&buf) == 0,
		      "shared alloc");
	else
		buf = malloc(REGION);
	CHECK(buf != NULL && want != NULL, "alloc");
	ret = child_case(what, ctx, buf, want);
	tern_ctx_close(ctx); /* and its regions */
	if (strcmp(what, "scm") == 0)
		tern_mem_free(TERN_MEM_SHARED, buf);
	else
		free(buf);
	free(want);
	return ret;
}

static int child_case(const char *what, struct tern_ctx *ctx, uint8_t *buf,
		      uint8_t *want)
{
	struct tern_peer *peer;
	struct tern_mr *mr;
	struct pipe2 pp;
	pid_t pid;
	int path, st;

	memset(buf, 0xcc, REGION);
	CHECK(tern_mr_reg(ctx, buf, REGION, RW, &mr) == 0, "reg");
	if (strcmp(what, "scmuid") == 0) {
		g_owner = ctx;
		return case_scmuid();
	}
	if (strcmp(what, "uid") == 0) {
		if (geteuid() != 0) {
			printf("SKIP: uid needs root (to run a child under "
			       "another uid)\n");
			return 77;
		}
		path = parent("uid", 1, 0, ctx, buf, mr, &peer, &pid, &pp);
		CHECK(path == TERN_PATH_FABRIC,
		      "a process of another uid was given the same-host path");
		CHECK(tern_peer_path(peer) == TERN_PATH_FABRIC,
		      "we gave a peer of another uid the same-host path");
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
		printf("uid: a peer of uid 65534 goes over %s both ways\n",
		       g_prov);
		return 0;
	}
	if (strcmp(what, "cma") == 0 || strcmp(what, "fabric") == 0 ||
	    strcmp(what, "scm") == 0) {
		int fabric = strcmp(what, "fabric") == 0;

		path = parent(what, 0, fabric, ctx, buf, mr, &peer, &pid, &pp);
		CHECK(path == (fabric ? TERN_PATH_FABRIC : TERN_PATH_LOCAL),
		      "child's path %d", path);
		wait_done(&pp, ctx);
		fill(want + 4, REGION - 4, 9); /* its buf + 1 lands at 5 */
		memset(want, 0xcc, 5);
		memset(want + REGION - 3, 0xcc, 3);
		CHECK(landed(ctx, buf, want, 0, REGION),
		      "%s: bytes differ (or outside)", what);
		put(pp.to_child[1], "bye", 3);
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
		printf("%s: a child's write of %u bytes at offset 5 "
		       "byte-exact (%s)\n",
		       what, REGION - 8,
		       fabric ? g_prov
		       : strcmp(what, "scm") == 0
			       ? "same-host path, fds from the broker"
			       : "same-host path");
		return 0;
	}
	if (strcmp(what, "kill") == 0) {
		struct tern_ctx *other = open_ctx();
		struct tern_peer *op;
		struct tern_mr *omr, *mr2;
		struct tern_mr_desc d;
		struct tern_req r;
		uint64_t t0;
		uint8_t *ob = calloc(1, 4096);

		struct tern_req x;
		int ret;

		path = parent("loop", 0, 0, ctx, buf, mr, &peer, &pid, &pp);
		CHECK(path == TERN_PATH_LOCAL, "child's path %d", path);
		/* An expectation that counts on the child alone. */
		tern_req_init(&x, NULL, NULL);
		ret = tern_imm_expect_from(ctx, peer, 99, 1, 60000, &x);
		CHECK(ret == 0, "expect from the child: %s",
		      tern_strerror(ret));
		usleep(200000); /* it is copying without end */
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		/* Its pidfd says it ended: the peer is gone (the expectation
		 * fails at once, not at its deadline) and its attachment let
		 * go (the fabric's from here on). */
		for (int i = 0; i < 3000 && !x.done; i++) {
			tern_progress(ctx);
			usleep(1000);
		}
		CHECK(x.done && x.status == -TERN_EPEERGONE,
		      "the killed child's expectation: %s (want %s)",
		      x.done ? tern_strerror(x.status) : "still waiting",
		      tern_strerror(-TERN_EPEERGONE));
		CHECK(tern_peer_path(peer) == TERN_PATH_FABRIC,
		      "the killed child's peer still has the same-host path");
		t0 = (uint64_t)time(NULL);
		CHECK(tern_mr_close(mr) == 0, "close after the kill");
		CHECK((uint64_t)time(NULL) - t0 <= 2,
		      "closing the region waited on the dead writer");
		/* And another peer is served. */
		CHECK(tern_mr_reg(ctx, buf, REGION, RW, &mr2) == 0, "reg 2");
		CHECK(ob != NULL && tern_mr_reg(other, ob, 4096, RW, &omr) == 0,
		      "reg other");
		op = add(other, ctx);
		tern_mr_desc(mr2, &d);
		fill(ob, 4096, 3);
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(op, omr, ob, 4096, &d, 0, &r) == 0 &&
			      pump(&r, other, ctx, NULL) == 0,
		      "another peer's write");
		CHECK(memcmp(buf, ob, 4096) == 0, "another peer's bytes");
		printf("kill: a writer killed mid-copy: gone within 3 s (its "
		       "pidfd), the region closed at once, another peer "
		       "served\n");
		tern_ctx_close(other);
		free(ob);
		return 0;
	}
	FAIL("unknown case %s", what);
	return 1;
}

int case_mixed(void)
{
	struct tern_ctx *ctx = open_ctx(), *me = open_ctx();
	struct tern_peer *fab, *loc;
	struct tern_mr *mr, *mmr;
	struct tern_mr_desc d;
	struct pipe2 pp;
	struct tern_req r;
	uint8_t *buf = malloc(REGION), *want = malloc(REGION);
	uint8_t src[4096];
	pid_t pid;
	int path, st;

	CHECK(buf != NULL && want != NULL, "alloc");
	memset(buf, 0xcc, REGION);
	CHECK(tern_mr_reg(ctx, buf, REGION, RW, &mr) == 0, "reg");
	CHECK(tern_mr_reg(me, src, sizeof(src), RW, &mmr) == 0, "reg me");
	path = parent("fabric", 0, 1, ctx, buf, mr, &fab, &pid, &pp);
	CHECK(path == TERN_PATH_FABRIC &&
		      tern_peer_path(fab) == TERN_PATH_FABRIC,
	      "a child with TERN_LOCAL=0 is on the same-host path");
	loc = add(me, ctx);
	/* The owner lets a same-host peer write only once it added it. */
	CHECK(tern_peer_path(loc) == TERN_PATH_FABRIC,
	      "a peer the owner did not add was given the same-host path");
	add(ctx, me);
	CHECK(tern_peer_path(loc) == TERN_PATH_LOCAL, "in-process peer");
	wait_done(&pp, ctx);
	/* The local peer writes the 5 bytes before what the fabric peer
	 * wrote (at 5, REGION - 8 bytes). */
	fill(src, sizeof(src), 4);
	tern_mr_desc(mr, &d);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(loc, mmr, src, 5, &d, 0, &r) == 0 &&
		      pump(&r, me, ctx, NULL) == 0,
	      "local write");
	fill(want + 4, REGION - 4, 9);
	memcpy(want, src, 5);
	memset(want + REGION - 3, 0xcc, 3);
	CHECK(landed(ctx, buf, want, 0, REGION),
	      "the bytes of both peers (or outside)");
	put(pp.to_child[1], "bye", 3);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	printf("mixed: one ctx written by a peer over %s and a local one\n",
	       g_prov);
	tern_ctx_close(me);
	tern_ctx_close(ctx);
	free(buf);
	free(want);
	return 0;
}
