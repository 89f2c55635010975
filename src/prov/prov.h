/* SPDX-License-Identifier: MIT */
/*
 * The provider boundary: the engine's one view of libfabric. Only
 * src/prov/ includes libfabric's headers or calls its functions; the
 * engine holds the provider's objects in the tern-owned structs below without
 * reading inside them, passes plain values (buffers, lengths, descriptors,
 * addresses, keys, contexts, TERN__PF_* flags) and gets tern error codes
 * back. Nothing here knows a ctx, a rail or a request of the engine.
 *
 * The posting and CQ-reading calls are inline (prov_inline.h): the hot
 * path has no frame between the engine and the provider.
 */
#ifndef TERN_PROV_H
#define TERN_PROV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

struct fi_info;
struct fid_fabric;
struct fid_domain;
struct fid_ep;
struct fid_cq;
struct fid_av;
struct tern__prov_mr; /* a registration: a struct fid_mr inside prov */

/* The provider objects of one rail: one domain, CQ, AV, RDM endpoint. */
struct tern__prov_rail {
	struct fi_info *info; /* its own (domain lists), or NULL: rail 0's */
	struct fid_fabric *fabric; /* one of tern__prov.fabrics */
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	/* Messages are tagged (FI_TAGGED); else untagged (efa-direct), and
	 * the engine matches them to receives itself. */
	int tagged;
	/* Repair the CQ entries of a libfabric that mislabels them
	 * (quirks.c): set by tern__prov_rail_open() */
	int fix_rx_flags;
	/* Some RMA completes inside the post, and its failure comes back
	 * with no context: shm's fast RMA on libfabric 1.17
	 * (quirks.c). Set by tern__prov_rail_open(). */
	int sync_rma;
	/* Plain writes of at most the inject size go through the peer's
	 * queue as two remote pieces, not its one-copy fast path
	 * (prov_inline.h: shm). Set by tern__prov_rail_open(). */
	int rma_queue;
	/* The provider answered an RMA inject with -FI_ENOSYS: small writes
	 * are posted whole (prov_inline.h). */
	int rma_inject_off;
	/* Plain writes are never injected, only writes with immediate:
	 * shm from libfabric 2.5, whose injected writes could fail unseen
	 * (quirks.c). Set by tern__prov_rail_open(). */
	int inject_plain_off;
	/* shm on libfabric 2.x: 1 while its AV entries are tracked so that
	 * no endpoint of this process closes under another's AV entry,
	 * 2 once closed (shmpark.c) */
	int shm_park;
	/* Completions carry their source (FI_SOURCE): read with
	 * fi_cq_readfrom(); true for messages. source_rma: true for remote
	 * writes too (rail.c, source_trusted()). Set by
	 * tern__prov_rail_open(). */
	int source;
	int source_rma;
	/* Added to every write and send posted (FI_DELIVERY_COMPLETE where
	 * tern__prov_rail_deliver() asked it). */
	uint64_t tx_flags;
};

/* The provider objects of a ctx: rail 0's offering and the fabrics. */
struct tern__prov {
	struct fi_info *info;
	/* Rails on several domains may sit on several fabrics (tcp: one
	 * per subnet); each fabric is opened once. */
	struct fid_fabric *fabrics[TERN_MAX_RAILS];
	unsigned int nfabrics;
};

/* $TERN_INJECT unset: 0 never injects, 1 injects writes of at most the
 * inject size (fi_inject_write()), 2 also carries plain ones through
 * shm's queue (prov_inline.h). Read by the engine (ctx.c) and at rail
 * open (rail.c). */
#define TERN__INJECT_DEFAULT 1

/* What a ctx asks for (tern_ctx_attr and the environment, resolved). */
struct tern__prov_want {
	const char *provider; /* NULL or "auto": the best automatic one */
	const char *node;
	const char *domain;
	/* libfabric fabric name ("efa", "efa-direct", a tcp subnet), or NULL:
	 * on efa, efa-direct where offered, else efa. */
	const char *fabric;
	/* With ndomains: one rail per named domain (rail i's offering goes
	 * to rails[i]->info for i > 0). */
	const char *const *domains;
	unsigned int ndomains;
	int hmem; /* ask for a provider that reaches GPU memory */
};

/* What the provider demands, decoded once (rail 0's offering). */
struct tern__prov_caps {
	uint64_t mr_mode; /* libfabric's FI_MR_* bits, as tern_ctx_info */
	int virt_addr;
	int prov_key;
	int mr_endpoint;
	int rx_cq_data; /* receives must be posted to absorb remote CQ data */
	int addr_str;	/* addresses are names of varying length */
	uint32_t addr_format;
	size_t tx_size;
	size_t rx_size;
	size_t cq_data_size;
	size_t inject_size;
	uint64_t max_msg_size;
	size_t mr_key_size;
	uint64_t link_speed;
	int hmem;      /* every rail reaches GPU memory (FI_HMEM) */
	int tagged;    /* every rail has tagged messages (FI_TAGGED) */
	int linger_ms; /* progress this long before endpoints close */
	char prov_name[64];
	char fabric_name[128];
	char domain_name[128]; /* every rail's, comma-separated */
	char domain0[128];     /* rail 0's */
};

