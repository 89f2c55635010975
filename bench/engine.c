/* SPDX-License-Identifier: MIT */
/*
 * tern bench: the initiator keeps a window of operations in flight on the
 * library's normal data path (posts queue, progress posts them in FI_MORE
 * batches and reads completions in batches) and times every operation from
 * its post to its completion; the responder owns the target memory and, for
 * sends, keeps receives posted. Both meet through a HELLO (apps/).
 */
#define _GNU_SOURCE /* cpu_set_t, in bench/common.h */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/app.h"
#include "core/core.h"
#include "engine.h"
#include "common.h"

#define BENCH_IMM	0x62656e63u /* "benc": data writes with immediate */
#define BENCH_BYE_IMM	0x62796521u /* marks the BYE among data messages */
#define RECV_MEM_MAX	(256ULL << 20)
#define CTRL_TIMEOUT_MS 10000

static const char *const op_names[] = {
	[BENCH_WRITE] = "write",   [BENCH_WRITEDATA] = "writedata",
	[BENCH_READ] = "read",	   [BENCH_SEND] = "send",
	[BENCH_ATOMIC] = "atomic",
};

const char *bench_op_name(int op)
{
	if (op < BENCH_WRITE || op > BENCH_ATOMIC)
		return "?";
	return op_names[op];
}

int bench_op_parse(const char *s)
{
	for (int op = BENCH_WRITE; op <= BENCH_ATOMIC; op++) {
		if (strcmp(s, op_names[op]) == 0)
			return op;
	}
	return -EINVAL;
}

int bench_mem_parse(const char *s, struct bench_mem *m)
{
	char *end;
	long dev;

	if (strcmp(s, "host") == 0) {
		*m = (struct bench_mem){ .kind = TERN_MEM_HOST };
		return 0;
	}
	if (strcmp(s, "cuda") == 0) {
		*m = (struct bench_mem){ .kind = TERN_MEM_CUDA };
		return 0;
	}
	if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9')
		return -EINVAL;
	errno = 0;
	dev = strtol(s + 5, &end, 10);
	if (errno != 0 || *end != '\0' || dev > 1023)
		return -EINVAL;
	*m = (struct bench_mem){ .kind = TERN_MEM_CUDA, .device = (int)dev };
	return 0;
}

const char *bench_mem_name(const struct bench_mem *m, char *buf, size_t len)
{
	if (m == NULL || m->kind == TERN_MEM_HOST)
		snprintf(buf, len, "host");
	else
		snprintf(buf, len, "cuda:%d", m->device);
	return buf;
}

/* HELLO params of a bench: u32 op, u32 window, u64 max_size, u64 seed,
 * u32 verify, u32 0. BYE params: u64 messages sent. ACK of a BYE: u64
 * messages received, u64 of them wrong. */
struct bench_params {
	uint32_t op;
	uint32_t window;
	uint64_t max_size;
	uint64_t seed;
	uint32_t verify;
};

#define PARAMS_LEN 32

/*
 * The ACK of a bench HELLO carries the target region's memory: u32 kind
 * (enum tern_mem_kind), u32 CUDA device, u32 path (enum tern_mr_path),
 * u32 0; none from a responder older than GPU memory: host.
 *
 * With a CUDA region, writes land in its host shadow when staged: the
 * initiator checks them with a CHECK, a bench HELLO amid the session whose
 * params are u64 length, u64 0. The responder syncs [0, length) in
 * (tern_mr_sync(SYNC_IN)), compares the GPU's bytes with the pattern and
 * answers an ACK of u32 1 (equal) or 0, u32 errno (0, or why it could not
 * check).
 */
#define MEMINFO_LEN 16
#define CHECK_LEN   16
#define CHECKED_LEN 8

/* What --op atomic meets on a staged region (tern_mr_regattr()). */
#define ATOMIC_CUDA_WHY                                                    \
	"--op atomic needs host memory on the target, or a provider with " \
	"FI_HMEM"

static void params_encode(const struct bench_params *p, uint8_t *b)
{
	tern__put_u32(b, p->op);
	tern__put_u32(b + 4, p->window);
	tern__put_u64(b + 8, p->max_size);
	tern__put_u64(b + 16, p->seed);
	tern__put_u32(b + 24, p->verify);
	tern__put_u32(b + 28, 0);
}

