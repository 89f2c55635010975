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

/* What tern cannot work without (tagged messages and atomics are wanted:
 * getinfo_best()). */
#define TERN__FI_NEED                                            \
	(FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | \
	 FI_REMOTE_WRITE)

/* libfabric 2.1+'s fabric of efa that maps each call to one hardware
 * work request (man fi_efa(7)). */
#define TERN_FABRIC_EFA_DIRECT "efa-direct"

/* fi_enable refusals (EBUSY: a stale shm region with our name) to try past
 * per rail. Each refusal removes one stale file; this covers a killed
 * process that had two ctxs of TERN_MAX_RAILS rails open. */
#define TERN__STALE_RETRIES (2 * TERN_MAX_RAILS + 2)

/* Providers tried, best first, when none is named. shm is never automatic. */
static const char *const auto_providers[] = { "efa", "verbs;ofi_rxm", "tcp" };

/* "tcp" and "verbs" mean their RDM forms ("tcp" also tcp's own RDM
 * endpoint on libfabric 2.x: getinfo_named()). */
const char *tern__provider_canonical(const char *name)
{
	if (strcmp(name, "tcp") == 0)
		return "tcp;ofi_rxm";
	if (strcmp(name, "verbs") == 0)
		return "verbs;ofi_rxm";
	return name;
}

/* One question to fi_getinfo(). */
struct ask {
	const char *prov;
	const char *node;
	const char *domain; /* exact domain name, or NULL */
	const char *want;   /* a domain or the RDMA device it is built on */
	const char *fabric; /* fabric name, or NULL */
	uint32_t fmt;	    /* address format, or 0 */
	/* Modes tern handles: it gives every op a fi_context2, and posts
	 * receives to absorb remote CQ data where the provider needs them
	 * (FI_RX_CQ_DATA). */
	uint64_t mode;
};

#ifdef FI_CONTEXT
#define TERN__MODE_CTX (FI_CONTEXT | FI_CONTEXT2)
#else
#define TERN__MODE_CTX FI_CONTEXT2
#endif
#define TERN__MODES (TERN__MODE_CTX | FI_RX_CQ_DATA)

static struct fi_info *make_hints(const struct ask *a, uint64_t extra_caps)
{
	struct fi_info *hints = fi_allocinfo();

	if (hints == NULL)
		return NULL;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = TERN__FI_NEED | extra_caps;
	hints->mode = a->mode;
	hints->addr_format = a->fmt;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	if (extra_caps & FI_HMEM)
		hints->domain_attr->mr_mode |= FI_MR_HMEM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	if (a->prov != NULL)
		hints->fabric_attr->prov_name = strdup(a->prov);
	if (a->domain != NULL)
		hints->domain_attr->name = strdup(a->domain);
	if (a->fabric != NULL)
		hints->fabric_attr->name = strdup(a->fabric);
	if ((a->prov != NULL && hints->fabric_attr->prov_name == NULL) ||
	    (a->domain != NULL && hints->domain_attr->name == NULL) ||
	    (a->fabric != NULL && hints->fabric_attr->name == NULL)) {
		fi_freeinfo(hints);
		return NULL;
	}
	return hints;
}

/* Is @prov the ofi_rxm utility over a core provider ("tcp;ofi_rxm"), or
 * a core provider whose reliable endpoints it makes ("tcp", "verbs")?
 * Such a provider is asked for FI_SOURCE (getinfo_best()). Besides the
 * source of tern's own messages, it avoids a crash: ofi_rxm from 2.0.0
 * to 2.3.x crashes in fi_av_insert() while a message that arrived before
 * its receive waits in its shared receive queue, looking up the message's
 * connection, which it notes only with FI_SOURCE or FI_DIRECTED_RECV
 * (rxm_get_addr(); fixed in 2.4.0 and 2.5.0 by "prov/rxm: prevent
 * segfault on get addr if conn is NULL"). atomic_tcp's server on Debian
 * 13 (2.1) crashed about 1 run in 10 without it. */
static int rxm_layered(const char *prov)
{
	const char *rxm = prov != NULL ? strstr(prov, ";ofi_rxm") : NULL;

	if (prov != NULL &&
	    (strcmp(prov, "tcp") == 0 || strcmp(prov, "verbs") == 0))
		return 1;
	return rxm != NULL && rxm[strlen(";ofi_rxm")] == '\0';
}

