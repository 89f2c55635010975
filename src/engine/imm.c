/* SPDX-License-Identifier: MIT */
/*
 * Immediate-data counters. Writes with immediate may land before anyone
 * expects them and in any order (EFA SRD is unordered), so arrivals are
 * counted per 32-bit value in an open-addressing table, and an expectation
 * completes when its count is reached. The table grows (a slow path, off the
 * per-operation hot path) up to a cap that bounds what peers can make us
 * allocate; arrivals beyond it are counted as dropped and logged.
 *
 * The table is keyed by (source, imm). Source 0 is the imm's own entry:
 * every arrival counts there, whoever sent it (tern_imm_expect(),
 * tern_imm_count()). Where the CQ says who sent a write (FI_SOURCE), an
 * arrival from a known peer also counts in that peer's entry, for
 * tern_imm_expect_from(); the imm's entry keeps how many of its arrivals
 * are so "sourced". An expectation from a peer claims arrivals from its
 * entry (and the imm's); an any-peer one claims those of unknown source
 * first, then peers' (in the order of ctx->peers). At most one
 * expectation waits per (source, imm), and an imm has either one any-peer
 * expectation or expectations from peers, never both at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine.h"

#define IMM_CAP_MIN 256
#define IMM_CAP_MAX (1u << 20)

_Static_assert(sizeof(struct tern_timer) <=
		       sizeof(((struct tern__req_priv *)0)->fictx),
	       "an expectation's timer does not fit its provider context");

static inline uint64_t key_of(uint32_t src, uint32_t imm)
{
	return (uint64_t)src << 32 | imm;
}

/*
 * Fibonacci hashing on a per-ctx random key, taking the top bits: values a
 * peer picks (e.g. all sharing their low bits) cannot pile into one probe
 * run, whose removals would cost quadratic time.
 */
