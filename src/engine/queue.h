/* SPDX-License-Identifier: MIT */
/* Intrusive FIFO of requests, linked through tern__rp(req)->next/prev. */
#ifndef TERN_QUEUE_H
#define TERN_QUEUE_H

#include <stddef.h>

#include <tern/req.h>

/* tern__rp() and struct tern__req_priv: engine.h, which includes this. */

struct tern__reqq {
	struct tern_req *head, *tail;
	size_t len;
};

static inline void tern__reqq_push(struct tern__reqq *q, struct tern_req *r)
{
	tern__rp(r)->next = NULL;
	tern__rp(r)->prev = q->tail;
	if (q->tail != NULL)
		tern__rp(q->tail)->next = r;
	else
		q->head = r;
	q->tail = r;
	q->len++;
}

static inline void tern__reqq_remove(struct tern__reqq *q, struct tern_req *r)
{
	if (tern__rp(r)->prev != NULL)
		tern__rp(tern__rp(r)->prev)->next = tern__rp(r)->next;
	else
		q->head = tern__rp(r)->next;
	if (tern__rp(r)->next != NULL)
		tern__rp(tern__rp(r)->next)->prev = tern__rp(r)->prev;
	else
		q->tail = tern__rp(r)->prev;
	tern__rp(r)->next = tern__rp(r)->prev = NULL;
	q->len--;
}

static inline struct tern_req *tern__reqq_pop(struct tern__reqq *q)
{
	struct tern_req *r = q->head;

	if (r != NULL)
		tern__reqq_remove(q, r);
	return r;
}

#endif /* TERN_QUEUE_H */
