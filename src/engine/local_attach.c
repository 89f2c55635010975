/* SPDX-License-Identifier: MIT */
/*
 * The same-host path: attaching to a peer's inbox, and proving who the
 * peer is before anything of it is touched (docs/local.md, "Trust").
 *
 * A card is a claim. Its same-host part names a process (pid and start
 * time) and where that process keeps its inbox; tern believes none of it
 * until the kernel has said so:
 *   - pidfd_open() of the pid, then its start time and its /proc owner
 *     read: the process is the card's, runs under our uid, and the pidfd
 *     holds it from here on (a pid reused later is another process);
 *   - the inbox fd taken from that process's fd table (pidfd_getfd(),
 *     which applies the kernel's ptrace rule), or handed over by a broker
 *     whose socket that very process listens on (SO_PEERCRED);
 *   - the inbox sealed so that only its owner writes it and no one
 *     shrinks it, its header naming the card's ctx and process.
 * And the owner must agree: a writer uses the path only once the owner's
 * own table lists it (the owner added a card naming this process, and
 * proved it the same way); until then, and for good when anything above
 * fails, the fabric takes the peer's operations, with the keys its
 * descriptors carry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "local_int.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* Start time of @pid (clock ticks after boot), 0 when unknown. */
uint64_t tern__local_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	if (p == NULL)
		return 0;
	/* Fields after the name: state is 3rd, starttime the 22nd. */
	for (int field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &v) != 1)
		return 0;
	return v;
}

static int proc_uid(pid_t pid, uid_t *uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) != 0)
		return -errno;
	*uid = st.st_uid;
	return 0;
}

/* Is @fd an eventfd (what a wake fd must be: 8 bytes written to anything
 * else would land in the owner's file, pipe or socket)? */
static int is_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

void tern__local_refuse(struct tern_ctx *ctx, pid_t pid, const char *why)
{
	if (ctx->local->told++ == 0)
		tern__warn("peer pid %d on this host: same-host path refused "
			   "(%s); it goes over %s (said once per ctx)",
			   (int)pid, why, ctx->caps.prov_name);
	else
		tern__debug("peer pid %d: same-host path refused (%s)",
			    (int)pid, why);
}

/* Take @fd (the peer's inbox, ours to close) and @wake_fd (its eventfd,
 * kept on success) after checking them against the card: @return 0, or
 * -1 with the reason in @why. */
int tern__local_map_inbox(struct tern__local_peer *lp, int fd, int wake_fd,
			  uint64_t ino, char *why, size_t whylen)
{
	const struct tern__lhdr *h;
	const char *bad;
	struct stat st;
	int seals;
	void *p;

	seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != ino) {
		snprintf(why, whylen,
			 "its inbox is not the one its card names");
		goto err;
	}
	/* Sealed against shrinking (a mapping we read must stay there)
	 * and against writes by anyone but its owner's own mapping. */
	if (seals < 0 ||
	    (seals & (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE)) !=
		    (F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE) ||
	    (uint64_t)st.st_size < TERN__L_SIZE) {
		snprintf(why, whylen,
			 "its inbox is not sealed against shrinking and "
			 "writes (seals 0x%x, %lld bytes)",
			 seals, (long long)st.st_size);
		goto err;
	}
	p = mmap(NULL, TERN__L_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(why, whylen, "mapping its inbox: %s", strerror(errno));
		goto err;
	}
	h = tern__l_hdr((const uint8_t *)p);
	bad = tern__lhdr_check(h);
	if (bad == NULL &&
	    (h->nonce != lp->nonce || h->pid != (uint32_t)lp->pid))
		bad = "its inbox names another ctx or process than its card";
	if (bad == NULL && (wake_fd < 0 || !is_eventfd(wake_fd)))
		bad = "its wake fd is not an eventfd";
	if (bad != NULL) {
		snprintf(why, whylen, "%s", bad);
		munmap(p, TERN__L_SIZE);
		goto err;
	}
	close(fd);
	lp->ro = p;
	lp->hdr = h;
	lp->reg = tern__l_reg(lp->ro);
	lp->cu = tern__l_cuda(lp->ro);
	lp->peers = tern__l_peer(lp->ro);
	lp->wake_fd = wake_fd;
	lp->seen_out_gen = 0;
	return 0;

err:
	close(fd);
	if (wake_fd >= 0)
		close(wake_fd);
	return -1;
}

/* After the inbox is mapped: cross-memory attach probed, the peer let
 * write to us (our entry LIVE: its ring and busy words are in view). */
