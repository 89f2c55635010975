/* SPDX-License-Identifier: MIT */
/* Memory registration on every rail, and the MR descriptor wire format. */
#include <errno.h>
#include <stdlib.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "fabric.h"

#define TERN_MR_DESC_MAGIC   0x444d5254u /* "TRMD" little-endian */
#define TERN_MR_DESC_VERSION 1

#define TERN_ACCESS_ALL                                \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | \
	 TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_ATOMIC)

static uint64_t fi_access(uint64_t access)
{
	uint64_t a = 0;

	if (access & TERN_ACCESS_LOCAL)
		a |= FI_SEND | FI_RECV | FI_READ | FI_WRITE;
	if (access & TERN_ACCESS_REMOTE_READ)
		a |= FI_REMOTE_READ;
	if (access & TERN_ACCESS_REMOTE_WRITE)
		a |= FI_REMOTE_WRITE;
	if (access & TERN_ACCESS_REMOTE_ATOMIC)
		a |= FI_REMOTE_READ | FI_REMOTE_WRITE;
	return a;
}

static int reg_rail(struct tern_mr *mr, struct tern_rail *r)
{
	struct tern_ctx *ctx = mr->ctx;
	struct iovec iov = { .iov_base = mr->buf, .iov_len = mr->len };
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = fi_access(mr->access),
		.requested_key = ctx->prov_key ? 0 : ctx->next_key++,
	};
	struct fid_mr *fmr;
	int ret;

	ret = fi_mr_regattr(r->domain, &attr, 0, &fmr);
	if (ret != 0) {
		tern_warn("rail %u: registering %zu bytes at %p: %s", r->idx,
			  mr->len, mr->buf, fi_strerror(-ret));
		return -TERN_EPROV;
	}
	if (ctx->mr_endpoint) {
		ret = fi_mr_bind(fmr, &r->ep->fid, 0);
		if (ret == 0)
			ret = fi_mr_enable(fmr);
		if (ret != 0) {
			tern_warn("rail %u: binding region to endpoint: %s",
				  r->idx, fi_strerror(-ret));
			fi_close(&fmr->fid);
			return -TERN_EPROV;
		}
	}
	mr->fmr[r->idx] = fmr;
	mr->desc[r->idx] = fi_mr_desc(fmr);
	mr->key[r->idx] = fi_mr_key(fmr);
	return 0;
}

static void dereg(struct tern_mr *mr)
{
	for (unsigned int i = 0; i < mr->ctx->nrails; i++) {
		if (mr->fmr[i] != NULL)
			fi_close(&mr->fmr[i]->fid);
	}
}

int tern_mr_reg(struct tern_ctx *ctx, void *buf, size_t len, uint64_t access,
		struct tern_mr **mr_p)
{
	uint64_t t0 = tern__now_ns();
	struct tern_mr *mr;
	int ret;

	if (ctx == NULL || buf == NULL || len == 0 || mr_p == NULL ||
	    (access & TERN_ACCESS_ALL) == 0 || (access & ~TERN_ACCESS_ALL) != 0)
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (mr == NULL)
		return -ENOMEM;
	mr->ctx = ctx;
	mr->buf = buf;
	mr->len = len;
	mr->access = access;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		ret = reg_rail(mr, &ctx->rails[i]);
		if (ret != 0)
			goto err_dereg;
	}
	ctx->nmr++;
	mr->next = ctx->mrs;
	if (ctx->mrs != NULL)
		ctx->mrs->prev = mr;
	ctx->mrs = mr;
	tern_debug("registered %zu bytes at %p on %u rail(s) in %.3f ms", len,
		   buf, ctx->nrails, (double)(tern__now_ns() - t0) / 1e6);
	*mr_p = mr;
	return 0;

err_dereg:
	dereg(mr);
	free(mr);
	return ret;
}

int tern_mr_close(struct tern_mr *mr)
{
	if (mr == NULL)
		return 0;
	dereg(mr);
	mr->ctx->nmr--;
	if (mr->prev != NULL)
		mr->prev->next = mr->next;
	else
		mr->ctx->mrs = mr->next;
	if (mr->next != NULL)
		mr->next->prev = mr->prev;
	free(mr);
	return 0;
}

