/* SPDX-License-Identifier: MIT */
/*
 * fakeefa's internal header: the sizes it models, its objects, and what
 * its files (fakeefa.c: fi_info, fabric and domain; fakeefa_rules.c: the
 * TERN_FAKEEFA_* knobs and the rules it counts; fakeefa_cq.c; fakeefa_mr.c;
 * fakeefa_ep.c: address vectors and endpoints; fakeefa_ops.c: the data
 * operations) share. Never installed; the DSO exports only fi_prov_ini and
 * fakeefa_violations.
 */
#ifndef FAKEEFA_H
#define FAKEEFA_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

/* FI_OPT_MAX_MSG_SIZE ... FI_OPT_INJECT_RMA_SIZE: libfabric 2.x
 * rdma/fi_endpoint.h (the enum after FI_OPT_SHARED_MEMORY_PERMITTED = 11);
 * absent from 1.17's headers, hence the numbers. */
#define FAKE_OPT_MAX_MSG_SIZE	 12
#define FAKE_OPT_MAX_RMA_SIZE	 14
#define FAKE_OPT_INJECT_MSG_SIZE 16
#define FAKE_OPT_INJECT_RMA_SIZE 18
#if FI_MAJOR_VERSION >= 2
_Static_assert(FI_OPT_MAX_MSG_SIZE == FAKE_OPT_MAX_MSG_SIZE &&
		       FI_OPT_MAX_RMA_SIZE == FAKE_OPT_MAX_RMA_SIZE &&
		       FI_OPT_INJECT_MSG_SIZE == FAKE_OPT_INJECT_MSG_SIZE &&
		       FI_OPT_INJECT_RMA_SIZE == FAKE_OPT_INJECT_RMA_SIZE,
	       "libfabric 2.x option numbers");
#endif

#define FAKE_MTU     8928
#define FAKE_TX_SIZE 4096
#define FAKE_RX_SIZE 8192
#define FAKE_ADDRLEN 32
#define FAKE_INLINE  32	  /* efa-direct's inject size (messages only) */
#define FAKE_INJECT  4096 /* the efa fabric's inject size */
#define FAKE_MAX_EP  256
#define FAKE_MAX_MR  4096

/* ---- objects ---- */
struct fake_cq_ent {
	struct fi_cq_data_entry e;
	int err;
	int prov_errno;
	fi_addr_t src;
};

struct fake_cq {
	struct fid_cq cq;
	struct fake_cq_ent *ents;
	size_t head, tail, cap;
};

struct fake_av {
	struct fid_av av;
	uint8_t (*addr)[FAKE_ADDRLEN];
	size_t n, cap;
};

struct fake_domain;
struct fake_mr {
	struct fid_mr mr;
	struct fake_domain *dom;
	uint8_t *base;
	size_t len;
	uint64_t access;
	uint32_t key;
	int enabled;
};

struct fake_recv {
	void *buf;
	size_t len;
	void *ctx;
	uint64_t tag, ignore;
	int tagged;
};

struct fake_ep {
	struct fid_ep ep;
	struct fake_domain *dom;
	struct fake_cq *tx, *rx;
	struct fake_av *av;
	uint32_t id;
	uint8_t addr[FAKE_ADDRLEN];
	struct fake_recv *rq;
	size_t nrq, caprq;
	int enabled;
};

struct fake_domain {
	struct fid_domain dom;
	struct fi_info *info;
	int direct;
	int rx_cq_data;
	int nic;
};

struct fake_fabric {
	struct fid_fabric fab;
	int direct;
};

/* ---- fakeefa_rules.c: knobs, rules, stub tables ---- */
/* max_rdma_size of efa-direct (TERN_FAKEEFA_MAX_RDMA, read at load). */
extern size_t fake_max_rdma;

void fake_rules_init(void);
void fake_violate(const char *what);
const char *fake_profile(void);
int fake_nnics(void);
/* TERN_FAKEEFA_FAIL: 1 when an RMA or atomic posted on @nic must fail,
 * its link down (fakeefa_rules.c). */
int fake_link_down(int nic);
int fake_memlock_refuses(uint64_t pinned, uint64_t len);
int fake_max_mr_refuses(uint64_t len);
/* Fill every unset slot of an ops table with a stub returning
 * -FI_ENOSYS; fake_fill_forbidden's stub counts a broken rule too. */
void fake_fill_nosys(void *ops, size_t sz);
void fake_fill_forbidden(void *ops, size_t sz);

/* ---- fakeefa.c: the fake NICs ---- */
void fake_nic_gid(int nic, uint8_t *gid);

/* ---- fakeefa_cq.c ---- */
void fake_cq_init(void);
int fake_cq_open(struct fid_domain *d, struct fi_cq_attr *attr,
		 struct fid_cq **out, void *ctx);
void fake_cq_push(struct fake_cq *cq, void *ctx, uint64_t flags, size_t len,
		  void *buf, uint64_t data, int err, fi_addr_t src);

/* ---- fakeefa_mr.c ---- */
void fake_mr_init(void);
void fake_mr_attach(struct fake_domain *dom);
int fake_desc_ok(struct fake_ep *ep, void *desc, const void *buf, size_t len);
struct fake_mr *fake_rkey_find(uint64_t key, uint64_t addr, size_t len,
			       uint64_t access);

/* ---- fakeefa_ep.c ---- */
/* Every open endpoint, by the id in bytes 16..17 of its address. */
extern struct fake_ep *fake_eps[FAKE_MAX_EP];

void fake_ep_init(void);
int fake_av_open(struct fid_domain *d, struct fi_av_attr *attr,
		 struct fid_av **out, void *ctx);
int fake_ep_open(struct fid_domain *d, struct fi_info *info,
		 struct fid_ep **out, void *ctx);

/* ---- fakeefa_ops.c ---- */
void fake_ops_init(void);
void fake_ops_attach(struct fake_ep *ep);
int fake_atomic_valid(struct fid_ep *e, enum fi_datatype dt, enum fi_op op,
		      size_t *count);

#endif
