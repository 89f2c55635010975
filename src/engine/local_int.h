/* SPDX-License-Identifier: MIT */
/*
 * The same-host path's files (docs/local.md), among themselves:
 *   local_inbox.c   the owner's inbox: open, regions, peers it lets
 *                   write, reading their rings, sleeping
 *   local_attach.c  attaching to a peer's inbox: proving who it is
 *   local_broker.c  the fd broker (SCM_RIGHTS), both ends
 *   local_table.c   what a writer reads of a peer's inbox: its table,
 *                   our ring to it, its regions and their mappings here
 *   local_copy.c    operations: checks at the post, the per-peer
 *                   queues, the copies
 * The layout they share with other processes is src/wire/local.h.
 */
#ifndef TERN_LOCAL_INT_H
#define TERN_LOCAL_INT_H

#include <limits.h>
#include <pthread.h>
#include <sys/uio.h>

#include "engine.h"
#include "local.h"

#include "../hmem/cuda.h"
#include "../wire/card.h"
#include "../wire/local.h"

#define LREG  TERN__L_NREG
#define LPEER TERN__L_NPEER
#define LRING TERN__L_RING
#define PAGE  TERN__L_PAGE
#define LDEVS 16 /* GPUs a ctx keeps a copy stream for */

/* Copies by cross-memory attach that one system call takes at most: the
 * kernel's IOV_MAX vectors, and 4 MiB (but the first copy of a run, which
 * goes whatever its length): the owner's tern_mr_close() waits for a
 * whole call, and past that another call costs nothing measurable. */
#ifdef IOV_MAX
#define LCMA_IOV IOV_MAX
#else
#define LCMA_IOV 1024
#endif
#define LCMA_BYTES (4ULL << 20)

/* How long a writer waits for a broker's answer, and between asks
 * while the owner has not added it yet. */
#define LBROKER_WAIT_NS	     2000000000ULL
#define LBROKER_RETRY_NS     20000000ULL
#define LBROKER_RETRY_MAX_NS 1000000000ULL

/* What the broker thread may hand out: its own table, never a field
 * a peer could have written. Guarded by tern__local.lock. */
struct lpriv_reg {
	int live;
	int fd; /* the shared memfd (ours; not closed here), or -1 */
	uint64_t keyhash;
	uint64_t access;
	int whole; /* the region is the whole memfd: it may be handed out */
};

struct lpriv_peer {
	uint32_t pid;
	uint64_t start, nonce;
	int added;
};

/* An attachment: what we hold of one same-host ctx we added (shared by
 * every peer added with a card naming it). */
struct tern__local_peer {
	struct tern_ctx *ctx;
	unsigned int refs;
	uint32_t src_id; /* the peers' (one card) */
	int pidx;	 /* its entry in our lpeer table */
	int pidfd;
	pid_t pid;
	uint64_t start, nonce, inbox_ino;
	int mapped;  /* its inbox is mapped (ro, hdr, ...) */
	int refused; /* attaching failed for good (said once) */
	int cma;     /* cross-memory attach works */
	int broker;  /* its fds come from its broker */
	int wake_fd; /* its eventfd */
	const uint8_t *ro;
	const struct tern__lhdr *hdr;
	const struct tern__lreg *reg;
	const struct tern__lcuda *cu;
	const struct tern__lpeer *peers;
	/* A broker ask under way (the inbox, or region @bidx), else -1. */
	int bsock;
	uint32_t bwhat, bidx;
	uint64_t bdeadline, bretry_at, bretry_ns, bgen;
	uint64_t bfailed_gen[LREG]; /* region generations it refused */
	/* Writing to it: our entry in its table (it lets us write), and
	 * our outgoing ring to it (in our inbox). */
	int cidx;
	uint64_t cgen, seen_peers_gen;
	int oidx;
	/* Reading from it: its ring to us, in its inbox. */
	int ridx;
	uint64_t seen_out_gen;
	int broken; /* its ring made no sense: no longer read */
	int btold;  /* a broker problem was logged */
	unsigned int hint;
	struct tern__reqq q; /* operations waiting for room in its ring */
	struct lmap {
		uint64_t gen;
		uint64_t base, len; /* the region as mapped: copies stay in */
		uint8_t *ptr;	    /* the region's first byte, mapped here */
		void *map;	    /* the mapping (from a page boundary) */
		size_t maplen;
		int cuda;	  /* GPU memory: @ptr is a device pointer */
		int dev;	  /* the device whose context opened it */
		int rdonly;	  /* mapped read-only (its broker said so) */
		tern_cu_ptr dptr; /* what cuIpcOpenMemHandle gave (0: none) */
	} maps[LREG];
};

