/* SPDX-License-Identifier: MIT */
/*
 * Untagged messaging, for a provider without FI_TAGGED (efa-direct).
 *
 * Where messages are tagged, tern's receives wait in the provider and
 * match by tag, apart from the receives that absorb writes with remote CQ
 * data. Without tags every posted receive takes whatever arrives first,
 * a message or (under FI_RX_CQ_DATA) a write's immediate, so user buffers
 * cannot be handed to the provider. Instead rail 0 keeps its own receive
 * buffers posted, one message (at most the provider's largest, capped at
 * TERN__BOUNCE_LEN) each; a message that lands is copied into the oldest
 * queued tern_recv(), or kept until one comes. Messages are small here
 * (efa-direct's are at most the MTU, about 8 KiB): one copy is cheap next
 * to the round trip, and bulk data goes by RMA.
 *
 * Messages no receive has taken yet are copied aside, up to
 * TERN__UNEXP_MAX bytes; past that the buffers they landed in are held
 * instead, and once every buffer is held the provider stops accepting
 * messages: senders wait (the provider retries), nothing is dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Receive buffers kept posted on rail 0 (fewer if the queue is small). */
#define TERN__BOUNCES 64
/* Largest message in untagged mode. */
#define TERN__BOUNCE_LEN (64 * 1024)
/* Bytes of unclaimed messages copied aside before buffers are held. */
#define TERN__UNEXP_MAX (16 * 1024 * 1024)

unsigned int tern__bounce_count(const struct tern_ctx *ctx)
{
	size_t n = ctx->caps.rx_size / 2;

	return (unsigned int)(n < TERN__BOUNCES ? n : TERN__BOUNCES);
}

static struct tern__slot *bounce_slot(struct tern_ctx *ctx, unsigned int i)
{
	return &ctx->rails[0].slots[ctx->caps.tx_size + i];
}

static unsigned int bounce_idx(struct tern_ctx *ctx,
			       const struct tern__slot *slot)
{
	return (unsigned int)(slot - ctx->rails[0].slots - ctx->caps.tx_size);
}

static int repost(struct tern_ctx *ctx, unsigned int i)
{
	struct tern__bounce *b = ctx->bounce;
	ssize_t ret;
	char msg[64];
	int prov_errno;

	ret = tern__prov_recv(&ctx->rails[0].prov, b->buf + (size_t)i * b->len,
			      b->len, b->mr->desc[0],
			      bounce_slot(ctx, i)->fictx);
	if (ret == 0)
		return 0;
	tern__prov_post_error(ret, msg, sizeof(msg), &prov_errno);
	tern__warn("rail 0: posting a message receive: %s (one of %u fewer)",
		   msg + 6 /* after "post: " */, b->n);
	return -TERN_EPROV;
}

int tern__bounce_open(struct tern_ctx *ctx)
{
	struct tern__bounce *b;
	int ret;

	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	b->n = tern__bounce_count(ctx);
	b->len = ctx->max_msg_size < TERN__BOUNCE_LEN ? ctx->max_msg_size
						      : TERN__BOUNCE_LEN;
	b->ent = calloc(b->n, sizeof(*b->ent));
	if (b->ent == NULL ||
	    posix_memalign((void **)&b->buf, 128, (size_t)b->n * b->len) != 0) {
		free(b->ent);
		free(b);
		return -ENOMEM;
	}
	ret = tern__mr_reg_own(ctx, b->buf, (size_t)b->n * b->len,
			       TERN_ACCESS_LOCAL, &b->mr);
	if (ret != 0) {
		free(b->buf);
		free(b->ent);
		free(b);
		return ret;
	}
	ctx->nmr--; /* tern's own: not the user's to close */
	b->copy_max = TERN__UNEXP_MAX;
	ctx->bounce = b;
	/* A send larger than a receive buffer would be truncated there. */
	ctx->max_msg_size = b->len;
	ret = tern__bounce_post_all(ctx);
	if (ret != 0)
		return ret; /* tern_ctx_open closes what is open */
	tern__info("untagged messages: %u receive buffers of %zu B on rail 0",
		   b->n, b->len);
	return 0;
}

int tern__bounce_post_all(struct tern_ctx *ctx)
{
	for (unsigned int i = 0; i < ctx->bounce->n; i++) {
		int ret = repost(ctx, i);

		if (ret != 0)
			return ret;
	}
	return 0;
}

