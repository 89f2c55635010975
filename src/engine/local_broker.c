/* SPDX-License-Identifier: MIT */
/*
 * The same-host path's fd broker (docs/local.md): where the kernel's
 * ptrace rule refuses pidfd_getfd() between processes of one uid (Yama
 * ptrace_scope >= 1, as on Ubuntu; seccomp in containers), a ctx hands
 * its fds over itself, to the peers it added and no one else.
 *
 * The owner's end is a thread on an abstract unix socket named by the
 * ctx's nonce (in its network namespace; nothing in the file system). It
 * serves many connections at once, each for at most LB_CONN_MS, and
 * before it reads a byte it asks the kernel who connected (SO_PEERCRED):
 * our uid, and a pid and start time our own peer table holds (a card we
 * added). It hands out only what its private table holds: its inbox,
 * read-only, and its eventfd; or a shared region's memfd to a caller
 * that shows the region's keys, read-only where the region takes no
 * remote writes, and only where the region is the whole memfd.
 *
 * The writer's end never waits: it connects without blocking, asks the
 * kernel who listens (the card's process, or it is not the broker), sends
 * its ask and reads the answer from a later progress pass.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "local_int.h"

#define LB_CONNS   16	/* connections served at once */
#define LB_CONN_MS 1000 /* the longest one may take */

static void broker_name(struct sockaddr_un *a, socklen_t *len, uint64_t nonce)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* Abstract: sun_path[0] is NUL; the name is not NUL-terminated. */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "tern-local-%016" PRIx64, nonce);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* ---- the owner's end ------------------------------------------------ */

/* A new file description of @fd open for reading only: what a peer may
 * map read-only and never writable. */
static int reopen_rdonly(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Which of our peers @cred is: its lpeer index, or -1. */
static int cred_peer(struct tern__local *l, const struct ucred *cred)
{
	int found = -1;
	uint64_t start;

	if (cred->uid != getuid() || cred->pid <= 0)
		return -1;
	start = tern__local_start_time(cred->pid);
	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < LPEER && found < 0; i++) {
		if (l->priv_peer[i].added &&
		    l->priv_peer[i].pid == (uint32_t)cred->pid &&
		    l->priv_peer[i].start == start)
			found = i;
	}
	pthread_mutex_unlock(&l->lock);
	return found;
}

/* Answer @req from peer entry @who: the fds to send (ours to close). */
static int broker_fds(struct tern__local *l, int who,
		      const struct tern__lb_req *req, int fds[2], int *nfds,
		      uint32_t *rdonly)
{
	int ret = 0;

	pthread_mutex_lock(&l->lock);
	if (l->priv_peer[who].nonce != req->nonce) {
		ret = -EPERM; /* another ctx of that process */
	} else if (req->what == TERN__LB_INBOX) {
		fds[0] = reopen_rdonly(l->fd);
		fds[1] = dup((int)l->id.wake_fd);
		*nfds = 2;
		if (fds[0] < 0 || fds[1] < 0)
			ret = -errno;
	} else {
		const struct lpriv_reg *r = &l->priv_reg[req->idx];

		if (!r->live || r->fd < 0)
			ret = -ENOENT;
		else if (r->keyhash !=
			 tern__lkeyhash(l->hdr->salt, req->nkeys, req->keys))
			ret = -EACCES;
		else if (!r->whole)
			ret = -ERANGE; /* never more than the region */
		if (ret == 0) {
			*rdonly = !(r->access & (TERN_ACCESS_REMOTE_WRITE |
						 TERN_ACCESS_REMOTE_ATOMIC));
			fds[0] = *rdonly ? reopen_rdonly(r->fd) : dup(r->fd);
			*nfds = 1;
			if (fds[0] < 0)
				ret = -errno;
		}
	}
	pthread_mutex_unlock(&l->lock);
	if (ret != 0) {
		for (int k = 0; k < *nfds; k++)
			if (fds[k] >= 0)
				close(fds[k]);
		*nfds = 0;
	}
	return ret;
}

