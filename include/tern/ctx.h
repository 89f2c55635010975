/* SPDX-License-Identifier: MIT */
/**
 * @file tern/ctx.h
 * Progress contexts, their rails, peer cards and peers.
 *
 * A ctx owns one or more rails (a libfabric domain + RDM endpoint +
 * completion queue + address vector each), the queue of operations waiting
 * to be posted, and the immediate-data counters. A ctx is driven by exactly
 * one thread: nothing in this header is thread-safe; use one ctx per thread.
 */
#ifndef TERN_CTX_H
#define TERN_CTX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most rails (endpoints) one ctx can drive. */
#define TERN_MAX_RAILS 32
/** Largest endpoint address tern carries in a card. */
#define TERN_ADDR_MAX 256
/** Largest packed card, in bytes (header + addresses). */
#define TERN_CARD_MAX 2060

struct tern_ctx;
struct tern_peer;

/**
 * Attributes for tern_ctx_open(). Start with tern_ctx_attr_init(), then
 * set what you need.
 *
 * @p field_mask says which fields the caller filled: tern reads a field
 * only when its TERN_CTX_ATTR_FIELD_* bit is set, and takes the field's
 * default when it is not: 0 or NULL, with the meaning said at the field.
 * A bit this library does not know (a header newer than the library) is
 * refused: -EINVAL, the log names the bit. field_mask 0 reads every field
 * of tern 0.1 (all those below), so a struct zero-initialised and then
 * set field by field or with designated initialisers works as before
 * field_mask (docs/api.md, "Attribute structs").
 */
struct tern_ctx_attr {
	/** TERN_CTX_ATTR_FIELD_* bits: the fields set below. */
	uint64_t field_mask;
	/**
	 * libfabric provider name ("efa", "verbs;ofi_rxm", "tcp;ofi_rxm",
	 * "shm", or "tcp" / "verbs" as short forms), or NULL for automatic
	 * choice: $TERN_PROVIDER, else the first present of efa, verbs
	 * (RDM via ofi_rxm), tcp;ofi_rxm. shm is never chosen automatically.
	 */
	const char *provider;
	/**
	 * Local address or interface to bind (e.g. "127.0.0.1" for tcp over
	 * loopback), or NULL for the provider's default. $TERN_NODE is used
	 * when NULL.
	 */
	const char *node;
	/** Libfabric domain name to use (e.g. "rdmap16s27-rdm"), or NULL. */
	const char *domain;
	/** Number of rails (endpoints) to open; 0 means 1. */
	unsigned int rails;
	/**
	 * Log threshold to set (process-wide, like libfabric's
	 * FI_LOG_LEVEL), or TERN_LOG_NONE (0) to keep $TERN_LOG's.
	 */
	enum tern_log_level log_level;
	/** Operations posted per rail per progress pass; 0 = default (32). */
	unsigned int post_batch;
	/** TERN_CTX_* flags; default 0. */
	uint64_t flags;
	/**
	 * With several rails, a tern_write() or tern_read() longer than this
	 * is split into chunks of this size, spread round-robin over the
	 * rails, and completes once when all have. 0 = $TERN_STRIPE_CHUNK or
	 * TERN_STRIPE_CHUNK_DEFAULT; at least 4096.
	 */
	uint64_t stripe_chunk;
	/**
	 * Rails on several domains (NICs): a comma-separated list of
	 * libfabric domain names, one rail each ("rdmap79s0-rdm,rdmap80s0-rdm";
	 * an RDMA device name matches its domains: "rdmap79s0"), or "gpu=N":
	 * the NICs `tern topo` maps to GPU N. NULL: $TERN_DOMAINS, else one
	 * domain (@p domain, or the provider's first) with @p rails endpoints.
	 * With a list, @p rails must be 0, 1 or its length; @p node is ignored.
	 */
	const char *domains;
	/**
	 * libfabric fabric to use, or NULL: $TERN_FABRIC, else the
	 * provider's choice. On efa (libfabric 2.1 and later) "efa-direct"
	 * maps each call to one hardware work request: messages up to the
	 * MTU (about 8 KiB), RMA split at the device's limit, no atomics
	 * (-TERN_ENOTSUP); "efa" emulates what the hardware lacks (atomics,
	 * messages of any size). NULL on efa means efa-direct where offered,
	 * else efa (docs/efa.md). On other providers a fabric name as
	 * `tern info` lists it (tcp: a subnet such as "192.0.2.0/24").
	 */
	const char *fabric;
};

