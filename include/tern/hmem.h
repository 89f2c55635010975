/* SPDX-License-Identifier: MIT */
/**
 * @file tern/hmem.h
 * GPU memory: registering CUDA buffers, and moving them.
 *
 * A CUDA buffer is registered with tern_mr_regattr() and kind
 * TERN_MEM_CUDA. It then takes one of two paths (tern_mr_path()):
 *
 * - zero-copy: the provider reads and writes GPU memory itself (libfabric
 *   FI_HMEM: EFA and verbs with GPUDirect RDMA). The ctx must have been
 *   opened with TERN_CTX_HMEM so that tern asked the provider for it.
 * - staged: the provider cannot (Debian's libfabric has no CUDA support;
 *   shm and tcp never do). tern gives the region a pinned host shadow of
 *   the same size and registers that. Operations whose local buffer is the
 *   region copy through the shadow on a tern-owned CUDA stream, in chunks,
 *   so that the copy of one chunk overlaps the transfer of the one before:
 *   sources are copied GPU -> shadow before their chunk is posted; sinks
 *   (receives, reads) are copied shadow -> GPU after their chunk lands, and
 *   complete only then. Peers address the region as any other.
 *
 * What peers do to a region one-sidedly (their writes into it, their reads
 * from it) lands in, or comes from, the shadow: the owner makes it reach
 * the GPU with tern_mr_sync(TERN_MR_SYNC_IN) once it knows the writes
 * landed (e.g. tern_imm_expect() completed), and makes the GPU's bytes
 * readable with tern_mr_sync(TERN_MR_SYNC_OUT) before telling peers to
 * read. On a zero-copy region tern_mr_sync() does nothing and completes at
 * once, so code written for both paths is the same.
 *
 * CUDA is loaded at run time (dlopen "libcuda.so.1"); tern links no CUDA
 * library. Where it is absent, registering CUDA memory fails with
 * -TERN_ENOCUDA and tern_mem_probe() says why. docs/gpu.md has the whole
 * story.
 */
#ifndef TERN_HMEM_H
#define TERN_HMEM_H

#include <stddef.h>
#include <stdint.h>

#include <tern/mr.h>
#include <tern/req.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Memory kinds. */
enum tern_mem_kind {
	TERN_MEM_HOST = 0, /**< ordinary host memory */
	TERN_MEM_CUDA = 1, /**< CUDA device memory (cuMemAlloc, cudaMalloc) */
	/** Host memory peers on the same host map (tern_mem_alloc() only):
	 * a memfd of its own, never named in /dev/shm; a same-host peer
	 * writes it with memcpy (docs/local.md). Registered and queried as
	 * host memory. */
	TERN_MEM_SHARED = 2,
};

/** How a region's bytes reach the NIC. */
enum tern_mr_path {
	TERN_MR_PATH_HOST = 0,	 /**< host memory, registered as it is */
	TERN_MR_PATH_ZCOPY = 1,	 /**< GPU memory the provider reaches */
	TERN_MR_PATH_STAGED = 2, /**< GPU memory copied via a host shadow */
};

/** tern_mr_attr.flags: stage even where zero-copy is offered. */
#define TERN_MR_F_STAGED (1ULL << 0)
/** tern_mr_attr.flags: host memory registered on its own, never sharing
 * a live registration nor shared (the registration cache, docs/api.md). */
#define TERN_MR_F_NOCACHE (1ULL << 1)

/**
 * What to register (tern_mr_regattr()). Start with tern_mr_attr_init(),
 * then set what you need.
 *
 * @p field_mask says which fields the caller filled: tern reads a field
 * only when its TERN_MR_ATTR_FIELD_* bit is set, and takes the field's
 * default (said at the field) when it is not. A bit this library does
 * not know is refused: -EINVAL, the log names the bit. field_mask 0
 * reads every field of tern 0.1 (all those below; @p device 0 is then
 * device 0), so a struct zero-initialised and then set field by field
 * works as before field_mask (docs/api.md, "Attribute structs").
 */
