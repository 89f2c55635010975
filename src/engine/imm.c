/* SPDX-License-Identifier: MIT */
/*
 * Immediate-data counters. Writes with immediate may land before anyone
 * expects them and in any order (EFA SRD is unordered), so arrivals are
 * counted per 32-bit value in an open-addressing table, and an expectation
 * completes when its count is reached. The table grows (a slow path, off the
 * per-operation hot path) up to a cap that bounds what peers can make us
 * allocate; arrivals beyond it are counted as dropped and logged.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include "engine.h"

#define IMM_CAP_MIN 256
#define IMM_CAP_MAX (1u << 20)

/*
 * Fibonacci hashing on a per-ctx random key, taking the top bits: values a
 * peer picks (e.g. all sharing their low bits) cannot pile into one probe
 * run, whose removals would cost quadratic time.
 */
static inline size_t imm_hash(const struct tern__imm_table *t, uint32_t imm)
{
	return (size_t)(((imm ^ t->key) * 0x9E3779B97F4A7C15ULL) >> t->shift);
}

static unsigned int log2_cap(size_t cap)
{
	unsigned int n = 0;

	while (((size_t)1 << n) < cap)
		n++;
	return n;
}

int tern__imm_init(struct tern__imm_table *t)
{
	t->slots = calloc(IMM_CAP_MIN, sizeof(*t->slots));
	if (t->slots == NULL)
		return -ENOMEM;
	t->cap = IMM_CAP_MIN;
	t->shift = 64 - log2_cap(t->cap);
	t->used = 0;
	t->dropped = 0;
	if (getrandom(&t->key, sizeof(t->key), GRND_NONBLOCK) != sizeof(t->key))
		t->key = tern__now_ns();
	return 0;
}

void tern__imm_fini(struct tern__imm_table *t)
{
	free(t->slots);
	t->slots = NULL;
}

static struct tern__imm_slot *lookup(struct tern__imm_table *t, uint32_t imm)
{
	for (size_t i = imm_hash(t, imm);; i = (i + 1) & (t->cap - 1)) {
		struct tern__imm_slot *s = &t->slots[i];

		if (!s->used || s->imm == imm)
			return s;
	}
}

static int grow(struct tern__imm_table *t)
{
	struct tern__imm_table n = { .cap = t->cap * 2,
				     .used = t->used,
				     .dropped = t->dropped };

	if (n.cap > IMM_CAP_MAX)
		return -ENOSPC;
	n.shift = 64 - log2_cap(n.cap);
	n.slots = calloc(n.cap, sizeof(*n.slots));
	if (n.slots == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (t->slots[i].used)
			*lookup(&n, t->slots[i].imm) = t->slots[i];
	}
	free(t->slots);
	*t = n;
	return 0;
}

/* Find or make the slot of @imm. NULL when the table is full. */
static struct tern__imm_slot *slot_get(struct tern__imm_table *t, uint32_t imm)
{
	struct tern__imm_slot *s = lookup(t, imm);

	if (s->used)
		return s;
	if ((t->used + 1) * 2 > t->cap) {
		if (grow(t) != 0)
			return NULL;
		s = lookup(t, imm);
	}
	s->used = 1;
	s->imm = imm;
	t->used++;
	return s;
}

/* Remove a slot, re-inserting the rest of its probe run (linear probing). */
static void slot_del(struct tern__imm_table *t, struct tern__imm_slot *s)
{
	size_t i = (size_t)(s - t->slots);

	s->used = 0;
	t->used--;
	for (i = (i + 1) & (t->cap - 1); t->slots[i].used;
	     i = (i + 1) & (t->cap - 1)) {
		struct tern__imm_slot moved = t->slots[i];

		t->slots[i].used = 0;
		*lookup(t, moved.imm) = moved;
	}
}

