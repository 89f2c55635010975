// SPDX-License-Identifier: MIT
/*
 * fakeefa's memory registration: provider keys of 32 bits from a table of
 * FAKE_MAX_MR live registrations, the faults a registration may meet
 * (fakeefa_rules.c: TERN_FAKEEFA_MEMLOCK, TERN_FAKEEFA_MAX_MR_SIZE), and
 * the two checks the data operations make: a local descriptor covers its
 * buffer (efa-direct's FI_MR_LOCAL), a remote key grants the access and
 * bounds asked.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakeefa.h"

static struct fake_mr *mrs[FAKE_MAX_MR];
static uint32_t next_key = 0x1000;

/* Bytes pinned by the fake's registrations, for TERN_FAKEEFA_MEMLOCK. */
static uint64_t pinned;

static int mr_close(struct fid *f)
{
	struct fake_mr *mr = (struct fake_mr *)f;

	pinned -= mr->len;
	mrs[mr->key % FAKE_MAX_MR] = NULL;
	free(mr);
	return 0;
}

static int mr_bind(struct fid *f, struct fid *bfid, uint64_t flags)
{
	(void)f;
	(void)bfid;
	(void)flags;
	return 0;
}

static int mr_control(struct fid *f, int cmd, void *arg)
{
	struct fake_mr *mr = (struct fake_mr *)f;

	(void)arg;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	mr->enabled = 1;
	return 0;
}

static struct fi_ops mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = mr_bind,
	.control = mr_control,
};

static int mr_regattr(struct fid *f, const struct fi_mr_attr *attr,
		      uint64_t flags, struct fid_mr **out)
{
	struct fake_mr *mr;
	uint32_t i;

	(void)flags;
	if (attr->iov_count != 1)
		return -FI_EINVAL;
	if (fake_memlock_refuses(pinned, attr->mr_iov[0].iov_len))
		return -FI_ENOMEM;
	if (fake_max_mr_refuses(attr->mr_iov[0].iov_len))
		return -FI_EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	for (i = 0; i < FAKE_MAX_MR; i++, next_key++)
		if (!mrs[next_key % FAKE_MAX_MR])
			break;
	if (i == FAKE_MAX_MR) {
		free(mr);
		return -FI_ENOSPC;
	}
	mr->key = next_key++;
	mrs[mr->key % FAKE_MAX_MR] = mr;
	mr->dom = (struct fake_domain *)f;
	mr->base = attr->mr_iov[0].iov_base;
	mr->len = attr->mr_iov[0].iov_len;
	pinned += mr->len;
	mr->access = attr->access;
	mr->enabled = 1;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = attr->context;
	mr->mr.fid.ops = &mr_fi_ops;
	mr->mr.mem_desc = mr;
	mr->mr.key = mr->key;
	*out = &mr->mr;
	return 0;
}

static int mr_regv(struct fid *f, const struct iovec *iov, size_t count,
		   uint64_t access, uint64_t offset, uint64_t key,
		   uint64_t flags, struct fid_mr **out, void *ctx)
{
	struct fi_mr_attr a = {
		.mr_iov = iov,
		.iov_count = count,
		.access = access,
		.offset = offset,
		.requested_key = key,
		.context = ctx,
	};

	return mr_regattr(f, &a, flags, out);
}

static int mr_reg(struct fid *f, const void *buf, size_t len, uint64_t access,
		  uint64_t offset, uint64_t key, uint64_t flags,
		  struct fid_mr **out, void *ctx)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return mr_regv(f, &iov, 1, access, offset, key, flags, out, ctx);
}

static struct fi_ops_mr mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

/* A local descriptor must name a live registration covering the buffer. */
int fake_desc_ok(struct fake_ep *ep, void *desc, const void *buf, size_t len)
{
	struct fake_mr *mr = desc;

	if (!ep->dom->direct)
		return 1;
	if (!len)
		return 1;
	if (!mr || mrs[mr->key % FAKE_MAX_MR] != mr)
		return 0;
	return (const uint8_t *)buf >= mr->base &&
	       (const uint8_t *)buf + len <= mr->base + mr->len;
}

struct fake_mr *fake_rkey_find(uint64_t key, uint64_t addr, size_t len,
			       uint64_t access)
{
	struct fake_mr *mr = mrs[key % FAKE_MAX_MR];

	if (getenv("TERN_FAKEEFA_VERBOSE"))
		fprintf(stderr,
			"fakeefa: rkey %#" PRIx64 " addr %#" PRIx64
			" len %zu: mr %p base %p len %zu access %#" PRIx64 "\n",
			key, addr, len, (void *)mr,
			mr ? (void *)mr->base : NULL, mr ? mr->len : 0,
			mr ? mr->access : 0);
	if (!mr || mr->key != key || !mr->enabled)
		return NULL;
	if (!(mr->access & access))
		return NULL;
	if (addr < (uintptr_t)mr->base ||
	    addr + len > (uintptr_t)mr->base + mr->len)
		return NULL;
	return mr;
}

void fake_mr_attach(struct fake_domain *dom)
{
	dom->dom.mr = &mr_ops;
}

void fake_mr_init(void)
{
	fake_fill_nosys(&mr_fi_ops, sizeof(mr_fi_ops));
	fake_fill_nosys(&mr_ops, sizeof(mr_ops));
}
