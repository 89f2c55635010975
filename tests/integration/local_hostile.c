/* SPDX-License-Identifier: MIT */
/*
 * The same-host path under attack (docs/local.md, "Trust"), over a real
 * provider. Each case plays one hostile party and checks that tern
 * refuses it, says why in its log, leaves the victim's memory and fd
 * table as they were, and serves a good peer at once afterwards:
 *   spoof     a broker socket bound by another uid, or by another process
 *             of ours, for a process that never used tern: never asked,
 *             the path stays the fabric's;
 *   forged    a card carrying another process's same-host part: nothing
 *             lands on the same-host path until that process adds us;
 *             then wrong keys fail -TERN_EACCESS and right keys land;
 *   noregion  writes and reads to an address in no region of the peer
 *             (and an unmapped one) fail -TERN_EACCESS, nothing copied;
 *   unsealed  an inbox memfd that is not sealed is refused, and shrinking
 *             it afterwards cannot crash us;
 *   hol       a peer that never reads its ring holds up no other peer;
 *   scribble  a peer that scribbles its own ring is read no more (said
 *             once), counts nothing, and another peer is still served;
 *   silent    20 silent connections to a broker hold up no good peer's
 *             ask; another uid's are refused;
 *   resize    an owner that rewrites a region's length or base under the
 *             generation we mapped it at: copies past the mapping fail
 *             -TERN_EACCESS;
 *   serve     `tern fill --listen HOST:PORT --token` sent 200 CONNECTs
 *             without a ticket, each naming another local tern process's
 *             card: that process's memory and fds untouched, the server's
 *             fds and RSS flat, a good client served.
 * usage: local_hostile --provider P [--node ADDR] CASE. Exit 0 pass,
 * 1 fail, 77 skip (the case needs root).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "pipe.h"

#include "check.h"

#include "../../apps/fill/fill.h"
#include "../../apps/fill/proto.h"
#include "../../src/engine/local_int.h"
#include "../../src/wire/card.h"
#include "../../src/wire/local.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define FAIL(...) CHECK(0, __VA_ARGS__)

#define MEM 65536
#define RW                                             \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | \
	 TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_ATOMIC)

static const char *g_prov = "shm";
static const char *g_node;

/* A victim's memory: at the same address in every forked process. */
static uint8_t g_mem[MEM] __attribute__((aligned(4096)));

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

static size_t card_of(struct tern_ctx *ctx, uint8_t *card)
{
	ssize_t n = tern_ctx_card(ctx, card, TERN_CARD_MAX);

	CHECK(n > 0, "card");
	return (size_t)n;
}

static struct tern_peer *add(struct tern_ctx *ctx, struct tern_ctx *to)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p;
	size_t n = card_of(to, card);
	int ret = tern_peer_add(ctx, card, n, &p);

	CHECK(ret == 0, "peer add: %s", tern_strerror(ret));
	return p;
}

/* @card (a real one, for its fabric address) with the same-host part
 * @loc: what a forger sends. @return its length. */
static size_t card_splice(const uint8_t *card, size_t len,
			  const struct tern__card_local *loc, uint8_t *out)
{
	struct tern__card c;
	char why[128];
	ssize_t n;

	CHECK(tern__card_parse(card, len, &c, why, sizeof(why)) == 0, "%s",
	      why);
	c.local = loc;
	n = tern__card_pack(&c, out, TERN_CARD_MAX);
	CHECK(n > 0, "card pack: %zd", n);
	return (size_t)n;
}

/* The same-host part of @card. */
static struct tern__card_local local_of(const uint8_t *card, size_t len)
{
	struct tern__card c;
	char why[128];

	CHECK(tern__card_parse(card, len, &c, why, sizeof(why)) == 0 &&
		      c.local != NULL,
	      "a card without a same-host part: %s", why);
	return *c.local;
}

static int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b)
{
	for (int i = 0; i < 2000000 && !req->done; i++) {
		tern_progress(a);
		if (b != NULL)
			tern_progress(b);
		if (i > 1000)
			usleep(10);
	}
	CHECK(req->done, "request never completed");
	return req->status;
}

static void spin(struct tern_ctx *a, struct tern_ctx *b, int ms)
{
	for (int i = 0; i < ms; i++) {
		tern_progress(a);
		if (b != NULL)
			tern_progress(b);
		usleep(1000);
	}
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- what a case looks at ------------------------------------------ */

/* /proc/@pid/fd as text: "fd -> target" lines, sorted by fd; sockets
 * left out when @no_sockets (a provider's connections: the fabric's). */
static char *fd_table_of(pid_t pid, int no_sockets)
{
	char path[64], *out = NULL;
	struct dirent **ents;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int n;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	n = scandir(path, &ents, NULL, versionsort);
	CHECK(f != NULL && n >= 0, "%s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++) {
		char p[600], t[256];
		ssize_t k;

		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			k = readlink(p, t, sizeof(t) - 1);
			t[k > 0 ? k : 0] = '\0';
			if (!no_sockets || strncmp(t, "socket:", 7) != 0)
				fprintf(f, "%s -> %s\n", ents[i]->d_name, t);
		}
		free(ents[i]);
	}
	free(ents);
	fclose(f);
	return out;
}

static char *fd_table(pid_t pid)
{
	return fd_table_of(pid, 0);
}

/* Does @pid hold a pidfd of @target (/proc/PID/fdinfo's "Pid:")? */
static int holds_pidfd(pid_t pid, pid_t target)
{
	char path[64], line[128], want[32];
	struct dirent *e;
	int found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	snprintf(want, sizeof(want), "Pid:\t%d\n", (int)target);
	d = opendir(path);
	CHECK(d != NULL, "%s", path);
	while ((e = readdir(d)) != NULL && !found) {
		char p[600];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		f = fopen(p, "r");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL)
			found |= strcmp(line, want) == 0;
		fclose(f);
	}
	closedir(d);
	return found;
}

/* Children to end if a check fails (exit with them alive would keep
 * the test's output open). */
static pid_t g_kids[16];
static int g_nkids;
static pid_t g_main;

static void kill_kids(void)
{
	if (getpid() != g_main)
		return;
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			kill(g_kids[i], SIGKILL);
}

static void kid(pid_t pid)
{
	if (g_nkids < 16)
		g_kids[g_nkids++] = pid;
}

/* Capturing our own stderr (tern logs there): begin, then end, which
 * hands back what was written and echoes it to the real stderr. */
static int g_saved_err = -1, g_cap = -1;

static void cap_begin(void)
{
	fflush(stderr);
	g_cap = memfd_create("log", MFD_CLOEXEC);
	g_saved_err = dup(2);
	CHECK(g_cap >= 0 && g_saved_err >= 0 && dup2(g_cap, 2) == 2,
	      "capture stderr");
}

static char *cap_end(void)
{
	struct stat st;
	char *t;

	fflush(stderr);
	dup2(g_saved_err, 2);
	close(g_saved_err);
	CHECK(fstat(g_cap, &st) == 0, "fstat");
	t = calloc(1, (size_t)st.st_size + 1);
	CHECK(t != NULL && pread(g_cap, t, (size_t)st.st_size, 0) ==
				   (ssize_t)st.st_size,
	      "read the log");
	close(g_cap);
	fprintf(stderr, "%s", t);
	return t;
}

static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

/* ---- child processes ------------------------------------------------ */