/*
 * Does provider @prov tell the true source of a write with immediate
 * (FI_SOURCE)? shm does. tcp;ofi_rxm (libfabric 1.17) offers FI_SOURCE
 * but reports a stale address for remote writes (it fills the source of
 * receives only): the writes of one peer were counted as another's. So
 * tern trusts a list: $TERN_IMM_SOURCE=0 trusts none, 2 any provider that
 * offers it (to try one), unset or 1 the list.
 */
static int source_trusted(const char *prov)
{
	long mode = tern__env_long("TERN_IMM_SOURCE", 1, 0, 2);

	if (mode != 1)
		return mode == 2;
	return prov != NULL && strcmp(prov, "shm") == 0;
}

/*
 * Does the rail carry plain small writes through the peer's queue
 * (tern__prov_rail.rma_queue, prov_inline.h)? shm does, where a write may
 * name two remote pieces: its own fast path for plain writes is one
 * process_vm_writev() each, its queue a memcpy. $TERN_INJECT below 2
 * keeps the fast path (docs/api.md).
 */
static int rma_queue_wanted(const struct fi_info *fi)
{
	return tern__env_long("TERN_INJECT", TERN__INJECT_DEFAULT, 0, 2) >= 2 &&
	       strcmp(fi->fabric_attr->prov_name, "shm") == 0 &&
	       fi->tx_attr->rma_iov_limit >= 2;
}

/* Why an offering lacks something tern needs, or NULL when it is usable:
 * the exact capability or limit, as libfabric names it. */