static int params_decode(const uint8_t *b, size_t len, struct bench_params *p,
			 char *why, size_t whylen)
{
	if (len != PARAMS_LEN) {
		snprintf(why, whylen, "bench parameters of %zu bytes", len);
		return -TERN_EPROTO;
	}
	p->op = tern__get_u32(b);
	p->window = tern__get_u32(b + 4);
	p->max_size = tern__get_u64(b + 8);
	p->seed = tern__get_u64(b + 16);
	p->verify = tern__get_u32(b + 24);
	if (p->op < BENCH_WRITE || p->op > BENCH_ATOMIC || p->window == 0 ||
	    p->window > BENCH_MAX_WINDOW || p->max_size == 0 ||
	    p->max_size > BENCH_MAX_SIZE || p->verify > 1 ||
	    tern__get_u32(b + 28) != 0) {
		snprintf(why, whylen,
			 "bench op %u, window %u, size %" PRIu64
			 " outside limits (window 1..%d, size 1..%llu)",
			 p->op, p->window, p->max_size, BENCH_MAX_WINDOW,
			 BENCH_MAX_SIZE);
		return -TERN_EREFUSED;
	}
	return 0;
}

/* Page-aligned: a 4 KiB transfer then touches one page, not two (the
 * kernel copies of shm and tcp pin and walk every page they touch; EFA
 * needs only 128-byte alignment). */
static void *alloc_aligned(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, 4096, len ? len : 1) == 0 ? p : NULL;
}

static void mt_fill(void *buf, size_t len, uint64_t seed)
{
	struct tern_mt64 rng;

	tern_mt64_seed(&rng, seed);
	tern_mt64_fill(&rng, buf, len);
}

/* Fill @len bytes at @buf, memory of @kind, with MT(@seed) (@pattern) or
 * zeros. GPU memory is never touched from the host: it is filled through
 * a bounce buffer with tern_mem_copy(). */
static int mem_fill(enum tern_mem_kind kind, void *buf, size_t len, int pattern,
		    uint64_t seed)
{
	const size_t chunk = 1 << 20; /* a multiple of 8: one MT stream */
	struct tern_mt64 rng;
	uint8_t *tmp;
	int ret = 0;

	if (kind == TERN_MEM_HOST) {
		if (pattern)
			mt_fill(buf, len, seed);
		else
			memset(buf, 0, len);
		return 0;
	}
	tmp = alloc_aligned(TERN_MIN(len, chunk));
	if (tmp == NULL)
		return -ENOMEM;
	memset(tmp, 0, TERN_MIN(len, chunk));
	tern_mt64_seed(&rng, seed);
	for (size_t off = 0; off < len && ret == 0; off += chunk) {
		size_t n = TERN_MIN(chunk, len - off);

		if (pattern)
			tern_mt64_fill(&rng, tmp, n);
		ret = tern_mem_copy((uint8_t *)buf + off, tmp, n);
	}
	free(tmp);
	return ret;
}

/* tern_mr_sync() of [0, @len) of @mr in direction @dir, waited for. */
static int mr_sync_wait(struct tern_ctx *ctx, struct tern_mr *mr, uint64_t len,
			unsigned int dir)
{
	struct tern_req req;
	int ret;

	tern_req_init(&req, NULL, NULL);
	ret = tern_mr_sync(mr, 0, len, dir, &req);
	if (ret != 0)
		return ret;
	ret = tern_wait(ctx, &req, CTRL_TIMEOUT_MS);
	if (ret != 0 && !req.done && tern_req_cancel(ctx, &req) >= 0)
		tern_wait(ctx, &req, 2000);
	return ret != 0 ? ret : req.status;
}

