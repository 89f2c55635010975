/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the same-host path's formats (src/wire/local.h,
 * docs/local.md) as a hostile peer presents them:
 *   - byte 0 even: the fd broker's messages. A request or answer that
 *     parses packs again and parses to the same fields; a refusal is
 *     -EPROTO; anything else aborts. The header check and the ring's
 *     bounds (tern__lring_avail) are checked against their contracts.
 *   - byte 0 odd: a peer's inbox. One shm ctx (opened once) holds an
 *     attachment whose inbox is this harness's memory: a valid inbox
 *     (its table lets us write, one shared region, a ring to us),
 *     patched by the input (8-byte words anywhere), then read by the
 *     owner's progress (its ring to us) and written, read and updated
 *     (atomics) through tern_write()/tern_read() with descriptors from
 *     the input; then patched again under the same generations (what an
 *     owner that rewrites its own entries does) and used again. Every
 *     request must complete; every copy must stay inside the shared
 *     region's memfd (ASan and the mapping's bounds catch the rest).
 *     What would send an operation over the provider is kept valid (a
 *     region the fabric must take, our entry in its table), as the
 *     fabric is not what is fuzzed here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tern/tern.h>

#include "engine/local_int.h"
#include "hmem/shmem.h"
#include "wire/local.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SHM_LEN	   65536u /* the peer's shared region: one whole memfd */
#define FAKE_NONCE 0x66757a7a6c6f6331ull
#define MAX_OPS	   8

static void broker_msgs(const uint8_t *data, size_t size)
{
	uint8_t out[TERN__LB_REQ_MAX];
	struct tern__lb_req r, r2;
	struct tern__lb_ans a, a2;
	char why[128];
	ssize_t n;
	int ret;

	ret = tern__lb_req_parse(data, size, &r, why, sizeof(why));
	if (ret != 0 && ret != -EPROTO)
		abort();
	if (ret == 0) {
		if (r.nkeys > TERN__L_MAXKEYS ||
		    (r.what == TERN__LB_REGION && r.idx >= TERN__L_NREG))
			abort();
		n = tern__lb_req_pack(&r, out, sizeof(out));
		if (n < 0 ||
		    tern__lb_req_parse(out, (size_t)n, &r2, why, sizeof(why)) !=
			    0 ||
		    r2.what != r.what || r2.idx != r.idx ||
		    r2.nonce != r.nonce || r2.nkeys != r.nkeys ||
		    memcmp(r2.keys, r.keys, r.nkeys * sizeof(r.keys[0])) != 0)
			abort();
	}
	ret = tern__lb_ans_parse(data, size, &a, why, sizeof(why));
	if (ret != 0 && ret != -EPROTO)
		abort();
	if (ret == 0) {
		n = tern__lb_ans_pack(&a, out, sizeof(out));
		if (n != TERN__LB_ANS_LEN ||
		    tern__lb_ans_parse(out, (size_t)n, &a2, why, sizeof(why)) !=
			    0 ||
		    memcmp(&a, &a2, sizeof(a)) != 0)
			abort();
	}
	if (size >= 16) {
		uint64_t head, tail;
		long avail;

		memcpy(&head, data, 8);
		memcpy(&tail, data + 8, 8);
		avail = tern__lring_avail(head, tail);
		if (tail - head > TERN__L_RING ? avail != -1
					       : avail != (long)(tail - head))
			abort();
	}
	if (size >= sizeof(struct tern__lhdr)) {
		struct tern__lhdr h;

		memcpy(&h, data, sizeof(h));
		if (tern__lhdr_check(&h) == NULL &&
		    (h.magic != TERN__L_MAGIC || h.version != TERN__L_VERSION))
			abort();
	}
}

/* ---- the inbox ------------------------------------------------------ */

static struct {
	struct tern_ctx *ctx, *far;
	struct tern_peer *peer;
	struct tern__local_peer *lp;
	struct tern_mr *lmr;
	struct tern_mr_desc shm_desc; /* as the peer would hand it out */
	uint8_t *lbuf;		      /* our side of the copies */
	uint8_t *inbox;		      /* the peer's inbox (TERN__L_SIZE) */
	uint8_t *shm;		      /* its shared region, here */
	int shm_fd;
	uint64_t shm_ino;
	uint64_t salt;
	int trace; /* $TERN_FUZZ_TRACE: what each operation did */
} g;

