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
 *           with TERN_LOCAL=0), both written and verified;
 *   scm     a child that the kernel refuses pidfd_getfd() and
 *           cross-memory attach (a seccomp filter, as Yama ptrace_scope
 *           1 or a container would) gets the inbox and a shared region's
 *           memfd from the parent's fd broker (SCM_RIGHTS), and writes
 *           and reads it byte-exact on the same-host path;
 *   scmuid  the broker refuses a process of another uid, a bad request
 *           and a region that is not shared memory;
 *   cuda    GPU memory across processes (CUDA IPC; the fake driver with
 *           $TERN_FAKE_CUDA_HMEM, or a GPU): a child reads and writes
 *           the parent's zero-copy GPU region from host memory and from
 *           its own GPU memory (device to device), writes GPU memory into
 *           the parent's shared host region, and a staged region's GPU
 *           buffer into the GPU region; a write with immediate counts
 *           after its bytes are in GPU memory; the region closed, the
 *           child's write fails -TERN_EACCESS.
 * usage: local --provider P [--node ADDR] CASE. Exit 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "pipe.h"

#include "check.h"

#include "../../src/wire/card.h"
#include "../../src/wire/local.h"

/* Internal: a ctx's same-host identity (its nonce names its broker). */
const struct tern__card_local *tern__local_id(const struct tern_ctx *ctx);

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
					5, &r) == 0,
		      "pieces");
		/* Shared memory mapped here: copied inside the call, the
		 * request completing from progress. */
		CHECK(!r.done, "a batch completed inside its post");
		for (int k = 0; k < 3; k++)
			CHECK(memcmp(tb + pc[k].roff, ib + pc[k].loff,
				     pc[k].len) == 0,
			      "piece %d not copied inside the call", k);
		CHECK(pump(&r, i, NULL, NULL) == 0, "pieces");
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
	pipe_put(fd, p, n);
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
static void child_cuda(struct pipe2 *pp);

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

/* The parent's ctx, as the child of a "scmuid" case sees it (fork). */
static struct tern_ctx *g_owner;

/*
 * Ask the broker of the ctx of nonce @owner, as the ctx of nonce @me, for
 * @what (@idx, showing @d's keys) and wait for its answer: the number of
 * fds it sent (in @fds, at most 2; @rdonly_p says how), or -errno: its
 * status, -ECONNREFUSED (no broker).
 */
static int ask_broker(uint64_t owner, uint64_t me, uint32_t what, uint32_t idx,
		      const struct tern_mr_desc *d, int *fds,
		      uint32_t *rdonly_p)
{
	struct tern__lb_req req = { .what = what, .idx = idx, .nonce = me };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t buf[TERN__LB_REQ_MAX], ans[TERN__LB_ANS_LEN];
	struct iovec iov = { ans, sizeof(ans) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct tern__lb_ans an;
	struct pollfd pf;
	char why[128];
	socklen_t alen;
	ssize_t len, got;
	int s, n = 0;

	if (d != NULL) {
		req.nkeys = d->nkeys;
		memcpy(req.keys, d->keys, d->nkeys * sizeof(d->keys[0]));
	}
	len = tern__lb_req_pack(&req, buf, sizeof(buf));
	CHECK(len > 0, "pack a broker request");
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(a.sun_path + 1,
					    sizeof(a.sun_path) - 1,
					    "tern-local-%016llx",
					    (unsigned long long)owner));
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket");
	if (connect(s, (struct sockaddr *)&a, alen) != 0) {
		close(s);
		return -errno;
	}
	(void)send(s, buf, (size_t)len, MSG_NOSIGNAL);
	pf = (struct pollfd){ .fd = s, .events = POLLIN };
	CHECK(poll(&pf, 1, 3000) == 1, "the broker did not answer in 3 s");
	got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	/* A broker that refuses before it reads closes at once: our
	 * request, unread, may reset the connection before its answer is
	 * read. That is a refusal too. */
	if (got < 0 && errno == ECONNRESET)
		return -EPERM;
	CHECK(got >= 0, "recvmsg: %s", strerror(errno));
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		for (size_t k = 0;
		     k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int) && n < 2;
		     k++)
			memcpy(&fds[n++], CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(int));
	}
	CHECK(tern__lb_ans_parse(ans, (size_t)got, &an, why, sizeof(why)) == 0,
	      "%s", why);
	CHECK((int)an.nfds == n, "answer says %u fds, %d came", an.nfds, n);
	if (rdonly_p != NULL)
		*rdonly_p = an.rdonly;
	return an.status != 0 ? an.status : n;
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