static void broker_answer(int c, const struct tern__lb_ans *a, const int *fds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t msg[TERN__LB_ANS_LEN];
	struct iovec iov = { msg, sizeof(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (tern__lb_ans_pack(a, msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		return;
	if (a->nfds != 0) {
		struct cmsghdr *cm;

		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(a->nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(a->nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, a->nfds * sizeof(int));
	}
	(void)sendmsg(c, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* One request on connection @c from peer entry @who. */
static void broker_serve(struct tern__local *l, int c, int who)
{
	uint8_t buf[TERN__LB_REQ_MAX + 1];
	struct tern__lb_req req;
	struct tern__lb_ans a = { 0 };
	int fds[2] = { -1, -1 }, nfds = 0;
	char why[128];
	ssize_t n;

	n = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		return;
	if (tern__lb_req_parse(buf, (size_t)n, &req, why, sizeof(why)) != 0) {
		tern__debug("same-host fd broker: %s", why);
		a.status = -EPROTO;
	} else {
		a.what = req.what;
		a.status = broker_fds(l, who, &req, fds, &nfds, &a.rdonly);
	}
	a.nfds = (uint32_t)nfds;
	broker_answer(c, &a, fds);
	for (int k = 0; k < nfds; k++)
		close(fds[k]);
}

/* Close @c, dropping unread bytes first (a unix socket closed with data
 * unread resets its peer, which then never reads our answer). */
static void drop(int c)
{
	char junk[TERN__LB_REQ_MAX + 1];

	for (int k = 0; k < 4; k++) {
		if (recv(c, junk, sizeof(junk), MSG_DONTWAIT) <= 0)
			break;
	}
	close(c);
}

static void *broker_main(void *arg)
{
	struct tern__local *l = arg;
	struct {
		int fd, who;
		uint64_t deadline;
	} conn[LB_CONNS];
	int nconn = 0;

	for (;;) {
		struct pollfd pf[2 + LB_CONNS];
		uint64_t now;
		int n;

		pf[0] = (struct pollfd){ .fd = l->lsock, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = l->stop_fd, .events = POLLIN };
		for (int k = 0; k < nconn; k++)
			pf[2 + k] = (struct pollfd){ .fd = conn[k].fd,
						     .events = POLLIN };
		n = poll(pf, (nfds_t)(2 + nconn), nconn != 0 ? 100 : -1);
		if (n < 0 && errno != EINTR)
			break;
		if (pf[1].revents != 0)
			break;
		now = tern__now_ns();
		/* Served, hung up, or too slow: closed. */
		for (int k = nconn - 1; k >= 0; k--) {
			if (pf[2 + k].revents & POLLIN)
				broker_serve(l, conn[k].fd, conn[k].who);
			else if (pf[2 + k].revents == 0 &&
				 now < conn[k].deadline)
				continue;
			drop(conn[k].fd);
			conn[k] = conn[--nconn];
		}
		if (pf[0].revents & POLLIN) {
			struct ucred cred;
			socklen_t clen = sizeof(cred);
			int c = accept4(l->lsock, NULL, NULL,
					SOCK_CLOEXEC | SOCK_NONBLOCK);
			int who;

			if (c < 0) {
				if (errno == EMFILE || errno == ENFILE)
					usleep(10000);
				continue;
			}
			/* Who it is, before a byte is read. */
			who = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred,
					 &clen) == 0
				      ? cred_peer(l, &cred)
				      : -1;
			if (who < 0) {
				struct tern__lb_ans a = { .status = -EPERM };

				tern__debug(
					"same-host fd broker: pid %d of uid "
					"%u is not a peer of ours: refused",
					(int)cred.pid, (unsigned int)cred.uid);
				broker_answer(c, &a, NULL);
				drop(c);
				continue;
			}
			if (nconn == LB_CONNS) {
				/* The oldest goes: no one holds us all. */
				close(conn[0].fd);
				conn[0] = conn[--nconn];
			}
			conn[nconn].fd = c;
			conn[nconn].who = who;
			conn[nconn].deadline = now + (uint64_t)LB_CONN_MS *
							     1000000ULL;
			nconn++;
		}
	}
	for (int k = 0; k < nconn; k++)
		close(conn[k].fd);
	return NULL;
}

/* Does this process need a broker: $TERN_LOCAL_BROKER (0, 1; default:
 * where Yama restricts ptrace, or pidfd_getfd() fails even on ourselves,
 * as under a seccomp filter)? */
static int broker_wanted(void)
{
	long v = tern__env_long("TERN_LOCAL_BROKER", -1, -1, 1);
	char buf[8] = "";
	long pfd, fd;
	int yama;

	if (v >= 0)
		return (int)v;
	fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		yama = read((int)fd, buf, sizeof(buf) - 1) > 0 && buf[0] != '0';
		close((int)fd);
		if (yama)
			return 1;
	}
	pfd = tern__pidfd_open(getpid());
	if (pfd < 0)
		return 1;
	fd = tern__pidfd_getfd((int)pfd, (int)pfd);
	close((int)pfd);
	if (fd < 0)
		return 1;
	close((int)fd);
	return 0;
}

void tern__broker_start(struct tern__local *l)
{
	struct sockaddr_un a;
	socklen_t alen;

	l->lsock = -1;
	if (!broker_wanted())
		return;
	l->stop_fd = eventfd(0, EFD_CLOEXEC);
	l->lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	broker_name(&a, &alen, l->id.nonce);
	if (l->stop_fd < 0 || l->lsock < 0 ||
	    bind(l->lsock, (struct sockaddr *)&a, alen) != 0 ||
	    listen(l->lsock, 64) != 0 ||
	    pthread_create(&l->broker, NULL, broker_main, l) != 0) {
		tern__info("same-host path: no fd broker (%s): peers the "
			   "kernel's ptrace rule refuses go over the provider",
			   strerror(errno));
		if (l->lsock >= 0)
			close(l->lsock);
		if (l->stop_fd >= 0)
			close(l->stop_fd);
		l->lsock = l->stop_fd = -1;
		return;
	}
	tern__debug("same-host path: fd broker @%s", a.sun_path + 1);
}

void tern__broker_stop(struct tern__local *l)
{
	uint64_t one = 1;

	if (l->lsock < 0)
		return;
	if (write(l->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		shutdown(l->lsock, SHUT_RDWR);
	pthread_join(l->broker, NULL);
	close(l->lsock);
	close(l->stop_fd);
	l->lsock = l->stop_fd = -1;
}

/* ---- the writer's end ----------------------------------------------- */

void tern__broker_cancel(struct tern__local *l, struct tern__local_peer *lp)
{
	if (lp->bsock < 0)
		return;
	close(lp->bsock);
	lp->bsock = -1;
	l->nbroker--;
}

int tern__broker_ask(struct tern__local *l, struct tern__local_peer *lp,
		     uint32_t what, uint32_t idx, const uint64_t *keys,
		     uint32_t nkeys)
{
	struct tern__lb_req req = {
		.what = what, .idx = idx, .nonce = l->id.nonce, .nkeys = nkeys
	};
	uint8_t buf[TERN__LB_REQ_MAX];
	struct pollfd pf = { .fd = lp->pidfd, .events = POLLIN };
	struct sockaddr_un a;
	struct ucred cred;
	socklen_t alen, clen = sizeof(cred);
	ssize_t len;
	int s, ret;

	if (lp->bsock >= 0)
		return -EBUSY;
	if (nkeys > TERN__L_MAXKEYS)
		return -EINVAL;
	if (nkeys != 0)
		memcpy(req.keys, keys, nkeys * sizeof(*keys));
	len = tern__lb_req_pack(&req, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	broker_name(&a, &alen, lp->nonce);
	if (connect(s, (struct sockaddr *)&a, alen) != 0) {
		ret = -errno;
		goto err;
	}
	/* The listener must be the card's process (whoever else bound the
	 * name is not its broker), still alive (our pidfd holds it: its pid
	 * is not another's yet), under our uid. */
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
		ret = -errno;
		goto err;
	}
	if (cred.pid != lp->pid || cred.uid != getuid() ||
	    poll(&pf, 1, 0) != 0) {
		if (lp->btold++ == 0)
			tern__warn("same-host peer pid %d: the socket its "
				   "broker should listen on is held by pid %d "
				   "of uid %u: not its broker, not asked",
				   (int)lp->pid, (int)cred.pid,
				   (unsigned int)cred.uid);
		ret = -EADDRINUSE;
		goto err;
	}
	if (send(s, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) != len) {
		ret = errno != 0 ? -errno : -EIO;
		goto err;
	}
	lp->bsock = s;
	lp->bwhat = what;
	lp->bidx = idx;
	lp->bdeadline = tern__now_ns() + LBROKER_WAIT_NS;
	l->nbroker++;
	return 0;

err:
	close(s);
	return ret;
}

/* The fds of @mh's SCM_RIGHTS (at most @max; the rest closed). */
static int take_fds(struct msghdr *mh, int *fds, int max)
{
	int n = 0;

	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL;
	     cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0;
		     k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* The inbox could not be had from the broker: now (@ret), or later. */
static void inbox_failed(struct tern_ctx *ctx, struct tern__local_peer *lp,
			 int ret, const char *why)
{
	char buf[200];

	/* (A refusal may come as a reset: the broker closes at once.) */
	if (ret == -EPERM || ret == -EAGAIN || ret == -ECONNREFUSED ||
	    ret == -ETIMEDOUT || ret == -EADDRINUSE || ret == -ENOENT ||
	    ret == -ECONNRESET || ret == -EPIPE) {
		/* Not added by it yet, or its broker is busy: ask again,
		 * less and less often; the fabric meanwhile. */
		lp->bretry_ns = lp->bretry_ns == 0 ? LBROKER_RETRY_NS
						   : lp->bretry_ns * 2;
		if (lp->bretry_ns > LBROKER_RETRY_MAX_NS)
			lp->bretry_ns = LBROKER_RETRY_MAX_NS;
		lp->bretry_at = tern__now_ns() + lp->bretry_ns;
		tern__debug(
			"peer pid %d: its broker: %s (asked again in %" PRIu64
			" ms)",
			(int)lp->pid, why != NULL ? why : strerror(-ret),
			lp->bretry_ns / 1000000);
		return;
	}
	lp->refused = 1;
	snprintf(buf, sizeof(buf), "its fd broker: %s",
		 why != NULL ? why : strerror(-ret));
	tern__local_refuse(ctx, lp->pid, buf);
}

int tern__broker_poll(struct tern_ctx *ctx, struct tern__local_peer *lp)
{
	struct tern__local *l = ctx->local;
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t msg[TERN__LB_ANS_LEN + 1];
	struct iovec iov = { msg, sizeof(msg) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct tern__lb_ans a;
	int fds[2] = { -1, -1 }, n, ret;
	char why[200];
	ssize_t got;

	if (lp->bsock < 0) {
		/* Not attached yet: time to ask its broker again? */
		if (lp->broker && !lp->mapped && !lp->refused &&
		    tern__now_ns() >= lp->bretry_at) {
			ret = tern__broker_ask(l, lp, TERN__LB_INBOX, 0, NULL,
					       0);
			if (ret != 0)
				inbox_failed(ctx, lp, ret, NULL);
		}
		return lp->bsock >= 0;
	}
	got = recvmsg(lp->bsock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		if (tern__now_ns() < lp->bdeadline)
			return 1;
		errno = ETIMEDOUT;
	}
	ret = got < 0 ? -errno : 0;
	n = got >= 0 ? take_fds(&mh, fds, 2) : 0;
	tern__broker_cancel(l, lp);
	if (ret == 0 &&
	    (got == 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	     tern__lb_ans_parse(msg, (size_t)got, &a, why, sizeof(why)) != 0)) {
		if (got == 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
			snprintf(why, sizeof(why), "a malformed answer");
		ret = -EPROTO;
	} else if (ret == 0 && a.status != 0) {
		ret = a.status;
	} else if (ret == 0 && ((int)a.nfds != n || a.what != lp->bwhat ||
				(a.what == TERN__LB_INBOX) != (n == 2))) {
		snprintf(why, sizeof(why), "an answer of %d fds to ask %u", n,
			 lp->bwhat);
		ret = -EPROTO;
	}
	if (ret != 0) {
		for (int k = 0; k < n; k++)
			close(fds[k]);
		if (lp->bwhat == TERN__LB_INBOX)
			inbox_failed(ctx, lp, ret, ret == -EPROTO ? why : NULL);
		else
			lp->bfailed_gen[lp->bidx] = lp->bgen;
		return 0;
	}
	if (lp->bwhat == TERN__LB_INBOX) {
		if (tern__local_map_inbox(lp, fds[0], fds[1], lp->inbox_ino,
					  why, sizeof(why)) != 0) {
			lp->refused = 1;
			tern__local_refuse(ctx, lp->pid, why);
			return 0;
		}
		tern__local_attached(ctx, lp);
		return 0;
	}
	if (tern__local_map_region_fd(lp, (int)lp->bidx, lp->bgen, fds[0],
				      (int)a.rdonly) != 0)
		lp->bfailed_gen[lp->bidx] = lp->bgen;
	return 0;
}