struct chan {
	int in, out; /* ours */
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

/* Fork; the child runs @fn with its end of two pipes and exits. */
static pid_t fork_child(struct chan *parent_end, void (*fn)(struct chan *))
{
	int a[2], b[2];
	pid_t pid;

	CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct chan c = { .in = a[0], .out = b[1] };

		close(a[1]);
		close(b[0]);
		fn(&c);
		exit(0);
	}
	kid(pid);
	close(a[0]);
	close(b[1]);
	parent_end->in = b[0];
	parent_end->out = a[1];
	return pid;
}

static void reap(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed (%#x)",
	      (int)pid, st);
}

/* A process that never used tern, holding g_mem at a known pattern:
 * "check" answers whether g_mem is still that pattern, "bye" ends it. */
static void victim_main(struct chan *c)
{
	char cmd[8];
	uint8_t *want = malloc(MEM);

	CHECK(want != NULL, "alloc");
	fill(g_mem, MEM, 77);
	memcpy(want, g_mem, MEM);
	put(c->out, "ready", 5);
	for (;;) {
		size_t n = get(c->in, cmd, sizeof(cmd));
		int same = memcmp(g_mem, want, MEM) == 0;

		if (n == 3 && memcmp(cmd, "bye", 3) == 0)
			exit(0);
		put(c->out, &same, sizeof(same));
	}
}

static int victim_untouched(struct chan *c)
{
	int same = 0;

	put(c->out, "check", 5);
	get(c->in, &same, sizeof(same));
	return same;
}

/* A good peer pair after an attack: @owner adds a fresh ctx and the ctx
 * adds it; a write lands at once on the same-host path. */
static void good_peer(struct tern_ctx *owner, const char *after)
{
	struct tern_ctx *w = open_ctx();
	uint8_t *buf, src[4096];
	struct tern_mr *omr, *wmr;
	struct tern_mr_desc d;
	struct tern_peer *p;
	struct tern_req r;
	uint64_t t0;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, 8192, (void **)&buf) == 0,
	      "shared alloc");
	memset(buf, 0, 8192);
	CHECK(tern_mr_reg(owner, buf, 8192, RW, &omr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(owner, w);
	p = add(w, owner);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL,
	      "%s: a good peer is not given the same-host path", after);
	fill(src, sizeof(src), 5);
	t0 = now_ms();
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 100, &r) == 0 &&
		      pump(&r, w, owner) == 0,
	      "%s: a good peer's write", after);
	CHECK(memcmp(buf + 100, src, sizeof(src)) == 0,
	      "%s: a good peer's bytes", after);
	CHECK(now_ms() - t0 < 1000, "%s: a good peer waited %llu ms", after,
	      (unsigned long long)(now_ms() - t0));
	tern_mr_close(omr);
	tern_mr_close(wmr);
	CHECK(tern_ctx_close(w) == 0, "close");
	tern_mem_free(TERN_MEM_SHARED, buf);
}

static int need_root(const char *what)
{
	if (geteuid() == 0)
		return 0;
	printf("SKIP: %s needs root (a process under another uid)\n", what);
	return 1;
}

/* ---- spoof: a broker name bound by another uid ---------------------- */

/* The forged cards' nonces: ours alone (the shm and tcp runs of this case
 * may bind their abstract names at the same time). */
#define SPOOF_NONCE (0x5eed000000000001ull ^ ((uint64_t)g_main << 16))

static uint64_t g_victim_start;
static pid_t g_victim_pid;

/* A fake inbox for the victim: valid-looking, sealed, naming it. */
static int fake_inbox(uint64_t nonce, pid_t pid, int seal)
{
	int fd = memfd_create("fake-inbox", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	uint8_t *p;
	struct tern__lhdr *h;

	CHECK(fd >= 0 && ftruncate(fd, TERN__L_SIZE) == 0, "memfd");
	p = mmap(NULL, TERN__L_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap");
	h = tern__l_hdr(p);
	h->magic = TERN__L_MAGIC;
	h->version = TERN__L_VERSION;
	h->nreg = TERN__L_NREG;
	h->npeer = TERN__L_NPEER;
	h->ring = TERN__L_RING;
	h->nonce = nonce;
	h->pid = (uint32_t)pid;
	h->nused = 1;
	/* A region over the victim's memory, and the forger's table
	 * naming everyone LIVE: what a hostile inbox would claim. */
	tern__l_reg(p)[0].base = (uint64_t)(uintptr_t)g_mem;
	tern__l_reg(p)[0].len = MEM;
	tern__l_reg(p)[0].access = RW;
	atomic_store(&tern__l_reg(p)[0].gen, 1);
	munmap(p, TERN__L_SIZE);
	if (seal)
		CHECK(fcntl(fd, F_ADD_SEALS,
			    F_SEAL_SHRINK | F_SEAL_GROW |
				    F_SEAL_FUTURE_WRITE) == 0,
		      "seal");
	return fd;
}

/* What the next attacker forked is: its broker name's nonce, and
 * whether it runs under uid 65534 (else ours: another process of our
 * uid). */
static uint64_t g_att_nonce;
static int g_att_other_uid;

/* The attacker: binds the broker name of g_att_nonce, and answers anyone
 * who asks with a fake inbox; reports the connections it took and the
 * requests it read. */
static void attacker_main(struct chan *c)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t alen;
	int s, conns = 0, reqs = 0, inbox, efd;

	CHECK(!g_att_other_uid || (setgid(65534) == 0 && setuid(65534) == 0),
	      "setuid: %s", strerror(errno));
	inbox = fake_inbox(g_att_nonce, g_victim_pid, 1);
	efd = eventfd(0, EFD_CLOEXEC);
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(a.sun_path + 1,
					    sizeof(a.sun_path) - 1,
					    "tern-local-%016llx",
					    (unsigned long long)g_att_nonce));
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, alen) == 0 &&
		      listen(s, 16) == 0,
	      "bind the spoofed broker name: %s", strerror(errno));
	put(c->out, "bound", 5);
	for (;;) {
		struct pollfd pf[2] = { { .fd = s, .events = POLLIN },
					{ .fd = c->in, .events = POLLIN } };

		CHECK(poll(pf, 2, -1) > 0, "poll");
		if (pf[1].revents != 0) {
			char stop[8];

			/* The whole "stop" (its length came first): the
			 * parent's second write must find us still here. */
			get(c->in, stop, sizeof(stop));
			break;
		}
		if (pf[0].revents & POLLIN) {
			int k = accept4(s, NULL, NULL, SOCK_CLOEXEC);
			struct pollfd q = { .fd = k, .events = POLLIN };
			uint8_t buf[TERN__LB_REQ_MAX + 1];

			if (k < 0)
				continue;
			conns++;
			if (poll(&q, 1, 200) == 1 &&
			    recv(k, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
				struct tern__lb_ans an = {
					.what = TERN__LB_INBOX, .nfds = 2
				};
				uint8_t msg[TERN__LB_ANS_LEN];
				union {
					char b[CMSG_SPACE(2 * sizeof(int))];
					struct cmsghdr al;
				} u;
				struct iovec iov = { msg, sizeof(msg) };
				struct msghdr mh = {
					.msg_iov = &iov,
					.msg_iovlen = 1,
					.msg_control = u.b,
					.msg_controllen = sizeof(u.b),
				};
				struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
				int fds[2] = { inbox, efd };

				reqs++;
				tern__lb_ans_pack(&an, msg, sizeof(msg));
				cm->cmsg_level = SOL_SOCKET;
				cm->cmsg_type = SCM_RIGHTS;
				cm->cmsg_len = CMSG_LEN(sizeof(fds));
				memcpy(CMSG_DATA(cm), fds, sizeof(fds));
				(void)sendmsg(k, &mh, MSG_NOSIGNAL);
			}
			close(k);
		}
	}
	put(c->out, &conns, sizeof(conns));
	put(c->out, &reqs, sizeof(reqs));
}

