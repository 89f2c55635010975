/* SPDX-License-Identifier: MIT */
/* tern bench's responder: owns the target memory, keeps receives posted
 * for sends, answers HELLO / CHECK / BYE (bench_serve()). */
#define _GNU_SOURCE /* cpu_set_t, in bench/common.h */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/app.h"
#include "core/core.h"
#include "wire/wire.h"
#include "engine_int.h"
#include "common.h"

struct rx_slot {
	struct tern_req req;
	uint8_t *buf;
};

struct responder {
	struct tern_ctx *ctx;
	struct app_msgbox *mb;
	struct tern_peer *peer;
	struct bench_params p;
	struct bench_mem mem; /* of the region */
	uint8_t *region;      /* a device pointer for CUDA */
	size_t region_len;
	struct tern_mr *mr;
	uint8_t *pattern; /* MT(seed), for checking sends and CHECKs */
	uint8_t *chk;	  /* host copy of GPU bytes being checked */
	struct rx_slot *rx;
	size_t nrx;
	uint64_t received, bad, expected;
	int bye;
	long pause; /* $TERN_BENCH_TARGET_PAUSE */
};

static int post_rx(struct responder *r, struct rx_slot *s)
{
	tern_req_init(&s->req, NULL, NULL);
	return tern_recv(r->ctx, r->mr, s->buf, r->p.max_size, &s->req);
}

/* Whether the @len bytes at @buf, in the region, are the pattern's
 * first. */
static int region_matches(struct responder *r, const uint8_t *buf, size_t len)
{
	if (r->mem.kind == TERN_MEM_HOST)
		return memcmp(buf, r->pattern, len) == 0;
	return tern_mem_copy(r->chk, buf, len) == 0 &&
	       memcmp(r->chk, r->pattern, len) == 0;
}

/* Sends: count and check every message; the BYE arrives among them. */
static int drain_rx(struct responder *r)
{
	int ret = 0;

	for (size_t i = 0; i < r->nrx && ret == 0; i++) {
		struct rx_slot *s = &r->rx[i];
		const uint8_t *msg = s->buf;
		struct app_hello h;

		if (!s->req.done)
			continue;
		if (s->req.status != 0)
			return s->req.status;
		if (s->req.flags & TERN_REQ_F_IMM) {
			/* In a GPU region, the BYE must come to the host to
			 * be read. */
			if (r->mem.kind != TERN_MEM_HOST &&
			    s->req.imm == BENCH_BYE_IMM) {
				msg = r->chk;
				if (tern_mem_copy(r->chk, s->buf, s->req.len))
					msg = NULL;
			}
			if (s->req.imm == BENCH_BYE_IMM && msg != NULL &&
			    app_hello_decode(msg, s->req.len, &h) == 0 &&
			    h.kind == APP_HELLO_BYE && h.params_len == 8) {
				r->expected = tern__wire_get_u64(h.params);
				r->bye = 1;
			}
		} else {
			r->received++;
			if (r->p.verify &&
			    !region_matches(r, s->buf, s->req.len))
				r->bad++;
		}
		ret = post_rx(r, s);
	}
	return ret;
}

static void responder_free(struct responder *r)
{
	for (size_t i = 0; r->rx != NULL && i < r->nrx; i++) {
		if (!r->rx[i].req.done &&
		    tern_req_cancel(r->ctx, &r->rx[i].req) >= 0)
			tern_wait(r->ctx, &r->rx[i].req, 2000);
	}
	free(r->rx);
	tern_mr_close(r->mr);
	tern_mem_free(bench_mem_alloc_kind(&r->mem), r->region);
	free(r->pattern);
	free(r->chk);
	tern_peer_remove(r->peer);
}