/* --- responder -------------------------------------------------------------
 */

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
				r->expected = tern__get_u64(h.params);
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
	tern_mem_free(r->mem.kind, r->region);
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
	ret = tern_mem_alloc(r->mem.kind, r->mem.device, len, &region);
	if (ret != 0) {
		snprintf(why, whylen, "allocating %zu bytes of %s memory: %s",
			 len, name, tern_strerror(ret));
		return ret;
	}
	r->region = region;
	r->region_len = len;
	/* Zeros, so that bytes a session left behind never pass a check;
	 * reads find the pattern. */
	ret = mem_fill(r->mem.kind, r->region, len, r->p.op == BENCH_READ,
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
		ret = mr_sync_wait(r->ctx, r->mr, len, TERN_MR_SYNC_OUT);
		if (ret != 0) {
			snprintf(why, whylen, "tern_mr_sync(SYNC_OUT): %s",
				 tern_strerror(ret));
			return ret;
		}
	}
	if (r->p.op == BENCH_SEND ||
	    (r->p.verify && cuda &&
	     (r->p.op == BENCH_WRITE || r->p.op == BENCH_WRITEDATA))) {
		r->pattern = alloc_aligned(r->p.max_size);
		if (r->pattern == NULL)
			return -ENOMEM;
		mt_fill(r->pattern, r->p.max_size, r->p.seed);
		if (cuda) {
			r->chk = alloc_aligned(r->p.max_size);
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
		ret = mr_sync_wait(r->ctx, r->mr, len, TERN_MR_SYNC_IN);
		if (ret == 0)
			equal = region_matches(r, r->region, (size_t)len);
		if (ret != 0 || equal || tern__now_ns() >= until)
			break;
		ret = tern_wait(r->ctx, NULL, 1);
		if (ret == -ETIMEDOUT)
			ret = 0;
	}
	tern__put_u32(params, (uint32_t)equal);
	tern__put_u32(params + 4, (uint32_t)-ret);
	return responder_reply(r, APP_HELLO_ACK, params, sizeof(params));
}