static int case_spoof(void)
{
	struct tern_ctx *t, *f;
	struct tern__card_local loc;
	struct chan vc, ac[2];
	uint8_t card[TERN_CARD_MAX], forged[TERN_CARD_MAX], *src;
	struct tern_mr *fmr, *tmr;
	struct tern_mr_desc d;
	struct tern_peer *p[2];
	struct tern_req r;
	char *fds_before, *fds_after, *log, ready[8];
	int conns[2] = { -1, -1 }, reqs[2] = { -1, -1 };
	size_t n, cn;

	if (need_root("spoof"))
		return 77;
	g_victim_pid = fork_child(&vc, victim_main);
	get(vc.in, ready, sizeof(ready));
	g_victim_start = tern__local_start_time(g_victim_pid);
	CHECK(g_victim_start != 0, "the victim's start time");
	/* Attacker 0 runs under uid 65534, attacker 1 under ours (root):
	 * neither is the card's process. */
	for (int k = 0; k < 2; k++) {
		g_att_nonce = SPOOF_NONCE + (uint64_t)k;
		g_att_other_uid = k == 0;
		fork_child(&ac[k], attacker_main);
		get(ac[k].in, ready, sizeof(ready));
	}
	fds_before = fd_table(g_victim_pid);
	/* Our ctx, and one whose fabric address the forged card carries
	 * (the parent's own g_mem, at the victim's address: what the
	 * fabric write lands in). */
	t = open_ctx();
	f = open_ctx();
	memset(g_mem, 0, MEM);
	CHECK(tern_mr_reg(f, g_mem, MEM, RW, &fmr) == 0, "reg");
	CHECK((src = malloc(MEM)) != NULL &&
		      tern_mr_reg(t, src, MEM, RW, &tmr) == 0,
	      "reg src");
	tern_mr_desc(fmr, &d);
	cn = card_of(f, card);
	cap_begin();
	for (int k = 0; k < 2; k++) {
		loc = local_of(card, cn);
		loc.pid = (uint32_t)g_victim_pid;
		loc.start = g_victim_start;
		loc.nonce = SPOOF_NONCE + (uint64_t)k;
		loc.inbox_fd = 987; /* not open there: pidfd_getfd fails */
		loc.wake_fd = 988;
		n = card_splice(card, cn, &loc, forged);
		CHECK(tern_peer_add(t, forged, n, &p[k]) == 0,
		      "add forged card %d", k);
	}
	spin(t, f, 300); /* the broker is asked again and again */
	for (int k = 0; k < 2; k++) {
		fill(src, MEM, 3 + (unsigned int)k);
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p[k], tmr, src, MEM, &d, 0, &r) == 0, "post");
		CHECK(pump(&r, t, f) == 0, "the write over the fabric: %s",
		      tern_strerror(r.status));
		CHECK(tern_peer_path(p[k]) == TERN_PATH_FABRIC,
		      "a spoofed broker (attacker %d) gave the same-host path",
		      k);
	}
	spin(t, f, 100);
	log = cap_end();
	CHECK(count(log, "of uid 65534: not its broker") == 1 &&
		      count(log, "of uid 0: not its broker") == 1,
	      "the log names the spoofed brokers %d and %d times (want once "
	      "each)",
	      count(log, "of uid 65534: not its broker"),
	      count(log, "of uid 0: not its broker"));
	CHECK(victim_untouched(&vc), "the victim's memory changed");
	fds_after = fd_table(g_victim_pid);
	CHECK(strcmp(fds_before, fds_after) == 0,
	      "the victim's fd table changed:\n%s\nthen\n%s", fds_before,
	      fds_after);
	CHECK(memcmp(g_mem, src, MEM) == 0,
	      "the fabric write did not land at its fabric peer");
	for (int k = 0; k < 2; k++) {
		put(ac[k].out, "stop", 4);
		get(ac[k].in, &conns[k], sizeof(conns[k]));
		get(ac[k].in, &reqs[k], sizeof(reqs[k]));
		CHECK(conns[k] >= 1,
		      "tern never connected to broker name %d (%d)", k,
		      conns[k]);
		CHECK(reqs[k] == 0,
		      "tern sent %d requests to spoofed broker %d", reqs[k], k);
	}
	good_peer(t, "spoof");
	put(vc.out, "bye", 3);
	reap(g_victim_pid);
	printf("spoof: sockets bound for pid %d by uid 65534 and by another "
	       "process of uid 0 refused (%d and %d connects, 0 requests "
	       "sent), the victim untouched, path %s\n",
	       (int)g_victim_pid, conns[0], conns[1], g_prov);
	tern_peer_remove(p[0]);
	tern_peer_remove(p[1]);
	tern_mr_close(fmr);
	tern_mr_close(tmr);
	tern_ctx_close(f);
	tern_ctx_close(t);
	free(src);
	free(log);
	free(fds_before);
	free(fds_after);
	return 0;
}

/* ---- forged: another process's same-host part in a card ------------- */

/* B: a ctx with a region on g_mem; sends its card and descriptor, then
 * on "add" adds the card it is given; "check" compares g_mem with the
 * pattern it is sent; progresses while it waits. */
static void owner_main(struct chan *c)
{
	uint8_t card[TERN_CARD_MAX], *want = malloc(MEM);
	struct tern_ctx *ctx = open_ctx();
	struct tern_mr_desc d;
	struct tern_mr *mr;
	struct tern_peer *p;
	size_t n;

	CHECK(want != NULL, "alloc");
	fill(g_mem, MEM, 11);
	CHECK(tern_mr_reg(ctx, g_mem, MEM, RW, &mr) == 0, "B: reg");
	tern_mr_desc(mr, &d);
	n = card_of(ctx, card);
	put(c->out, card, n);
	put(c->out, &d, sizeof(d));
	for (;;) {
		char cmd[8];
		struct pollfd pf = { .fd = c->in, .events = POLLIN };

		tern_progress(ctx);
		if (poll(&pf, 1, 1) != 1)
			continue;
		n = get(c->in, cmd, sizeof(cmd));
		if (n == 3 && memcmp(cmd, "bye", 3) == 0)
			break;
		if (n == 3 && memcmp(cmd, "add", 3) == 0) {
			n = get(c->in, card, sizeof(card));
			CHECK(tern_peer_add(ctx, card, n, &p) == 0, "B: add A");
			put(c->out, "ok", 2);
		} else {
			int same;

			get(c->in, want, MEM);
			same = memcmp(g_mem, want, MEM) == 0;
			put(c->out, &same, sizeof(same));
		}
	}
	tern_ctx_close(ctx);
	free(want);
}

static int owner_has(struct chan *c, const uint8_t *want)
{
	int same = 0;

	put(c->out, "check", 5);
	put(c->out, want, MEM);
	get(c->in, &same, sizeof(same));
	return same;
}

