/* SPDX-License-Identifier: MIT */
/* Provider choice, and opening and closing the provider objects of a ctx:
 * fabrics, and per rail a domain, CQ, AV and endpoint. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "../core/core.h"
#include "prov.h"

/* The API version tern asks for: the one it was built against. */
#define TERN_FI_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/* fi_enable refusals (EBUSY: a stale shm region with our name) to try past
 * per rail. Each refusal removes one stale file; this covers a killed
 * process that had two ctxs of TERN_MAX_RAILS rails open. */
#define TERN__STALE_RETRIES (2 * TERN_MAX_RAILS + 2)

/* Providers tried, best first, when none is named. shm is never automatic. */
static const char *const auto_providers[] = { "efa", "verbs;ofi_rxm",
					      "tcp;ofi_rxm" };

const char *tern_fabric_version(void)
{
	static char buf[32];
	uint32_t v = fi_version();

	snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(v), FI_MINOR(v));
	return buf;
}

const char *tern_fabric_build_version(void)
{
	return TERN_STR(FI_MAJOR_VERSION) "." TERN_STR(FI_MINOR_VERSION);
}

/* "tcp" and "verbs" mean their RDM forms. */
const char *tern__provider_canonical(const char *name)
{
	if (strcmp(name, "tcp") == 0)
		return "tcp;ofi_rxm";
	if (strcmp(name, "verbs") == 0)
		return "verbs;ofi_rxm";
	return name;
}

static struct fi_info *make_hints(const char *prov, const char *domain,
				  uint64_t extra_caps)
{
	struct fi_info *hints = fi_allocinfo();

	if (hints == NULL)
		return NULL;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE |
		      FI_REMOTE_READ | FI_REMOTE_WRITE | extra_caps;
	/* Modes tern handles: it gives every op a fi_context2, and posts
	 * receives to absorb remote CQ data where the provider needs them. */
	hints->mode = FI_RX_CQ_DATA;
#ifdef FI_CONTEXT
	hints->mode |= FI_CONTEXT;
#endif
#ifdef FI_CONTEXT2
	hints->mode |= FI_CONTEXT2;
#endif
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	if (extra_caps & FI_HMEM)
		hints->domain_attr->mr_mode |= FI_MR_HMEM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	if (prov != NULL)
		hints->fabric_attr->prov_name = strdup(prov);
	if (domain != NULL)
		hints->domain_attr->name = strdup(domain);
	if ((prov != NULL && hints->fabric_attr->prov_name == NULL) ||
	    (domain != NULL && hints->domain_attr->name == NULL)) {
		fi_freeinfo(hints);
		return NULL;
	}
	return hints;
}

/* Why an offering lacks something tern needs, or NULL when it is usable. */
const char *tern__info_unusable(const struct fi_info *fi)
{
	uint64_t need = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE;

	if (fi->ep_attr->type != FI_EP_RDM)
		return "not a reliable-datagram (RDM) endpoint";
	if ((fi->caps & need) != need)
		return "lacks messages, tagged messages or RMA read/write";
	if (fi->domain_attr->cq_data_size < 4)
		return "cannot carry 4 bytes of remote CQ data";
	if (fi->src_addrlen > TERN_ADDR_MAX)
		return "endpoint address too long";
	return NULL;
}

/* Does domain @dom answer to the name a user gave? Exactly, or as the
 * RDMA device it is built on: "rdmap79s0" names "rdmap79s0-rdm". */
static int domain_match(const char *dom, const char *want)
{
	size_t n = strlen(want);

	return dom != NULL && strncmp(dom, want, n) == 0 &&
	       (dom[n] == '\0' || dom[n] == '-');
}

/* The provider's first usable offering; with @want, the first on a domain
 * of that name, and with @fmt, the first with that address format. */
static int getinfo_caps(const char *prov, const char *node, const char *domain,
			const char *want, uint32_t fmt, uint64_t extra_caps,
			struct fi_info **info_p)
{
	struct fi_info *hints, *info = NULL, *fi;
	int ret;