void tern__local_attached(struct tern_ctx *ctx, struct tern__local_peer *lp)
{
	uint64_t v;
	struct iovec li = { &v, sizeof(v) };
	struct iovec ri = { (void *)(uintptr_t)lp->hdr->self, sizeof(v) };

	lp->mapped = 1;
	lp->cma = 1;
	if (process_vm_readv(lp->pid, &li, 1, &ri, 1, 0) !=
		    (ssize_t)sizeof(v) ||
	    v != *(const uint64_t *)(const void *)lp->hdr) {
		lp->cma = 0;
		tern__info(
			"peer pid %d: cross-memory attach refused (%s): only "
			"its shared regions are local",
			(int)lp->pid, strerror(errno));
	}
	tern__lpeer_state(ctx->local, lp->pidx, TERN__LPEER_LIVE);
	tern__debug("peer pid %d: same-host path (entry %d)", (int)lp->pid,
		    lp->pidx);
}

/* Ask the kernel for the inbox, or its broker; @return 0 (mapped, or an
 * ask under way), or -1 (refused for good: @why). */
static int attach(struct tern_ctx *ctx, struct tern__local_peer *lp,
		  const struct tern__card_local *c, char *why, size_t whylen)
{
	long fd, wfd;
	int err;

	fd = tern__pidfd_getfd(lp->pidfd, (int)c->inbox_fd);
	if (fd >= 0) {
		/* The wake fd's number comes from the inbox once checked;
		 * the card's is only a hint of where to look first. */
		struct stat st;
		const struct tern__lhdr *h;
		void *p;

		if (fstat((int)fd, &st) != 0 ||
		    (uint64_t)st.st_ino != c->inbox_ino ||
		    (uint64_t)st.st_size < TERN__L_SIZE) {
			close((int)fd);
			snprintf(why, whylen,
				 "its inbox is not the one its card names");
			return -1;
		}
		p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, (int)fd, 0);
		if (p == MAP_FAILED) {
			close((int)fd);
			snprintf(why, whylen, "mapping its inbox: %s",
				 strerror(errno));
			return -1;
		}
		h = tern__l_hdr((const uint8_t *)p);
		wfd = tern__lhdr_check(h) == NULL
			      ? tern__pidfd_getfd(lp->pidfd, h->wake_fd)
			      : -1;
		munmap(p, PAGE);
		if (tern__local_map_inbox(lp, (int)fd, (int)wfd, c->inbox_ino,
					  why, whylen) != 0)
			return -1;
		tern__local_attached(ctx, lp);
		return 0;
	}
	err = errno;
	/* The kernel's ptrace rule (Yama ptrace_scope, a container): its
	 * owner's broker, asked without waiting (now, and again while it
	 * has not added us); the answer comes to a progress pass. */
	lp->broker = 1;
	tern__debug("peer pid %d: pidfd_getfd refused (%s); asking its fd "
		    "broker",
		    (int)lp->pid, strerror(err));
	(void)tern__broker_poll(ctx, lp);
	if (lp->refused) {
		snprintf(why, whylen,
			 "pidfd_getfd: %s (the kernel's ptrace rule: Yama "
			 "ptrace_scope, a container), and its fd broker",
			 strerror(err));
		return -1;
	}
	return 0;
}

/* Why @c's maker cannot have the local path with @ctx, or NULL. */
static const char *not_here(const struct tern_ctx *ctx,
			    const struct tern__card_local *c)
{
	const struct tern__card_local *me = &ctx->local->id;

	if (memcmp(c->boot, me->boot, sizeof(me->boot)) != 0)
		return NULL; /* another host (or boot): not a refusal */
	if (c->userns != me->userns)
		return "another user namespace";
	if (c->uid != me->uid)
		return "another uid";
	if (c->nonce == me->nonce)
		return "our own card";
	return "";
}

/* An attachment to the ctx of nonce @nonce we hold already. */
static struct tern__local_peer *att_find(struct tern__local *l, uint64_t nonce)
{
	for (int i = 0; i < LPEER; i++) {
		if (l->att[i] != NULL && l->att[i]->nonce == nonce)
			return l->att[i];
	}
	return NULL;
}

