/* SPDX-License-Identifier: MIT */
/*
 * The same-host path, the owner's side (docs/local.md): the inbox a ctx
 * publishes (src/wire/local.h), its regions, the peers it lets write to
 * it, and the immediates it reads from their rings.
 *
 * Memory ordering. A writer copies the bytes, stores the immediate in
 * its ring (in its own inbox) and publishes it with a release store of
 * the ring's tail; we read the tail with an acquire load before the
 * entry, count it, and store our head (in our inbox) with release: the
 * bytes happen-before the count, the count before the completion. Table
 * entries (regions, peers, rings) are seqlocks: odd while stable, read
 * between two equal loads. Revocation is a Dekker pair in sequential
 * consistency: the writer stores "copying into region i" in its ring
 * then loads the region's and its permission's generations; we store a
 * new generation then load the busy word of every ring pointed at us.
 * Sleeping is a Dekker pair too: we store "sleeping" then look at the
 * rings; a writer publishes, then loads "sleeping", and writes our
 * eventfd when set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_int.h"
#include "../hmem/shmem.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static int read_boot(uint8_t boot[16])
{
	char buf[64];
	unsigned int b;
	ssize_t n;
	int fd, j = 0;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 32)
		return -EIO;
	buf[n] = '\0';
	for (char *p = buf; *p != '\0' && j < 16; p++) {
		if (*p == '-')
			continue;
		if (sscanf(p, "%2x", &b) != 1)
			return -EIO;
		boot[j++] = (uint8_t)b;
		p++;
	}
	return j == 16 ? 0 : -EIO;
}

int tern__local_enabled(void)
{
	return tern__env_long("TERN_LOCAL", 1, 0, 1) != 0;
}

static uint64_t random64(void)
{
	uint64_t v = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
			v = 0;
		close(fd);
	}
	return v ^ tern__now_ns();
}

int tern__local_open(struct tern_ctx *ctx)
{
	struct tern__local *l;
	struct stat st;
	int ret;

	if (!tern__local_enabled())
		return 0;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->lsock = l->stop_fd = -1;
	ret = read_boot(l->id.boot);
	if (ret == 0 && stat("/proc/self/ns/user", &st) != 0)
		ret = -errno;
	if (ret != 0) {
		tern__info("same-host path off: no boot id or user namespace "
			   "to prove a peer is here (%s)",
			   strerror(-ret));
		free(l);
		return 0;
	}
	l->id.userns = (uint64_t)st.st_ino;
	l->id.uid = (uint32_t)getuid();
	l->id.pid = (uint32_t)getpid();
	l->id.start = tern__local_start_time(getpid());
	l->fd = memfd_create("tern-inbox", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (l->fd < 0 || ftruncate(l->fd, (off_t)TERN__L_SIZE) != 0 ||
	    fstat(l->fd, &st) != 0) {
		tern__info("same-host path off: inbox: %s", strerror(errno));
		goto err;
	}
	l->map = mmap(NULL, TERN__L_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		      l->fd, 0);
	if (l->map == MAP_FAILED) {
		tern__info("same-host path off: mapping the inbox: %s",
			   strerror(errno));
		goto err;
	}
	/* Ours to write alone from here on: peers map it read-only, and
	 * no one can shrink it under their mappings. */
	if (fcntl(l->fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
			  F_SEAL_SEAL) != 0) {
		tern__info("same-host path off: sealing the inbox: %s",
			   strerror(errno));
		munmap(l->map, TERN__L_SIZE);
		goto err;
	}
	l->hdr = tern__l_hdr(l->map);
	l->reg = tern__l_reg(l->map);
	l->cu = tern__l_cuda(l->map);
	l->lpeer = tern__l_peer(l->map);
	do {
		l->id.nonce = random64();
	} while (l->id.nonce == 0);
	l->hdr->magic = TERN__L_MAGIC;
	l->hdr->version = TERN__L_VERSION;
	l->hdr->nreg = LREG;
	l->hdr->npeer = LPEER;
	l->hdr->ring = LRING;
	l->hdr->self = (uint64_t)(uintptr_t)l->map;
	l->hdr->nonce = l->id.nonce;
	l->hdr->salt = random64();
	l->hdr->pid = l->id.pid;
	l->hdr->wake_fd = ctx->wakefd;
	for (unsigned int i = 0; i < LPEER; i++)
		atomic_store_explicit(&tern__l_out(l->map, i)->seq, 1,
				      memory_order_relaxed);
	l->id.inbox_fd = (uint32_t)l->fd;
	l->id.inbox_ino = (uint64_t)st.st_ino;
	l->id.wake_fd = (uint32_t)ctx->wakefd;
	pthread_mutex_init(&l->lock, NULL);
	tern__broker_start(l);
	ctx->local = l;
	return 0;

err:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return 0;
}

void tern__local_close(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;

	if (l == NULL)
		return;
	tern__broker_stop(l);
	for (int d = 0; d < LDEVS; d++) {
		const struct tern__cu *cu = tern__cu_get(NULL, 0);
		tern_cu_ctx cur = NULL;

		if (l->stream[d].s == NULL || cu == NULL)
			continue;
		/* Destroyed in its own context, as CUDA wants. */
		if (cu->CtxGetCurrent(&cur) == TERN_CU_SUCCESS &&
		    cu->CtxSetCurrent(l->stream[d].cctx) == TERN_CU_SUCCESS) {
			cu->StreamDestroy(l->stream[d].s);
			cu->CtxSetCurrent(cur);
		}
	}
	pthread_mutex_destroy(&l->lock);
	munmap(l->map, TERN__L_SIZE);
	close(l->fd);
	free(l);
	ctx->local = NULL;
}

const struct tern__card_local *tern__local_id(const struct tern_ctx *ctx)
{
	return ctx->local != NULL ? &ctx->local->id : NULL;
}

/* ---- regions ------------------------------------------------------- */

/* GPU region @mr in entry @i: its allocation's CUDA IPC handle, for a
 * peer to open. @return 0, or -1 (the fabric's: staged, or no IPC). */
static int cuda_export(struct tern__local *l, unsigned int i,
		       const struct tern_mr *mr)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	struct tern__lcuda *c = &l->cu[i];
	tern_cu_ptr abase = 0;
	tern_cu_ipc_handle h;
	tern_cu_result r;
	size_t alen = 0;

	if (cu == NULL || cu->IpcGetMemHandle == NULL ||
	    mr->path != TERN_MR_PATH_ZCOPY)
		return -1;
	r = cu->MemGetAddressRange(&abase, &alen,
				   (tern_cu_ptr)(uintptr_t)mr->buf);
	if (r == TERN_CU_SUCCESS)
		r = cu->IpcGetMemHandle(&h, abase);
	if (r != TERN_CU_SUCCESS || (uintptr_t)mr->buf < abase ||
	    (uintptr_t)mr->buf - abase > alen ||
	    mr->len > alen - ((uintptr_t)mr->buf - abase)) {
		tern__info("CUDA region at %p: no IPC handle (%s); same-host "
			   "peers reach it over the fabric",
			   mr->buf, tern__cu_errstr(cu, r));
		return -1;
	}
	_Static_assert(sizeof(c->handle) == TERN_CU_IPC_HANDLE_SIZE,
		       "an IPC handle fits lcuda");
	memcpy(c->handle, h.reserved, sizeof(c->handle));
	c->off = (uint64_t)((uintptr_t)mr->buf - abase);
	c->alen = alen;
	c->dev = mr->device;
	return 0;
}