struct tern_mr_attr {
	/** TERN_MR_ATTR_FIELD_* bits: the fields set below. */
	uint64_t field_mask;
	void *buf;  /**< first byte (a device pointer for CUDA); required */
	size_t len; /**< bytes, > 0; required */
	uint64_t access; /**< TERN_ACCESS_*; default 0 */
	/** TERN_MEM_HOST or TERN_MEM_CUDA; default TERN_MEM_HOST. */
	enum tern_mem_kind kind;
	/** CUDA: the device the buffer lives on, or -1 to ask CUDA (the
	 * default). A mismatch with what CUDA says is refused (-EINVAL). */
	int device;
	uint64_t flags; /**< TERN_MR_F_*; default 0 */
};

/** tern_mr_attr.field_mask: one bit per field. */
#define TERN_MR_ATTR_FIELD_BUF	  (1ULL << 0)
#define TERN_MR_ATTR_FIELD_LEN	  (1ULL << 1)
#define TERN_MR_ATTR_FIELD_ACCESS (1ULL << 2)
#define TERN_MR_ATTR_FIELD_KIND	  (1ULL << 3)
#define TERN_MR_ATTR_FIELD_DEVICE (1ULL << 4)
#define TERN_MR_ATTR_FIELD_FLAGS  (1ULL << 5)
/** Every field this header declares. */
#define TERN_MR_ATTR_FIELDS_ALL ((1ULL << 6) - 1)

/**
 * Set the fields of @p attr that @p fields names (TERN_MR_ATTR_FIELD_*
 * bits) to their defaults, and attr->field_mask to @p fields; nothing
 * else of @p attr is written.
 * @return 0; -EINVAL for NULL, or for a bit this library does not know
 * (the fields it knows are set all the same, and tern_mr_regattr()
 * refuses the mask).
 */
TERN_API int tern_mr_attr_defaults(struct tern_mr_attr *attr, uint64_t fields);

/**
 * Set every field of @p attr to its default and field_mask to
 * TERN_MR_ATTR_FIELDS_ALL: then assign the fields you need.
 */
static inline void tern_mr_attr_init(struct tern_mr_attr *attr)
{
	(void)tern_mr_attr_defaults(attr, TERN_MR_ATTR_FIELDS_ALL);
}

/**
 * Register memory of any kind on every rail of @p ctx. Host memory is
 * registered as tern_mr_reg() does. CUDA memory: tern makes a CUDA context
 * current on the calling thread if none is (the primary context of the
 * buffer's device), checks that @p buf is device memory of that device,
 * and registers it zero-copy or staged (see the file comment; the log says
 * which, tern_mr_path() tells). A ctx stages for one GPU only: regions of
 * a second GPU on the same ctx are refused (open one ctx per GPU).
 * @return 0; -EINVAL (as tern_mr_reg(), or @p buf is not device memory of
 * @p device, or a field_mask bit this library does not know);
 * -TERN_ENOCUDA (CUDA absent: no libcuda.so.1, no GPU);
 * -TERN_ENOTSUP (TERN_ACCESS_REMOTE_ATOMIC on a staged region: atomics
 * would act on the shadow, which the GPU never sees; or a second GPU);
 * -TERN_EHMEM (a CUDA call failed; the log has CUDA's reason);
 * -TERN_EPROV; -ENOMEM (no pinned host memory for the shadow).
 */
TERN_API int tern_mr_regattr(struct tern_ctx *ctx,
			     const struct tern_mr_attr *attr,
			     struct tern_mr **mr_p);

/** The path @p mr takes. */
TERN_API enum tern_mr_path tern_mr_path(const struct tern_mr *mr);

/** "host", "cuda zero-copy" or "cuda staged". */
TERN_API const char *tern_mr_path_str(enum tern_mr_path path);

/** tern_mr_sync() directions. */
#define TERN_MR_SYNC_IN	 (1U << 0) /**< what peers wrote -> the GPU */
#define TERN_MR_SYNC_OUT (1U << 1) /**< the GPU's bytes -> what peers read */

