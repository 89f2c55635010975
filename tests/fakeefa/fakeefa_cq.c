// SPDX-License-Identifier: MIT
/*
 * fakeefa's completion queues: FI_CQ_FORMAT_DATA only, no wait objects, an
 * unbounded ring (it grows) that the data operations push to and the
 * caller polls; an error entry stops fi_cq_read until fi_cq_readerr
 * takes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeefa.h"

void fake_cq_push(struct fake_cq *cq, void *ctx, uint64_t flags, size_t len,
		  void *buf, uint64_t data, int err, fi_addr_t src)
{
	struct fake_cq_ent *e;

	if (!cq)
		return;
	if (cq->tail - cq->head == cq->cap) {
		size_t ncap = cq->cap ? cq->cap * 2 : 64, i;
		struct fake_cq_ent *n = calloc(ncap, sizeof(*n));

		for (i = 0; i < cq->tail - cq->head; i++)
			n[i] = cq->ents[(cq->head + i) % cq->cap];
		free(cq->ents);
		cq->ents = n;
		cq->tail -= cq->head;
		cq->head = 0;
		cq->cap = ncap;
	}
	e = &cq->ents[cq->tail++ % cq->cap];
	memset(e, 0, sizeof(*e));
	e->e.op_context = ctx;
	e->e.flags = flags;
	e->e.len = len;
	e->e.buf = buf;
	e->e.data = data;
	e->err = err;
	e->prov_errno = err;
	e->src = src;
}

static ssize_t cq_readfrom(struct fid_cq *c, void *buf, size_t count,
			   fi_addr_t *src)
{
	struct fake_cq *cq = (struct fake_cq *)c;
	struct fi_cq_data_entry *out = buf;
	size_t n = 0;

	while (n < count && cq->head != cq->tail) {
		struct fake_cq_ent *e = &cq->ents[cq->head % cq->cap];

		if (e->err)
			return n ? (ssize_t)n : -FI_EAVAIL;
		out[n] = e->e;
		if (src)
			src[n] = e->src;
		n++;
		cq->head++;
	}
	return n ? (ssize_t)n : -FI_EAGAIN;
}

static ssize_t cq_read(struct fid_cq *c, void *buf, size_t count)
{
	return cq_readfrom(c, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *c, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	struct fake_cq *cq = (struct fake_cq *)c;
	struct fake_cq_ent *e;

	(void)flags;
	if (cq->head == cq->tail)
		return -FI_EAGAIN;
	e = &cq->ents[cq->head % cq->cap];
	if (!e->err)
		return -FI_EAGAIN;
	memset(buf, 0, sizeof(*buf));
	buf->op_context = e->e.op_context;
	buf->flags = e->e.flags;
	buf->len = e->e.len;
	buf->err = e->err;
	buf->prov_errno = e->prov_errno;
	cq->head++;
	return 1;
}

static const char *cq_strerror(struct fid_cq *c, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	static char s[128];

	(void)c;
	(void)err_data;
	snprintf(buf ? buf : s, buf ? len : sizeof(s),
		 "fakeefa: %s (prov_errno %d)", fi_strerror(prov_errno),
		 prov_errno);
	return buf ? buf : s;
}

static int cq_close(struct fid *f)
{
	struct fake_cq *cq = (struct fake_cq *)f;

	free(cq->ents);
	free(cq);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
};
static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.strerror = cq_strerror,
};

int fake_cq_open(struct fid_domain *d, struct fi_cq_attr *attr,
		 struct fid_cq **out, void *ctx)
{
	struct fake_cq *cq;

	(void)d;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS; /* no FI_WAIT_FD while shm transfer is on */
	if (attr->format != FI_CQ_FORMAT_DATA &&
	    attr->format != FI_CQ_FORMAT_UNSPEC)
		return -FI_ENOSYS;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = ctx;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	*out = &cq->cq;
	return 0;
}

void fake_cq_init(void)
{
	fake_fill_nosys(&cq_fi_ops, sizeof(cq_fi_ops));
	fake_fill_nosys(&cq_ops, sizeof(cq_ops));
}
