/* SPDX-License-Identifier: MIT */
/**
 * @file tern/mr.h
 * Registered memory and the descriptors peers use to address it.
 */
#ifndef TERN_MR_H
#define TERN_MR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/ctx.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tern_mr;

/** Access rights of a registered region (uint64_t bits). */
#define TERN_ACCESS_LOCAL	 (1ULL << 0) /**< source/sink of local ops */
#define TERN_ACCESS_REMOTE_READ	 (1ULL << 1) /**< peers may read it */
#define TERN_ACCESS_REMOTE_WRITE (1ULL << 2) /**< peers may write it */
/** Peers may run 64-bit atomics on it (libfabric needs remote read and
 * write rights on the target for that, so this grants them too). */
#define TERN_ACCESS_REMOTE_ATOMIC (1ULL << 3)

/** Descriptor flag: remote addresses are virtual (base + offset). */
#define TERN_MR_DESC_VIRT_ADDR (1U << 0)
/** Descriptor flags: the rights the owner registered the region with.
 * tern refuses, before posting, an operation the descriptor does not
 * allow (-TERN_EACCESS); the provider enforces the real rights. */
#define TERN_MR_DESC_REMOTE_READ   (1U << 1)
#define TERN_MR_DESC_REMOTE_WRITE  (1U << 2)
#define TERN_MR_DESC_REMOTE_ATOMIC (1U << 3)
#define TERN_MR_DESC_FLAGS                                   \
	(TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_READ | \
	 TERN_MR_DESC_REMOTE_WRITE | TERN_MR_DESC_REMOTE_ATOMIC)

/*
 * A region registered in chunks (docs/api.md, "Regions larger than one
 * registration"): bits 8-13 of flags hold log2 of the chunk size (0: one
 * registration). Chunk c covers [c << shift, (c + 1) << shift) of the
 * region, and keys[] holds every chunk's keys, chunk by chunk, nkeys (one
 * per rail) each: key (c, rail) is entry c * nkeys + rail. With
 * TERN_MR_DESC_KEY32 every key fits in 32 bits (EFA's and verbs' do) and
 * two share a word, low half first, so 64 fit; else 32 do. Such a
 * descriptor packs as version 2, which a tern that knows only version 1
 * refuses (-TERN_EVERSION); a one-chunk one packs as version 1, as always.
 * tern_mr_desc() sets these; copy them, do not build them.
 */
#define TERN_MR_DESC_KEY32		(1U << 4)
#define TERN_MR_DESC_CHUNK_MASK		(0x3fU << 8)
#define TERN_MR_DESC_CHUNK_SHIFT(flags) (((flags) >> 8) & 0x3fU)
/** Every flag a descriptor may carry. */
#define TERN_MR_DESC_FLAGS_ALL \
	(TERN_MR_DESC_FLAGS | TERN_MR_DESC_KEY32 | TERN_MR_DESC_CHUNK_MASK)
/** Keys one descriptor holds: chunks times rails, 64 when 32-bit. */
#define TERN_MR_DESC_KEYS_MAX	TERN_MAX_RAILS
#define TERN_MR_DESC_KEYS32_MAX (2 * TERN_MAX_RAILS)

/** Packed size of a one-chunk descriptor with n keys. */
#define TERN_MR_DESC_PACKED_SIZE(n) (24 + 8 * (size_t)(n))
/** Largest packed descriptor, chunked or not. */
#define TERN_MR_DESC_MAX TERN_MR_DESC_PACKED_SIZE(TERN_MAX_RAILS)

/**
 * What a peer needs to address a registered region: its base, its length,
 * and one key per rail of the owning ctx (per rail and chunk, for a region
 * registered in chunks: above). Plain data; copy freely.
 */
struct tern_mr_desc {
	uint64_t base; /**< address of the region's first byte (owner's view) */
	uint64_t len;  /**< length in bytes */
	uint32_t flags; /**< TERN_MR_DESC_* */
	uint32_t nkeys; /**< keys per chunk = owner's rails */
	uint64_t keys[TERN_MAX_RAILS];
};

/**
 * Register [buf, buf+len) on every rail of @p ctx with the given access
 * rights. The buffer must stay allocated until tern_mr_close(). Buffers
 * aligned to 128 bytes are fastest on EFA; any alignment is accepted.
 * A region longer than the ctx's chunk (the provider's max_mr_size, or
 * TERN_MR_CHUNK) is registered in chunks behind this one region; its
 * operations are split where they cross a chunk (docs/api.md).
 * @return 0; -EINVAL (NULL buf, len 0, no access bits or unknown bits);
 * -TERN_EPROV with the provider's reason in the log; -ENOMEM; -E2BIG when
 * its chunks would need more keys than a descriptor holds (chunks times
 * rails past TERN_MR_DESC_KEYS32_MAX: raise TERN_MR_CHUNK).
 */
TERN_API int tern_mr_reg(struct tern_ctx *ctx, void *buf, size_t len,
			 uint64_t access, struct tern_mr **mr_p);

/**
 * Deregister. A region pins nothing, but operations pin their region:
 * while any operation on it is queued, with the provider or staging
 * (a cancelled one lets go as it is cancelled), the close is refused and
 * changes nothing. tern_ctx_close() closes regions left open.
 * @return 0; -EBUSY with operations in flight on it. tern_mr_close(NULL)
 * returns 0.
 */
TERN_API int tern_mr_close(struct tern_mr *mr);

/** Fill @p desc with what a peer needs to address @p mr. @return 0 */
TERN_API int tern_mr_desc(const struct tern_mr *mr, struct tern_mr_desc *desc);

/** Base address and length of a region. */
TERN_API void *tern_mr_addr(const struct tern_mr *mr);
TERN_API size_t tern_mr_len(const struct tern_mr *mr);

/**
 * Pack a descriptor in the fixed little-endian wire format
 * (docs/protocol.md). @return bytes written, or -ENOSPC / -EINVAL.
 */
TERN_API ssize_t tern_mr_desc_pack(const struct tern_mr_desc *desc, void *buf,
				   size_t len);

/**
 * Unpack and check a descriptor received from a peer.
 * @return bytes consumed; -TERN_EDESC when truncated, of a wrong magic or
 * version, with 0 or too many keys, a bad chunk size, or with base+len
 * overflowing; -TERN_EVERSION for a newer version.
 */
TERN_API ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
				     struct tern_mr_desc *desc);

#ifdef __cplusplus
}
#endif

#endif /* TERN_MR_H */