static inline size_t imm_hash(const struct tern__imm_table *t, uint64_t key)
{
	return (size_t)(((key ^ t->key) * 0x9E3779B97F4A7C15ULL) >> t->shift);
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

static struct tern__imm_slot *lookup(const struct tern__imm_table *t,
				     uint64_t key)
{
	for (size_t i = imm_hash(t, key);; i = (i + 1) & (t->cap - 1)) {
		struct tern__imm_slot *s = &t->slots[i];

		if (!s->used || s->key == key)
			return s;
	}
}

/* The entry of @key, or NULL. */
static struct tern__imm_slot *find(const struct tern__imm_table *t,
				   uint64_t key)
{
	struct tern__imm_slot *s = lookup(t, key);

	return s->used ? s : NULL;
}

static int grow(struct tern__imm_table *t)
{
	struct tern__imm_table n = { .cap = t->cap * 2,
				     .used = t->used,
				     .key = t->key,
				     .dropped = t->dropped };

	if (n.cap > IMM_CAP_MAX)
		return -ENOSPC;
	n.shift = 64 - log2_cap(n.cap);
	n.slots = calloc(n.cap, sizeof(*n.slots));
	if (n.slots == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (t->slots[i].used)
			*lookup(&n, t->slots[i].key) = t->slots[i];
	}
	free(t->slots);
	*t = n;
	return 0;
}

/* Find or make the entry of @key. NULL when the table is full. It may
 * grow the table: any other entry pointer is stale after. */
static struct tern__imm_slot *slot_get(struct tern__imm_table *t, uint64_t key)
{
	struct tern__imm_slot *s = lookup(t, key);

	if (s->used)
		return s;
	if ((t->used + 1) * 2 > t->cap) {
		if (grow(t) != 0)
			return NULL;
		s = lookup(t, key);
	}
	*s = (struct tern__imm_slot){ .used = 1, .key = key };
	t->used++;
	return s;
}

/* Remove a slot, re-inserting the rest of its probe run (linear probing):
 * any other entry pointer is stale after. */
static void slot_del(struct tern__imm_table *t, struct tern__imm_slot *s)
{
	size_t i = (size_t)(s - t->slots);

	s->used = 0;
	t->used--;
	for (i = (i + 1) & (t->cap - 1); t->slots[i].used;
	     i = (i + 1) & (t->cap - 1)) {
		struct tern__imm_slot moved = t->slots[i];

		t->slots[i].used = 0;
		*lookup(t, moved.key) = moved;
	}
}

/* Drop the entry of @key if it holds nothing any more. */
static void maybe_del(struct tern__imm_table *t, uint64_t key)
{
	struct tern__imm_slot *s = find(t, key);

	if (s != NULL && s->arrived == 0 && s->req == NULL && s->nfrom == 0)
		slot_del(t, s);
}

static struct tern_timer *expect_timer(struct tern_req *req)
{
	return (struct tern_timer *)(void *)tern__rp(req)->fictx;
}

/* An any-peer expectation claims @n arrivals of @imm: those of unknown
 * source first, then peers' entries. */
static void claim_any(struct tern_ctx *ctx, uint32_t imm, uint64_t n)
{
	struct tern__imm_table *t = &ctx->imm;
	struct tern__imm_slot *s0 = find(t, key_of(0, imm));
	uint64_t unsourced = s0->arrived - s0->sourced;
	uint64_t rest = n > unsourced ? n - unsourced : 0;

	s0->arrived -= n;
	for (struct tern_peer *p = ctx->peers; p != NULL && rest > 0;
	     p = p->next) {
		struct tern__imm_slot *ps = find(t, key_of(p->src_id, imm));
		uint64_t take;

		if (ps == NULL || ps->arrived == 0)
			continue;
		take = TERN_MIN(ps->arrived, rest);
		ps->arrived -= take;
		rest -= take;
		find(t, key_of(0, imm))->sourced -= take;
		maybe_del(t, key_of(p->src_id, imm));
	}
	/* Sources forgotten keep none (tern__imm_src_forget()). */
	s0 = find(t, key_of(0, imm));
	s0->sourced -= TERN_MIN(rest, s0->sourced);
}

/*
 * Take @req off the table: no longer waiting, its timer stopped. With
 * @claim its count is taken from the arrivals; with @del empty entries
 * go (never while a caller walks the table). @return the arrivals it had
 * counted (before any claim).
 */
static uint64_t detach(struct tern_ctx *ctx, struct tern_req *req, int claim,
		       int del)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__imm_table *t = &ctx->imm;
	uint32_t src = rp->u.expect.src, imm = rp->imm;
	uint64_t count = rp->u.expect.count, arrived;
	struct tern__imm_slot *s0, *ps;

	if (rp->ready) {
		rp->ready = 0;
		tern__reqq_remove(&ctx->imm_ready, req);
	}
	if (rp->xflags & TERN__XF_TIMER) {
		rp->xflags &= (uint8_t)~TERN__XF_TIMER;
		tern_timer_stop(expect_timer(req));
	}
	ctx->nexpect--;
	s0 = find(t, key_of(0, imm));
	if (src != 0) {
		ps = find(t, key_of(src, imm));
		ps->req = NULL;
		s0->nfrom--;
		if (rp->peer != NULL)
			rp->peer->nexpect--;
		arrived = ps->arrived;
		if (claim) {
			ps->arrived -= count;
			s0->arrived -= count;
			s0->sourced -= count;
		}
	} else {
		s0->req = NULL;
		arrived = s0->arrived;
		if (claim)
			claim_any(ctx, imm, count);
	}
	if (del) {
		if (src != 0)
			maybe_del(t, key_of(src, imm));
		maybe_del(t, key_of(0, imm));
	}
	return arrived;
}

/* Only progress gets here (a CQ entry, tern__imm_poll()). */
static void expectation_done(struct tern_ctx *ctx, struct tern_req *req)
{
	detach(ctx, req, 1, 1);
	ctx->imm_completed++;
	tern__req_complete_now(ctx, req, 0);
}

/* @req fails with @status from the next progress pass; req->len is what
 * had arrived toward it, left unclaimed. */
static void expectation_fail(struct tern_ctx *ctx, struct tern_req *req,
			     int status, int del)
{
	req->len = detach(ctx, req, 0, del);
	tern__req_complete(ctx, req, status);
}

void tern__imm_arrived(struct tern_ctx *ctx, uint32_t imm, uint32_t src)
{
	struct tern__imm_table *t = &ctx->imm;
	struct tern__imm_slot *s = slot_get(t, key_of(0, imm)), *ps = NULL;
	struct tern_req *req;

	if (s == NULL) {
		if (t->dropped++ == 0)
			tern__warn("immediate-data table full (%zu values "
				   "outstanding): arrivals not counted",
				   t->used);
		return;
	}
	if (tern_unlikely(src != 0)) {
		/* Full: it counts as of an unknown source. */
		ps = slot_get(t, key_of(src, imm));
		s = find(t, key_of(0, imm));
		if (ps != NULL) {
			ps->arrived++;
			s->sourced++;
		}
	}
	s->arrived++;
	if (ps != NULL && ps->req != NULL) {
		req = ps->req;
		if (!tern__rp(req)->ready &&
		    ps->arrived >= tern__rp(req)->u.expect.count)
			expectation_done(ctx, req);
		return;
	}
	req = s->req;
	if (req != NULL && !tern__rp(req)->ready &&
	    s->arrived >= tern__rp(req)->u.expect.count)
		expectation_done(ctx, req);
}

