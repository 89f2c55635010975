/* SPDX-License-Identifier: MIT */
/*
 * The same-host path: operations (docs/local.md). A write, read, atomic
 * or batch to a peer we are attached to, and that lets us write to it, is
 * checked at its post against the peer's table (a live region, the
 * right, the descriptor's keys: local_table.c), queued on that peer's own
 * queue, and copied by the CPU (or the GPU) in the next progress pass. A
 * peer whose ring is full holds up its own queue and no other.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "local_int.h"

/* ---- the peer's regions --------------------------------------------- */

/* Is region @i (generation @gen) being fetched from @lp's broker? */
static int map_pending(const struct tern__local_peer *lp, int i, uint64_t gen)
{
	return lp->bsock >= 0 && lp->bwhat == TERN__LB_REGION &&
	       lp->bidx == (uint32_t)i && lp->bgen == gen;
}

/* When tern__local_region_find() gave @i < 0: the fabric takes it (1)
 * where the owner said so or could not list every region (overflow);
 * else (0) the operation is queued to fail -TERN_EACCESS, as a NIC fails
 * a write with a key it does not know (the post succeeds; a write with
 * immediate that fails tells its target: ctrl.c). */
static int missed(const struct tern__local_peer *lp, int i)
{
	return i == -2 || lp->hdr->overflow;
}

/* ---- copies --------------------------------------------------------- */

/* A copy that a GPU buffer is on one side of (or both): cuMemcpyAsync on
 * this ctx's stream for @dev, waited for. Synchronous, as memcpy is: the
 * operation completes in this pass, and a write's immediate is pushed
 * after its bytes are in GPU memory. */