static int case_forged(void)
{
	struct tern_ctx *a, *dec;
	uint8_t bcard[TERN_CARD_MAX], dcard[TERN_CARD_MAX];
	uint8_t forged[TERN_CARD_MAX], *src = malloc(MEM), *want = malloc(MEM);
	struct tern__card_local bloc;
	struct tern_mr_desc bd, dd, bad;
	struct tern_mr *amr, *dmr;
	struct tern_peer *p;
	struct tern_req r;
	struct chan bc;
	char *fds_before, *fds_after, ok[4];
	size_t bn, dn, fn;
	pid_t b;
	int ret;

	CHECK(src != NULL && want != NULL, "alloc");
	/* Children first: a fork of a process with ctxs (threads) is not
	 * one to run tern in. */
	b = fork_child(&bc, owner_main);
	a = open_ctx();
	dec = open_ctx();
	bn = get(bc.in, bcard, sizeof(bcard));
	get(bc.in, &bd, sizeof(bd));
	fill(want, MEM, 11); /* what B holds */
	CHECK(owner_has(&bc, want), "B's memory at the start");
	fds_before = fd_table(b);
	/* The decoy: our own g_mem at B's address, with its own keys. */
	memset(g_mem, 0, MEM);
	CHECK(tern_mr_reg(dec, g_mem, MEM, RW, &dmr) == 0 &&
		      tern_mr_reg(a, src, MEM, RW, &amr) == 0,
	      "reg");
	tern_mr_desc(dmr, &dd);
	bad = bd;
	bad.keys[0] ^= 0x5a5a;
	fill(src, MEM, 12);
	/* 1. B's same-host part with the decoy's fabric address. */
	bloc = local_of(bcard, bn);
	dn = card_of(dec, dcard);
	fn = card_splice(dcard, dn, &bloc, forged);
	CHECK(tern_peer_add(a, forged, fn, &p) == 0, "add the forged card");
	spin(a, dec, 50);
	CHECK(tern_peer_path(p) == TERN_PATH_FABRIC,
	      "B's same-host part was given the path though B never added "
	      "us");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, amr, src, MEM, &dd, 0, &r) == 0 &&
		      pump(&r, a, dec) == 0,
	      "the forged card's write over the fabric: %s",
	      tern_strerror(r.status));
	CHECK(memcmp(g_mem, src, MEM) == 0,
	      "the forged card's write did not go to its fabric address");
	CHECK(a->local->copies == 0, "%llu operations on the same-host path",
	      (unsigned long long)a->local->copies);
	CHECK(owner_has(&bc, want), "B's memory changed (forged card)");
	tern_peer_remove(p);
	/* 2. B's own card, copied: still no path (B has not added us). */
	CHECK(tern_peer_add(a, bcard, bn, &p) == 0, "add B's card");
	spin(a, NULL, 50);
	CHECK(tern_peer_path(p) == TERN_PATH_FABRIC,
	      "B's copied card was given the path though B never added us");
	CHECK(a->local->copies == 0, "a copy on the same-host path");
	CHECK(owner_has(&bc, want), "B's memory changed (copied card)");
	fds_after = fd_table(b);
	CHECK(strcmp(fds_before, fds_after) == 0,
	      "B's fd table changed before it added us:\n%s\nthen\n%s",
	      fds_before, fds_after);
	/* 3. B adds us: wrong keys fail, right keys land. */
	put(bc.out, "add", 3);
	put(bc.out, dcard, card_of(a, dcard));
	get(bc.in, ok, sizeof(ok));
	for (int i = 0; i < 1000 && tern_peer_path(p) != TERN_PATH_LOCAL; i++)
		spin(a, NULL, 1);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL,
	      "B added us, yet no same-host path");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, amr, src, 4096, &bad, 0, &r) == 0, "post");
	ret = pump(&r, a, NULL);
	CHECK(ret == -TERN_EACCESS, "a write with wrong keys: %s (want %s)",
	      tern_strerror(ret), tern_strerror(-TERN_EACCESS));
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_read(p, amr, src, 4096, &bad, 0, &r) == 0, "post");
	ret = pump(&r, a, NULL);
	CHECK(ret == -TERN_EACCESS, "a read with wrong keys: %s",
	      tern_strerror(ret));
	CHECK(owner_has(&bc, want), "B's memory changed (wrong keys)");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, amr, src, 4096, &bd, 8, &r) == 0 &&
		      pump(&r, a, NULL) == 0,
	      "a write with B's keys: %s", tern_strerror(r.status));
	memcpy(want + 8, src, 4096);
	CHECK(owner_has(&bc, want), "B's memory after a write with its keys");
	CHECK(a->local->copies >= 1, "the write did not take the path");
	put(bc.out, "bye", 3);
	reap(b);
	printf("forged: B's same-host part (spliced and copied) gave "
	       "nothing until B added us; then wrong keys -TERN_EACCESS, "
	       "B's keys landed\n");
	tern_peer_remove(p);
	tern_mr_close(amr);
	tern_mr_close(dmr);
	tern_ctx_close(dec);
	tern_ctx_close(a);
	free(src);
	free(want);
	free(fds_before);
	free(fds_after);
	return 0;
}

/* ---- noregion: addresses in no region ------------------------------- */

static int case_noregion(void)
{
	struct tern_ctx *t = open_ctx(), *w = open_ctx();
	uint8_t *tb, *wb = malloc(MEM), *tw = malloc(MEM), *ww = malloc(MEM);
	struct tern_mr *tmr, *wmr;
	struct tern_mr_desc d, nd;
	struct tern_peer *p;
	struct tern_req r;
	void *hole;
	int ret;

	CHECK(wb != NULL && tw != NULL && ww != NULL, "alloc");
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&tb) == 0,
	      "shared alloc");
	fill(tb, MEM, 1);
	fill(g_mem, MEM, 2); /* ours, in no region */
	fill(wb, MEM, 3);
	memcpy(tw, tb, MEM);
	memcpy(ww, wb, MEM);
	CHECK(tern_mr_reg(t, tb, MEM, RW, &tmr) == 0 &&
		      tern_mr_reg(w, wb, MEM, RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(tmr, &d);
	add(t, w);
	p = add(w, t);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL, "no same-host path");
	hole = mmap(NULL, MEM, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(hole != MAP_FAILED && munmap(hole, MEM) == 0, "a hole");
	for (int k = 0; k < 2; k++) {
		const char *where = k == 0 ? "memory in no region"
					   : "an unmapped address";

		nd = d;
		nd.base = k == 0 ? (uint64_t)(uintptr_t)g_mem
				 : (uint64_t)(uintptr_t)hole;
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, wmr, wb, 4096, &nd, 16, &r) == 0, "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a write to %s: %s (want %s)",
		      where, tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_read(p, wmr, wb, 4096, &nd, 16, &r) == 0, "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a read of %s: %s (want %s)", where,
		      tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(p, wmr, wb, 4096, &nd, 16, 9, &r) == 0,
		      "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a write_imm to %s: %s", where,
		      tern_strerror(ret));
		CHECK(memcmp(wb, ww, MEM) == 0, "%s: a read copied bytes",
		      where);
	}
	fill(ww + 4096, MEM - 4096, 2);
	for (size_t i = 0; i < MEM; i++)
		CHECK(g_mem[i] == (uint8_t)(2 * 131 + i * 7 + (i >> 9)),
		      "memory in no region changed at %zu", i);
	CHECK(memcmp(tb, tw, MEM) == 0, "the peer's region changed");
	CHECK(tern_imm_count(t, 9) == 0, "a refused write_imm counted");
	good_peer(t, "noregion");
	spin(w, t, 50); /* the refused write_imm's abort, sent to t */
	printf("noregion: writes, reads and write_imm to memory in no region "
	       "and to an unmapped address: -TERN_EACCESS, nothing copied\n");
	tern_mr_close(tmr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(t);
	tern_mem_free(TERN_MEM_SHARED, tb);
	free(wb);
	free(tw);
	free(ww);
	return 0;
}

/* ---- unsealed: an inbox a peer could shrink ------------------------- */

#define FAKE_NONCE 0x5eedf00dcafe0002ull

/* A fake owner: an unsealed inbox with a good header; sends its fd,
 * inode and eventfd; "shrink" truncates it to 0. */