/* ---- aborts a sender announced before anyone expected them ---- */

static void abort_del(struct tern_ctx *ctx, unsigned int i)
{
	memmove(&ctx->aborts[i], &ctx->aborts[i + 1],
		(ctx->naborts - i - 1) * sizeof(ctx->aborts[0]));
	ctx->naborts--;
}

/* Remember an abort of (@src, @imm): once; at most TERN__ABORTS_PER_SRC
 * of one source and TERN__ABORTS in all, the oldest forgotten first. */
static void abort_remember(struct tern_ctx *ctx, uint32_t src, uint32_t imm)
{
	unsigned int n = 0, oldest = 0;

	for (unsigned int i = 0; i < ctx->naborts; i++) {
		if (ctx->aborts[i].src != src)
			continue;
		if (ctx->aborts[i].imm == imm)
			return;
		if (n++ == 0)
			oldest = i;
	}
	if (n >= TERN__ABORTS_PER_SRC)
		abort_del(ctx, oldest);
	else if (ctx->naborts == TERN__ABORTS)
		abort_del(ctx, 0);
	ctx->aborts[ctx->naborts++] = (struct tern__imm_abort){ .src = src,
								.imm = imm };
}

/* Take a remembered abort an expectation from @src (0: any peer) for
 * @imm meets. */
static int abort_take(struct tern_ctx *ctx, uint32_t src, uint32_t imm)
{
	for (unsigned int i = 0; i < ctx->naborts; i++) {
		if (ctx->aborts[i].imm == imm &&
		    (src == 0 || ctx->aborts[i].src == src)) {
			abort_del(ctx, i);
			return 1;
		}
	}
	return 0;
}

/* Log at 1, 2, 4, 8...: a peer cannot flood the log. */
static int pow2(uint64_t n)
{
	return (n & (n - 1)) == 0;
}

/* A repeat (@stamp) that cannot be checked: its write is the sender's
 * abort, told to its expectation, never counted twice. */
static void unchecked(struct tern_ctx *ctx, uint32_t imm, uint32_t src,
		      uint32_t stamp, const char *why)
{
	if (pow2(++ctx->imm_unchecked))
		tern__warn("imm %" PRIu32 " (number %" PRIu32 ") told as "
			   "aborted: %s (%" PRIu64 " so far)",
			   imm, stamp & tern__stamp_max(stamp), why,
			   ctx->imm_unchecked);
	tern__imm_aborted(ctx, imm, src);
}

void tern__stamp_layout(struct tern_ctx *ctx, uint32_t tag)
{
	ctx->stamp_max = tag != 0 ? TERN__STAMP_TSEQ_MAX : TERN__STAMP_SEQ_MAX;
	ctx->stamp_hi = tag != 0 ? TERN__STAMP_TAGGED |
					   tag << TERN__STAMP_TAG_SHIFT
				 : 0;
}

/* The stamps of who sent @stamp: found by its tag where tagged, else by
 * the source the CQ names (@src); NULL, with *@why, where none can be. */
static struct tern__stamps *stamps_find(const struct tern_ctx *ctx,
					uint32_t stamp, uint32_t src,
					const char **why)
{
	if (stamp & TERN__STAMP_TAGGED) {
		src = ctx->tag_src != NULL
			      ? ctx->tag_src[tern__stamp_tag_of(stamp)]
			      : 0;
		*why = src == TERN__TAG_SHARED
			       ? "a repeated write with immediate whose "
				 "sender's tag two peers of this ctx share "
				 "cannot be checked"
			       : "a repeated write with immediate whose "
				 "sender's tag names no peer of this ctx "
				 "cannot be checked";
	} else {
		*why = "a repeated write with immediate from a sender the "
		       "CQ does not name, or this ctx has not added as a "
		       "peer, cannot be checked";
	}
	return src < ctx->nstamps_of ? ctx->stamps_of[src] : NULL;
}