static int cuda_copy(struct tern__local *l, void *dst, const void *src,
		     size_t len, int dev)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	tern_cu_stream st = NULL;
	tern_cu_ctx cur = NULL;
	tern_cu_result r;

	if (cu == NULL)
		return -TERN_ENOCUDA;
	if (tern__cu_ctx_ensure(cu, dev) != 0 ||
	    cu->CtxGetCurrent(&cur) != TERN_CU_SUCCESS)
		return -TERN_EHMEM;
	/* Our stream, where the thread's context is the one it was made
	 * in (a stream belongs to its context). */
	if (dev >= 0 && dev < LDEVS) {
		if (l->stream[dev].s == NULL &&
		    cu->StreamCreate(&l->stream[dev].s, 0) == TERN_CU_SUCCESS)
			l->stream[dev].cctx = cur;
		if (l->stream[dev].cctx == cur)
			st = l->stream[dev].s;
	}
	/* Else the context's default stream. */
	r = cu->MemcpyAsync((tern_cu_ptr)(uintptr_t)dst,
			    (tern_cu_ptr)(uintptr_t)src, len, st);
	if (r == TERN_CU_SUCCESS)
		r = cu->StreamSynchronize(st);
	if (r != TERN_CU_SUCCESS) {
		tern__warn(
			"same-host path: GPU copy of %zu bytes on device %d: "
			"%s",
			len, dev, tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	return 0;
}

/* One copy's where and what. */
struct lcopy {
	int write;
	void *lbuf;	    /* ours */
	int ldev;	    /* the GPU @lbuf is on, -1: host memory */
	int i;		    /* the peer's region */
	uint64_t gen, base; /* as tern__local_region_find() read them */
	uint64_t raddr, len;
};

/* Store "copying into region @i", then see whether we still may: the
 * writer's side of the Dekker pairs (region closed, permission taken
 * back). */
static int claim(struct tern__local_peer *lp, struct tern__lout *o, int i,
		 uint64_t gen)
{
	atomic_store_explicit(&o->busy, (uint64_t)i + 1, memory_order_seq_cst);
	if (atomic_load_explicit(&lp->reg[i].gen, memory_order_seq_cst) ==
		    gen &&
	    atomic_load_explicit(&lp->peers[lp->cidx].gen,
				 memory_order_seq_cst) == lp->cgen)
		return 0;
	atomic_store_explicit(&o->busy, 0, memory_order_release);
	return -TERN_EACCESS; /* closed by its owner, or we were removed */
}

/* Is [@raddr, @raddr + @len) inside what @m maps? (An owner could
 * rewrite its entry's fields under the same generation: a copy trusts
 * only what it mapped.) */
static int in_map(const struct lmap *m, uint64_t raddr, uint64_t len)
{
	return raddr >= m->base && raddr - m->base <= m->len &&
	       len <= m->len - (raddr - m->base);
}

/* Does @c go by cross-memory attach (the peer's region is not mapped
 * here, host memory both sides, and the kernel lets us)? Those copies
 * go in runs, one system call each: cma_copy(); copy() takes the rest. */
static int by_cma(const struct tern__local_peer *lp, const struct tern__lout *o,
		  const struct lcopy *c)
{
	const struct lmap *m = &lp->maps[c->i];

	return c->gen != 0 && o != NULL && lp->cma && c->ldev < 0 &&
	       !(m->gen == c->gen && m->ptr != NULL) &&
	       !(lp->reg[c->i].flags & TERN__LREG_CUDA);
}

/* A copy through a mapping (shared memory, a GPU region's IPC handle).
 * @return 0; 1: not local after all (cross-memory attach refused since,
 * or GPU memory it cannot reach); <0 an error for the request. @held: the
 * caller's copy before this one claimed region @c->i of generation
 * @c->gen and has not let go (unbusy()) since: claimed already, since
 * its owner cannot finish closing it, nor take our permission back,
 * while "copying" is set (a batch's run of pieces in one region). */
static int copy_held(struct tern__local *l, struct tern__local_peer *lp,
		     struct tern__lout *o, const struct lcopy *c, int held)
{
	struct lmap *m = &lp->maps[c->i];
	uint8_t *mapped = m->gen == c->gen ? m->ptr : NULL;
	uint8_t *at;
	int ret;

	assert(!by_cma(lp, o, c));
	/* Generation 0 is never live: a range in no region of the peer's
	 * with that right and those keys, copied nowhere. */
	if (c->gen == 0 || o == NULL)
		return -TERN_EACCESS;
	if (mapped == NULL)
		return atomic_load_explicit(&lp->reg[c->i].gen,
					    memory_order_acquire) != c->gen
			       ? -TERN_EACCESS /* closed by its owner */
			       : 1;
	if ((c->write && m->rdonly) || !in_map(m, c->raddr, c->len))
		return -TERN_EACCESS;
	ret = held ? 0 : claim(lp, o, c->i, c->gen);
	if (ret != 0)
		return ret;
	at = mapped + (c->raddr - m->base);
	if (c->ldev >= 0 || m->cuda)
		ret = cuda_copy(l, c->write ? (void *)at : c->lbuf,
				c->write ? c->lbuf : (void *)at, c->len,
				m->cuda ? m->dev : c->ldev);
	else if (c->write)
		memcpy(at, c->lbuf, c->len);
	else
		memcpy(c->lbuf, at, c->len);
	/* "Copying" stays set until the caller has pushed the immediate
	 * (unbusy()): an owner that takes its permission back waits for
	 * busy to clear, then reads the ring one last time. */
	return ret;
}

static int copy(struct tern__local *l, struct tern__local_peer *lp,
		struct tern__lout *o, const struct lcopy *c)
{
	return copy_held(l, lp, o, c, 0);
}

/*
 * Copy l->cma_l[0..@n) to (@write) or from l->cma_r[0..@n) in @lp, all
 * in its region @i of generation @gen (by_cma() said so), in one system
 * call, claimed once for that region (busy holds one region's index).
 * @return the bytes copied: the kernel goes through the vectors in order
 * and stops at the first address it cannot reach, so they are a prefix
 * of the run (0 when it copied nothing: the first copy with bytes
 * failed); or, for the whole run, -TERN_EACCESS (closed by its owner, or
 * we were removed: nothing copied) or -TERN_EPEERGONE; or -EPERM:
 * cross-memory attach refused since (lp->cma is 0 now). "Copying" stays
 * set until the caller has pushed the immediates of what landed
 * (unbusy()), as after copy().
 */
static ssize_t cma_copy(struct tern__local *l, struct tern__local_peer *lp,
			struct tern__lout *o, int write, int i, uint64_t gen,
			unsigned int n)
{
	struct pollfd pf = { .fd = lp->pidfd, .events = POLLIN };
	ssize_t got;
	int ret;

	ret = claim(lp, o, i, gen);
	if (ret != 0)
		return ret;
	/* It takes a pid, not our pidfd: the process must still be the
	 * one the pidfd holds (an ended one's pid may be another's soon). */
	if (poll(&pf, 1, 0) != 0)
		return -TERN_EPEERGONE;
	got = write ? process_vm_writev(lp->pid, l->cma_l, n, l->cma_r, n, 0)
		    : process_vm_readv(lp->pid, l->cma_l, n, l->cma_r, n, 0);
	l->cma_calls++;
	if (got < 0 && (errno == EPERM || errno == ENOSYS)) {
		lp->cma = 0;
		got = -EPERM;
	} else if (got < 0) {
		got = errno == ESRCH ? -TERN_EPEERGONE : 0;
	}
	/* The bytes before the immediates (docs/local.md). */
	atomic_thread_fence(memory_order_seq_cst);
	return got;
}

/* Vector @k of the next cross-memory-attach call: @c. */
static void cma_add(struct tern__local *l, unsigned int k,
		    const struct lcopy *c)
{
	l->cma_l[k] = (struct iovec){ c->lbuf, c->len };
	l->cma_r[k] = (struct iovec){ (void *)(uintptr_t)c->raddr, c->len };
}

/* The copy and its immediate are done: the owner may go on. */
static void unbusy(struct tern__lout *o)
{
	if (o != NULL)
		atomic_store_explicit(&o->busy, 0, memory_order_release);
}

static int ring_room(const struct tern__local_peer *lp,
		     const struct tern__lout *o, uint64_t n)
{
	uint64_t tail = atomic_load_explicit(&o->tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&lp->peers[lp->cidx].head,
					     memory_order_acquire);

	return tail - head <= LRING && LRING - (tail - head) >= n;
}

static void ring_push(struct tern__lout *o, uint32_t imm)
{
	uint64_t tail = atomic_load_explicit(&o->tail, memory_order_relaxed);

	o->ring[tail & (LRING - 1)] = imm;
	atomic_store_explicit(&o->tail, tail + 1, memory_order_release);
}

static void ring_ring(struct tern__local_peer *lp)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&lp->hdr->sleeping, memory_order_relaxed) &&
	    write(lp->wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* full or gone: the owner is awake anyway */
}

