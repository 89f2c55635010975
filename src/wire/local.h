/* SPDX-License-Identifier: MIT */
/*
 * The same-host path's shared formats (docs/local.md): the inbox every
 * ctx publishes to the peers of its host, and the fd broker's messages.
 *
 * The inbox is one memfd, written by its owner alone: the owner maps it
 * read-write, then seals it (F_SEAL_SHRINK, F_SEAL_GROW,
 * F_SEAL_FUTURE_WRITE, F_SEAL_SEAL), so a peer can map it read-only and
 * nothing else, and no one can shrink it under a mapping. It holds
 *   - a header: who owns it and its sizes;
 *   - the owner's regions (base, length, rights, a hash of their keys,
 *     and where their shared memory is);
 *   - the owner's GPU regions' CUDA IPC handles;
 *   - the owner's peers on this host: whom it lets write to it (and how
 *     far it has read each one's immediates);
 *   - the owner's own outgoing rings, one per peer it writes to: the
 *     immediates it sent, and which region it is copying into now.
 * A writer thus never writes into another process's memory but the
 * regions it was given keys for; a reader attributes a ring's immediates
 * to the process whose memory holds the ring.
 *
 * Native byte order and layout: it never leaves the host, and both sides
 * check magic, version and sizes before any other field. Every field is
 * still untrusted: readers bound-check each one before use.
 */
#ifndef TERN_WIRE_LOCAL_H
#define TERN_WIRE_LOCAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TERN__L_MAGIC	0x4c4e5254u /* "TRNL" */
#define TERN__L_VERSION 3
#define TERN__L_NREG	256  /* regions a ctx exports */
#define TERN__L_NPEER	64   /* same-host peers a ctx is attached to */
#define TERN__L_RING	4096 /* immediates in flight per writer and target */
#define TERN__L_PAGE	4096
#define TERN__L_MAXKEYS 32 /* = TERN_MAX_RAILS */

#define TERN__LREG_FABRIC 1u /* GPU memory without an IPC handle */
#define TERN__LREG_CUDA	  2u /* GPU memory: its CUDA IPC handle is in lcuda */

/* tern__lpeer.state */
#define TERN__LPEER_ADDED                                                    \
	1u		    /* its card was added: its broker asks are heard \
			     */
#define TERN__LPEER_LIVE 2u /* its ring is mapped here: it may write to us */

struct tern__lhdr {
	uint32_t magic, version;
	uint32_t nreg, npeer, ring;
	uint32_t nused;	   /* regions ever used: a bound for lookups */
	uint32_t overflow; /* a region found the table full: not in it */
	int32_t wake_fd;   /* its eventfd's number in its fd table */
	uint64_t self;	   /* where the owner maps the header (a CMA probe) */
	uint64_t nonce;	   /* the owner ctx's: its card's must match */
	uint64_t salt;	   /* of the regions' key hashes */
	uint32_t pid;	   /* the owner's */
	uint32_t pad;
	_Atomic uint64_t peers_gen; /* changes with every lpeer entry */
	_Atomic uint64_t out_gen;   /* changes with every lout's target */
	uint8_t pad1[48];
	/* A line of its own: the owner sets and clears it around every
	 * sleep; writers read the line above at every operation. */
	_Atomic uint32_t sleeping; /* the owner may sleep on its eventfd */
	uint8_t pad2[60];
};

/* A region (a seqlock: @gen odd while live; fields read between two
 * equal loads of it). */
struct tern__lreg {
	_Atomic uint64_t gen;
	uint64_t base, len;
	uint64_t access;  /* TERN_ACCESS_* */
	uint64_t keyhash; /* tern__lkeyhash() of the descriptor's keys */
	uint64_t shm_off;
	uint64_t shm_ino; /* 0: not shared memory */
	int32_t shm_fd;
	uint32_t flags; /* TERN__LREG_* */
};

/* A GPU region's CUDA IPC handle (read under its lreg's generation). */
struct tern__lcuda {
	uint8_t handle[64]; /* of the allocation */
	uint64_t off;	    /* the region's first byte in it */
	uint64_t alen;	    /* the allocation's length */
	int32_t dev;	    /* the owner's device ordinal */
	uint8_t pad[44];
};

/* A peer the owner added (a seqlock like lreg's): the process its card
 * named, proved by the kernel (pidfd and start time). */
struct tern__lpeer {
	_Atomic uint64_t gen;
	uint64_t nonce; /* its ctx's */
	uint64_t start; /* its process's start time */
	uint32_t pid;
	_Atomic uint32_t state; /* TERN__LPEER_* */
	uint8_t pad[32];
	/* A line of its own: the owner writes it as it reads, while the
	 * writer reads the line above at every operation. */
	_Atomic uint64_t head; /* how far the owner read its ring to us */
	uint8_t pad2[56];
};

/* One of the owner's outgoing rings: to the ctx @target, paired with
 * that ctx's lpeer entry of generation @cgen (a seqlock on @seq: odd
 * while stable). */