	hints = make_hints(prov, domain, extra_caps);
	if (hints == NULL)
		return -ENOMEM;
	hints->addr_format = fmt;
	ret = fi_getinfo(TERN_FI_VERSION, node, NULL, node ? FI_SOURCE : 0,
			 hints, &info);
	fi_freeinfo(hints);
	if (ret != 0) {
		tern_info("fi_getinfo(%s%s%s): %s", prov, node ? ", node " : "",
			  node ? node : "", fi_strerror(-ret));
		return ret == -FI_ENODATA ? -TERN_ENOPROV : -TERN_EPROV;
	}
	/* Layered providers may list a core entry first; take the first
	 * offering whose provider name matches exactly and is usable. */
	for (fi = info; fi != NULL; fi = fi->next) {
		tern_debug("offering: %s %s %s: %s", fi->fabric_attr->prov_name,
			   fi->fabric_attr->name, fi->domain_attr->name,
			   tern__info_unusable(fi) ? tern__info_unusable(fi)
						   : "usable");
		if (strcmp(fi->fabric_attr->prov_name, prov) == 0 &&
		    tern__info_unusable(fi) == NULL &&
		    (want == NULL || domain_match(fi->domain_attr->name, want)))
			break;
	}
	if (fi == NULL) {
		fi_freeinfo(info);
		tern_info("provider %s: no offering has what tern needs", prov);
		return -TERN_ENOPROV;
	}
	*info_p = fi_dupinfo(fi);
	fi_freeinfo(info);
	return *info_p != NULL ? 0 : -ENOMEM;
}

/* Atomics are wanted, not required: ask with them first, then without.
 * With @hmem, first ask for a provider that reaches GPU memory. */
static int getinfo_one(const char *prov, const char *node, const char *domain,
		       const char *want, uint32_t fmt, int hmem,
		       struct fi_info **info_p)
{
	int ret;

	/* Only NICs that reach GPU memory themselves (GPUDirect RDMA) make
	 * it zero-copy. shm offers FI_HMEM too, but there it means the
	 * provider's own host-side copies (and in Debian's build, without
	 * CUDA, it only slows shm down): tern's staging does that job. */
	if (hmem && strcmp(prov, "efa") != 0 && strncmp(prov, "verbs", 5) != 0)
		hmem = 0;
	if (hmem) {
		ret = getinfo_caps(prov, node, domain, want, fmt,
				   FI_ATOMIC | FI_HMEM, info_p);
		if (ret == -TERN_ENOPROV)
			ret = getinfo_caps(prov, node, domain, want, fmt,
					   FI_HMEM, info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
		tern_info("provider %s offers no FI_HMEM here: CUDA regions "
			  "will be staged through host memory",
			  prov);
	}
	ret = getinfo_caps(prov, node, domain, want, fmt, FI_ATOMIC, info_p);
	if (ret == -TERN_ENOPROV)
		ret = getinfo_caps(prov, node, domain, want, fmt, 0, info_p);
	return ret;
}

static struct fi_info *rail_info(const struct tern__prov *p,
				 const struct tern__prov_rail *r)
{
	return r->info != NULL ? r->info : p->info;
}

/* No domains listed: the provider named (or the first automatic one). */
static int choose_info(const struct tern__prov_want *w, struct fi_info **info_p)
{
	const char *prov = w->provider;
	const char *node = w->node;
	int ret;

	if (prov != NULL && strcmp(prov, "auto") != 0) {
		prov = tern__provider_canonical(prov);
		/* shm would take a node as its endpoint's name, and every
		 * process given the same one would collide. */
		if (node != NULL && strcmp(prov, "shm") == 0) {
			tern_info("shm: ignoring node %s (shm names its own "
				  "endpoints)",
				  node);
			node = NULL;
		}
		ret = getinfo_one(prov, node, w->domain, NULL, 0, w->hmem,
				  info_p);
		if (ret == -TERN_ENOPROV)
			tern_warn("provider '%s' is not available here%s%s "
				  "(see `tern info`)",
				  prov, node ? " on " : "", node ? node : "");
		return ret;
	}
	for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers); i++) {
		ret = getinfo_one(auto_providers[i], node, w->domain, NULL, 0,
				  w->hmem, info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
	}
	tern_warn("no usable provider among efa, verbs;ofi_rxm, tcp;ofi_rxm "
		  "(see `tern info`)");
	return -TERN_ENOPROV;
}

