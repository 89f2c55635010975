/* SPDX-License-Identifier: MIT */
/*
 * The engine's private header: the objects of a ctx (rails, peers, regions,
 * requests' queues, immediates, the loop's state) shared by every file of
 * src/engine/, which is one module.
 */
#ifndef TERN_ENGINE_H
#define TERN_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#include "../core/core.h"
#include "../prov/prov.h"
#include "../wire/desc.h"
#include "dedup.h"

struct tern__stage;
struct tern__local;	 /* local_inbox.c: a ctx's inbox */
struct tern__local_peer; /* local_attach.c: a same-host peer attached */
struct tern__mreg;	 /* mr.c: a provider registration, shared */
struct tern__redo;	 /* failover.c: a part to post again */
struct tern__dedup;	 /* dedup.h: stamped arrivals seen from a sender */

/* A pooled copy of a remote descriptor, for operations that address the
 * peer's region on several rails or in several chunks (striped, staged):
 * the caller's descriptor need not outlive the post, and 32 keys inline
 * would triple every request. The pool grows to the most such operations
 * ever in flight at once and is freed with the ctx: no malloc per
 * operation once warm. */
struct tern__desc {
	struct tern_mr_desc d;
	struct tern__desc *next_free;
};

/*
 * The engine's layout of a request's private area (tern_req._priv, of
 * TERN_REQ_PRIV_SIZE bytes). State every operation has comes first; what
 * one kind of operation needs lives in the union, so no field means two
 * things. Reached through tern__rp(req): a cast, no indirection.
 */
struct tern__req_priv {
	void *fictx[8]; /* the provider's context (TERN__PROV_CTX_SIZE) */
	struct tern_req *next, *prev; /* the queue it is on (queue.h) */
	struct tern_ctx *ctx;
	struct tern_peer *peer; /* holds peer->inflight; NULL once done */
	struct tern_mr *mr;
	void *buf;
	uint32_t imm;	/* the immediate it carries, or waits for */
	uint8_t op;	/* enum tern__op */
	uint8_t rail;	/* the rail it is queued and posted on */
	uint8_t state;	/* enum tern__state */
	uint8_t ready;	/* an expectation on ctx->imm_ready */
	uint8_t sop;	/* a striped write or read: its operation */
	uint8_t xflags; /* TERN__XF_* */
	/* An operation in parts (a batch's pieces, a striped operation's
	 * chunks, a staged operation's chunks): */
	uint32_t npieces;    /* parts in all */
	uint32_t next_piece; /* the next part to start */
	uint32_t inflight;   /* parts started and not finished */
	uint32_t ndone;	     /* parts finished (staged) */
	int32_t err;	     /* the first error of a part */
	union {
		struct { /* write, write_imm, read on one rail */
			uint64_t raddr, rkey;
			/* Several rails: the key on rail_next, where it goes
			 * again should its rail fail (failover.c). */
			uint64_t rkey_next;
			uint8_t rail_next;
			/* A write with immediate: its stamp (dedup.h), 0 for
			 * none, the high word of its remote CQ data. */
			uint32_t stamp;
		} rma;
		struct { /* same host (local_copy.c): rail = region index */
			uint64_t raddr, gen, base; /* as found at the post */
			uint64_t operand, compare; /* atomics */
		} lrma;
		struct { /* fetch-add, compare-swap */
			uint64_t raddr, rkey;
			uint64_t operand; /* the add, or the swap */
			uint64_t compare;
		} atomic;
		struct { /* write_pieces, read_pieces (and _arrays) */
			union {
				const struct tern_piece *pieces;
				const uint64_t *loffs; /* arrays */
			};
			const struct tern_mr_desc *regions;
			const uint64_t *roffs, *lens; /* arrays, or NULL */
			uint32_t nregions;
			uint16_t with_imm; /* TERN_PIECES_IMM */
			uint16_t read;	   /* tern_read_pieces() */
			uint64_t sub;	   /* of the next piece, bytes posted */
		} batch;
		struct { /* a write or read striped over the rails, or cut
			  * where a region's chunk ends (progress.c) */
			uint64_t roff;	       /* where in the region */
			uint64_t chunk;	       /* bytes per part, at most */
			uint64_t off;	       /* the next part's offset */
			struct tern__desc *rd; /* keys per rail */
		} stripe;
		struct { /* a write or read on a staged region */
			uint64_t roff;
			struct tern__desc *rd;
		} staged;
		struct { /* imm_expect */
			uint64_t count;
			uint32_t src; /* its peer's source id, 0: any */
		} expect;
		struct {	      /* tern_mr_sync */
			uint32_t dir; /* TERN_MR_SYNC_IN or _OUT */
		} sync;
	} u;
};

_Static_assert(sizeof(struct tern__req_priv) <= TERN_REQ_PRIV_SIZE,
	       "struct tern__req_priv outgrew tern_req's private area");
_Static_assert(_Alignof(struct tern__req_priv) <= _Alignof(uint64_t),
	       "tern_req's private area is aligned for uint64_t only");
_Static_assert(sizeof(((struct tern__req_priv *)0)->fictx) >=
		       TERN__PROV_CTX_SIZE,
	       "request context too small for the provider");

/* The engine's view of @req's private area: a cast, costs no instruction. */
#define tern__rp(req) ((struct tern__req_priv *)(void *)(req)->_priv)

/* Piece @i of a batch: from its table, or from the three arrays of
 * tern_write_pieces_arrays() (region 0). */
static inline struct tern_piece tern__piece(const struct tern__req_priv *rp,
					    uint32_t i)
{
	if (rp->u.batch.lens == NULL)
		return rp->u.batch.pieces[i];
	return (struct tern_piece){ .loff = rp->u.batch.loffs[i],
				    .roff = rp->u.batch.roffs[i],
				    .len = rp->u.batch.lens[i] };
}

/* The request whose private area holds @fictx (a completion's context). */
static inline struct tern_req *tern__req_of_fictx(void *fictx)
{
	return (struct tern_req *)(void *)((char *)fictx -
					   offsetof(struct tern_req, _priv) -
					   offsetof(struct tern__req_priv,
						    fictx));
}

