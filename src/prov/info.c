/* SPDX-License-Identifier: MIT */
/* What the providers on this host offer (`tern info`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <tern/info.h>

#include "../core/core.h"
#include "prov.h"

static void mr_mode_str(uint64_t m, char *buf, size_t len)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} bits[] = {
		{ FI_MR_LOCAL, "LOCAL" },
		{ FI_MR_RAW, "RAW" },
		{ FI_MR_VIRT_ADDR, "VIRT_ADDR" },
		{ FI_MR_ALLOCATED, "ALLOCATED" },
		{ FI_MR_PROV_KEY, "PROV_KEY" },
		{ FI_MR_MMU_NOTIFY, "MMU_NOTIFY" },
		{ FI_MR_RMA_EVENT, "RMA_EVENT" },
		{ FI_MR_ENDPOINT, "ENDPOINT" },
		{ FI_MR_HMEM, "HMEM" },
	};
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < TERN_ARRAY_SIZE(bits); i++) {
		if ((m & bits[i].bit) && off < len)
			off += (size_t)snprintf(buf + off, len - off, "%s%s",
						off ? "|" : "", bits[i].name);
	}
	if (off == 0)
		snprintf(buf, len, "none");
}

static void fill_one(struct tern_prov_info *p, const struct fi_info *fi)
{
	const char *why = tern__info_unusable(fi);
	const char *s;

	memset(p, 0, sizeof(*p));
	snprintf(p->provider, sizeof(p->provider), "%s",
		 fi->fabric_attr->prov_name);
	snprintf(p->fabric, sizeof(p->fabric), "%s",
		 fi->fabric_attr->name ? fi->fabric_attr->name : "?");
	snprintf(p->domain, sizeof(p->domain), "%s",
		 fi->domain_attr->name ? fi->domain_attr->name : "?");
	s = fi_tostr(&fi->ep_attr->type, FI_TYPE_EP_TYPE);
	snprintf(p->ep_type, sizeof(p->ep_type), "%s", s ? s : "?");
	s = fi_tostr(&fi->addr_format, FI_TYPE_ADDR_FORMAT);
	snprintf(p->addr_format, sizeof(p->addr_format), "%s", s ? s : "?");
	snprintf(p->progress, sizeof(p->progress), "%s",
		 fi->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto"
		 : fi->domain_attr->data_progress == FI_PROGRESS_MANUAL
			 ? "manual"
			 : "unspec");
	snprintf(p->link_state, sizeof(p->link_state), "unknown");
	if (fi->nic != NULL && fi->nic->link_attr != NULL) {
		p->link_speed = fi->nic->link_attr->speed;
		if (fi->nic->link_attr->state == FI_LINK_UP)
			snprintf(p->link_state, sizeof(p->link_state), "up");
		else if (fi->nic->link_attr->state == FI_LINK_DOWN)
			snprintf(p->link_state, sizeof(p->link_state), "down");
	}
	p->tx_size = fi->tx_attr->size;
	p->rx_size = fi->rx_attr->size;
	p->max_msg_size = fi->ep_attr->max_msg_size;
	p->inject_size = fi->tx_attr->inject_size;
	p->cq_data_size = fi->domain_attr->cq_data_size;
	p->mr_key_size = fi->domain_attr->mr_key_size;
	p->mr_mode = fi->domain_attr->mr_mode;
	mr_mode_str(p->mr_mode, p->mr_mode_str, sizeof(p->mr_mode_str));
	p->rma = (fi->caps & FI_RMA) != 0;
	p->atomic = (fi->caps & FI_ATOMIC) != 0;
	p->remote_cq_data = fi->domain_attr->cq_data_size >= 4;
	p->hmem = (fi->caps & FI_HMEM) != 0;
	p->tagged = (fi->caps & FI_TAGGED) != 0;
	p->rx_cq_data = (fi->mode & FI_RX_CQ_DATA) != 0;
	p->usable = why == NULL;
	snprintf(p->why_not, sizeof(p->why_not), "%s", why ? why : "");
}

/* Does a completion queue of this domain offer a wait fd? (Only opening
 * one tells: shm and efa in libfabric 1.17 refuse FI_WAIT_FD.) */
static int probe_wait_fd(struct fi_info *fi)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_DATA,
				   .wait_obj = FI_WAIT_FD,
				   .size = 16 };
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	int ok = 0, fd = -1;

	if (fi_fabric(fi->fabric_attr, &fabric, NULL) != 0)
		return 0;
	if (fi_domain(fabric, fi, &domain, NULL) == 0) {
		if (fi_cq_open(domain, &attr, &cq, NULL) == 0) {
			ok = fi_control(&cq->fid, FI_GETWAIT, &fd) == 0 &&
			     fd >= 0;
			fi_close(&cq->fid);
		}
		fi_close(&domain->fid);
	}
	fi_close(&fabric->fid);
	return ok;
}

