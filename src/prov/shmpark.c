/* SPDX-License-Identifier: MIT */
/*
 * shm endpoints that other endpoints of this process still address, kept
 * open ("parked") until the last such address is removed.
 *
 * libfabric 2.x's shm (from 2.0.0, libfabric commit 331b42562 "prov/shm:
 * Add unmap_region function", and still so in 2.6 and on main) points an
 * AV entry naming an endpoint of the same process at that endpoint's own
 * region instead of mapping it again (smr_map_to_region() finds the name
 * in ep_name_list). When that endpoint closes, its region is unmapped
 * while the other AV still points at it; removing the entry later
 * (fi_av_remove(), or closing that AV) reads and writes through the stale
 * pointer in smr_unmap_region() / smr_unmap_from_endpoint(): SIGSEGV.
 * Two tern ctxs over shm in one process that are each other's peers hit
 * it when the first closes; 1.17 maps each peer on its own and never did.
 *
 * So, on shm with a 2.x runtime (fi_version()), tern keeps a process-wide
 * count of the AV entries naming each of its shm endpoints. Closing a
 * rail first removes its own AV's entries (every endpoint they name is
 * still open: the invariant), then closes the endpoint if nothing names
 * it any more, or else parks the endpoint with its AV, CQ and domain; the
 * removal of the last entry naming it closes them. A fabric whose close
 * a parked domain refused (-FI_EBUSY) is closed after that domain.
 * Nothing here is on the data path: AV inserts and removals, rail opens
 * and closes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "../core/core.h"
#include "prov.h"

struct park_ent { /* an AV entry of a registered rail */
	struct park_ent *next;
	struct fid_av *av;
	fi_addr_t fa;
	char *name; /* the address it names */
};

struct park_ep { /* an open shm endpoint of this process */
	struct park_ep *next;
	struct fid_av *av; /* its rail's AV: identifies the rail */
	char *name;	   /* its own address */
	int parked;	   /* closed by tern, kept open for others */
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_domain *domain;
};

struct park_fabric {
	struct park_fabric *next;
	struct fid_fabric *fabric;
};

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static struct park_ent *ents;
static struct park_ep *eps;
static struct park_fabric *fabrics;

int tern__prov_shm_park_wanted(const struct fi_info *fi)
{
	if (fi == NULL || fi->fabric_attr == NULL ||
	    fi->fabric_attr->prov_name == NULL ||
	    strcmp(fi->fabric_attr->prov_name, "shm") != 0 ||
	    fi->addr_format != FI_ADDR_STR)
		return 0;
	return FI_MAJOR(fi_version()) >= 2;
}

static unsigned long refs(const char *name)
{
	unsigned long n = 0;

	for (struct park_ent *e = ents; e != NULL; e = e->next)
		n += strcmp(e->name, name) == 0;
	return n;
}

static void close_parked(struct park_ep *p)
{
	fi_close(&p->ep->fid);
	fi_close(&p->av->fid);
	fi_close(&p->cq->fid);
	fi_close(&p->domain->fid);
	/* Fabrics whose close a parked domain refused. */
	for (struct park_fabric **f = &fabrics; *f != NULL;) {
		struct park_fabric *d = *f;

		if (fi_close(&d->fabric->fid) == -FI_EBUSY) {
			f = &d->next;
			continue;
		}
		*f = d->next;
		free(d);
	}
}

/* Close the parked endpoints nothing names any more (lock held). */
static void reap(void)
{
	for (struct park_ep **pp = &eps; *pp != NULL;) {
		struct park_ep *p = *pp;

		if (!p->parked || refs(p->name) != 0) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		tern__debug(
			"shm: closing endpoint %s, kept open until no other "
			"endpoint of this process addressed it",
			p->name);
		close_parked(p);
		free(p->name);
		free(p);
	}
}

int tern__prov_shm_park_open(struct tern__prov_rail *r, const void *addr,
			     size_t addrlen)
{
	struct park_ep *p = calloc(1, sizeof(*p));

	if (p == NULL || (p->name = strndup(addr, addrlen)) == NULL) {
		free(p);
		return -ENOMEM;
	}
	p->av = r->av;
	pthread_mutex_lock(&park_lock);
	p->next = eps;
	eps = p;
	pthread_mutex_unlock(&park_lock);
	r->shm_park = 1;
	return 0;
}

void tern__prov_shm_park_insert(struct tern__prov_rail *r, const void *addr,
				uint64_t fiaddr)
{
	struct park_ent *e = calloc(1, sizeof(*e));

	if (e == NULL || (e->name = strdup(addr)) == NULL) {
		/* Untracked, the entry stays in the AV until it closes:
		 * the crash this avoids may then happen. */
		tern__warn("shm: out of memory tracking an AV entry");
		free(e);
		return;
	}
	e->av = r->av;
	e->fa = fiaddr;
	pthread_mutex_lock(&park_lock);
	e->next = ents;
	ents = e;
	pthread_mutex_unlock(&park_lock);
}

/* Remove @e from the list and its AV (lock held). */
static void drop(struct park_ent **ep)
{
	struct park_ent *e = *ep;

	*ep = e->next;
	fi_av_remove(e->av, &e->fa, 1, 0);
	free(e->name);
	free(e);
}

void tern__prov_shm_park_remove(struct tern__prov_rail *r, uint64_t fiaddr)
{
	if (r->shm_park != 1)
		return; /* its entries went when it closed */
	pthread_mutex_lock(&park_lock);
	for (struct park_ent **ep = &ents; *ep != NULL; ep = &(*ep)->next) {
		if ((*ep)->av == r->av && (*ep)->fa == fiaddr) {
			drop(ep);
			break;
		}
	}
	reap();
	pthread_mutex_unlock(&park_lock);
}

void tern__prov_shm_park_close(struct tern__prov_rail *r)
{
	struct park_ep **pp, *p;

	pthread_mutex_lock(&park_lock);
	r->shm_park = 2;
	/* Our own AV's entries first, while what they name is open. */
	for (struct park_ent **ep = &ents; *ep != NULL;) {
		if ((*ep)->av == r->av)
			drop(ep);
		else
			ep = &(*ep)->next;
	}
	for (pp = &eps; *pp != NULL && (*pp)->av != r->av; pp = &(*pp)->next)
		;
	p = *pp;
	if (p != NULL && refs(p->name) != 0) {
		tern__debug(
			"shm: endpoint %s stays open while another endpoint "
			"of this process addresses it (libfabric 2.x shm)",
			p->name);
		p->parked = 1;
		p->ep = r->ep;
		p->cq = r->cq;
		p->domain = r->domain;
		r->ep = NULL;
		r->av = NULL;
		r->cq = NULL;
		r->domain = NULL;
	} else if (p != NULL) {
		*pp = p->next;
		free(p->name);
		free(p);
	}
	reap(); /* endpoints only our entries named */
	pthread_mutex_unlock(&park_lock);
}

int tern__prov_shm_park_fabric(struct fid_fabric *fabric)
{
	struct park_fabric *f = malloc(sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	f->fabric = fabric;
	pthread_mutex_lock(&park_lock);
	f->next = fabrics;
	fabrics = f;
	pthread_mutex_unlock(&park_lock);
	return 0;
}
