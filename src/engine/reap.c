/* SPDX-License-Identifier: MIT */
/* Reading a rail's completions: which request each belongs to, errors
 * with their provider's words, shm's in-order ring, the receives that
 * absorb remote CQ data (posting is post.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Which request (and slot) a completion's op_context belongs to. */
static inline void decode_ctx(struct tern_rail *rail, void *op_context,
			      struct tern__cqe *cqe)
{
	/* One unsigned compare: below the slots wraps to a huge offset. */
	if (tern_unlikely((uintptr_t)op_context - (uintptr_t)rail->slots <
			  rail->slots_span)) {
		cqe->slot = op_context;
		cqe->req = cqe->slot->owner;
		/* No owner: one of rail 0's message buffers (bounce.c). */
		if (cqe->req != NULL &&
		    (tern__rp(cqe->req)->op == TERN__OP_FADD ||
		     tern__rp(cqe->req)->op == TERN__OP_CSWAP))
			cqe->data = tern__slot_words(rail, cqe->slot)[2];
		return;
	}
	cqe->req = tern__req_of_fictx(op_context);
}

/* Give a consumed remote CQ data sink receive back to the provider. Losing
 * one for good would, after 64, stop writes with immediates from being
 * absorbed: say so loudly. */
static void repost_sink(struct tern_rail *rail, void *op_context)
{
	ssize_t ret = tern__prov_recv_sink(&rail->prov, op_context);
	char msg[64];
	int prov_errno;

	if (ret != 0) {
		tern__prov_post_error(ret, msg, sizeof(msg), &prov_errno);
		tern__warn("rail %u: re-posting a receive for remote CQ data: "
			   "%s (one fewer left)",
			   rail->idx, msg + 6 /* after "post: " */);
	}
}

/*
 * Attributing the failures of synchronous RMA (src/prov/quirks.c: shm's
 * fast RMA on libfabric 1.17). Such a write or read completes
 * inside its post: its success entry, or its failure with no context,
 * is in the CQ before anything posted after it can add one. So while
 * every write and read noted here completes in the order posted, a
 * failure with no context is the oldest's. Should one ever complete out
 * of that order (shm without process_vm_writev completes them later, in
 * the peer's time), order says nothing any more: the ring is dropped, and
 * such failures are counted as before, never guessed. Writes the provider
 * took as copies (post.h, TERN__PROV_TAKEN) are never noted: no entry of
 * theirs ever comes, and on this path shm returns their failure from the
 * call. Plain small writes carried through shm's queue ($TERN_INJECT=2)
 * are noted like any write: they too complete inside the post, in order,
 * with their context; the target drops a bad one without a word.
 */
void tern__sync_push(struct tern_rail *rail, void *context)
{
	if (rail->sync_n > rail->sync_mask) {
		/* More out than credits: cannot be; stop rather than
		 * overwrite. */
		tern__warn("rail %u: %u writes and reads out at once, past "
			   "its credits: no longer attributing failures that "
			   "name no request",
			   rail->idx, rail->sync_n);
		free(rail->sync_ring);
		rail->sync_ring = NULL;
		rail->sync_n = 0;
		return;
	}
	rail->sync_ring[(rail->sync_head + rail->sync_n) & rail->sync_mask] =
		context;
	rail->sync_n++;
}

static void *sync_pop(struct tern_rail *rail)
{
	void *context = rail->sync_ring[rail->sync_head];

	rail->sync_head = (rail->sync_head + 1) & rail->sync_mask;
	rail->sync_n--;
	return context;
}

/* Would tern__sync_note() have noted the operation of @cqe? */
static int sync_noted(const struct tern__cqe *cqe)
{
	const struct tern__req_priv *rp;

	if (cqe->req == NULL)
		return 0;
	rp = tern__rp(cqe->req);
	if (rp->xflags & TERN__XF_DELIVER)
		return 0;
	if (cqe->slot == NULL)
		return rp->op == TERN__OP_WRITE || rp->op == TERN__OP_READ;
	/* A striped chunk (posted without flags; a cut write with
	 * immediate's parts go with delivery complete or the immediate),
	 * or a batch's piece. */
	if (rp->sop != 0)
		return rp->sop != TERN__OP_WRITE_IMM;
	return rp->op == TERN__OP_PIECES && !rp->u.batch.with_imm;
}

/* @op_context (decoded into @cqe) completed on a rail with noted ones
 * out. */
static __attribute__((noinline)) void sync_done(struct tern_rail *rail,
						void *op_context,
						const struct tern__cqe *cqe)
{
	if (rail->sync_ring[rail->sync_head] == op_context) {
		sync_pop(rail);
		return;
	}
	if (!sync_noted(cqe))
		return;
	tern__info("rail %u: writes and reads complete out of post order: "
		   "failures that name no request are counted, no longer "
		   "attributed",
		   rail->idx);
	free(rail->sync_ring);
	rail->sync_ring = NULL;
	rail->sync_n = 0;
}