void tern__local_mr_reg(struct tern_ctx *ctx, struct tern_mr *mr)
{
	struct tern__local *l = ctx->local;
	struct tern__lreg *e = NULL;
	uint64_t off = 0, ino = 0, g;
	struct tern_mr_desc d;
	struct stat st;
	int fd = -1, whole = 0;
	unsigned int i;

	mr->local_idx = -1;
	if (l == NULL ||
	    !(mr->access & (TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE |
			    TERN_ACCESS_REMOTE_ATOMIC)))
		return;
	for (i = 0; i < LREG; i++) {
		if (!(atomic_load_explicit(&l->reg[i].gen,
					   memory_order_relaxed) &
		      1)) {
			e = &l->reg[i];
			break;
		}
	}
	if (e == NULL) {
		tern__debug("same-host path: %d regions exported; this one "
			    "goes over the fabric only",
			    LREG);
		l->hdr->overflow = 1;
		return;
	}
	if (tern__shmem_find(mr->buf, mr->len, &fd, &off, &ino) != 0) {
		fd = -1;
		off = ino = 0;
	} else if (fstat(fd, &st) == 0 && off == 0 &&
		   ((mr->len + PAGE - 1) & ~(uint64_t)(PAGE - 1)) ==
			   (uint64_t)st.st_size) {
		whole = 1;
	}
	(void)tern_mr_desc(mr, &d);
	g = atomic_load_explicit(&e->gen, memory_order_relaxed);
	e->base = (uint64_t)(uintptr_t)mr->buf;
	e->len = mr->len;
	e->access = mr->access;
	e->keyhash = tern__lkeyhash(l->hdr->salt, d.nkeys, d.keys);
	e->shm_fd = fd;
	e->shm_off = off;
	e->shm_ino = ino;
	/* Exported even when only the fabric reaches it, so that a peer
	 * tells "not local" from "not registered" (closed). GPU memory
	 * goes by its IPC handle, written before the generation. */
	if (mr->hidden)
		e->flags = TERN__LREG_FABRIC;
	else if (mr->kind != TERN_MEM_HOST)
		e->flags = cuda_export(l, i, mr) == 0 ? TERN__LREG_CUDA
						      : TERN__LREG_FABRIC;
	else
		e->flags = 0;
	atomic_store_explicit(&e->gen, g + 1, memory_order_release);
	if (i + 1 > l->hdr->nused)
		l->hdr->nused = i + 1;
	mr->local_idx = (int)i;
	pthread_mutex_lock(&l->lock);
	l->priv_reg[i] = (struct lpriv_reg){
		.live = e->flags == 0 && fd >= 0,
		.fd = fd,
		.keyhash = e->keyhash,
		.access = mr->access,
		.whole = whole,
	};
	pthread_mutex_unlock(&l->lock);
}

void tern__local_mr_close(struct tern_ctx *ctx, struct tern_mr *mr)
{
	struct tern__local *l = ctx->local;
	struct tern__lreg *e;

	if (l == NULL || mr->local_idx < 0)
		return;
	pthread_mutex_lock(&l->lock);
	l->priv_reg[mr->local_idx].live = 0;
	l->priv_reg[mr->local_idx].fd = -1;
	pthread_mutex_unlock(&l->lock);
	e = &l->reg[mr->local_idx];
	/* Gone for every peer from here on (even: not live). */
	atomic_store_explicit(
		&e->gen,
		atomic_load_explicit(&e->gen, memory_order_relaxed) + 1,
		memory_order_seq_cst);
	/* A copy already under way finishes first. */
	for (unsigned int p = 0; p < LPEER; p++) {
		if (l->att[p] != NULL && l->att[p]->mapped &&
		    atomic_load_explicit(&l->lpeer[p].state,
					 memory_order_relaxed) ==
			    TERN__LPEER_LIVE)
			tern__local_wait_copies(l, l->att[p], mr->local_idx);
	}
	mr->local_idx = -1;
}

/* ---- the peers we let write to us ---------------------------------- */

