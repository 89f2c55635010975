/* SPDX-License-Identifier: MIT */
/*
 * The same-host path: what a writer reads of a peer's inbox before it
 * copies (docs/local.md). Whether the peer's table lets us write to it,
 * our outgoing ring to it, which of its regions holds a range, and those
 * regions mapped here (shared memory, a memfd from its broker, a GPU
 * region's CUDA IPC handle). local_copy.c checks and copies with them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_int.h"

#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

/* ---- mappings of the peer's regions -------------------------------- */

static void lmap_drop(struct lmap *m)
{
	if (m->map != NULL)
		munmap(m->map, m->maplen);
	if (m->dptr != 0) {
		const struct tern__cu *cu = tern__cu_get(NULL, 0);

		if (cu != NULL && tern__cu_ctx_ensure(cu, m->dev) == 0)
			cu->IpcCloseMemHandle(m->dptr);
	}
	memset(m, 0, sizeof(*m));
}

void tern__local_maps_drop(struct tern__local_peer *lp)
{
	for (unsigned int i = 0; i < LREG; i++)
		lmap_drop(&lp->maps[i]);
}

/* Open GPU region @i (generation @gen) by its CUDA IPC handle, once:
 * the region's first byte as a device pointer here, or NULL (no CUDA
 * here, or the handle refused: the fabric takes it). In the owner's own
 * process its pointer is ours already (CUDA refuses to open a handle
 * there). */
static uint8_t *cuda_map(struct tern__local_peer *lp, int i, uint64_t gen,
			 uint64_t base, uint64_t len)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	const struct tern__lcuda *c = &lp->cu[i];
	struct lmap *m = &lp->maps[i];
	tern_cu_ipc_handle h;
	tern_cu_ptr p = 0;
	tern_cu_result r;
	uint64_t off, alen;
	int dev;

	memcpy(h.reserved, c->handle, sizeof(h.reserved));
	off = c->off;
	alen = c->alen;
	dev = c->dev;
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&lp->reg[i].gen, memory_order_relaxed) !=
		    gen ||
	    cu == NULL || off > alen || len > alen - off)
		return NULL;
	/* Opened in the owner's device's context where we see that device
	 * (the same numbering both sides: CUDA_VISIBLE_DEVICES), else the
	 * first; peer access comes with it (NVLink where present). */
	if (dev < 0 || dev >= cu->ndev)
		dev = 0;
	if (lp->pid == getpid()) {
		m->ptr = (uint8_t *)(uintptr_t)base;
	} else {
		if (cu->IpcOpenMemHandle == NULL ||
		    tern__cu_ctx_ensure(cu, dev) != 0)
			return NULL;
		r = cu->IpcOpenMemHandle(&p, h, TERN_CU_IPC_LAZY_PEER);
		if (r != TERN_CU_SUCCESS) {
			tern__info(
				"peer pid %d: opening the CUDA IPC handle of "
				"its region at 0x%" PRIx64
				": %s; the fabric takes it",
				(int)lp->pid, base, tern__cu_errstr(cu, r));
			return NULL;
		}
		m->dptr = p;
		m->ptr = (uint8_t *)(uintptr_t)(p + off);
	}
	m->cuda = 1;
	m->dev = dev;
	m->gen = gen;
	m->base = base;
	m->len = len;
	return m->ptr;
}

/* Map @fd (the memfd of region @i, generation @gen; ours to close) after
 * checking it is the one the entry names, whole and sealed. */
int tern__local_map_region_fd(struct tern__local_peer *lp, int i, uint64_t gen,
			      int fd, int rdonly)
{
	const struct tern__lreg *e = &lp->reg[i];
	struct lmap *m = &lp->maps[i];
	uint64_t off, ino, len, base;
	struct stat st;
	int seals;
	void *p;

	off = e->shm_off;
	ino = e->shm_ino;
	len = e->len;
	base = e->base;
	atomic_thread_fence(memory_order_acquire);
	seals = fcntl(fd, F_GET_SEALS);
	if (atomic_load_explicit(&e->gen, memory_order_relaxed) != gen ||
	    fstat(fd, &st) != 0 || (uint64_t)st.st_ino != ino ||
	    off > (uint64_t)st.st_size || len > (uint64_t)st.st_size - off ||
	    seals < 0 || !(seals & F_SEAL_SHRINK)) {
		/* Not the entry's, or it could shrink under us (SIGBUS). */
		close(fd);
		return -1;
	}
	if (m->ptr != NULL)
		lmap_drop(m);
	/* Map from the page holding the region's first byte. */
	m->maplen = (size_t)(len + (off & (PAGE - 1)));
	p = mmap(NULL, m->maplen, rdonly ? PROT_READ : PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, (off_t)(off & ~(uint64_t)(PAGE - 1)));
	close(fd);
	if (p == MAP_FAILED) {
		memset(m, 0, sizeof(*m));
		return -1;
	}
	m->map = p;
	m->ptr = (uint8_t *)p + (off & (PAGE - 1));
	m->gen = gen;
	m->base = base;
	m->len = len;
	m->rdonly = rdonly;
	return 0;
}