/* One rail per listed domain: rail 0 picks the provider (given, or the
 * first automatic one with such a domain); the others must be domains of
 * the same provider with the same address format (one card holds them). */
static int choose_rails(struct tern__prov *p, const struct tern__prov_want *w,
			struct tern__prov_rail *const *rails)
{
	const char *prov = w->provider;
	const char *const *names = w->domains;
	int ret = -TERN_ENOPROV;

	if (prov != NULL && strcmp(prov, "auto") != 0) {
		prov = tern__provider_canonical(prov);
		ret = getinfo_one(prov, NULL, NULL, names[0], 0, w->hmem,
				  &p->info);
	} else {
		for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers) &&
				   ret == -TERN_ENOPROV;
		     i++)
			ret = getinfo_one(auto_providers[i], NULL, NULL,
					  names[0], 0, w->hmem, &p->info);
	}
	if (ret != 0) {
		tern_warn("rail 0: no %s domain '%s' here (see `tern info`)",
			  prov ? prov : "efa, verbs or tcp", names[0]);
		return ret;
	}
	for (unsigned int i = 1; i < w->ndomains; i++) {
		ret = getinfo_one(p->info->fabric_attr->prov_name, NULL, NULL,
				  names[i], p->info->addr_format, w->hmem,
				  &rails[i]->info);
		if (ret != 0) {
			tern_warn("rail %u: no %s domain '%s' with the address "
				  "format of rail 0's here (see `tern info`)",
				  i, p->info->fabric_attr->prov_name, names[i]);
			return ret;
		}
	}
	return 0;
}

int tern__prov_choose(struct tern__prov *p, const struct tern__prov_want *w,
		      struct tern__prov_rail *const *rails)
{
	if (w->ndomains != 0)
		return choose_rails(p, w, rails);
	return choose_info(w, &p->info);
}

void tern__prov_caps(const struct tern__prov *p,
		     struct tern__prov_rail *const *rails, unsigned int n,
		     struct tern__prov_caps *caps)
{
	const struct fi_info *fi = p->info;

