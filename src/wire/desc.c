/* SPDX-License-Identifier: MIT */
/*
 * The MR descriptor wire format (docs/protocol.md), little-endian:
 *   0 u32 magic "TRMD"   4 u8 version   5 u8 nkeys   6 u16 flags
 *   8 u64 base          16 u64 len     24 keys
 * Version 1 (one registration): nkeys u64 keys, one per rail. Version 2
 * (a region in chunks, flags bits 8-13 the chunk size's log2): chunks
 * times nkeys keys, chunk by chunk, u32 each with TERN_MR_DESC_KEY32,
 * else u64. Public API (tern/mr.h); a pure codec, no fabric.
 */
#include <errno.h>

#include <tern/mr.h>

#include "desc.h"
#include "wire.h"

#define TERN_MR_DESC_MAGIC 0x444d5254u /* "TRMD" little-endian */
#define TERN_MR_DESC_V1	   1
#define TERN_MR_DESC_V2	   2 /* chunked */

static size_t packed_size(const struct tern_mr_desc *d, uint64_t nkeys)
{
	return 24 + nkeys * ((d->flags & TERN_MR_DESC_KEY32) ? 4 : 8);
}

ssize_t tern_mr_desc_pack(const struct tern_mr_desc *desc, void *buf,
			  size_t len)
{
	struct tern__wr w;
	uint64_t nkeys;
	size_t need;
	int chunked;

	/* Never write what unpack would refuse. */
	if (desc == NULL || buf == NULL ||
	    (desc->flags & ~TERN_MR_DESC_FLAGS_ALL) != 0 || desc->len == 0 ||
	    desc->base + desc->len < desc->base)
		return -EINVAL;
	nkeys = tern__desc_shape(desc);
	if (nkeys == 0)
		return -EINVAL;
	chunked = TERN_MR_DESC_CHUNK_SHIFT(desc->flags) != 0;
	need = packed_size(desc, nkeys);
	if (len < need)
		return -ENOSPC;
	tern__wr_init(&w, buf, need);
	tern__wr_u32(&w, TERN_MR_DESC_MAGIC);
	tern__wr_u8(&w, chunked ? TERN_MR_DESC_V2 : TERN_MR_DESC_V1);
	tern__wr_u8(&w, (uint8_t)desc->nkeys);
	tern__wr_u16(&w, (uint16_t)desc->flags);
	tern__wr_u64(&w, desc->base);
	tern__wr_u64(&w, desc->len);
	for (uint64_t i = 0; i < nkeys; i++) {
		if (desc->flags & TERN_MR_DESC_KEY32)
			tern__wr_u32(&w, (uint32_t)tern__desc_key_at(desc, i));
		else
			tern__wr_u64(&w, desc->keys[i]);
	}
	return tern__wr_end(&w);
}

ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
			    struct tern_mr_desc *desc)
{
	struct tern_mr_desc d = { 0 };
	struct tern__rd r;
	uint32_t magic;
	uint8_t version;
	uint64_t nkeys;

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
	if (version != TERN_MR_DESC_V1 && version != TERN_MR_DESC_V2)
		return version > TERN_MR_DESC_V2 ? -TERN_EVERSION : -TERN_EDESC;
	/* Version 1 knows no chunks; version 2 is nothing else. */
	if ((d.flags & ~TERN_MR_DESC_FLAGS_ALL) != 0 || d.len == 0 ||
	    d.base + d.len < d.base ||
	    (TERN_MR_DESC_CHUNK_SHIFT(d.flags) != 0) !=
		    (version == TERN_MR_DESC_V2))
		return -TERN_EDESC;
	nkeys = tern__desc_shape(&d);
	if (nkeys == 0)
		return -TERN_EDESC;
	for (uint64_t i = 0; i < nkeys; i++) {
		if (d.flags & TERN_MR_DESC_KEY32)
			tern__desc_set_key(&d, i, tern__rd_u32(&r));
		else
			d.keys[i] = tern__rd_u64(&r);
	}
	if (!tern__rd_ok(&r))
		return -TERN_EDESC;
	*desc = d;
	return (ssize_t)packed_size(&d, nkeys);
}