/* Getinfo and provider choice: rail 0's offering in @p->info, each other
 * named domain's in @rails[i]->info. -TERN_ENOPROV when none fits. */
int tern__prov_choose(struct tern__prov *p, const struct tern__prov_want *w,
		      struct tern__prov_rail *const *rails);
void tern__prov_caps(const struct tern__prov *p,
		     struct tern__prov_rail *const *rails, unsigned int n,
		     struct tern__prov_caps *caps);
/* Open each rail's fabric, once per fabric name. */
int tern__prov_open(struct tern__prov *p, struct tern__prov_rail *const *rails,
		    unsigned int n);
/* The fabrics and offerings: what tern__prov_choose/_open made. */
void tern__prov_close(struct tern__prov *p,
		      struct tern__prov_rail *const *rails, unsigned int n);
/*
 * Open rail @idx: domain, CQ (with a wait fd unless @busy_poll, or when
 * the provider offers none: *wait_fd_p = -1), AV, endpoint; its address
 * into @addr (*addrlen_p: its room in, its length out). Logged; closes
 * what it opened on failure.
 */
int tern__prov_rail_open(struct tern__prov *p, struct tern__prov_rail *r,
			 unsigned int idx, int busy_poll, void *addr,
			 size_t *addrlen_p, int *wait_fd_p);
/* The largest message and the largest RMA of an open rail: the
 * endpoint's own limits where libfabric (2.0+) tells them apart. */
void tern__prov_rail_limits(const struct tern__prov *p,
			    const struct tern__prov_rail *r, uint64_t *msg_p,
			    uint64_t *rma_p);
/* Close the endpoint alone (what the provider holds is dropped). */
void tern__prov_rail_close_ep(struct tern__prov_rail *r);
void tern__prov_rail_close(struct tern__prov_rail *r);
/* Does a rail on @fi need its CQ entries repaired (quirks.c)? */
int tern__prov_quirk_rx_flags(const struct fi_info *fi);
/* Does a rail on @fi lose the context of a failed synchronous RMA? */
int tern__prov_quirk_sync_rma(const struct fi_info *fi);
/* Must a rail on @fi post small plain writes whole, never injected, so
 * that a failure reaches the initiator (quirks.c)? */
int tern__prov_quirk_inject_plain_off(const struct fi_info *fi);
/* Complete @r's writes and sends only once delivered to the peer, not
 * when the provider has taken them (tcp: into the socket's send queue,
 * which a fence purges, tcpfence.c). */
void tern__prov_rail_deliver(struct tern__prov_rail *r);
/* The fence of a silent rail over tcp (tcpfence.c): disconnect this
 * process's TCP connections between the rail address @mine and the peer's
 * rail address @theirs (the far end's listener; with @any_port, also
 * what the far host connected to our listener). @return how many, or
 * -EAFNOSUPPORT where the addresses are not IP. */
int tern__prov_fence(const void *mine, size_t mlen, const void *theirs,
		     size_t tlen, int any_port);
/* Does @r's provider complete some writes and reads inside the post and
 * report their failures with no context, in post order (quirks.c)? */
static inline int tern__prov_sync_rma(const struct tern__prov_rail *r)
{
	return r->sync_rma;
}
/* Does @r's CQ tell where each arrival came from (FI_SOURCE)? Then
 * tern__prov_cq_read() fills its @src with AV addresses (or
 * TERN__PROV_ADDR_NONE). */
static inline int tern__prov_source(const struct tern__prov_rail *r)
{
	return r->source;
}
/* ...and is it true of writes with immediate as of messages? */
static inline int tern__prov_source_rma(const struct tern__prov_rail *r)
{
	return r->source_rma;
}
/* shm endpoints kept open while this process addresses them (shmpark.c):
 * wanted on @fi? Track open rail @r (its address @addr), an AV insert, a
 * removal (which does the fi_av_remove), a close (before the endpoint's),
 * a fabric whose close was refused. */
int tern__prov_shm_park_wanted(const struct fi_info *fi);
int tern__prov_shm_park_open(struct tern__prov_rail *r, const void *addr,
			     size_t addrlen);
void tern__prov_shm_park_insert(struct tern__prov_rail *r, const void *addr,
				uint64_t fiaddr);
void tern__prov_shm_park_remove(struct tern__prov_rail *r, uint64_t fiaddr);
void tern__prov_shm_park_close(struct tern__prov_rail *r);
int tern__prov_shm_park_fabric(struct fid_fabric *fabric);
/* Does every rail run this 64-bit atomic (1: fetch-add, 0: cswap)? */
int tern__prov_atomic_ok(struct tern__prov_rail *const *rails,
			 const struct tern__prov *p, unsigned int n, int fadd);
