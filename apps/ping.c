/* SPDX-License-Identifier: MIT */
/*
 * tern ping: latency ping-pong in the manner of ibv_rc_pingpong and
 * fi_rdm_pingpong, with send/recv or with writes carrying immediates. Both
 * sides run the same schedule (sizes x (warmup + iters)), agreed in the
 * HELLO; the client times each round trip and reports half of it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "apps/app.h"
#include "core/core.h"
#include "wire/wire.h"

#define PING_TIMEOUT_MS 10000
#define PING_STOP_MS	200 /* how often a wait looks at the stop flag */
#define PING_IMM	1

/* params: u32 mode, iters, warmup, nsizes, sizes[nsizes] */
ssize_t app_ping_params_encode(const struct app_ping_params *p, void *buf,
			       size_t cap)
{
	struct tern__wr w;

	if (p->nsizes > APP_PING_MAX_SIZES)
		return -EINVAL;
	/* Nothing is written unless all of it fits. */
	if (cap < 16 + 4 * (size_t)p->nsizes)
		return -ENOSPC;
	tern__wr_init(&w, buf, cap);
	tern__wr_u32(&w, p->mode);
	tern__wr_u32(&w, p->iters);
	tern__wr_u32(&w, p->warmup);
	tern__wr_u32(&w, p->nsizes);
	for (uint32_t i = 0; i < p->nsizes; i++)
		tern__wr_u32(&w, p->sizes[i]);
	return tern__wr_end(&w);
}

int app_ping_params_decode(const void *buf, size_t len,
			   struct app_ping_params *p, char *why, size_t whylen)
{
	struct app_ping_params x = { 0 };
	struct tern__rd r;

	tern__rd_init(&r, buf, len);
	x.mode = tern__rd_u32(&r);
	x.iters = tern__rd_u32(&r);
	x.warmup = tern__rd_u32(&r);
	x.nsizes = tern__rd_u32(&r);
	if (!tern__rd_ok(&r)) {
		snprintf(why, whylen, "ping parameters truncated");
		return -TERN_EPROTO;
	}
	if (x.nsizes == 0 || x.nsizes > APP_PING_MAX_SIZES ||
	    len != 16 + 4 * (size_t)x.nsizes) {
		snprintf(why, whylen, "%u sizes in %zu bytes (1..%d sizes)",
			 x.nsizes, len, APP_PING_MAX_SIZES);
		return -TERN_EPROTO;
	}
	if (x.mode != APP_PING_SEND && x.mode != APP_PING_WRITE) {
		snprintf(why, whylen, "unknown ping mode %u", x.mode);
		return -TERN_EREFUSED;
	}
	if (x.iters == 0 || x.iters > APP_PING_MAX_ITERS ||
	    x.warmup > APP_PING_MAX_ITERS) {
		snprintf(why, whylen,
			 "iterations %u / warm-up %u outside "
			 "1..%u",
			 x.iters, x.warmup, APP_PING_MAX_ITERS);
		return -TERN_EREFUSED;
	}
	for (uint32_t i = 0; i < x.nsizes; i++) {
		x.sizes[i] = tern__rd_u32(&r);
		if (x.sizes[i] == 0 || x.sizes[i] > APP_PING_MAX_SIZE) {
			snprintf(why, whylen, "size %u outside 1..%u",
				 x.sizes[i], APP_PING_MAX_SIZE);
			return -TERN_EREFUSED;
		}
	}
	*p = x;
	return 0;
}

static uint32_t max_size(const struct app_ping_params *p)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < p->nsizes; i++)
		m = TERN_MAX(m, p->sizes[i]);
	return m;
}

/* Everything one side of a ping session needs. */
struct side {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	struct tern_mr *mr;
	uint8_t *buf;		     /* [receive | send], each half bytes */
	enum tern_mem_kind buf_kind; /* how it was allocated */
	size_t half;
	struct tern_mr_desc remote;
	struct tern_req sreq, rreq, ireq;
	volatile sig_atomic_t *stop; /* Ctrl-C */
};

/* Wait up to PING_TIMEOUT_MS for @req, in slices that look at the stop
 * flag: Ctrl-C ends a wait on a silent peer at once (-EINTR). A request
 * already done costs no slice, no clock read. */
static int wait_ok(struct side *s, struct tern_req *req)
{
	int ret, waited = 0;

	for (;;) {
		ret = tern_wait(s->ctx, req, PING_STOP_MS);
		if (ret != -ETIMEDOUT)
			break;
		waited += PING_STOP_MS;
		if (*s->stop)
			return -EINTR;
		if (waited >= PING_TIMEOUT_MS)
			return ret;
	}
	return ret != 0 ? ret : req->status;
}