void tern__local_peer_add(struct tern_ctx *ctx, struct tern_peer *peer,
			  const struct tern__card_local *c)
{
	struct tern__local_peer *lp;
	const char *why;
	char whybuf[200];
	uid_t uid = 0;
	long fd;

	peer->local = NULL;
	peer->local_nonce = 0;
	if (ctx->local == NULL || c == NULL || peer->fabric_only)
		return;
	why = not_here(ctx, c);
	if (why == NULL)
		return;
	if (*why != '\0') {
		tern__local_refuse(ctx, (pid_t)c->pid, why);
		return;
	}
	lp = att_find(ctx->local, c->nonce);
	if (lp != NULL) {
		/* Another card naming the same ctx: the same process, and
		 * the same peer (one source), or the fabric. */
		if (lp->pid != (pid_t)c->pid || lp->start != c->start ||
		    lp->src_id != peer->src_id) {
			tern__local_refuse(ctx, (pid_t)c->pid,
					   "another card names the same "
					   "same-host ctx");
			return;
		}
		lp->refs++;
		peer->local = lp;
		peer->local_nonce = c->nonce;
		return;
	}
	lp = calloc(1, sizeof(*lp));
	if (lp == NULL)
		return;
	lp->ctx = ctx;
	lp->refs = 1;
	lp->src_id = peer->src_id;
	lp->pidfd = lp->wake_fd = lp->bsock = -1;
	lp->pidx = lp->cidx = lp->oidx = lp->ridx = -1;
	lp->pid = (pid_t)c->pid;
	lp->start = c->start;
	lp->nonce = c->nonce;
	lp->inbox_ino = c->inbox_ino;
	if (c->pid == 0 || c->pid > INT32_MAX) {
		why = "a bad pid";
		goto refused;
	}
	fd = tern__pidfd_open(lp->pid);
	if (fd < 0) {
		snprintf(whybuf, sizeof(whybuf), "pidfd_open: %s",
			 strerror(errno));
		why = whybuf;
		goto refused;
	}
	lp->pidfd = (int)fd;
	/* Checked after the pidfd is held: a pid reused since the card
	 * was made shows another start time. */
	if (c->start == 0 || tern__local_start_time(lp->pid) != c->start) {
		why = "its process is gone (pid reused)";
		goto refused;
	}
	if (proc_uid(lp->pid, &uid) != 0 || uid != getuid()) {
		why = "its process runs under another uid";
		goto refused;
	}
	if (tern__lpeer_publish(ctx->local, lp) != 0) {
		why = "64 same-host peers attached already";
		goto refused;
	}
	if (attach(ctx, lp, c, whybuf, sizeof(whybuf)) != 0) {
		why = whybuf;
		tern__lpeer_unpublish(ctx->local, lp->pidx);
		goto refused;
	}
	peer->local = lp;
	peer->local_nonce = c->nonce;
	/* Its pidfd turns readable when its process ends: the loop wakes
	 * (once) and the next pass lets its attachment go. */
	if (ctx->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
					  .data.ptr = tern__local_ev(ctx) };

		(void)epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, lp->pidfd, &ev);
	}
	return;

refused:
	tern__local_refuse(ctx, lp->pid, why);
	if (lp->pidfd >= 0)
		close(lp->pidfd);
	free(lp);
}

/* Let our outgoing ring to @lp go (it stays readable as it is: what we
 * wrote last is read before another peer gets it). */
static void out_put(struct tern__local *l, struct tern__local_peer *lp)
{
	if (lp->oidx < 0)
		return;
	if (--l->out_refs[lp->oidx] == 0)
		l->out_released[lp->oidx] = tern__now_ns();
	lp->oidx = -1;
}

void tern__local_peer_put(struct tern_ctx *ctx, struct tern__local_peer *lp)
{
	struct tern__local *l = ctx->local;

	if (--lp->refs != 0)
		return;
	/* It may no longer write to us: then no copy of its is under way,
	 * and what it wrote before is read one last time (its immediates
	 * count, as they would over the fabric after a removal). */
	if (lp->pidx >= 0) {
		uint64_t cgen = atomic_load_explicit(&l->lpeer[lp->pidx].gen,
						     memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&l->lpeer[lp->pidx].head,
						     memory_order_relaxed);
		int live = atomic_load_explicit(&l->lpeer[lp->pidx].state,
						memory_order_relaxed) ==
			   TERN__LPEER_LIVE;

		tern__lpeer_unpublish(l, lp->pidx);
		if (lp->mapped && live) {
			tern__local_wait_copies(l, lp, -1);
			tern__local_drain_ring(ctx, lp, cgen, head);
		}
	}
	tern__broker_cancel(l, lp);
	out_put(l, lp);
	tern__local_maps_drop(lp);
	if (lp->ro != NULL)
		munmap((void *)(uintptr_t)lp->ro, TERN__L_SIZE);
	if (lp->wake_fd >= 0)
		close(lp->wake_fd);
	if (lp->pidfd >= 0)
		close(lp->pidfd);
	free(lp);
}

void tern__local_peer_release(struct tern_ctx *ctx, struct tern_peer *peer)
{
	if (peer->local != NULL && ctx->local != NULL)
		tern__local_peer_put(ctx, peer->local);
	peer->local = NULL;
}