	*caps = (struct tern__prov_caps){
		.mr_mode = fi->domain_attr->mr_mode,
		.virt_addr = (fi->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0,
		.prov_key = (fi->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0,
		.mr_endpoint = (fi->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0,
		.rx_cq_data = (fi->mode & FI_RX_CQ_DATA) != 0,
		.addr_str = fi->addr_format == FI_ADDR_STR,
		.addr_format = fi->addr_format,
		.tx_size = fi->tx_attr->size,
		.rx_size = fi->rx_attr->size,
		.cq_data_size = fi->domain_attr->cq_data_size,
		.inject_size = fi->tx_attr->inject_size,
		.max_msg_size = fi->ep_attr->max_msg_size,
		.mr_key_size = fi->domain_attr->mr_key_size,
		.link_speed = fi->nic && fi->nic->link_attr
				      ? fi->nic->link_attr->speed
				      : 0,
		.hmem = 1,
	};
	snprintf(caps->prov_name, sizeof(caps->prov_name), "%s",
		 fi->fabric_attr->prov_name);
	snprintf(caps->fabric_name, sizeof(caps->fabric_name), "%s",
		 fi->fabric_attr->name ? fi->fabric_attr->name : "?");
	snprintf(caps->domain_name, sizeof(caps->domain_name), "%s",
		 fi->domain_attr->name ? fi->domain_attr->name : "?");
	snprintf(caps->domain0, sizeof(caps->domain0), "%s",
		 fi->domain_attr->name ? fi->domain_attr->name : "");
	for (unsigned int i = 0; i < n; i++) {
		const struct fi_info *ri = rail_info(p, rails[i]);
		size_t l = strlen(caps->domain_name);

		if (!(ri->caps & FI_HMEM))
			caps->hmem = 0;
		if (rails[i]->info == NULL)
			continue;
		caps->tx_size = TERN_MIN(caps->tx_size, ri->tx_attr->size);
		caps->rx_size = TERN_MIN(caps->rx_size, ri->rx_attr->size);
		snprintf(caps->domain_name + l, sizeof(caps->domain_name) - l,
			 ",%s", ri->domain_attr->name);
	}
	/* libfabric's rxm over verbs (1.17, and up to at least 2.4:
	 * ofiwg/libfabric#11828) closes a connection's endpoint before it
	 * drains the completion queue the connections share. A flow-control
	 * credit the peer sent just before is then handled through the freed
	 * endpoint: SIGSEGV in fi_close(), or in the peer's progress when
	 * our disconnect reaches it with our own last credit unread. The
	 * peer sends a credit right after taking our last messages, and we
	 * send ours right after taking its: progressing a while before the
	 * endpoints close takes the first in and sends the second well
	 * ahead of the disconnect. `tern atomic` clients leaving crashed
	 * their server or themselves without it (tests/vm, atomic_churn).
	 * A shared receive context (FI_OFI_RXM_USE_SRX=1) sends no credits,
	 * but with it 1.17 never reports a write's immediate data. */
	if (strcmp(caps->prov_name, "verbs;ofi_rxm") == 0)
		caps->linger_ms = (int)tern__env_long("TERN_VERBS_LINGER_MS",
						      20, 0, 10000);
}

int tern__prov_open(struct tern__prov *p, struct tern__prov_rail *const *rails,
		    unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		struct fi_info *fi = rail_info(p, rails[i]);
		int ret;

		for (unsigned int j = 0; j < i; j++) {
			struct fi_info *fj = rail_info(p, rails[j]);

			if (fi == fj || strcmp(fi->fabric_attr->name,
					       fj->fabric_attr->name) == 0) {
				rails[i]->fabric = rails[j]->fabric;
				break;
			}
		}
		if (rails[i]->fabric != NULL)
			continue;
		ret = fi_fabric(fi->fabric_attr, &rails[i]->fabric, NULL);
		if (ret != 0) {
			tern_warn("rail %u: fi_fabric(%s): %s", i,
				  fi->fabric_attr->name, fi_strerror(-ret));
			return -TERN_EPROV;
		}
		p->fabrics[p->nfabrics++] = rails[i]->fabric;
	}
	return 0;
}

void tern__prov_close(struct tern__prov *p,
		      struct tern__prov_rail *const *rails, unsigned int n)
{
	while (p->nfabrics > 0) {
		struct fid_fabric *f = p->fabrics[--p->nfabrics];

		/* Refused while a parked shm domain uses it: closed after
		 * that domain (shmpark.c). */
		if (fi_close(&f->fid) == -FI_EBUSY)
			tern__prov_shm_park_fabric(f);
	}
	for (unsigned int i = 0; i < n; i++) {
		fi_freeinfo(rails[i]->info);
		rails[i]->info = NULL;
		rails[i]->fabric = NULL;
	}
	fi_freeinfo(p->info);
	p->info = NULL;
}

void tern__prov_rail_close_ep(struct tern__prov_rail *r)
{
	if (r->shm_park == 1)
		tern__prov_shm_park_close(r); /* may keep them open */
	if (r->ep != NULL)
		fi_close(&r->ep->fid);
	r->ep = NULL;
}

void tern__prov_rail_close(struct tern__prov_rail *r)
{
	tern__prov_rail_close_ep(r);
	if (r->av != NULL)
		fi_close(&r->av->fid);
	if (r->cq != NULL)
		fi_close(&r->cq->fid);
	if (r->domain != NULL)
		fi_close(&r->domain->fid);
	r->av = NULL;
	r->cq = NULL;
	r->domain = NULL;
}

int tern__prov_rail_open(struct tern__prov *p, struct tern__prov_rail *r,
			 unsigned int idx, int busy_poll, void *addr,
			 size_t *addrlen_p, int *wait_fd_p)
{
	struct fi_info *fi = rail_info(p, r);
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_DATA,
		/* A wait fd lets an idle loop sleep; a busy poller has no
		 * use for one. */
		.wait_obj = busy_poll ? FI_WAIT_NONE : FI_WAIT_FD,
		.size = fi->tx_attr->size + fi->rx_attr->size,
	};
	struct fi_av_attr av_attr = {
		.type = FI_AV_TABLE,
		.count = 64,
	};
	const char *what;
	int ret, retries = 0;

again:
	*wait_fd_p = -1;
	r->shm_park = 0;
	what = "fi_domain";
	ret = fi_domain(r->fabric, fi, &r->domain, NULL);
	if (ret != 0)
		goto err;
	what = "fi_cq_open";
	ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (ret != 0 && cq_attr.wait_obj != FI_WAIT_NONE) {
		/* shm and efa (libfabric 1.17) offer no wait object: poll. */
		tern_debug("rail %u: no CQ wait fd (%s); polling", idx,
			   fi_strerror(-ret));
		cq_attr.wait_obj = FI_WAIT_NONE;
		ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	}
	if (ret != 0)
		goto err;
	if (cq_attr.wait_obj == FI_WAIT_FD &&
	    fi_control(&r->cq->fid, FI_GETWAIT, wait_fd_p) != 0)
		*wait_fd_p = -1;
	what = "fi_av_open";
	ret = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	if (ret != 0)
		goto err;
	what = "fi_endpoint";
	ret = fi_endpoint(r->domain, fi, &r->ep, NULL);
	if (ret != 0)
		goto err;
	what = "fi_ep_bind(cq)";
	ret = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret != 0)
		goto err;
	what = "fi_ep_bind(av)";
	ret = fi_ep_bind(r->ep, &r->av->fid, 0);
	if (ret != 0)
		goto err;
	what = "fi_enable";
	ret = fi_enable(r->ep);
	if (ret == -FI_EBUSY && retries < TERN__STALE_RETRIES) {
		/* shm names its region after our pid and a per-process
		 * endpoint count: a killed process that had our pid leaves
		 * one stale region per endpoint it had, and shm sees each as
		 * "in use" by us. Every refusal removes that file and the
		 * next endpoint takes the next name: try again until past
		 * them. */
		tern_debug("rail %u: fi_enable: %s; trying again (%d)", idx,
			   fi_strerror(-ret), retries + 1);
		tern__prov_rail_close(r);
		retries++;
		goto again;
	}
	if (ret != 0)
		goto err;
	r->fix_rx_flags = tern__prov_quirk_rx_flags(fi);
	what = "fi_getname";
	ret = fi_getname(&r->ep->fid, addr, addrlen_p);
	if (ret != 0)
		goto err;
	r->shm_park = 0;
	if (tern__prov_shm_park_wanted(fi)) {
		what = "tracking its shm address";
		ret = tern__prov_shm_park_open(r, addr, *addrlen_p);
		if (ret != 0)
			goto err;
	}
	return 0;

err:
	tern_warn("rail %u: %s: %s", idx, what, fi_strerror(-ret));
	tern__prov_rail_close(r);
	return -TERN_EPROV;
}