/** tern_ctx_attr.field_mask: one bit per field. */
#define TERN_CTX_ATTR_FIELD_PROVIDER	 (1ULL << 0)
#define TERN_CTX_ATTR_FIELD_NODE	 (1ULL << 1)
#define TERN_CTX_ATTR_FIELD_DOMAIN	 (1ULL << 2)
#define TERN_CTX_ATTR_FIELD_RAILS	 (1ULL << 3)
#define TERN_CTX_ATTR_FIELD_LOG_LEVEL	 (1ULL << 4)
#define TERN_CTX_ATTR_FIELD_POST_BATCH	 (1ULL << 5)
#define TERN_CTX_ATTR_FIELD_FLAGS	 (1ULL << 6)
#define TERN_CTX_ATTR_FIELD_STRIPE_CHUNK (1ULL << 7)
#define TERN_CTX_ATTR_FIELD_DOMAINS	 (1ULL << 8)
#define TERN_CTX_ATTR_FIELD_FABRIC	 (1ULL << 9)
/** Every field this header declares. */
#define TERN_CTX_ATTR_FIELDS_ALL ((1ULL << 10) - 1)

/**
 * Set the fields of @p attr that @p fields names (TERN_CTX_ATTR_FIELD_*
 * bits) to their defaults, and attr->field_mask to @p fields; nothing
 * else of @p attr is written, so a struct from an older header is safe
 * with the mask of its own header.
 * @return 0; -EINVAL for NULL, or for a bit this library does not know
 * (the fields it knows are set all the same, and tern_ctx_open() refuses
 * the mask).
 */
TERN_API int tern_ctx_attr_defaults(struct tern_ctx_attr *attr,
				    uint64_t fields);

/**
 * Set every field of @p attr to its default and field_mask to
 * TERN_CTX_ATTR_FIELDS_ALL: then assign the fields you need. Inline, so
 * that the mask is the one of the header the caller was built with.
 */
static inline void tern_ctx_attr_init(struct tern_ctx_attr *attr)
{
	(void)tern_ctx_attr_defaults(attr, TERN_CTX_ATTR_FIELDS_ALL);
}

/** Default striping chunk (and threshold): 128 KiB. */
#define TERN_STRIPE_CHUNK_DEFAULT (128ULL * 1024)

/** Never sleep in tern_wait(): spin (lowest latency; a core stays busy),
 * and open the completion queues without wait fds. On tcp a wait fd
 * keeps the provider's sockets in an epoll set, and every packet then
 * runs the epoll callback in the kernel: 4-10% of the 8 B message rate on
 * loopback (docs/performance.md). tern_ctx_set_busy_poll(ctx, 0) later
 * lets idle waits sleep again, in short polling steps (no fd).
 * $TERN_BUSY_POLL=1 does the same for every ctx. */
#define TERN_CTX_BUSY_POLL (1ULL << 0)
/** Pin the calling thread to the cores of the NUMA node nearest the
 * ctx's NIC (for shm/tcp: the node it runs on) BEFORE the domains are
 * opened, so that what they allocate is node-local. tern_ctx_query()
 * says where (pinned). A failure to pin is logged, not fatal. */
#define TERN_CTX_PIN (1ULL << 1)
/** Ask the provider to reach GPU memory itself (libfabric FI_HMEM, for
 * zero-copy CUDA regions: tern/hmem.h). Where it cannot, the ctx opens
 * without it and CUDA regions are staged through host memory;
 * tern_ctx_query() says which (hmem). $TERN_HMEM=1 sets it. */
#define TERN_CTX_HMEM (1ULL << 2)

/**
 * Open a progress context.
 * @param attr   attributes (only the fields its field_mask names are
 *               read), or NULL for defaults.
 * @param ctx_p  receives the ctx on success.
 * @return 0; -TERN_ENOPROV if no provider offers what tern needs (the log
 * says why), -EINVAL on bad attributes or a field_mask bit this library
 * does not know, -ENOMEM, -TERN_EPROV.
 */
TERN_API int tern_ctx_open(const struct tern_ctx_attr *attr,
			   struct tern_ctx **ctx_p);

/**
 * Close a ctx and everything still open on it. What happens to its live
 * children, in order:
 * - Timers, deferred work and fd watchers: stopped without running (the
 *   structs are the caller's again, inactive; fds are not closed).
 * - Peers: removed, as tern_peer_remove() (their handles become invalid).
 * - Requests: every one completes exactly once, its callback run inside
 *   this call (the one exception to "callbacks run only from progress"):
 *   queued operations, immediate expectations and staged operations with
 *   -ECANCELED at once; operations already with the provider get up to
 *   2 s to finish, then the endpoints close and they complete -ECANCELED.
 *   Over verbs;ofi_rxm it keeps progressing for $TERN_VERBS_LINGER_MS
 *   (default 20 ms) before the endpoints close, so neither side crashes
 *   on a flow-control credit still in flight (a libfabric bug; README,
 *   "Known limits").
 * - Memory regions: closed once no request uses them any more, even one
 *   tern_mr_close() refused with -EBUSY (their handles become invalid;
 *   the buffers are the caller's to free).
 * All callbacks have run before any of tern's memory is freed; a
 * callback that posts is refused (-ECANCELED).
 * Called from a callback of this ctx, it refuses new posts at once and
 * finishes when the tern call that ran the callback returns; that call
 * (tern_run(), tern_progress(), tern_wait()) then returns -TERN_ECLOSED.
 * tern_ctx_close(NULL) returns 0.
 */