static int case_scmuid(void);

static int child_case(const char *what, struct tern_ctx *ctx, uint8_t *buf,
		      uint8_t *want);

/* A case with a child: the parent's ctx and region, freed after. */
static int case_child(const char *what)
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

/* The parent's broker answers only the peers it added, with only what
 * its own table holds: a process of another uid is refused before it is
 * heard, and so are an asker it did not add, a bad entry, a request it
 * does not know, wrong keys, a region that is not shared memory, and a
 * region that is part of its memfd; a read-only region's memfd cannot be
 * mapped writable. */
static int case_scmuid(void)
{
	struct tern_ctx *ctx = g_owner, *peer_ctx = open_ctx();
	uint64_t owner = tern__local_id(ctx)->nonce;
	uint64_t me = tern__local_id(peer_ctx)->nonce;
	uint8_t *host = malloc(4096), *shm, *part;
	struct tern_mr *hmr, *rmr, *pmr;
	struct tern_mr_desc d, bad;
	struct tern_peer *p;
	uint8_t buf[512], card[TERN_CARD_MAX];
	uint32_t rdonly = 9;
	struct pipe2 pp;
	char done[8];
	int fds[2], st, ret;
	ssize_t n;
	pid_t pid;
	void *m;

	if (geteuid() != 0) {
		printf("SKIP: scmuid needs root (a child under another uid)\n");
		return 77;
	}
	(void)buf;
	/* Entry 0 is the parent's region (malloc: not shared memory), 1 a
	 * plain host region too, 2 a whole shared allocation read-only, 3
	 * a part of one. */
	CHECK(host != NULL && tern_mr_reg(ctx, host, 4096, RW, &hmr) == 0,
	      "reg");
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, 8192, (void **)&shm) == 0 &&
		      tern_mem_alloc(TERN_MEM_SHARED, 0, 8192,
				     (void **)&part) == 0,
	      "shared alloc");
	CHECK(tern_mr_reg(ctx, shm, 8192,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ,
			  &rmr) == 0 &&
		      tern_mr_reg(ctx, part + 4096, 4096, RW, &pmr) == 0,
	      "reg shared");
	/* Not added yet: refused before a byte is read. */
	ret = ask_broker(owner, me, TERN__LB_INBOX, 0, NULL, fds, NULL);
	CHECK(ret == -EPERM, "an asker not added: %s (want refused)",
	      strerror(-ret));
	n = tern_ctx_card(peer_ctx, card, sizeof(card));
	CHECK(n > 0 && tern_peer_add(ctx, card, (size_t)n, &p) == 0,
	      "add the asker");
	ret = ask_broker(owner, me, TERN__LB_INBOX, 0, NULL, fds, NULL);
	CHECK(ret == 2, "our own peer's request for the inbox: %s",
	      strerror(-ret));
	/* The inbox comes read-only, and sealed: no writable mapping. */
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	CHECK(m == MAP_FAILED, "the broker's inbox maps writable");
	close(fds[0]);
	close(fds[1]);
	ret = ask_broker(owner, me ^ 1, TERN__LB_INBOX, 0, NULL, fds, NULL);
	CHECK(ret == -EPERM, "another ctx's nonce: %s", strerror(-ret));
	tern_mr_desc(hmr, &d);
	ret = ask_broker(owner, me, TERN__LB_REGION, 1, &d, fds, NULL);
	CHECK(ret == -ENOENT, "a region that is not shared memory: %s",
	      strerror(-ret));
	ret = ask_broker(owner, me, TERN__LB_REGION, 100000, &d, fds, NULL);
	CHECK(ret == -EPROTO, "entry 100000: %s", strerror(-ret));
	ret = ask_broker(owner, me, 7, 0, &d, fds, NULL);
	CHECK(ret == -EPROTO, "request 7: %s", strerror(-ret));
	tern_mr_desc(rmr, &d);
	bad = d;
	bad.keys[0] ^= 0x5a5a;
	ret = ask_broker(owner, me, TERN__LB_REGION, 2, &bad, fds, NULL);
	CHECK(ret == -EACCES, "wrong keys: %s", strerror(-ret));
	ret = ask_broker(owner, me, TERN__LB_REGION, 2, &d, fds, &rdonly);
	CHECK(ret == 1 && rdonly == 1, "a read-only region: %s (rdonly %u)",
	      strerror(-ret), rdonly);
	m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	CHECK(m == MAP_FAILED, "a read-only region's memfd maps writable");
	m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fds[0], 0);
	CHECK(m != MAP_FAILED, "a read-only region's memfd maps read-only");
	munmap(m, 8192);
	close(fds[0]);
	tern_mr_desc(pmr, &d);
	ret = ask_broker(owner, me, TERN__LB_REGION, 3, &d, fds, NULL);
	CHECK(ret == -ERANGE, "a region that is part of its memfd: %s",
	      strerror(-ret));
	pid = spawn(&pp, "scmuid", 1, 0);
	get(pp.to_parent[0], done, sizeof(done));
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	printf("scmuid: the broker refused uid 65534, an asker it had not "
	       "added, another ctx's nonce, a bad entry, a bad request, wrong "
	       "keys, a region not in shared memory and a part of one; a "
	       "read-only region came read-only\n");
	tern_peer_remove(p);
	tern_mr_close(hmr);
	tern_mr_close(rmr);
	tern_mr_close(pmr);
	tern_ctx_close(peer_ctx);
	tern_mem_free(TERN_MEM_SHARED, shm);
	tern_mem_free(TERN_MEM_SHARED, part);
	free(host);
	return 0;
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