static void lpeer_write(struct tern__local *l, int i, uint64_t nonce,
			uint32_t pid, uint64_t start, uint32_t state)
{
	struct tern__lpeer *e = &l->lpeer[i];
	uint64_t g = atomic_load_explicit(&e->gen, memory_order_relaxed);

	if (g & 1)
		atomic_store_explicit(&e->gen, ++g, memory_order_seq_cst);
	e->nonce = nonce;
	e->pid = pid;
	e->start = start;
	atomic_store_explicit(&e->state, state, memory_order_relaxed);
	atomic_store_explicit(&e->head, 0, memory_order_relaxed);
	if (state != 0)
		atomic_store_explicit(&e->gen, g + 1, memory_order_release);
	atomic_fetch_add_explicit(&l->hdr->peers_gen, 1, memory_order_release);
	pthread_mutex_lock(&l->lock);
	l->priv_peer[i] = (struct lpriv_peer){
		.pid = pid, .start = start, .nonce = nonce, .added = state != 0
	};
	pthread_mutex_unlock(&l->lock);
}

int tern__lpeer_publish(struct tern__local *l, struct tern__local_peer *lp)
{
	for (int i = 0; i < LPEER; i++) {
		if (l->att[i] != NULL ||
		    (atomic_load_explicit(&l->lpeer[i].gen,
					  memory_order_relaxed) &
		     1))
			continue;
		lpeer_write(l, i, lp->nonce, (uint32_t)lp->pid, lp->start,
			    TERN__LPEER_ADDED);
		l->att[i] = lp;
		lp->pidx = i;
		return 0;
	}
	return -EBUSY;
}

void tern__lpeer_state(struct tern__local *l, int pidx, uint32_t state)
{
	atomic_store_explicit(&l->lpeer[pidx].state, state,
			      memory_order_seq_cst);
	atomic_fetch_add_explicit(&l->hdr->peers_gen, 1, memory_order_release);
}

void tern__lpeer_unpublish(struct tern__local *l, int pidx)
{
	lpeer_write(l, pidx, 0, 0, 0, 0);
	l->att[pidx] = NULL;
}

/* ---- reading the rings pointed at us ------------------------------- */

/* @lp's ring to us (paired with our entry's generation), or -1. */
static int ring_find(const struct tern__local *l,
		     const struct tern__local_peer *lp, uint64_t cgen)
{
	for (int i = 0; i < LPEER; i++) {
		const struct tern__lout *o = tern__l_out(lp->ro, i);
		uint64_t s1 = atomic_load_explicit(&o->seq,
						   memory_order_acquire);

		if (!(s1 & 1) ||
		    atomic_load_explicit(&o->target, memory_order_relaxed) !=
			    l->id.nonce ||
		    atomic_load_explicit(&o->cgen, memory_order_relaxed) !=
			    cgen)
			continue;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&o->seq, memory_order_relaxed) == s1)
			return i;
	}
	return -1;
}

static void ring_broken(struct tern__local *l, struct tern__local_peer *lp,
			uint64_t head, uint64_t tail)
{
	lp->broken = 1;
	l->dropped++;
	/* Once per peer, never per pass. */
	tern__warn("same-host peer pid %d: its ring to us claims %" PRIu64
		   " entries after our %" PRIu64
		   " (at most %d): no longer read; its immediates are lost",
		   (int)lp->pid, tail, head, LRING);
}

/* Count what @lp's ring @ridx holds past @head, if it is still paired
 * with @cgen: the new head, or @head (nothing, or a ring not paired). */
static uint64_t ring_count(struct tern_ctx *ctx, struct tern__local_peer *lp,
			   int ridx, uint64_t cgen, uint64_t head)
{
	struct tern__local *l = ctx->local;
	const struct tern__lout *o = tern__l_out(lp->ro, ridx);
	uint64_t s1 = atomic_load_explicit(&o->seq, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&o->tail, memory_order_acquire);

	if (!(s1 & 1) ||
	    atomic_load_explicit(&o->target, memory_order_relaxed) !=
		    l->id.nonce ||
	    atomic_load_explicit(&o->cgen, memory_order_relaxed) != cgen ||
	    atomic_load_explicit(&o->seq, memory_order_acquire) != s1)
		return head;
	if (tern__lring_avail(head, tail) < 0) {
		ring_broken(l, lp, head, tail);
		return head;
	}
	for (; head != tail; head++)
		tern__imm_arrived(ctx, o->ring[head & (LRING - 1)], lp->src_id);
	return head;
}

