/* SPDX-License-Identifier: MIT */
/* Cards (a ctx's rail addresses) and peers (their address-vector entries). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine.h"
#include "local.h"
#include "stage.h"

#include "../wire/card.h"

ssize_t tern_ctx_card(const struct tern_ctx *ctx, void *buf, size_t len)
{
	uint8_t addrs[TERN_CARD_MAX];
	struct tern__card card;

	if (ctx == NULL || buf == NULL)
		return -EINVAL;
	card = (struct tern__card){
		.nrails = ctx->nrails,
		.addrlen = tern__card_addrlen(ctx),
		.addr_format = ctx->caps.addr_format,
		.addrs = addrs,
		.local = tern__local_id(ctx),
	};
	/* The same-host part only where it fits (many rails of long
	 * names may fill a card): without it, the fabric. */
	if (card.local != NULL && TERN_CARD_HDR + ctx->nrails * card.addrlen +
						  2 + TERN_CARD_LOCAL_LEN >
					  TERN_CARD_MAX)
		card.local = NULL;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		if ((i + 1) * card.addrlen > sizeof(addrs))
			return -ENOSPC;
		/* A shorter name (ctx->caps.addr_str) is padded with NULs. */
		memset(addrs + i * card.addrlen, 0, card.addrlen);
		memcpy(addrs + i * card.addrlen, ctx->rails[i].addr,
		       ctx->rails[i].addrlen);
	}
	return tern__card_pack(&card, buf, len);
}

/* Check a card against this ctx: well formed, and of our provider kind. */
static int card_check(const struct tern_ctx *ctx, const uint8_t *p, size_t len,
		      struct tern__card *card)
{
	char why[128];
	int ret = tern__card_parse(p, len, card, why, sizeof(why));

	if (ret != 0) {
		tern__warn("%s", why);
		return ret;
	}
	if (card->addr_format == TERN__PROV_ADDR_STR && ctx->caps.addr_str) {
		/* Names (shm: "fi_shm://PID:0:N") differ in length between
		 * processes: any length goes, if every one ends in its NUL
		 * within the card. */
		char mine[TERN_ADDR_MAX + 1];
		const char *sep;
		size_t scheme;

		memcpy(mine, ctx->rails[0].addr, ctx->rails[0].addrlen);
		mine[ctx->rails[0].addrlen] = '\0';
		sep = strstr(mine, "://");
		scheme = sep != NULL ? (size_t)(sep - mine) + 3 : 0;

		for (unsigned int i = 0; i < card->nrails; i++) {
			const char *a = (const char *)card->addrs +
					i * card->addrlen;

			if (card->addrlen > TERN_ADDR_MAX ||
			    memchr(a, 0, card->addrlen) == NULL) {
				tern__warn("card: address %u is not a "
					   "terminated name",
					   i);
				return -TERN_ECARD;
			}
			/* A name of our provider's kind ("fi_shm://",
			 * "fi_sockaddr_in://"), with something after it. */
			if (scheme != 0 && (strncmp(a, mine, scheme) != 0 ||
					    strlen(a) <= scheme)) {
				tern__warn("card: address %u (%.40s) is not "
					   "a %.*s name of this ctx's "
					   "provider %s",
					   i, a, (int)scheme, mine,
					   ctx->caps.prov_name);
				return -TERN_ECARD;
			}
		}
		return 0;
	}
	if (card->addr_format != ctx->caps.addr_format ||
	    card->addrlen != ctx->rails[0].addrlen) {
		tern__warn("card: made by another kind of provider (address "
			   "format %u, %zu bytes; this ctx runs %s: format %u, "
			   "%zu bytes)",
			   card->addr_format, card->addrlen,
			   ctx->caps.prov_name, ctx->caps.addr_format,
			   ctx->rails[0].addrlen);
		return -TERN_ECARD;
	}
	return 0;
}

/*
 * Peers live on ctx->peers until released, removed or not: two peers with
 * the same card share their address-vector entries (a provider may map one
 * remote process once; removing an entry another peer still uses breaks
 * it), and an entry goes only with the last peer that uses it.
 */
