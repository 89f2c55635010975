/* SPDX-License-Identifier: MIT */
/* The same-host path (local_*.c, docs/local.md), as the engine calls it. */
#ifndef TERN_LOCAL_H
#define TERN_LOCAL_H

#include "engine.h"

struct tern__card_local;

/* $TERN_LOCAL: 1 (default) lets same-host peers take the local path. */
int tern__local_enabled(void);
/* The ctx's inbox (after its loop: the wake eventfd). Never fails the
 * ctx: without it, every peer goes over the fabric (logged). */
int tern__local_open(struct tern_ctx *ctx);
void tern__local_close(struct tern_ctx *ctx);
/* What this ctx's card says about it, or NULL (path off). */
const struct tern__card_local *tern__local_id(const struct tern_ctx *ctx);

/* Regions: exported to same-host peers at registration, revoked (and
 * copies under way waited for) at close. */
void tern__local_mr_reg(struct tern_ctx *ctx, struct tern_mr *mr);
void tern__local_mr_close(struct tern_ctx *ctx, struct tern_mr *mr);

/* Peers: attach when the card's maker is on this host (else nothing). */
void tern__local_peer_add(struct tern_ctx *ctx, struct tern_peer *peer,
			  const struct tern__card_local *c);
void tern__local_peer_release(struct tern_ctx *ctx, struct tern_peer *peer);

/*
 * Operations on a peer with peer->local, prepared (prep()): done now and
 * completed from the next progress pass (0), or waiting for room in the
 * peer's ring on the local queue (0), or not local (1: the region is not
 * one the peer exported, or its memory is out of reach; nothing was
 * counted and the fabric takes it), or an error for the post (<0).
 */
int tern__local_rma(struct tern_ctx *ctx, struct tern_req *req,
		    const struct tern_mr_desc *rd, uint64_t roff);
int tern__local_atomic(struct tern_ctx *ctx, struct tern_req *req,
		       const struct tern_mr_desc *rd, uint64_t roff);
int tern__local_pieces(struct tern_ctx *ctx, struct tern_req *req);
/*
 * An implicit write (@op TERN__OP_WRITE or _WRITE_IMM) or read
 * (TERN__OP_READ) done in the call, when the peer's region is host memory
 * it shares with us mapped and nothing of ours waits for it: 0 (copied;
 * a write's immediate is in its ring, the peer woken by the next progress
 * pass), 1 (not now: post it as an explicit one), or an error the
 * explicit post would return, or its copy's (the copy is the operation).
 */
int tern__local_now(struct tern_ctx *ctx, struct tern_peer *peer,
		    struct tern_mr *mr, void *buf, size_t len,
		    const struct tern_mr_desc *rd, uint64_t roff, uint8_t op,
		    uint32_t imm);

/* The epoll tag of the peers' pidfds, and what the loop calls when one
 * fires (a peer's process ended: the next progress pass looks). */
void *tern__local_ev(struct tern_ctx *ctx);
void tern__local_exited(struct tern_ctx *ctx);

/* Progress: immediates from the rings (how many), and the local queue. */
int tern__local_poll(struct tern_ctx *ctx);
int tern__local_flush(struct tern_ctx *ctx);
/* Something for progress to do (the queue, or a ring not read). */
int tern__local_pending(const struct tern_ctx *ctx);
/* The loop is about to sleep (1: returns whether it must not after all)
 * or woke (0). */
int tern__local_sleep(struct tern_ctx *ctx, int on);
/* Cancel @req, queued on the local path (ST_LOCALQ), with @status; and
 * every operation still queued (ctx drain). */
void tern__local_cancel(struct tern_ctx *ctx, struct tern_req *req, int status);
void tern__local_cancel_all(struct tern_ctx *ctx, int status);
/* Finish every operation queued for @peer with @status. */
void tern__local_abort_peer(struct tern_ctx *ctx, struct tern_peer *peer,
			    int status);

#endif /* TERN_LOCAL_H */