TERN_API int tern_ctx_close(struct tern_ctx *ctx);

/**
 * Run progress for @p ms milliseconds whether or not anything completes,
 * so the provider handles connections that broke (a peer process died)
 * before the ctx is closed: libfabric 1.17's tcp;ofi_rxm can crash in
 * tern_ctx_close() when such a connection was never looked at. Call it
 * when a peer is known gone (its bootstrap socket closed). Not from a
 * callback. @return 0; -EINVAL; -EDEADLK from a callback.
 */
TERN_API int tern_ctx_settle(struct tern_ctx *ctx, int ms);

/** What a ctx is running on; strings live as long as the ctx. */
struct tern_ctx_info {
	const char *provider; /**< e.g. "tcp;ofi_rxm" */
	const char *fabric;   /**< e.g. "127.0.0.1/32" */
	const char *domain;   /**< e.g. "lo" or "rdmap16s27-rdm" */
	unsigned int rails;
	uint64_t mr_mode; /**< libfabric FI_MR_* bits in force */
	size_t tx_size;	  /**< tx queue depth (credits) per rail */
	size_t rx_size;
	size_t cq_data_size; /**< bytes of remote CQ data (immediate) */
	size_t inject_size;
	uint64_t max_msg_size; /**< largest tern_send() */
	size_t mr_key_size;
	int rx_cq_data;	     /**< 1 when writes with data consume receives */
	uint64_t link_speed; /**< bits/s the NIC reports, 0 when unknown */
	int atomic_fadd;     /**< 64-bit fetch-and-add offered */
	int atomic_cswap;    /**< 64-bit compare-and-swap offered */
	/** 1: an idle loop sleeps on the completion queues' wait fds;
	 * 0: the provider has none and an idle loop polls with sleeps of up
	 * to TERN_POLL_SLEEP_MAX_US (tern/loop.h), or busy polling is on. */
	int wait_fd;
	/** With TERN_CTX_PIN: "cores 0-23 (NUMA node 0, the NIC's node)";
	 * else "". */
	const char *pinned;
	/** 1: CUDA regions are registered zero-copy (TERN_CTX_HMEM was
	 * asked and every rail's provider offers FI_HMEM); 0: staged. */
	int hmem;
	/** Staging copies queued between GPU and host shadows, and their
	 * bytes, since the ctx opened (tern/hmem.h). */
	uint64_t stage_copies;
	uint64_t stage_bytes;
	/** Largest single RMA the provider takes; a longer tern_write() or
	 * tern_read() is split into operations of at most this. */
	uint64_t max_rma_size;
	/** 1: messages are libfabric tagged messages; 0: the provider has
	 * none (efa-direct) and tern matches untagged ones to receives
	 * itself, copying each (at most max_msg_size) out of its own
	 * receive buffers. */
	int tagged;
};

/**
 * Switch busy polling on or off for later tern_wait() calls (a latency
 * tool spins while it measures, and sleeps when idle).
 */
TERN_API void tern_ctx_set_busy_poll(struct tern_ctx *ctx, int on);

/**
 * Cap the polling sleeps of an idle loop on a provider without wait fds
 * (ctx_info.wait_fd 0, e.g. shm), in µs; 0 restores the default
 * (TERN_POLL_SLEEP_MAX_US or $TERN_POLL_MAX_US). A passive target whose
 * memory peers use with atomics must keep the provider progressing
 * although it sees no completions of its own: over shm each atomic waits
 * for the target's next poll, so such a target wants a small cap (tern
 * atomic --listen uses 50 µs: about 1-2% of a core while idle).
 */
TERN_API void tern_ctx_set_poll_max(struct tern_ctx *ctx, unsigned int max_us);

/** Describe a ctx. @return 0, or -EINVAL. */
TERN_API int tern_ctx_query(const struct tern_ctx *ctx,
			    struct tern_ctx_info *info);

