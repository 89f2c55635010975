/* SPDX-License-Identifier: MIT */
/* Provider choice, and opening and closing a ctx and its rails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "engine.h"
#include "stage.h"
#include "../topo/topo.h"

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

static int want_hmem(const struct tern_ctx_attr *attr)
{
	return (attr->flags & TERN_CTX_HMEM) != 0 ||
	       tern__env_long("TERN_HMEM", 0, 0, 1) != 0;
}

static int choose_info(const struct tern_ctx_attr *attr,
		       struct fi_info **info_p)
{
	const char *prov = attr->provider ? attr->provider
					  : tern__env_str("TERN_PROVIDER");
	const char *node = attr->node ? attr->node : tern__env_str("TERN_NODE");
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
		ret = getinfo_one(prov, node, attr->domain, NULL, 0,
				  want_hmem(attr), info_p);
		if (ret == -TERN_ENOPROV)
			tern_warn("provider '%s' is not available here%s%s "
				  "(see `tern info`)",
				  prov, node ? " on " : "", node ? node : "");
		return ret;
	}
	for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers); i++) {
		ret = getinfo_one(auto_providers[i], node, attr->domain, NULL,
				  0, want_hmem(attr), info_p);
		if (ret != -TERN_ENOPROV)
			return ret;
	}
	tern_warn("no usable provider among efa, verbs;ofi_rxm, tcp;ofi_rxm "
		  "(see `tern info`)");
	return -TERN_ENOPROV;
}

/* attr->domains (or $TERN_DOMAINS): the domain names, one per rail.
 * @return 0 with *n_p = 0 when none is asked; -EINVAL, logged. */
static int domain_list(const struct tern_ctx_attr *attr,
		       char (*names)[TERN_TOPO_NAME_LEN], unsigned int *n_p)
{
	const char *spec = attr->domains ? attr->domains
					 : tern__env_str("TERN_DOMAINS");
	const char *p;

	*n_p = 0;
	if (spec == NULL || *spec == '\0')
		return 0;
	if (strncmp(spec, "gpu=", 4) == 0) {
		char why[192], *end;
		unsigned long gpu = strtoul(spec + 4, &end, 10);
		int n;

		if (spec[4] == '\0' || *end != '\0' || gpu > 1024) {
			tern_warn("rails '%s': gpu=N takes a GPU number (see "
				  "tern topo)",
				  spec);
			return -EINVAL;
		}
		n = tern__topo_gpu_nics(tern__env_str("TERN_TOPO_XML"),
					(unsigned int)gpu, names,
					TERN_MAX_RAILS, why, sizeof(why));
		if (n < 0) {
			tern_warn("rails '%s': %s", spec, why);
			return -EINVAL;
		}
		*n_p = (unsigned int)n;
		return 0;
	}
	for (p = spec; *p != '\0';) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= TERN_TOPO_NAME_LEN ||
		    *n_p == TERN_MAX_RAILS) {
			tern_warn("rails '%s': expected up to %d domain names "
				  "of 1..%d characters, comma-separated",
				  spec, TERN_MAX_RAILS, TERN_TOPO_NAME_LEN - 1);
			return -EINVAL;
		}
		memcpy(names[*n_p], p, len);
		names[(*n_p)++][len] = '\0';
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* One rail per listed domain: rail 0 picks the provider (given, or the
 * first automatic one with such a domain); the others must be domains of
 * the same provider with the same address format (one card holds them). */
