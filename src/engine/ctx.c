/* SPDX-License-Identifier: MIT */
/* Opening and closing a ctx and its rails (their provider objects are
 * src/prov/'s). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "local.h"
#include "stage.h"
#include "../core/attr.h"
#include "../topo/topo.h"
#include "../wire/card.h"

/* tern_ctx_attr's fields (its field_mask): every default is 0 or NULL,
 * whose meaning ctx_config() and ctx_provider() give. */
static const struct tern_ctx_attr ctx_attr_default;
#define F(bit, m) \
	TERN__ATTR_FIELD(struct tern_ctx_attr, TERN_CTX_ATTR_FIELD_##bit, m)
static const struct tern__attr_field ctx_attr_fields[] = {
	F(PROVIDER, provider),	 F(NODE, node),
	F(DOMAIN, domain),	 F(RAILS, rails),
	F(LOG_LEVEL, log_level), F(POST_BATCH, post_batch),
	F(FLAGS, flags),	 F(STRIPE_CHUNK, stripe_chunk),
	F(DOMAINS, domains),	 F(FABRIC, fabric),
};
#undef F
/* field_mask 0: 0.1's ten fields, all of them. */
static const struct tern__attr_kind ctx_attr_kind = TERN__ATTR_KIND(
	tern_ctx_attr, ctx_attr_default, ctx_attr_fields,
	TERN_CTX_ATTR_FIELDS_ALL);

int tern_ctx_attr_defaults(struct tern_ctx_attr *attr, uint64_t fields)
{
	return tern__attr_defaults(&ctx_attr_kind, attr, fields);
}

static int want_hmem(const struct tern_ctx_attr *attr)
{
	return (attr->flags & TERN_CTX_HMEM) != 0 ||
	       tern__env_long("TERN_HMEM", 0, 0, 1) != 0;
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
			tern__warn("rails '%s': gpu=N takes a GPU number (see "
				   "tern topo)",
				   spec);
			return -EINVAL;
		}
		n = tern__topo_gpu_nics(tern__env_str("TERN_TOPO_XML"),
					(unsigned int)gpu, names,
					TERN_MAX_RAILS, why, sizeof(why));
		if (n < 0) {
			tern__warn("rails '%s': %s", spec, why);
			return -EINVAL;
		}
		*n_p = (unsigned int)n;
		return 0;
	}
	for (p = spec; *p != '\0';) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= TERN_TOPO_NAME_LEN ||
		    *n_p == TERN_MAX_RAILS) {
			tern__warn("rails '%s': expected up to %d domain names "
				   "of 1..%d characters, comma-separated",
				   spec, TERN_MAX_RAILS,
				   TERN_TOPO_NAME_LEN - 1);
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

/* The rail's pointer array for src/prov/: rails[i]->prov. */
static void prov_rails(struct tern_ctx *ctx, struct tern__prov_rail **pr)
{
	for (unsigned int i = 0; i < TERN_MAX_RAILS; i++)
		pr[i] = &ctx->rails[i].prov;
}

static void rail_close(struct tern_rail *r)
{
	tern__prov_rail_close(&r->prov);
	free(r->slots);
	free(r->free_slots);
	free(r->sync_ring);
	free(r->src_of);
	r->src_of = NULL;
	r->nsrc_of = 0;
	r->sync_ring = NULL;
	r->sync_n = 0;
	r->slots = NULL;
	r->slots_span = 0;
	r->free_slots = NULL;
}

static int post_sinks(struct tern_rail *r)
{
	for (unsigned int i = 0; i < TERN__SINKS; i++) {
		ssize_t ret = tern__prov_recv_sink(&r->prov, r->sink_ctx[i]);
		char msg[64];
		int prov_errno;

		if (ret != 0) {
			tern__prov_post_error(ret, msg, sizeof(msg),
					      &prov_errno);
			tern__warn("rail %u: posting receive for remote CQ "
				   "data: %s",
				   r->idx, msg + 6 /* after "post: " */);
			return -TERN_EPROV;
		}
	}
	return 0;
}

static int rail_open(struct tern_ctx *ctx, struct tern_rail *r)
{
	size_t len = sizeof(r->addr);
	unsigned int nbounce = 0, nctrl = 0;
	int ret;

	r->ctx = ctx;
	ret = tern__prov_rail_open(&ctx->prov, &r->prov, r->idx, ctx->busy_poll,
				   r->addr, &len, &r->wait_fd);
	if (ret != 0)
		return ret;
	r->addrlen = len;
	r->tx_credits = ctx->caps.tx_size;
	r->rx_credits = ctx->caps.rx_size;
	/* Untagged messaging: rail 0's receive buffers have slots past the
	 * tx credits' (bounce.c). */
	if (!ctx->caps.tagged && r->idx == 0)
		nbounce = tern__bounce_count(ctx);
	/* Tagged, its control messages' (ctrl.c). */
	if (r->idx < tern__ctrl_rails(ctx))
		nctrl = tern__ctrl_slots(ctx);
	r->slots = calloc(ctx->caps.tx_size + nbounce + nctrl,
			  sizeof(*r->slots));
	r->free_slots = calloc(ctx->caps.tx_size, sizeof(*r->free_slots));
	if (r->slots == NULL || r->free_slots == NULL) {
		ret = -ENOMEM;
		goto err_close;
	}
	r->slots_span = (ctx->caps.tx_size + nbounce + nctrl) *
			sizeof(*r->slots);
	if (tern__prov_sync_rma(&r->prov)) {
		/* One entry per credit (post.h, reap.c: tern__sync_push()). */
		size_t cap = 1;

		while (cap < ctx->caps.tx_size)
			cap <<= 1;
		r->sync_ring = calloc(cap, sizeof(*r->sync_ring));
		if (r->sync_ring == NULL) {
			ret = -ENOMEM;
			goto err_close;
		}
		r->sync_mask = (uint32_t)(cap - 1);
		r->sync_head = 0;
	}
	for (r->nfree = 0; r->nfree < ctx->caps.tx_size; r->nfree++)
		r->free_slots[r->nfree] = (uint32_t)(ctx->caps.tx_size - 1 -
						     r->nfree);
	/* Untagged, rail 0's message buffers absorb remote CQ data too. */
	if (ctx->caps.rx_cq_data && nbounce == 0) {
		ret = post_sinks(r);
		if (ret != 0)
			goto err_close;
		r->rx_credits -= TERN__SINKS;
	}
	r->rx_credits -= nbounce;
	if (nctrl != 0)
		r->rx_credits -= TERN__CTRL_RECVS;
	return 0;

err_close:
	rail_close(r);
	return ret;
}

/* One registered scratch area for every rail's slots (atomic operands and
 * results); not counted among the user's regions. */
static int scratch_open(struct tern_ctx *ctx)
{
	size_t words = 3 * ctx->caps.tx_size, bytes;
	int ret;

	bytes = words * ctx->nrails * sizeof(uint64_t);
	if (posix_memalign((void **)&ctx->scratch, 128, bytes) != 0)
		return -ENOMEM;
	memset(ctx->scratch, 0, bytes);
	ret = tern__mr_reg_own(ctx, ctx->scratch, bytes, TERN_ACCESS_LOCAL,
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

/* The largest message and RMA every rail takes. */
static void rail_limits(struct tern_ctx *ctx, struct tern__prov_rail *const *pr)
{
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		uint64_t msg, rma;

		tern__prov_rail_limits(&ctx->prov, pr[i], &msg, &rma);
		if (i == 0 || msg < ctx->max_msg_size)
			ctx->max_msg_size = msg;
		if (i == 0 || rma < ctx->max_rma_size)
			ctx->max_rma_size = rma;
	}
}

/*
 * The largest one registration (mr.c, "regions larger than one
 * registration"). libfabric reports no per-registration limit (its
 * mr_cnt counts registrations): EFA and verbs refuse one past the
 * device's, and a single registration of 512 GiB or more fails on
 * today's NICs however much memory is free, so there tern cuts at
 * 64 GiB, as KV-cache engines do by hand. TERN_MR_CHUNK sets it (any
 * provider; rounded down to a power of two, at least 4 KiB).
 */
#define TERN__MR_CHUNK_NIC_SHIFT 36 /* 64 GiB */

static void mr_chunk(struct tern_ctx *ctx)
{
	const char *v = tern__env_str("TERN_MR_CHUNK");
	uint64_t sz = 0;

	ctx->mr_chunk_shift = 0;
	if (strcmp(ctx->caps.prov_name, "efa") == 0 ||
	    strncmp(ctx->caps.prov_name, "verbs", 5) == 0)
		ctx->mr_chunk_shift = TERN__MR_CHUNK_NIC_SHIFT;
	if (v == NULL)
		return;
	if (tern_parse_size(v, &sz) != 0 || sz < 4096) {
		tern__warn("ignoring TERN_MR_CHUNK=%s (expected a size of at "
			   "least 4K, e.g. 64G)",
			   v);
		return;
	}
	ctx->mr_chunk_shift = (uint8_t)(63 - __builtin_clzll(sz));
	if (ctx->mr_chunk_shift > TERN__DESC_SHIFT_MAX)
		ctx->mr_chunk_shift = TERN__DESC_SHIFT_MAX;
	ctx->mr_chunk_user = 1;
	if ((sz & (sz - 1)) != 0)
		tern__info("TERN_MR_CHUNK=%s: registering in chunks of %llu "
			   "bytes (a power of two)",
			   v, 1ULL << ctx->mr_chunk_shift);
}

/* tern's own limits from the provider's caps (ctx->caps). */
static void derive_limits(struct tern_ctx *ctx)
{
	/* Failover (several rails) sees every write complete: an inject
	 * lost on a rail going down would go unseen, never repeated. */
	ctx->inject_max = tern__env_long("TERN_INJECT", TERN__INJECT_DEFAULT, 0,
					 2) != 0 &&
					  !ctx->failover
				  ? ctx->caps.inject_size
				  : 0;
	ctx->max_msg_size = ctx->caps.max_msg_size;
}

/* The attr and the environment: what the caller asked for. */
static int ctx_config(struct tern_ctx *ctx, const struct tern_ctx_attr *attr)
{
	if ((attr->flags &
	     ~(TERN_CTX_BUSY_POLL | TERN_CTX_PIN | TERN_CTX_HMEM)) != 0 ||
	    attr->rails > TERN_MAX_RAILS || attr->log_level > TERN_LOG_DEBUG ||
	    attr->post_batch > TERN__POST_BATCH_MAX ||
	    (attr->stripe_chunk != 0 && attr->stripe_chunk < 4096))
		return -EINVAL;
	if (attr->log_level != 0)
		tern_log_set_level(attr->log_level);
	/* No fds yet: a failure before tern__loop_init() closes none. */
	ctx->epfd = ctx->wakefd = -1;
	ctx->mr_cache = (int)tern__env_long("TERN_MR_CACHE", 1, 0, 1);
	ctx->nrails = attr->rails ? attr->rails : 1;
	ctx->post_batch = attr->post_batch ? attr->post_batch
					   : (unsigned int)tern__env_long(
						     "TERN_POST_BATCH",
						     TERN__POST_BATCH_DEFAULT,
						     1, TERN__POST_BATCH_MAX);
	ctx->stripe_chunk = attr->stripe_chunk
				    ? attr->stripe_chunk
				    : (uint64_t)tern__env_long(
					      "TERN_STRIPE_CHUNK",
					      (long)TERN_STRIPE_CHUNK_DEFAULT,
					      4096, 1L << 40);
	/* Implicit operations in flight at once (docs/api.md). */
	ctx->nbi_max = (unsigned long)tern__env_long(
		"TERN_NBI_MAX", TERN__NBI_MAX_DEFAULT, 1, 1L << 24);
	ctx->busy_poll = (attr->flags & TERN_CTX_BUSY_POLL) ||
			 tern__env_long("TERN_BUSY_POLL", 0, 0, 1);
	ctx->next_key = 1;
	return 0;
}

/* The provider and its domains: one per rail, chosen and described. */
static int ctx_provider(struct tern_ctx *ctx, const struct tern_ctx_attr *attr,
			struct tern__prov_rail **pr)
{
	char names[TERN_MAX_RAILS][TERN_TOPO_NAME_LEN];
	const char *name_p[TERN_MAX_RAILS];
	struct tern__prov_want want;
	unsigned int ndom = 0;
	int ret;

	prov_rails(ctx, pr); /* first: closing them is then always safe */
	ret = domain_list(attr, names, &ndom);
	if (ret == 0 && ndom != 0 && attr->rails > 1 && attr->rails != ndom) {
		tern__warn("%u rails asked, %u domains listed", attr->rails,
			   ndom);
		ret = -EINVAL;
	}
	if (ret != 0)
		return ret;
	if (ndom != 0)
		ctx->nrails = ndom;
	for (unsigned int k = 0; k < ndom; k++)
		name_p[k] = names[k];
	want = (struct tern__prov_want){
		.provider = attr->provider ? attr->provider
					   : tern__env_str("TERN_PROVIDER"),
		.node = attr->node ? attr->node : tern__env_str("TERN_NODE"),
		.domain = attr->domain,
		.domains = name_p,
		.ndomains = ndom,
		.hmem = want_hmem(attr),
		.fabric = attr->fabric ? attr->fabric
				       : tern__env_str("TERN_FABRIC"),
	};
	ret = tern__prov_choose(&ctx->prov, &want, pr);
	if (ret != 0)
		return ret;
	/* A failed rail routed around (failover.c), with several. */
	ctx->failover = ctx->nrails > 1 &&
			tern__env_long("TERN_FAILOVER", 1, 0, 1) != 0;
	ctx->cooldown_ms = (uint32_t)tern__env_long(
		"TERN_RAIL_COOLDOWN_MS", TERN__COOLDOWN_DEFAULT_MS, 1, 600000);
	ctx->stall_ms = (uint32_t)tern__env_long(
		"TERN_RAIL_STALL_MS", TERN__STALL_DEFAULT_MS, 0, 600000);
	tern__prov_caps(&ctx->prov, pr, ctx->nrails, &ctx->caps);
	/* Writes with immediate stamped, to go again after a rail failure
	 * (dedup.h), where the remote CQ data has room beside the
	 * immediate: shm, tcp (8 bytes); efa and verbs (4) fail as before. */
	ctx->stamp = ctx->failover && ctx->caps.cq_data_size >= 8;
	derive_limits(ctx);
	mr_chunk(ctx);
	if (ctx->caps.tx_size == 0 ||
	    ctx->caps.rx_size <=
		    (size_t)(ctx->caps.rx_cq_data ? TERN__SINKS : 0) +
			    (size_t)(ctx->caps.tagged ? TERN__CTRL_RECVS : 0) ||
	    (!ctx->caps.tagged && tern__bounce_count(ctx) == 0)) {
		tern__warn("provider %s reports queue sizes tx %zu rx %zu",
			   ctx->caps.prov_name, ctx->caps.tx_size,
			   ctx->caps.rx_size);
		return -TERN_ENOPROV;
	}
	return 0;
}

/* Open every rail's endpoint (the thread pinned near rail 0's NIC first,
 * where asked). @n_p: how many opened, for the caller to close on error. */
static int ctx_rails(struct tern_ctx *ctx, const struct tern_ctx_attr *attr,
		     struct tern__prov_rail *const *pr, unsigned int *n_p)
{
	int ret;

	*n_p = 0;
	ret = tern__prov_open(&ctx->prov, pr, ctx->nrails);
	if (ret != 0)
		return ret;
	if (attr->flags & TERN_CTX_PIN) {
		/* Before any domain exists: its memory follows the thread. */
		ret = tern__topo_pin_near(ctx->caps.domain0, ctx->pinned,
					  sizeof(ctx->pinned));
		if (ret == 0)
			tern__info("pinned to %s", ctx->pinned);
		else
			tern__warn("could not pin the thread near %s: %s",
				   ctx->caps.domain_name, tern_strerror(ret));
	}
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		ctx->rails[i].idx = i;
		ret = rail_open(ctx, &ctx->rails[i]);
		if (ret != 0)
			return ret;
		*n_p = i + 1;
		if (!ctx->caps.addr_str &&
		    ctx->rails[i].addrlen != ctx->rails[0].addrlen) {
			tern__warn("rail %u: %zu-byte address, rail 0 has %zu: "
				   "one card cannot hold both",
				   i, ctx->rails[i].addrlen,
				   ctx->rails[0].addrlen);
			return -EINVAL;
		}
	}
	rail_limits(ctx, pr);
	ctx->atomic_fadd = tern__prov_atomic_ok(pr, &ctx->prov, ctx->nrails, 1);
	ctx->atomic_cswap = tern__prov_atomic_ok(pr, &ctx->prov, ctx->nrails,
						 0);
	return 0;
}

/* The stamps of writes with immediate (dedup.h): where the CQ names no
 * source of writes (tcp), each carries a tag of this ctx's card, by
 * which its target finds who sent it. */
static void stamp_layout(struct tern_ctx *ctx)
{
	uint8_t card[TERN_CARD_MAX];
	ssize_t n = 0;

	if (ctx->stamp && !ctx->imm_source)
		n = tern_ctx_card(ctx, card, sizeof(card));
	tern__stamp_layout(ctx, n > 0 ? tern__stamp_tag(card, (size_t)n) : 0);
}

/* What runs on the rails: atomics' scratch, message buffers, control
 * messages, the event loop, the same-host path. On error the caller
 * closes them (each close takes one never opened). */
static int ctx_services(struct tern_ctx *ctx)
{
	int ret;

	ret = scratch_open(ctx);
	if (ret != 0)
		return ret;
	if (!ctx->caps.tagged) {
		ret = tern__bounce_open(ctx);
		if (ret != 0)
			return ret;
	}
	ret = tern__ctrl_open(ctx);
	if (ret != 0)
		return ret;
	/* Arrivals tell their source where every rail's CQ does. */
	ctx->imm_source = ctx->msg_source = 1;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		ctx->imm_source &= tern__prov_source_rma(&ctx->rails[i].prov);
		ctx->msg_source &= tern__prov_source(&ctx->rails[i].prov);
	}
	ctx->next_src_id = 1;
	tern__stall_init(ctx);
	ret = tern__loop_init(ctx);
	if (ret != 0)
		return ret;
	ret = tern__local_open(ctx); /* needs the loop's wake eventfd */
	if (ret != 0)
		return ret;
	if (TERN_CARD_HDR + (size_t)ctx->nrails * tern__card_addrlen(ctx) >
	    TERN_CARD_MAX) {
		tern__warn("%u rails of %zu-byte addresses do not fit a card",
			   ctx->nrails, tern__card_addrlen(ctx));
		return -EINVAL;
	}
	stamp_layout(ctx);
	return 0;
}