/* Region @i (generation @gen) mapped here when it is shared memory or
 * GPU memory with an IPC handle: its base (for GPU memory a device
 * pointer: lp->maps[i].cuda), or NULL (cross-memory attach, or not yet:
 * its broker is asked, and the fabric takes this one). */
uint8_t *tern__local_region_map(struct tern__local *l,
				struct tern__local_peer *lp, int i,
				uint64_t gen, const struct tern_mr_desc *rd)
{
	const struct tern__lreg *e = &lp->reg[i];
	struct lmap *m = &lp->maps[i];
	uint64_t ino, len, base;
	uint32_t flags;
	int32_t sfd;
	long fd;

	if (m->gen == gen && m->ptr != NULL)
		return m->ptr;
	ino = e->shm_ino;
	len = e->len;
	base = e->base;
	sfd = e->shm_fd;
	flags = e->flags;
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->gen, memory_order_relaxed) != gen)
		return NULL;
	if (m->ptr != NULL) /* an older region's (closed since) */
		lmap_drop(m);
	if (flags & TERN__LREG_CUDA)
		return cuda_map(lp, i, gen, base, len);
	if (ino == 0 || sfd < 0)
		return NULL;
	if (!lp->broker) {
		fd = tern__pidfd_getfd(lp->pidfd, sfd);
		if (fd < 0 ||
		    tern__local_map_region_fd(lp, i, gen, (int)fd, 0) != 0)
			return NULL;
		return m->ptr;
	}
	/* From its broker, showing the keys; never waited for here. */
	if (lp->bfailed_gen[i] != gen && lp->bsock < 0 && rd != NULL &&
	    tern__broker_ask(l, lp, TERN__LB_REGION, (uint32_t)i, rd->keys,
			     rd->nkeys) == 0)
		lp->bgen = gen;
	return NULL;
}

/* ---- the peer's table ----------------------------------------------- */

/* Does @lp let us write to it (its table lists this process and ctx,
 * proved by the kernel, with our ring mapped)? Our entry is cached
 * (index, generation) and looked for again when its table changed. */
int tern__local_allowed(const struct tern__local *l,
			struct tern__local_peer *lp)
{
	uint64_t pg;

	if (lp->cidx >= 0) {
		const struct tern__lpeer *e = &lp->peers[lp->cidx];

		if (atomic_load_explicit(&e->gen, memory_order_acquire) ==
			    lp->cgen &&
		    atomic_load_explicit(&e->state, memory_order_relaxed) ==
			    TERN__LPEER_LIVE)
			return 1;
		lp->cidx = -1;
		lp->seen_peers_gen = 0;
	}
	pg = atomic_load_explicit(&lp->hdr->peers_gen, memory_order_acquire);
	if (pg == lp->seen_peers_gen)
		return 0;
	lp->seen_peers_gen = pg;
	for (int i = 0; i < LPEER; i++) {
		const struct tern__lpeer *e = &lp->peers[i];
		uint64_t g = atomic_load_explicit(&e->gen,
						  memory_order_acquire);
		int ok = (g & 1) && e->nonce == l->id.nonce &&
			 e->pid == l->id.pid && e->start == l->id.start &&
			 atomic_load_explicit(&e->state,
					      memory_order_relaxed) ==
				 TERN__LPEER_LIVE;

		atomic_thread_fence(memory_order_acquire);
		if (ok &&
		    atomic_load_explicit(&e->gen, memory_order_relaxed) == g) {
			lp->cidx = i;
			lp->cgen = g;
			return 1;
		}
	}
	return 0;
}

/* Our outgoing ring to @lp, paired with its entry for us: the one we
 * gave it before (its tail goes on), else a free one, else the one let
 * go longest ago, its tail set to the peer's head. */
struct tern__lout *tern__local_out_get(struct tern__local *l,
				       struct tern__local_peer *lp)
{
	struct tern__lout *o;
	int pick = -1;