static int choose_rails(struct tern_ctx *ctx, const struct tern_ctx_attr *attr,
			char (*names)[TERN_TOPO_NAME_LEN], unsigned int n)
{
	const char *prov = attr->provider ? attr->provider
					  : tern__env_str("TERN_PROVIDER");
	int ret = -TERN_ENOPROV;

	if (prov != NULL && strcmp(prov, "auto") != 0) {
		prov = tern__provider_canonical(prov);
		ret = getinfo_one(prov, NULL, NULL, names[0], 0,
				  want_hmem(attr), &ctx->info);
	} else {
		for (size_t i = 0; i < TERN_ARRAY_SIZE(auto_providers) &&
				   ret == -TERN_ENOPROV;
		     i++)
			ret = getinfo_one(auto_providers[i], NULL, NULL,
					  names[0], 0, want_hmem(attr),
					  &ctx->info);
	}
	if (ret != 0) {
		tern_warn("rail 0: no %s domain '%s' here (see `tern info`)",
			  prov ? prov : "efa, verbs or tcp", names[0]);
		return ret;
	}
	for (unsigned int i = 1; i < n; i++) {
		ret = getinfo_one(ctx->info->fabric_attr->prov_name, NULL, NULL,
				  names[i], ctx->info->addr_format,
				  want_hmem(attr), &ctx->rails[i].info);
		if (ret != 0) {
			tern_warn("rail %u: no %s domain '%s' with the address "
				  "format of rail 0's here (see `tern info`)",
				  i, ctx->info->fabric_attr->prov_name,
				  names[i]);
			return ret;
		}
	}
	return 0;
}

static struct fi_info *rail_info(const struct tern_ctx *ctx,
				 const struct tern_rail *r)
{
	return r->info != NULL ? r->info : ctx->info;
}

/* Each rail's fabric, opened once per fabric name. */
static int open_fabrics(struct tern_ctx *ctx)
{
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct fi_info *fi = rail_info(ctx, &ctx->rails[i]);
		int ret;

		for (unsigned int j = 0; j < i; j++) {
			struct fi_info *fj = rail_info(ctx, &ctx->rails[j]);

			if (fi == fj || strcmp(fi->fabric_attr->name,
					       fj->fabric_attr->name) == 0) {
				ctx->rails[i].fabric = ctx->rails[j].fabric;
				break;
			}
		}
		if (ctx->rails[i].fabric != NULL)
			continue;
		ret = fi_fabric(fi->fabric_attr, &ctx->rails[i].fabric, NULL);
		if (ret != 0) {
			tern_warn("rail %u: fi_fabric(%s): %s", i,
				  fi->fabric_attr->name, fi_strerror(-ret));
			return -TERN_EPROV;
		}
		ctx->fabrics[ctx->nfabrics++] = ctx->rails[i].fabric;
	}
	ctx->fabric = ctx->rails[0].fabric;
	return 0;
}

/* What tern_ctx_open() built before its rails: fabrics and infos. */
static void close_fabrics(struct tern_ctx *ctx)
{
	while (ctx->nfabrics > 0)
		fi_close(&ctx->fabrics[--ctx->nfabrics]->fid);
	for (unsigned int i = 0; i < TERN_MAX_RAILS; i++) {
		fi_freeinfo(ctx->rails[i].info);
		ctx->rails[i].info = NULL;
		ctx->rails[i].fabric = NULL;
	}
	fi_freeinfo(ctx->info);
	ctx->info = NULL;
	ctx->fabric = NULL;
}

static void rail_close(struct tern_rail *r)
{
	if (r->ep != NULL)
		fi_close(&r->ep->fid);
	if (r->av != NULL)
		fi_close(&r->av->fid);
	if (r->cq != NULL)
		fi_close(&r->cq->fid);
	if (r->domain != NULL)
		fi_close(&r->domain->fid);
	r->ep = NULL;
	r->av = NULL;
	r->cq = NULL;
	r->domain = NULL;
	free(r->slots);
	free(r->free_slots);
	r->slots = NULL;
	r->slots_span = 0;
	r->free_slots = NULL;
}

static int post_sinks(struct tern_rail *r)
{
	for (unsigned int i = 0; i < TERN__SINKS; i++) {
		ssize_t ret = fi_recv(r->ep, NULL, 0, NULL, FI_ADDR_UNSPEC,
				      r->sink_ctx[i]);

		if (ret != 0) {
			tern_warn("rail %u: posting receive for remote CQ "
				  "data: %s",
				  r->idx, fi_strerror((int)-ret));
			return -TERN_EPROV;
		}
	}
	return 0;
}