/* Does the provider run this 64-bit atomic natively (or in its own
 * software, as EFA does)? */
int tern__prov_atomic_ok(struct tern__prov_rail *const *rails,
			 const struct tern__prov *p, unsigned int n, int fadd)
{
	enum fi_op op = fadd ? FI_SUM : FI_CSWAP;
	uint64_t flags = fadd ? FI_FETCH_ATOMIC : FI_COMPARE_ATOMIC;

	/* Atomics go round-robin over the rails: every one must run them. */
	for (unsigned int i = 0; i < n; i++) {
		struct fi_atomic_attr attr = { 0 };

		if (!(rail_info(p, rails[i])->caps & FI_ATOMIC) ||
		    fi_query_atomic(rails[i]->domain, FI_UINT64, op, &attr,
				    flags) != 0 ||
		    attr.count < 1 || attr.size != 8)
			return 0;
	}
	return 1;
}

int tern__prov_trywait(const struct tern__prov *p,
		       struct tern__prov_rail *const *rails, unsigned int n)
{
	struct fid *fids[TERN_MAX_RAILS];
	int ret = 0;

	/* fi_trywait() takes the CQs of one fabric at a time. */
	for (unsigned int f = 0; f < p->nfabrics && ret == 0; f++) {
		int k = 0;

		for (unsigned int i = 0; i < n; i++) {
			if (rails[i]->fabric == p->fabrics[f])
				fids[k++] = &rails[i]->cq->fid;
		}
		ret = fi_trywait(p->fabrics[f], fids, k);
	}
	if (ret == 0)
		return 0;
	if (ret == -FI_EAGAIN)
		return -EAGAIN;
	tern_warn("fi_trywait: %s; polling from now on", fi_strerror(-ret));
	return -TERN_EPROV;
}