static void unsealed_main(struct chan *c)
{
	int fd = fake_inbox(FAKE_NONCE, getpid(), 0), efd;
	struct stat st;
	uint64_t v[3];
	char cmd[8];
	uint8_t *p;

	efd = eventfd(0, EFD_CLOEXEC);
	CHECK(efd >= 0 && fstat(fd, &st) == 0, "eventfd");
	p = mmap(NULL, TERN__L_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap");
	tern__l_hdr(p)->wake_fd = efd;
	v[0] = (uint64_t)fd;
	v[1] = (uint64_t)st.st_ino;
	v[2] = (uint64_t)efd;
	put(c->out, v, sizeof(v));
	for (;;) {
		size_t n = get(c->in, cmd, sizeof(cmd));

		if (n == 3 && memcmp(cmd, "bye", 3) == 0)
			break;
		CHECK(ftruncate(fd, 0) == 0, "shrink: %s", strerror(errno));
		put(c->out, "ok", 2);
	}
}

static int case_unsealed(void)
{
	struct tern_ctx *t, *f;
	uint8_t card[TERN_CARD_MAX], forged[TERN_CARD_MAX], src[4096];
	struct tern__card_local loc;
	struct tern_mr *fmr, *tmr;
	struct tern_mr_desc d;
	struct tern_peer *p;
	struct tern_req r;
	struct chan c;
	uint64_t v[3];
	char *log, *fds_before, *fds_after, ok[4];
	size_t n;
	pid_t pid;

	pid = fork_child(&c, unsealed_main);
	t = open_ctx();
	f = open_ctx();
	get(c.in, v, sizeof(v));
	fds_before = fd_table(pid);
	memset(g_mem, 0, MEM);
	CHECK(tern_mr_reg(f, g_mem, MEM, RW, &fmr) == 0 &&
		      tern_mr_reg(t, src, sizeof(src), RW, &tmr) == 0,
	      "reg");
	tern_mr_desc(fmr, &d);
	n = card_of(f, card);
	loc = local_of(card, n);
	loc.pid = (uint32_t)pid;
	loc.start = tern__local_start_time(pid);
	loc.nonce = FAKE_NONCE;
	loc.inbox_fd = (uint32_t)v[0];
	loc.inbox_ino = v[1];
	loc.wake_fd = (uint32_t)v[2];
	n = card_splice(card, n, &loc, forged);
	cap_begin();
	CHECK(tern_peer_add(t, forged, n, &p) == 0, "add");
	spin(t, f, 50);
	log = cap_end();
	CHECK(tern_peer_path(p) == TERN_PATH_FABRIC,
	      "an unsealed inbox was taken");
	CHECK(count(log, "not sealed") == 1,
	      "the log names the unsealed inbox %d times (want once)",
	      count(log, "not sealed"));
	/* Shrunk under whatever we might still map: no SIGBUS. */
	put(c.out, "shrink", 6);
	get(c.in, ok, sizeof(ok));
	fill(src, sizeof(src), 4);
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, tmr, src, sizeof(src), &d, 0, &r) == 0 &&
			      pump(&r, t, f) == 0,
		      "a write after the shrink: %s", tern_strerror(r.status));
		spin(t, f, 20);
	}
	CHECK(memcmp(g_mem, src, sizeof(src)) == 0, "the fabric's write");
	fds_after = fd_table(pid);
	CHECK(strcmp(fds_before, fds_after) == 0,
	      "the fake owner's fd table changed");
	put(c.out, "bye", 3);
	reap(pid);
	good_peer(t, "unsealed");
	printf("unsealed: an unsealed inbox refused (said once), shrunk "
	       "after: no crash, the fabric's path\n");
	tern_peer_remove(p);
	tern_mr_close(fmr);
	tern_mr_close(tmr);
	tern_ctx_close(f);
	tern_ctx_close(t);
	free(log);
	free(fds_before);
	free(fds_after);
	return 0;
}

/* ---- hol: a full ring holds up only its own peer ------------------- */

#define HOL_EXTRA 100

static int case_hol(void)
{
	struct tern_ctx *w = open_ctx(), *slow = open_ctx(), *fast = open_ctx();
	uint8_t *sb, *fb, src[64];
	struct tern_mr *smr, *fmr, *wmr;
	struct tern_mr_desc sd, fd;
	struct tern_peer *ps, *pf;
	struct tern_req *rs, r, x;
	uint64_t t0;
	int done = 0;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&sb) == 0 &&
		      tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&fb) ==
			      0,
	      "shared alloc");
	rs = calloc(TERN__L_RING + HOL_EXTRA, sizeof(*rs));
	CHECK(rs != NULL, "alloc");
	CHECK(tern_mr_reg(slow, sb, MEM, RW, &smr) == 0 &&
		      tern_mr_reg(fast, fb, MEM, RW, &fmr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(smr, &sd);
	tern_mr_desc(fmr, &fd);
	add(slow, w);
	add(fast, w);
	ps = add(w, slow);
	pf = add(w, fast);
	CHECK(tern_peer_path(ps) == TERN_PATH_LOCAL &&
		      tern_peer_path(pf) == TERN_PATH_LOCAL,
	      "no same-host path");
	/* slow never progresses: its ring from w fills at 4096. */
	memset(src, 0x42, sizeof(src));
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++) {
		tern_req_init(&rs[k], NULL, NULL);
		CHECK(tern_write_imm(ps, wmr, src, 8, &sd, 8 * (k % 64), 1,
				     &rs[k]) == 0,
		      "post %d", k);
	}
	for (int k = 0; k < 200; k++)
		tern_progress(w);
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		done += rs[k].done;
	CHECK(done == TERN__L_RING,
	      "%d of %d writes with immediates to a peer that never reads "
	      "completed (want %d: the ring's room)",
	      done, TERN__L_RING + HOL_EXTRA, TERN__L_RING);
	/* fast is served at once, writes and immediates. */
	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(fast, 2, 3, &x) == 0, "expect");
	t0 = now_ms();
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(pf, wmr, src, sizeof(src), &fd, 64, 2,
				     &r) == 0 &&
			      pump(&r, w, fast) == 0,
		      "fast: write_imm: %s", tern_strerror(r.status));
	}
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(pf, wmr, src, sizeof(src), &fd, 0, &r) == 0 &&
		      pump(&r, w, fast) == 0,
	      "fast: write");
	CHECK(pump(&x, fast, w) == 0, "fast: its immediates");
	CHECK(now_ms() - t0 < 500, "fast waited %llu ms behind slow",
	      (unsigned long long)(now_ms() - t0));
	CHECK(memcmp(fb, src, sizeof(src)) == 0, "fast's bytes");
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		CHECK(k < TERN__L_RING || !rs[k].done,
		      "a queued write to slow completed meanwhile");
	/* slow reads at last: the rest go. */
	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(slow, 1, TERN__L_RING + HOL_EXTRA, &x) == 0,
	      "expect");
	CHECK(pump(&x, slow, w) == 0, "slow: its immediates");
	for (int k = 0; k < TERN__L_RING + HOL_EXTRA; k++)
		CHECK(pump(&rs[k], w, slow) == 0, "slow %d", k);
	printf("hol: %d writes with immediates to a peer that never read: "
	       "%d completed, %d queued; another peer served in %llu ms\n",
	       TERN__L_RING + HOL_EXTRA, TERN__L_RING, HOL_EXTRA,
	       (unsigned long long)(now_ms() - t0));
	tern_mr_close(smr);
	tern_mr_close(fmr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(slow);
	tern_ctx_close(fast);
	tern_mem_free(TERN_MEM_SHARED, sb);
	tern_mem_free(TERN_MEM_SHARED, fb);
	free(rs);
	return 0;
}