static void expectation_done(struct tern_ctx *ctx, struct tern__imm_slot *s)
{
	struct tern_req *req = s->req;

	s->arrived -= tern__rp(req)->u.expect.count;
	s->req = NULL;
	ctx->nexpect--;
	if (s->arrived == 0)
		slot_del(&ctx->imm, s);
	ctx->imm_completed++;
	/* Only progress gets here (a CQ entry, tern__imm_poll()). */
	tern__req_complete_now(ctx, req, 0);
}

void tern__imm_arrived(struct tern_ctx *ctx, uint32_t imm)
{
	struct tern__imm_slot *s = slot_get(&ctx->imm, imm);

	if (s == NULL) {
		if (ctx->imm.dropped++ == 0)
			tern_warn("immediate-data table full (%zu values "
				  "outstanding): arrivals not counted",
				  ctx->imm.used);
		return;
	}
	s->arrived++;
	if (s->req != NULL && !tern__rp(s->req)->ready &&
	    s->arrived >= tern__rp(s->req)->u.expect.count)
		expectation_done(ctx, s);
}

int tern_imm_expect(struct tern_ctx *ctx, uint32_t imm, uint64_t count,
		    struct tern_req *req)
{
	struct tern__imm_slot *s;

	if (ctx == NULL || req == NULL || count == 0)
		return -EINVAL;
	if (ctx->closing)
		return -ECANCELED;
	s = slot_get(&ctx->imm, imm);
	if (s == NULL)
		return -ENOSPC;
	if (s->req != NULL)
		return -EBUSY;
	/* Results cleared as for any post (the request may be reused). */
	tern__req_fill(ctx, req, TERN__OP_IMM_EXPECT, NULL, NULL, NULL,
		       (size_t)count);
	tern__rp(req)->u.expect.count = count;
	tern__rp(req)->imm = imm;
	tern__rp(req)->state = TERN__ST_WAITING;
	s->req = req;
	ctx->nexpect++;
	/* Already there? It completes at the next progress, never here. */
	tern__rp(req)->ready = s->arrived >= count;
	if (tern__rp(req)->ready)
		tern__reqq_push(&ctx->imm_ready, req);
	return 0;
}

/* Complete expectations that earlier arrivals had already satisfied. */
void tern__imm_poll(struct tern_ctx *ctx)
{
	struct tern_req *req;

	while ((req = tern__reqq_pop(&ctx->imm_ready)) != NULL) {
		tern__rp(req)->ready = 0;
		expectation_done(ctx, lookup(&ctx->imm, tern__rp(req)->imm));
	}
}

void tern__imm_cancel_all(struct tern_ctx *ctx)
{
	struct tern__imm_table *t = &ctx->imm;

	ctx->imm_ready = (struct tern__reqq){ 0 };
	for (size_t i = 0; i < t->cap; i++) {
		struct tern_req *req = t->slots[i].req;

		if (t->slots[i].used && req != NULL) {
			t->slots[i].req = NULL;
			ctx->nexpect--;
			tern__req_complete(ctx, req, -ECANCELED);
		}
	}
}

void tern__imm_cancel(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__imm_slot *s = lookup(&ctx->imm, tern__rp(req)->imm);

	if (tern__rp(req)->ready) {
		tern__rp(req)->ready = 0;
		tern__reqq_remove(&ctx->imm_ready, req);
	}
	if (s->used && s->req == req) {
		s->req = NULL;
		ctx->nexpect--;
		if (s->arrived == 0)
			slot_del(&ctx->imm, s);
	}
	tern__req_complete(ctx, req, -ECANCELED);
}

uint64_t tern_imm_count(const struct tern_ctx *ctx, uint32_t imm)
{
	const struct tern__imm_table *t = &ctx->imm;

	for (size_t i = imm_hash(t, imm);; i = (i + 1) & (t->cap - 1)) {
		if (!t->slots[i].used)
			return 0;
		if (t->slots[i].imm == imm)
			return t->slots[i].arrived;
	}
}
