/* SPDX-License-Identifier: MIT */
/**
 * @file tern/req.h
 * Requests, operations and progress.
 *
 * The completion contract (docs/api.md):
 * - A post that returns 0 produces exactly one completion: success, an
 *   error, or -ECANCELED when its peer or ctx is closed first. A post that
 *   fails produces none, and the request is untouched.
 * - Posts only queue. tern_progress() / tern_wait() hand queued operations
 *   to the provider in batches (libfabric FI_MORE, always flushed) within
 *   the rail's queue credits, and read completions in batches. -FI_EAGAIN
 *   never reaches the caller: the operation stays queued and is re-posted.
 * - One completion path: callbacks run only from progress
 *   (tern_progress(), tern_wait(), tern_run()), on the ctx's thread. A
 *   post, tern_req_cancel() and tern_peer_remove() never run one: what
 *   they finish (a cancelled request, a removed peer's request, a post
 *   the provider refused) goes on the ctx's ready list and is called back
 *   from the next progress pass, as libuv's uv_cancel() does. The one
 *   exception is tern_ctx_close(), which completes everything before it
 *   frees memory. A callback may post new operations, and may post its
 *   own request again.
 * - req->done is set when tern lets go of the request: just before its
 *   callback runs, never while it waits on the ready list. A request that
 *   is not done is tern's: it must not be reused, moved or freed.
 * - Requests are caller-owned: tern never allocates per operation. A
 *   request must not be reused, moved or freed until it completed.
 */
#ifndef TERN_REQ_H
#define TERN_REQ_H

#include <stddef.h>
#include <stdint.h>

#include <tern/ctx.h>
#include <tern/mr.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tern_req;

/** Completion callback; runs on the ctx's thread inside progress. */
typedef void (*tern_req_cb)(struct tern_req *req);

/** req->flags: the receive carried immediate data, now in req->imm. */
#define TERN_REQ_F_IMM (1U << 0)

/** Length of the provider error text kept in a request. */
#define TERN_REQ_ERRMSG_LEN 96

/**
 * Bytes of a request that are private to tern: libfabric's context
 * (struct fi_context2, 64 bytes), the queue links, the operation's
 * target and progress, and per operation what it alone needs. Its layout
 * is the library's own (src/engine/engine.h); it changes only with the
 * ABI version.
 */
#define TERN_REQ_PRIV_SIZE 192

/**
 * A caller-owned request, 344 bytes on LP64 (152 public, 192 private;
 * it was 632 with its private fields spelled out): tern allocates nothing
 * per operation. Initialise it with tern_req_init() before its first
 * post. Once it has completed it may be posted again as it is:
 * every post clears its results and keeps its callback and data (call
 * tern_req_init() again to change those). A request still in flight must
 * not be posted again.
 */
struct tern_req {
	tern_req_cb cb; /**< optional callback */
	void *data;	/**< caller's pointer, untouched by tern */

	/* Results, valid once done is set. */
	int done;	    /**< 1 once completed: set as its callback runs */
	int status;	    /**< 0 or a negative error code */
	size_t len;	    /**< bytes sent / received / written */
	uint64_t imm;	    /**< immediate data a receive carried */
	uint64_t value;	    /**< atomics: the remote word's old value */
	unsigned int flags; /**< TERN_REQ_F_*: what the results hold */
	int prov_errno;	    /**< provider-specific error number, or 0 */
	char errmsg[TERN_REQ_ERRMSG_LEN]; /**< provider's error text, or "" */

	/** Private to tern; do not touch (TERN_REQ_PRIV_SIZE bytes). */
	uint64_t _priv[TERN_REQ_PRIV_SIZE / sizeof(uint64_t)];
};

/**
 * Prepare @p req for its first post: clears results, sets callback and
 * data. Not needed between posts of a request that has completed.
 */
TERN_API void tern_req_init(struct tern_req *req, tern_req_cb cb, void *data);

/**
 * Send @p len bytes at @p buf (inside @p mr, which needs
 * TERN_ACCESS_LOCAL) to @p peer. Completes when the buffer may be reused.
 * Messages travel between the rails 0 of both ctxs (no ordering between
 * messages is promised); one-sided writes spread round-robin over rails.
 * @return 0 (queued); -EINVAL for NULL arguments; -TERN_EBOUNDS for a
 * buffer outside @p mr; -TERN_EACCESS if @p mr lacks TERN_ACCESS_LOCAL;
 * -EMSGSIZE above the provider's max_msg_size.
 */