#include "queue.h" /* needs struct tern__req_priv */

/* Operations a request can carry (tern__rp(req)->op). */
enum tern__op {
	TERN__OP_NONE = 0,
	TERN__OP_SEND,
	TERN__OP_RECV,
	TERN__OP_WRITE,
	TERN__OP_WRITE_IMM,
	TERN__OP_IMM_EXPECT,
	TERN__OP_SEND_IMM,
	TERN__OP_READ,
	TERN__OP_PIECES,
	TERN__OP_FADD,
	TERN__OP_CSWAP,
	TERN__OP_SYNC,	/* tern_mr_sync(): copies only (src/hmem/) */
	TERN__OP_QUIET, /* tern_quiet(): waits on its epoch (nbi.c) */
};

/* tern__rp(req)->xflags */
#define TERN__XF_DELIVER   (1U << 0) /* ask for delivery complete */
#define TERN__XF_DESC	   (1U << 1) /* holds a pooled descriptor */
#define TERN__XF_CANCELLED (1U << 2) /* staged: cancelled, start no more */
#define TERN__XF_TIMER	   (1U << 3) /* expectation: its timer is in fictx */
#define TERN__XF_PROBE	   (1U << 4) /* tern's own: tries a down rail */

/* Where a request is (tern__rp(req)->state). */
enum tern__state {
	TERN__ST_IDLE = 0,
	TERN__ST_QUEUED,  /* on a rail's txq/rxq */
	TERN__ST_POSTED,  /* handed to the provider, on ctx->posted */
	TERN__ST_WAITING, /* an imm expectation in the imm table */
	TERN__ST_STAGING, /* on a staged region: in ctx->stage (src/hmem/) */
	TERN__ST_READY,	  /* finished, on ctx->ready: its callback is due */
	TERN__ST_LOCALQ,  /* same-host: waiting for ring room (local_*.c) */
	TERN__ST_QUIET,	  /* tern_quiet(): its epoch's operations run (nbi.c) */
	TERN__ST_DONE,
};

/* Receives posted per rail to absorb remote CQ data (ctx->caps.rx_cq_data). */
#define TERN__SINKS 64

/*
 * A provider context owned by a rail, for operations whose request cannot
 * be the context: each piece of a batched write, and atomics (whose
 * operand, compare and result words must sit in registered memory: the
 * rail's scratch, 3 words per slot). One slot per tx credit, so a slot is
 * always free when a credit is.
 */
struct tern__slot {
	void *fictx[8];
	struct tern_req *owner;
	/* The part it carries, to post it again elsewhere should its rail
	 * fail (failover.c): a striped or cut operation's offset, or a
	 * batch's piece and how far into it. */
	uint64_t part;
	uint32_t piece;
	uint32_t stamp; /* a part with an immediate: its stamp (dedup.h) */
};

struct tern_rail {
	struct tern_ctx *ctx;
	unsigned int idx;
	struct tern__prov_rail prov; /* src/prov/'s; never read here */
	int wait_fd; /* the CQ's wait fd, or -1 when it offers none */
	size_t tx_credits;
	size_t rx_credits;
	struct tern__reqq txq; /* queued sends/writes, posted in order */
	struct tern__reqq rxq; /* queued receives */
	/* The provider refused the last pass's posts from that queue
	 * (-FI_EAGAIN, nothing went out): the loop may sleep a little
	 * before trying again rather than spin (loop.c). Cleared by a post
	 * that goes out and by a newly queued request. */
	uint8_t tx_refused, rx_refused;
	size_t addrlen;
	uint8_t addr[TERN_ADDR_MAX];
	/* Contexts of the remote CQ data sink receives, when rx_cq_data. */
	void *sink_ctx[TERN__SINKS][8];
	struct tern__slot *slots; /* tx_size of them */
	size_t slots_span;	  /* their bytes: tx_size * sizeof(slot) */
	uint32_t *free_slots;	  /* stack of free slot indices */
	uint32_t nfree;
	uint64_t *scratch; /* 3 words per slot, registered as ctx->scratch_mr */
	uint64_t orphan_errs; /* completion errors that name no request */
	uint64_t post_errs;   /* posts the provider failed (not -EAGAIN) */
	/* On a sync_rma rail (src/prov/prov.h): the contexts of the writes
	 * and reads that may complete inside their post, in post order,
	 * until their completions come. A failure that comes back with no
	 * context is the oldest's (reap.c). NULL when not needed, or once
	 * completions came out of that order. */
	void **sync_ring;
	uint32_t sync_mask, sync_head, sync_n;
	/* Where the CQ tells each arrival's source (ctx->imm_source): the
	 * source id (struct tern_peer) of each AV address, 0 for none. */
	uint32_t *src_of;
	size_t nsrc_of;
	/* Silent rails (fence.c): completions read, ever; what the last
	 * check saw, and since when the rail has read none while busy. */
	uint64_t reaped;
	uint64_t stall_mark;
	uint64_t stall_since;
	uint64_t alive_ns;  /* when a check last saw it complete anything */
	uint64_t fenced_ns; /* when it last dropped connections (fence.c) */
};

/* A peer's path over one local rail, once one of them failed
 * (failover.c). Times on the tern__now_ns() clock. */
struct tern__path {
	uint64_t down_ns;     /* when it went down */
	uint64_t up_ns;	      /* when it last came back */
	uint64_t retry_ns;    /* down: an operation may try it from then */
	uint32_t cooldown_ms; /* the wait before that try */
	uint32_t probing;     /* an operation is trying it */
	uint64_t downs;	      /* times it went down */
	uint64_t probes;      /* tries sent while down */
	uint64_t rerouted;    /* operations and parts moved off it */
	/* Fences (fence.c): when we asked the peer to drop its half, the
	 * number of that ask until answered (0: none); when this end last
	 * dropped its connections on this rail. */
	uint64_t fence_ns;
	uint64_t fenced_ns;
	uint32_t fence_token;
};