/* The requests were initialised once in side_open(); a completed one is
 * posted again as it is (include/tern/req.h), so a round trip pays no
 * re-initialisation. */
static int post_recv(struct side *s, uint32_t size)
{
	return tern_recv(s->ctx, s->mr, s->buf, size, &s->rreq);
}

static int post_expect(struct side *s)
{
	return tern_imm_expect(s->ctx, PING_IMM, 1, &s->ireq);
}

/* Send (or write with immediate) @size bytes to the other side. */
static int fire(struct side *s, uint32_t mode, uint32_t size)
{
	if (mode == APP_PING_SEND)
		return tern_send(s->peer, s->mr, s->buf + s->half, size,
				 &s->sreq);
	return tern_write_imm(s->peer, s->mr, s->buf + s->half, size,
			      &s->remote, 0, PING_IMM, &s->sreq);
}

/* Arm for the next arrival: a receive, or an immediate expectation. */
static int arm(struct side *s, uint32_t mode, uint32_t size)
{
	return mode == APP_PING_SEND ? post_recv(s, size) : post_expect(s);
}

static int arrived(struct side *s, uint32_t mode, uint32_t size)
{
	struct tern_req *r = mode == APP_PING_SEND ? &s->rreq : &s->ireq;
	int ret = wait_ok(s, r);

	if (ret == 0 && mode == APP_PING_SEND && r->len != size)
		ret = -TERN_EPROTO;
	return ret;
}

/* The server's half: wait, answer; armed for the next before answering.
 * The schedule is sizes x (warmup + iters) steps, the first armed by the
 * caller before its ACK. */
static int serve_session(struct side *s, const struct app_ping_params *p)
{
	uint64_t n = (uint64_t)p->warmup + p->iters, total = n * p->nsizes;
	int ret = 0;

	for (uint64_t j = 0; j < total && ret == 0; j++) {
		uint32_t size = p->sizes[j / n];

		ret = arrived(s, p->mode, size);
		if (ret == 0 && j + 1 < total)
			ret = arm(s, p->mode, p->sizes[(j + 1) / n]);
		if (ret == 0)
			ret = fire(s, p->mode, size);
		if (ret == 0)
			ret = wait_ok(s, &s->sreq);
	}
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const uint64_t *s, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return (double)s[TERN_MIN(i, n - 1)] / 2e3; /* half RTT, in us */
}

/* @res from the first @n round trips of @rtt (sorted here), @ns after
 * the first of them started. */
static void summarize(struct app_ping_result *res, uint32_t size, uint64_t *rtt,
		      uint32_t n, uint64_t ns)
{
	*res = (struct app_ping_result){
		.size = size,
		.iters = n,
		.rate = ns ? (double)n * 1e9 / (double)ns : 0,
	};
	qsort(rtt, n, sizeof(*rtt), cmp_u64);
	res->min_us = pct(rtt, n, 0);
	res->p50_us = pct(rtt, n, 0.5);
	res->p99_us = pct(rtt, n, 0.99);
	res->p999_us = pct(rtt, n, 0.999);
	res->max_us = pct(rtt, n, 1);
	res->mbps = (double)size * 8 / res->p50_us;
}

static int client_session(struct side *s, const struct app_ping_params *p,
			  struct app_ping_result *res)
{
	uint64_t *rtt = malloc(sizeof(*rtt) * p->iters);
	int ret = 0;

	if (rtt == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->nsizes && ret == 0; k++) {
		uint32_t size = p->sizes[k], n = p->warmup + p->iters, got = 0;
		uint64_t start = 0;

		for (uint32_t i = 0; i < n && ret == 0; i++) {
			uint64_t t0;

			/* Ctrl-C: what was measured so far is reported. */
			if (tern_unlikely(*s->stop)) {
				ret = -EINTR;
				break;
			}

			if (i == p->warmup)
				start = tern__now_ns();
			ret = arm(s, p->mode, size);
			/* The receive is with the provider before the clock
			 * starts, as in ibv_rc_pingpong and fi_rdm_pingpong;
			 * no CQ read here (tern_progress would make one): on
			 * tcp that is a poll and a signal reset raw does not
			 * pay between a pong and the next ping. */
			if (ret == 0)
				ret = tern_flush(s->ctx) < 0 ? -TERN_EPROV : 0;
			t0 = tern__now_ns();
			if (ret == 0)
				ret = fire(s, p->mode, size);
			if (ret == 0)
				ret = arrived(s, p->mode, size);
			if (ret == 0 && i >= p->warmup)
				rtt[got++] = tern__now_ns() - t0;
			if (ret == 0)
				ret = wait_ok(s, &s->sreq);
		}
		/* All the timed round trips, or those recorded before a
		 * failure or Ctrl-C. */
		if (got > 0)
			summarize(&res[k], size, rtt, got,
				  tern__now_ns() - start);
	}
	free(rtt);
	return ret;
}