void tern__imm_stamped(struct tern_ctx *ctx, uint64_t data, uint32_t src)
{
	uint32_t imm = (uint32_t)data, stamp = (uint32_t)(data >> 32);
	int repeat = (stamp & TERN__STAMP_REPEAT) != 0;
	const char *why;
	struct tern__stamps *st = stamps_find(ctx, stamp, src, &why);

	if (st != NULL && st->win == NULL) {
		st->win = calloc(1, sizeof(*st->win));
		why = "no memory for its sender's window";
	}
	if (st == NULL || st->win == NULL) {
		/* No window: an original counts, a repeat cannot. */
		if (!repeat)
			tern__imm_arrived(ctx, imm, src);
		else
			unchecked(ctx, imm, src, stamp, why);
		return;
	}
	switch (tern__dedup_check(st->win, stamp)) {
	case TERN__DEDUP_COUNT:
		tern__imm_arrived(ctx, imm, src);
		return;
	case TERN__DEDUP_DUP:
		ctx->imm_dups++;
		tern__debug("imm %" PRIu32 " (number %" PRIu32 ") arrived "
			    "again after a rail failure: counted once",
			    imm, stamp & tern__stamp_max(stamp));
		if (pow2(ctx->imm_dups))
			tern__warn("writes with immediate repeated after a "
				   "rail failure: %" PRIu64 " second "
				   "arrival(s) not counted",
				   ctx->imm_dups);
		return;
	default:
		unchecked(ctx, imm, src, stamp,
			  "a repeated write with immediate whose first "
			  "attempt may have been counted out of what this ctx "
			  "remembers of its sender");
		return;
	}
}

void tern__imm_aborted(struct tern_ctx *ctx, uint32_t imm, uint32_t src)
{
	struct tern__imm_slot *s = find(&ctx->imm, key_of(0, imm));

	if (s != NULL && s->req != NULL) {
		expectation_fail(ctx, s->req, -TERN_EABORTED, 1);
		return;
	}
	if (src != 0 && s != NULL && s->nfrom != 0) {
		struct tern__imm_slot *ps = find(&ctx->imm, key_of(src, imm));

		if (ps != NULL && ps->req != NULL) {
			expectation_fail(ctx, ps->req, -TERN_EABORTED, 1);
			return;
		}
	}
	abort_remember(ctx, src, imm);
}

static void expect_timeout(struct tern_timer *timer)
{
	struct tern_req *req = timer->data;

	/* Its timer has run: nothing to stop. */
	tern__rp(req)->xflags &= (uint8_t)~TERN__XF_TIMER;
	expectation_fail(tern__rp(req)->ctx, req, -ETIMEDOUT, 1);
}

int tern_imm_expect_from(struct tern_ctx *ctx, struct tern_peer *peer,
			 uint32_t imm, uint64_t count, int timeout_ms,
			 struct tern_req *req)
{
	struct tern__imm_table *t;
	struct tern__imm_slot *s0, *s;
	uint32_t src = 0;

	if (ctx == NULL || req == NULL || count == 0 ||
	    (peer != NULL && peer->ctx != ctx))
		return -EINVAL;
	if (ctx->closing)
		return -ECANCELED;
	if (peer != NULL) {
		if (peer->removed || peer->removing)
			return -ECANCELED;
		if (peer->gone)
			return -TERN_EPEERGONE;
		/* A same-host peer's writes come through its slot of our
		 * inbox, whose memory holds its ring (local_*.c). */
		if (!ctx->imm_source && peer->local == NULL)
			return -TERN_ENOTSUP;
		src = peer->src_id;
	}
	t = &ctx->imm;
	s0 = slot_get(t, key_of(0, imm));
	if (s0 == NULL)
		return -ENOSPC;
	if (src != 0) {
		s = slot_get(t, key_of(src, imm));
		if (s == NULL) {
			maybe_del(t, key_of(0, imm));
			return -ENOSPC;
		}
		s0 = find(t, key_of(0, imm));
		if (s->req != NULL || s0->req != NULL) {
			maybe_del(t, key_of(src, imm));
			return -EBUSY;
		}
	} else {
		s = s0;
		if (s->req != NULL || s->nfrom != 0)
			return -EBUSY;
	}
	/* Results cleared as for any post (the request may be reused). */
	tern__req_fill(ctx, req, TERN__OP_IMM_EXPECT, peer, NULL, NULL,
		       (size_t)count);
	tern__rp(req)->u.expect.count = count;
	tern__rp(req)->u.expect.src = src;
	tern__rp(req)->imm = imm;
	tern__rp(req)->state = TERN__ST_WAITING;
	tern__rp(req)->ready = 0;
	s->req = req;
	ctx->nexpect++;
	if (peer != NULL) {
		s0->nfrom++;
		peer->nexpect++;
		peer->inflight++; /* finish_req() lets go of it */
	}
	/* Its sender gave up already. Fails at the next progress, never
	 * here. */
	if (tern_unlikely(ctx->naborts != 0) && abort_take(ctx, src, imm)) {
		expectation_fail(ctx, req, -TERN_EABORTED, 1);
		return 0;
	}
	/* Already there? It completes at the next progress, never here. */
	if (s->arrived >= count) {
		tern__rp(req)->ready = 1;
		tern__reqq_push(&ctx->imm_ready, req);
		return 0;
	}
	if (timeout_ms >= 0) {
		tern_timer_init(expect_timer(req), expect_timeout, req);
		if (tern_timer_start(ctx, expect_timer(req),
				     (uint64_t)timeout_ms, 0) == 0)
			tern__rp(req)->xflags |= TERN__XF_TIMER;
	}
	return 0;
}