/* ---- scribble: a peer's junk in its own ring ------------------------ */

/* The ring in @w's inbox (it writes it: a hostile peer scribbles its
 * own memory) pointed at the ctx of nonce @target. */
static struct tern__lout *ring_to(struct tern_ctx *w, uint64_t target)
{
	for (int i = 0; i < TERN__L_NPEER; i++) {
		struct tern__lout *o = tern__l_out(w->local->map, i);

		if (atomic_load(&o->target) == target)
			return o;
	}
	FAIL("no ring to %llx", (unsigned long long)target);
	return NULL;
}

static int case_scribble(void)
{
	struct tern_ctx *o = open_ctx(), *bad = open_ctx(), *good = open_ctx();
	struct tern_peer *obad, *ogood, *pb, *pg;
	struct tern_mr *omr, *bmr, *gmr;
	struct tern_mr_desc d;
	struct tern_req r, xb, xg;
	struct tern__lout *ring;
	uint8_t *ob, src[64];
	uint64_t tail;
	char *log;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&ob) == 0,
	      "shared alloc");
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0 &&
		      tern_mr_reg(bad, src, sizeof(src), RW, &bmr) == 0 &&
		      tern_mr_reg(good, src, sizeof(src), RW, &gmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	obad = add(o, bad);
	ogood = add(o, good);
	pb = add(bad, o);
	pg = add(good, o);
	CHECK(tern_peer_path(pb) == TERN_PATH_LOCAL &&
		      tern_peer_path(pg) == TERN_PATH_LOCAL,
	      "no same-host path");
	/* One honest write_imm from bad: its ring exists, and counts. */
	tern_req_init(&xb, NULL, NULL);
	CHECK(tern_imm_expect_from(o, obad, 55, 2, 20000, &xb) == 0,
	      "expect from bad");
	tern_req_init(&xg, NULL, NULL);
	CHECK(tern_imm_expect_from(o, ogood, 55, 3, 20000, &xg) == 0,
	      "expect from good");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write_imm(pb, bmr, src, 8, &d, 0, 55, &r) == 0 &&
		      pump(&r, bad, o) == 0,
	      "bad's honest write_imm");
	spin(o, NULL, 5);
	CHECK(!xb.done, "one immediate completed an expectation of two");
	/* Then junk: its tail far ahead, entries of 55 everywhere. */
	ring = ring_to(bad, tern__local_id(o)->nonce);
	for (int k = 0; k < TERN__L_RING; k++)
		ring->ring[k] = 55;
	tail = atomic_load(&ring->tail);
	atomic_store(&ring->tail, tail + 1000000);
	cap_begin();
	for (int k = 0; k < 2000; k++)
		tern_progress(o);
	/* good's three count for good alone. */
	for (int k = 0; k < 3; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(pg, gmr, src, 8, &d, 64, 55, &r) == 0 &&
			      pump(&r, good, o) == 0,
		      "good's write_imm");
	}
	CHECK(pump(&xg, o, good) == 0 && xg.len == 3, "good's immediates");
	/* And it scribbles on. */
	atomic_store(&ring->tail, tail + 2000000);
	spin(o, good, 20);
	log = cap_end();
	CHECK(count(log, "no longer read") == 1,
	      "the scribbled ring was named %d times (want once)",
	      count(log, "no longer read"));
	CHECK(!xb.done, "bad's junk completed its expectation");
	CHECK(o->local->dropped == 1, "dropped %llu",
	      (unsigned long long)o->local->dropped);
	CHECK(tern_imm_count(o, 55) == 1,
	      "%llu immediates of 55 counted (want bad's one honest one)",
	      (unsigned long long)tern_imm_count(o, 55));
	good_peer(o, "scribble");
	tern_req_cancel(o, &xb);
	spin(o, NULL, 2);
	printf("scribble: a ring 1000000 entries ahead read no more (said "
	       "once), nothing of it counted; another peer's 3 counted for "
	       "it alone\n");
	tern_mr_close(omr);
	tern_mr_close(bmr);
	tern_mr_close(gmr);
	tern_ctx_close(bad);
	tern_ctx_close(good);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(log);
	return 0;
}

/* ---- silent: connections that never send ---------------------------- */

static int broker_connect(uint64_t owner)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t alen;
	int s;

	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(a.sun_path + 1,
					    sizeof(a.sun_path) - 1,
					    "tern-local-%016llx",
					    (unsigned long long)owner));
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket");
	if (connect(s, (struct sockaddr *)&a, alen) != 0) {
		close(s);
		return -1;
	}
	return s;
}

/* ---- stuck: a peer that says it is copying, for ever ---------------- */

/* A peer whose ring to us says "copying into region i" and never stops
 * (it writes its own memory: a hung or hostile one) holds our close of
 * that region for 1 s, once: then it loses the path (its entry is no
 * longer live, said once), and later closes do not wait for it. */
static int case_stuck(void)
{
	struct tern_ctx *o = open_ctx(), *bad = open_ctx();
	struct tern_peer *pb;
	struct tern_mr *omr, *omr2, *bmr;
	struct tern_mr_desc d;
	struct tern_req r;
	struct tern__lout *ring;
	uint8_t *ob, src[64];
	uint64_t t0, t1, t2;
	char *log;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&ob) == 0,
	      "shared alloc");
	memset(src, 7, sizeof(src));
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0 &&
		      tern_mr_reg(bad, src, sizeof(src), RW, &bmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(o, bad);
	pb = add(bad, o);
	CHECK(tern_peer_path(pb) == TERN_PATH_LOCAL, "no same-host path");
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(pb, bmr, src, 8, &d, 0, &r) == 0 &&
		      pump(&r, bad, o) == 0,
	      "bad's honest write");
	/* Then it claims a copy into that region and never ends it. */
	ring = ring_to(bad, tern__local_id(o)->nonce);
	atomic_store(&ring->busy, (uint64_t)omr->local_idx + 1);
	cap_begin();
	t0 = now_ms();
	CHECK(tern_mr_close(omr) == 0, "close");
	t1 = now_ms();
	CHECK(t1 - t0 >= 900 && t1 - t0 < 3000,
	      "the first close waited %llu ms (want about 1 s)",
	      (unsigned long long)(t1 - t0));
	CHECK(tern_peer_path(pb) == TERN_PATH_FABRIC,
	      "a peer stuck copying for 1 s kept the same-host path");
	/* A second region: its close does not wait for the stuck peer. */
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr2) == 0, "reg 2");
	atomic_store(&ring->busy, (uint64_t)omr2->local_idx + 1);
	t1 = now_ms();
	CHECK(tern_mr_close(omr2) == 0, "close 2");
	t2 = now_ms();
	log = cap_end();
	CHECK(t2 - t1 < 200,
	      "the second close waited %llu ms for a peer "
	      "that lost the path",
	      (unsigned long long)(t2 - t1));
	CHECK(count(log, "still copying") == 1,
	      "the stuck peer was named %d times (want once)",
	      count(log, "still copying"));
	atomic_store(&ring->busy, 0);
	CHECK(tern_mr_reg(o, ob, MEM, RW, &omr) == 0, "reg 3");
	good_peer(o, "stuck");
	printf("stuck: a peer copying for ever held the first close %llu ms, "
	       "lost the path (said once), and the next close waited %llu "
	       "ms\n",
	       (unsigned long long)(t1 - t0 > 0 ? t1 - t0 : 0),
	       (unsigned long long)(t2 - t1));
	tern_mr_close(omr);
	tern_mr_close(bmr);
	tern_ctx_close(bad);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(log);
	return 0;
}

