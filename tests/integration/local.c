/* SPDX-License-Identifier: MIT */
/*
 * The same-host path (docs/local.md), over a real provider:
 *   shared  ctxs of one process: a TERN_MEM_SHARED region written, read
 *           and updated (atomics) byte-exact at odd sizes and offsets;
 *           immediates counted per peer (a third ctx's writes of the same
 *           imm do not count); batches; a write past the end refused
 *           before any copy; a closed region no longer written;
 *   cma     a forked initiator writes and reads the parent's malloc()
 *           memory (cross-memory attach), byte-exact;
 *   uid     a forked process under another uid is never given the path;
 *   kill    a forked writer killed mid-copy: the survivor closes its
 *           region at once and serves another peer;
 *   mixed   one ctx, a local peer and a peer over the provider (a child
 *           with TERN_LOCAL=0), both written and verified.
 * usage: local --provider P [--node ADDR] CASE. Exit 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "check.h"

#define FAIL(...) CHECK(0, __VA_ARGS__)

#define REGION (3u << 20)
#define RW                                             \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | \
	 TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_ATOMIC)

static const char *g_prov = "shm";
static const char *g_node;

static struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr a = { .provider = g_prov,
				   .node = g_node,
				   .rails = 1 };
	struct tern_ctx *ctx;
	int ret = tern_ctx_open(&a, &ctx);

	CHECK(ret == 0, "ctx open over %s: %s", g_prov, tern_strerror(ret));
	return ctx;
}

static struct tern_peer *add(struct tern_ctx *ctx, struct tern_ctx *to)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p;
	ssize_t n = tern_ctx_card(to, card, sizeof(card));
	int ret;

	CHECK(n > 0, "card");
	ret = tern_peer_add(ctx, card, (size_t)n, &p);
	CHECK(ret == 0, "peer add: %s", tern_strerror(ret));
	return p;
}

/* Wait for @req, progressing every ctx given. */
static int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b,
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

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static int case_shared(void)
{
	static const size_t sizes[] = {
		1, 7, 64, 4095, 4097, 65536 + 3, (1u << 20) + 5
	};
	static const size_t offs[] = { 0, 3, 4093, 1u << 20 };
	struct tern_ctx *t = open_ctx(), *i = open_ctx(), *j = open_ctx();
	struct tern_mr *tmr, *imr, *jmr;
	struct tern_peer *ti, *ij, *jt;
	struct tern_mr_desc d;
	struct tern_req r, x;
	uint8_t *tb, *ib, *jb, *want;
	unsigned int seed = 1;
	uint64_t *word;
	int ret;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, REGION, (void **)&tb) == 0,
	      "shared alloc");
	CHECK(tern_mem_alloc(TERN_MEM_HOST, 0, REGION, (void **)&ib) == 0 &&
		      (jb = malloc(4096)) != NULL && (want = malloc(REGION)),
	      "alloc");
	memset(tb, 0xee, REGION);
	memcpy(want, tb, REGION);
	CHECK(tern_mr_reg(t, tb, REGION, RW, &tmr) == 0, "reg t");
	CHECK(tern_mr_reg(i, ib, REGION, RW, &imr) == 0, "reg i");
	CHECK(tern_mr_reg(j, jb, 4096, RW, &jmr) == 0, "reg j");
	tern_mr_desc(tmr, &d);
	ij = add(i, t);
	jt = add(j, t);
	ti = add(t, i);
	add(t, j);
	CHECK(tern_peer_path(ij) == TERN_PATH_LOCAL,
	      "a ctx of this process is not given the same-host path");
	/* Writes at odd sizes and offsets, then read back. */
	for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++) {
		for (size_t b = 0; b < sizeof(offs) / sizeof(offs[0]); b++) {
			size_t n = sizes[a], off = offs[b] + a;

			if (off + n > REGION)
				continue;
			fill(ib, n, ++seed);
			memcpy(want + off, ib, n);
			tern_req_init(&r, NULL, NULL);
			ret = tern_write(ij, imr, ib, n, &d, off, &r);
			CHECK(ret == 0, "write %zu at %zu: %s", n, off,
			      tern_strerror(ret));
			CHECK(!r.done, "completed inside the post");
			CHECK(pump(&r, i, NULL, NULL) == 0, "write status");
			CHECK(memcmp(tb, want, REGION) == 0,
			      "write %zu at %zu: bytes differ (or outside)", n,
			      off);
			memset(ib + REGION / 2, 0, n);
			tern_req_init(&r, NULL, NULL);
			ret = tern_read(ij, imr, ib + REGION / 2, n, &d, off,
					&r);
			CHECK(ret == 0 && pump(&r, i, NULL, NULL) == 0,
			      "read %zu at %zu", n, off);
			CHECK(memcmp(ib + REGION / 2, want + off, n) == 0,
			      "read %zu at %zu: bytes differ", n, off);
		}
	}
	printf("shared: writes and reads of 7 sizes at 4 offsets byte-exact\n");
	/* Past the end: refused at the post, nothing copied. */
	tern_req_init(&r, NULL, NULL);
	ret = tern_write(ij, imr, ib, 4096, &d, REGION - 4095, &r);
	CHECK(ret == -TERN_EBOUNDS, "past the end: %s", tern_strerror(ret));
	CHECK(memcmp(tb, want, REGION) == 0, "past the end: bytes moved");
	/* Immediates per peer: j's writes of the same imm do not count. */
	tern_req_init(&x, NULL, NULL);
	ret = tern_imm_expect_from(t, ti, 77, 3, 20000, &x);
	CHECK(ret == 0, "expect from a local peer: %s", tern_strerror(ret));
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(jt, jmr, jb, 8, &d, 8 * (size_t)k, 77,
				     &r) == 0 &&
			      pump(&r, j, t, NULL) == 0,
		      "j's write_imm");
	}
	for (int k = 0; k < 100; k++)
		tern_progress(t);
	CHECK(!x.done, "another peer's immediates completed the expectation");
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(ij, imr, ib, 16, &d, 64, 77, &r) == 0 &&
			      pump(&r, i, NULL, NULL) == 0,
		      "i's write_imm");
	}
	CHECK(pump(&x, t, i, j) == 0 && x.len == 3, "expectation from i: %s",
	      tern_strerror(x.status));
	printf("shared: immediates counted per peer (3 from j did not "
	       "count)\n");
	/* Atomics on the shared word, beside the owner's own. */
	word = (uint64_t *)(void *)(tb + 4096);
	*word = 40;
	__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_fetch_add(ij, &d, 4096, 5, &r) == 0 &&
		      pump(&r, i, NULL, NULL) == 0 && r.value == 41 &&
		      *word == 46,
	      "fetch-add: got %llu, word %llu", (unsigned long long)r.value,
	      (unsigned long long)*word);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_cswap(ij, &d, 4096, 46, 9, &r) == 0 &&
		      pump(&r, i, NULL, NULL) == 0 && r.value == 46 &&
		      *word == 9,
	      "compare-swap");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_atomic_cswap(ij, &d, 4096, 46, 1, &r) == 0 &&
		      pump(&r, i, NULL, NULL) == 0 && r.value == 9 &&
		      *word == 9,
	      "compare-swap that must not swap");
	printf("shared: fetch-add and compare-swap on the shared word\n");
	/* A batch with immediates. */
	{
		struct tern_piece pc[3] = {
			{ .loff = 0, .roff = 100000, .len = 3000 },
			{ .loff = 5000, .roff = 200001, .len = 1 },
			{ .loff = 9000, .roff = 300007, .len = 70000 },
		};

		fill(ib, 80000, ++seed);
		tern_req_init(&x, NULL, NULL);
		CHECK(tern_imm_expect(t, 5, 3, &x) == 0, "expect");
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_pieces(ij, imr, pc, 3, &d, 1, TERN_PIECES_IMM,
					5, &r) == 0 &&
			      pump(&r, i, NULL, NULL) == 0,
		      "pieces");
		CHECK(pump(&x, t, NULL, NULL) == 0, "pieces' immediates");
		for (int k = 0; k < 3; k++)
			CHECK(memcmp(tb + pc[k].roff, ib + pc[k].loff,
				     pc[k].len) == 0,
			      "piece %d differs", k);
	}
	printf("shared: a batch of 3 pieces with immediates\n");
	/* Closed by its owner: no longer written. */
	tern_mr_close(tmr);
	memset(tb, 0x11, 4096);
	tern_req_init(&r, NULL, NULL);
	ret = tern_write(ij, imr, ib, 4096, &d, 0, &r);
	if (ret == 0)
		ret = pump(&r, i, t, NULL);
	CHECK(ret != 0, "a write into a closed region succeeded");
	for (int k = 0; k < 4096; k++)
		CHECK(tb[k] == 0x11, "a closed region was written");
	printf("shared: a closed region refuses writes (%s)\n",
	       tern_strerror(ret));
	CHECK(tern_ctx_close(i) == 0 && tern_ctx_close(j) == 0 &&
		      tern_ctx_close(t) == 0,
	      "close");
	CHECK(tern_mem_free(TERN_MEM_SHARED, tb) == 0, "free");
	tern_mem_free(TERN_MEM_HOST, ib);
	free(jb);
	free(want);
	return 0;
}

