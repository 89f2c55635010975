/* SPDX-License-Identifier: MIT */
/*
 * The provider's hot path, inline: a write or read goes to the provider,
 * and a CQ read comes back, with no frame of tern's between the engine and
 * libfabric. Measured in one process (bench/inproc, shm, 4 KiB), handing
 * each write to a function in another file cost 2-3% against fi_writemsg()
 * written in place (on shm a write is a system call, and the user code
 * around it runs cold); on tcp each extra frame around an empty CQ read
 * cost about 100 ns of an idle pass (docs/performance.md).
 *
 * The TERN__PF_* flags and the TERN__PROV_* values are libfabric's own
 * bits and values under tern's names: passing them costs no translation.
 *
 * With TERN_PROV_FAKE defined (the unit tests' build of the engine),
 * tern__prov_cq_read() and tern__prov_rma() are plain declarations that
 * tests/unit/fake_prov.c implements, and a completion entry is tern's own.
 */
#ifndef TERN_PROV_INLINE_H
#define TERN_PROV_INLINE_H

#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

/* Post flags (uint64_t). */
#define TERN__PF_MORE	 FI_MORE /* more posts follow: the provider may wait */
#define TERN__PF_IMM	 FI_REMOTE_CQ_DATA    /* carry @data to the target */
#define TERN__PF_DELIVER FI_DELIVERY_COMPLETE /* complete once delivered */
/* A write the provider may take a copy of (at most its inject size): then
 * tern__prov_rma() returns TERN__PROV_TAKEN and no completion comes. */
#define TERN__PF_INJECT FI_INJECT

/* tern__prov_rma(): the provider took a copy of the write and will not
 * complete it (fi_inject_write(3)): the buffer is free, the engine
 * completes the request itself. */
#define TERN__PROV_TAKEN 1

/* Any peer (a receive's @addr). */
#define TERN__PROV_ADDR_ANY FI_ADDR_UNSPEC
/* A completion whose source is not known (tern__prov_cq_read()'s @src). */
#define TERN__PROV_ADDR_NONE FI_ADDR_NOTAVAIL
/* A card's address format whose addresses are names of varying length. */
#define TERN__PROV_ADDR_STR FI_ADDR_STR
/* What tern__prov_cq_read() returns for an empty CQ, and when an error
 * entry waits (tern__prov_cq_readerr()). */
#define TERN__PROV_CQ_EMPTY (-FI_EAGAIN)
#define TERN__PROV_CQ_ERROR (-FI_EAVAIL)

/* Completion entry flags (tern__prov_cqent_flags()). */
#define TERN__CQ_REMOTE_WRITE FI_REMOTE_WRITE	/* a peer's write landed */
#define TERN__CQ_IMM	      FI_REMOTE_CQ_DATA /* data carries an imm */

/* One completion as the provider gives it; read through the accessors. */
#ifdef TERN_PROV_FAKE
struct tern__fake_cqent {
	void *op_context;
	uint64_t flags;
	size_t len;
	uint64_t data;
};

struct tern__prov_cqent {
	struct tern__fake_cqent e;
};
#else
struct tern__prov_cqent {
	struct fi_cq_data_entry e;
};
#endif

/* Bytes of provider context an operation needs (a request's fictx). */
#define TERN__PROV_CTX_SIZE sizeof(struct fi_context2)

static inline void *tern__prov_cqent_ctx(const struct tern__prov_cqent *c)
{
	return c->e.op_context;
}

static inline uint64_t tern__prov_cqent_flags(const struct tern__prov_cqent *c)
{
	return c->e.flags;
}

static inline size_t tern__prov_cqent_len(const struct tern__prov_cqent *c)
{
	return c->e.len;
}

static inline uint64_t tern__prov_cqent_data(const struct tern__prov_cqent *c)
{
	return c->e.data;
}

/* Up to @n completions into @ent: how many, TERN__PROV_CQ_EMPTY,
 * TERN__PROV_CQ_ERROR or another -FI_E* (tern__prov_cq_failed()). Where
 * the rail has FI_SOURCE (tern__prov_source()), @src[i] is where entry i
 * came from; else @src is untouched. */
#ifdef TERN_PROV_FAKE
ssize_t tern__prov_cq_read(struct tern__prov_rail *r,
			   struct tern__prov_cqent *ent, size_t n,
			   uint64_t *src);
ssize_t tern__prov_rma(struct tern__prov_rail *r, int read, void *buf,
		       size_t len, void *desc, uint64_t addr, uint64_t raddr,
		       uint64_t key, uint64_t data, void *context,
		       uint64_t flags);
#else
/* quirks.c: which libfabric needs it, and why. */
void tern__prov_fix_rx_flags(struct tern__prov_cqent *ent, size_t n);

static inline ssize_t tern__prov_cq_read(struct tern__prov_rail *r,
					 struct tern__prov_cqent *ent, size_t n,
					 uint64_t *src)
{
	_Static_assert(sizeof(fi_addr_t) == sizeof(uint64_t),
		       "fi_addr_t is not 64 bits");
	ssize_t got = r->source
			      ? fi_cq_readfrom(r->cq, ent, n, (fi_addr_t *)src)
			      : fi_cq_read(r->cq, ent, n);

	/* Off but on the libfabric releases that need it: one test of a
	 * field per read, no call. */
	if (__builtin_expect(r->fix_rx_flags, 0) && got > 0)
		tern__prov_fix_rx_flags(ent, (size_t)got);
	return got;
}