TERN_API int tern_send(struct tern_peer *peer, struct tern_mr *mr,
		       const void *buf, size_t len, struct tern_req *req);

/**
 * Receive one message from any peer into @p buf (inside @p mr). On
 * completion req->len is the message length. A message longer than @p len
 * completes with -TERN_ETRUNC.
 * @return 0 (queued); -EINVAL; -TERN_EBOUNDS; -TERN_EACCESS.
 */
TERN_API int tern_recv(struct tern_ctx *ctx, struct tern_mr *mr, void *buf,
		       size_t len, struct tern_req *req);

/**
 * Like tern_send(), and the receiver's request gets @p imm in req->imm
 * with TERN_REQ_F_IMM set in req->flags (libfabric fi_senddata).
 */
TERN_API int tern_send_imm(struct tern_peer *peer, struct tern_mr *mr,
			   const void *buf, size_t len, uint32_t imm,
			   struct tern_req *req);

/**
 * One-sided read of @p len bytes at offset @p roff of the peer's region
 * @p rdesc into [buf, buf+len) (inside local @p mr). The remote region
 * needs TERN_ACCESS_REMOTE_READ; where it lacks it and the provider
 * enforces rights, the read completes with an error.
 * @return 0 (queued); -EINVAL; -TERN_EBOUNDS (local or remote range);
 * -TERN_EDESC.
 */
TERN_API int tern_read(struct tern_peer *peer, struct tern_mr *mr, void *buf,
		       size_t len, const struct tern_mr_desc *rdesc,
		       uint64_t roff, struct tern_req *req);

/**
 * One-sided write of [buf, buf+len) (inside local @p mr) to the peer's
 * region described by @p rdesc at offset @p roff. The descriptor's keys
 * are copied: it need not outlive the call. Completes locally when the
 * source may be reused.
 * @return 0 (queued); -EINVAL; -TERN_EBOUNDS if roff+len exceeds the
 * remote region (refused before posting); -TERN_EDESC if the descriptor has
 * fewer keys than the peer has rails.
 */
TERN_API int tern_write(struct tern_peer *peer, struct tern_mr *mr,
			const void *buf, size_t len,
			const struct tern_mr_desc *rdesc, uint64_t roff,
			struct tern_req *req);

/**
 * Like tern_write(), and the target is told: each write with immediate
 * that lands counts once toward tern_imm_expect(target_ctx, imm, ...).
 * Immediates are 32 bits everywhere (EFA carries 4 bytes).
 */
TERN_API int tern_write_imm(struct tern_peer *peer, struct tern_mr *mr,
			    const void *buf, size_t len,
			    const struct tern_mr_desc *rdesc, uint64_t roff,
			    uint32_t imm, struct tern_req *req);

/** One piece of a batched write or read: local offset <-> region[region] +
 * roff. */
struct tern_piece {
	uint64_t loff;	 /**< offset in the local region */
	uint64_t roff;	 /**< offset in the remote region */
	uint64_t len;	 /**< bytes */
	uint32_t region; /**< index into the regions array */
	uint32_t pad;	 /**< must be 0 */
};

/** tern_write_pieces(): every piece is a write with immediate @p imm. */
#define TERN_PIECES_IMM (1ULL << 0)

/**
 * Write a list of pieces of local region @p mr to a peer's regions as one
 * operation: the pieces are posted in batches (FI_MORE, always flushed)
 * within queue credits, spread over the rails, and @p req completes once,
 * when all have completed, with the first error if any failed (the others
 * still run; nothing is retried). Every piece is checked against both
 * regions before anything is queued. @p pieces and @p regions must stay
 * valid until completion. With TERN_PIECES_IMM, each piece is a write with
 * immediate @p imm (so the target counts @p n arrivals). req->len is the
 * total length.
 * @return 0 (queued); -EINVAL (n 0, bad flags or region index);
 * -TERN_EBOUNDS (a piece outside either region); -TERN_EDESC; -TERN_EACCESS.
 */
TERN_API int tern_write_pieces(struct tern_peer *peer, struct tern_mr *mr,
			       const struct tern_piece *pieces, size_t n,
			       const struct tern_mr_desc *regions,
			       unsigned int nregions, uint64_t flags,
			       uint32_t imm, struct tern_req *req);

