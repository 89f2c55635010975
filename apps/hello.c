/* SPDX-License-Identifier: MIT */
/* The message box and the HELLO rendezvous codec. Inputs are untrusted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apps/app.h"
#include "core/core.h"
#include "wire/wire.h"

#define HELLO_HDR 20

int app_msgbox_open(struct tern_ctx *ctx, struct app_msgbox *mb)
{
	int ret;

	memset(mb, 0, sizeof(*mb));
	mb->ctx = ctx;
	if (posix_memalign((void **)&mb->sbuf, 128, 2 * APP_MSGBOX_MAX) != 0)
		return -ENOMEM;
	mb->rbuf = mb->sbuf + APP_MSGBOX_MAX;
	ret = tern_mr_reg(ctx, mb->sbuf, 2 * APP_MSGBOX_MAX, TERN_ACCESS_LOCAL,
			  &mb->mr);
	if (ret != 0) {
		free(mb->sbuf);
		mb->sbuf = NULL;
	}
	return ret;
}

void app_msgbox_close(struct app_msgbox *mb)
{
	if (mb->sbuf == NULL)
		return;
	/* A receive still posted must finish before its buffer goes. */
	if (mb->recv_posted && tern_req_cancel(mb->ctx, &mb->rreq) >= 0)
		tern_wait(mb->ctx, &mb->rreq, 2000);
	tern_mr_close(mb->mr);
	free(mb->sbuf);
	mb->sbuf = NULL;
}

int app_msgbox_send(struct app_msgbox *mb, struct tern_peer *peer, size_t len,
		    int timeout_ms)
{
	int ret;

	if (len > APP_MSGBOX_MAX)
		return -EMSGSIZE;
	tern_req_init(&mb->sreq, NULL, NULL);
	ret = tern_send(peer, mb->mr, mb->sbuf, len, &mb->sreq);
	if (ret == 0)
		ret = tern_wait(mb->ctx, &mb->sreq, timeout_ms);
	return ret != 0 ? ret : mb->sreq.status;
}

ssize_t app_msgbox_recv(struct app_msgbox *mb, int timeout_ms)
{
	int ret;

	if (!mb->recv_posted) {
		tern_req_init(&mb->rreq, NULL, NULL);
		ret = tern_recv(mb->ctx, mb->mr, mb->rbuf, APP_MSGBOX_MAX,
				&mb->rreq);
		if (ret != 0)
			return ret;
		mb->recv_posted = 1;
	}
	ret = tern_wait(mb->ctx, &mb->rreq, timeout_ms);
	if (ret != 0)
		return ret;
	mb->recv_posted = 0;
	return mb->rreq.status != 0 ? mb->rreq.status : (ssize_t)mb->rreq.len;
}

ssize_t app_hello_encode(void *buf, size_t cap, const struct app_hello *h)
{
	uint8_t dbuf[TERN_MR_DESC_MAX];
	ssize_t dlen = 0;
	size_t len;
	struct tern__wr w;

	if (h->card_len > TERN_CARD_MAX || h->params_len > APP_HELLO_PARAMS)
		return -EINVAL;
	if (h->has_desc) {
		dlen = tern_mr_desc_pack(&h->desc, dbuf, sizeof(dbuf));
		if (dlen < 0)
			return dlen;
	}
	len = HELLO_HDR + h->card_len + (size_t)dlen + h->params_len;
	if (len > cap)
		return -ENOSPC;
	tern__wr_init(&w, buf, cap);
	tern__wr_u32(&w, APP_HELLO_MAGIC);
	tern__wr_u16(&w, APP_HELLO_VERSION);
	tern__wr_u16(&w, h->kind);
	tern__wr_u32(&w, (uint32_t)len);
	tern__wr_u16(&w, (uint16_t)h->card_len);
	tern__wr_u16(&w, (uint16_t)dlen);
	tern__wr_u32(&w, (uint32_t)h->params_len);
	tern__wr_bytes(&w, h->card, h->card_len);
	tern__wr_bytes(&w, dbuf, (size_t)dlen);
	tern__wr_bytes(&w, h->params, h->params_len);
	return tern__wr_end(&w);
}

int app_hello_decode(const void *buf, size_t len, struct app_hello *h)
{
	struct app_hello x = { 0 };
	struct tern__rd r;
	uint32_t total;
	size_t dlen;

	tern__rd_init(&r, buf, len);
	if (len < HELLO_HDR || tern__rd_u32(&r) != APP_HELLO_MAGIC)
		return -TERN_EPROTO;
	if (tern__rd_u16(&r) != APP_HELLO_VERSION)
		return -TERN_EVERSION;
	x.kind = tern__rd_u16(&r);
	total = tern__rd_u32(&r);
	x.card_len = tern__rd_u16(&r);
	dlen = tern__rd_u16(&r);
	x.params_len = tern__rd_u32(&r);
	if (!tern__rd_ok(&r) || total != len || x.kind < APP_HELLO_PING ||
	    x.kind > APP_HELLO_KIND_MAX || x.card_len > TERN_CARD_MAX ||
	    dlen > TERN_MR_DESC_MAX || x.params_len > APP_HELLO_PARAMS ||
	    HELLO_HDR + x.card_len + dlen + x.params_len != len)
		return -TERN_EPROTO;
	x.card = tern__rd_ptr(&r);
	if (dlen != 0) {
		ssize_t n = tern_mr_desc_unpack(x.card + x.card_len, dlen,
						&x.desc);

		if (n != (ssize_t)dlen)
			return n < 0 ? (int)n : -TERN_EPROTO;
		x.has_desc = 1;
	}
	x.params = x.card + x.card_len + dlen;
	*h = x;
	return 0;
}
