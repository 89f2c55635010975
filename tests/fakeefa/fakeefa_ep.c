// SPDX-License-Identifier: MIT
/*
 * fakeefa's address vectors (FI_AV_TABLE of 32-byte FI_ADDR_EFA
 * addresses) and endpoints: their addresses (NIC GID, endpoint id in
 * bytes 16..17, this process in bytes 24..27), binding, options and
 * fi_cancel. Their data operations are in fakeefa_ops.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeefa.h"

struct fake_ep *fake_eps[FAKE_MAX_EP];

/* ---- address vector ---- */
static int av_insert(struct fid_av *a, const void *addr, size_t count,
		     fi_addr_t *fi_addr, uint64_t flags, void *ctx)
{
	struct fake_av *av = (struct fake_av *)a;
	size_t i;

	(void)flags;
	(void)ctx;
	for (i = 0; i < count; i++) {
		if (av->n == av->cap) {
			av->cap = av->cap ? av->cap * 2 : 16;
			av->addr = realloc(av->addr, av->cap * FAKE_ADDRLEN);
		}
		memcpy(av->addr[av->n],
		       (const uint8_t *)addr + i * FAKE_ADDRLEN, FAKE_ADDRLEN);
		if (fi_addr)
			fi_addr[i] = av->n;
		av->n++;
	}
	return (int)count;
}

static int av_remove(struct fid_av *a, fi_addr_t *fi_addr, size_t count,
		     uint64_t flags)
{
	struct fake_av *av = (struct fake_av *)a;
	size_t i;

	(void)flags;
	for (i = 0; i < count; i++)
		if (fi_addr[i] < av->n)
			memset(av->addr[fi_addr[i]], 0, FAKE_ADDRLEN);
	return 0;
}

static int av_lookup(struct fid_av *a, fi_addr_t fa, void *addr,
		     size_t *addrlen)
{
	struct fake_av *av = (struct fake_av *)a;

	if (fa >= av->n)
		return -FI_EINVAL;
	memcpy(addr, av->addr[fa],
	       *addrlen < FAKE_ADDRLEN ? *addrlen : FAKE_ADDRLEN);
	*addrlen = FAKE_ADDRLEN;
	return 0;
}

static const char *av_straddr(struct fid_av *a, const void *addr, char *buf,
			      size_t *len)
{
	const uint8_t *p = addr;

	(void)a;
	snprintf(buf, *len, "fi_addr_efa://[fe80::ef:%x]:%u:0", p[15],
		 (unsigned)(p[16] | p[17] << 8));
	*len = strlen(buf) + 1;
	return buf;
}

static int av_close(struct fid *f)
{
	struct fake_av *av = (struct fake_av *)f;

	free(av->addr);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
};
static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
};

int fake_av_open(struct fid_domain *d, struct fi_av_attr *attr,
		 struct fid_av **out, void *ctx)
{
	struct fake_av *av;

	(void)d;
	if (attr->type == FI_AV_MAP)
		return -FI_EINVAL;
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = ctx;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	*out = &av->av;
	return 0;
}

/* ---- endpoint ---- */
static int ep_getname(fid_t f, void *addr, size_t *len)
{
	struct fake_ep *ep = (struct fake_ep *)f;
	size_t n = *len < FAKE_ADDRLEN ? *len : FAKE_ADDRLEN;

	memcpy(addr, ep->addr, n);
	*len = FAKE_ADDRLEN;
	return n < FAKE_ADDRLEN ? -FI_ETOOSMALL : 0;
}

static struct fi_ops_cm cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.getname = ep_getname,
};

static ssize_t ep_cancel(fid_t f, void *ctx)
{
	struct fake_ep *ep = (struct fake_ep *)f;
	size_t i;

	if (ep->dom->direct) {
		/* fi_efa(7): no fi_cancel on efa-direct */
		fake_violate("fi_cancel on efa-direct");
		return -FI_ENOSYS;
	}
	for (i = 0; i < ep->nrq; i++) {
		if (ep->rq[i].ctx != ctx)
			continue;
		memmove(&ep->rq[i], &ep->rq[i + 1],
			(ep->nrq - i - 1) * sizeof(ep->rq[0]));
		ep->nrq--;
		fake_cq_push(ep->rx, ctx, FI_RECV, 0, NULL, 0, FI_ECANCELED, 0);
		return 0;
	}
	return -FI_ENOENT;
}