static int rail_open(struct tern_ctx *ctx, struct tern_rail *r)
{
	struct fi_info *fi = rail_info(ctx, r);
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_DATA,
		/* A wait fd lets an idle loop sleep; a busy poller has no
		 * use for one. */
		.wait_obj = ctx->busy_poll ? FI_WAIT_NONE : FI_WAIT_FD,
		.size = fi->tx_attr->size + fi->rx_attr->size,
	};
	struct fi_av_attr av_attr = {
		.type = FI_AV_TABLE,
		.count = 64,
	};
	const char *what;
	size_t len;
	int ret, retries = 0;

again:
	r->ctx = ctx;
	r->wait_fd = -1;
	what = "fi_domain";
	ret = fi_domain(r->fabric, fi, &r->domain, NULL);
	if (ret != 0)
		goto err;
	what = "fi_cq_open";
	ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (ret != 0 && cq_attr.wait_obj != FI_WAIT_NONE) {
		/* shm and efa (libfabric 1.17) offer no wait object: poll. */
		tern_debug("rail %u: no CQ wait fd (%s); polling", r->idx,
			   fi_strerror(-ret));
		cq_attr.wait_obj = FI_WAIT_NONE;
		ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	}
	if (ret != 0)
		goto err;
	if (cq_attr.wait_obj == FI_WAIT_FD &&
	    fi_control(&r->cq->fid, FI_GETWAIT, &r->wait_fd) != 0)
		r->wait_fd = -1;
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
		tern_debug("rail %u: fi_enable: %s; trying again (%d)", r->idx,
			   fi_strerror(-ret), retries + 1);
		rail_close(r);
		retries++;
		goto again;
	}
	if (ret != 0)
		goto err;
	len = sizeof(r->addr);
	what = "fi_getname";
	ret = fi_getname(&r->ep->fid, r->addr, &len);
	if (ret != 0)
		goto err;
	r->addrlen = len;
	r->tx_credits = ctx->tx_size;
	r->rx_credits = ctx->rx_size;
	r->slots = calloc(ctx->tx_size, sizeof(*r->slots));
	r->free_slots = calloc(ctx->tx_size, sizeof(*r->free_slots));
	if (r->slots == NULL || r->free_slots == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	r->slots_span = ctx->tx_size * sizeof(*r->slots);
	for (r->nfree = 0; r->nfree < ctx->tx_size; r->nfree++)
		r->free_slots[r->nfree] = (uint32_t)(ctx->tx_size - 1 -
						     r->nfree);
	if (ctx->rx_cq_data) {
		ret = post_sinks(r);
		if (ret != 0)
			goto err_close;
		r->rx_credits -= TERN__SINKS;
	}
	return 0;

err:
	tern_warn("rail %u: %s: %s", r->idx, what, fi_strerror(-ret));
	ret = -TERN_EPROV;
err_close:
	rail_close(r);
	return ret;
}

/* Does the provider run this 64-bit atomic natively (or in its own
 * software, as EFA does)? */
static int atomic_ok(struct tern_ctx *ctx, enum fi_op op, uint64_t flags)
{
	/* Atomics go round-robin over the rails: every one must run them. */
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct fi_atomic_attr attr = { 0 };

		if (!(rail_info(ctx, &ctx->rails[i])->caps & FI_ATOMIC) ||
		    fi_query_atomic(ctx->rails[i].domain, FI_UINT64, op, &attr,
				    flags) != 0 ||
		    attr.count < 1 || attr.size != 8)
			return 0;
	}
	return 1;
}

/* One registered scratch area for every rail's slots (atomic operands and
 * results); not counted among the user's regions. */
