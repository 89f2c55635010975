/* SPDX-License-Identifier: MIT */
/* tern bench's initiator: keeps a window of operations in flight and
 * times each from its post to its completion (bench_run()); in the
 * implicit model (--implicit) posts each window with the *_nbi calls and
 * completes it with one tern_quiet(); in the batch model (--batch) posts
 * each window as one tern_write_pieces() or tern_read_pieces(). */
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

struct bop {
	struct tern_req req;
	uint64_t t_post;
	uint64_t idx;
	struct runner *run;
	struct bop *next_free;
};

/* The batch model's window: one request for --window pieces, each the
 * whole size at offset 0 of both regions, as every operation of the
 * other models. */
struct batch {
	struct tern_req req;
	struct tern_mr_desc region; /* the target region: pieces' region 0 */
	struct tern_piece pieces[];
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
	/* The implicit model's quiet, one per window; on the heap, as the
	 * window, so that a stuck run can leave it to the provider. */
	struct tern_req *quiet;
	/* The batch model's, on the heap for the same reason; else NULL. */
	struct batch *batch;
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

/* This size's counts: timed operations, warm-up, the limit. */
static void size_begin(struct runner *r)
{
	const struct bench_opts *o = r->o;

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
}

/* The explicit model: a window of requests, each posted again as soon
 * as it completes, each timed from its post to its completion. */
static int run_explicit(struct runner *r)
{
	const struct bench_opts *o = r->o;
	uint64_t deadline = 0, next_show = tern__now_ns() + 500000000ULL;
	uint64_t stall_from = 0, last_done = 0;
	int ret = 0;

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
	return ret;
}

/* One implicit operation, no request: its quiet completes it. */
static int post_nbi(struct runner *r)
{
	size_t len = (size_t)r->size;

	switch (r->o->op) {
	case BENCH_WRITE:
		return tern_write_nbi(r->peer, r->mr, r->buf, len, &r->remote,
				      0);
	case BENCH_WRITEDATA:
		return tern_write_imm_nbi(r->peer, r->mr, r->buf, len,
					  &r->remote, 0, BENCH_IMM);
	case BENCH_READ:
		return tern_read_nbi(r->peer, r->mr, r->buf, len, &r->remote,
				     0);
	default:
		return tern_atomic_add_nbi(r->peer, &r->remote, 0, 1);
	}
}

/* A progress pass while a window of implicit operations or a batch is in
 * flight: a peer that completes nothing for CTRL_TIMEOUT_MS is gone or
 * stuck. @return 0, a progress error, or -ETIMEDOUT with r->stuck set. */
static int window_pass(struct runner *r, uint64_t *stall_from)
{
	int n = tern_progress(r->ctx);

	if (n < 0)
		return n;
	if (n > 0) {
		*stall_from = 0;
	} else if (*stall_from == 0) {
		*stall_from = tern__now_ns();
	} else if (tern__now_ns() - *stall_from >
		   CTRL_TIMEOUT_MS * 1000000ULL) {
		r->stuck = 1;
		return -ETIMEDOUT;
	}
	return 0;
}

/*
 * The implicit model: a window of operations posted with the *_nbi calls
 * (no request each), then one tern_quiet() that completes once all of
 * them are done at the target; the next window is posted after it. An
 * implicit operation's completion is known only at its quiet: each
 * operation of a window is timed from the window's first post to the
 * quiet's completion (the longest any of them waited).
 */
static int run_implicit(struct runner *r)
{
	const struct bench_opts *o = r->o;
	uint64_t deadline = 0, next_show = tern__now_ns() + 500000000ULL;
	uint64_t stall_from = 0;
	int ret = 0, q;

	while (ret == 0 && r->posted < r->limit) {
		/* Warm-up windows end at the warm-up: the clock starts with
		 * an empty pipeline, as in the explicit model. */
		uint64_t end = r->posted < r->warmup ? r->warmup : r->limit;
		uint64_t n = TERN_MIN((uint64_t)o->window, end - r->posted);
		uint64_t k = 0, t_post = op_clock_ns(), now;
		int timed = r->posted >= r->warmup;

		if (r->posted == r->warmup) {
			r->t_start = t_post;
			if (!r->iters)
				deadline = t_post +
					   (uint64_t)(o->duration_s * 1e9);
		}
		while (k < n) {
			ret = post_nbi(r);
			if (tern_likely(ret == 0)) {
				k++;
				continue;
			}
			if (ret != -ENOBUFS)
				break;
			/* TERN_NBI_MAX in flight: progress frees some. */
			ret = window_pass(r, &stall_from);
			if (ret != 0)
				return ret;
		}
		r->posted += k;
		/* What was posted is drained, also after a failed post. */
		q = tern_quiet(r->ctx, r->peer, r->quiet);
		if (q != 0)
			return ret != 0 ? ret : q;
		while (!r->quiet->done) {
			q = window_pass(r, &stall_from);
			if (q != 0)
				return q;
		}
		now = op_clock_ns();
		if (r->done == 0)
			r->cold_ns = now - t_post;
		r->done += k;
		if (timed && k > 0) {
			bench_hist_add_n(&r->hist, now - t_post, k);
			r->t_end = now;
		}
		if (r->quiet->status != 0 && r->err == 0) {
			r->err = r->quiet->status;
			snprintf(r->errmsg, sizeof(r->errmsg), "%s",
				 r->quiet->errmsg);
		}
		if (ret == 0)
			ret = r->err;
		if (deadline != 0 && now >= deadline)
			r->limit = r->posted;
		if (ret == 0 && o->stop != NULL && *o->stop)
			ret = -EINTR;
		if (o->progress && now > next_show) {
			show_progress(r);
			next_show = now + 500000000ULL;
		}
	}
	return ret;
}

/* One batch of @n pieces, the window: tern_write_pieces() (writedata:
 * with TERN_PIECES_IMM) or tern_read_pieces(), one request. */
static int post_batch(struct runner *r, uint64_t n)
{
	struct batch *b = r->batch;

	switch (r->o->op) {
	case BENCH_WRITE:
		return tern_write_pieces(r->peer, r->mr, b->pieces, (size_t)n,
					 &b->region, 1, 0, 0, &b->req);
	case BENCH_WRITEDATA:
		return tern_write_pieces(r->peer, r->mr, b->pieces, (size_t)n,
					 &b->region, 1, TERN_PIECES_IMM,
					 BENCH_IMM, &b->req);
	default:
		return tern_read_pieces(r->peer, r->mr, b->pieces, (size_t)n,
					&b->region, 1, &b->req);
	}
}

/*
 * The batch model: a window of operations posted as one batch call of
 * --window pieces and one request; the next window is posted once it has
 * completed. As in the implicit model, each operation of a window is
 * timed from the window's post to the request's completion, and warm-up
 * windows end at the warm-up.
 */
static int run_batch(struct runner *r)
{
	const struct bench_opts *o = r->o;
	uint64_t deadline = 0, next_show = tern__now_ns() + 500000000ULL;
	uint64_t stall_from = 0;
	struct tern_req *req = &r->batch->req;
	int ret = 0;

	for (unsigned int i = 0; i < o->window; i++)
		r->batch->pieces[i].len = r->size;
	while (ret == 0 && r->posted < r->limit) {
		uint64_t end = r->posted < r->warmup ? r->warmup : r->limit;
		uint64_t n = TERN_MIN((uint64_t)o->window, end - r->posted);
		uint64_t t_post = op_clock_ns(), now;
		int timed = r->posted >= r->warmup;

		if (r->posted == r->warmup) {
			r->t_start = t_post;
			if (!r->iters)
				deadline = t_post +
					   (uint64_t)(o->duration_s * 1e9);
		}
		ret = post_batch(r, n);
		if (ret != 0)
			return ret;
		r->posted += n;
		while (!req->done) {
			ret = window_pass(r, &stall_from);
			if (ret != 0)
				return ret;
		}
		now = op_clock_ns();
		if (r->done == 0)
			r->cold_ns = now - t_post;
		r->done += n;
		if (timed) {
			bench_hist_add_n(&r->hist, now - t_post, n);
			r->t_end = now;
		}
		if (req->status != 0 && r->err == 0) {
			r->err = req->status;
			snprintf(r->errmsg, sizeof(r->errmsg), "%s",
				 req->errmsg);
		}
		ret = r->err;
		if (deadline != 0 && now >= deadline)
			r->limit = r->posted;
		if (ret == 0 && o->stop != NULL && *o->stop)
			ret = -EINTR;
		if (o->progress && now > next_show) {
			show_progress(r);
			next_show = now + 500000000ULL;
		}
	}
	return ret;
}

/* Measure one size: warm-up, then the timed operations, a window deep. */
static int run_size(struct runner *r, struct bench_point *pt)
{
	int ret;

	size_begin(r);
	switch (r->o->model) {
	case BENCH_IMPLICIT:
		ret = run_implicit(r);
		break;
	case BENCH_BATCH:
		ret = run_batch(r);
		break;
	default:
		ret = run_explicit(r);
		break;
	}
	if (r->o->progress)
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

	tern__wire_put_u64(params, r->size);
	tern__wire_put_u64(params + 8, 0);
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
	err = tern__wire_get_u32(ack.params + 4);
	if (err != 0) {
		snprintf(why, whylen,
			 "the responder could not check its GPU region: %s",
			 tern_strerror(-(int)err));
		return -(int)err;
	}
	pt->verified = tern__wire_get_u32(ack.params) == 1 ? 1 : -1;
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
	/* --op register's writes go one at a time: no model. */
	if (o->op != BENCH_REGISTER)
		snprintf(c->model, sizeof(c->model), "%s",
			 bench_model_name(o->model));
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
/* How each rail to @peer fared during the run (several rails only). */
static void rails_summary(const struct tern_peer *peer, char *buf, size_t len)
{
	struct tern_peer_rail st[TERN_MAX_RAILS];
	int n = tern_peer_rails(peer, st, TERN_MAX_RAILS);
	size_t off = 0;
	int quiet = 1;

	buf[0] = '\0';
	if (n <= 1)
		return;
	for (int i = 0; i < n; i++)
		quiet &= st[i].up && st[i].downs == 0;
	if (quiet) {
		snprintf(buf, len, "%d up, none went down", n);
		return;
	}
	for (int i = 0; i < n && off < len; i++) {
		if (st[i].downs == 0)
			continue;
		off += (size_t)snprintf(
			buf + off, len - off,
			"%srail %d down %" PRIu64 " time(s), %" PRIu64
			" moved off it, %s",
			off != 0 ? "; " : "", i, st[i].downs, st[i].rerouted,
			st[i].up ? "up at the end" : "still down");
	}
}

static int hello(struct runner *r, struct app_msgbox *mb, uint64_t max_size,
		 enum tern_mr_path *peer_path, char *why, size_t whylen)
{
	uint8_t card[TERN_CARD_MAX], params[PARAMS_LEN];
	struct bench_params bp = {
		/* --op register's writes are writes to the responder. */
		.op = r->o->op == BENCH_REGISTER ? BENCH_WRITE
						 : (uint32_t)r->o->op,
		.window = r->o->window,
		.max_size = max_size,
		.seed = r->o->seed,
		.verify = (uint32_t)r->o->verify,
	};
	struct app_hello h = { .kind = APP_HELLO_BENCH }, ack;
	ssize_t n;
	int ret;

	bench_params_encode(&bp, params);
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
	if (r->batch != NULL)
		r->batch->region = ack.desc;
	r->peer_mem = (struct bench_mem){ .kind = TERN_MEM_HOST };
	*peer_path = TERN_MR_PATH_HOST;
	if (ack.params_len == MEMINFO_LEN) {
		uint32_t kind = tern__wire_get_u32(ack.params);
		uint32_t dev = tern__wire_get_u32(ack.params + 4);
		uint32_t path = tern__wire_get_u32(ack.params + 8);

		if (kind > TERN_MEM_SHARED || dev > 1023 ||
		    path > TERN_MR_PATH_STAGED) {
			snprintf(why, whylen,
				 "the bench responder's memory: kind %u, "
				 "device %u, path %u",
				 kind, dev, path);
			return -TERN_EPROTO;
		}
		r->peer_mem.shared = kind == TERN_MEM_SHARED;
		r->peer_mem.kind = kind == TERN_MEM_SHARED
					   ? TERN_MEM_HOST
					   : (enum tern_mem_kind)kind;
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

	tern__wire_put_u64(params, r->sent_total);
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
		uint64_t got = tern__wire_get_u64(ack.params);
		uint64_t bad = tern__wire_get_u64(ack.params + 8);
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

/* Every size in turn, a point each (with --verify, checked). */
static int run_sizes(struct runner *r, struct bench_report *rep,
		     struct tern_mr *chkmr, uint8_t *chk, char *why,
		     size_t whylen)
{
	const struct bench_opts *o = r->o;
	uint64_t atomics = 0;
	int ret = 0;

	for (size_t i = 0; i < o->nsizes && ret == 0; i++) {
		struct bench_point *pt = &rep->points[rep->npoints++];

		r->size = o->op == BENCH_ATOMIC ? 8 : o->sizes[i];
		ret = run_size(r, pt);
		atomics += r->posted;
		if (ret != 0) {
			snprintf(why, whylen, "%s of %" PRIu64 " bytes: %s%s%s",
				 bench_op_name(o->op), r->size,
				 tern_strerror(ret), r->errmsg[0] ? ": " : "",
				 r->errmsg);
			break;
		}
		if (o->verify)
			ret = verify_size(r, chkmr, chk, atomics, pt, why,
					  whylen);
		if (ret == 0 && pt->verified < 0) {
			snprintf(why, whylen,
				 "verification failed at %" PRIu64 " bytes",
				 r->size);
			ret = -TERN_EVERIFY;
		}
		if (o->op == BENCH_ATOMIC)
			break; /* one size: 8 bytes */
	}
	return ret;
}

/* The window (each entry's request initialised once, all of them free),
 * the implicit model's quiet, the batch model's request; what could not
 * be had is left NULL. */
static void runner_alloc(struct runner *r)
{
	const struct bench_opts *o = r->o;

	r->w = calloc(o->window, sizeof(*r->w));
	r->quiet = malloc(sizeof(*r->quiet));
	if (r->quiet != NULL)
		tern_req_init(r->quiet, NULL, NULL);
	if (o->model == BENCH_BATCH) {
		size_t len = sizeof(*r->batch) +
			     o->window * sizeof(struct tern_piece);

		r->batch = calloc(1, len);
		if (r->batch != NULL)
			tern_req_init(&r->batch->req, NULL, NULL);
	}
	/* Once: a completed request is posted again as it is (every post
	 * clears its results), as a user's loop would. */
	for (size_t i = 0; r->w != NULL && i < o->window; i++) {
		tern_req_init(&r->w[i].req, bop_done, NULL);
		r->w[i].run = r;
		r->w[i].next_free = r->free_bops;
		r->free_bops = &r->w[i];
	}
}

/* The local buffer of @max_size bytes of memory @name: allocated,
 * filled, registered (how long that took into @rep). */
static int runner_buffer(struct runner *r, struct bench_report *rep,
			 uint64_t max_size, const char *name, char *why,
			 size_t whylen)
{
	const struct bench_opts *o = r->o;
	int cuda = o->mem.kind == TERN_MEM_CUDA;
	void *buf = NULL;
	uint64_t t0;
	int ret;

	ret = bench_mem_alloc(bench_mem_alloc_kind(&o->mem), o->mem.device,
			      max_size, &buf);
	if (ret != 0) {
		snprintf(why, whylen, "allocating %" PRIu64 " bytes of %s: %s",
			 max_size, name, tern_strerror(ret));
		return ret;
	}
	r->buf = buf;
	/* Sources carry the pattern; a read's sink starts as zeros, so that
	 * only the reads can put the pattern there. */
	ret = bench_mem_fill(o->mem.kind, r->buf, max_size, o->op != BENCH_READ,
			     o->seed);
	if (ret != 0) {
		snprintf(why, whylen, "filling %s memory: %s", name,
			 tern_strerror(ret));
		return ret;
	}
	t0 = tern__now_ns();
	ret = tern_mr_regattr(
		r->ctx,
		&(struct tern_mr_attr){ .buf = r->buf,
					.len = max_size,
					.access = TERN_ACCESS_LOCAL,
					.kind = o->mem.kind,
					.device = cuda ? o->mem.device : -1 },
		&r->mr);
	rep->ctx.mr_reg_ms = (double)(tern__now_ns() - t0) / 1e6;
	rep->ctx.mr_bytes = max_size;
	if (ret != 0) {
		snprintf(why, whylen, "registering %" PRIu64 " bytes of %s: %s",
			 max_size, name, tern_strerror(ret));
		return ret;
	}
	snprintf(rep->ctx.path_local, sizeof(rep->ctx.path_local), "%s",
		 tern_mr_path_str(tern_mr_path(r->mr)));
	return 0;
}

int bench_run(struct tern_ctx *ctx, const void *card, size_t card_len,
	      const struct bench_opts *o, struct bench_report *rep, char *why,
	      size_t whylen)
{
	struct runner r = { .ctx = ctx, .o = o };
	enum tern_mr_path path = TERN_MR_PATH_HOST;
	char name[BENCH_MEM_NAME];
	struct tern_mr *chkmr = NULL;
	struct app_msgbox mb;
	uint64_t max_size = 8;
	uint8_t *chk = NULL;
	int ret;

	memset(rep, 0, sizeof(*rep));
	if (o->model == BENCH_IMPLICIT && bench_implicit_why(o->op) != NULL) {
		snprintf(why, whylen, "%s", bench_implicit_why(o->op));
		return -EINVAL;
	}
	if (o->model == BENCH_BATCH && bench_batch_why(o->op) != NULL) {
		snprintf(why, whylen, "%s", bench_batch_why(o->op));
		return -EINVAL;
	}
	fill_context(ctx, o, &rep->ctx);
	r.link_bps = rep->ctx.link_bps;
	for (size_t i = 0; i < o->nsizes; i++)
		max_size = TERN_MAX(max_size, o->sizes[i]);
	/* --op register: its sizes are address space it maps; the buffers
	 * here and the responder's region hold its writes. */
	if (o->op == BENCH_REGISTER)
		max_size = TERN_MIN(max_size, (uint64_t)BENCH_REG_WRITE);
	ret = app_msgbox_open(ctx, &mb);
	if (ret != 0)
		return ret;
	r.mb = &mb;
	bench_mem_name(&o->mem, name, sizeof(name));
	runner_alloc(&r);
	chk = bench_alloc_aligned(max_size);
	if (o->verify)
		r.pattern = bench_alloc_aligned(max_size);
	if (r.w == NULL || r.quiet == NULL || chk == NULL ||
	    (o->model == BENCH_BATCH && r.batch == NULL) ||
	    (o->verify && r.pattern == NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	if (o->verify)
		bench_mt_fill(r.pattern, max_size, o->seed);
	ret = runner_buffer(&r, rep, max_size, name, why, whylen);
	if (ret != 0)
		goto out;
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
	snprintf(rep->ctx.route, sizeof(rep->ctx.route), "%s",
		 tern_peer_path(r.peer) == TERN_PATH_LOCAL
			 ? "same host (local path)"
			 : "provider");
	tern_ctx_set_busy_poll(ctx, 1);
	if (o->op == BENCH_REGISTER)
		ret = bench_register(ctx, r.peer, &r.remote, max_size, o, rep,
				     &r.stuck, why, whylen);
	else
		ret = run_sizes(&r, rep, chkmr, chk, why, whylen);
	rails_summary(r.peer, rep->ctx.rails_state,
		      sizeof(rep->ctx.rails_state));
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
	tern_mem_free(bench_mem_alloc_kind(&o->mem), r.buf);
	free(r.pattern);
	free(r.w);
	free(r.quiet);
	free(r.batch);
	app_msgbox_close(&mb);
	return ret;
}