/* The owner's side: one per ctx. */
struct tern__local {
	int fd; /* the inbox memfd */
	uint8_t *map;
	struct tern__lhdr *hdr;
	struct tern__lreg *reg;
	struct tern__lcuda *cu;
	struct tern__lpeer *lpeer;
	struct tern__card_local id;
	struct {
		tern_cu_ctx cctx; /* the context it was made in */
		tern_cu_stream s;
	} stream[LDEVS]; /* GPU copies, per device */
	/* Attachments by their lpeer entry. */
	struct tern__local_peer *att[LPEER];
	/* Our outgoing rings: how many attachments use each, and when the
	 * last let it go (reused oldest first, so a peer reads what we
	 * wrote last before it goes). */
	unsigned int out_refs[LPEER];
	uint64_t out_released[LPEER];
	/* The broker. */
	int lsock;   /* its listening socket, or -1 (none) */
	int stop_fd; /* an eventfd that ends its thread */
	pthread_t broker;
	pthread_mutex_t lock; /* priv_* */
	struct lpriv_reg priv_reg[LREG];
	struct lpriv_peer priv_peer[LPEER];
	int exited; /* a peer's pidfd fired in the loop: sweep */
	unsigned int ticks;
	uint64_t next_sweep;   /* ns: look at the peers' pidfds again */
	unsigned long nqueued; /* operations on the attachments' queues */
	unsigned long nbroker; /* attachments with a broker ask to watch */
	uint64_t copies, bytes, dropped;
	uint64_t cma_calls; /* process_vm_writev/readv calls made */
	int told;	    /* a refusal was logged */
	/* One cross-memory-attach call's vectors, ours and the peer's
	 * (local_copy.c): here, not on the caller's stack. */
	struct iovec cma_l[LCMA_IOV], cma_r[LCMA_IOV];
};

/* local_inbox.c */
int tern__lpeer_publish(struct tern__local *l, struct tern__local_peer *lp);
void tern__lpeer_state(struct tern__local *l, int pidx, uint32_t state);
void tern__lpeer_unpublish(struct tern__local *l, int pidx);
void tern__local_read_ring(struct tern_ctx *ctx, struct tern__local_peer *lp);
/* Read @lp's ring to us once more, as paired with our entry of
 * generation @cgen read up to @head, after that entry was taken back. */
void tern__local_drain_ring(struct tern_ctx *ctx, struct tern__local_peer *lp,
			    uint64_t cgen, uint64_t head);
/* Wait until @lp copies into none of our regions (@reg: that one, -1:
 * any): the owner's side of the Dekker pair. */
void tern__local_wait_copies(struct tern__local *l, struct tern__local_peer *lp,
			     int reg);

/* local_attach.c */
uint64_t tern__local_start_time(pid_t pid);
int tern__local_map_inbox(struct tern__local_peer *lp, int fd, int wake_fd,
			  uint64_t ino, char *why, size_t whylen);
void tern__local_attached(struct tern_ctx *ctx, struct tern__local_peer *lp);
void tern__local_refuse(struct tern_ctx *ctx, pid_t pid, const char *why);
void tern__local_peer_put(struct tern_ctx *ctx, struct tern__local_peer *lp);

/* local_broker.c */
void tern__broker_start(struct tern__local *l);
void tern__broker_stop(struct tern__local *l);
/* Start asking @lp's broker for @what (@idx): 0 sent (the answer comes
 * to tern__broker_poll()), or -errno (not its process, no broker). */
int tern__broker_ask(struct tern__local *l, struct tern__local_peer *lp,
		     uint32_t what, uint32_t idx, const uint64_t *keys,
		     uint32_t nkeys);
/* An ask under way: its answer, or its deadline. 1 while waiting. */
int tern__broker_poll(struct tern_ctx *ctx, struct tern__local_peer *lp);
void tern__broker_cancel(struct tern__local *l, struct tern__local_peer *lp);

/* local_table.c */
void tern__local_maps_drop(struct tern__local_peer *lp);
int tern__local_map_region_fd(struct tern__local_peer *lp, int i, uint64_t gen,
			      int fd, int rdonly);
uint8_t *tern__local_region_map(struct tern__local *l,
				struct tern__local_peer *lp, int i,
				uint64_t gen, const struct tern_mr_desc *rd);
int tern__local_allowed(const struct tern__local *l,
			struct tern__local_peer *lp);
struct tern__lout *tern__local_out_get(struct tern__local *l,
				       struct tern__local_peer *lp);
int tern__local_region_find(struct tern__local_peer *lp, uint64_t addr,
			    uint64_t len, uint64_t right,
			    const struct tern_mr_desc *rd, uint64_t *gen_p,
			    uint64_t *base_p);

#endif /* TERN_LOCAL_INT_H */