static int scratch_open(struct tern_ctx *ctx)
{
	size_t words = 3 * ctx->tx_size, bytes;
	int ret;

	bytes = words * ctx->nrails * sizeof(uint64_t);
	if (posix_memalign((void **)&ctx->scratch, 128, bytes) != 0)
		return -ENOMEM;
	memset(ctx->scratch, 0, bytes);
	ret = tern_mr_reg(ctx, ctx->scratch, bytes, TERN_ACCESS_LOCAL,
			  &ctx->scratch_mr);
	if (ret != 0) {
		free(ctx->scratch);
		ctx->scratch = NULL;
		return ret;
	}
	ctx->nmr--;
	for (unsigned int i = 0; i < ctx->nrails; i++)
		ctx->rails[i].scratch = ctx->scratch + i * words;
	return 0;
}

static void scratch_close(struct tern_ctx *ctx, int held)
{
	if (ctx->scratch_mr == NULL)
		return;
	ctx->nmr++;
	tern__mr_close(ctx->scratch_mr);
	/* An atomic the provider never finished may still touch it. */
	if (!held)
		free(ctx->scratch);
	else
		tern__keep(ctx->scratch);
	ctx->scratch_mr = NULL;
	ctx->scratch = NULL;
}

static void decode_info(struct tern_ctx *ctx)
{
	struct fi_info *fi = ctx->info;

	ctx->mr_mode = fi->domain_attr->mr_mode;
	ctx->virt_addr = (ctx->mr_mode & FI_MR_VIRT_ADDR) != 0;
	ctx->prov_key = (ctx->mr_mode & FI_MR_PROV_KEY) != 0;
	ctx->mr_endpoint = (ctx->mr_mode & FI_MR_ENDPOINT) != 0;
	ctx->rx_cq_data = (fi->mode & FI_RX_CQ_DATA) != 0;
	ctx->addr_format = fi->addr_format;
	ctx->tx_size = fi->tx_attr->size;
	ctx->rx_size = fi->rx_attr->size;
	ctx->cq_data_size = fi->domain_attr->cq_data_size;
	ctx->inject_size = fi->tx_attr->inject_size;
	ctx->max_msg_size = fi->ep_attr->max_msg_size;
	ctx->mr_key_size = fi->domain_attr->mr_key_size;
	snprintf(ctx->prov_name, sizeof(ctx->prov_name), "%s",
		 fi->fabric_attr->prov_name);
	snprintf(ctx->fabric_name, sizeof(ctx->fabric_name), "%s",
		 fi->fabric_attr->name ? fi->fabric_attr->name : "?");
	snprintf(ctx->domain_name, sizeof(ctx->domain_name), "%s",
		 fi->domain_attr->name ? fi->domain_attr->name : "?");
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
	if (strcmp(ctx->prov_name, "verbs;ofi_rxm") == 0)
		ctx->close_linger_ms = (int)tern__env_long(
			"TERN_VERBS_LINGER_MS", 20, 0, 10000);
}

