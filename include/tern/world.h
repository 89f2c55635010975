/* SPDX-License-Identifier: MIT */
/**
 * @file tern/world.h
 * A world of ranks: a job's processes, found through the engine the job
 * already runs on (a PMIx launcher, an etcd cluster, a shared directory,
 * or a key-value store the caller supplies), each known by its card and
 * the regions it published.
 * docs/world.md has the model and the exact commands.
 */
#ifndef TERN_WORLD_H
#define TERN_WORLD_H

#include <stddef.h>
#include <sys/types.h>

#include <tern/common.h>
#include <tern/ctx.h>
#include <tern/mr.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tern_world;

/** Longest published name, without its NUL ([A-Za-z0-9_.-] only). */
#define TERN_WORLD_NAME_MAX 63
/** Largest value tern_world_put() takes. */
#define TERN_WORLD_VALUE_MAX 4096
/** Most ranks a world holds (joiners included). */
#define TERN_WORLD_MAX_RANKS 4096
/** Longest tern_world_store.prefix, without its NUL. */
#define TERN_WORLD_PREFIX_MAX 255

/** What tern_world_attr.on_member reports. */
enum tern_world_event {
	TERN_WORLD_JOINED = 1, /**< a rank appeared (etcd: after open) */
	TERN_WORLD_GONE = 2,   /**< a rank left or its lease expired */
};

typedef void (*tern_world_cb)(struct tern_world *world, int rank,
			      enum tern_world_event event, void *arg);

/**
 * How to join (tern_world_open()). Start with tern_world_attr_init(), then
 * set what you need.
 *
 * @p field_mask says which fields the caller filled: tern reads a field
 * only when its TERN_WORLD_ATTR_FIELD_* bit is set, and takes the field's
 * default (said at the field) when it is not. A bit this library does
 * not know is refused: -EINVAL, the log names the bit. field_mask 0
 * reads every field of tern 0.1 (all those below; @p rank 0 is then rank
 * 0), as before field_mask (docs/api.md, "Attribute structs").
 */
struct tern_world_attr {
	/** TERN_WORLD_ATTR_FIELD_* bits: the fields set below. */
	uint64_t field_mask;
	/** This process's rank; -1 (the default): from the launcher, else
	 * $TERN_WORLD_RANK. */
	int rank;
	/** Ranks at start; 0 (the default): from the launcher, else
	 * $TERN_WORLD_SIZE. */
	int size;
	/** How long open, fence and lookup wait, in ms; 0 (the default):
	 * 60000. */
	int timeout_ms;
	/** etcd: the lease's time to live in seconds; 0 (the default): 10. */
	int lease_s;
	/** Membership changes, run from the ctx's progress; NULL (the
	 * default): none. */
	tern_world_cb on_member;
	void *arg; /**< passed to on_member; default NULL */
};

/** tern_world_attr.field_mask: one bit per field. */
#define TERN_WORLD_ATTR_FIELD_RANK	 (1ULL << 0)
#define TERN_WORLD_ATTR_FIELD_SIZE	 (1ULL << 1)
#define TERN_WORLD_ATTR_FIELD_TIMEOUT_MS (1ULL << 2)
#define TERN_WORLD_ATTR_FIELD_LEASE_S	 (1ULL << 3)
#define TERN_WORLD_ATTR_FIELD_ON_MEMBER	 (1ULL << 4)
#define TERN_WORLD_ATTR_FIELD_ARG	 (1ULL << 5)
/** Every field this header declares. */
#define TERN_WORLD_ATTR_FIELDS_ALL ((1ULL << 6) - 1)

/**
 * Set the fields of @p attr that @p fields names
 * (TERN_WORLD_ATTR_FIELD_* bits) to their defaults, and attr->field_mask
 * to @p fields; nothing else of @p attr is written.
 * @return 0; -EINVAL for NULL, or for a bit this library does not know
 * (the fields it knows are set all the same, and tern_world_open()
 * refuses the mask).
 */