void tern__local_drain_ring(struct tern_ctx *ctx, struct tern__local_peer *lp,
			    uint64_t cgen, uint64_t head)
{
	int ridx = lp->ridx >= 0 ? lp->ridx : ring_find(ctx->local, lp, cgen);

	if (ridx >= 0 && !lp->broken)
		(void)ring_count(ctx, lp, ridx, cgen, head);
}

void tern__local_read_ring(struct tern_ctx *ctx, struct tern__local_peer *lp)
{
	struct tern__local *l = ctx->local;
	struct tern__lpeer *me = &l->lpeer[lp->pidx];
	const struct tern__lout *o;
	uint64_t cgen, s1, tail, head;
	long n;

	if (!lp->mapped || lp->broken ||
	    atomic_load_explicit(&me->state, memory_order_relaxed) !=
		    TERN__LPEER_LIVE)
		return;
	cgen = atomic_load_explicit(&me->gen, memory_order_relaxed);
	if (lp->ridx < 0) {
		uint64_t og = atomic_load_explicit(&lp->hdr->out_gen,
						   memory_order_acquire);

		if (og == lp->seen_out_gen)
			return;
		lp->seen_out_gen = og;
		lp->ridx = ring_find(l, lp, cgen);
		if (lp->ridx < 0)
			return;
	}
	o = tern__l_out(lp->ro, lp->ridx);
	s1 = atomic_load_explicit(&o->seq, memory_order_acquire);
	tail = atomic_load_explicit(&o->tail, memory_order_acquire);
	if (!(s1 & 1) ||
	    atomic_load_explicit(&o->target, memory_order_relaxed) !=
		    l->id.nonce ||
	    atomic_load_explicit(&o->cgen, memory_order_relaxed) != cgen ||
	    atomic_load_explicit(&o->seq, memory_order_acquire) != s1) {
		lp->ridx = -1; /* given to another: look again */
		lp->seen_out_gen = 0;
		return;
	}
	head = atomic_load_explicit(&me->head, memory_order_relaxed);
	n = tern__lring_avail(head, tail);
	if (n < 0) {
		ring_broken(l, lp, head, tail);
		return;
	}
	if (head == tail)
		return; /* nothing new: our line stays as it is */
	for (; head != tail; head++)
		tern__imm_arrived(ctx, o->ring[head & (LRING - 1)], lp->src_id);
	atomic_store_explicit(&me->head, tail, memory_order_release);
}

void tern__local_wait_copies(struct tern__local *l, struct tern__local_peer *lp,
			     int reg)
{
	uint64_t deadline = tern__now_ns() + 1000000000ULL;

	for (int i = 0; i < LPEER; i++) {
		const struct tern__lout *o = tern__l_out(lp->ro, i);

		if (atomic_load_explicit(&o->target, memory_order_seq_cst) !=
		    l->id.nonce)
			continue;
		for (;;) {
			uint64_t b = atomic_load_explicit(&o->busy,
							  memory_order_seq_cst);
			struct pollfd pf = { .fd = lp->pidfd,
					     .events = POLLIN };

			if (b == 0 || (reg >= 0 && b != (uint64_t)reg + 1))
				break;
			/* A writer killed mid-copy copies no more. */
			if (poll(&pf, 1, 0) == 1)
				break;
			if (tern__now_ns() > deadline) {
				/* Hung, or hostile: it writes to us no
				 * more (its entry is no longer live); a
				 * copy of its own may still land. */
				tern__warn("same-host peer pid %d was still "
					   "copying into region %" PRIu64
					   " after 1 s: going on, and it goes "
					   "over the provider from now on",
					   (int)lp->pid, b - 1);
				lpeer_write(l, lp->pidx, lp->nonce,
					    (uint32_t)lp->pid, lp->start,
					    TERN__LPEER_ADDED);
				return;
			}
			sched_yield();
		}
	}
}