int tern_ctx_open(const struct tern_ctx_attr *attr, struct tern_ctx **ctx_p)
{
	static const struct tern_ctx_attr defaults;
	char names[TERN_MAX_RAILS][TERN_TOPO_NAME_LEN];
	unsigned int i = 0, ndom = 0;
	struct tern_ctx *ctx;
	int ret;

	if (attr == NULL)
		attr = &defaults;
	if (ctx_p == NULL ||
	    (attr->flags &
	     ~(TERN_CTX_BUSY_POLL | TERN_CTX_PIN | TERN_CTX_HMEM)) != 0 ||
	    attr->rails > TERN_MAX_RAILS || attr->log_level > TERN_LOG_DEBUG ||
	    attr->post_batch > 4096 ||
	    (attr->stripe_chunk != 0 && attr->stripe_chunk < 4096))
		return -EINVAL;
	if (attr->log_level != 0)
		tern_log_set_level(attr->log_level);
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL)
		return -ENOMEM;
	ctx->nrails = attr->rails ? attr->rails : 1;
	ctx->post_batch = attr->post_batch
				  ? attr->post_batch
				  : (unsigned int)tern__env_long(
					    "TERN_POST_BATCH", 32, 1, 4096);
	ctx->stripe_chunk = attr->stripe_chunk
				    ? attr->stripe_chunk
				    : (uint64_t)tern__env_long(
					      "TERN_STRIPE_CHUNK",
					      (long)TERN_STRIPE_CHUNK_DEFAULT,
					      4096, 1L << 40);
	ctx->busy_poll = (attr->flags & TERN_CTX_BUSY_POLL) ||
			 tern__env_long("TERN_BUSY_POLL", 0, 0, 1);
	ctx->next_key = 1;

	ret = tern__imm_init(&ctx->imm);
	if (ret != 0)
		goto err_free;
	ret = domain_list(attr, names, &ndom);
	if (ret == 0 && ndom != 0 && attr->rails > 1 && attr->rails != ndom) {
		tern_warn("%u rails asked, %u domains listed", attr->rails,
			  ndom);
		ret = -EINVAL;
	}
	if (ret != 0)
		goto err_imm;
	if (ndom != 0) {
		ctx->nrails = ndom;
		ret = choose_rails(ctx, attr, names, ndom);
	} else {
		ret = choose_info(attr, &ctx->info);
	}
	if (ret != 0)
		goto err_info;
	decode_info(ctx);
	for (i = 1; i < ndom; i++) {
		const struct fi_info *fi = ctx->rails[i].info;
		size_t l = strlen(ctx->domain_name);

		ctx->tx_size = TERN_MIN(ctx->tx_size, fi->tx_attr->size);
		ctx->rx_size = TERN_MIN(ctx->rx_size, fi->rx_attr->size);
		snprintf(ctx->domain_name + l, sizeof(ctx->domain_name) - l,
			 ",%s", fi->domain_attr->name);
	}
	if (ctx->tx_size == 0 ||
	    ctx->rx_size <= (ctx->rx_cq_data ? TERN__SINKS : 0)) {
		tern_warn("provider %s reports queue sizes tx %zu rx %zu",
			  ctx->prov_name, ctx->tx_size, ctx->rx_size);
		ret = -TERN_ENOPROV;
		goto err_info;
	}
	ret = open_fabrics(ctx);
	if (ret != 0)
		goto err_info;
	if (attr->flags & TERN_CTX_PIN) {
		/* Before any domain exists: its memory follows the thread. */
		ret = tern__topo_pin_near(ctx->info->domain_attr->name,
					  ctx->pinned, sizeof(ctx->pinned));
		if (ret == 0)
			tern_info("pinned to %s", ctx->pinned);
		else
			tern_warn("could not pin the thread near %s: %s",
				  ctx->domain_name, tern_strerror(ret));
	}
	for (i = 0; i < ctx->nrails; i++) {
		ctx->rails[i].idx = i;
		ret = rail_open(ctx, &ctx->rails[i]);
		if (ret != 0)
			goto err_rails;
		if (ctx->addr_format != FI_ADDR_STR &&
		    ctx->rails[i].addrlen != ctx->rails[0].addrlen) {
			tern_warn("rail %u: %zu-byte address, rail 0 has %zu: "
				  "one card cannot hold both",
				  i, ctx->rails[i].addrlen,
				  ctx->rails[0].addrlen);
			ret = -EINVAL;
			i++;
			goto err_rails;
		}
	}
	ctx->atomic_fadd = atomic_ok(ctx, FI_SUM, FI_FETCH_ATOMIC);
	ctx->hmem = 1;
	for (unsigned int k = 0; k < ctx->nrails; k++) {
		if (!(rail_info(ctx, &ctx->rails[k])->caps & FI_HMEM))
			ctx->hmem = 0;
	}
	ctx->atomic_cswap = atomic_ok(ctx, FI_CSWAP, FI_COMPARE_ATOMIC);
	ret = scratch_open(ctx);
	if (ret != 0)
		goto err_rails;
	ret = tern__loop_init(ctx);
	if (ret != 0)
		goto err_scratch;
	if (12 + (size_t)ctx->nrails * tern__card_addrlen(ctx) >
	    TERN_CARD_MAX) {
		tern_warn("%u rails of %zu-byte addresses do not fit a card",
			  ctx->nrails, tern__card_addrlen(ctx));
		ret = -EINVAL;
		goto err_scratch;
	}
	tern_info("ctx: libfabric %s (built with %s), provider %s, fabric %s, "
		  "domain %s, %u rail(s), tx %zu rx %zu, mr_mode 0x%llx",
		  tern_fabric_version(), tern_fabric_build_version(),
		  ctx->prov_name, ctx->fabric_name, ctx->domain_name,
		  ctx->nrails, ctx->tx_size, ctx->rx_size,
		  (unsigned long long)ctx->mr_mode);
	*ctx_p = ctx;
	return 0;