/* ---- GPU memory across processes (CUDA IPC) ---------------------- */

/* The fake driver's counters (src/hmem/cuda.h; tern_internal only). */
struct tern__cu_fake_stats {
	uint64_t copies, bytes, max_pending, ipc_opens, ipc_copies;
	uint64_t dmabufs, dmabufs_refused;
};
void tern__cu_fake_stats(struct tern__cu_fake_stats *s);

#define CU_OFF	5   /* where the child writes its pattern */
#define CU_STG	100 /* where its staged region's bytes go */
#define CU_STGN 65537
#define CU_IMM	0x77
#define CU_NIMM 3
#define CU_RW \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE)

/* What the parent's GPU region holds once the child has written: pattern
 * 1, the child's pattern 2 at CU_OFF, its staged pattern 3 at CU_STG. */
static void cuda_want(uint8_t *w)
{
	fill(w, REGION, 1);
	fill(w + CU_OFF, REGION - 2 * CU_OFF, 2);
	fill(w + CU_STG, CU_STGN, 3);
}

static struct tern_mr *cuda_reg(struct tern_ctx *ctx, void *p, uint64_t flags)
{
	struct tern_mr_attr a = { .buf = p,
				  .len = REGION,
				  .access = CU_RW,
				  .kind = TERN_MEM_CUDA,
				  .device = 0,
				  .flags = flags };
	struct tern_mr *mr;
	int ret = tern_mr_regattr(ctx, &a, &mr);

	CHECK(ret == 0, "register GPU memory: %s", tern_strerror(ret));
	return mr;
}

static void rma(struct tern_peer *p, struct tern_ctx *ctx, int write,
		struct tern_mr *mr, void *buf, size_t len,
		const struct tern_mr_desc *d, uint64_t roff, const char *what)
{
	struct tern_req r;
	int ret;

	tern_req_init(&r, NULL, NULL);
	ret = write ? tern_write(p, mr, buf, len, d, roff, &r)
		    : tern_read(p, mr, buf, len, d, roff, &r);
	CHECK(ret == 0 && pump(&r, ctx, NULL, NULL) == 0, "child: %s: %s", what,
	      tern_strerror(ret != 0 ? ret : r.status));
}