static struct tern_peer *peer_same(struct tern_ctx *ctx, const void *card,
				   size_t len, const struct tern_peer *skip)
{
	for (struct tern_peer *p = ctx->peers; p != NULL; p = p->next) {
		if (p != skip && p->card_len == len &&
		    memcmp(p->card, card, len) == 0)
			return p;
	}
	return NULL;
}

/*
 * Where the CQ tells each arrival's source (ctx->imm_source), note the
 * source id of @peer's AV addresses, rail by rail (0: forget them). An
 * address past what a table indexed by it can sensibly hold (a provider
 * whose AV addresses are not small indices) is not noted: its arrivals
 * count as of an unknown source.
 */
#define SRC_OF_MAX (1u << 20)

static void src_map(struct tern_ctx *ctx, const struct tern_peer *peer,
		    uint32_t src)
{
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_rail *r = &ctx->rails[i];
		uint64_t a = peer->fiaddr[i];

		if (a >= r->nsrc_of && src != 0 && a < SRC_OF_MAX) {
			size_t n = r->nsrc_of ? r->nsrc_of : 64;
			uint32_t *p;

			while (n <= a)
				n *= 2;
			p = realloc(r->src_of, n * sizeof(*p));
			if (p == NULL)
				continue;
			memset(p + r->nsrc_of, 0,
			       (n - r->nsrc_of) * sizeof(*p));
			r->src_of = p;
			r->nsrc_of = n;
		}
		if (a < r->nsrc_of)
			r->src_of[a] = src;
	}
}

/* Note @st's card tag for the tagged arrivals (dedup.h): a tag already
 * another card's is shared, and names neither. */
static void tag_note(struct tern_ctx *ctx, const struct tern__stamps *st)
{
	uint32_t *t;

	if (ctx->tag_src == NULL)
		ctx->tag_src = calloc(TERN__STAMP_TAGS, sizeof(*ctx->tag_src));
	if (ctx->tag_src == NULL)
		return; /* tagged arrivals of an unknown source */
	t = &ctx->tag_src[st->tag];
	*t = *t == 0 ? st->src : TERN__TAG_SHARED;
}

/* @st's card's last peer gone: its tag names what other cards have it,
 * one or several (the peers still listed, @st's unlinked). */
static void tag_forget(struct tern_ctx *ctx, const struct tern__stamps *st)
{
	uint32_t *t;

	if (ctx->tag_src == NULL)
		return;
	t = &ctx->tag_src[st->tag];
	if (*t != TERN__TAG_SHARED) {
		if (*t == st->src)
			*t = 0;
		return;
	}
	*t = 0;
	for (struct tern_peer *p = ctx->peers; p != NULL; p = p->next) {
		if (p->stamps == NULL || p->stamps == st ||
		    p->stamps->tag != st->tag || *t == p->stamps->src)
			continue;
		*t = *t == 0 ? p->stamps->src : TERN__TAG_SHARED;
		if (*t == TERN__TAG_SHARED)
			return;
	}
}

int tern__stamps_get(struct tern_ctx *ctx, struct tern_peer *peer,
		     struct tern_peer *same)
{
	struct tern__stamps *st;
	uint32_t r;

	if (same != NULL) {
		peer->stamps = same->stamps;
		peer->stamps->refs++;
		return 0;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return -ENOMEM;
	st->refs = 1;
	/* Numbering starts anywhere: should this peer be added again, its
	 * target, which may still remember the numbers of the first,
	 * sees a new sender (dedup.h, TERN__DEDUP_FAR). */
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)tern__now_ns();
	if (ctx->stamp_max != 0)
		st->seq = r % ctx->stamp_max;
	st->tag = tern__stamp_tag(peer->card, peer->card_len);
	st->src = peer->src_id;
	peer->stamps = st;
	/* Arrivals are found by their source id: the one the CQ names
	 * (untagged), or their tag's. Past what a table can sensibly hold,
	 * they count as of an unknown source (its repeats cannot be
	 * checked). */
	if (peer->src_id >= SRC_OF_MAX)
		return 0;
	if (peer->src_id >= ctx->nstamps_of) {
		size_t n = ctx->nstamps_of ? ctx->nstamps_of : 64;
		struct tern__stamps **p;

		while (n <= peer->src_id)
			n *= 2;
		p = realloc(ctx->stamps_of, n * sizeof(*p));
		if (p == NULL)
			return 0;
		memset(p + ctx->nstamps_of, 0,
		       (n - ctx->nstamps_of) * sizeof(*p));
		ctx->stamps_of = p;
		ctx->nstamps_of = n;
	}
	ctx->stamps_of[peer->src_id] = st;
	tag_note(ctx, st);
	return 0;
}