struct tern__lout {
	_Atomic uint64_t seq;
	_Atomic uint64_t target; /* 0: free */
	_Atomic uint64_t cgen;
	_Atomic uint64_t tail;
	uint8_t pad[32];
	/* A line of its own: written twice per copy, read by the target
	 * only when it revokes (the line above it reads at every pass). */
	_Atomic uint64_t busy; /* region index + 1 being copied into */
	uint8_t pad2[56];
	uint32_t ring[TERN__L_RING];
};

#define TERN__L_REG_OFF	 TERN__L_PAGE
#define TERN__L_CUDA_OFF (TERN__L_REG_OFF + TERN__L_NREG * 64)
#define TERN__L_PEER_OFF (TERN__L_CUDA_OFF + TERN__L_NREG * 128)
#define TERN__L_OUT_OFF	 (TERN__L_PEER_OFF + TERN__L_NPEER * 128)
#define TERN__L_OUT_SIZE (128 + TERN__L_RING * 4)
#define TERN__L_SIZE	 (TERN__L_OUT_OFF + TERN__L_NPEER * TERN__L_OUT_SIZE)

_Static_assert(sizeof(struct tern__lhdr) <= TERN__L_PAGE, "lhdr: a page");
_Static_assert(offsetof(struct tern__lhdr, sleeping) == 128,
	       "sleeping: a line");
_Static_assert(sizeof(struct tern__lreg) == 64, "lreg: a cache line");
_Static_assert(sizeof(struct tern__lcuda) == 128, "lcuda: two lines");
_Static_assert(sizeof(struct tern__lpeer) == 128, "lpeer: two lines");
_Static_assert(sizeof(struct tern__lout) == TERN__L_OUT_SIZE, "lout");
_Static_assert(TERN__L_SIZE % TERN__L_PAGE == 0, "whole pages");

/* The parts of an inbox mapped at @p (TERN__L_SIZE bytes). */
#define tern__l_hdr(p)	((struct tern__lhdr *)(void *)(p))
#define tern__l_reg(p)	((struct tern__lreg *)(void *)((p) + TERN__L_REG_OFF))
#define tern__l_cuda(p) ((struct tern__lcuda *)(void *)((p) + TERN__L_CUDA_OFF))
#define tern__l_peer(p) ((struct tern__lpeer *)(void *)((p) + TERN__L_PEER_OFF))
#define tern__l_out(p, i)                                      \
	((struct tern__lout *)(void *)((p) + TERN__L_OUT_OFF + \
				       (size_t)(i)*TERN__L_OUT_SIZE))

/* Does the header at @h describe this layout? 0, or why not. */
const char *tern__lhdr_check(const struct tern__lhdr *h);

/* The hash of a descriptor's @nkeys @keys under @salt, as an inbox
 * stores it: a writer on the local path must hold the keys a provider
 * would want (the hash shows no key to a reader of the inbox). */
uint64_t tern__lkeyhash(uint64_t salt, uint32_t nkeys, const uint64_t *keys);

/*
 * What a ring holds for its reader: the entries in [@head, @tail) of a
 * lout the reader saw stable. @return how many to count (0 when none),
 * or -1 when @tail cannot be a writer's (behind @head, or more than the
 * ring holds ahead of it): the reader stops reading that ring.
 */
long tern__lring_avail(uint64_t head, uint64_t tail);

/* ---- the fd broker's messages (SOCK_SEQPACKET, one each way) ---- */

#define TERN__LB_MAGIC	 0x424c5254u /* "TRLB" */
#define TERN__LB_INBOX	 1	     /* the inbox (read-only) and the eventfd */
#define TERN__LB_REGION	 2	     /* one shared region's memfd */
#define TERN__LB_REQ_MAX (32 + 8 * TERN__L_MAXKEYS)
#define TERN__LB_ANS_LEN 16

struct tern__lb_req {
	uint32_t what;	/* TERN__LB_* */
	uint32_t idx;	/* TERN__LB_REGION: the region's entry */
	uint64_t nonce; /* the asker's ctx: one the owner added */
	uint32_t nkeys; /* TERN__LB_REGION: the descriptor's keys */
	uint64_t keys[TERN__L_MAXKEYS];
};

struct tern__lb_ans {
	int32_t status; /* 0: the fds are attached; else -errno */
	uint32_t what;
	uint32_t nfds;
	uint32_t rdonly; /* the region's memfd is read-only */
};

ssize_t tern__lb_req_pack(const struct tern__lb_req *r, void *buf, size_t len);
/* @return 0, or -EPROTO with the reason in @why. */
int tern__lb_req_parse(const void *buf, size_t len, struct tern__lb_req *r,
		       char *why, size_t whylen);
ssize_t tern__lb_ans_pack(const struct tern__lb_ans *a, void *buf, size_t len);
int tern__lb_ans_parse(const void *buf, size_t len, struct tern__lb_ans *a,
		       char *why, size_t whylen);

#endif /* TERN_WIRE_LOCAL_H */