static uint64_t right_of(int write)
{
	return write ? TERN_ACCESS_REMOTE_WRITE : TERN_ACCESS_REMOTE_READ;
}

/* Region @i (generation @gen) can be reached from our memory on GPU
 * @dev (-1: host) now: mapped shared memory, an opened IPC handle, or
 * cross-memory attach (host memory both sides). */
static int reachable(struct tern__local *l, struct tern__local_peer *lp, int i,
		     uint64_t gen, int dev, const struct tern_mr_desc *rd)
{
	return tern__local_region_map(l, lp, i, gen, rd) != NULL ||
	       map_pending(lp, i, gen) ||
	       (lp->cma && dev < 0 && !(lp->reg[i].flags & TERN__LREG_CUDA));
}

/* Where the local side of @rp's copies is: its region's GPU, or -1. */
static int side_dev(const struct tern__req_priv *rp)
{
	return rp->mr->kind == TERN_MEM_CUDA ? rp->mr->device : -1;
}

/* Is @rp a write (with immediate or not) or a read? */
static int rma_op(const struct tern__req_priv *rp)
{
	return rp->op == TERN__OP_WRITE || rp->op == TERN__OP_WRITE_IMM ||
	       rp->op == TERN__OP_READ;
}

/* The queued write or read @req as a copy. */
static struct lcopy rma_copy(const struct tern_req *req)
{
	const struct tern__req_priv *rp = tern__rp(req);

	return (struct lcopy){
		.write = rp->op != TERN__OP_READ,
		.lbuf = rp->buf,
		.ldev = side_dev(rp),
		.i = rp->rail,
		.gen = rp->u.lrma.gen,
		.base = rp->u.lrma.base,
		.raddr = rp->u.lrma.raddr,
		.len = req->len,
	};
}