/* ---- the owner's progress ------------------------------------------ */

void *tern__local_ev(struct tern_ctx *ctx)
{
	return &ctx->local;
}

void tern__local_exited(struct tern_ctx *ctx)
{
	if (ctx->local != NULL)
		ctx->local->exited = 1;
}

/* Attachments whose process has ended (their pidfd is readable): what
 * they wrote last is read, then their peers are gone, as a world says
 * of a dead rank (queued operations and expectations from them fail
 * -TERN_EPEERGONE), and the attachment's fds and mappings are let go;
 * the caller still removes the peers. */
static void sweep_exited(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;

	for (int i = 0; i < LPEER; i++) {
		struct tern__local_peer *lp = l->att[i];
		struct pollfd pf;

		if (lp == NULL)
			continue;
		pf = (struct pollfd){ .fd = lp->pidfd, .events = POLLIN };
		if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLIN))
			continue;
		tern__info("peer pid %d on the same-host path: its process "
			   "ended",
			   (int)lp->pid);
		tern__local_read_ring(ctx, lp);
		/* Every peer on it: each lets its reference go. */
		for (struct tern_peer *p = ctx->peers, *next; p != NULL;
		     p = next) {
			next = p->next;
			if (p->local != lp || p->removed)
				continue;
			if (!p->gone)
				tern__peer_gone(p);
			tern__local_peer_release(ctx, p);
		}
	}
}

int tern__local_poll(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;
	int n = 0;

	/* Peers that ended: when the loop saw a pidfd fire, and once a
	 * second or so for loops that never sleep. */
	if (tern_unlikely(l->exited) ||
	    tern_unlikely((++l->ticks & 255) == 0 &&
			  tern__now_ns() >= l->next_sweep)) {
		l->exited = 0;
		l->next_sweep = tern__now_ns() + 1000000000ULL;
		sweep_exited(ctx);
	}
	/* Awake (tern_ctx_arm() may have left it set): no more wake-ups. */
	if (atomic_load_explicit(&l->hdr->sleeping, memory_order_relaxed))
		atomic_store_explicit(&l->hdr->sleeping, 0,
				      memory_order_relaxed);
	for (int i = 0; i < LPEER; i++) {
		struct tern__local_peer *lp = l->att[i];

		if (lp == NULL)
			continue;
		if (tern_unlikely(lp->bsock >= 0 || !lp->mapped))
			(void)tern__broker_poll(ctx, lp);
		if (lp->mapped) {
			uint64_t before = atomic_load_explicit(
				&l->lpeer[i].head, memory_order_relaxed);

			tern__local_read_ring(ctx, lp);
			n += (int)(atomic_load_explicit(&l->lpeer[i].head,
							memory_order_relaxed) -
				   before);
		}
	}
	return n;
}

int tern__local_pending(const struct tern_ctx *ctx)
{
	const struct tern__local *l = ctx->local;

	if (l->nqueued != 0 || l->nbroker != 0)
		return 1;
	for (int i = 0; i < LPEER; i++) {
		const struct tern__local_peer *lp = l->att[i];
		const struct tern__lout *o;

		if (lp == NULL || !lp->mapped || lp->broken)
			continue;
		if (lp->ridx < 0) {
			if (atomic_load_explicit(&lp->hdr->out_gen,
						 memory_order_seq_cst) !=
			    lp->seen_out_gen)
				return 1;
			continue;
		}
		o = tern__l_out(lp->ro, lp->ridx);
		if (atomic_load_explicit(&o->tail, memory_order_seq_cst) !=
		    atomic_load_explicit(&l->lpeer[i].head,
					 memory_order_relaxed))
			return 1;
	}
	return 0;
}

int tern__local_sleep(struct tern_ctx *ctx, int on)
{
	struct tern__local *l = ctx->local;

	atomic_store_explicit(&l->hdr->sleeping, (uint32_t)on,
			      memory_order_seq_cst);
	return on ? tern__local_pending(ctx) : 0;
}