static void setup(void)
{
	struct tern_ctx_attr a = { .provider = "shm", .rails = 1 };
	uint8_t card[TERN_CARD_MAX];
	struct tern__local_peer *lp;
	struct tern_mr *smr;
	uint64_t off;
	ssize_t n;

	g.trace = getenv("TERN_FUZZ_TRACE") != NULL;
	setenv("TERN_LOCAL", "1", 1);
	setenv("TERN_LOCAL_BROKER", "0", 1);
	tern_log_set_level(TERN_LOG_NONE);
	if (tern_ctx_open(&a, &g.ctx) != 0 || tern_ctx_open(&a, &g.far) != 0 ||
	    g.ctx->local == NULL)
		abort();
	/* A peer of the fabric's, to which the attachment is then given. */
	n = tern_ctx_card(g.far, card, sizeof(card));
	if (n <= 0 || tern_peer_add_flags(g.ctx, card, (size_t)n,
					  TERN_PEER_FABRIC_ONLY, &g.peer) != 0)
		abort();
	g.lbuf = malloc(SHM_LEN);
	if (g.lbuf == NULL ||
	    tern_mr_reg(g.ctx, g.lbuf, SHM_LEN,
			TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			&g.lmr) != 0)
		abort();
	/* The peer's shared region: a memfd of ours (pidfd_getfd() of our
	 * own process hands it back); registered by the far ctx for its
	 * keys. */
	if (tern_mem_alloc(TERN_MEM_SHARED, 0, SHM_LEN, (void **)&g.shm) != 0 ||
	    tern__shmem_find(g.shm, SHM_LEN, &g.shm_fd, &off, &g.shm_ino) !=
		    0 ||
	    tern_mr_reg(g.far, g.shm, SHM_LEN,
			TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ |
				TERN_ACCESS_REMOTE_WRITE |
				TERN_ACCESS_REMOTE_ATOMIC,
			&smr) != 0)
		abort();
	tern_mr_desc(smr, &g.shm_desc);
	g.salt = 0x5a17;
	g.inbox = mmap(NULL, TERN__L_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	lp = calloc(1, sizeof(*lp));
	if (g.inbox == MAP_FAILED || lp == NULL)
		abort();
	lp->ctx = g.ctx;
	lp->refs = 1;
	lp->src_id = g.peer->src_id;
	lp->pid = getpid();
	lp->pidfd = (int)tern__pidfd_open(getpid());
	lp->start = g.ctx->local->id.start;
	lp->nonce = FAKE_NONCE;
	lp->wake_fd = lp->bsock = -1;
	lp->pidx = lp->cidx = lp->oidx = lp->ridx = -1;
	lp->ro = g.inbox;
	lp->hdr = tern__l_hdr(lp->ro);
	lp->reg = tern__l_reg(lp->ro);
	lp->cu = tern__l_cuda(lp->ro);
	lp->peers = tern__l_peer(lp->ro);
	lp->mapped = 1;
	lp->cma = 0; /* its "process" is ours: never a copy by pid */
	if (lp->pidfd < 0 || tern__lpeer_publish(g.ctx->local, lp) != 0)
		abort();
	tern__lpeer_state(g.ctx->local, lp->pidx, TERN__LPEER_LIVE);
	g.lp = lp;
	g.peer->local = lp;
	g.peer->local_nonce = FAKE_NONCE;
}

/* A valid inbox of the peer: we may write to it, its one region is the
 * shared memfd, its ring to us is empty. */
static void inbox_reset(void)
{
	const struct tern__local *l = g.ctx->local;
	struct tern__lhdr *h = tern__l_hdr(g.inbox);
	struct tern__lpeer *pe = tern__l_peer(g.inbox);
	struct tern__lreg *e = tern__l_reg(g.inbox);
	struct tern__lout *o = tern__l_out(g.inbox, 0);

	memset(g.inbox, 0, TERN__L_OUT_OFF + TERN__L_OUT_SIZE);
	h->magic = TERN__L_MAGIC;
	h->version = TERN__L_VERSION;
	h->nreg = TERN__L_NREG;
	h->npeer = TERN__L_NPEER;
	h->ring = TERN__L_RING;
	h->nused = 1;
	h->nonce = FAKE_NONCE;
	h->salt = g.salt;
	h->pid = (uint32_t)getpid();
	h->wake_fd = -1;
	atomic_store(&h->peers_gen, 1);
	atomic_store(&h->out_gen, 1);
	pe[0].nonce = l->id.nonce;
	pe[0].pid = l->id.pid;
	pe[0].start = l->id.start;
	atomic_store(&pe[0].state, TERN__LPEER_LIVE);
	atomic_store(&pe[0].gen, 1);
	e[0].base = 0x7f0000000000ull;
	e[0].len = SHM_LEN;
	e[0].access = TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE |
		      TERN_ACCESS_REMOTE_ATOMIC;
	e[0].keyhash = tern__lkeyhash(g.salt, g.shm_desc.nkeys,
				      g.shm_desc.keys);
	e[0].shm_fd = g.shm_fd;
	e[0].shm_ino = g.shm_ino;
	atomic_store(&e[0].gen, 1);
	atomic_store(&o->target, l->id.nonce);
	atomic_store(&o->cgen,
		     atomic_load(&l->lpeer[g.lp->pidx].gen)); /* ours for it */
	atomic_store(&o->seq, 1);
}

/* What must stay as it is for the operations to stay off the fabric:
 * our entry in its table, no overflow, regions it lists shared memory
 * that maps (a region not mapped yet: its fields made mappable; one we
 * mapped at this generation keeps whatever the input wrote, as a hostile
 * owner's rewrite would). */
static void keep_local(void)
{
	const struct tern__local *l = g.ctx->local;
	struct tern__lhdr *h = tern__l_hdr(g.inbox);
	struct tern__lpeer *pe = tern__l_peer(g.inbox);
	unsigned int n = h->nused < TERN__L_NREG ? h->nused : TERN__L_NREG;

	h->overflow = 0;
	pe[0].nonce = l->id.nonce;
	pe[0].pid = l->id.pid;
	pe[0].start = l->id.start;
	atomic_store(&pe[0].state, TERN__LPEER_LIVE);
	atomic_store(&pe[0].gen, atomic_load(&pe[0].gen) | 1);
	for (unsigned int i = 0; i < n; i++) {
		struct tern__lreg *e = &tern__l_reg(g.inbox)[i];
		const struct lmap *m = &g.lp->maps[i];
		uint64_t gen = atomic_load(&e->gen);

		e->flags = 0;
		if (!(gen & 1) || (m->ptr != NULL && m->gen == gen))
			continue;
		e->shm_fd = g.shm_fd;
		e->shm_ino = g.shm_ino;
		e->shm_off %= SHM_LEN;
		if (e->len == 0 || e->len > SHM_LEN - e->shm_off)
			e->len = 1 + e->len % (SHM_LEN - e->shm_off);
	}
}

struct rd {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if (n > r->left)
		n = r->left;
	memcpy(&v, r->p, n);
	r->p += n;
	r->left -= n;
	return v;
}

/* Up to @max 12-byte patches: an 8-byte word at an offset of the inbox
 * (below its rings' entries, which only immediates fill). */
static void patch(struct rd *r, unsigned int max)
{
	unsigned int n = (unsigned int)take(r, 1) % (max + 1);

	for (unsigned int k = 0; k < n && r->left >= 12; k++) {
		uint32_t off = (uint32_t)take(r, 4) %
				       (TERN__L_OUT_OFF + TERN__L_OUT_SIZE) &
			       ~7u;
		uint64_t v = take(r, 8);

		memcpy(g.inbox + off, &v, 8);
	}
}

static void ops(struct rd *r)
{
	struct tern_req req[MAX_OPS];
	unsigned int n = (unsigned int)take(r, 1) % (MAX_OPS + 1), k;

	keep_local();
	for (k = 0; k < n; k++) {
		unsigned int kind = (unsigned int)take(r, 1);
		struct tern_mr_desc d = g.shm_desc;
		uint64_t roff = take(r, 3);
		size_t len = 1 + (size_t)(take(r, 2) % (SHM_LEN / 2));
		int ret;

		d.base = tern__l_reg(g.inbox)[kind >> 5 & 1].base +
			 (kind & 8 ? take(r, 2) : 0);
		d.len = UINT64_MAX / 4;
		if (kind & 16)
			d.keys[0] ^= 1;
		tern_req_init(&req[k], NULL, NULL);
		switch (kind & 7) {
		case 0:
		case 1:
			ret = tern_write(g.peer, g.lmr, g.lbuf, len, &d, roff,
					 &req[k]);
			break;
		case 2:
			ret = tern_read(g.peer, g.lmr, g.lbuf, len, &d, roff,
					&req[k]);
			break;
		case 3:
		case 4:
			ret = tern_write_imm(g.peer, g.lmr, g.lbuf, len, &d,
					     roff, (uint32_t)kind, &req[k]);
			break;
		case 5:
			ret = tern_atomic_fetch_add(g.peer, &d, roff & ~7ull, 1,
						    &req[k]);
			break;
		default:
			ret = tern_atomic_cswap(g.peer, &d, roff & ~7ull, 0, 1,
						&req[k]);
			break;
		}
		if (g.trace)
			fprintf(stderr,
				"op %u: kind %u at %#llx+%#llx, %zu bytes: "
				"post %d\n",
				k, kind, (unsigned long long)d.base,
				(unsigned long long)roff, len, ret);
		if (ret != 0)
			break; /* refused at the post: never queued */
	}
	for (int pass = 0; pass < 4; pass++)
		tern_progress(g.ctx);
	/* A write with immediate may wait for room in our ring (the peer's
	 * head is the input's): cancelled, as a user would. */
	for (unsigned int i = 0; i < k; i++) {
		if (!req[i].done)
			tern_req_cancel(g.ctx, &req[i]);
	}
	for (int pass = 0; pass < 1000; pass++) {
		unsigned int left = 0;

		for (unsigned int i = 0; i < k; i++)
			left += !req[i].done;
		if (left == 0) {
			for (unsigned int i = 0; g.trace && i < k; i++)
				fprintf(stderr, "op %u: %s\n", i,
					tern_strerror(req[i].status));
			return;
		}
		tern_progress(g.ctx);
	}
	abort(); /* a local operation that never completes */
}

/* The ring the peer writes to us: its tail and entries from the input. */
static void ring(struct rd *r)
{
	struct tern__lout *o = tern__l_out(g.inbox, take(r, 1) & 1);
	unsigned int n = (unsigned int)take(r, 1);

	for (unsigned int k = 0; k < n && r->left >= 4; k++)
		o->ring[k] = (uint32_t)take(r, 4);
	atomic_store(&o->tail, atomic_load(&o->tail) + take(r, 2));
	atomic_fetch_add(&tern__l_hdr(g.inbox)->out_gen, 1);
}

static void lp_reset(void)
{
	struct tern__local_peer *lp = g.lp;

	tern__local_maps_drop(lp);
	lp->cidx = lp->ridx = -1;
	lp->seen_peers_gen = lp->seen_out_gen = 0;
	lp->broken = 0;
	lp->hint = 0;
	atomic_store(&g.ctx->local->lpeer[lp->pidx].head, 0);
}

static void inbox(const uint8_t *data, size_t size)
{
	struct rd r = { data, size };

	inbox_reset();
	lp_reset();
	patch(&r, 16);
	ring(&r);
	ops(&r);
	/* The owner rewrites its entries under the same generations. */
	patch(&r, 8);
	ring(&r);
	ops(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (!(data[0] & 1)) {
		broker_msgs(data + 1, size - 1);
		return 0;
	}
	if (g.ctx == NULL)
		setup();
	inbox(data + 1, size - 1);
	return 0;
}