void tern__stamps_put(struct tern_ctx *ctx, struct tern_peer *peer)
{
	struct tern__stamps *st = peer->stamps;

	if (st == NULL)
		return;
	peer->stamps = NULL;
	if (--st->refs != 0)
		return;
	/* Its card's last peer: a peer added again starts a new window. */
	if (peer->src_id < ctx->nstamps_of &&
	    ctx->stamps_of[peer->src_id] == st) {
		ctx->stamps_of[peer->src_id] = NULL;
		tag_forget(ctx, st);
	}
	free(st->win);
	free(st);
}

int tern_peer_add(struct tern_ctx *ctx, const void *card, size_t len,
		  struct tern_peer **peer_p)
{
	return tern_peer_add_flags(ctx, card, len, 0, peer_p);
}

int tern_peer_add_flags(struct tern_ctx *ctx, const void *card, size_t len,
			uint64_t flags, struct tern_peer **peer_p)
{
	struct tern_peer *peer, *same;
	struct tern__card c;
	unsigned int i = 0;
	int ret;

	if (ctx == NULL || card == NULL || peer_p == NULL ||
	    (flags & ~TERN_PEER_FABRIC_ONLY) != 0)
		return -EINVAL;
	ret = card_check(ctx, card, len, &c);
	if (ret != 0)
		return ret;
	peer = calloc(1, sizeof(*peer) + len);
	if (peer == NULL)
		return -ENOMEM;
	peer->ctx = ctx;
	peer->fabric_only = (flags & TERN_PEER_FABRIC_ONLY) != 0;
	peer->nrails = c.nrails;
	peer->card_len = len;
	memcpy(peer->card, card, len);
	same = peer_same(ctx, card, len, NULL);
	if (same != NULL) {
		memcpy(peer->fiaddr, same->fiaddr, sizeof(peer->fiaddr));
		peer->src_id = same->src_id;
		tern__stamps_get(ctx, peer, same); /* shared: cannot fail */
		goto link;
	}
	/* Local rail i talks to remote rail i mod nrails. */
	for (i = 0; i < ctx->nrails; i++) {
		const uint8_t *addr = c.addrs + (i % c.nrails) * c.addrlen;
		ret = tern__prov_av_insert(&ctx->rails[i].prov, i, addr,
					   &peer->fiaddr[i]);
		if (ret != 0)
			goto err_remove;
	}
	peer->src_id = ctx->next_src_id++;
	if (ctx->next_src_id == 0)
		ctx->next_src_id = 1;
	ret = tern__stamps_get(ctx, peer, NULL);
	if (ret != 0)
		goto err_remove;
	if (ctx->imm_source || ctx->msg_source)
		src_map(ctx, peer, peer->src_id);
link:
	tern__local_peer_add(ctx, peer, c.local);
	peer->next = ctx->peers;
	if (ctx->peers != NULL)
		ctx->peers->prev = peer;
	ctx->peers = peer;
	ctx->npeers++;
	*peer_p = peer;
	return 0;

err_remove:
	while (i-- > 0)
		tern__prov_av_remove(&ctx->rails[i].prov, peer->fiaddr[i]);
	free(peer);
	return ret;
}