/* A write or read that cross-memory attach does not take (run_cma()):
 * 0 done (status in @status_p), 2 wait for ring room. */
static int run_rma(struct tern__local *l, struct tern__local_peer *lp,
		   struct tern__lout *o, struct tern_req *req, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct lcopy c = rma_copy(req);
	int ret;

	if (rp->op == TERN__OP_WRITE_IMM && o != NULL && !ring_room(lp, o, 1))
		return 2;
	if (c.gen != 0 && map_pending(lp, c.i, c.gen))
		return 2; /* its memfd is on its way from the broker */
	ret = copy(l, lp, o, &c);
	if (ret == 1)
		ret = -EPERM; /* cross-memory attach refused since */
	if (ret == 0 && rp->op == TERN__OP_WRITE_IMM)
		ring_push(o, rp->imm);
	unbusy(o);
	if (ret == 0 && rp->op == TERN__OP_WRITE_IMM)
		ring_ring(lp);
	*status_p = ret;
	return 0;
}

/* @req, the head of @lp's queue, is done: off the queue, counted, and
 * completed with @status. */
static void done(struct tern_ctx *ctx, struct tern__local_peer *lp,
		 struct tern_req *req, int status)
{
	struct tern__local *l = ctx->local;

	tern__reqq_remove(&lp->q, req);
	l->nqueued--;
	l->copies++;
	l->bytes += req->len;
	tern__req_complete(ctx, req, status);
}

/*
 * The run of writes (with immediate or not), or of reads, at the head of
 * @lp's queue that go by cross-memory attach into one region, as one
 * system call (docs/local.md, "Many small copies, one system call"), in
 * queue order: at most LCMA_IOV of them and LCMA_BYTES (but the first);
 * each write with immediate with room for its immediate in the ring. The
 * ones the kernel copied whole complete 0 (their immediates pushed after
 * the call), the one it stopped in -EFAULT; the ones after it stay at the
 * head of the queue, for the next call. @return the operations completed;
 * 0: the head is not one it takes (run_rma() takes it).
 */
static int run_cma(struct tern_ctx *ctx, struct tern__local_peer *lp,
		   struct tern__lout *o)
{
	struct tern__local *l = ctx->local;
	struct tern_req *req;
	struct lcopy c, first = { 0 };
	uint64_t total = 0, left, nimm = 0;
	unsigned int n = 0, ok = 0, fail;
	ssize_t got;

	for (req = lp->q.head; req != NULL && n < LCMA_IOV;
	     req = tern__rp(req)->next) {
		struct tern__req_priv *rp = tern__rp(req);

		if (!rma_op(rp))
			break;
		c = rma_copy(req);
		if (n == 0) {
			if (!by_cma(lp, o, &c) || map_pending(lp, c.i, c.gen))
				return 0;
			first = c;
		} else if (c.write != first.write || c.i != first.i ||
			   c.gen != first.gen || c.ldev >= 0 ||
			   total >= LCMA_BYTES || c.len > LCMA_BYTES - total) {
			break; /* by_cma() as the first, or the run ends */
		}
		if (rp->op == TERN__OP_WRITE_IMM) {
			if (!ring_room(lp, o, nimm + 1))
				break;
			nimm++;
		}
		cma_add(l, n++, &c);
		total += c.len;
	}
	if (n == 0)
		return 0; /* a write with immediate and a full ring */
	got = cma_copy(l, lp, o, first.write, first.i, first.gen, n);
	/* Those it copied whole landed: their immediates go now. */
	nimm = 0;
	left = got > 0 ? (uint64_t)got : 0;
	for (req = lp->q.head; got >= 0 && ok < n && req->len <= left;
	     req = tern__rp(req)->next, ok++) {
		left -= req->len;
		if (tern__rp(req)->op == TERN__OP_WRITE_IMM) {
			ring_push(o, tern__rp(req)->imm);
			nimm++;
		}
	}
	unbusy(o);
	if (nimm != 0)
		ring_ring(lp);
	/* The one it stopped in fails; past it, the next call's. A closed
	 * region, our permission taken back or the peer gone fail them
	 * all, as each one's own check would. */
	if (got == -TERN_EACCESS || got == -TERN_EPEERGONE)
		fail = n - ok;
	else
		fail = ok < n;
	for (unsigned int k = 0; k < ok; k++)
		done(ctx, lp, lp->q.head, 0);
	for (unsigned int k = 0; k < fail; k++)
		done(ctx, lp, lp->q.head, got < 0 ? (int)got : -EFAULT);
	return (int)(ok + fail);
}