/* An ask for the inbox as @me: the answer's status, or the fd count. */
static int ask_inbox(uint64_t owner, uint64_t me, int timeout_ms)
{
	struct tern__lb_req req = { .what = TERN__LB_INBOX, .nonce = me };
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
	struct tern__lb_ans an;
	struct pollfd pf;
	char why[128];
	ssize_t len, got;
	int s = broker_connect(owner), n = 0;

	if (s < 0)
		return -errno;
	len = tern__lb_req_pack(&req, buf, sizeof(buf));
	(void)send(s, buf, (size_t)len, MSG_NOSIGNAL);
	pf = (struct pollfd){ .fd = s, .events = POLLIN };
	if (poll(&pf, 1, timeout_ms) != 1) {
		close(s);
		return -ETIMEDOUT;
	}
	got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	if (got < 0)
		return errno == ECONNRESET ? -EPERM : -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		for (size_t k = 0;
		     k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(int));
			close(fd);
			n++;
		}
	}
	CHECK(tern__lb_ans_parse(ans, (size_t)got, &an, why, sizeof(why)) == 0,
	      "%s", why);
	return an.status != 0 ? an.status : n;
}

static void other_uid_main(struct chan *c)
{
	uint64_t owner;
	int refused = 0;

	CHECK(setgid(65534) == 0 && setuid(65534) == 0, "setuid");
	get(c->in, &owner, sizeof(owner));
	for (int k = 0; k < 20; k++)
		refused += ask_inbox(owner, 1, 3000) == -EPERM;
	put(c->out, &refused, sizeof(refused));
}

static int case_silent(void)
{
	struct tern_ctx *o, *g;
	uint64_t owner, me, t0, took;
	int silent[20], ret, refused = 0;
	struct chan c;
	char *log;
	pid_t pid;

	if (need_root("silent"))
		return 77;
	/* Another uid's process, forked before any ctx opens. */
	pid = fork_child(&c, other_uid_main);
	o = open_ctx();
	g = open_ctx();
	owner = tern__local_id(o)->nonce;
	me = tern__local_id(g)->nonce;
	CHECK(o->local->lsock >= 0,
	      "no fd broker (run with TERN_LOCAL_BROKER=1)");
	add(o, g); /* g's process (ours) may connect */
	for (int k = 0; k < 20; k++) {
		silent[k] = broker_connect(owner);
		CHECK(silent[k] >= 0, "silent connection %d: %s", k,
		      strerror(errno));
	}
	usleep(20000);
	t0 = now_ms();
	ret = ask_inbox(owner, me, 200);
	took = now_ms() - t0;
	CHECK(ret == 2,
	      "a good peer's ask behind 20 silent connections: %s "
	      "after %llu ms",
	      strerror(-ret), (unsigned long long)took);
	/* Another uid: refused before it is heard. */
	tern_log_set_level(TERN_LOG_DEBUG);
	cap_begin();
	put(c.out, &owner, sizeof(owner));
	get(c.in, &refused, sizeof(refused));
	reap(pid);
	log = cap_end();
	tern_log_set_level(TERN_LOG_WARN);
	CHECK(refused == 20, "%d of uid 65534's 20 asks refused", refused);
	CHECK(count(log, "of uid 65534 is not a peer of ours: refused") == 20,
	      "the broker named %d refusals of uid 65534 (want 20)",
	      count(log, "of uid 65534 is not a peer of ours: refused"));
	t0 = now_ms();
	ret = ask_inbox(owner, me, 200);
	CHECK(ret == 2, "a good peer's ask after: %s", strerror(-ret));
	for (int k = 0; k < 20; k++)
		close(silent[k]);
	good_peer(o, "silent");
	printf("silent: 20 silent connections, a good peer answered in %llu "
	       "ms; uid 65534 refused 20 times\n",
	       (unsigned long long)took);
	free(log);
	tern_ctx_close(g);
	tern_ctx_close(o);
	return 0;
}

/* ---- resize: an owner that rewrites an entry under its generation ---- */

static int case_resize(void)
{
	struct tern_ctx *o = open_ctx(), *w = open_ctx();
	uint8_t *ob, *want = malloc(8192), src[4096];
	struct tern_mr *omr, *wmr;
	struct tern_mr_desc d, big;
	struct tern__lreg *e = NULL;
	struct tern_peer *p;
	struct tern_req r;
	uint64_t base;
	int ret;

	CHECK(want != NULL, "alloc");
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, 8192, (void **)&ob) == 0,
	      "shared alloc");
	memset(ob, 0, 8192);
	CHECK(tern_mr_reg(o, ob, 8192, RW, &omr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(o, w);
	p = add(w, o);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL, "no same-host path");
	/* A first write maps the region's memfd (8 KiB) in w. */
	fill(src, sizeof(src), 6);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 0, &r) == 0 &&
		      pump(&r, w, o) == 0,
	      "a first write");
	memcpy(want, ob, 8192);
	/* The owner (hostile: it writes its own inbox) says its region is
	 * 1 GiB long, then starts 64 KiB earlier, under the generation w
	 * mapped it at, and hands out a descriptor to match. */
	for (int i = 0; i < TERN__L_NREG; i++)
		if (o->local->reg[i].base == (uint64_t)(uintptr_t)ob)
			e = &o->local->reg[i];
	CHECK(e != NULL, "the region's entry");
	base = e->base;
	big = d;
	big.len = 1ull << 30;
	for (int k = 0; k < 2; k++) {
		const char *how = k == 0 ? "longer" : "earlier";
		uint64_t roff = k == 0 ? 1u << 20 : 0;

		if (k == 0) {
			e->len = big.len;
		} else {
			e->len = 8192;
			e->base = base - 65536;
			big.base = base - 65536;
		}
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, wmr, src, sizeof(src), &big, roff, &r) == 0,
		      "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "a write past what w mapped (entry made %s): %s (want "
		      "%s)",
		      how, tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_read(p, wmr, src, sizeof(src), &big, roff, &r) == 0,
		      "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "a read past what w mapped (%s): %s", how,
		      tern_strerror(ret));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_atomic_fetch_add(p, &big, roff, 1, &r) == 0, "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "an atomic past what w mapped (%s): %s", how,
		      tern_strerror(ret));
	}
	CHECK(memcmp(ob, want, 8192) == 0, "the region changed");
	e->base = base;
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 4096, &r) == 0 &&
		      pump(&r, w, o) == 0,
	      "a write once the entry is honest again");
	CHECK(memcmp(ob + 4096, src, sizeof(src)) == 0, "its bytes");
	good_peer(o, "resize");
	printf("resize: an entry made longer or moved under its generation: "
	       "writes, reads and atomics past the mapping -TERN_EACCESS\n");
	tern_mr_close(omr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(want);
	return 0;
}

/* ---- serve: tern fill --listen answers CONNECTs naming a local victim */

#define SERVE_CONNECTS 200

/* A number from /proc/@pid/status's line @key (VmRSS: kB). */
static long proc_status(pid_t pid, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	CHECK(f != NULL, "%s", path);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			v = atol(line + strlen(key));
	fclose(f);
	return v;
}

static int nfds(pid_t pid)
{
	char *t = fd_table(pid);
	int n = 0;

	for (char *p = t; *p != '\0'; p++)
		n += *p == '\n';
	free(t);
	return n;
}