/**
 * Make [off, off+len) of a staged region consistent in one direction,
 * asynchronously (chunked copies on tern's stream); @p req completes when
 * the copies have. On a host or zero-copy region it completes at the next
 * progress with nothing to do. The caller must not let peers write into
 * (SYNC_IN) or read from (SYNC_OUT) the range while it runs.
 * @return 0 (queued); -EINVAL (NULL, both or no direction);
 * -TERN_EBOUNDS.
 */
TERN_API int tern_mr_sync(struct tern_mr *mr, uint64_t off, uint64_t len,
			  unsigned int dir, struct tern_req *req);

/** What tern_mem_probe() found. */
struct tern_mem_info {
	int available;	    /**< 1: memory of this kind can be used */
	int devices;	    /**< CUDA devices */
	int driver_version; /**< CUDA driver version, e.g. 12040 */
	int fake;	    /**< 1: the test driver of $TERN_FAKE_CUDA */
	char why[160];	    /**< when not available: the reason */
};

/**
 * Can memory of @p kind be used here? Loads the CUDA driver on first use
 * (once per process). @return 0 with @p info filled (available or not);
 * -EINVAL for an unknown kind.
 */
TERN_API int tern_mem_probe(enum tern_mem_kind kind,
			    struct tern_mem_info *info);

/**
 * Allocate @p len bytes of @p kind, for tools and tests that need memory
 * of a kind without linking CUDA themselves, and for memory same-host
 * peers write with memcpy.
 *
 * Host memory is page-aligned; from 2 MiB up it is 2 MiB-aligned with its
 * length rounded up to whole 2 MiB, so that transparent huge pages can
 * back it, and where the kernel's mode
 * (/sys/kernel/mm/transparent_hugepage/enabled) is "madvise", tern asks
 * for them (madvise MADV_HUGEPAGE) before the first touch. Under "always"
 * the kernel does it itself; under "never" nothing does. Lengths under
 * 2 MiB are not rounded up (a small buffer would cost a whole huge page):
 * ask for 2 MiB to have a smaller buffer on one huge page.
 * $TERN_THP=0 turns both off (page-aligned, no advice), for comparison.
 *
 * Shared memory (TERN_MEM_SHARED, @p device ignored): a memfd of @p len
 * rounded up to a page, mapped here, 2 MiB-aligned when at least that
 * long and advised for huge pages (shmem's own THP setting decides).
 *
 * CUDA memory: cuMemAlloc on @p device, making its primary context
 * current if none is.
 *
 * @return 0; -TERN_ENOCUDA; -TERN_EHMEM; -ENOMEM; -EINVAL (@p ptr_p NULL,
 * @p len 0, an unknown kind, a negative device for CUDA); for shared
 * memory the error of memfd_create() or ftruncate() (e.g. -EMFILE).
 */
TERN_API int tern_mem_alloc(enum tern_mem_kind kind, int device, size_t len,
			    void **ptr_p);

/**
 * Free what tern_mem_alloc() gave, of the @p kind it was given as, however
 * it was aligned. Shared memory stays mapped by peers that mapped it until
 * they let go (removed the peer), but is no longer this process's.
 * NULL: 0. @return 0; -TERN_EHMEM; -EINVAL (CUDA memory where CUDA is
 * absent, an unknown kind, shared memory that is not such an allocation).
 */
TERN_API int tern_mem_free(enum tern_mem_kind kind, void *ptr);

/**
 * Copy @p len bytes between any two kinds (CUDA's unified addressing:
 * host, device or either), synchronously: it returns when the bytes are
 * at @p dst, also from pageable host memory to the GPU (where cuMemcpy
 * alone returns earlier). Host-only copies need no CUDA.
 * @return 0; -TERN_EHMEM; -TERN_ENOCUDA.
 */
TERN_API int tern_mem_copy(void *dst, const void *src, size_t len);

/**
 * The kind of memory @p ptr points to (and its CUDA device, -1 for host).
 * Without CUDA, every pointer is host memory. @return 0 or -EINVAL.
 */
TERN_API int tern_mem_query(const void *ptr, enum tern_mem_kind *kind_p,
			    int *device_p);

#ifdef __cplusplus
}
#endif

#endif /* TERN_HMEM_H */