/**
 * Read a list of pieces of a peer's regions into local region @p mr as one
 * operation: tern_write_pieces() in the other direction (piece.loff is where
 * in @p mr the bytes land, piece.roff where in regions[piece.region] they
 * come from; the regions need TERN_MR_DESC_REMOTE_READ). Posted in batches
 * within queue credits, spread over the rails; @p req completes once, when
 * all pieces have, with the first error if any failed. Every piece is
 * checked before anything is queued. @p pieces and @p regions must stay
 * valid until completion. Reads carry no immediate. req->len is the total
 * length.
 * @return 0 (queued); -EINVAL (n 0 or a bad region index); -TERN_EBOUNDS;
 * -TERN_EDESC; -TERN_EACCESS; -TERN_ENOTSUP for a staged region (device
 * memory without direct RDMA: batched reads are not staged).
 */
TERN_API int tern_read_pieces(struct tern_peer *peer, struct tern_mr *mr,
			      const struct tern_piece *pieces, size_t n,
			      const struct tern_mr_desc *regions,
			      unsigned int nregions, struct tern_req *req);

/**
 * tern_write_pieces() with the pieces as three arrays, one per field, all
 * into one remote region @p rdesc: piece i writes @p lens[i] bytes at
 * @p loffs[i] of @p mr to @p roffs[i] of @p rdesc. This is the layout a
 * page list usually has (a KV cache's block offsets, numpy columns), so
 * nothing is packed into a table first. Checks, completion and flags as
 * tern_write_pieces(); the arrays and @p rdesc must stay valid until
 * completion.
 * @return as tern_write_pieces(); -EINVAL for a NULL array.
 */
TERN_API int tern_write_pieces_arrays(struct tern_peer *peer,
				      struct tern_mr *mr, const uint64_t *loffs,
				      const uint64_t *roffs,
				      const uint64_t *lens, size_t n,
				      const struct tern_mr_desc *rdesc,
				      uint64_t flags, uint32_t imm,
				      struct tern_req *req);

/**
 * tern_read_pieces() with the pieces as three arrays, from one remote
 * region @p rdesc: piece i reads @p lens[i] bytes at @p roffs[i] of
 * @p rdesc into @p loffs[i] of @p mr. The arrays and @p rdesc must stay
 * valid until completion.
 * @return as tern_read_pieces(); -EINVAL for a NULL array.
 */
TERN_API int tern_read_pieces_arrays(struct tern_peer *peer, struct tern_mr *mr,
				     const uint64_t *loffs,
				     const uint64_t *roffs,
				     const uint64_t *lens, size_t n,
				     const struct tern_mr_desc *rdesc,
				     struct tern_req *req);

/**
 * Atomically add @p add to the 64-bit word at offset @p roff (8-byte
 * aligned) of the peer's region, which needs TERN_ACCESS_REMOTE_ATOMIC.
 * On completion req->value is the word's value before the add.
 * @return 0 (queued); -TERN_ENOTSUP where the provider offers no 64-bit
 * fetch-and-add (tern never emulates one with a read and a write);
 * -EINVAL for a misaligned offset; -TERN_EBOUNDS; -TERN_EDESC.
 */
TERN_API int tern_atomic_fetch_add(struct tern_peer *peer,
				   const struct tern_mr_desc *rdesc,
				   uint64_t roff, uint64_t add,
				   struct tern_req *req);

/**
 * Atomically replace the 64-bit word at @p roff with @p swap if it equals
 * @p compare. req->value is the old value: the swap happened iff it equals
 * @p compare. Errors as tern_atomic_fetch_add().
 */
TERN_API int tern_atomic_cswap(struct tern_peer *peer,
			       const struct tern_mr_desc *rdesc, uint64_t roff,
			       uint64_t compare, uint64_t swap,
			       struct tern_req *req);

