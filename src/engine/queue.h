/* SPDX-License-Identifier: MIT */
/* Intrusive FIFO of requests, linked through req->_priv.next/prev. */
#ifndef TERN_QUEUE_H
#define TERN_QUEUE_H

#include <stddef.h>

#include <tern/req.h>

/* The engine's view of a request's private area. */
#define tern__rp(req) (&(req)->_priv)

struct tern__reqq {
	struct tern_req *head, *tail;
	size_t len;
};

static inline void tern__reqq_push(struct tern__reqq *q, struct tern_req *r)
{
	r->_priv.next = NULL;
	r->_priv.prev = q->tail;
	if (q->tail != NULL)
		q->tail->_priv.next = r;
	else
		q->head = r;
	q->tail = r;
	q->len++;
}

static inline void tern__reqq_remove(struct tern__reqq *q, struct tern_req *r)
{
	if (r->_priv.prev != NULL)
		r->_priv.prev->_priv.next = r->_priv.next;
	else
		q->head = r->_priv.next;
	if (r->_priv.next != NULL)
		r->_priv.next->_priv.prev = r->_priv.prev;
	else
		q->tail = r->_priv.prev;
	r->_priv.next = r->_priv.prev = NULL;
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