void tern__bounce_close(struct tern_ctx *ctx, int held)
{
	struct tern__bounce *b = ctx->bounce;
	struct tern__unexp *e;

	if (b == NULL)
		return;
	while ((e = b->head) != NULL) {
		b->head = e->next;
		if (e->bounce < 0)
			free(e);
	}
	ctx->nmr++;
	tern__mr_close(b->mr);
	/* A receive the provider still holds may land in it. */
	if (!held)
		free(b->buf);
	else
		tern__keep(b->buf);
	free(b->ent);
	free(b);
	ctx->bounce = NULL;
}

/* Hand message @src (@len bytes) to queued receive @req. */
static void deliver(struct tern_ctx *ctx, struct tern_req *req, const void *src,
		    size_t len, uint64_t data, int imm_data)
{
	int status = 0;

	if (len > req->len) {
		status = -TERN_ETRUNC;
		memcpy(tern__rp(req)->buf, src, req->len);
	} else {
		memcpy(tern__rp(req)->buf, src, len);
	}
	req->len = len;
	if (imm_data) {
		req->imm = (uint32_t)data;
		req->flags |= TERN_REQ_F_IMM;
	}
	tern__reqq_remove(&ctx->rails[0].rxq, req);
	tern__req_complete(ctx, req, status);
}

void tern__bounce_match(struct tern_ctx *ctx)
{
	struct tern__bounce *b = ctx->bounce;
	struct tern__reqq *rxq = &ctx->rails[0].rxq;
	struct tern__unexp *e;

	while ((e = b->head) != NULL && rxq->head != NULL) {
		b->head = e->next;
		if (b->head == NULL)
			b->tail = NULL;
		if (e->bounce >= 0) {
			deliver(ctx, rxq->head,
				b->buf + (size_t)e->bounce * b->len, e->len,
				e->data, e->imm_data);
			b->held--;
			repost(ctx, (unsigned int)e->bounce);
		} else {
			deliver(ctx, rxq->head, e->bytes, e->len, e->data,
				e->imm_data);
			b->copied -= e->len;
			free(e);
		}
	}
}

static void keep(struct tern_ctx *ctx, unsigned int i, size_t len,
		 uint64_t data, int imm_data)
{
	struct tern__bounce *b = ctx->bounce;
	const uint8_t *src = b->buf + (size_t)i * b->len;
	struct tern__unexp *e = NULL;

	if (b->copied + len <= b->copy_max)
		e = malloc(sizeof(*e) + len);
	if (e != NULL) {
		memcpy(e->bytes, src, len);
		e->bounce = -1;
		b->copied += len;
	} else {
		/* Hold the buffer: senders wait once all are held. */
		e = &b->ent[i];
		e->bounce = (int)i;
		if (b->held++ == 0)
			tern__info("rail 0: %zu B of messages wait for "
				   "tern_recv(): holding receive buffers",
				   b->copied);
	}
	e->next = NULL;
	e->len = len;
	e->data = data;
	e->imm_data = imm_data;
	if (b->tail != NULL)
		b->tail->next = e;
	else
		b->head = e;
	b->tail = e;
	if (e->bounce < 0)
		repost(ctx, i);
}

int tern__bounce_done(struct tern_ctx *ctx, const struct tern__cqe *c)
{
	struct tern__bounce *b = ctx->bounce;
	unsigned int i = bounce_idx(ctx, c->slot);
	struct tern_req *req = ctx->rails[0].rxq.head;

	if (c->status != 0) {
		if (c->status == -ECANCELED || ctx->closing)
			return 0;
		/* A message longer than our buffers (a peer with a larger
		 * MTU, or a hostile one): the provider cut it. Say so. */
		tern__warn("rail 0: a message failed to arrive: %s (%s)",
			   tern_strerror(c->status),
			   c->status == -TERN_ETRUNC
				   ? "longer than tern's receive buffers"
				   : "provider error");
		repost(ctx, i);
		return 0;
	}
	if (req != NULL) {
		deliver(ctx, req, b->buf + (size_t)i * b->len, c->len, c->data,
			c->imm_data);
		repost(ctx, i);
	} else {
		keep(ctx, i, c->len, c->data, c->imm_data);
	}
	/* Its callback runs from ctx->ready, at the end of this pass. */
	return 0;
}

void tern__bounce_absorbed(struct tern_ctx *ctx, const struct tern__slot *slot)
{
	repost(ctx, bounce_idx(ctx, slot));
}