/*
 * Implicit operations (docs/api.md "Implicit operations"): a write, write
 * with immediate, read or atomic add with no request of its own, as
 * ucp_put_nbi() and shmem_put_nbi(). Each is checked as its explicit
 * twin is and returns the same errors; 0 means tern took it. None
 * completes on its own: tern_quiet() does, for all of them at once. Until
 * then a write's source must not change and a read's destination is not
 * yet filled. No order between implicit operations is promised (as the
 * explicit ones: count immediates). To a same-host peer's mapped host
 * memory the copy happens in the call. At most TERN_NBI_MAX (default
 * 65536) per ctx are in flight: past that a post returns -ENOBUFS until a
 * progress pass completes some. A staged (CUDA) region is refused
 * (-TERN_ENOTSUP): its chunks complete as they leave, not as they land.
 */

/** tern_write() without a request: completes with tern_quiet(). */
TERN_API int tern_write_nbi(struct tern_peer *peer, struct tern_mr *mr,
			    const void *buf, size_t len,
			    const struct tern_mr_desc *rdesc, uint64_t roff);

/** tern_write_imm() without a request: the target counts @p imm once
 * when the bytes have landed, as for the explicit one. */
TERN_API int tern_write_imm_nbi(struct tern_peer *peer, struct tern_mr *mr,
				const void *buf, size_t len,
				const struct tern_mr_desc *rdesc, uint64_t roff,
				uint32_t imm);

/** tern_read() without a request: the bytes are in @p buf once a
 * tern_quiet() that covers it has completed without error. */
TERN_API int tern_read_nbi(struct tern_peer *peer, struct tern_mr *mr,
			   void *buf, size_t len,
			   const struct tern_mr_desc *rdesc, uint64_t roff);

/** Atomically add @p add to the 64-bit word at @p roff, not fetching the
 * old value (tern_atomic_fetch_add()'s checks and errors). */
TERN_API int tern_atomic_add_nbi(struct tern_peer *peer,
				 const struct tern_mr_desc *rdesc,
				 uint64_t roff, uint64_t add);

/**
 * Complete @p req once every implicit operation posted before this call
 * to @p peer (or, with @p peer NULL, to every peer of @p ctx) has
 * completed, and every earlier tern_quiet() of the same scope has. It
 * reports what its operations did, each operation once: req->status is
 * the first error among them to complete (0 if none), req->len how many
 * operations it covers, req->value how many failed, req->imm the number
 * of the first that failed (a peer's implicit operations are numbered 1,
 * 2, ... in the order they were posted), and req->errmsg names it
 * ("write #17 to 0x...: the provider's text"). Completed means done at
 * the target: a write's bytes are in its memory (delivery complete). A peer's
 * death or removal fails its operations
 * (-TERN_EPEERGONE, -ECANCELED) and so completes the quiet; a quiet
 * cancelled with tern_req_cancel() leaves its operations' report to the
 * next quiet of that scope.
 * @return 0 (waiting, or done: its callback runs from the next progress
 * pass); -EINVAL; -ECANCELED on a closing ctx or a removed peer.
 */
TERN_API int tern_quiet(struct tern_ctx *ctx, struct tern_peer *peer,
			struct tern_req *req);

/**
 * Complete @p req once @p count writes carrying @p imm have landed in this
 * ctx, from any peer (counting those that landed before this call and were
 * not yet claimed). Delivery is unordered (EFA SRD): count, never trust
 * "the last write". req->len is the count on completion. One expectation
 * per imm value at a time. No deadline: tern_imm_expect_from(ctx, NULL,
 * imm, count, -1, req), whose contract (a sender's abort, ...) applies.
 * @return 0 (registered); -EINVAL for count 0; -EBUSY if another
 * expectation for @p imm is pending; -ENOSPC when the table of counters
 * is full; -ECANCELED on a closing ctx.
 */
TERN_API int tern_imm_expect(struct tern_ctx *ctx, uint32_t imm, uint64_t count,
			     struct tern_req *req);