int tern_ctx_open(const struct tern_ctx_attr *uattr, struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr_buf, *attr = &attr_buf;
	struct tern__prov_rail *pr[TERN_MAX_RAILS];
	struct tern_ctx *ctx;
	unsigned int nopen = 0;
	int ret;

	if (ctx_p == NULL)
		return -EINVAL;
	/* Only the fields the caller marked; the defaults for the rest. */
	ret = tern__attr_resolve(&ctx_attr_kind, "tern_ctx_open", uattr, attr);
	if (ret != 0)
		return ret;
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL)
		return -ENOMEM;
	ret = ctx_config(ctx, attr);
	if (ret != 0)
		goto err_free;
	ret = tern__imm_init(&ctx->imm);
	if (ret != 0)
		goto err_free;
	ret = ctx_provider(ctx, attr, pr);
	if (ret != 0)
		goto err_info;
	ret = ctx_rails(ctx, attr, pr, &nopen);
	if (ret != 0)
		goto err_rails;
	ret = ctx_services(ctx);
	if (ret != 0)
		goto err_services;
	tern__info("ctx: libfabric %s API %s (built with %s), provider %s, "
		   "fabric %s, domain %s, %u rail(s), tx %zu rx %zu, mr_mode "
		   "0x%llx",
		   tern_fabric_version(), tern_fabric_api_version(),
		   tern_fabric_build_version(), ctx->caps.prov_name,
		   ctx->caps.fabric_name, ctx->caps.domain_name, ctx->nrails,
		   ctx->caps.tx_size, ctx->caps.rx_size,
		   (unsigned long long)ctx->caps.mr_mode);
	*ctx_p = ctx;
	return 0;