static int run_atomic(struct tern__local *l, struct tern__local_peer *lp,
		      struct tern__lout *o, struct tern_req *req, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct lmap *m;
	uint64_t *w, old;
	int i = rp->rail;

	(void)l;
	m = &lp->maps[i];
	if (rp->u.lrma.gen == 0 || o == NULL || m->gen != rp->u.lrma.gen ||
	    m->ptr == NULL || m->cuda || m->rdonly ||
	    !in_map(m, rp->u.lrma.raddr, sizeof(*w)) ||
	    ((uintptr_t)m->ptr + (rp->u.lrma.raddr - m->base)) % 8 != 0 ||
	    claim(lp, o, i, rp->u.lrma.gen) != 0) {
		*status_p = -TERN_EACCESS;
		return 0;
	}
	w = (uint64_t *)(void *)(m->ptr + (rp->u.lrma.raddr - m->base));
	if (rp->op == TERN__OP_FADD) {
		old = __atomic_fetch_add(w, rp->u.lrma.operand,
					 __ATOMIC_SEQ_CST);
	} else {
		old = rp->u.lrma.compare;
		__atomic_compare_exchange_n(w, &old, rp->u.lrma.operand, 0,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	atomic_store_explicit(&o->busy, 0, memory_order_release);
	req->value = old;
	*status_p = 0;
	return 0;
}

/* Piece @k of @rp as a copy, and the peer's region it is in (c.i < 0:
 * none with that right and those keys). */
static struct lcopy piece_copy(struct tern__local_peer *lp,
			       const struct tern__req_priv *rp, uint32_t k)
{
	struct tern_piece pc = tern__piece(rp, k);
	const struct tern_mr_desc *d = &rp->u.batch.regions[pc.region];
	int write = !rp->u.batch.read;
	struct lcopy c = {
		.write = write,
		.lbuf = (uint8_t *)rp->mr->buf + pc.loff,
		.ldev = side_dev(rp),
		.raddr = d->base + pc.roff,
		.len = pc.len,
	};

	c.i = tern__local_region_find(lp, c.raddr, pc.len, right_of(write), d,
				      &c.gen, &c.base);
	return c;
}

/* The pieces of @req from @k on (@first is piece @k's copy, by_cma())
 * that lie in @first's region, up to LCMA_IOV of them, in one system
 * call. A piece's immediate is pushed once the call has copied it whole;
 * the piece it stopped in fails the batch (@status_p), and none after it
 * is copied. @return the pieces it took. */
static uint32_t pieces_cma(struct tern__local *l, struct tern__local_peer *lp,
			   struct tern__lout *o, struct tern_req *req,
			   uint32_t k, const struct lcopy *first, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t total = first->len, left;
	unsigned int n = 1, ok = 0;
	ssize_t got;

	cma_add(l, 0, first);
	for (; k + n < rp->npieces && n < LCMA_IOV; n++) {
		struct lcopy c = piece_copy(lp, rp, k + n);

		if (c.i != first->i || c.gen != first->gen ||
		    total >= LCMA_BYTES || c.len > LCMA_BYTES - total)
			break; /* the next loop of run_pieces() takes it */
		cma_add(l, n, &c);
		total += c.len;
	}
	got = cma_copy(l, lp, o, first->write, first->i, first->gen, n);
	left = got > 0 ? (uint64_t)got : 0;
	for (; got >= 0 && ok < n && l->cma_l[ok].iov_len <= left; ok++) {
		left -= l->cma_l[ok].iov_len;
		if (rp->u.batch.with_imm)
			ring_push(o, rp->imm);
	}
	if (ok < n)
		*status_p = got < 0 ? (int)got : -EFAULT;
	return n;
}

static int run_pieces(struct tern__local *l, struct tern__local_peer *lp,
		      struct tern__lout *o, struct tern_req *req, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t held_gen = 0, held_bytes = 0;
	int status = 0, held = -1, again, ret;

	if (rp->u.batch.with_imm && o != NULL && !ring_room(lp, o, rp->npieces))
		return 2;
	if (lp->bsock >= 0 && lp->bwhat == TERN__LB_REGION)
		return 2; /* a memfd is on its way from the broker */
	for (uint32_t k = 0; k < rp->npieces && status == 0;) {
		struct lcopy c = piece_copy(lp, rp, k);

		if (c.i < 0) {
			status = -TERN_EACCESS;
			break;
		}
		if (by_cma(lp, o, &c)) {
			k += pieces_cma(l, lp, o, req, k, &c, &status);
			held = -1;
			continue;
		}
		/* A run of pieces in one region is claimed once per
		 * LCMA_BYTES: the owner's close waits no longer than for one
		 * cross-memory-attach call (run_cma()). */
		again = c.i == held && c.gen == held_gen &&
			held_bytes <= LCMA_BYTES &&
			c.len <= LCMA_BYTES - held_bytes;
		ret = copy_held(l, lp, o, &c, again);
		if (ret != 0) {
			status = ret == 1 ? -EPERM : ret;
		} else {
			held_bytes = again ? held_bytes + c.len : c.len;
			held = c.i;
			held_gen = c.gen;
			if (rp->u.batch.with_imm)
				ring_push(o, rp->imm);
		}
		k++;
	}
	unbusy(o);
	if (rp->u.batch.with_imm && o != NULL)
		ring_ring(lp);
	*status_p = status;
	return 0;
}

/* ---- posts and the queues ------------------------------------------- */

/* Queue a prepared request (its checks passed) for the next pass. */
static void enqueue(struct tern_ctx *ctx, struct tern__local_peer *lp,
		    struct tern_req *req)
{
	struct tern__req_priv *rp = tern__rp(req);

	rp->state = TERN__ST_LOCALQ;
	rp->mr->inflight++;
	rp->peer->inflight++;
	tern__reqq_push(&lp->q, req);
	ctx->local->nqueued++;
}

/* The peer of @rp, when the local path takes its operations now: we are
 * attached, it lets us write, and our ring to it is ours. */
static struct tern__local_peer *usable(struct tern_ctx *ctx,
				       const struct tern__req_priv *rp)
{
	struct tern__local_peer *lp = rp->peer->local;

	if (!lp->mapped) {
		/* Its broker may be due another ask. */
		if (lp->bsock < 0 && lp->broker)
			(void)tern__broker_poll(ctx, lp);
		return NULL;
	}
	if (!tern__local_allowed(ctx->local, lp) ||
	    tern__local_out_get(ctx->local, lp) == NULL)
		return NULL;
	return lp;
}

int tern__local_rma(struct tern_ctx *ctx, struct tern_req *req,
		    const struct tern_mr_desc *rd, uint64_t roff)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = usable(ctx, rp);
	int write = rp->op != TERN__OP_READ, i;
	uint64_t gen = 0, base = 0;

	if (lp == NULL)
		return 1;
	if (rd->base > UINT64_MAX - roff)
		return -TERN_EBOUNDS;
	i = tern__local_region_find(lp, rd->base + roff, req->len,
				    right_of(write), rd, &gen, &base);
	if (i < 0 ? missed(lp, i)
		  : !reachable(ctx->local, lp, i, gen, side_dev(rp), rd))
		return 1;
	if (i < 0) {
		/* Registered nowhere with that right and those keys: it
		 * fails -TERN_EACCESS in its pass, and nothing is copied. */
		i = 0;
		gen = 0;
	}
	rp->rail = (uint8_t)i; /* not a rail's: the region's index */
	rp->u.lrma.raddr = rd->base + roff;
	rp->u.lrma.gen = gen;
	rp->u.lrma.base = base;
	enqueue(ctx, lp, req);
	return 0;
}

int tern__local_atomic(struct tern_ctx *ctx, struct tern_req *req,
		       const struct tern_mr_desc *rd, uint64_t roff)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = usable(ctx, rp);
	uint64_t gen = 0, base = 0, operand, compare;
	uint8_t *p;
	int i;

	if (lp == NULL)
		return 1;
	if (rd->base > UINT64_MAX - roff)
		return -TERN_EBOUNDS;
	i = tern__local_region_find(lp, rd->base + roff, 8,
				    TERN_ACCESS_REMOTE_ATOMIC, rd, &gen, &base);
	/* Not shared host memory mapped writable: the fabric's atomics. */
	p = i < 0 ? NULL : tern__local_region_map(ctx->local, lp, i, gen, rd);
	if (i < 0 ? missed(lp, i)
		  : p == NULL || lp->maps[i].cuda || lp->maps[i].rdonly)
		return 1;
	if (i < 0) {
		i = 0;
		gen = 0;
	}
	operand = rp->u.atomic.operand;
	compare = rp->u.atomic.compare;
	rp->rail = (uint8_t)i;
	rp->u.lrma.raddr = rd->base + roff;
	rp->u.lrma.gen = gen;
	rp->u.lrma.base = base;
	rp->u.lrma.operand = operand;
	rp->u.lrma.compare = compare;
	enqueue(ctx, lp, req);
	return 0;
}

