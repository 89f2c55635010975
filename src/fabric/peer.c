/* SPDX-License-Identifier: MIT */
/* Cards (a ctx's rail addresses) and peers (their address-vector entries). */
#include <errno.h>
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "fabric.h"

#define TERN_CARD_MAGIC   0x43524554u /* "TERC" little-endian */
#define TERN_CARD_VERSION 1
#define TERN_CARD_HDR     12

/*
 * Card wire format, little-endian (docs/protocol.md):
 *   0 u32 magic "TERC"  4 u8 version  5 u8 nrails  6 u16 addrlen
 *   8 u32 libfabric addr_format      12 addr[nrails][addrlen]
 */
ssize_t tern_ctx_card(const struct tern_ctx *ctx, void *buf, size_t len)
{
	size_t alen, need;
	uint8_t *p = buf;

	if (ctx == NULL || buf == NULL)
		return -EINVAL;
	alen = ctx->rails[0].addrlen;
	need = TERN_CARD_HDR + ctx->nrails * alen;
	if (len < need)
		return -ENOSPC;
	tern__put_u32(p, TERN_CARD_MAGIC);
	p[4] = TERN_CARD_VERSION;
	p[5] = (uint8_t)ctx->nrails;
	tern__put_u16(p + 6, (uint16_t)alen);
	tern__put_u32(p + 8, ctx->addr_format);
	for (unsigned int i = 0; i < ctx->nrails; i++)
		memcpy(p + TERN_CARD_HDR + i * alen, ctx->rails[i].addr, alen);
	return (ssize_t)need;
}

/* Check a card against this ctx; on success *nrails_p and *alen_p. */
static int card_check(const struct tern_ctx *ctx, const uint8_t *p, size_t len,
		      unsigned int *nrails_p, size_t *alen_p)
{
	unsigned int nrails;
	size_t alen;

	if (len < TERN_CARD_HDR || tern__get_u32(p) != TERN_CARD_MAGIC) {
		tern_warn("card: too short or not a tern card");
		return -TERN_ECARD;
	}
	if (p[4] != TERN_CARD_VERSION) {
		tern_warn("card: version %u, this tern reads version %u", p[4],
			  TERN_CARD_VERSION);
		return -TERN_ECARD;
	}
	nrails = p[5];
	alen = tern__get_u16(p + 6);
	if (nrails == 0 || nrails > TERN_MAX_RAILS || alen == 0 ||
	    alen > TERN_ADDR_MAX || len != TERN_CARD_HDR + nrails * alen) {
		tern_warn("card: %u rail(s) of %zu-byte addresses in %zu bytes",
			  nrails, alen, len);
		return -TERN_ECARD;
	}
	if (tern__get_u32(p + 8) != ctx->addr_format ||
	    alen != ctx->rails[0].addrlen) {
		tern_warn("card: made by another kind of provider (address "
			  "format %u, %zu bytes; this ctx runs %s: format %u, "
			  "%zu bytes)",
			  tern__get_u32(p + 8), alen, ctx->prov_name,
			  ctx->addr_format, ctx->rails[0].addrlen);
		return -TERN_ECARD;
	}
	*nrails_p = nrails;
	*alen_p = alen;
	return 0;
}

int tern_peer_add(struct tern_ctx *ctx, const void *card, size_t len,
		  struct tern_peer **peer_p)
{
	const uint8_t *p = card;
	struct tern_peer *peer;
	unsigned int nrails, i;
	size_t alen;
	int ret;

	if (ctx == NULL || card == NULL || peer_p == NULL)
		return -EINVAL;
	ret = card_check(ctx, p, len, &nrails, &alen);
	if (ret != 0)
		return ret;
	peer = calloc(1, sizeof(*peer));
	if (peer == NULL)
		return -ENOMEM;
	peer->ctx = ctx;
	peer->nrails = nrails;
	/* Local rail i talks to remote rail i mod nrails. */
	for (i = 0; i < ctx->nrails; i++) {
		const uint8_t *addr = p + TERN_CARD_HDR + (i % nrails) * alen;
		fi_addr_t fa = FI_ADDR_NOTAVAIL;

		ret = fi_av_insert(ctx->rails[i].av, addr, 1, &fa, 0, NULL);
		if (ret != 1) {
			tern_warn("rail %u: fi_av_insert: %s", i,
				  ret < 0 ? fi_strerror(-ret) :
					    "address rejected");
			ret = ret < 0 && ret != -FI_EINVAL ? -TERN_EPROV :
							     -TERN_ECARD;
			goto err_remove;
		}
		peer->fiaddr[i] = fa;
	}
	peer->next = ctx->peers;
	if (ctx->peers != NULL)
		ctx->peers->prev = peer;
	ctx->peers = peer;
	ctx->npeers++;
	*peer_p = peer;
	return 0;

err_remove:
	while (i-- > 0)
		fi_av_remove(ctx->rails[i].av, &peer->fiaddr[i], 1, 0);
	free(peer);
	return ret;
}

/* Free a removed peer once nothing in flight refers to it. */
void tern__peer_release(struct tern_peer *peer)
{
	struct tern_ctx *ctx = peer->ctx;

	if (!peer->removed || peer->inflight != 0)
		return;
	for (unsigned int i = 0; i < ctx->nrails; i++)
		fi_av_remove(ctx->rails[i].av, &peer->fiaddr[i], 1, 0);
	free(peer);
}

int tern_peer_remove(struct tern_peer *peer)
{
	struct tern_ctx *ctx;

	if (peer == NULL)
		return 0;
	ctx = peer->ctx;
	if (peer->prev != NULL)
		peer->prev->next = peer->next;
	else
		ctx->peers = peer->next;
	if (peer->next != NULL)
		peer->next->prev = peer->prev;
	ctx->npeers--;
	/* Operations still queued in tern are cancelled now; the peer is
	 * marked removed after, so their completions cannot free it. */
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_req *r = ctx->rails[i].txq.head, *next;

		for (; r != NULL; r = next) {
			next = r->_priv.next;
			if (r->_priv.peer == peer) {
				tern__reqq_remove(&ctx->rails[i].txq, r);
				tern__req_complete(ctx, r, -ECANCELED);
			}
		}
	}
	peer->removed = 1;
	tern__peer_release(peer);
	return 0;
}