static int responder_setup(struct responder *r, char *why, size_t whylen)
{
	size_t len = r->p.max_size;
	uint64_t access = TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_READ;
	int cuda = r->mem.kind == TERN_MEM_CUDA;
	char name[BENCH_MEM_NAME];
	void *region = NULL;
	int ret;

	switch (r->p.op) {
	case BENCH_ATOMIC:
		len = 4096;
		access = TERN_ACCESS_REMOTE_ATOMIC;
		break;
	case BENCH_SEND:
		/* Receives of the largest size, as many as memory allows. */
		r->nrx = (size_t)TERN_MIN(2ULL * r->p.window,
					  RECV_MEM_MAX / r->p.max_size);
		r->nrx = TERN_MAX(r->nrx, (size_t)2);
		len = r->nrx * r->p.max_size;
		access = TERN_ACCESS_LOCAL;
		break;
	default:
		break;
	}
	bench_mem_name(&r->mem, name, sizeof(name));
	ret = bench_mem_alloc(bench_mem_alloc_kind(&r->mem), r->mem.device, len,
			      &region);
	if (ret != 0) {
		snprintf(why, whylen, "allocating %zu bytes of %s memory: %s",
			 len, name, tern_strerror(ret));
		return ret;
	}
	r->region = region;
	r->region_len = len;
	/* Zeros, so that bytes a session left behind never pass a check;
	 * reads find the pattern. */
	ret = bench_mem_fill(r->mem.kind, r->region, len, r->p.op == BENCH_READ,
			     r->p.seed);
	if (ret != 0) {
		snprintf(why, whylen, "filling %s memory: %s", name,
			 tern_strerror(ret));
		return ret;
	}
	ret = tern_mr_regattr(
		r->ctx,
		&(struct tern_mr_attr){ .buf = r->region,
					.len = len,
					.access = access,
					.kind = r->mem.kind,
					.device = cuda ? r->mem.device : -1 },
		&r->mr);
	if (ret == -TERN_ENOTSUP && r->p.op == BENCH_ATOMIC && cuda)
		snprintf(why, whylen, ATOMIC_CUDA_WHY);
	else if (ret != 0)
		snprintf(why, whylen, "registering %zu bytes of %s memory: %s",
			 len, name, tern_strerror(ret));
	if (ret != 0)
		return ret;
	/* Reads come from what the region publishes: a staged region's
	 * shadow, filled from the GPU before the first read. */
	if (r->p.op == BENCH_READ && cuda) {
		ret = bench_mr_sync_wait(r->ctx, r->mr, len, TERN_MR_SYNC_OUT);
		if (ret != 0) {
			snprintf(why, whylen, "tern_mr_sync(SYNC_OUT): %s",
				 tern_strerror(ret));
			return ret;
		}
	}
	if (r->p.op == BENCH_SEND ||
	    (r->p.verify && cuda &&
	     (r->p.op == BENCH_WRITE || r->p.op == BENCH_WRITEDATA))) {
		r->pattern = bench_alloc_aligned(r->p.max_size);
		if (r->pattern == NULL)
			return -ENOMEM;
		bench_mt_fill(r->pattern, r->p.max_size, r->p.seed);
		if (cuda) {
			r->chk = bench_alloc_aligned(r->p.max_size);
			if (r->chk == NULL)
				return -ENOMEM;
		}
	}
	if (r->p.op != BENCH_SEND)
		return 0;
	r->rx = calloc(r->nrx, sizeof(*r->rx));
	if (r->rx == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < r->nrx; i++) {
		r->rx[i].buf = r->region + i * r->p.max_size;
		r->rx[i].req.done = 1;
		ret = post_rx(r, &r->rx[i]);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* Answer with a hello of @kind carrying @params. */
static int responder_reply(struct responder *r, int kind, const void *params,
			   size_t len)
{
	struct app_hello h = { .kind = kind };
	ssize_t n;

	h.params = params;
	h.params_len = len;
	n = app_hello_encode(r->mb->sbuf, APP_MSGBOX_MAX, &h);
	return n < 0 ? (int)n
		     : app_msgbox_send(r->mb, r->peer, (size_t)n,
				       CTRL_TIMEOUT_MS);
}

/* Refuse a session whose setup failed, with the reason: ERROR. */
static void responder_refuse(struct responder *r, const char *why)
{
	responder_reply(r, APP_HELLO_ERROR, why, strlen(why));
}

/*
 * A CHECK of [0, @len): the GPU gets what landed in the shadow (SYNC_IN),
 * and its bytes are compared with the pattern. As the initiator's
 * read-back, it tries again for up to 2 s: a write's local completion
 * does not promise its bytes are visible here yet.
 */
static int responder_check(struct responder *r, uint64_t len)
{
	uint64_t until = tern__now_ns() + 2000000000ULL;
	uint8_t params[CHECKED_LEN];
	int equal = 0, ret = 0;

	if (len == 0 || len > r->p.max_size || r->pattern == NULL ||
	    (r->mem.kind != TERN_MEM_HOST && r->chk == NULL))
		ret = -EINVAL;
	while (ret == 0) {
		ret = bench_mr_sync_wait(r->ctx, r->mr, len, TERN_MR_SYNC_IN);
		if (ret == 0)
			equal = region_matches(r, r->region, (size_t)len);
		if (ret != 0 || equal || tern__now_ns() >= until)
			break;
		ret = tern_wait(r->ctx, NULL, 1);
		if (ret == -ETIMEDOUT)
			ret = 0;
	}
	tern__wire_put_u32(params, (uint32_t)equal);
	tern__wire_put_u32(params + 4, (uint32_t)-ret);
	return responder_reply(r, APP_HELLO_ACK, params, sizeof(params));
}

/* Answer a BYE with what arrived: ACK {received, bad}. */
static int responder_bye(struct responder *r)
{
	uint8_t params[16];

	tern__wire_put_u64(params, r->received);
	tern__wire_put_u64(params + 8, r->bad);
	return responder_reply(r, APP_HELLO_ACK, params, sizeof(params));
}

/*
 * The control box's next message, within @timeout_ms. With
 * $TERN_BENCH_TARGET_PAUSE=N the responder spins N pause instructions
 * after each pass that completed nothing, as raw's --target-pause: on
 * tcp the target's poll rate moves write bandwidth by tens of percent
 * (docs/performance.md), and this sets both tools' targets alike.
 */
static ssize_t responder_recv(struct responder *r, int timeout_ms)
{
	struct app_msgbox *mb = r->mb;
	uint64_t until;
	unsigned int spins = 0;
	ssize_t n;

	if (r->pause == 0 || !mb->recv_posted) {
		/* Posts the receive (and waits as a plain target would). */
		n = app_msgbox_recv(mb, r->pause == 0 ? timeout_ms : 0);
		if (r->pause == 0 || n != -ETIMEDOUT)
			return n;
	}
	until = tern__now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	while (!mb->rreq.done) {
		int k = tern_progress(r->ctx);

		if (k < 0)
			return k;
		if (k == 0)
			bench_pause(r->pause);
		if (++spins % 64 == 0 && tern__now_ns() >= until)
			return -ETIMEDOUT;
	}
	return app_msgbox_recv(mb, 0); /* done: collects it */
}

static int responder_session(struct responder *r, volatile sig_atomic_t *stop)
{
	uint64_t bye_at = 0;
	int ret = 0;

	while (!*stop && ret == 0) {
		if (r->p.op == BENCH_SEND) {
			ret = tern_wait(r->ctx, NULL, 100);
			if (ret == -ETIMEDOUT)
				ret = 0;
			if (ret == 0)
				ret = drain_rx(r);
			if (r->bye && bye_at == 0)
				bye_at = tern__now_ns();
			/* Messages may arrive after the BYE (no order):
			 * wait for them, a bounded time. */
			if (r->bye && (r->received >= r->expected ||
				       tern__now_ns() - bye_at >
					       CTRL_TIMEOUT_MS * 1000000ULL))
				break;
			continue;
		}
		ssize_t n = responder_recv(r, 100);
		struct app_hello h;

		if (n == -ETIMEDOUT)
			continue;
		if (n < 0)
			return (int)n;
		if (app_hello_decode(r->mb->rbuf, (size_t)n, &h) != 0)
			continue;
		if (h.kind == APP_HELLO_BYE)
			break;
		if (h.kind == APP_HELLO_BENCH && h.params_len == CHECK_LEN)
			ret = responder_check(r, tern__wire_get_u64(h.params));
	}
	return ret == 0 && !*stop ? responder_bye(r) : ret;
}

int bench_serve(struct tern_ctx *ctx, volatile sig_atomic_t *stop, int once,
		const struct bench_mem *mem, FILE *log)
{
	struct app_msgbox mb;
	int ret = app_msgbox_open(ctx, &mb);
	long pause;

	if (ret != 0)
		return ret;
	/* Read once: a bad value is warned about once, not per session. */
	pause = tern__env_long("TERN_BENCH_TARGET_PAUSE", 0, 0, 1000000);
	while (!*stop) {
		struct app_hello h, ack = { .kind = APP_HELLO_ACK };
		struct responder r = { .ctx = ctx, .mb = &mb, .pause = pause };
		ssize_t n = app_msgbox_recv(&mb, 200);
		char why[160] = "", name[BENCH_MEM_NAME];
		uint8_t meminfo[MEMINFO_LEN];
		enum tern_mr_path path;
		int told;

		if (n == -ETIMEDOUT)
			continue;
		if (n < 0 || app_hello_decode(mb.rbuf, (size_t)n, &h) != 0 ||
		    h.kind != APP_HELLO_BENCH) {
			fprintf(log, "bench: dropped a message that is not a "
				     "bench HELLO\n");
			continue;
		}
		ret = bench_params_decode(h.params, h.params_len, &r.p, why,
					  sizeof(why));
		if (ret == 0)
			ret = tern_peer_add(ctx, h.card, h.card_len, &r.peer);
		if (mem != NULL)
			r.mem = *mem;
		if (ret == 0)
			ret = responder_setup(&r, why, sizeof(why));
		if (ret != 0) {
			fprintf(log, "bench: cannot serve: %s\n",
				why[0] ? why : tern_strerror(ret));
			fflush(log);
			/* A peer to tell: it learns why at once, and a
			 * one-session server is done. */
			if (r.peer != NULL)
				responder_refuse(
					&r, why[0] ? why : tern_strerror(ret));
			told = r.peer != NULL;
			responder_free(&r);
			if (told && once)
				break;
			continue;
		}
		ack.has_desc = 1;
		tern_mr_desc(r.mr, &ack.desc);
		path = tern_mr_path(r.mr);
		tern__wire_put_u32(meminfo,
				   (uint32_t)bench_mem_alloc_kind(&r.mem));
		tern__wire_put_u32(meminfo + 4, (uint32_t)r.mem.device);
		tern__wire_put_u32(meminfo + 8, (uint32_t)path);
		tern__wire_put_u32(meminfo + 12, 0);
		ack.params = meminfo;
		ack.params_len = sizeof(meminfo);
		n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &ack);
		fprintf(log,
			"bench: serving %s, window %u, up to %" PRIu64
			" bytes%s, memory %s (%s)\n",
			bench_op_name((int)r.p.op), r.p.window, r.p.max_size,
			r.p.verify ? ", verifying" : "",
			bench_mem_name(&r.mem, name, sizeof(name)),
			tern_mr_path_str(path));
		fflush(log);
		tern_ctx_set_busy_poll(ctx, 1);
		ret = app_msgbox_send(&mb, r.peer, (size_t)n, CTRL_TIMEOUT_MS);
		if (ret == 0)
			ret = responder_session(&r, stop);
		tern_ctx_set_busy_poll(ctx, 0);
		fprintf(log, "bench: session %s", ret == 0 ? "done" : "failed");
		if (r.p.op == BENCH_SEND)
			fprintf(log,
				": %" PRIu64 " message(s) received, %" PRIu64
				" wrong",
				r.received, r.bad);
		fprintf(log, "%s%s\n", ret ? ": " : "",
			ret ? tern_strerror(ret) : "");
		fflush(log);
		responder_free(&r);
		if (once)
			break;
	}
	app_msgbox_close(&mb);
	return ret;
}