err_scratch:
	tern__loop_fini(ctx);
	scratch_close(ctx, 0);
err_rails:
	while (i-- > 0)
		rail_close(&ctx->rails[i]);
err_info:
	close_fabrics(ctx);
err_imm:
	tern__imm_fini(&ctx->imm);
err_free:
	free(ctx);
	return ret;
}

/* Timers, deferred work and fd watchers of a closing ctx go quiet. */
static void loop_handles_stop(struct tern_ctx *ctx)
{
	while (ctx->timer_head != NULL)
		tern_timer_stop(ctx->timer_head);
	while (ctx->defer_head != NULL)
		tern_defer_cancel(ctx->defer_head);
	while (ctx->drun_head != NULL)
		tern_defer_cancel(ctx->drun_head);
}

/* Remove the peers the caller left open: their queued operations
 * complete -ECANCELED now. */
static void close_peers(struct tern_ctx *ctx)
{
	struct tern_peer *p;

	for (;;) {
		for (p = ctx->peers; p != NULL; p = p->next) {
			if (!p->removed && !p->removing)
				break;
		}
		if (p == NULL)
			return;
		tern_peer_remove(p); /* may free p and change the list */
	}
}

int tern_ctx_close(struct tern_ctx *ctx)
{
	if (ctx == NULL)
		return 0;
	if (ctx->close_pending)
		return -EALREADY;
	if (ctx->nmr != 0 || ctx->npeers != 0)
		tern_debug("ctx close: closing %lu memory region(s) and %lu "
			   "peer(s) left open",
			   ctx->nmr, ctx->npeers);
	ctx->closing = 1;
	loop_handles_stop(ctx);
	close_peers(ctx);
	if (ctx->depth == 0) {
		tern__ctx_finish_close(ctx);
		return 0;
	}
	/* Called from a callback: the call that ran it is still using the
	 * ctx. New posts are refused from now on; the outermost tern call
	 * finishes the close and returns -TERN_ECLOSED. */
	ctx->close_pending = 1;
	return 0;
}