/* Who sends, shared by the peers added with one card (one source id):
 * the last number stamped on writes with immediate to it, and the window
 * of those it stamped that have arrived here (dedup.h), made on the
 * first; its card's tag and its source id, by which a tagged arrival
 * finds it (ctx->tag_src). */
struct tern__stamps {
	unsigned int refs;
	uint32_t seq;
	uint32_t tag, src;
	struct tern__dedup *win;
};

/* Implicit operations counted in epochs (nbi.c): a peer's, a ctx's. */
struct tern__nbi_epoch;
struct tern__nbi_op;
struct tern__nbi_slab;
struct tern__nbi_scope {
	struct tern__nbi_epoch *head, *tail; /* tail: open, or closed */
	uint64_t seq; /* implicit operations numbered (a peer's) */
};

struct tern_peer {
	struct tern_ctx *ctx;
	struct tern_peer *next, *prev;
	unsigned int nrails;		 /* remote rails in its card */
	uint64_t fiaddr[TERN_MAX_RAILS]; /* per local rail: its remote rail */
	unsigned long inflight;		 /* queued + posted operations */
	int removing; /* tern_peer_remove() is cancelling its operations */
	int removed;
	int gone; /* tern__peer_gone(): posts fail -TERN_EPEERGONE */
	/* Removed, its last operation done inside a pass: freed at the end
	 * of that pass (ctx->release), never inside dispatch. */
	int release_queued;
	struct tern_peer *release_next;
	/* Who sends: peers added with one card share it (and their AV
	 * entries). Never 0; unique in the ctx while any of them lives. */
	uint32_t src_id;
	unsigned long nexpect; /* expectations from it waiting */
	/* Same host (local_*.c): its attachment (shared by the peers added
	 * with cards naming one ctx), or NULL; that ctx's nonce. */
	struct tern__local_peer *local;
	uint64_t local_nonce;
	int fabric_only; /* TERN_PEER_FABRIC_ONLY: never the same-host path */
	/* Rails whose path to it failed (bit per local rail), and each
	 * rail's state, made on the first failure (failover.c). */
	uint32_t down;
	struct tern__path *paths;
	struct tern__stamps *stamps; /* shared with its card's other peers */
	struct tern__nbi_scope nbi;  /* its implicit operations (nbi.c) */
	size_t card_len;
	uint8_t card[]; /* the card it was added with */
};

struct tern_mr {
	struct tern_ctx *ctx;
	struct tern_mr *next, *prev; /* ctx->mrs */
	void *buf;
	size_t len;
	uint64_t access;
	struct tern__prov_mr *pmr[TERN_MAX_RAILS];
	void *desc[TERN_MAX_RAILS];
	uint64_t key[TERN_MAX_RAILS];
	unsigned long inflight; /* queued + posted + staged operations on it */
	int kind;		/* enum tern_mem_kind */
	int device;		/* CUDA device, -1 for host */
	int path;		/* enum tern_mr_path */
	int hidden;		/* tern's own (a shadow): not in ctx->mrs */
	int device_for_prov;	/* zero-copy: the provider is told the GPU
				 * (not the fake driver's, host memory) */
	/* Staged: the pinned host shadow's region (holds the keys). */
	struct tern_mr *smr;
	/* Host memory: the registration it shares (ctx->mregs), or NULL:
	 * its own, in pmr[] alone (mr.c, "the registration cache"). */
	struct tern__mreg *reg;
	int dmabuf_fd; /* zero-copy, while registering: the export, or -1 */
	int local_idx; /* its entry in the ctx's inbox (local_*.c), or -1 */
	uint64_t dmabuf_off;
	/* In chunks (mr.c, "regions larger than one registration"): chunk c
	 * covers [c << chunk_shift, (c + 1) << chunk_shift); its
	 * registrations, descriptors and keys are cpmr/cdesc/ckey[c * nrails
	 * + rail], chunk 0's also in pmr/desc/key. nchunks 1: none of it. */
	uint32_t nchunks;
	uint8_t chunk_shift;
	uint8_t key32; /* every chunk's keys fit in 32 bits */
	/* GPU allocations that one registration cannot span (mr.c,
	 * reg_vmm()): chunks no larger, each its own dmabuf. */
	uint8_t seg_shift;
	uint8_t dmabuf_per_chunk;
	uint8_t whole; /* tern's own buffers: never in chunks (mr.c) */
	struct tern__prov_mr **cpmr;
	void **cdesc;
	uint64_t *ckey;
};

/*
 * One entry of the immediate table. Keyed by (source, imm): source 0 is
 * the imm's own entry, counting arrivals from every source (what
 * tern_imm_expect() and tern_imm_count() see); where the CQ tells the
 * source (FI_SOURCE) an arrival from a known peer counts in that peer's
 * entry too (tern_imm_expect_from()).
 */
struct tern__imm_slot {
	uint64_t key; /* (uint64_t)src << 32 | imm */
	uint32_t used;
	uint32_t nfrom;	  /* src 0: expectations from a peer waiting */
	uint64_t arrived; /* landed and not yet claimed */
	uint64_t sourced; /* src 0: of them, counted in a peer's entry too */
	struct tern_req *req; /* pending expectation, or NULL */
};

struct tern__imm_table {
	struct tern__imm_slot *slots;
	size_t cap;	    /* power of two */
	unsigned int shift; /* 64 - log2(cap) */
	uint64_t key;	    /* random hash key */
	size_t used;
	uint64_t dropped; /* arrivals lost because the table was full */
};

/* Aborts a sender announced (ctrl.c) that no expectation took yet: the
 * next expectation for that (source, imm) fails -TERN_EABORTED. Bounded:
 * peers are untrusted. */
#define TERN__ABORTS	     256 /* remembered at most */
#define TERN__ABORTS_PER_SRC 16	 /* of one source at most */

struct tern__imm_abort {
	uint32_t src; /* 0: an unknown source */
	uint32_t imm;
};