static int flush_peer(struct tern_ctx *ctx, struct tern__local_peer *lp);

int tern__local_pieces(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = usable(ctx, rp);
	int write = !rp->u.batch.read, now = 1;

	if (lp == NULL)
		return 1;
	/* Every region must be local, or the whole batch goes over the
	 * fabric: checked before any byte moves. */
	if (rp->u.batch.with_imm && rp->npieces > LRING)
		return 1;
	for (unsigned int r = 0; r < rp->u.batch.nregions; r++) {
		const struct tern_mr_desc *d = &rp->u.batch.regions[r];
		uint64_t gen, base;
		int i = tern__local_region_find(
			lp, d->base, d->len, right_of(write), d, &gen, &base);

		if (i < 0 ? missed(lp, i)
			  : !reachable(ctx->local, lp, i, gen, side_dev(rp), d))
			return 1;
		/* Host memory mapped here: a memcpy per piece. */
		if (i < 0 || side_dev(rp) >= 0 || lp->maps[i].gen != gen ||
		    lp->maps[i].ptr == NULL || lp->maps[i].cuda)
			now = 0;
	}
	enqueue(ctx, lp, req);
	/* Nothing queued before it, every piece a memcpy: copied in the call
	 * (as an implicit write is), not at the next pass; the request still
	 * completes from progress. A full ring or a region still on its way
	 * leaves it queued, in order. */
	if (now && lp->q.len == 1)
		(void)flush_peer(ctx, lp);
	return 0;
}