/**
 * Complete @p req once @p count writes carrying @p imm have landed in this
 * ctx from @p peer (NULL: from any peer), or fail it: an expectation that
 * cannot hang. Arrivals that landed before the call and are not yet
 * claimed count. On success req->status is 0 and req->len is @p count:
 * that many arrivals are claimed (taken from the counts). It fails, from
 * a progress pass (never inside this call), with:
 * - -ETIMEDOUT: @p timeout_ms (>= 0; < 0: no deadline) passed first. The
 *   ctx's timers wake the loop on time (tern/loop.h).
 * - -TERN_EABORTED: a sender told this ctx that its write with @p imm
 *   failed or was cancelled (any sender for an any-peer expectation, else
 *   @p peer). An abort that came before the expectation is remembered (a
 *   bounded number, per sender) and fails the next one for that imm at
 *   once. Where the provider has no tagged messages no abort is sent.
 * - -TERN_EPEERGONE: @p peer was declared gone.
 * - -ECANCELED: tern_req_cancel(), tern_peer_remove(@p peer), ctx close.
 * On every failure req->len is how many had arrived toward it; those
 * arrivals stay counted and unclaimed (tern_imm_count()).
 *
 * With @p peer, writes from another peer carrying the same @p imm do not
 * count toward it (they count toward any-peer expectations); this needs
 * the provider to report each arrival's source (FI_SOURCE). Peers added
 * with one card are one source. At most one expectation per (peer, imm);
 * an imm has either one any-peer expectation or expectations from peers.
 * @return 0 (registered; exactly one completion follows); -EINVAL (NULL
 * ctx or req, count 0, a peer of another ctx); -EBUSY (another
 * expectation for that imm and peer, or any-peer and from-a-peer mixed);
 * -TERN_ENOTSUP with a peer where the provider does not report sources;
 * -TERN_EPEERGONE for a gone peer; -ECANCELED (closing ctx, removed peer);
 * -ENOSPC (the table of counters is full).
 */
TERN_API int tern_imm_expect_from(struct tern_ctx *ctx, struct tern_peer *peer,
				  uint32_t imm, uint64_t count, int timeout_ms,
				  struct tern_req *req);

/**
 * Writes carrying @p imm that have landed and are not yet claimed by a
 * completed expectation (for progress reports).
 */
TERN_API uint64_t tern_imm_count(const struct tern_ctx *ctx, uint32_t imm);

/**
 * Cancel @p req. Runs no callback: every cancelled request completes
 * -ECANCELED from the next progress pass (tern_progress(), tern_wait(),
 * tern_run()), exactly once, and stays tern's (done 0) until then: to
 * free it, wait for it (tern_wait(ctx, req, 0) returns as soon as one
 * pass ran its callback). A queued operation or an immediate expectation
 * is cancelled at once; a batched write some of whose pieces the
 * provider already holds stops posting and completes once those have
 * completed; a receive already posted to the provider is cancelled there
 * (it may complete normally, if a message won the race).
 * @return 0; -EALREADY if it already completed (its callback may still be
 * due); -EBUSY for a send or write the provider already holds (it
 * completes on its own).
 */
TERN_API int tern_req_cancel(struct tern_ctx *ctx, struct tern_req *req);

/**
 * Post queued operations and read completions once, without blocking.
 * @return the number of requests completed (>= 0), or a negative error if
 * a completion queue failed.
 */
TERN_API int tern_progress(struct tern_ctx *ctx);

/**
 * Hand every operation queued on @p ctx's rails to the provider now,
 * within credits and in batches as progress does, without reading a
 * completion queue or running a callback. For a caller about to start a
 * clock (a ping-pong's timer starts after its post, as in
 * fi_rdm_pingpong): on tcp a CQ read is a poll system call. An operation
 * the provider refuses for now stays queued; one it fails completes from
 * the next progress pass.
 * @return 0; -EINVAL for a NULL @p ctx.
 */
TERN_API int tern_flush(struct tern_ctx *ctx);

/**
 * Drive progress until @p req is done (or, with @p req NULL, until any
 * request completes), or @p timeout_ms passes (-1: no limit), counted
 * from the end of a first progress pass, which always runs (it posts what
 * was just queued before any clock is read). A request
 * already done returns 0 at once, without a progress pass. Idle waits
 * back off to short sleeps instead of spinning a core; set TERN_BUSY_POLL=1
 * to spin.
 * A timeout ends the wait, not the operation: the request stays in
 * flight and tern's, with its buffers and region (tern_mr_close() of the
 * region returns -EBUSY), until it completes, exactly once, from a later
 * progress pass: wait again, or tern_req_cancel() it (a write the provider
 * already holds cannot be cancelled and completes on its own; one queued
 * in tern is cancelled), and reuse nothing of it before done is 1.
 * @return 0 (the request's own status is in req->status); -ETIMEDOUT, the
 * request still in flight; or a negative error from progress.
 */
TERN_API int tern_wait(struct tern_ctx *ctx, struct tern_req *req,
		       int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* TERN_REQ_H */