/* tern's own control messages (ctrl.c): receives kept posted on rail 0
 * (on every rail of a ctx that routes around failed rails), a few sends
 * in flight on each; their provider contexts are slots of the rail past
 * its tx credits'. */
#define TERN__CTRL_RECVS 8
#define TERN__CTRL_SENDS 8
#define TERN__CTRL_LEN	 64 /* each buffer: room past the one message */
#define TERN__CTRL_QUEUE 64 /* messages waiting for a free send */

struct tern__ctrl_out {
	struct tern_peer *peer; /* holds peer->inflight */
	uint8_t type;		/* TERN_CTRL_* (wire/ctrl.h) */
	uint8_t rail;		/* FENCE, FENCED: the rail fenced */
	uint8_t via;		/* FENCED: the rail to answer on */
	uint32_t imm;		/* IMM_ABORT */
	uint32_t token;		/* FENCE, FENCED */
	uint64_t until_ns;	/* refused until then: dropped */
};

struct tern__ctrl {
	uint8_t *buf; /* per rail (RECVS + SENDS) * LEN, registered as mr */
	struct tern_mr *mr;
	unsigned int nrails; /* rails that carry them (0 as 1) */
	struct tern__ctrl_out out[TERN_MAX_RAILS * TERN__CTRL_SENDS];
	struct tern__ctrl_out queue[TERN__CTRL_QUEUE];
	unsigned int qhead, qlen;
	uint64_t sent, dropped, bad; /* bad: malformed, dropped */
};

/* A message no receive has taken yet (bounce.c). */
struct tern__unexp {
	struct tern__unexp *next;
	size_t len;
	uint64_t data;
	int imm_data;
	int bounce; /* the receive buffer it is held in, or -1: bytes[] */
	uint8_t bytes[];
};

/* Untagged messaging (bounce.c): rail 0's own receive buffers. Their
 * provider contexts are slots of rail 0 past its tx_size (owner NULL). */
struct tern__bounce {
	unsigned int n; /* buffers */
	size_t len;	/* bytes each: the largest message */
	uint8_t *buf;	/* n * len, registered as mr */
	struct tern_mr *mr;
	struct tern__unexp *ent;	 /* n: a held buffer's entry */
	struct tern__unexp *head, *tail; /* unclaimed messages, oldest first */
	size_t copied;			 /* their bytes copied aside */
	size_t copy_max;		 /* at most; then buffers are held */
	unsigned int held;		 /* buffers held (not re-posted) */
};

/*
 * Tasks other threads hand a ctx (loop.c, tern_task_submit()): the one
 * part of a ctx any thread touches, kept at the end of struct tern_ctx,
 * away from what the ctx's thread reads on every pass (ctx->task_pending
 * is there). Everything here is under lock but users.
 */
struct tern__tasks {
	pthread_mutex_t lock;
	struct tern_task *head, *tail;
	int closed; /* tern_ctx_close() began: submits are refused */
	int ready;  /* lock initialised (tern__loop_init()) */
	/* Submits inside the call: the close waits for none to be left
	 * before it frees the ctx. */
	atomic_uint users;
};