static inline int is_sink(struct tern_rail *rail, void *op_context)
{
	/* NULL, or anything below, wraps to a huge offset. */
	return (uintptr_t)op_context - (uintptr_t)rail->sink_ctx <
	       sizeof(rail->sink_ctx);
}

static int read_error(struct tern_rail *rail, struct tern__cqe *cqe)
{
	struct tern__prov_cqerr err;
	struct tern_req *req;
	int ret, attributed = 0;

	ret = tern__prov_cq_readerr(&rail->prov, rail->idx, &err);
	if (ret <= 0)
		return ret;
	if (err.context == NULL && err.tx_orphan && rail->sync_n != 0) {
		/* A write or read that failed inside its post: the oldest
		 * noted (tern__sync_push()). */
		err.context = sync_pop(rail);
		attributed = 1;
		snprintf(err.text, sizeof(err.text),
			 "rail %u: %s: the peer's memory at that address "
			 "could not be reached",
			 rail->idx, err.what);
	} else if (err.context == NULL || is_sink(rail, err.context)) {
		/* Logged at 1, 2, 4, 8... so a burst cannot flood the log
		 * (shm 1.17 reports failed writes to a dead process so). */
		rail->orphan_errs++;
		if ((rail->orphan_errs & (rail->orphan_errs - 1)) == 0)
			tern__warn("rail %u: completion error without a "
				   "request: %s (provider errno %d; %" PRIu64
				   " so far)",
				   rail->idx, err.what, err.prov_errno,
				   rail->orphan_errs);
		if (err.context != NULL)
			repost_sink(rail, err.context);
		return 0;
	}
	*cqe = (struct tern__cqe){
		.status = err.status,
		.len = err.len,
		.path = err.path,
	};
	decode_ctx(rail, err.context, cqe);
	if (rail->sync_n != 0 && !attributed)
		sync_done(rail, err.context, cqe);
	req = cqe->req;
	if (req == NULL) /* a message buffer's: bounce.c reports it */
		return 1;
	/* A batch keeps its first error's text. */
	if (req->errmsg[0] == '\0' || cqe->slot == NULL) {
		req->prov_errno = err.prov_errno;
		_Static_assert(sizeof(req->errmsg) == sizeof(err.text),
			       "error texts differ in size");
		memcpy(req->errmsg, err.text, sizeof(req->errmsg));
	}
	return 1;
}

int tern__rail_reap(struct tern_rail *rail, const struct tern__prov_cqent *ent,
		    ssize_t ret, const uint64_t *src, struct tern__cqe *cqe)
{
	int source = tern__prov_source_rma(&rail->prov);

	size_t got = 0;

	/* An empty CQ never comes here: tern__rail_poll() answers it. */
	if (ret == TERN__PROV_CQ_ERROR)
		return read_error(rail, cqe);
	if (ret < 0)
		return tern__prov_cq_failed(rail->idx, ret);
	for (ssize_t i = 0; i < ret; i++) {
		const struct tern__prov_cqent *e = &ent[i];
		void *op_context = tern__prov_cqent_ctx(e);
		uint64_t flags = tern__prov_cqent_flags(e);

		if (tern_unlikely((flags & TERN__CQ_REMOTE_WRITE) ||
				  is_sink(rail, op_context))) {
			/* A write with immediate landed here, maybe using up
			 * a receive: a sink, or a message buffer. */
			if (is_sink(rail, op_context))
				repost_sink(rail, op_context);
			else if ((uintptr_t)op_context -
					 (uintptr_t)rail->slots <
				 rail->slots_span)
				tern__bounce_absorbed(rail->ctx, op_context);
			if (!(flags & TERN__CQ_IMM))
				continue;
			cqe[got++] = (struct tern__cqe){
				.imm = 1,
				.data = tern__prov_cqent_data(e),
				.src = source ? tern__rail_src(rail, src[i])
					      : 0,
			};
			continue;
		}
		cqe[got] = (struct tern__cqe){
			.len = tern__prov_cqent_len(e),
			.data = tern__prov_cqent_data(e),
			.imm_data = (flags & TERN__CQ_IMM) != 0,
		};
		decode_ctx(rail, op_context, &cqe[got]);
		/* tern's own message (ctrl.c): who sent it. */
		if (tern_unlikely(cqe[got].slot != NULL) &&
		    cqe[got].req == NULL && tern__prov_source(&rail->prov))
			cqe[got].src = tern__rail_src(rail, src[i]);
		if (tern_unlikely(rail->sync_n != 0))
			sync_done(rail, op_context, &cqe[got]);
		got++;
	}
	return (int)got;
}