static int ep_getopt(fid_t f, int level, int name, void *val, size_t *len)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	if (level != FI_OPT_ENDPOINT || *len < sizeof(size_t))
		return -FI_ENOPROTOOPT;
	if (name == FAKE_OPT_MAX_MSG_SIZE)
		*(size_t *)val = ep->dom->direct ? FAKE_MTU : SIZE_MAX;
	else if (name == FAKE_OPT_MAX_RMA_SIZE)
		*(size_t *)val = ep->dom->direct ? fake_max_rdma : SIZE_MAX;
	else if (name == FAKE_OPT_INJECT_MSG_SIZE)
		*(size_t *)val = ep->dom->direct ? FAKE_INLINE : FAKE_INJECT;
	else if (name == FAKE_OPT_INJECT_RMA_SIZE)
		*(size_t *)val = ep->dom->direct ? 0 : FAKE_INJECT;
	else if (name == FI_OPT_MIN_MULTI_RECV)
		*(size_t *)val = 0;
	else
		return -FI_ENOPROTOOPT;
	*len = sizeof(size_t);
	return 0;
}

static int ep_setopt(fid_t f, int level, int name, const void *val, size_t len)
{
	(void)f;
	(void)val;
	(void)len;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	/* accepted and ignored: CUDA_API_PERMITTED, SHARED_MEMORY_PERMITTED,
	 * EFA_RNR_RETRY, ... */
	(void)name;
	return 0;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
};

static int ep_close(struct fid *f)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	fake_eps[ep->id] = NULL;
	free(ep->rq);
	free(ep);
	return 0;
}

static int ep_bind(struct fid *f, struct fid *b, uint64_t flags)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	if (b->fclass == FI_CLASS_AV) {
		ep->av = (struct fake_av *)b;
	} else if (b->fclass == FI_CLASS_CQ) {
		if (flags & FI_TRANSMIT)
			ep->tx = (struct fake_cq *)b;
		if (flags & FI_RECV)
			ep->rx = (struct fake_cq *)b;
	} else {
		return -FI_EINVAL;
	}
	return 0;
}

static int ep_control(struct fid *f, int cmd, void *arg)
{
	struct fake_ep *ep = (struct fake_ep *)f;

	(void)arg;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->av || !ep->tx || !ep->rx)
		return -FI_ENOCQ;
	ep->enabled = 1;
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
};

int fake_ep_open(struct fid_domain *d, struct fi_info *info,
		 struct fid_ep **out, void *ctx)
{
	struct fake_domain *dom = (struct fake_domain *)d;
	struct fake_ep *ep;
	uint32_t id;

	(void)info;
	for (id = 1; id < FAKE_MAX_EP && fake_eps[id]; id++)
		;
	if (id == FAKE_MAX_EP)
		return -FI_ENOSPC;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->id = id;
	ep->dom = dom;
	fake_nic_gid(dom->nic, ep->addr);
	ep->addr[16] = (uint8_t)id;
	ep->addr[17] = (uint8_t)(id >> 8);
	ep->addr[20] = 0x11; /* qkey */
	/* bytes 24..27: this process, so that a peer in another process
	 * (unreachable for an in-process fake) never aliases a local one */
	{
		uint32_t pid = (uint32_t)getpid();

		memcpy(ep->addr + 24, &pid, sizeof(pid));
	}
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = ctx;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &cm_ops;
	fake_ops_attach(ep);
	fake_eps[id] = ep;
	*out = &ep->ep;
	return 0;
}

void fake_ep_init(void)
{
	fake_fill_nosys(&av_fi_ops, sizeof(av_fi_ops));
	fake_fill_nosys(&av_ops, sizeof(av_ops));
	fake_fill_nosys(&cm_ops, sizeof(cm_ops));
	fake_fill_nosys(&ep_ops, sizeof(ep_ops));
	fake_fill_nosys(&ep_fi_ops, sizeof(ep_fi_ops));
}
