/* SPDX-License-Identifier: MIT */
/*
 * Staging: moving CUDA memory the provider cannot reach through a pinned
 * host shadow (tern/hmem.h). A user request on a staged region becomes a
 * sequence of chunks; each chunk is a copy on the ctx's CUDA stream and an
 * inner operation on the shadow region, and at most `depth` chunks are
 * active per ctx. Sources: copy GPU -> shadow, then post. Sinks: post, then
 * copy shadow -> GPU. The request completes once, after its last chunk.
 */
#ifndef TERN_HMEM_STAGE_H
#define TERN_HMEM_STAGE_H

#include <stdint.h>

struct tern_ctx;
struct tern_req;
struct tern_peer;
struct tern__cu;

#define TERN_STAGE_CHUNK_DEFAULT (1ULL << 20)
#define TERN_STAGE_DEPTH_DEFAULT 8
#define TERN_STAGE_DEPTH_MAX	 64
/* Staged receives waiting for a message at once, per ctx (more wait in
 * order for one of these). */
#define TERN_STAGE_RECVS 64

/* The ctx's staging state; @cu NULL: no CUDA (tern_mr_sync() on host
 * regions only). CUDA's stream is made on first need. @return 0 or
 * -errno. */
int tern__stage_open(struct tern_ctx *ctx, const struct tern__cu *cu,
		     int device);
/* The CUDA device the ctx stages for, or -1. */
int tern__stage_device(const struct tern_ctx *ctx);
/* Start staging @req, whose _priv the posting call filled. */
void tern__stage_submit(struct tern_ctx *ctx, struct tern_req *req);
/* Advance copies and start chunks. @return requests completed. */
int tern__stage_progress(struct tern_ctx *ctx);
/* 1 while copies are running: the loop must poll, not sleep. */
int tern__stage_busy(const struct tern_ctx *ctx);
/* 1 while any staged request is unfinished. */
int tern__stage_alive(const struct tern_ctx *ctx);
/* Cancel @req (state TERN__ST_STAGING); it completes -ECANCELED once its
 * active chunks have ended (at once if none). */
void tern__stage_cancel(struct tern_ctx *ctx, struct tern_req *req);
/* Cancel every staged request of @peer (NULL: all): each completes with
 * @status (-ECANCELED, or -TERN_EPEERGONE) once its active chunks end. */
void tern__stage_cancel_peer(struct tern_ctx *ctx, struct tern_peer *peer,
			     int status);
/* Wait for every copy on the stream (before shadows are freed). */
void tern__stage_quiesce(struct tern_ctx *ctx);
/* Complete what is left -ECANCELED and free everything. */
void tern__stage_close(struct tern_ctx *ctx);
#endif /* TERN_HMEM_STAGE_H */