/* The rail's provider has no RMA inject (efa-direct: fi_no_rma_inject,
 * though it reports an inject size): post @msg whole from now on (post.c).
 * Cold. */
ssize_t tern__prov_rma_no_inject(struct tern__prov_rail *r,
				 struct fi_msg_rma *msg, uint64_t flags);

/*
 * Small writes (TERN__PF_INJECT: at most the provider's inject size, not
 * delivery complete), off the common path of tern__prov_rma().
 *
 * Where the rail carries plain small writes through the peer's queue
 * (rma_queue: shm with $TERN_INJECT=2), a plain write goes as
 * fi_writemsg() with its remote range in two halves. shm
 * (smr_generic_rma(), libfabric 1.17 to 2.x) copies a write of one remote
 * piece without remote CQ data itself, with process_vm_writev() inside
 * the post: one system call per write, however small. A write of two
 * pieces, like a write with data, goes inline in the peer's command (up
 * to about 200 bytes) or through one of its inject buffers (up to 4 KiB):
 * a memcpy, no system call; the peer copies it into place as it
 * progresses and checks the key only then (a bad one is dropped there,
 * unreported). It completes inside the post, with its context.
 *
 * Where plain writes are not injected (inject_plain_off: shm from
 * libfabric 2.5, quirks.c), a plain one goes whole (fi_writemsg(): shm's
 * fast path, with its completion).
 *
 * Else the write is injected (fi_inject_write(), fi_inject_writedata()):
 * the provider copies the source or sends it before returning, and no
 * completion comes, neither success nor failure. A failure the provider
 * sees inside the call is its return value (shm's fast path, 1.17: a
 * peer's unmapped memory is -FI_EIO; 1.18 to 2.4 -FI_EAGAIN, re-posted).
 * One it meets later is not reported to us at all: tcp (1.17 and 2.x)
 * logs it ("inject transfer failed") and drops it, rxm frees its buffer
 * and counts it on a counter tern does not bind, shm's target drops a
 * write with data it cannot place. So an injected write never leaves an
 * error entry, with or without a context, in the CQ (src/engine/reap.c,
 * sync_rma).
 */
static inline __attribute__((always_inline)) ssize_t tern__prov_rma_small(
	struct tern__prov_rail *r, struct fi_msg_rma *msg, uint64_t flags)
{
	const struct iovec *iov = msg->msg_iov;
	const struct fi_rma_iov *rma = msg->rma_iov;
	struct fi_rma_iov half[2];
	ssize_t ret;

	flags &= ~(uint64_t)TERN__PF_INJECT;
	if (r->rma_queue && !(flags & TERN__PF_IMM) && iov->iov_len >= 2) {
		half[0] = (struct fi_rma_iov){ .addr = rma->addr,
					       .len = iov->iov_len / 2,
					       .key = rma->key };
		half[1] = (struct fi_rma_iov){
			.addr = rma->addr + half[0].len,
			.len = iov->iov_len - half[0].len,
			.key = rma->key,
		};
		msg->rma_iov = half;
		msg->rma_iov_count = 2;
		return fi_writemsg(r->ep, msg, flags);
	}
	if (__builtin_expect(r->rma_inject_off, 0) ||
	    (r->inject_plain_off && !(flags & TERN__PF_IMM)))
		return fi_writemsg(r->ep, msg, flags);
	if (flags & TERN__PF_IMM)
		ret = fi_inject_writedata(r->ep, iov->iov_base, iov->iov_len,
					  msg->data, msg->addr, rma->addr,
					  rma->key);
	else
		ret = fi_inject_write(r->ep, iov->iov_base, iov->iov_len,
				      msg->addr, rma->addr, rma->key);
	if (__builtin_expect(ret == 0, 1))
		return TERN__PROV_TAKEN;
	if (ret == -FI_ENOSYS)
		return tern__prov_rma_no_inject(r, msg, flags);
	return ret;
}

/* An RMA write (or, with @read, a read) of @len bytes at @buf (@desc) to
 * @raddr/@key at peer @addr; @data goes with TERN__PF_IMM. 0,
 * TERN__PROV_TAKEN (TERN__PF_INJECT: no completion will come) or -FI_E*
 * (tern__prov_post_error()). */
static inline __attribute__((always_inline)) ssize_t tern__prov_rma(
	struct tern__prov_rail *r, int read, void *buf, size_t len, void *desc,
	uint64_t addr, uint64_t raddr, uint64_t key, uint64_t data,
	void *context, uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = raddr, .len = len, .key = key };
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = addr,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = context,
		.data = data,
	};

	if (read)
		return fi_readmsg(r->ep, &msg, flags);
	if (flags & TERN__PF_INJECT)
		return tern__prov_rma_small(r, &msg, flags);
	return fi_writemsg(r->ep, &msg, flags | r->tx_flags);
}
#endif /* TERN_PROV_FAKE */

#endif /* TERN_PROV_INLINE_H */