struct tern_ctx {
	struct tern__prov prov; /* src/prov/'s: offerings, fabrics */
	unsigned int nrails;
	unsigned int next_rail;
	unsigned int io_spins; /* progress passes, for tern__loop_poll_ios */
	unsigned int post_batch;
	uint64_t stripe_chunk; /* writes/reads longer are striped */
	char pinned[160];      /* TERN_CTX_PIN: where the thread went */
	int busy_poll;
	int closing;
	/* What the provider demands and offers (src/prov/, decoded once at
	 * open): tern's own limits below derive from it. */
	struct tern__prov_caps caps;
	int atomic_fadd;
	int atomic_cswap;
	/* Writes of at most this many bytes from host memory, without
	 * delivery complete, are posted as copies the provider takes
	 * (TERN__PF_INJECT) and complete from the progress pass that posts
	 * them (post.h). 0: none ($TERN_INJECT=0). */
	size_t inject_max;
	uint64_t max_msg_size; /* the largest tern_send(): the provider's, or
				* the bounce buffers' (untagged) */
	uint64_t max_rma_size; /* longer writes and reads are split */
	struct tern__bounce *bounce; /* untagged: rail 0's receive buffers */
	uint64_t next_key;
	unsigned long nmr;
	unsigned long npeers;
	struct tern_mr *mrs; /* every open region, the scratch included */
	/* The registration cache (mr.c): host memory's live provider
	 * registrations, shared by the regions of the same range and rights;
	 * off with $TERN_MR_CACHE=0. */
	struct tern__mreg *mregs;
	int mr_cache;
	uint64_t mr_cache_hits, mr_cache_misses;
	/* log2 of the largest one registration (mr.c): the provider's
	 * max_mr_size or TERN_MR_CHUNK, whichever is smaller; 0: no limit. */
	uint8_t mr_chunk_shift;
	uint8_t mr_chunk_user;	    /* set by TERN_MR_CHUNK: never widened */
	struct tern_peer *peers;    /* live peers, for teardown accounting */
	struct tern_peer *release;  /* removed peers to free after the pass */
	struct tern_mr *scratch_mr; /* every rail's scratch; not in nmr */
	uint64_t *scratch;
	struct tern__reqq posted; /* handed to the provider */
	struct tern__imm_table imm;
	/* Arrivals tell their source (every rail has FI_SOURCE): writes
	 * with immediate and messages; messages (tern's own) at least. */
	int imm_source;
	int msg_source;
	uint32_t next_src_id;
	struct tern__imm_abort aborts[TERN__ABORTS]; /* oldest first, a ring */
	unsigned int abort_head, naborts;
	struct tern__ctrl *ctrl;     /* tagged rails: ctrl.c */
	int ctrl_pending;	     /* control messages wait to be posted */
	unsigned long imm_completed; /* expectations completed this pass */
	struct tern__reqq imm_ready; /* satisfied when they were made */
	/* Finished outside a CQ read (cancelled, failed to post, of a
	 * removed peer): their callbacks run from the next progress pass. */
	struct tern__reqq ready;
	struct tern__desc *desc_free; /* the pool of descriptor copies */
	/* A failed rail routed around (failover.c): on unless
	 * $TERN_FAILOVER=0; the first wait before a down rail is tried
	 * again; parts to post again on another rail; what happened. */
	int failover;
	uint32_t cooldown_ms;
	struct tern__redo *redo_head, *redo_tail;
	uint64_t rails_down, rails_up, rerouted;
	/* Silent rails and fences (fence.c): a rail busy and completing
	 * nothing this long is silent ($TERN_RAIL_STALL_MS, 0: not
	 * watched); the timer that watches, running while anything is in
	 * flight (stall_on) or stopped until the next operation
	 * (stall_idle); whether the provider can fence. */
	uint32_t stall_ms;
	int stall_on, stall_idle;
	struct tern_timer stall_timer;
	int fence_ok;
	uint32_t next_token;
	uint64_t fences;
	/* Writes with immediate stamped (dedup.h): on a failover ctx whose
	 * remote CQ data has room, in its layout (the bits every stamp
	 * carries: tagged where the CQ names no source of writes; the last
	 * number); the stamps of each source id, and the source id of
	 * each tag (TERN__TAG_SHARED: two peers'), for the arrivals;
	 * arrivals dropped as repeats, and repeats that could not be
	 * checked (told as aborted). */
	int stamp;
	uint32_t stamp_hi, stamp_max;
	struct tern__stamps **stamps_of;
	size_t nstamps_of;
	uint32_t *tag_src;
	uint64_t imm_dups, imm_unchecked;
	/* Implicit operations (nbi.c): all of the ctx's, the pool. */
	struct tern__nbi_scope nbi;
	struct tern__nbi_op *nbi_free;
	struct tern__nbi_slab *nbi_slabs;
	struct tern__nbi_epoch *nbi_epoch_free;
	unsigned long nbi_inflight, nbi_max; /* TERN_NBI_MAX */
	unsigned long nbi_nslabs;	     /* the pool's size, in slabs */
	unsigned long nexpect;		     /* expectations waiting */
	/* The loop (src/engine/loop.c). */
	int epfd;     /* rails' wait fds, the user's fds, wakefd */
	int wakefd;   /* eventfd written by tern_stop() */
	int can_wait; /* every rail's CQ has a wait fd */
	/* tern_stop(), from any thread or a signal handler: atomic (lock
	 * free, so signal-safe), read and written relaxed. */
	atomic_int stop;
	/* 1 while ctx->tasks has any: the one thing a progress pass reads
	 * of them (relaxed), so a single-threaded program pays a load. */
	atomic_uint task_pending;
	int depth;	   /* nesting of tern calls that run callbacks */
	int close_pending; /* 1: a callback closed the ctx; 2: closing */
	unsigned int idle;
	uint64_t poll_ns;     /* current sleep between polls (no wait fd) */
	uint64_t poll_max_ns; /* longest, once idle a while */
	uint64_t idle_since;  /* when the loop last did work */
	uint64_t timer_now;   /* the clock of the timer round running */
	struct tern_timer *timer_head, *timer_tail;
	unsigned long ntimers;
	struct tern_defer *defer_head, *defer_tail; /* next round */
	struct tern_defer *drun_head, *drun_tail;   /* this round */
	unsigned long nios;
	int nevs, cur_ev;	   /* the epoll batch being dispatched */
	void *evs;		   /* struct epoll_event[TERN__EVS] */
	struct tern__stage *stage; /* src/engine/stage.c, made on first need */
	struct tern__local *local; /* same-host path (local_*.c), or NULL */
	uint64_t stage_copies;	   /* staging copies queued, ever */
	uint64_t stage_bytes;
	struct tern_rail rails[TERN_MAX_RAILS];
	struct tern__tasks tasks;
};

/* One completion, decoded (reap.c) for the loop. */
struct tern__cqe {
	struct tern_req *req;	 /* NULL for an arriving immediate */
	struct tern__slot *slot; /* set when the context was a rail slot */
	int status;		 /* 0 or negative (req's errmsg already set) */
	size_t len;
	uint64_t data;
	int imm;      /* 1: a write with immediate landed */
	int imm_data; /* a receive's data field is valid */
	uint32_t src; /* an arrival's source id (imm, tern's own message) */
	int path;     /* an error that says the path is gone (failover.c) */
};

/* Bytes per address in this ctx's card: rail 0's, or for names
 * (ctx->caps.addr_str, whose length varies: shm's "fi_shm://PID:0:N") the
 * longest, shorter ones padded with NULs. */
static inline size_t tern__card_addrlen(const struct tern_ctx *ctx)
{
	size_t len = ctx->rails[0].addrlen;

	if (ctx->caps.addr_str) {
		for (unsigned int i = 1; i < ctx->nrails; i++)
			len = TERN_MAX(len, ctx->rails[i].addrlen);
	}
	return len;
}

/* The descriptor @rail gives the provider for [off, ...) of @mr (which
 * the caller keeps inside one chunk). */
static inline void *tern__mr_desc_at(const struct tern_mr *mr,
				     unsigned int rail, uint64_t off)
{
	uint64_t c;

	if (tern_likely(mr->nchunks <= 1))
		return mr->desc[rail];
	/* Its end, for 0 bytes there: the last chunk. */
	c = off >> mr->chunk_shift;
	if (c >= mr->nchunks)
		c = mr->nchunks - 1;
	return mr->cdesc[c * mr->ctx->nrails + rail];
}

/* Silent rails (fence.c): start watching the rails, an operation being
 * queued while the watch is stopped. Cold. */
void tern__stall_arm(struct tern_ctx *ctx);

/* Queue @req on its rail: the operation and its region (and peer) count
 * it in flight from here. */