/**
 * Write this ctx's card: the addresses of all its rails, in the versioned
 * wire format of docs/protocol.md. A peer passes it to tern_peer_add().
 * @return the card's length in bytes, or -ENOSPC if @p len is too small
 * (TERN_CARD_MAX always suffices).
 */
TERN_API ssize_t tern_ctx_card(const struct tern_ctx *ctx, void *buf,
			       size_t len);

/**
 * Add a remote ctx, known by its card, as a peer (one address-vector entry
 * per rail). The card is untrusted: it is checked before use.
 * @return 0; -TERN_ECARD for a malformed card or one from another kind of
 * provider (different address format); -ENOMEM; -TERN_EPROV.
 */
TERN_API int tern_peer_add(struct tern_ctx *ctx, const void *card, size_t len,
			   struct tern_peer **peer_p);

/** tern_peer_add_flags(): the peer goes through the provider only. */
#define TERN_PEER_FABRIC_ONLY (1ULL << 0)

/**
 * tern_peer_add() with @p flags. TERN_PEER_FABRIC_ONLY: tern neither
 * attaches to the peer on this host (its process, inbox and memory are
 * not touched) nor lets it write to this ctx on the same-host path; it is
 * reached through the provider, with the keys its descriptors carry. For
 * a peer not admitted yet, e.g. a server's reply to a client it refuses
 * (docs/local.md, "Trust").
 * @return as tern_peer_add(); -EINVAL for a flag tern does not know.
 */
TERN_API int tern_peer_add_flags(struct tern_ctx *ctx, const void *card,
				 size_t len, uint64_t flags,
				 struct tern_peer **peer_p);

/**
 * Remove a peer. Runs no callback: operations to it still queued in tern
 * are cancelled, and complete with -ECANCELED from the next progress pass
 * (tern_progress(), tern_wait(), tern_run()); operations already handed to
 * the provider complete normally, and the peer's memory is released after
 * the last of them. The handle must not be used after this call.
 * May be called from a callback. tern_peer_remove(NULL) returns 0.
 * @return 0; -EINVAL if the peer was already removed.
 */
TERN_API int tern_peer_remove(struct tern_peer *peer);

/** How tern reaches a peer: tern_peer_path(). */
enum tern_path {
	TERN_PATH_FABRIC = 0, /**< through the provider (its rails) */
	/** Same host (docs/local.md): writes, reads and atomics are copies
	 * by the CPU into the peer's memory (its shared regions mapped, or
	 * cross-memory attach); messages still go through the provider. */
	TERN_PATH_LOCAL = 1,
};

/**
 * The path tern gives @p peer now: TERN_PATH_LOCAL when its card says it
 * runs on this boot of this host, in this user namespace, under this uid,
 * the kernel proved its process holds the inbox the card names, and that
 * process has added a card of ours in turn (the owner of memory lets a
 * same-host peer write to it only then); else TERN_PATH_FABRIC
 * ($TERN_LOCAL=0 makes every peer so; why a same-host peer was refused is
 * logged once per ctx). It may turn TERN_PATH_LOCAL after
 * tern_peer_add(): when the peer adds us later, or its fd broker answers
 * from a later progress pass (docs/local.md).
 * @return an enum tern_path, or -EINVAL for NULL.
 */
TERN_API int tern_peer_path(const struct tern_peer *peer);

/** One rail's path to a peer: tern_peer_rails(). */
struct tern_peer_rail {
	/** 1: in use; 0: down (an operation on it failed with an error
	 * that says the path is gone), tried again after its cooldown */
	int up;
	/** The wait before a down rail is tried again, in ms: doubled by
	 * each failed try and by a failure soon after it came back */
	uint32_t cooldown_ms;
	uint64_t down_ms;  /**< down: for how long, in ms; 0 when up */
	uint64_t downs;	   /**< times it went down */
	uint64_t rerouted; /**< operations and parts moved off it */
	uint64_t probes;   /**< tries while down (writes of 0 bytes) */
};

/**
 * Each rail's path to @p peer (docs/api.md, "When a rail fails"): fills
 * @p rails[i] for the first @p n rails of the ctx. A rail goes down for a
 * peer when an operation on it fails with an error that says the path is
 * gone; new operations then take the other rails, and the failed one's
 * writes and reads go again on a live rail. $TERN_FAILOVER=0 turns this
 * off (every such failure reaches the caller, as with one rail).
 * @return the ctx's number of rails, or -EINVAL (NULL @p peer, or NULL
 * @p rails with @p n > 0).
 */
TERN_API int tern_peer_rails(const struct tern_peer *peer,
			     struct tern_peer_rail *rails, unsigned int n);

#ifdef __cplusplus
}
#endif

#endif /* TERN_CTX_H */