int tern_mr_desc(const struct tern_mr *mr, struct tern_mr_desc *desc)
{
	if (mr == NULL || desc == NULL)
		return -EINVAL;
	*desc = (struct tern_mr_desc){
		.base = (uint64_t)(uintptr_t)mr->buf,
		.len = mr->len,
		.flags = (mr->ctx->virt_addr ? TERN_MR_DESC_VIRT_ADDR : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_READ)
				  ? TERN_MR_DESC_REMOTE_READ
				  : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_WRITE)
				  ? TERN_MR_DESC_REMOTE_WRITE
				  : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_ATOMIC)
				  ? TERN_MR_DESC_REMOTE_ATOMIC
				  : 0),
		.nkeys = mr->ctx->nrails,
	};
	for (unsigned int i = 0; i < mr->ctx->nrails; i++)
		desc->keys[i] = mr->key[i];
	return 0;
}

void *tern_mr_addr(const struct tern_mr *mr)
{
	return mr->buf;
}

size_t tern_mr_len(const struct tern_mr *mr)
{
	return mr->len;
}

/*
 * Wire format, little-endian (docs/protocol.md):
 *   0 u32 magic "TRMD"   4 u8 version   5 u8 nkeys   6 u16 flags
 *   8 u64 base          16 u64 len     24 u64 key[nkeys]
 */
ssize_t tern_mr_desc_pack(const struct tern_mr_desc *desc, void *buf,
			  size_t len)
{
	uint8_t *p = buf;
	size_t need;

	/* Never write what unpack would refuse. */
	if (desc == NULL || buf == NULL || desc->nkeys == 0 ||
	    desc->nkeys > TERN_MAX_RAILS ||
	    (desc->flags & ~TERN_MR_DESC_FLAGS) != 0 || desc->len == 0 ||
	    desc->base + desc->len < desc->base)
		return -EINVAL;
	need = TERN_MR_DESC_PACKED_SIZE(desc->nkeys);
	if (len < need)
		return -ENOSPC;
	tern__put_u32(p, TERN_MR_DESC_MAGIC);
	p[4] = TERN_MR_DESC_VERSION;
	p[5] = (uint8_t)desc->nkeys;
	tern__put_u16(p + 6, (uint16_t)desc->flags);
	tern__put_u64(p + 8, desc->base);
	tern__put_u64(p + 16, desc->len);
	for (uint32_t i = 0; i < desc->nkeys; i++)
		tern__put_u64(p + 24 + 8 * i, desc->keys[i]);
	return (ssize_t)need;
}

ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
			    struct tern_mr_desc *desc)
{
	const uint8_t *p = buf;
	struct tern_mr_desc d = { 0 };
	size_t need;

	if (buf == NULL || desc == NULL)
		return -EINVAL;
	if (len < TERN_MR_DESC_PACKED_SIZE(0) ||
	    tern__get_u32(p) != TERN_MR_DESC_MAGIC)
		return -TERN_EDESC;
	if (p[4] != TERN_MR_DESC_VERSION)
		return p[4] > TERN_MR_DESC_VERSION ? -TERN_EVERSION
						   : -TERN_EDESC;
	d.nkeys = p[5];
	d.flags = tern__get_u16(p + 6);
	d.base = tern__get_u64(p + 8);
	d.len = tern__get_u64(p + 16);
	if (d.nkeys == 0 || d.nkeys > TERN_MAX_RAILS ||
	    (d.flags & ~TERN_MR_DESC_FLAGS) != 0 || d.len == 0 ||
	    d.base + d.len < d.base)
		return -TERN_EDESC;
	need = TERN_MR_DESC_PACKED_SIZE(d.nkeys);
	if (len < need)
		return -TERN_EDESC;
	for (uint32_t i = 0; i < d.nkeys; i++)
		d.keys[i] = tern__get_u64(p + 24 + 8 * i);
	*desc = d;
	return (ssize_t)need;
}