const char *tern__info_unusable(const struct fi_info *fi)
{
	static const struct {
		uint64_t bit;
		const char *why;
	} need[] = {
		{ FI_MSG, "lacks FI_MSG (messages)" },
		{ FI_RMA, "lacks FI_RMA (one-sided reads and writes)" },
		{ FI_READ, "lacks FI_READ (RMA reads)" },
		{ FI_WRITE, "lacks FI_WRITE (RMA writes)" },
		{ FI_REMOTE_READ, "lacks FI_REMOTE_READ (being read)" },
		{ FI_REMOTE_WRITE, "lacks FI_REMOTE_WRITE (being written)" },
	};

	if (fi->ep_attr->type != FI_EP_RDM)
		return "not a reliable-datagram (FI_EP_RDM) endpoint";
	for (size_t i = 0; i < TERN_ARRAY_SIZE(need); i++) {
		if (!(fi->caps & need[i].bit))
			return need[i].why;
	}
	if (fi->domain_attr->cq_data_size < 4)
		return "cq_data_size below 4: no room for a 4-byte "
		       "immediate in remote CQ data";
	if (fi->src_addrlen > TERN_ADDR_MAX)
		return "endpoint address longer than tern's cards hold";
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

/* The provider's first usable offering; with @a->want, the first on a
 * domain of that name, and with @a->fmt, the first with that address
 * format. */
static int getinfo_caps(const struct ask *a, uint64_t extra_caps,
			struct fi_info **info_p)
{
	struct fi_info *hints, *info = NULL, *fi;
	int ret;

	hints = make_hints(a, extra_caps);
	if (hints == NULL)
		return -ENOMEM;
	ret = fi_getinfo(tern__prov_api(), a->node, NULL,
			 a->node ? FI_SOURCE : 0, hints, &info);
	fi_freeinfo(hints);
	if (ret != 0) {
		tern__debug("fi_getinfo(%s%s%s%s%s, caps 0x%llx, mode 0x%llx): "
			    "%s",
			    a->prov, a->fabric ? ", fabric " : "",
			    a->fabric ? a->fabric : "",
			    a->node ? ", node " : "", a->node ? a->node : "",
			    (unsigned long long)extra_caps,
			    (unsigned long long)a->mode, fi_strerror(-ret));
		return ret == -FI_ENODATA ? -TERN_ENOPROV : -TERN_EPROV;
	}
	/* Layered providers may list a core entry first; take the first
	 * offering whose provider name matches exactly and is usable. */
	for (fi = info; fi != NULL; fi = fi->next) {
		tern__debug("offering: %s %s %s: %s",
			    fi->fabric_attr->prov_name, fi->fabric_attr->name,
			    fi->domain_attr->name,
			    tern__info_unusable(fi) ? tern__info_unusable(fi)
						    : "usable");
		/* Some providers (shm) ignore a fabric name in the hints. */
		if (strcmp(fi->fabric_attr->prov_name, a->prov) == 0 &&
		    tern__info_unusable(fi) == NULL &&
		    (a->fabric == NULL ||
		     (fi->fabric_attr->name != NULL &&
		      strcmp(fi->fabric_attr->name, a->fabric) == 0)) &&
		    (a->want == NULL ||
		     domain_match(fi->domain_attr->name, a->want)))
			break;
	}
	if (fi == NULL) {
		fi_freeinfo(info);
		tern__debug("provider %s: no offering has what tern needs",
			    a->prov);
		return -TERN_ENOPROV;
	}
	*info_p = fi_dupinfo(fi);
	fi_freeinfo(info);
	return *info_p != NULL ? 0 : -ENOMEM;
}

/*
 * The best offering for @a with @hmem_cap: what tern needs, and as much as
 * it wants of tagged messages (every tern message then carries one tag,
 * apart from the receives that absorb remote CQ data) and atomics.
 * Providers list a capability only when asked for it, so ask for the most
 * first; an offering with neither (efa-direct) gets untagged messages
 * matched by tern, and atomics answer -TERN_ENOTSUP.
 */
static int getinfo_best(const struct ask *a, uint64_t hmem_cap,
			struct fi_info **info_p)
{
	static const uint64_t less[] = { FI_TAGGED, FI_ATOMIC };
	struct fi_info *base = NULL;
	int ret;

	/* The source of each arrival (FI_SOURCE, fi_cq_readfrom()) lets
	 * tern_imm_expect_from() count one peer's writes: asked for where
	 * it can be trusted (source_trusted()). Under ofi_rxm it is true of
	 * messages (the connection's peer) but not of writes: asked for
	 * there too, for tern's own messages (a fence says who asks,
	 * src/engine/fence.c), and because some releases crash without it
	 * (rxm_layered()). */
	if (source_trusted(a->prov) || rxm_layered(a->prov)) {
		ret = getinfo_caps(a,
				   hmem_cap | FI_TAGGED | FI_ATOMIC | FI_SOURCE,
				   info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
	}
	ret = getinfo_caps(a, hmem_cap | FI_TAGGED | FI_ATOMIC, info_p);
	if (ret != -TERN_ENOPROV)
		return ret;
	/* Absent, or present without one of them: one question tells. */
	ret = getinfo_caps(a, hmem_cap, &base);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(less); i++) {
		ret = getinfo_caps(a, hmem_cap | less[i], info_p);
		if (ret != -TERN_ENOPROV) {
			fi_freeinfo(base);
			return ret;
		}
	}
	*info_p = base;
	return 0;
}

/* With @hmem, first ask for an offering that reaches GPU memory. */
static int getinfo_fabric(const struct ask *a, int hmem,
			  struct fi_info **info_p)
{
	int ret;

	/* Only NICs that reach GPU memory themselves (GPUDirect RDMA) make
	 * it zero-copy. shm offers FI_HMEM too, but there it means the
	 * provider's own host-side copies (and in Debian's build, without
	 * CUDA, it only slows shm down): tern's staging does that job. */
	if (hmem && strcmp(a->prov, "efa") != 0 &&
	    strncmp(a->prov, "verbs", 5) != 0)
		hmem = 0;
	if (hmem) {
		ret = getinfo_best(a, FI_HMEM, info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
		tern__info("provider %s%s%s offers no FI_HMEM here: CUDA "
			   "regions will be staged through host memory",
			   a->prov, a->fabric ? " fabric " : "",
			   a->fabric ? a->fabric : "");
	}
	return getinfo_best(a, 0, info_p);
}

/* efa-direct takes FI_RX_CQ_DATA as optional: offered it, writes with
 * data consume a posted receive even where the device could place them
 * without one (unsolicited write receive, fi_efa(7)). Ask without it
 * first; a device that needs it answers only to the second question. */
static int getinfo_direct(struct ask *a, int hmem, struct fi_info **info_p)
{
	int ret;

	a->mode = TERN__MODE_CTX;
	ret = getinfo_fabric(a, hmem, info_p);
	a->mode = TERN__MODES;
	if (ret != -TERN_ENOPROV)
		return ret;
	return getinfo_fabric(a, hmem, info_p);
}

/*
 * One provider's offering. @fabric names the libfabric fabric ("efa",
 * "efa-direct", a tcp subnet), or NULL: on efa, efa-direct where the
 * library offers it (2.1 and later; docs/efa.md says why), else efa.
 */
static int getinfo_one(const char *prov, const char *node, const char *domain,
		       const char *want, uint32_t fmt, const char *fabric,
		       int hmem, struct fi_info **info_p)
{
	struct ask a = { .prov = prov,
			 .node = node,
			 .domain = domain,
			 .want = want,
			 .fabric = fabric,
			 .fmt = fmt,
			 .mode = TERN__MODES };
	int ret;

	if (fabric != NULL && strcmp(fabric, TERN_FABRIC_EFA_DIRECT) == 0)
		return getinfo_direct(&a, hmem, info_p);
	if (fabric == NULL && strcmp(prov, "efa") == 0) {
		a.fabric = TERN_FABRIC_EFA_DIRECT;
		ret = getinfo_direct(&a, hmem, info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
		tern__info("efa: no usable efa-direct fabric (libfabric %s; it "
			   "needs 2.1 or later); trying the efa fabric",
			   tern_fabric_version());
		a.fabric = NULL;
	}
	return getinfo_fabric(&a, hmem, info_p);
}

/*
 * A provider by the name a user gives. "tcp" is libfabric 2.x's own tcp RDM
 * endpoint where it has one, else tcp;ofi_rxm: on 2.1 the native endpoint
 * wrote 64 KiB 1.3-1.8x faster over loopback and halved 8-byte latency
 * (docs/performance.md), but it has no atomics: those answer
 * -TERN_ENOTSUP there, and "tcp;ofi_rxm" (named so) emulates them. 1.17's
 * native RDM endpoint does not offer what tern asks for.
 */
static int getinfo_named(const char *name, const char *node, const char *domain,
			 const char *want, const char *fabric, int hmem,
			 struct fi_info **info_p)
{
	if (strcmp(name, "tcp") == 0 && FI_MAJOR(fi_version()) >= 2) {
		int ret = getinfo_one("tcp", node, domain, want, 0, fabric,
				      hmem, info_p);

		if (ret != -TERN_ENOPROV)
			return ret;
		tern__info("tcp: no native RDM endpoint; using tcp;ofi_rxm");
	}
	return getinfo_one(tern__provider_canonical(name), node, domain, want,
			   0, fabric, hmem, info_p);
}

static struct fi_info *rail_info(const struct tern__prov *p,
				 const struct tern__prov_rail *r)
{
	return r->info != NULL ? r->info : p->info;
}

/* The fabric other rails must share with rail 0's offering @fi: efa's two
 * fabrics differ in what they carry (tagged or not), so a ctx keeps to
 * one; other providers' fabric names differ per network (tcp: a subnet). */
static const char *fabric_kind(const struct fi_info *fi)
{
	const char *name = fi->fabric_attr->name;

	if (name != NULL && (strcmp(name, "efa") == 0 ||
			     strcmp(name, TERN_FABRIC_EFA_DIRECT) == 0))
		return name;
	return NULL;
}

/* No domains listed: the provider named (or the first automatic one). */
static int choose_info(const struct tern__prov_want *w, struct fi_info **info_p)
{
	const char *prov = w->provider;
	const char *node = w->node;
	int ret;

	if (prov != NULL && strcmp(prov, "auto") != 0) {
		/* shm would take a node as its endpoint's name, and every
		 * process given the same one would collide. */
		if (node != NULL && strcmp(prov, "shm") == 0) {
			tern__info("shm: ignoring node %s (shm names its own "
				   "endpoints)",
				   node);
			node = NULL;
		}
		ret = getinfo_named(prov, node, w->domain, NULL, w->fabric,
				    w->hmem, info_p);
		if (ret == -TERN_ENOPROV)
			tern__warn(
				"provider '%s'%s%s is not available here%s%s "
				"(see `tern info`)",
				prov, w->fabric ? " fabric " : "",
				w->fabric ? w->fabric : "", node ? " on " : "",
				node ? node : "");
		return ret;
	}
	for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers); i++) {
		ret = getinfo_named(auto_providers[i], node, w->domain, NULL,
				    w->fabric, w->hmem, info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
	}
	tern__warn("no usable provider among efa, verbs;ofi_rxm, tcp "
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
		ret = getinfo_named(prov, NULL, NULL, names[0], w->fabric,
				    w->hmem, &p->info);
	} else {
		for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers) &&
				   ret == -TERN_ENOPROV;
		     i++)
			ret = getinfo_named(auto_providers[i], NULL, NULL,
					    names[0], w->fabric, w->hmem,
					    &p->info);
	}
	if (ret != 0) {
		tern__warn("rail 0: no %s domain '%s' here (see `tern info`)",
			   prov ? prov : "efa, verbs or tcp", names[0]);
		return ret;
	}
	for (unsigned int i = 1; i < w->ndomains; i++) {
		/* Every rail on rail 0's kind of fabric: one card, one
		 * messaging mode (efa and efa-direct do not mix). */
		ret = getinfo_one(p->info->fabric_attr->prov_name, NULL, NULL,
				  names[i], p->info->addr_format,
				  w->fabric ? w->fabric : fabric_kind(p->info),
				  w->hmem, &rails[i]->info);
		if (ret != 0) {
			tern__warn(
				"rail %u: no %s domain '%s' with the address "
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
		.tagged = (fi->caps & FI_TAGGED) != 0,
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
		if (!(ri->caps & FI_TAGGED))
			caps->tagged = 0;
		if (rails[i]->info == NULL)
			continue;
		caps->tx_size = TERN_MIN(caps->tx_size, ri->tx_attr->size);
		caps->rx_size = TERN_MIN(caps->rx_size, ri->rx_attr->size);
		caps->inject_size = TERN_MIN(caps->inject_size,
					     ri->tx_attr->inject_size);
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
			tern__warn("rail %u: fi_fabric(%s): %s", i,
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
	r->tagged = (fi->caps & FI_TAGGED) != 0;
	r->shm_park = 0;
	what = "fi_domain";
	ret = fi_domain(r->fabric, fi, &r->domain, NULL);
	if (ret != 0)
		goto err;
	what = "fi_cq_open";
	ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (ret != 0 && cq_attr.wait_obj != FI_WAIT_NONE) {
		/* shm and efa (libfabric 1.17) offer no wait object: poll. */
		tern__debug("rail %u: no CQ wait fd (%s); polling", idx,
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
		tern__debug("rail %u: fi_enable: %s; trying again (%d)", idx,
			    fi_strerror(-ret), retries + 1);
		tern__prov_rail_close(r);
		retries++;
		goto again;
	}
	if (ret != 0)
		goto err;
	r->source = (fi->caps & FI_SOURCE) != 0;
	r->source_rma = r->source && source_trusted(fi->fabric_attr->prov_name);
	r->fix_rx_flags = tern__prov_quirk_rx_flags(fi);
	r->sync_rma = tern__prov_quirk_sync_rma(fi);
	r->inject_plain_off = tern__prov_quirk_inject_plain_off(fi);
	r->rma_queue = rma_queue_wanted(fi);
	r->rma_inject_off = 0;
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
	tern__warn("rail %u: %s: %s", idx, what, fi_strerror(-ret));
	tern__prov_rail_close(r);
	return -TERN_EPROV;
}

/* FI_OPT_MAX_MSG_SIZE and FI_OPT_MAX_RMA_SIZE: endpoint options of
 * libfabric 2.0 (include/rdma/fi_endpoint.h), absent from older headers;
 * their values there. */
#ifndef FI_OPT_MAX_MSG_SIZE
#define TERN__OPT_MAX_MSG_SIZE 12
#define TERN__OPT_MAX_RMA_SIZE 14
#else
#define TERN__OPT_MAX_MSG_SIZE FI_OPT_MAX_MSG_SIZE
#define TERN__OPT_MAX_RMA_SIZE FI_OPT_MAX_RMA_SIZE
#endif

void tern__prov_rail_limits(const struct tern__prov *p,
			    const struct tern__prov_rail *r, uint64_t *msg_p,
			    uint64_t *rma_p)
{
	const struct fi_info *fi = rail_info(p, r);
	size_t v, len;

	/* ep_attr->max_msg_size bounds both, and on efa-direct it is the
	 * larger of the two (prov/efa/src/efa_prov_info.c): a send of that
	 * size would be refused. The endpoint knows each. */
	*msg_p = *rma_p = fi->ep_attr->max_msg_size;
	/* No 1.x library defines these numbers: it answers ENOPROTOOPT. */
	len = sizeof(v);
	if (fi_getopt(&r->ep->fid, FI_OPT_ENDPOINT, TERN__OPT_MAX_MSG_SIZE, &v,
		      &len) == 0 &&
	    len == sizeof(v) && v != 0)
		*msg_p = TERN_MIN(*msg_p, (uint64_t)v);
	len = sizeof(v);
	if (fi_getopt(&r->ep->fid, FI_OPT_ENDPOINT, TERN__OPT_MAX_RMA_SIZE, &v,
		      &len) == 0 &&
	    len == sizeof(v) && v != 0)
		*rma_p = TERN_MIN(*rma_p, (uint64_t)v);
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
	tern__warn("fi_trywait: %s; polling from now on", fi_strerror(-ret));
	return -TERN_EPROV;
}