static void child_cuda(struct pipe2 *pp)
{
	uint8_t card[TERN_CARD_MAX], *h = malloc(REGION), *w = malloc(REGION);
	struct tern__cu_fake_stats st = { 0 };
	struct tern_mr *hmr, *gmr, *smr;
	struct tern_mr_desc dg, ds;
	struct tern_mem_info info;
	struct tern_peer *p;
	struct tern_ctx *ctx;
	void *g = NULL, *s = NULL;
	struct tern_req r;
	size_t len;
	ssize_t n;
	int path;

	CHECK(h != NULL && w != NULL, "alloc");
	tern_mem_probe(TERN_MEM_CUDA, &info);
	ctx = open_ctx();
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp->to_parent[1], card, (size_t)n);
	len = get(pp->to_child[0], card, sizeof(card));
	if (len == 4 && memcmp(card, "skip", 4) == 0)
		exit(0); /* the parent has no GPU either */
	CHECK(info.available, "child: no CUDA where the parent has it: %s",
	      info.why);
	CHECK(tern_peer_add(ctx, card, len, &p) == 0, "child: peer add");
	get(pp->to_child[0], &dg, sizeof(dg));
	get(pp->to_child[0], &ds, sizeof(ds));
	path = tern_peer_path(p);
	put(pp->to_parent[1], &path, sizeof(path));
	CHECK(tern_mr_reg(ctx, h, REGION, CU_RW, &hmr) == 0, "child: reg");
	/* 1. Host memory out of the parent's GPU memory. */
	memset(h, 0, REGION);
	rma(p, ctx, 0, hmr, h + 3, REGION - 9, &dg, 7, "read GPU -> host");
	fill(w, REGION, 1);
	CHECK(memcmp(h + 3, w + 7, REGION - 9) == 0,
	      "child: what it read from the parent's GPU memory differs");
	/* 2. Host memory into it, read back. */
	fill(h, REGION, 2);
	rma(p, ctx, 1, hmr, h, REGION - 2 * CU_OFF, &dg, CU_OFF,
	    "write host -> GPU");
	memset(h, 0, REGION);
	rma(p, ctx, 0, hmr, h, REGION, &dg, 0, "read back");
	cuda_want(w);
	CHECK(memcmp(h, w, CU_STG) == 0 &&
		      memcmp(h + CU_STG + CU_STGN, w + CU_STG + CU_STGN,
			     REGION - CU_STG - CU_STGN) == 0,
	      "child: the parent's GPU memory differs after its write");
	/* 3. Its GPU memory into ours (device to device), and ours into
	 * the parent's shared host region. */
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &g) == 0, "cuda alloc");
	gmr = cuda_reg(ctx, g, 0);
	rma(p, ctx, 0, gmr, g, REGION, &dg, 0, "read GPU -> GPU");
	rma(p, ctx, 1, gmr, g, REGION, &ds, 0, "write GPU -> shared host");
	/* 4. A staged region's GPU buffer into the parent's GPU memory. */
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &s) == 0, "cuda alloc");
	fill(w, REGION, 3);
	CHECK(tern_mem_copy(s, w, REGION) == 0, "fill staged");
	smr = cuda_reg(ctx, s, TERN_MR_F_STAGED);
	CHECK(tern_mr_path(smr) == TERN_MR_PATH_STAGED, "not staged");
	rma(p, ctx, 1, smr, s, CU_STGN, &dg, CU_STG, "write staged -> GPU");
	/* 5. Writes with immediate: each counted after its bytes. */
	for (int k = 0; k < CU_NIMM; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(p, smr, s, CU_STGN, &dg, CU_STG, CU_IMM,
				     &r) == 0 &&
			      pump(&r, ctx, NULL, NULL) == 0,
		      "child: write_imm: %s", tern_strerror(r.status));
	}
	if (info.fake) {
		tern__cu_fake_stats(&st);
		CHECK(st.ipc_opens >= 1 && st.ipc_copies >= 4,
		      "child: the fake driver saw %llu IPC opens and %llu "
		      "copies through them (the path was not CUDA IPC)",
		      (unsigned long long)st.ipc_opens,
		      (unsigned long long)st.ipc_copies);
	}
	put(pp->to_parent[1], "done", 4);
	/* 6. The parent closes its GPU region: no more writes into it. */
	wait_msg(pp->to_child[0], ctx);
	get(pp->to_child[0], card, sizeof(card));
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, hmr, h, 4096, &dg, 0, &r) == 0, "post");
	CHECK(pump(&r, ctx, NULL, NULL) == -TERN_EACCESS,
	      "child: a write into a closed GPU region: %s (want %s)",
	      tern_strerror(r.status), tern_strerror(-TERN_EACCESS));
	printf("child: %llu IPC open(s), %llu GPU copies through them; the "
	       "closed region refused\n",
	       (unsigned long long)st.ipc_opens,
	       (unsigned long long)st.ipc_copies);
	put(pp->to_parent[1], "done", 4);
	wait_msg(pp->to_child[0], ctx);
	tern_mr_close(hmr);
	tern_mr_close(gmr);
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	tern_mem_free(TERN_MEM_CUDA, g);
	tern_mem_free(TERN_MEM_CUDA, s);
	exit(0);
}