int tern__local_now(struct tern_ctx *ctx, struct tern_peer *peer,
		    struct tern_mr *mr, void *buf, size_t len,
		    const struct tern_mr_desc *rd, uint64_t roff, uint8_t op,
		    uint32_t imm)
{
	struct tern__local *l = ctx->local;
	struct tern__local_peer *lp = peer->local;
	int write = op != TERN__OP_READ;
	uint64_t gen, base;
	struct tern__lout *o;
	struct lcopy c;
	int i, ret;

	/* Anything an explicit post would refuse, or queue behind others,
	 * goes that way: it says why, or keeps the order. */
	if (mr == NULL || rd == NULL || buf == NULL || mr->ctx != ctx ||
	    mr->kind != TERN_MEM_HOST || mr->smr != NULL ||
	    !(mr->access & TERN_ACCESS_LOCAL) || ctx->closing ||
	    peer->removed || peer->removing || peer->gone ||
	    (const char *)buf < (const char *)mr->buf || len > mr->len ||
	    (size_t)((const char *)buf - (const char *)mr->buf) >
		    mr->len - len ||
	    rd->nkeys < peer->nrails || rd->nkeys > TERN_MAX_RAILS ||
	    !(rd->flags &
	      (write ? TERN_MR_DESC_REMOTE_WRITE : TERN_MR_DESC_REMOTE_READ)) ||
	    roff > rd->len || len > rd->len - roff ||
	    rd->base > UINT64_MAX - roff)
		return 1;
	if (!lp->mapped || lp->q.len != 0 || !tern__local_allowed(l, lp) ||
	    (o = tern__local_out_get(l, lp)) == NULL)
		return 1;
	i = tern__local_region_find(lp, rd->base + roff, len, right_of(write),
				    rd, &gen, &base);
	if (i < 0 || tern__local_region_map(l, lp, i, gen, rd) == NULL ||
	    lp->maps[i].cuda ||
	    (op == TERN__OP_WRITE_IMM && !ring_room(lp, o, 1)))
		return 1;
	c = (struct lcopy){
		.write = write,
		.lbuf = buf,
		.ldev = -1,
		.i = i,
		.gen = gen,
		.base = base,
		.raddr = rd->base + roff,
		.len = len,
	};
	ret = copy(l, lp, o, &c);
	if (ret == 1) {
		unbusy(o);
		return 1;
	}
	if (ret == 0 && op == TERN__OP_WRITE_IMM)
		ring_push(o, imm);
	unbusy(o);
	if (ret == 0 && op == TERN__OP_WRITE_IMM)
		ring_ring(lp);
	l->copies++;
	l->bytes += len;
	return ret;
}

