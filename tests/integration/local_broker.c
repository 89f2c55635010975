/* SPDX-License-Identifier: MIT */
/*
 * local's fd broker case: scmuid (the broker refuses a process of
 * another uid, an asker it did not add, a bad request, wrong keys and a
 * region that is not shared memory, or is part of one), and the ask the
 * scm and scmuid children make of it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_cases.h"

#include "../../src/wire/local.h"

struct tern_ctx *g_owner;

/*
 * Ask the broker of the ctx of nonce @owner, as the ctx of nonce @me, for
 * @what (@idx, showing @d's keys) and wait for its answer: the number of
 * fds it sent (in @fds, at most 2; @rdonly_p says how), or -errno: its
 * status, -ECONNREFUSED (no broker).
 */
int ask_broker(uint64_t owner, uint64_t me, uint32_t what, uint32_t idx,
	       const struct tern_mr_desc *d, int *fds, uint32_t *rdonly_p)
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
	struct tern__lb_ans an;
	struct pollfd pf;
	char why[128];
	ssize_t len, got;
	int s, n = 0;

	if (d != NULL) {
		req.nkeys = d->nkeys;
		memcpy(req.keys, d->keys, d->nkeys * sizeof(d->keys[0]));
	}
	len = tern__lb_req_pack(&req, buf, sizeof(buf));
	CHECK(len > 0, "pack a broker request");
	s = broker_connect(owner);
	if (s < 0)
		return -errno;
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

/* The parent's broker answers only the peers it added, with only what
 * its own table holds: a process of another uid is refused before it is
 * heard, and so are an asker it did not add, a bad entry, a request it
 * does not know, wrong keys, a region that is not shared memory, and a
 * region that is part of its memfd; a read-only region's memfd cannot be
 * mapped writable. */
int case_scmuid(void)
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