/* Before sleeping: 0 when every CQ is empty and armed, -EAGAIN when one
 * has something, -TERN_EPROV (logged) when waiting cannot work. */
int tern__prov_trywait(const struct tern__prov *p,
		       struct tern__prov_rail *const *rails, unsigned int n);
/* Cancel the operation of @context: 0, -EBUSY once the endpoint is
 * closed (ctx teardown), or -TERN_EPROV. */
int tern__prov_cancel(struct tern__prov_rail *r, void *context);

/* Messages: tagged (every tern message carries one tag) where the rail
 * has FI_TAGGED, else untagged. */
ssize_t tern__prov_tsend(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, uint64_t data,
			 void *context, uint64_t flags);
ssize_t tern__prov_trecv(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, void *context,
			 uint64_t flags);
/* tern's own control messages (src/engine/ctrl.c): tagged with a tag no
 * tern_send() uses; rails without FI_TAGGED carry none. */
ssize_t tern__prov_ctrl_send(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, uint64_t addr, void *context);
ssize_t tern__prov_ctrl_recv(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, void *context);
/* An untagged receive from any peer (the engine's own buffers on a rail
 * without FI_TAGGED). */
ssize_t tern__prov_recv(struct tern__prov_rail *r, void *buf, size_t len,
			void *desc, void *context);
/* Re-post a receive that absorbs remote CQ data (FI_RX_CQ_DATA). */
ssize_t tern__prov_recv_sink(struct tern__prov_rail *r, void *context);
/* A 64-bit atomic on @raddr: fetch-add (@fadd) of w[0], or compare w[1]
 * and swap in w[0]; the old value lands in w[2]. @w is registered (@desc). */
ssize_t tern__prov_atomic(struct tern__prov_rail *r, int fadd, uint64_t *w,
			  void *desc, uint64_t addr, uint64_t raddr,
			  uint64_t key, void *context, uint64_t flags);

/* A failed post's -FI_E* value: -EAGAIN, or its text in @msg, its value
 * in *prov_errno_p and a tern error code. Cold. */
int tern__prov_post_error(ssize_t ret, char *msg, size_t len,
			  int *prov_errno_p);
/* A failed CQ read's value (-FI_E*), logged, as a tern code. */
int tern__prov_cq_failed(unsigned int idx, ssize_t ret);

/* One completion error, decoded. */
struct tern__prov_cqerr {
	void *context;
	size_t len;
	int status;	  /* tern error code */
	int prov_errno;	  /* the provider's own */
	const char *what; /* libfabric's text alone (static) */
	/* No context, and the flags of a transmit: on a sync_rma rail, the
	 * failure of a write or read that completed inside its post. */
	int tx_orphan;
	/* The error says the path to the peer is gone, not the operation:
	 * unreachable, reset, timed out, I/O error, flushed (failover.c). */
	int path;
	/* "rail IDX: " libfabric's text, then the provider's */
	char text[TERN_REQ_ERRMSG_LEN];
};

/* 1: an error entry in *@err; 0: none; <0: reading failed (logged). */
int tern__prov_cq_readerr(struct tern__prov_rail *r, unsigned int idx,
			  struct tern__prov_cqerr *err);

/* Memory registration. @device: a CUDA device (the provider reaches GPU
 * memory itself), or -1 for host memory; @dmabuf_fd >= 0 names it by a
 * dmabuf. @bind_ep: the provider wants regions bound to the endpoint. */
int tern__prov_mr_reg(struct tern__prov_rail *r, unsigned int idx, void *buf,
		      size_t len, uint64_t access, uint64_t requested_key,
		      int device, int dmabuf_fd, uint64_t dmabuf_off,
		      int bind_ep, struct tern__prov_mr **mr_p, void **desc_p,
		      uint64_t *key_p);
void tern__prov_mr_close(struct tern__prov_mr *mr);
/* Can regions name GPU memory by a dmabuf (libfabric >= 1.20)? */
int tern__prov_has_dmabuf(void);

/* Address vector: 0, -TERN_ECARD (address rejected) or -TERN_EPROV. */
int tern__prov_av_insert(struct tern__prov_rail *r, unsigned int idx,
			 const void *addr, uint64_t *fiaddr_p);
/* Nothing when the rail's AV is already closed. */
void tern__prov_av_remove(struct tern__prov_rail *r, uint64_t fiaddr);

/* The libfabric API version tern asks for (FI_VERSION): the highest both
 * the running library and tern know, or $TERN_FI_API. */
uint32_t tern__prov_api(void);

/* Map a provider error (positive FI_E* value) to a tern error code. */
int tern__err_from_fi(int fi_err);
/* "tcp" and "verbs" mean their RDM forms. */
const char *tern__provider_canonical(const char *name);
/* Why an offering lacks something tern needs, or NULL (prov's own). */
const char *tern__info_unusable(const struct fi_info *fi);

#include "prov_inline.h"

#endif /* TERN_PROV_H */