/* ---- cases with a child process ------------------------------------ */

struct pipe2 {
	int to_child[2], to_parent[2];
};

static void put(int fd, const void *p, size_t n)
{
	uint32_t len = (uint32_t)n;

	CHECK(write(fd, &len, 4) == 4 && write(fd, p, n) == (ssize_t)n,
	      "pipe write");
}

static size_t get(int fd, void *p, size_t cap)
{
	uint32_t len;

	CHECK(read(fd, &len, 4) == 4 && len <= cap, "pipe read");
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)p + got, len - got);

		CHECK(n > 0, "pipe read");
		got += (size_t)n;
	}
	return len;
}

/* Progress @ctx until @fd has something to read. */
static void wait_msg(int fd, struct tern_ctx *ctx)
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

	ctx = open_ctx();
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp->to_parent[1], card, (size_t)n);
	len = get(pp->to_child[0], card, sizeof(card));
	CHECK(tern_peer_add(ctx, card, len, &p) == 0, "child: peer add");
	get(pp->to_child[0], &d, sizeof(d));
	path = tern_peer_path(p);
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
	if (strcmp(what, "cma") == 0) {
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

static pid_t spawn(struct pipe2 *pp, const char *what, int other_uid,
		   int no_local)
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

static void wait_done(struct pipe2 *pp, struct tern_ctx *ctx)
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

static int case_child(const char *what)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *buf = malloc(REGION), *want = malloc(REGION);
	struct tern_peer *peer;
	struct tern_mr *mr;
	struct pipe2 pp;
	pid_t pid;
	int path, st;

	CHECK(buf != NULL && want != NULL, "alloc");
	memset(buf, 0xcc, REGION);
	CHECK(tern_mr_reg(ctx, buf, REGION, RW, &mr) == 0, "reg");
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
	if (strcmp(what, "cma") == 0 || strcmp(what, "fabric") == 0) {
		int fabric = strcmp(what, "fabric") == 0;

		path = parent(fabric ? "fabric" : "cma", 0, fabric, ctx, buf,
			      mr, &peer, &pid, &pp);
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
		       what, REGION - 8, fabric ? g_prov : "same-host path");
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

		path = parent("loop", 0, 0, ctx, buf, mr, &peer, &pid, &pp);
		CHECK(path == TERN_PATH_LOCAL, "child's path %d", path);
		usleep(200000); /* it is copying without end */
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
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
		printf("kill: a writer killed mid-copy; the region closed at "
		       "once and another peer served\n");
		tern_ctx_close(other);
		free(ob);
		tern_ctx_close(ctx);
		return 0;
	}
	FAIL("unknown case %s", what);
}

static int case_mixed(void)
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
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *what;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'p')
			g_prov = optarg;
		else if (c == 'n')
			g_node = optarg;
		else
			return 2;
	}
	CHECK(optind < argc, "usage: local --provider P [--node A] CASE");
	what = argv[optind];
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(what, "shared") == 0)
		ret = case_shared();
	else if (strcmp(what, "mixed") == 0)
		ret = case_mixed();
	else
		ret = case_child(what);
	if (ret == 0)
		printf("PASS local %s over %s\n", what, g_prov);
	return ret;
}