static inline void tern__queue_req(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern_rail *rail = &ctx->rails[tern__rp(req)->rail];

	tern__rp(req)->state = TERN__ST_QUEUED;
	tern__rp(req)->mr->inflight++; /* every queued operation has one */
	if (tern__rp(req)->peer != NULL)
		tern__rp(req)->peer->inflight++;
	if (tern__rp(req)->op == TERN__OP_RECV) {
		tern__reqq_push(&rail->rxq, req);
		rail->rx_refused = 0;
	} else {
		tern__reqq_push(&rail->txq, req);
		rail->tx_refused = 0;
		if (tern_unlikely(ctx->stall_idle))
			tern__stall_arm(ctx);
	}
}

/* An atomic's three words (operand, compare, result) in its rail's
 * registered scratch, by slot. */
static inline uint64_t *tern__slot_words(struct tern_rail *rail,
					 struct tern__slot *slot)
{
	return rail->scratch + 3 * (size_t)(slot - rail->slots);
}

/* The address an operation targets: virtual (base + offset) or offset
 * (in its chunk's registration: wire/desc.h). */
static inline uint64_t tern__raddr(const struct tern_mr_desc *d, uint64_t off)
{
	return tern__desc_raddr(d, off);
}

/* Posting and completions over src/prov/ (post.c, post.h; reap.c). */
/* A sync_rma rail's write or read @context went to the provider. */
void tern__sync_push(struct tern_rail *rail, void *context);
int tern__rail_post(struct tern_rail *rail, struct tern_req *req, int more);
/* What one tern__prov_cq_read() gave (@ret entries of @ent, or its
 * error), as tern__cqe in @cqe (as many as @ent). @return how many, or
 * <0. */
int tern__rail_reap(struct tern_rail *rail, const struct tern__prov_cqent *ent,
		    ssize_t ret, const uint64_t *src, struct tern__cqe *cqe);
/* The source id of AV address @fiaddr on @rail: 0 when not a peer's. */
static inline uint32_t tern__rail_src(const struct tern_rail *rail,
				      uint64_t fiaddr)
{
	return fiaddr < rail->nsrc_of ? rail->src_of[fiaddr] : 0;
}

/*
 * Read up to @n completions of @rail into @ent, translated into @cqe.
 * Inline: an empty read, what most passes of a spinning wait find, has no
 * frame of tern's between the caller and the provider. On tcp every read
 * enters the kernel, and each return after that is paid again: with two
 * more frames here an idle pass on a connected tcp rail cost 265-304 ns
 * over a bare libfabric CQ read (`inproc --idle`), now 85-107 ns; on shm 9
 * and 6 ns (docs/performance.md). A slower empty pass makes a write
 * target read its sockets less eagerly, which moves tcp bandwidth.
 */
static inline int tern__rail_poll(struct tern_rail *rail,
				  struct tern__prov_cqent *ent, uint64_t *src,
				  struct tern__cqe *cqe, size_t n)
{
	ssize_t ret = tern__prov_cq_read(&rail->prov, ent, n, src);

	if (tern_likely(ret == TERN__PROV_CQ_EMPTY))
		return 0;
	return tern__rail_reap(rail, ent, ret, src, cqe);
}

int tern__rail_cancel(struct tern_rail *rail, struct tern_req *req);
/* A piece posted a part and goes on (tern__rail_post_piece()). */
/* Operations posted per rail per progress pass (TERN_POST_BATCH). */
#define TERN__POST_BATCH_DEFAULT 32
#define TERN__POST_BATCH_MAX	 4096
/* The first wait before a failed rail is tried again
 * (TERN_RAIL_COOLDOWN_MS). */
#define TERN__COOLDOWN_DEFAULT_MS 1000
/* A rail busy and completing nothing this long is silent (fence.c). */
#define TERN__STALL_DEFAULT_MS 1000
/* Implicit operations in flight per ctx (TERN_NBI_MAX). */
#define TERN__NBI_MAX_DEFAULT (1L << 16)
#define TERN__PART_MORE	      2
/* Post chunk tern__rp(req)->next_piece of a striped write/read on @rail. */
int tern__rail_post_chunk(struct tern_rail *rail, struct tern_req *req);
int tern__rail_post_piece(struct tern_rail *rail, struct tern_req *req,
			  int more);
void tern__slot_free(struct tern_rail *rail, struct tern__slot *slot);
int tern__rails_trywait(struct tern_ctx *ctx);
/* Untagged messaging (bounce.c). */
unsigned int tern__bounce_count(const struct tern_ctx *ctx);
int tern__bounce_open(struct tern_ctx *ctx);
/* Post every buffer of ctx->bounce (made by tern__bounce_open). */
int tern__bounce_post_all(struct tern_ctx *ctx);
void tern__bounce_close(struct tern_ctx *ctx, int held);
/* A completion on one of rail 0's buffers (@c->slot): a message, or an
 * error. Completes at most a queued receive, through ctx->ready. */
int tern__bounce_done(struct tern_ctx *ctx, const struct tern__cqe *c);
/* A write's immediate used up the buffer of @slot: post it again. */
void tern__bounce_absorbed(struct tern_ctx *ctx, const struct tern__slot *slot);
/* Queued receives take unclaimed messages. */
void tern__bounce_match(struct tern_ctx *ctx);
void tern__ctx_finish_close(struct tern_ctx *ctx);
void tern__peer_release(struct tern_peer *peer);
/* A removed peer whose last operation just finished (in a completion, a
 * callback): freed by tern__peer_release_due() at the end of the pass. */
void tern__peer_release_later(struct tern_peer *peer);
void tern__peer_release_due(struct tern_ctx *ctx);
/* Implicit operations (nbi.c): cancel a waiting tern_quiet() (ST_QUIET);
 * free a scope's epochs (a peer's, as it goes); the pools, at ctx close. */
void tern__nbi_cancel(struct tern_ctx *ctx, struct tern_req *req, int status);
void tern__nbi_scope_fini(struct tern_ctx *ctx, struct tern__nbi_scope *s);
void tern__nbi_fini(struct tern_ctx *ctx);
/*
 * Mark @peer gone (its process died, or liveness was lost): what tern
 * still queues for it completes with -TERN_EPEERGONE from the next
 * progress pass (never inside this call), later posts to it return
 * -TERN_EPEERGONE, operations the provider holds complete as the provider
 * says, and expectations counting on it (tern_imm_expect_from()) fail
 * with -TERN_EPEERGONE. The handle stays valid until tern_peer_remove().
 * @return 0 (also when already gone), -EINVAL for NULL or a removed peer.
 */