static int case_cuda(void)
{
	uint8_t card[TERN_CARD_MAX], *w = malloc(REGION), *h = malloc(REGION);
	struct tern_mem_info info;
	struct tern_mr_desc d;
	struct tern_mr *gmr, *smr;
	struct tern_peer *peer;
	struct tern_ctx *ctx;
	struct tern_req x;
	void *g = NULL, *s = NULL;
	struct pipe2 pp;
	size_t len;
	ssize_t n;
	pid_t pid;
	int path, st, ret;

	CHECK(w != NULL && h != NULL, "alloc");
	/* The child first: CUDA does not survive a fork. */
	pid = spawn(&pp, "cuda", 0, 0);
	tern_mem_probe(TERN_MEM_CUDA, &info);
	ctx = open_ctx();
	len = get(pp.to_parent[0], card, sizeof(card));
	if (!info.available) {
		put(pp.to_child[1], "skip", 4);
		waitpid(pid, &st, 0);
		printf("SKIP: no CUDA (%s); $TERN_FAKE_CUDA=1 "
		       "$TERN_FAKE_CUDA_HMEM=1 runs this on the fake driver\n",
		       info.why);
		tern_ctx_close(ctx);
		free(w);
		free(h);
		return 77;
	}
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &g) == 0, "cuda alloc");
	fill(w, REGION, 1);
	CHECK(tern_mem_copy(g, w, REGION) == 0, "fill GPU memory");
	gmr = cuda_reg(ctx, g, 0);
	if (tern_mr_path(gmr) != TERN_MR_PATH_ZCOPY) {
		put(pp.to_child[1], "skip", 4);
		waitpid(pid, &st, 0);
		printf("SKIP: %s reaches no GPU memory here (the region is "
		       "%s): CUDA IPC is for zero-copy regions\n",
		       g_prov, tern_mr_path_str(tern_mr_path(gmr)));
		tern_ctx_close(ctx);
		tern_mem_free(TERN_MEM_CUDA, g);
		free(w);
		free(h);
		return 77;
	}
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, REGION, &s) == 0, "shared");
	memset(s, 0, REGION);
	CHECK(tern_mr_reg(ctx, s, REGION, CU_RW, &smr) == 0, "reg shared");
	CHECK(tern_peer_add(ctx, card, len, &peer) == 0, "peer add");
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp.to_child[1], card, (size_t)n);
	tern_mr_desc(gmr, &d);
	put(pp.to_child[1], &d, sizeof(d));
	tern_mr_desc(smr, &d);
	put(pp.to_child[1], &d, sizeof(d));
	get(pp.to_parent[0], &path, sizeof(path));
	CHECK(path == TERN_PATH_LOCAL, "child's path %d", path);
	tern_req_init(&x, NULL, NULL);
	ret = tern_imm_expect_from(ctx, peer, CU_IMM, CU_NIMM, 20000, &x);
	CHECK(ret == 0, "expect: %s", tern_strerror(ret));
	wait_done(&pp, ctx);
	for (int i = 0; i < 1000 && !x.done; i++) {
		tern_progress(ctx);
		usleep(1000);
	}
	CHECK(x.done && x.status == 0, "the child's %d immediates: %s", CU_NIMM,
	      x.done ? tern_strerror(x.status) : "not counted");
	/* Its reads of our GPU memory, device to device, then written into
	 * our shared region: before its staged write. */
	cuda_want(w);
	{
		uint8_t *before = malloc(REGION);

		CHECK(before != NULL, "alloc");
		fill(before, REGION, 1);
		fill(before + CU_OFF, REGION - 2 * CU_OFF, 2);
		CHECK(memcmp(s, before, REGION) == 0,
		      "the child's GPU -> GPU -> shared host bytes differ");
		free(before);
	}
	CHECK(tern_mem_copy(h, g, REGION) == 0, "copy back");
	CHECK(memcmp(h, w, REGION) == 0,
	      "our GPU memory differs from what the child wrote");
	CHECK(tern_mr_close(gmr) == 0, "close the GPU region");
	put(pp.to_child[1], "closed", 6);
	wait_done(&pp, ctx);
	put(pp.to_child[1], "bye", 3);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	printf("cuda: GPU memory across processes on the same-host path "
	       "(%s driver), byte-exact\n",
	       info.fake ? "fake" : "CUDA");
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	tern_mem_free(TERN_MEM_CUDA, g);
	tern_mem_free(TERN_MEM_SHARED, s);
	free(w);
	free(h);
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
	else if (strcmp(what, "cuda") == 0)
		ret = case_cuda();
	else
		ret = case_child(what);
	if (ret == 0)
		printf("PASS local %s over %s\n", what, g_prov);
	return ret;
}