/* Run @lp's queue in order until its ring is full. */
static int flush_peer(struct tern_ctx *ctx, struct tern__local_peer *lp)
{
	struct tern__local *l = ctx->local;
	struct tern__lout *o;
	struct tern_req *req;
	int n = 0, k;

	/* Our ring to it, as long as it lets us write (else each fails
	 * -TERN_EACCESS: it took its permission back). */
	o = lp->mapped && tern__local_allowed(l, lp)
		    ? tern__local_out_get(l, lp)
		    : NULL;
	while ((req = lp->q.head) != NULL) {
		struct tern__req_priv *rp = tern__rp(req);
		int status = 0, ret;

		/* Writes or reads by cross-memory attach: a run per call. */
		if (rma_op(rp) && (k = run_cma(ctx, lp, o)) > 0) {
			n += k;
			continue;
		}
		switch (rp->op) {
		case TERN__OP_PIECES:
			ret = run_pieces(l, lp, o, req, &status);
			break;
		case TERN__OP_FADD:
		case TERN__OP_CSWAP:
			ret = run_atomic(l, lp, o, req, &status);
			break;
		default:
			ret = run_rma(l, lp, o, req, &status);
			break;
		}
		if (ret == 2)
			break; /* its ring is full: in order, later */
		done(ctx, lp, req, status);
		n++;
	}
	return n;
}

int tern__local_flush(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;
	int n = 0;

	if (l->nqueued == 0)
		return 0;
	for (int i = 0; i < LPEER; i++) {
		if (l->att[i] != NULL && l->att[i]->q.len != 0)
			n += flush_peer(ctx, l->att[i]);
	}
	return n;
}

void tern__local_cancel(struct tern_ctx *ctx, struct tern_req *req, int status)
{
	tern__req_abort(ctx, &tern__rp(req)->peer->local->q, req, status);
	ctx->local->nqueued--;
}

static void abort_queue(struct tern_ctx *ctx, struct tern__local_peer *lp,
			const struct tern_peer *peer, int status)
{
	for (struct tern_req *r = lp->q.head, *next; r != NULL; r = next) {
		next = tern__rp(r)->next;
		if (peer == NULL || tern__rp(r)->peer == peer) {
			tern__req_abort(ctx, &lp->q, r, status);
			ctx->local->nqueued--;
		}
	}
}

void tern__local_cancel_all(struct tern_ctx *ctx, int status)
{
	if (ctx->local == NULL)
		return;
	for (int i = 0; i < LPEER; i++) {
		if (ctx->local->att[i] != NULL)
			abort_queue(ctx, ctx->local->att[i], NULL, status);
	}
}

void tern__local_abort_peer(struct tern_ctx *ctx, struct tern_peer *peer,
			    int status)
{
	if (ctx->local != NULL && peer->local != NULL)
		abort_queue(ctx, peer->local, peer, status);
}