/* On the heap: if the provider never finishes an operation, the side is
 * kept (leaked) rather than freed under it. */
static int side_open(struct side **sp, struct tern_ctx *ctx, uint32_t maxsz,
		     volatile sig_atomic_t *stop)
{
	static volatile sig_atomic_t never;
	struct side *s = calloc(1, sizeof(*s));
	int ret;

	*sp = s;
	if (s == NULL)
		return -ENOMEM;
	s->ctx = ctx;
	s->stop = stop != NULL ? stop : &never;
	tern_req_init(&s->sreq, NULL, NULL);
	tern_req_init(&s->rreq, NULL, NULL);
	tern_req_init(&s->ireq, NULL, NULL);
	/* Nothing in flight yet (side_close looks). */
	s->sreq.done = s->rreq.done = s->ireq.done = 1;
	s->half = maxsz;
	/* Shared memory: a same-host peer writes it with memcpy (tern's
	 * local path); over a fabric it is host memory like any other. */
	s->buf_kind = TERN_MEM_SHARED;
	if (tern_mem_alloc(TERN_MEM_SHARED, 0, 2 * (size_t)maxsz,
			   (void **)&s->buf) != 0) {
		s->buf_kind = TERN_MEM_HOST;
		if (tern_mem_alloc(TERN_MEM_HOST, 0, 2 * (size_t)maxsz,
				   (void **)&s->buf) != 0)
			return -ENOMEM;
	}
	memset(s->buf, 0x5a, 2 * (size_t)maxsz);
	ret = tern_mr_reg(ctx, s->buf, 2 * (size_t)maxsz,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE, &s->mr);
	if (ret != 0) {
		tern_mem_free(s->buf_kind, s->buf);
		s->buf = NULL;
	}
	return ret;
}

static void side_close(struct side *s)
{
	if (s == NULL)
		return;
	/* Nothing may stay queued on a buffer we free. */
	if (!s->rreq.done && tern_req_cancel(s->ctx, &s->rreq) >= 0)
		tern_wait(s->ctx, &s->rreq, 2000);
	if (!s->ireq.done && tern_req_cancel(s->ctx, &s->ireq) >= 0)
		tern_wait(s->ctx, &s->ireq, 0);
	if (!s->sreq.done)
		tern_wait(s->ctx, &s->sreq, 2000);
	tern_peer_remove(s->peer);
	/* A send it cancelled completes from the next progress pass. */
	if (!s->sreq.done)
		tern_wait(s->ctx, &s->sreq, 0);
	if (!s->rreq.done || !s->sreq.done) {
		/* The provider still holds them: keep their memory. */
		tern__warn("ping: operations still in flight; keeping their "
			   "buffers");
		return;
	}
	tern_mr_close(s->mr);
	tern_mem_free(s->buf_kind, s->buf);
	free(s);
}

/* Reply ERROR to the sender of a HELLO we refuse (its card is in it). */
static void refuse(struct app_msgbox *mb, const struct app_hello *h,
		   const char *why)
{
	struct app_hello e = {
		.kind = APP_HELLO_ERROR,
		.params = (const uint8_t *)why,
		.params_len = strlen(why),
	};
	struct tern_peer *peer;
	ssize_t n;

	/* Refused: reached through the provider only, nothing of it
	 * touched on this host (docs/local.md, "Trust"). */
	if (tern_peer_add_flags(mb->ctx, h->card, h->card_len,
				TERN_PEER_FABRIC_ONLY, &peer) != 0)
		return;
	n = app_hello_encode(mb->sbuf, APP_MSGBOX_MAX, &e);
	if (n > 0)
		app_msgbox_send(mb, peer, (size_t)n, 2000);
	tern_peer_remove(peer);
}

