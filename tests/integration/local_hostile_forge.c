/* SPDX-License-Identifier: MIT */
/*
 * local_hostile's forged identities: spoof (a broker name bound by
 * another uid, or by another process of ours, for a process that never
 * used tern), forged (another process's same-host part in a card) and
 * unsealed (an inbox memfd a peer could shrink).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include <unistd.h>

#include <tern/tern.h>

#include "local_hostile_fixture.h"

#include "../../src/engine/local_int.h"
#include "../../src/wire/local.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* ---- spoof: a broker name bound by another uid ---------------------- */

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
	struct sockaddr_un a;
	socklen_t alen;
	int s, conns = 0, reqs = 0, inbox, efd;

	CHECK(!g_att_other_uid || (setgid(65534) == 0 && setuid(65534) == 0),
	      "setuid: %s", strerror(errno));
	inbox = fake_inbox(g_att_nonce, g_victim_pid, 1);
	efd = eventfd(0, EFD_CLOEXEC);
	alen = broker_addr(&a, g_att_nonce);
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

int case_spoof(void)
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

int case_forged(void)
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

int case_unsealed(void)
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