static int case_serve(void)
{
	const char *tern = getenv("TERN");
	char log[] = "/tmp/tern-fill-listen-XXXXXX", addr[128] = "", why[256];
	uint8_t vcard[TERN_CARD_MAX], *msg = malloc(FILL_MSG_MAX);
	uint8_t *want = malloc(MEM);
	struct tern_boot_info mine = { 0 }, theirs;
	struct fill_params good = { .page_size = 4096, .pages = 8, .seed = 9 };
	struct fill_report rep;
	struct fill_conn *conn;
	struct tern_mr_desc vd;
	struct tern_ctx *a;
	char *vfds_before, *vfds_after, *text = NULL;
	long rss0, rss1;
	int lfd, bfd, fd0, fd1, ret, good_pidfd, vn0, vn1;
	size_t vn;
	pid_t spid, victim;
	struct chan vc;

	CHECK(tern != NULL, "$TERN names no tern binary");
	CHECK(msg != NULL && want != NULL, "alloc");
	lfd = mkstemp(log);
	CHECK(lfd >= 0, "mkstemp");
	/* The victim: a tern process of our uid on this host. */
	victim = fork_child(&vc, owner_main);
	vn = get(vc.in, vcard, sizeof(vcard));
	get(vc.in, &vd, sizeof(vd));
	fill(want, MEM, 11);
	spid = fork();
	CHECK(spid >= 0, "fork");
	kid(spid);
	if (spid == 0) {
		dup2(lfd, 1);
		dup2(lfd, 2);
		const char *av[] = {
			tern,	       "fill",	     "--listen",
			"127.0.0.1:0", "--provider", g_prov,
			"--token",     "t0k",	     "--fill-timeout",
			"2000",	       "--node",     g_node,
			NULL
		};

		if (g_node == NULL)
			av[10] = NULL;
		execv(tern, (char **)av);
		_exit(127);
	}
	for (int i = 0; i < 200 && addr[0] == '\0'; i++) {
		char buf[4096], *p;
		ssize_t n = pread(lfd, buf, sizeof(buf) - 1, 0);

		buf[n > 0 ? n : 0] = '\0';
		p = strstr(buf, " (TCP bootstrap");
		if (p != NULL) {
			char *q = p;

			while (q > buf && q[-1] != ' ')
				q--;
			snprintf(addr, sizeof(addr), "%.*s", (int)(p - q), q);
		} else {
			usleep(50000);
		}
	}
	CHECK(addr[0] != '\0', "tern fill --listen did not start (log %s)",
	      log);
	/* A good client: the handshake, its ticket, a session. */
	a = open_ctx();
	mine.card_len = card_of(a, mine.card);
	ret = tern_boot_dial(addr, 5000, &bfd, why, sizeof(why));
	if (ret == 0)
		ret = tern_boot_hello(bfd, "t0k", &mine, &theirs, 5000, why,
				      sizeof(why));
	CHECK(ret == 0, "handshake: %s", why);
	ret = fill_conn_open_ticket(a, theirs.card, theirs.card_len,
				    theirs.ticket, theirs.ticket_len, 10000,
				    &conn, why, sizeof(why));
	CHECK(ret == 0, "a good client's CONNECT: %s", why);
	CHECK(fill_conn_fill(conn, &good, &rep) == 0, "a first fill: %s",
	      rep.error);
	vfds_before = fd_table_of(victim, 1);
	vn0 = nfds(victim);
	fd0 = nfds(spid);
	rss0 = proc_status(spid, "VmRSS:");
	/* CONNECTs with no ticket, each naming the victim's card: the
	 * server answers the card it names (over the fabric only). */
	for (int k = 0; k < SERVE_CONNECTS; k++) {
		ssize_t n = fill_connect_encode(msg, FILL_MSG_MAX,
						(uint64_t)k + 100, vcard, vn,
						fill_conn_regions(conn));

		CHECK(n > 0 && fill_conn_send_raw(conn, msg, (size_t)n) == 0,
		      "CONNECT %d", k);
		if (k % 20 == 19)
			for (int i = 0; i < 20; i++)
				tern_wait(a, NULL, 1);
	}
	for (int i = 0; i < 300; i++)
		tern_wait(a, NULL, 1);
	/* The good client is still served. */
	CHECK(fill_conn_fill(conn, &good, &rep) == 0 &&
		      rep.verified == 4096ull * 8,
	      "a fill after %d hostile CONNECTs: %s", SERVE_CONNECTS,
	      rep.error);
	fd1 = nfds(spid);
	rss1 = proc_status(spid, "VmRSS:");
	vfds_after = fd_table_of(victim, 1);
	vn1 = nfds(victim);
	/* Its sockets may change: over tcp the server's ERROR to the card's
	 * address is a connection to it (the fabric's, as any client's). */
	CHECK(strcmp(vfds_before, vfds_after) == 0,
	      "the victim's fd table changed:\n%s\nthen\n%s", vfds_before,
	      vfds_after);
	CHECK(!holds_pidfd(spid, victim),
	      "the server holds a pidfd of the victim");
	good_pidfd = holds_pidfd(spid, getpid());
	CHECK(owner_has(&vc, want), "the victim's memory changed");
	CHECK(fd1 <= fd0 + 2, "the server's fds went from %d to %d", fd0, fd1);
	CHECK(rss1 <= rss0 + 16384, "the server's RSS went from %ld to %ld kB",
	      rss0, rss1);
	fill_conn_close(conn);
	close(bfd);
	put(vc.out, "bye", 3);
	reap(victim);
	kill(spid, SIGINT);
	CHECK(waitpid(spid, &ret, 0) == spid && WIFEXITED(ret) &&
		      WEXITSTATUS(ret) == 0,
	      "tern fill --listen exited %#x", ret);
	{
		struct stat st;

		CHECK(fstat(lfd, &st) == 0, "fstat");
		text = calloc(1, (size_t)st.st_size + 1);
		CHECK(text != NULL && pread(lfd, text, (size_t)st.st_size, 0) ==
					      (ssize_t)st.st_size,
		      "read the server's log");
	}
	printf("--- server log\n%s---\n", text);
	CHECK(count(text, "ticket") >= 1,
	      "the server's log names no refusal for want of a ticket");
	CHECK(count(text, "same-host path") == 0,
	      "the server looked at the victim's same-host identity");
	printf("serve: %d CONNECTs without a ticket naming pid %d's card: "
	       "its memory and fds untouched, no pidfd of it in the server "
	       "(which holds one of its good client: %s); its fds %d -> %d "
	       "(sockets included); server fds %d -> %d, RSS %ld -> %ld kB; "
	       "a good client served\n",
	       SERVE_CONNECTS, (int)victim, good_pidfd ? "yes" : "no", vn0, vn1,
	       fd0, fd1, rss0, rss1);
	tern_ctx_close(a);
	close(lfd);
	unlink(log);
	free(text);
	free(msg);
	free(want);
	free(vfds_before);
	free(vfds_after);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
		{ "spoof", case_spoof },       { "forged", case_forged },
		{ "noregion", case_noregion }, { "unsealed", case_unsealed },
		{ "hol", case_hol },	       { "scribble", case_scribble },
		{ "silent", case_silent },     { "resize", case_resize },
		{ "stuck", case_stuck },       { "serve", case_serve },
	};
	const char *what;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'p')
			g_prov = optarg;
		else if (c == 'n')
			g_node = optarg;
		else
			return 2;
	}
	CHECK(optind < argc, "usage: local_hostile --provider P [--node A] "
			     "CASE");
	what = argv[optind];
	signal(SIGPIPE, SIG_IGN);
	g_main = getpid();
	atexit(kill_kids);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(what, cases[i].name) == 0) {
			int ret = cases[i].fn();

			if (ret == 0)
				printf("PASS local_hostile %s over %s\n", what,
				       g_prov);
			return ret;
		}
	}
	FAIL("unknown case %s", what);
	return 1;
}