int app_ping_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		    FILE *log)
{
	struct app_msgbox mb;
	int ret = app_msgbox_open(ctx, &mb);

	if (ret != 0)
		return ret;
	while (!*stop) {
		struct app_ping_params p;
		struct app_hello h, ack = { .kind = APP_HELLO_ACK };
		struct side *s = NULL;
		char why[128];
		ssize_t n = app_msgbox_recv(&mb, 200);
		uint64_t t0;

		if (n == -ETIMEDOUT)
			continue;
		if (n < 0 || app_hello_decode(mb.rbuf, (size_t)n, &h) != 0) {
			fprintf(log, "ping: dropped a malformed message\n");
			continue;
		}
		if (h.kind != APP_HELLO_PING || !h.has_desc) {
			refuse(&mb, &h, "not a ping HELLO");
			continue;
		}
		ret = app_ping_params_decode(h.params, h.params_len, &p, why,
					     sizeof(why));
		if (ret != 0) {
			fprintf(log, "ping: refused: %s\n", why);
			refuse(&mb, &h, why);
			continue;
		}
		ret = side_open(&s, ctx, max_size(&p), stop);
		if (ret == 0)
			ret = tern_peer_add(ctx, h.card, h.card_len, &s->peer);
		if (ret != 0) {
			fprintf(log, "ping: cannot serve: %s\n",
				tern_strerror(ret));
			side_close(s);
			continue;
		}
		s->remote = h.desc;
		ack.has_desc = 1;
		tern_mr_desc(s->mr, &ack.desc);
		n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &ack);
		fprintf(log,
			"ping: client: %s mode, %u size(s), %u+%u "
			"iterations\n",
			p.mode == APP_PING_SEND ? "send" : "write", p.nsizes,
			p.warmup, p.iters);
		fflush(log);
		t0 = tern__now_ns();
		/* Armed before the ACK goes: the first ping finds us ready. */
		tern_ctx_set_busy_poll(ctx, 1);
		ret = arm(s, p.mode, p.sizes[0]);
		if (ret == 0)
			ret = app_msgbox_send(&mb, s->peer, (size_t)n, 5000);
		if (ret == 0)
			ret = serve_session(s, &p);
		tern_ctx_set_busy_poll(ctx, 0);
		fprintf(log, "ping: session %s after %.1f ms%s%s\n",
			ret == 0	? "done"
			: ret == -EINTR ? "interrupted"
					: "failed",
			(double)(tern__now_ns() - t0) / 1e6,
			ret == 0 || ret == -EINTR ? "" : ": ",
			ret == 0 || ret == -EINTR ? "" : tern_strerror(ret));
		fflush(log);
		side_close(s);
	}
	app_msgbox_close(&mb);
	return 0;
}

int app_ping_client(struct tern_ctx *ctx, const void *card, size_t card_len,
		    const struct app_ping_params *p,
		    volatile sig_atomic_t *stop,
		    struct app_ping_result *results, char *why, size_t whylen)
{
	uint8_t mycard[TERN_CARD_MAX], params[APP_HELLO_PARAMS];
	struct app_hello h = { .kind = APP_HELLO_PING }, ack;
	struct app_msgbox mb;
	struct side *s = NULL;
	ssize_t n;
	int ret;

	memset(results, 0, sizeof(*results) * p->nsizes);
	ret = app_msgbox_open(ctx, &mb);
	if (ret != 0)
		return ret;
	ret = side_open(&s, ctx, max_size(p), stop);
	if (ret == 0)
		ret = tern_peer_add(ctx, card, card_len, &s->peer);
	if (ret != 0) {
		snprintf(why, whylen, "setup: %s", tern_strerror(ret));
		goto out;
	}
	h.card = mycard;
	h.card_len = (size_t)tern_ctx_card(ctx, mycard, sizeof(mycard));
	h.has_desc = 1;
	tern_mr_desc(s->mr, &h.desc);
	h.params = params;
	h.params_len = (size_t)app_ping_params_encode(p, params,
						      sizeof(params));
	n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &h);
	ret = n < 0 ? (int)n : app_msgbox_send(&mb, s->peer, (size_t)n, 5000);
	if (ret == 0) {
		n = app_msgbox_recv(&mb, 10000);
		ret = n < 0 ? (int)n : 0;
	}
	if (ret != 0) {
		snprintf(why, whylen, "no answer from the ping server: %s",
			 tern_strerror(ret));
		goto out;
	}
	ret = app_hello_decode(mb.rbuf, (size_t)n, &ack);
	if (ret == 0 && ack.kind == APP_HELLO_ERROR) {
		snprintf(why, whylen, "server refused: %.*s",
			 (int)TERN_MIN(ack.params_len, 200), ack.params);
		ret = -TERN_EREFUSED;
		goto out;
	}
	if (ret != 0 || ack.kind != APP_HELLO_ACK || !ack.has_desc) {
		snprintf(why, whylen, "unexpected answer from the server");
		ret = -TERN_EPROTO;
		goto out;
	}
	s->remote = ack.desc;
	ret = client_session(s, p, results);
	if (ret == -EINTR)
		snprintf(why, whylen, "interrupted");
	else if (ret != 0)
		snprintf(why, whylen, "ping failed: %s", tern_strerror(ret));
out:
	side_close(s);
	app_msgbox_close(&mb);
	return ret;
}