int tern_imm_expect(struct tern_ctx *ctx, uint32_t imm, uint64_t count,
		    struct tern_req *req)
{
	return tern_imm_expect_from(ctx, NULL, imm, count, -1, req);
}

/* Complete expectations that earlier arrivals had already satisfied. */
void tern__imm_poll(struct tern_ctx *ctx)
{
	struct tern_req *req;

	while ((req = tern__reqq_pop(&ctx->imm_ready)) != NULL) {
		tern__rp(req)->ready = 0;
		expectation_done(ctx, req);
	}
}

void tern__imm_cancel_all(struct tern_ctx *ctx)
{
	struct tern__imm_table *t = &ctx->imm;

	/* Entries stay (none is deleted while the table is walked). */
	for (size_t i = 0; i < t->cap; i++) {
		struct tern_req *req = t->slots[i].req;

		if (t->slots[i].used && req != NULL)
			expectation_fail(ctx, req, -ECANCELED, 0);
	}
}

void tern__imm_cancel(struct tern_ctx *ctx, struct tern_req *req)
{
	expectation_fail(ctx, req, -ECANCELED, 1);
}

void tern__imm_peer_fail(struct tern_ctx *ctx, struct tern_peer *peer,
			 int status)
{
	struct tern__imm_table *t = &ctx->imm;
	struct tern_req **reqs;
	unsigned long n = 0;

	if (peer->nexpect == 0)
		return;
	reqs = malloc(peer->nexpect * sizeof(*reqs));
	for (size_t i = 0; i < t->cap; i++) {
		struct tern_req *req = t->slots[i].req;

		if (!t->slots[i].used || req == NULL ||
		    tern__rp(req)->peer != peer)
			continue;
		if (reqs != NULL && n < peer->nexpect)
			reqs[n++] = req;
		else /* no memory: fail it now, its entries stay */
			expectation_fail(ctx, req, status, 0);
	}
	for (unsigned long i = 0; i < n; i++)
		expectation_fail(ctx, reqs[i], status, 1);
	free(reqs);
}

void tern__imm_src_forget(struct tern_ctx *ctx, uint32_t src)
{
	struct tern__imm_table *t = &ctx->imm;
	size_t n = 0, k = 0;
	uint64_t *keys;

	for (unsigned int i = 0; i < ctx->naborts;) {
		if (ctx->aborts[i].src == src)
			abort_del(ctx, i);
		else
			i++;
	}
	/* Keys first: each deletion may move later entries back. */
	for (size_t i = 0; i < t->cap; i++)
		n += t->slots[i].used &&
		     (uint32_t)(t->slots[i].key >> 32) == src;
	if (n == 0)
		return;
	keys = malloc(n * sizeof(*keys));
	if (keys == NULL)
		return; /* kept: counted toward any-peer expectations alone */
	for (size_t i = 0; i < t->cap && k < n; i++) {
		if (t->slots[i].used &&
		    (uint32_t)(t->slots[i].key >> 32) == src)
			keys[k++] = t->slots[i].key;
	}
	for (size_t i = 0; i < k; i++) {
		struct tern__imm_slot *s = find(t, keys[i]);
		uint32_t imm = (uint32_t)keys[i];
		uint64_t got = s->arrived;

		slot_del(t, s);
		s = find(t, key_of(0, imm));
		if (s != NULL) {
			s->sourced -= TERN_MIN(got, s->sourced);
			maybe_del(t, key_of(0, imm));
		}
	}
	free(keys);
}

uint64_t tern_imm_count(const struct tern_ctx *ctx, uint32_t imm)
{
	const struct tern__imm_slot *s = find(&ctx->imm, key_of(0, imm));

	return s != NULL ? s->arrived : 0;
}