TERN_API int tern_world_attr_defaults(struct tern_world_attr *attr,
				      uint64_t fields);

/**
 * Fill @p attr with the defaults above and field_mask with
 * TERN_WORLD_ATTR_FIELDS_ALL: then assign the fields you need.
 */
static inline void tern_world_attr_init(struct tern_world_attr *attr)
{
	(void)tern_world_attr_defaults(attr, TERN_WORLD_ATTR_FIELDS_ALL);
}

/**
 * Join the world named by @p spec with @p ctx: "pmix" (under mpirun or
 * srun --mpi=pmix), "etcd://HOST:PORT/PREFIX", or "file:/DIR" (a
 * directory every rank shares); NULL: $TERN_WORLD. Publishes this ctx's
 * card and returns once every rank of the starting size has published
 * its own (or after attr.timeout_ms). Opens no connection: peers are
 * added on first use (tern_world_peer()).
 * @return 0; -EINVAL for a bad spec, rank or size, or a field_mask bit
 * this library does not know (the log names it);
 * -TERN_ENOTSUP for a backend this build or host lacks (libpmix.so.2 or
 * libcurl absent); -ETIMEDOUT; -TERN_EPROTO for a malformed record from
 * the store; -ENOMEM.
 */
TERN_API int tern_world_open(struct tern_ctx *ctx, const char *spec,
			     const struct tern_world_attr *attr,
			     struct tern_world **world_p);

/**
 * A key-value store the caller supplies (tern_world_open_store()): a
 * torch.distributed Store, a job's own key-value service. tern calls it
 * only from the thread that calls the world's functions, never after
 * tern_world_close() returns. Keys are NUL-terminated text (the prefix,
 * then [A-Za-z0-9_./-]); values are bytes, at most TERN_CARD_MAX.
 */
struct tern_world_store {
	/**
	 * Store @p len bytes under @p key, replacing what was there.
	 * @return 0, or a negative errno (the world call fails
	 * -TERN_EPROV and the log names the key and the error).
	 */
	int (*set)(void *arg, const char *key, const void *val, size_t len);
	/**
	 * Read the value under @p key, waiting up to @p timeout_ms for it
	 * to appear (0: do not wait). Copy the first min(its length, @p len)
	 * bytes into @p buf and return its whole length (a value longer
	 * than @p len makes the world call fail -ENOSPC).
	 * @return the length; -ENOENT (or -ETIMEDOUT) when the key is not
	 * there yet: tern asks again, running the ctx's progress between
	 * asks, until attr.timeout_ms has passed; any other negative errno
	 * is a failure (-TERN_EPROV, named in the log). Returning -ENOENT
	 * sooner than @p timeout_ms is allowed: tern then waits the rest.
	 */
	ssize_t (*get)(void *arg, const char *key, void *buf, size_t len,
		       int timeout_ms);
	/** Passed to set and get as is. */
	void *arg;
	/** Put before every key, with a '/': one per world (a job, a run),
	 * at most TERN_WORLD_PREFIX_MAX characters; NULL or "": none. */
	const char *prefix;
};

/**
 * Join a world whose ranks meet in @p store (copied; @p store->arg must
 * stay valid until tern_world_close()). Rank and size are @p attr's and
 * required (no launcher, no environment). Rank r's value NAME is the key
 * "PREFIX/r/NAME" (its card: "PREFIX/r/card"); fence G is one key per
 * rank, "PREFIX/fence/G/r". Otherwise as tern_world_open(): publishes the
 * card and returns once every rank's is there; values are visible once
 * tern_world_put() returns. tern_world_kind() is "store". This backend
 * has no membership: a rank that leaves is never reported GONE (reads and
 * fences that need it time out, -ETIMEDOUT) and no rank joins later.
 * Give each world its own prefix: keys of an earlier world under the
 * same prefix would be taken for this one's.
 * @return 0; -EINVAL for a NULL @p attr or @p store, a store without set
 * or get, a missing or bad rank or size, or a prefix too long (the log
 * names it); -TERN_EPROV when the store's set or get failed;
 * -ETIMEDOUT; -TERN_ECARD or -TERN_EPROTO for what the store returned
 * that tern did not write; -ENOMEM.
 */
