/* SPDX-License-Identifier: MIT */
/*
 * The MR descriptor wire format (docs/protocol.md), little-endian:
 *   0 u32 magic "TRMD"   4 u8 version   5 u8 nkeys   6 u16 flags
 *   8 u64 base          16 u64 len     24 u64 key[nkeys]
 * Public API (tern/mr.h); a pure codec, no fabric.
 */
#include <errno.h>

#include <tern/mr.h>

#include "wire.h"

#define TERN_MR_DESC_MAGIC   0x444d5254u /* "TRMD" little-endian */
#define TERN_MR_DESC_VERSION 1

ssize_t tern_mr_desc_pack(const struct tern_mr_desc *desc, void *buf,
			  size_t len)
{
	struct tern__wr w;
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
	tern__wr_init(&w, buf, need);
	tern__wr_u32(&w, TERN_MR_DESC_MAGIC);
	tern__wr_u8(&w, TERN_MR_DESC_VERSION);
	tern__wr_u8(&w, (uint8_t)desc->nkeys);
	tern__wr_u16(&w, (uint16_t)desc->flags);
	tern__wr_u64(&w, desc->base);
	tern__wr_u64(&w, desc->len);
	for (uint32_t i = 0; i < desc->nkeys; i++)
		tern__wr_u64(&w, desc->keys[i]);
	return tern__wr_end(&w);
}

ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
			    struct tern_mr_desc *desc)
{
	struct tern_mr_desc d = { 0 };
	struct tern__rd r;
	uint32_t magic;
	uint8_t version;

	if (buf == NULL || desc == NULL)
		return -EINVAL;
	tern__rd_init(&r, buf, len);
	magic = tern__rd_u32(&r);
	version = tern__rd_u8(&r);
	d.nkeys = tern__rd_u8(&r);
	d.flags = tern__rd_u16(&r);
	d.base = tern__rd_u64(&r);
	d.len = tern__rd_u64(&r);
	if (!tern__rd_ok(&r) || magic != TERN_MR_DESC_MAGIC)
		return -TERN_EDESC;
	if (version != TERN_MR_DESC_VERSION)
		return version > TERN_MR_DESC_VERSION ? -TERN_EVERSION
						      : -TERN_EDESC;
	if (d.nkeys == 0 || d.nkeys > TERN_MAX_RAILS ||
	    (d.flags & ~TERN_MR_DESC_FLAGS) != 0 || d.len == 0 ||
	    d.base + d.len < d.base)
		return -TERN_EDESC;
	for (uint32_t i = 0; i < d.nkeys; i++)
		d.keys[i] = tern__rd_u64(&r);
	if (!tern__rd_ok(&r))
		return -TERN_EDESC;
	*desc = d;
	return (ssize_t)TERN_MR_DESC_PACKED_SIZE(d.nkeys);
}
