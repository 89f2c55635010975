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

/** Packed size of a descriptor with n keys. */
#define TERN_MR_DESC_PACKED_SIZE(n) (24 + 8 * (size_t)(n))
/** Largest packed descriptor. */
#define TERN_MR_DESC_MAX TERN_MR_DESC_PACKED_SIZE(TERN_MAX_RAILS)

/**
 * What a peer needs to address a registered region: its base, its length,
 * and one key per rail of the owning ctx. Plain data; copy freely.
 */
struct tern_mr_desc {
	uint64_t base; /**< address of the region's first byte (owner's view) */
	uint64_t len;  /**< length in bytes */
	uint32_t flags; /**< TERN_MR_DESC_* */
	uint32_t nkeys; /**< number of valid keys = owner's rails */
	uint64_t keys[TERN_MAX_RAILS];
};

/**
 * Register [buf, buf+len) on every rail of @p ctx with the given access
 * rights. The buffer must stay allocated until tern_mr_close(). Buffers
 * aligned to 128 bytes are fastest on EFA; any alignment is accepted.
 * @return 0; -EINVAL (NULL buf, len 0, no access bits or unknown bits);
 * -TERN_EPROV with the provider's reason in the log; -ENOMEM.
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
 * version, with 0 or too many keys, or with base+len overflowing;
 * -TERN_EVERSION for a newer version.
 */
TERN_API ssize_t tern_mr_desc_unpack(const void *buf, size_t len,
				     struct tern_mr_desc *desc);

#ifdef __cplusplus
}
#endif

#endif /* TERN_MR_H */