/* fi_getinfo over RDM endpoints of provider @name (as libfabric names it)
 * asking for @caps, accepting every mode. */
static int query(const char *name, uint64_t caps, struct fi_info **info_p)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (hints == NULL)
		return -ENOMEM;
	hints->caps = caps;
	hints->ep_attr->type = FI_EP_RDM;
	/* Ask for everything a provider may demand, so none hides. */
	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_RAW |
				      FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_MMU_NOTIFY |
				      FI_MR_RMA_EVENT | FI_MR_ENDPOINT |
				      FI_MR_HMEM;
	if (name != NULL) {
		hints->fabric_attr->prov_name = strdup(name);
		if (hints->fabric_attr->prov_name == NULL) {
			fi_freeinfo(hints);
			return -ENOMEM;
		}
	}
	*info_p = NULL;
	ret = fi_getinfo(tern__prov_api(), NULL, NULL, 0, hints, info_p);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA)
		return 0;
	if (ret != 0) {
		tern__warn("fi_getinfo: %s", fi_strerror(-ret));
		return -TERN_EPROV;
	}
	return 0;
}

/*
 * The libfabric provider names a user's @provider stands for, as tern
 * opens it (rail.c): NULL (every provider) or its canonical name, and for
 * "tcp" on libfabric 2.x both tcp's own RDM endpoint, which tern opens
 * for "tcp", and tcp;ofi_rxm, which it opens for atomics. Returns how
 * many of @names it set.
 */
static size_t query_names(const char *provider, const char *names[2])
{
	if (provider != NULL && strcmp(provider, "tcp") == 0 &&
	    FI_MAJOR(fi_version()) >= 2) {
		names[0] = "tcp";
		names[1] = "tcp;ofi_rxm";
		return 2;
	}
	names[0] = provider != NULL ? tern__provider_canonical(provider) : NULL;
	return 1;
}

static ssize_t find(const struct tern_prov_info *list, size_t n,
		    const struct fi_info *fi)
{
	for (size_t j = 0; j < n; j++) {
		if (strcmp(list[j].provider, fi->fabric_attr->prov_name) == 0 &&
		    strcmp(list[j].fabric, fi->fabric_attr->name) == 0 &&
		    strcmp(list[j].domain, fi->domain_attr->name) == 0)
			return (ssize_t)j;
	}
	return -1;
}

int tern_info_list(const char *provider, struct tern_prov_info **list_p,
		   size_t *count_p)
{
	struct fi_info *info[2] = { NULL, NULL }, *fi;
	struct tern_prov_info *list;
	const char *names[2];
	size_t n = 0, nq;
	int ret = 0;

	if (list_p == NULL || count_p == NULL)
		return -EINVAL;
	nq = query_names(provider, names);
	for (size_t q = 0; q < nq && ret == 0; q++)
		ret = query(names[q], 0, &info[q]);
	if (ret != 0)
		goto free_info;
	for (size_t q = 0; q < nq; q++) {
		for (fi = info[q]; fi != NULL; fi = fi->next)
			n++;
	}
	list = calloc(n ? n : 1, sizeof(*list));
	if (list == NULL) {
		ret = -ENOMEM;
		goto free_info;
	}
	n = 0;
	for (size_t q = 0; q < nq; q++) {
		for (fi = info[q]; fi != NULL; fi = fi->next) {
			/* Skip duplicates (same provider, fabric and
			 * domain). */
			if (fi->fabric_attr->name != NULL &&
			    fi->domain_attr->name != NULL &&
			    find(list, n, fi) >= 0)
				continue;
			fill_one(&list[n], fi);
			if (list[n].usable)
				list[n].wait_fd = probe_wait_fd(fi);
			n++;
		}
	}
	/* Default listings leave out capabilities nobody asked for, such as
	 * atomics on tcp;ofi_rxm or device memory: ask again for those. */
	for (int k = 0; k < 2; k++) {
		for (size_t q = 0; q < nq; q++) {
			struct fi_info *more;

			if (query(names[q], k == 0 ? FI_ATOMIC : FI_HMEM,
				  &more) != 0)
				continue;
			for (fi = more; fi != NULL; fi = fi->next) {
				ssize_t j = -1;

				if (fi->fabric_attr->name != NULL &&
				    fi->domain_attr->name != NULL)
					j = find(list, n, fi);
				if (j >= 0 && k == 0)
					list[j].atomic = 1;
				else if (j >= 0)
					list[j].hmem = 1;
			}
			fi_freeinfo(more);
		}
	}
	*list_p = list;
	*count_p = n;
free_info:
	for (size_t q = 0; q < 2; q++)
		fi_freeinfo(info[q]);
	return ret;
}

void tern_info_free(struct tern_prov_info *list)
{
	free(list);
}