/* Answer a BYE with what arrived: ACK {received, bad}. */
static int responder_bye(struct responder *r)
{
	uint8_t params[16];

	tern__put_u64(params, r->received);
	tern__put_u64(params + 8, r->bad);
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
			ret = responder_check(r, tern__get_u64(h.params));
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
		ret = params_decode(h.params, h.params_len, &r.p, why,
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
		tern__put_u32(meminfo, (uint32_t)r.mem.kind);
		tern__put_u32(meminfo + 4, (uint32_t)r.mem.device);
		tern__put_u32(meminfo + 8, (uint32_t)path);
		tern__put_u32(meminfo + 12, 0);
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

/* --- initiator -------------------------------------------------------------
 */

struct bop {
	struct tern_req req;
	uint64_t t_post;
	uint64_t idx;
	struct runner *run;
	struct bop *next_free;
};

struct runner {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	const struct bench_opts *o;
	struct app_msgbox *mb;
	struct tern_mr *mr;
	uint8_t *buf;	  /* a device pointer for CUDA */
	uint8_t *pattern; /* MT(seed), host memory, with --verify */
	struct tern_mr_desc remote;
	struct bench_mem peer_mem; /* of the target region */
	struct bop *w;		   /* the window */
	struct bop *free_bops;	   /* its entries not in flight: completions
				    * come in any order (striping, EFA) */
	/* the size being measured */
	uint64_t size;
	uint64_t posted, done, limit;
	uint64_t iters, warmup; /* of this size */
	uint64_t t_start, t_end;
	uint64_t cold_ns;
	int err;
	char errmsg[TERN_REQ_ERRMSG_LEN];
	struct bench_hist hist;
	int stuck; /* operations the provider never finished: keep memory */
	uint64_t sent_total; /* sends, for the responder's count */
	uint64_t link_bps;
};

/* The clock of every operation's timestamps: tern__now_ns()'s, read
 * here without the call into the library (twice per operation). */
static inline uint64_t op_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void bop_done(struct tern_req *req)
{
	struct bop *b = tern_container_of(req, struct bop, req);
	struct runner *r = b->run;
	uint64_t now = op_clock_ns(), lat = now - b->t_post;

	r->done++;
	b->next_free = r->free_bops;
	r->free_bops = b;
	if (req->status != 0 && r->err == 0) {
		r->err = req->status;
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", req->errmsg);
	}
	if (b->idx == 0)
		r->cold_ns = lat;
	if (b->idx >= r->warmup) {
		bench_hist_add(&r->hist, lat);
		r->t_end = now;
	}
}

static int post_op(struct runner *r, struct bop *b)
{
	const struct bench_opts *o = r->o;
	size_t len = (size_t)r->size;

	b->idx = r->posted;
	b->t_post = op_clock_ns();
	if (b->idx == r->warmup)
		r->t_start = b->t_post;
	switch (o->op) {
	case BENCH_WRITE:
		return tern_write(r->peer, r->mr, r->buf, len, &r->remote, 0,
				  &b->req);
	case BENCH_WRITEDATA:
		return tern_write_imm(r->peer, r->mr, r->buf, len, &r->remote,
				      0, BENCH_IMM, &b->req);
	case BENCH_READ:
		return tern_read(r->peer, r->mr, r->buf, len, &r->remote, 0,
				 &b->req);
	case BENCH_SEND:
		r->sent_total++;
		return tern_send(r->peer, r->mr, r->buf, len, &b->req);
	default:
		return tern_atomic_fetch_add(r->peer, &r->remote, 0, 1,
					     &b->req);
	}
}

static void show_progress(const struct runner *r)
{
	double s = (double)(tern__now_ns() - r->t_start) / 1e9;
	uint64_t timed = r->done > r->warmup ? r->done - r->warmup : 0;

	fprintf(stderr,
		"\rbench: %s %" PRIu64 " B: %" PRIu64 " ops, %.2f "
		"Gbit/s   ",
		bench_op_name(r->o->op), r->size, timed,
		s > 0 ? (double)timed * (double)r->size * 8 / s / 1e9 : 0.0);
	fflush(stderr);
}

/* Measure one size: warm-up, then the timed operations, a window deep. */
static int run_size(struct runner *r, struct bench_point *pt)
{
	const struct bench_opts *o = r->o;
	uint64_t deadline = 0, next_show = tern__now_ns() + 500000000ULL;
	uint64_t stall_from = 0, last_done = 0;
	int ret = 0;

	bench_hist_init(&r->hist);
	r->posted = r->done = 0;
	r->t_start = r->t_end = 0;
	r->cold_ns = 0;
	r->iters = o->iters;
	if (o->iters == 0 && o->duration_s <= 0) {
		/* About the same bytes per size, bounded to keep a default
		 * run to seconds: 100000 ops at 8 B down to 200 at 16 MiB. */
		r->iters = (256ULL << 20) / r->size;
		r->iters = TERN_MAX(TERN_MIN(r->iters, 100000ULL), 200ULL);
	}
	r->warmup = o->warmup != BENCH_AUTO
			    ? o->warmup
			    : TERN_MAX(r->iters / 10, (uint64_t)16);
	r->limit = r->iters ? r->warmup + r->iters : UINT64_MAX;
	while (r->done < r->posted || r->posted < r->limit) {
		/* Warm-up drains before the clock starts: timed operations
		 * start from an empty pipeline and are not credited with
		 * warm-up bytes still in flight (raw measures the same). */
		while (r->err == 0 && r->posted < r->limit &&
		       r->posted - r->done < o->window &&
		       (r->posted != r->warmup || r->done == r->posted)) {
			struct bop *b = r->free_bops;

			r->free_bops = b->next_free;
			ret = post_op(r, b);
			if (ret != 0) {
				b->next_free = r->free_bops;
				r->free_bops = b;
				break;
			}
			r->posted++;
			if (!r->iters && r->posted == r->warmup + 1)
				deadline = r->t_start +
					   (uint64_t)(o->duration_s * 1e9);
		}
		if (ret != 0 || r->err != 0) {
			r->limit = r->posted; /* stop posting, drain */
			if (ret == 0)
				ret = r->err;
		}
		if (deadline != 0 && r->limit == UINT64_MAX &&
		    tern__now_ns() >= deadline)
			r->limit = r->posted;
		int n = tern_progress(r->ctx);

		if (n < 0)
			return n;
		if (n > 0) {
			last_done = r->done;
			stall_from = 0;
		} else if (r->done == last_done && (r->done < r->posted)) {
			/* Nothing completes: the peer is gone or stuck. */
			if (stall_from == 0)
				stall_from = tern__now_ns();
			else if (tern__now_ns() - stall_from >
				 CTRL_TIMEOUT_MS * 1000000ULL)
				r->stuck = 1;
		}
		if (r->stuck || (o->stop != NULL && *o->stop)) {
			if (ret == 0)
				ret = r->stuck ? -ETIMEDOUT : -EINTR;
			if (r->stuck)
				break;
			r->limit = r->posted; /* Ctrl-C: drain, then stop */
		}
		if (o->progress && tern__now_ns() > next_show) {
			show_progress(r);
			next_show = tern__now_ns() + 500000000ULL;
		}
	}
	if (o->progress)
		fprintf(stderr, "\r%60s\r", "");
	pt->size = r->size;
	pt->ops = r->hist.count;
	pt->bytes = pt->ops * r->size;
	pt->seconds = (double)(r->t_end - r->t_start) / 1e9;
	pt->link_pct = -1;
	if (pt->seconds > 0) {
		pt->gbps = (double)pt->bytes * 8 / pt->seconds / 1e9;
		if (r->link_bps != 0)
			pt->link_pct = pt->gbps * 1e9 / (double)r->link_bps *
				       100;
		pt->gBps = (double)pt->bytes / pt->seconds / 1e9;
		pt->mpps = (double)pt->ops / pt->seconds / 1e6;
	}
	pt->lat_min_us = (double)bench_hist_quantile(&r->hist, 0) / 1e3;
	pt->lat_p50_us = (double)bench_hist_quantile(&r->hist, 0.5) / 1e3;
	pt->lat_p99_us = (double)bench_hist_quantile(&r->hist, 0.99) / 1e3;
	pt->lat_p999_us = (double)bench_hist_quantile(&r->hist, 0.999) / 1e3;
	pt->lat_max_us = (double)bench_hist_quantile(&r->hist, 1) / 1e3;
	pt->cold_us = (double)r->cold_ns / 1e3;
	return ret;
}

static int one_op(struct runner *r, struct tern_req *req)
{
	int ret = tern_wait(r->ctx, req, CTRL_TIMEOUT_MS);

	return ret != 0 ? ret : req->status;
}

/* Writes into a GPU region: the responder syncs them in and compares
 * (CHECK); 0 with pt->verified set, or an error with @why. */
static int check_remote(struct runner *r, struct bench_point *pt, char *why,
			size_t whylen)
{
	struct app_hello h = { .kind = APP_HELLO_BENCH }, ack;
	uint8_t params[CHECK_LEN];
	uint32_t err;
	ssize_t n;
	int ret;

	tern__put_u64(params, r->size);
	tern__put_u64(params + 8, 0);
	h.params = params;
	h.params_len = sizeof(params);
	n = app_hello_encode(r->mb->sbuf, APP_MSGBOX_MAX, &h);
	ret = n < 0 ? (int)n
		    : app_msgbox_send(r->mb, r->peer, (size_t)n,
				      CTRL_TIMEOUT_MS);
	if (ret == 0) {
		n = app_msgbox_recv(r->mb, 2 * CTRL_TIMEOUT_MS);
		ret = n < 0 ? (int)n
			    : app_hello_decode(r->mb->rbuf, (size_t)n, &ack);
	}
	if (ret == 0 &&
	    (ack.kind != APP_HELLO_ACK || ack.params_len != CHECKED_LEN))
		ret = -TERN_EPROTO;
	if (ret != 0) {
		snprintf(why, whylen, "checking the GPU region: %s",
			 tern_strerror(ret));
		return ret;
	}
	err = tern__get_u32(ack.params + 4);
	if (err != 0) {
		snprintf(why, whylen,
			 "the responder could not check its GPU region: %s",
			 tern_strerror(-(int)err));
		return -(int)err;
	}
	pt->verified = tern__get_u32(ack.params) == 1 ? 1 : -1;
	return 0;
}

/* After a size: read the target back (writes; a GPU target checks its
 * own), compare what we read (reads), or read the counter (atomics). */
static int verify_size(struct runner *r, struct tern_mr *chkmr, uint8_t *chk,
		       uint64_t atomics_so_far, struct bench_point *pt,
		       char *why, size_t whylen)
{
	size_t len = (size_t)r->size;
	struct tern_req req;
	int ret = 0;

	tern_req_init(&req, NULL, NULL);
	switch (r->o->op) {
	case BENCH_WRITE:
	case BENCH_WRITEDATA: {
		if (r->peer_mem.kind != TERN_MEM_HOST)
			return check_remote(r, pt, why, whylen);
		/* A write's local completion does not promise the data is
		 * visible at the target yet (shm copies small writes on the
		 * target's progress; EFA is unordered): read back until it
		 * matches, for at most 2 s. Wrong data never turns right. */
		uint64_t until = tern__now_ns() + 2000000000ULL;

		do {
			tern_req_init(&req, NULL, NULL);
			ret = tern_read(r->peer, chkmr, chk, len, &r->remote, 0,
					&req);
			if (ret == 0)
				ret = one_op(r, &req);
			if (ret == 0)
				pt->verified = memcmp(chk, r->pattern, len) == 0
						       ? 1
						       : -1;
		} while (ret == 0 && pt->verified < 0 &&
			 tern__now_ns() < until);
		break;
	}
	case BENCH_READ:
		/* The buffer was zeros: only the reads put the pattern
		 * there. */
		ret = tern_mem_copy(chk, r->buf, len);
		if (ret == 0)
			pt->verified = memcmp(chk, r->pattern, len) == 0 ? 1
									 : -1;
		break;
	case BENCH_ATOMIC:
		ret = tern_atomic_fetch_add(r->peer, &r->remote, 0, 0, &req);
		if (ret == 0)
			ret = one_op(r, &req);
		if (ret == 0)
			pt->verified = req.value == atomics_so_far ? 1 : -1;
		break;
	default:
		break; /* sends: the responder counts and checks */
	}
	return ret;
}

static void fill_context(struct tern_ctx *ctx, const struct bench_opts *o,
			 struct bench_context *c)
{
	struct tern_ctx_info ci;
	time_t now = time(NULL);
	struct tm tm;

	tern_ctx_query(ctx, &ci);
	snprintf(c->tern_version, sizeof(c->tern_version), "%s",
		 tern_version());
	snprintf(c->fabric_version, sizeof(c->fabric_version), "%s",
		 tern_fabric_version());
	snprintf(c->provider, sizeof(c->provider), "%s", ci.provider);
	snprintf(c->fabric, sizeof(c->fabric), "%s", ci.fabric);
	snprintf(c->domain, sizeof(c->domain), "%s", ci.domain);
	if (gethostname(c->host, sizeof(c->host)) != 0)
		snprintf(c->host, sizeof(c->host), "?");
	gmtime_r(&now, &tm);
	strftime(c->date, sizeof(c->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(c->op, sizeof(c->op), "%s", bench_op_name(o->op));
	c->link_bps = ci.link_speed;
	c->window = o->window;
	c->rails = ci.rails;
	c->wait_fd = ci.wait_fd;
	c->iters = o->iters;
	c->duration_s = o->iters ? 0 : o->duration_s;
	/* As run_size() resolves it; 0 with neither --iters nor --duration:
	 * a tenth of each size's own count. */
	if (o->warmup != BENCH_AUTO)
		c->warmup = o->warmup;
	else if (o->iters != 0)
		c->warmup = TERN_MAX(o->iters / 10, (uint64_t)16);
	else
		c->warmup = o->duration_s > 0 ? 16 : 0;
	c->verify = o->verify;
	bench_mem_name(&o->mem, c->mem_local, sizeof(c->mem_local));
}

/* HELLO the responder; on ACK its region's descriptor. */
static int hello(struct runner *r, struct app_msgbox *mb, uint64_t max_size,
		 enum tern_mr_path *peer_path, char *why, size_t whylen)
{
	uint8_t card[TERN_CARD_MAX], params[PARAMS_LEN];
	struct bench_params bp = {
		.op = (uint32_t)r->o->op,
		.window = r->o->window,
		.max_size = max_size,
		.seed = r->o->seed,
		.verify = (uint32_t)r->o->verify,
	};
	struct app_hello h = { .kind = APP_HELLO_BENCH }, ack;
	ssize_t n;
	int ret;

	params_encode(&bp, params);
	h.card = card;
	h.card_len = (size_t)tern_ctx_card(r->ctx, card, sizeof(card));
	h.params = params;
	h.params_len = sizeof(params);
	n = app_hello_encode(mb->sbuf, APP_MSGBOX_MAX, &h);
	ret = n < 0 ? (int)n
		    : app_msgbox_send(mb, r->peer, (size_t)n, CTRL_TIMEOUT_MS);
	if (ret == 0) {
		n = app_msgbox_recv(mb, CTRL_TIMEOUT_MS);
		ret = n < 0 ? (int)n
			    : app_hello_decode(mb->rbuf, (size_t)n, &ack);
	}
	if (ret == 0 && ack.kind == APP_HELLO_ERROR) {
		size_t k = TERN_MIN(ack.params_len, (size_t)200);
		char text[201];

		for (size_t i = 0; i < k; i++)
			text[i] = ack.params[i] >= 0x20 && ack.params[i] < 0x7f
					  ? (char)ack.params[i]
					  : '?';
		text[k] = '\0';
		snprintf(why, whylen, "the bench responder refused: %s", text);
		return -TERN_EREFUSED;
	}
	if (ret != 0 || ack.kind != APP_HELLO_ACK || !ack.has_desc) {
		snprintf(why, whylen, "the bench responder did not answer: %s",
			 ret ? tern_strerror(ret) : "unexpected reply");
		return ret ? ret : -TERN_EPROTO;
	}
	r->remote = ack.desc;
	r->peer_mem = (struct bench_mem){ .kind = TERN_MEM_HOST };
	*peer_path = TERN_MR_PATH_HOST;
	if (ack.params_len == MEMINFO_LEN) {
		uint32_t kind = tern__get_u32(ack.params);
		uint32_t dev = tern__get_u32(ack.params + 4);
		uint32_t path = tern__get_u32(ack.params + 8);

		if (kind > TERN_MEM_CUDA || dev > 1023 ||
		    path > TERN_MR_PATH_STAGED) {
			snprintf(why, whylen,
				 "the bench responder's memory: kind %u, "
				 "device %u, path %u",
				 kind, dev, path);
			return -TERN_EPROTO;
		}
		r->peer_mem.kind = (enum tern_mem_kind)kind;
		r->peer_mem.device = (int)dev;
		*peer_path = (enum tern_mr_path)path;
	}
	return 0;
}

/* BYE, and for sends the responder's count: ACK {received, bad}. */
static int bye(struct runner *r, struct app_msgbox *mb,
	       struct bench_report *rep, char *why, size_t whylen)
{
	struct app_hello h = { .kind = APP_HELLO_BYE }, ack;
	uint8_t params[8];
	ssize_t n;
	int ret;

	tern__put_u64(params, r->sent_total);
	h.params = params;
	h.params_len = sizeof(params);
	n = app_hello_encode(mb->sbuf, APP_MSGBOX_MAX, &h);
	if (n < 0)
		return (int)n;
	if (r->o->op == BENCH_SEND) {
		/* Among the data messages: marked by its immediate. */
		tern_req_init(&mb->sreq, NULL, NULL);
		ret = tern_send_imm(r->peer, mb->mr, mb->sbuf, (size_t)n,
				    BENCH_BYE_IMM, &mb->sreq);
		if (ret == 0)
			ret = one_op(r, &mb->sreq);
	} else {
		ret = app_msgbox_send(mb, r->peer, (size_t)n, CTRL_TIMEOUT_MS);
	}
	if (ret == 0) {
		n = app_msgbox_recv(mb, 2 * CTRL_TIMEOUT_MS);
		ret = n < 0 ? (int)n
			    : app_hello_decode(mb->rbuf, (size_t)n, &ack);
	}
	if (ret != 0 || ack.params_len != 16) {
		snprintf(why, whylen, "no answer to BYE: %s",
			 ret ? tern_strerror(ret) : "bad reply");
		return ret ? ret : -TERN_EPROTO;
	}
	if (r->o->op == BENCH_SEND) {
		uint64_t got = tern__get_u64(ack.params);
		uint64_t bad = tern__get_u64(ack.params + 8);
		int v = got == r->sent_total && bad == 0 ? 1 : -1;

		if (got != r->sent_total)
			snprintf(why, whylen,
				 "the responder received %" PRIu64
				 " of %" PRIu64 " messages",
				 got, r->sent_total);
		for (size_t i = 0; r->o->verify && i < rep->npoints; i++)
			rep->points[i].verified = v;
		if (got != r->sent_total)
			return -TERN_EVERIFY;
	}
	return 0;
}

int bench_run(struct tern_ctx *ctx, const void *card, size_t card_len,
	      const struct bench_opts *o, struct bench_report *rep, char *why,
	      size_t whylen)
{
	struct runner r = { .ctx = ctx, .o = o };
	int cuda = o->mem.kind == TERN_MEM_CUDA;
	enum tern_mr_path path = TERN_MR_PATH_HOST;
	char name[BENCH_MEM_NAME];
	struct tern_mr *chkmr = NULL;
	struct app_msgbox mb;
	uint64_t max_size = 8, t0, atomics = 0;
	uint8_t *chk = NULL;
	void *buf = NULL;
	int ret;

	memset(rep, 0, sizeof(*rep));
	fill_context(ctx, o, &rep->ctx);
	r.link_bps = rep->ctx.link_bps;
	for (size_t i = 0; i < o->nsizes; i++)
		max_size = TERN_MAX(max_size, o->sizes[i]);
	ret = app_msgbox_open(ctx, &mb);
	if (ret != 0)
		return ret;
	r.mb = &mb;
	bench_mem_name(&o->mem, name, sizeof(name));
	r.w = calloc(o->window, sizeof(*r.w));
	/* Once: a completed request is posted again as it is (every post
	 * clears its results), as a user's loop would. */
	for (size_t i = 0; r.w != NULL && i < o->window; i++) {
		tern_req_init(&r.w[i].req, bop_done, NULL);
		r.w[i].run = &r;
		r.w[i].next_free = r.free_bops;
		r.free_bops = &r.w[i];
	}
	chk = alloc_aligned(max_size);
	if (o->verify)
		r.pattern = alloc_aligned(max_size);
	if (r.w == NULL || chk == NULL || (o->verify && r.pattern == NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	if (o->verify)
		mt_fill(r.pattern, max_size, o->seed);
	ret = tern_mem_alloc(o->mem.kind, o->mem.device, max_size, &buf);
	if (ret != 0) {
		snprintf(why, whylen, "allocating %" PRIu64 " bytes of %s: %s",
			 max_size, name, tern_strerror(ret));
		goto out;
	}
	r.buf = buf;
	/* Sources carry the pattern; a read's sink starts as zeros, so that
	 * only the reads can put the pattern there. */
	ret = mem_fill(o->mem.kind, r.buf, max_size, o->op != BENCH_READ,
		       o->seed);
	if (ret != 0) {
		snprintf(why, whylen, "filling %s memory: %s", name,
			 tern_strerror(ret));
		goto out;
	}
	t0 = tern__now_ns();
	ret = tern_mr_regattr(
		ctx,
		&(struct tern_mr_attr){ .buf = r.buf,
					.len = max_size,
					.access = TERN_ACCESS_LOCAL,
					.kind = o->mem.kind,
					.device = cuda ? o->mem.device : -1 },
		&r.mr);
	rep->ctx.mr_reg_ms = (double)(tern__now_ns() - t0) / 1e6;
	rep->ctx.mr_bytes = max_size;
	if (ret != 0) {
		snprintf(why, whylen, "registering %" PRIu64 " bytes of %s: %s",
			 max_size, name, tern_strerror(ret));
		goto out;
	}
	snprintf(rep->ctx.path_local, sizeof(rep->ctx.path_local), "%s",
		 tern_mr_path_str(tern_mr_path(r.mr)));
	ret = tern_mr_reg(ctx, chk, max_size, TERN_ACCESS_LOCAL, &chkmr);
	if (ret == 0)
		ret = tern_peer_add(ctx, card, card_len, &r.peer);
	if (ret != 0) {
		snprintf(why, whylen, "setup: %s", tern_strerror(ret));
		goto out;
	}
	ret = hello(&r, &mb, max_size, &path, why, whylen);
	if (ret != 0)
		goto out;
	bench_mem_name(&r.peer_mem, rep->ctx.mem_peer,
		       sizeof(rep->ctx.mem_peer));
	snprintf(rep->ctx.path_peer, sizeof(rep->ctx.path_peer), "%s",
		 tern_mr_path_str(path));
	tern_ctx_set_busy_poll(ctx, 1);
	for (size_t i = 0; i < o->nsizes && ret == 0; i++) {
		struct bench_point *pt = &rep->points[rep->npoints++];

		r.size = o->op == BENCH_ATOMIC ? 8 : o->sizes[i];
		ret = run_size(&r, pt);
		atomics += r.posted;
		if (ret != 0) {
			snprintf(why, whylen, "%s of %" PRIu64 " bytes: %s%s%s",
				 bench_op_name(o->op), r.size,
				 tern_strerror(ret), r.errmsg[0] ? ": " : "",
				 r.errmsg);
			break;
		}
		if (o->verify)
			ret = verify_size(&r, chkmr, chk, atomics, pt, why,
					  whylen);
		if (ret == 0 && pt->verified < 0) {
			snprintf(why, whylen,
				 "verification failed at %" PRIu64 " bytes",
				 r.size);
			ret = -TERN_EVERIFY;
		}
		if (o->op == BENCH_ATOMIC)
			break; /* one size: 8 bytes */
	}
	if (ret == 0)
		ret = bye(&r, &mb, rep, why, whylen);
	tern_ctx_set_busy_poll(ctx, 0);
	if (r.stuck) {
		/* The provider may still write into these: keep them. */
		snprintf(why, whylen,
			 "no completion for %d s: the peer is "
			 "gone or stuck",
			 CTRL_TIMEOUT_MS / 1000);
		tern_peer_remove(r.peer);
		app_msgbox_close(&mb);
		free(r.pattern);
		return -ETIMEDOUT;
	}
out:
	tern_peer_remove(r.peer);
	tern_mr_close(chkmr);
	tern_mr_close(r.mr);
	free(chk);
	tern_mem_free(o->mem.kind, r.buf);
	free(r.pattern);
	free(r.w);
	app_msgbox_close(&mb);
	return ret;
}