int tern__peer_gone(struct tern_peer *peer);
/* Close @mr whatever is in flight on it: ctx teardown, shadows. */
int tern__mr_close(struct tern_mr *mr);
/* Register tern's own buffer: one registration, never chunked or shared. */
int tern__mr_reg_own(struct tern_ctx *ctx, void *buf, size_t len,
		     uint64_t access, struct tern_mr **mr_p);

/*
 * Queues and completions (progress.c, imm.c, loop.c). The one completion
 * path: tern__req_complete() finishes @req with @status (tern lets go of
 * its peer and buffers) and puts it on ctx->ready; tern__ready_run(), from
 * progress, sets req->done and runs its callback. Safe from anywhere: it
 * runs no user code, so no caller has to expect its lists to change.
 * tern__req_complete_now() runs the callback at once, for completions
 * found by progress itself (a CQ entry, an immediate's count reached).
 */
void tern__req_complete(struct tern_ctx *ctx, struct tern_req *req, int status);
void tern__req_complete_now(struct tern_ctx *ctx, struct tern_req *req,
			    int status);
int tern__ready_run(struct tern_ctx *ctx);
/* A pooled copy of @src (NULL: out of memory); given back when the request
 * holding it (TERN__XF_DESC) completes. */
struct tern__desc *tern__desc_get(struct tern_ctx *ctx,
				  const struct tern_mr_desc *src);
void tern__desc_pool_fini(struct tern_ctx *ctx);
void tern__queue(struct tern_ctx *ctx, struct tern_req *req);
/* Give back a descriptor copy from tern__desc_get(). */
void tern__desc_put(struct tern_ctx *ctx, struct tern__desc *rd);
/*
 * The engine's own operations (a staged request's chunks, stage.c): what
 * the public posting calls queue, entered from inside the engine, not
 * through the API. A message (@op TERN__OP_SEND, _SEND_IMM, _RECV; @peer
 * NULL for a receive), or a write or read (TERN__OP_WRITE, _WRITE_IMM,
 * _READ) with @xflags (TERN__XF_DELIVER) added to what it carries.
 * @return as the public call.
 */
int tern__submit_msg(struct tern_ctx *ctx, struct tern_peer *peer, uint8_t op,
		     struct tern_mr *mr, void *buf, size_t len, uint32_t imm,
		     struct tern_req *req);
int tern__submit_rma(struct tern_peer *peer, struct tern_mr *mr, void *buf,
		     size_t len, const struct tern_mr_desc *rdesc,
		     uint64_t roff, uint8_t op, uint32_t imm, uint8_t xflags,
		     struct tern_req *req);
/* A failed rail routed around (failover.c). The rail a new operation to
 * @peer (which has rails down) takes, from @r on: @r or a later live one. */
unsigned int tern__path_pick(const struct tern_peer *peer, unsigned int r);
/* Rails of @peer down and due for a try: a probe each (a write of 0 bytes
 * to @rd at @roff, where the caller's operation goes). */
void tern__path_try(struct tern_peer *peer, const struct tern_mr_desc *rd,
		    uint64_t roff);
/* @c, an error completion on @rail, says its path is gone: mark the rail
 * down for its peer and, where its operation may be posted again, queue
 * it on a live rail. @return 1 when it took @c (the caller forgets it),
 * 0 when @c completes its request as usual. */
int tern__path_failed(struct tern_ctx *ctx, struct tern_rail *rail,
		      const struct tern__cqe *c);
/* @c completed an operation with an error: tern__path_failed() for one
 * that says the path is gone; a probe's own error says the path answered
 * (its rail is back). @return as tern__path_failed(). */
int tern__path_completed(struct tern_ctx *ctx, struct tern_rail *rail,
			 const struct tern__cqe *c);
/* Probe @req's post on rail @r failed for good (no completion will
 * come): a failed try, the rail waits longer for the next. */
void tern__path_probe_unposted(struct tern_req *req, unsigned int r);
/* A probe of @peer's rail @r completed: the rail is back. */
void tern__path_probed(struct tern_peer *peer, unsigned int r);
/* @peer's paths, one per rail, made on first need: NULL without memory. */
struct tern__path *tern__paths(struct tern_peer *peer);
/* @peer's path over rail @r completes nothing for a while (@why): mark
 * it down, and fence it where the provider can (fence.c). */
void tern__path_stalled(struct tern_ctx *ctx, struct tern_peer *peer,
			unsigned int r, const char *why);
/* Fences (fence.c): watch for silent rails (at open, once the rails,
 * control messages and sources are known); fence rail @r to @peer (drop
 * this end's connections, ask the peer to drop its half; @stalled: the
 * rail is silent, else it failed); a FENCE of rail @r from source @src
 * arrived (answered on rail @r); its FENCED answer arrived. */
void tern__stall_init(struct tern_ctx *ctx);
void tern__fence_start(struct tern_peer *peer, unsigned int r, int stalled);
void tern__fence_asked(struct tern_ctx *ctx, uint32_t src, unsigned int r,
		       uint32_t token);
void tern__fence_answered(struct tern_ctx *ctx, uint32_t src, unsigned int r,
			  uint32_t token);
/* Post the parts queued to go again. @return requests finished. */
int tern__redo_post(struct tern_ctx *ctx);
void tern__redo_fini(struct tern_ctx *ctx);
/* Post again, on @rail, a part of @req that failed elsewhere: at @off of
 * a striped or cut write or read, or of piece @piece from @off. */
int tern__rail_repost(struct tern_rail *rail, struct tern_req *req,
		      uint64_t off, uint32_t piece, uint32_t stamp);
/* A part of batch @req finished with @status. @return 1 if the batch
 * completed. */