TERN_API int tern_world_open_store(struct tern_ctx *ctx,
				   const struct tern_world_store *store,
				   const struct tern_world_attr *attr,
				   struct tern_world **world_p);

/**
 * Leave the world: close the peers it added (as tern_peer_remove()),
 * withdraw this rank (etcd: revoke the lease) and free it. Close a world
 * before its ctx. tern_world_close(NULL) does nothing.
 */
TERN_API void tern_world_close(struct tern_world *world);

/** This process's rank. */
TERN_API int tern_world_rank(const struct tern_world *world);
/** Ranks known: the starting size, grown by joiners (etcd). */
TERN_API int tern_world_size(const struct tern_world *world);
/** "pmix", "etcd", "file" or "store". */
TERN_API const char *tern_world_kind(const struct tern_world *world);
/** 1 while @p rank is a member, 0 once gone (or never seen). */
TERN_API int tern_world_alive(const struct tern_world *world, int rank);

/**
 * The peer of @p rank, added on first call (address-vector insertion
 * from the rank's card); later calls return the same handle, which the
 * world owns (never pass it to tern_peer_remove()).
 * @return 0; -EINVAL for a bad rank or this process's own;
 * -TERN_EPEERGONE for a rank that is gone; -TERN_ECARD; -ETIMEDOUT.
 */
TERN_API int tern_world_peer(struct tern_world *world, int rank,
			     struct tern_peer **peer_p);

/** Add every live rank's peer now (what a first use would cost, at once).
 * @return 0, or the first error of tern_world_peer(). */
TERN_API int tern_world_warmup(struct tern_world *world);

/**
 * Publish @p len bytes (at most TERN_WORLD_VALUE_MAX) under @p name for
 * this rank; every rank can read it with tern_world_get(). Republishing a
 * name replaces its value. A value is visible to others once this call
 * returns (etcd, file, store) or after the next tern_world_fence() (pmix).
 * @return 0; -EINVAL for a bad name or size; -TERN_EPROV if the store
 * refused it (the log says why).
 */
TERN_API int tern_world_put(struct tern_world *world, const char *name,
			    const void *val, size_t len);

/**
 * Read what @p rank published under @p name into @p buf, waiting up to
 * attr.timeout_ms for it to appear.
 * @return the value's length; -ENOSPC if @p len is too small;
 * -ETIMEDOUT; -TERN_EPEERGONE; -EINVAL.
 */
TERN_API ssize_t tern_world_get(struct tern_world *world, int rank,
				const char *name, void *buf, size_t len);

/** Publish a region's descriptor under @p name (tern_world_put() of its
 * packed form). */
TERN_API int tern_world_publish(struct tern_world *world, const char *name,
				const struct tern_mr_desc *desc);

/** Look up the descriptor @p rank published under @p name (checked as
 * tern_mr_desc_unpack() does). @return 0, or as tern_world_get(), or
 * -TERN_EDESC. */
TERN_API int tern_world_lookup(struct tern_world *world, int rank,
			       const char *name, struct tern_mr_desc *desc);

/**
 * Wait until every live rank has called tern_world_fence() as often as
 * this one: what each published before its call is then visible to all.
 * Runs the ctx's progress while it waits.
 * @return 0; -ETIMEDOUT; -TERN_EPEERGONE when a rank left meanwhile.
 */
TERN_API int tern_world_fence(struct tern_world *world);

#ifdef __cplusplus
}
#endif

#endif /* TERN_WORLD_H */