err_services:
	tern__local_close(ctx);
	tern__nbi_fini(ctx);
	tern__loop_fini(ctx);
	tern__ctrl_close(ctx, 1);
	tern__bounce_close(ctx, 1); /* receives are still posted */
	scratch_close(ctx, 0);
err_rails:
	while (nopen-- > 0)
		rail_close(&ctx->rails[nopen]);
err_info:
	tern__prov_close(&ctx->prov, pr, TERN_MAX_RAILS);
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
		tern__debug("ctx close: closing %lu memory region(s) and %lu "
			    "peer(s) left open",
			    ctx->nmr, ctx->npeers);
	ctx->closing = 1;
	tern__task_close(ctx); /* submits refused from now on */
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
	struct tern__prov_rail *pr[TERN_MAX_RAILS];
	int held;

	ctx->close_pending = 2;
	ctx->depth = 1; /* callbacks from here on cannot re-enter this */
	/* Tasks other threads submitted: called back -ECANCELED first, as
	 * the close started before they could run. */
	tern__task_cancel_all(ctx);
	/* Every queued, posted or waiting request completes -ECANCELED:
	 * queued ones now, posted receives through fi_cancel, and whatever
	 * the provider still holds once its endpoints are closed. */
	tern__loop_drain(ctx);
	tern__stage_quiesce(ctx); /* no copy into a shadow about to go */
	/* Endpoints first: what the provider still holds is dropped with
	 * them, before the regions and addresses it refers to go (verbs;
	 * ofi_rxm crashes closing an endpoint whose queued sends name a
	 * region already closed). */
	for (unsigned int i = 0; i < ctx->nrails; i++)
		tern__prov_rail_close_ep(&ctx->rails[i].prov);
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
	tern__bounce_close(ctx, 0); /* the endpoints are closed */
	tern__ctrl_close(ctx, 0);
	scratch_close(ctx, held);
	close_peers(ctx); /* any a last callback added */
	tern__peer_release_due(ctx);
	/* Nothing is in flight on a region any more; a region a last
	 * callback left busy is closed anyway. */
	while (ctx->mrs != NULL)
		tern__mr_close(ctx->mrs);
	for (unsigned int i = 0; i < ctx->nrails; i++)
		rail_close(&ctx->rails[i]);
	tern__ready_run(ctx); /* what a last callback cancelled */
	tern__peer_release_due(ctx);
	loop_handles_stop(ctx); /* anything a last callback started */
	tern__local_close(ctx);
	tern__nbi_fini(ctx);
	tern__loop_fini(ctx);
	prov_rails(ctx, pr);
	tern__prov_close(&ctx->prov, pr, TERN_MAX_RAILS);
	tern__imm_fini(&ctx->imm);
	tern__redo_fini(ctx);
	free(ctx->stamps_of);
	free(ctx->tag_src);
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
		.provider = ctx->caps.prov_name,
		.fabric = ctx->caps.fabric_name,
		.domain = ctx->caps.domain_name,
		.rails = ctx->nrails,
		.mr_mode = ctx->caps.mr_mode,
		.tx_size = ctx->caps.tx_size,
		.rx_size = ctx->caps.rx_size,
		.cq_data_size = ctx->caps.cq_data_size,
		.inject_size = ctx->caps.inject_size,
		.max_msg_size = ctx->max_msg_size,
		.max_rma_size = ctx->max_rma_size,
		.tagged = ctx->caps.tagged,
		.mr_key_size = ctx->caps.mr_key_size,
		.rx_cq_data = ctx->caps.rx_cq_data,
		.link_speed = ctx->caps.link_speed,
		.atomic_fadd = ctx->atomic_fadd,
		.atomic_cswap = ctx->atomic_cswap,
		.wait_fd = ctx->can_wait,
		.pinned = ctx->pinned,
		.hmem = ctx->caps.hmem,
		.stage_copies = ctx->stage_copies,
		.stage_bytes = ctx->stage_bytes,
	};
	return 0;
}

int tern__rail_cancel(struct tern_rail *rail, struct tern_req *req)
{
	/* -EBUSY while closing: it completes when the ctx goes. */
	return tern__prov_cancel(&rail->prov, tern__rp(req)->fictx);
}

int tern__rails_trywait(struct tern_ctx *ctx)
{
	struct tern__prov_rail *pr[TERN_MAX_RAILS];

	prov_rails(ctx, pr);
	return tern__prov_trywait(&ctx->prov, pr, ctx->nrails);
}