int tern__piece_done(struct tern_ctx *ctx, struct tern_req *req, int status);
/* Clear a request's results and set what every operation carries. */
void tern__req_fill(struct tern_ctx *ctx, struct tern_req *req, uint8_t op,
		    struct tern_peer *peer, struct tern_mr *mr, const void *buf,
		    size_t len);
void tern__req_abort(struct tern_ctx *ctx, struct tern__reqq *q,
		     struct tern_req *req, int status);
void tern__loop_drain(struct tern_ctx *ctx);
void tern__loop_cancel_posted(struct tern_ctx *ctx);
int tern__imm_init(struct tern__imm_table *t);
void tern__imm_fini(struct tern__imm_table *t);
void tern__imm_arrived(struct tern_ctx *ctx, uint32_t imm, uint32_t src);
/* A write with immediate whose CQ data @data carries a stamp (its high
 * word, dedup.h) landed from @src: counted unless a repeat. */
void tern__imm_stamped(struct tern_ctx *ctx, uint64_t data, uint32_t src);
/* @peer's stamps: a new card's own, or shared with @same's. */
int tern__stamps_get(struct tern_ctx *ctx, struct tern_peer *peer,
		     struct tern_peer *same);
/* The last peer of its card holding them gone: freed. */
void tern__stamps_put(struct tern_ctx *ctx, struct tern_peer *peer);
/* ctx->tag_src[tag]: two live peers' cards have that tag. */
#define TERN__TAG_SHARED UINT32_MAX
/* The layout of the ctx's stamps: tagged with @tag (its card's), or
 * untagged (@tag 0). */
void tern__stamp_layout(struct tern_ctx *ctx, uint32_t tag);
/* The stamp of a write with immediate to @peer: the next number where
 * the ctx stamps, in its layout, else 0 (its high word stays 0, as
 * without stamps). */
static inline uint32_t tern__stamp_take(const struct tern_ctx *ctx,
					struct tern_peer *peer)
{
	if (!ctx->stamp)
		return 0;
	return tern__stamp_next(&peer->stamps->seq, ctx->stamp_max) |
	       ctx->stamp_hi;
}
void tern__imm_cancel_all(struct tern_ctx *ctx);
/* A sender said its writes with @imm failed (ctrl.c): fail the pending
 * expectation for @imm (any-peer, or from @src), or remember it. */
void tern__imm_aborted(struct tern_ctx *ctx, uint32_t imm, uint32_t src);
/* Fail (@status) every expectation from @peer: gone, or removed. */
void tern__imm_peer_fail(struct tern_ctx *ctx, struct tern_peer *peer,
			 int status);
/* The last peer of source @src went: its arrivals count as unknown's. */
void tern__imm_src_forget(struct tern_ctx *ctx, uint32_t src);
/* Control messages (ctrl.c): the rails that carry them, and the slots
 * each of those needs past its tx credits'. */
unsigned int tern__ctrl_rails(const struct tern_ctx *ctx);
unsigned int tern__ctrl_slots(const struct tern_ctx *ctx);
int tern__ctrl_open(struct tern_ctx *ctx);
/* Post every receive of ctx->ctrl (made by tern__ctrl_open). */
int tern__ctrl_post_all(struct tern_ctx *ctx);
void tern__ctrl_close(struct tern_ctx *ctx, int held);
/* A completion on a control slot of @rail (@c->slot). */
void tern__ctrl_done(struct tern_ctx *ctx, struct tern_rail *rail,
		     const struct tern__cqe *c);
/* Post queued control messages (progress, when any wait). */
void tern__ctrl_flush(struct tern_ctx *ctx);
/* @req, a write with immediate to a peer, failed with @status (an error
 * completion, a cancel, its peer gone): tell the target. Cold. */
void tern__ctrl_imm_failed(struct tern_ctx *ctx, struct tern_req *req,
			   int status);
/* Ask @peer to drop its connection to us on @rail (FENCE, answered
 * FENCED with @token), or answer its fence on @via. Cold. */
void tern__ctrl_fence(struct tern_ctx *ctx, struct tern_peer *peer,
		      unsigned int rail, uint32_t token);
void tern__ctrl_fenced(struct tern_ctx *ctx, struct tern_peer *peer,
		       unsigned int rail, uint32_t token, unsigned int via);
/* Forget queued control messages to @peer (removed). */
void tern__ctrl_forget_peer(struct tern_ctx *ctx, struct tern_peer *peer);
void tern__imm_poll(struct tern_ctx *ctx);
void tern__imm_cancel(struct tern_ctx *ctx, struct tern_req *req);
int tern__loop_init(struct tern_ctx *ctx);
void tern__loop_fini(struct tern_ctx *ctx);
int tern__loop_block(struct tern_ctx *ctx, int64_t timeout_ns);
int tern__loop_alive(const struct tern_ctx *ctx);
int tern__loop_due(struct tern_ctx *ctx);
/* Run the tasks queued when it starts (tern_progress(), when
 * ctx->task_pending). @return how many ran. */
int tern__task_run(struct tern_ctx *ctx);
/* From tern_ctx_close(): refuse submits from now on. */
void tern__task_close(struct tern_ctx *ctx);
/* Call back the tasks still queued with -ECANCELED (the close). */
void tern__task_cancel_all(struct tern_ctx *ctx);
/* Every TERN__IO_EVERY calls, look at the user's fds without sleeping, so
 * fd watchers run even while completions keep the loop busy. */
int tern__loop_poll_ios(struct tern_ctx *ctx);
/* Around calls that run user callbacks: a callback may close the ctx;
 * the outermost tern__leave() finishes that close. @return 1 if the ctx
 * is gone. */
static inline void tern__enter(struct tern_ctx *ctx)
{
	ctx->depth++;
}

static inline int tern__leave(struct tern_ctx *ctx)
{
	if (--ctx->depth == 0 && ctx->close_pending == 1) {
		tern__ctx_finish_close(ctx);
		return 1;
	}
	return 0;
}

#endif /* TERN_ENGINE_H */