void tern__ctx_finish_close(struct tern_ctx *ctx)
{
	int held;

	ctx->close_pending = 2;
	ctx->depth = 1; /* callbacks from here on cannot re-enter this */
	/* Every queued, posted or waiting request completes -ECANCELED:
	 * queued ones now, posted receives through fi_cancel, and whatever
	 * the provider still holds once its endpoints are closed. */
	tern__loop_drain(ctx);
	tern__stage_quiesce(ctx); /* no copy into a shadow about to go */
	/* Endpoints first: what the provider still holds is dropped with
	 * them, before the regions and addresses it refers to go (verbs;
	 * ofi_rxm crashes closing an endpoint whose queued sends name a
	 * region already closed). */
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		struct tern_rail *r = &ctx->rails[i];

		if (r->ep != NULL)
			fi_close(&r->ep->fid);
		r->ep = NULL;
	}
	/* Nothing completes from here on: what the provider held completes
	 * -ECANCELED now, then what staging held. The one place callbacks
	 * run outside progress: all of them, before any peer, region, the
	 * stage or a rail goes (a staged chunk's callback needs its stage;
	 * a request lets go of its peer and region as it finishes). */
	held = ctx->posted.len != 0;
	tern__loop_cancel_posted(ctx);
	tern__ready_run(ctx);
	tern__stage_close(ctx);
	tern__ready_run(ctx);
	scratch_close(ctx, held);
	close_peers(ctx); /* any a last callback added */
	/* Nothing is in flight on a region any more; a region a last
	 * callback left busy is closed anyway. */
	while (ctx->mrs != NULL)
		tern__mr_close(ctx->mrs);
	for (unsigned int i = 0; i < ctx->nrails; i++)
		rail_close(&ctx->rails[i]);
	tern__ready_run(ctx);	/* what a last callback cancelled */
	loop_handles_stop(ctx); /* anything a last callback started */
	tern__loop_fini(ctx);
	close_fabrics(ctx);
	tern__imm_fini(&ctx->imm);
	free(ctx);
}

void tern_ctx_set_busy_poll(struct tern_ctx *ctx, int on)
{
	ctx->busy_poll = on != 0;
}

int tern_ctx_query(const struct tern_ctx *ctx, struct tern_ctx_info *info)
{
	if (ctx == NULL || info == NULL)
		return -EINVAL;
	*info = (struct tern_ctx_info){
		.provider = ctx->prov_name,
		.fabric = ctx->fabric_name,
		.domain = ctx->domain_name,
		.rails = ctx->nrails,
		.mr_mode = ctx->mr_mode,
		.tx_size = ctx->tx_size,
		.rx_size = ctx->rx_size,
		.cq_data_size = ctx->cq_data_size,
		.inject_size = ctx->inject_size,
		.max_msg_size = ctx->max_msg_size,
		.mr_key_size = ctx->mr_key_size,
		.rx_cq_data = ctx->rx_cq_data,
		.link_speed = ctx->info->nic && ctx->info->nic->link_attr
				      ? ctx->info->nic->link_attr->speed
				      : 0,
		.atomic_fadd = ctx->atomic_fadd,
		.atomic_cswap = ctx->atomic_cswap,
		.wait_fd = ctx->can_wait,
		.pinned = ctx->pinned,
		.hmem = ctx->hmem,
		.stage_copies = ctx->stage_copies,
		.stage_bytes = ctx->stage_bytes,
	};
	return 0;
}

int tern__rail_cancel(struct tern_rail *rail, struct tern_req *req)
{
	ssize_t ret;

	if (rail->ep == NULL) /* closing: completes when the ctx goes */
		return -EBUSY;
	ret = fi_cancel(&rail->ep->fid, tern__rp(req)->fictx);
	return ret == 0 ? 0 : -TERN_EPROV;
}

int tern__rails_trywait(struct tern_ctx *ctx)
{
	struct fid *fids[TERN_MAX_RAILS];
	int ret = 0;

	/* fi_trywait() takes the CQs of one fabric at a time. */
	for (unsigned int f = 0; f < ctx->nfabrics && ret == 0; f++) {
		int n = 0;

		for (unsigned int i = 0; i < ctx->nrails; i++) {
			if (ctx->rails[i].fabric == ctx->fabrics[f])
				fids[n++] = &ctx->rails[i].cq->fid;
		}
		ret = fi_trywait(ctx->fabrics[f], fids, n);
	}
	if (ret == 0)
		return 0;
	if (ret == -FI_EAGAIN)
		return -EAGAIN;
	tern_warn("fi_trywait: %s; polling from now on", fi_strerror(-ret));
	return -TERN_EPROV;
}