	if (lp->oidx >= 0) {
		o = tern__l_out(l->map, lp->oidx);
		if (atomic_load_explicit(&o->cgen, memory_order_relaxed) ==
		    lp->cgen)
			return o;
		if (--l->out_refs[lp->oidx] == 0)
			l->out_released[lp->oidx] = tern__now_ns();
		lp->oidx = -1;
	}
	for (int i = 0; i < LPEER; i++) {
		o = tern__l_out(l->map, i);
		if (atomic_load_explicit(&o->target, memory_order_relaxed) ==
			    lp->nonce &&
		    atomic_load_explicit(&o->cgen, memory_order_relaxed) ==
			    lp->cgen) {
			pick = i;
			goto take;
		}
	}
	for (int i = 0; i < LPEER; i++) {
		if (l->out_refs[i] != 0)
			continue;
		if (pick < 0 || l->out_released[i] < l->out_released[pick])
			pick = i;
	}
	if (pick < 0)
		return NULL;
	o = tern__l_out(l->map, pick);
	atomic_store_explicit(
		&o->seq,
		atomic_load_explicit(&o->seq, memory_order_relaxed) + 1,
		memory_order_seq_cst);
	atomic_store_explicit(&o->target, lp->nonce, memory_order_relaxed);
	atomic_store_explicit(&o->cgen, lp->cgen, memory_order_relaxed);
	atomic_store_explicit(&o->tail,
			      atomic_load_explicit(&lp->peers[lp->cidx].head,
						   memory_order_acquire),
			      memory_order_relaxed);
	atomic_store_explicit(&o->busy, 0, memory_order_relaxed);
	atomic_store_explicit(
		&o->seq,
		atomic_load_explicit(&o->seq, memory_order_relaxed) + 1,
		memory_order_release);
	atomic_fetch_add_explicit(&l->hdr->out_gen, 1, memory_order_release);
take:
	l->out_refs[pick]++;
	lp->oidx = pick;
	return tern__l_out(l->map, pick);
}

/* The live region of the owner holding [addr, addr + len) with @right,
 * whose keys are @rd's: its index, its generation and base in @gen_p and
 * @base_p (read under its seqlock: what the copy uses); -1 when none
 * (not registered, closed, without that right, other keys), -2 when one
 * does but only the fabric reaches it. */
int tern__local_region_find(struct tern__local_peer *lp, uint64_t addr,
			    uint64_t len, uint64_t right,
			    const struct tern_mr_desc *rd, uint64_t *gen_p,
			    uint64_t *base_p)
{
	unsigned int n = lp->hdr->nused;
	uint64_t kh = 0;

	if (n > LREG)
		n = LREG;
	for (unsigned int k = 0; k < n; k++) {
		unsigned int i = (lp->hint + k) % n;
		const struct tern__lreg *e = &lp->reg[i];
		uint64_t g1, g2, base, rlen, access, keyhash;
		uint32_t flags;
		int tries = 0;

	again:
		g1 = atomic_load_explicit(&e->gen, memory_order_acquire);
		if (!(g1 & 1))
			continue;
		base = e->base;
		rlen = e->len;
		access = e->access;
		flags = e->flags;
		keyhash = e->keyhash;
		atomic_thread_fence(memory_order_acquire);
		g2 = atomic_load_explicit(&e->gen, memory_order_relaxed);
		if (g1 != g2) {
			if (++tries < 3) /* being rewritten: look again */
				goto again;
			continue;
		}
		if (addr < base || addr - base > rlen ||
		    len > rlen - (addr - base))
			continue;
		/* Only the fabric reaches it: the provider checks its keys. */
		if (flags & TERN__LREG_FABRIC)
			return -2;
		if (kh == 0)
			kh = tern__lkeyhash(lp->hdr->salt, rd->nkeys, rd->keys);
		if (!(access & right) || keyhash != kh)
			return -1;
		lp->hint = i;
		*gen_p = g1;
		*base_p = base;
		return (int)i;
	}
	return -1;
}

int tern_peer_path(const struct tern_peer *peer)
{
	const struct tern__local_peer *lp;

	if (peer == NULL)
		return -EINVAL;
	lp = peer->local;
	if (lp == NULL || !lp->mapped)
		return TERN_PATH_FABRIC;
	/* Whether it lets us write to it now (not cached: a const look). */
	for (int i = 0; i < LPEER; i++) {
		const struct tern__lpeer *e = &lp->peers[i];
		const struct tern__card_local *me = &peer->ctx->local->id;
		uint64_t g = atomic_load_explicit(&e->gen,
						  memory_order_acquire);

		if ((g & 1) && e->nonce == me->nonce && e->pid == me->pid &&
		    e->start == me->start &&
		    atomic_load_explicit(&e->state, memory_order_relaxed) ==
			    TERN__LPEER_LIVE)
			return TERN_PATH_LOCAL;
	}
	return TERN_PATH_FABRIC;
}