/* Free a removed peer once nothing in flight refers to it. */
void tern__peer_release(struct tern_peer *peer)
{
	struct tern_ctx *ctx = peer->ctx;

	if (!peer->removed || peer->inflight != 0 || peer->release_queued)
		return;
	if (peer->prev != NULL)
		peer->prev->next = peer->next;
	else
		ctx->peers = peer->next;
	if (peer->next != NULL)
		peer->next->prev = peer->prev;
	tern__local_peer_release(ctx, peer);
	tern__nbi_scope_fini(ctx, &peer->nbi);
	/* Rails already closed (ctx teardown) took their entries along. */
	if (peer_same(ctx, peer->card, peer->card_len, NULL) == NULL) {
		/* Its source goes with its last peer. */
		if (ctx->imm_source || ctx->msg_source) {
			src_map(ctx, peer, 0);
			tern__imm_src_forget(ctx, peer->src_id);
		}
		for (unsigned int i = 0; i < ctx->nrails; i++)
			tern__prov_av_remove(&ctx->rails[i].prov,
					     peer->fiaddr[i]);
	}
	tern__stamps_put(ctx, peer);
	free(peer->paths);
	free(peer);
}

/* Finish every operation of @peer still queued in tern with @status:
 * they go to ctx->ready, and their callbacks run from the next progress
 * pass, never here, so one walk of each queue finds them all. Those the
 * provider holds complete on their own. */
static void peer_abort_queued(struct tern_ctx *ctx, struct tern_peer *peer,
			      int status)
{
	tern__stage_cancel_peer(ctx, peer, status);
	tern__local_abort_peer(ctx, peer, status);
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern__reqq *q = &ctx->rails[i].txq;
		struct tern_req *r = q->head, *next;

		for (; r != NULL; r = next) {
			next = tern__rp(r)->next;
			if (tern__rp(r)->peer == peer)
				tern__req_abort(ctx, q, r, status);
		}
	}
}

int tern__peer_gone(struct tern_peer *peer)
{
	if (peer == NULL || peer->removed || peer->removing)
		return -EINVAL;
	if (peer->gone)
		return 0;
	peer->gone = 1;
	tern__info("peer %p gone: its queued operations fail", (void *)peer);
	peer_abort_queued(peer->ctx, peer, -TERN_EPEERGONE);
	tern__imm_peer_fail(peer->ctx, peer, -TERN_EPEERGONE);
	return 0;
}

void tern__peer_release_later(struct tern_peer *peer)
{
	struct tern_ctx *ctx = peer->ctx;

	if (!peer->removed || peer->inflight != 0 || peer->release_queued)
		return;
	peer->release_queued = 1;
	peer->release_next = ctx->release;
	ctx->release = peer;
}

void tern__peer_release_due(struct tern_ctx *ctx)
{
	struct tern_peer *p;

	while ((p = ctx->release) != NULL) {
		ctx->release = p->release_next;
		p->release_queued = 0;
		/* Unmaps, closes CUDA handles, removes AV entries. */
		tern__peer_release(p);
	}
}

int tern_peer_remove(struct tern_peer *peer)
{
	struct tern_ctx *ctx;

	if (peer == NULL)
		return 0;
	if (peer->removed || peer->removing)
		return -EINVAL;
	ctx = peer->ctx;
	ctx->npeers--;
	/* The peer is freed with the last operation the provider holds
	 * (tern__peer_release()). */
	peer->removing = 1;
	peer_abort_queued(ctx, peer, -ECANCELED);
	tern__imm_peer_fail(ctx, peer, -ECANCELED);
	tern__ctrl_forget_peer(ctx, peer);
	/* Nothing local is left queued to it: its same-host attachment
	 * (pidfd, eventfd, mappings, inbox slot) goes now, not with the
	 * last operation the provider holds (a send to a dead process on
	 * shm may never complete). */
	tern__local_peer_release(ctx, peer);
	peer->removed = 1;
	/* From a callback (inside a pass): freed at the pass's end. */
	if (ctx->depth > 0)
		tern__peer_release_later(peer);
	else
		tern__peer_release(peer);
	return 0;
}
