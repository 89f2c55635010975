/* SPDX-License-Identifier: MIT */
/*
 * inproc: what tern's data path costs over libfabric's own calls, measured
 * in one process on one endpoint.
 *
 * bench/compare.sh runs `tern bench` and `raw` as separate process pairs.
 * On a shared VM the machine's state moves a single run by 10-25% (docs/
 * performance.md), and two runs are never in the same state. Here one
 * initiator alternates blocks of writes made two ways on the same tern
 * endpoint, the same registered buffers and the same target process:
 *
 *   tern  tern_write() and tern_progress(), as an application does;
 *   raw   fi_writemsg() and fi_cq_read() straight on that endpoint, the
 *         loop of bench/raw (batches of --batch posts with FI_MORE).
 *
 * Blocks run in ABBA pairs, a few milliseconds each, so both ways meet
 * the same machine; each pair gives one ratio of bandwidths (tern/raw),
 * and the median of the pairs is printed with a distribution-free 95%
 * confidence interval. --control adds the same measurement of tern against
 * tern: the floor of what this method can resolve on the machine.
 * --idle measures the pass that finds nothing, the one a waiting side
 * spins on: tern_progress() against a bare fi_cq_read() on the same rail,
 * connected, nothing in flight, in ABBA pairs of blocks.
 * --inject 1 (or 2) adds tern's writes with small writes injected
 * ($TERN_INJECT=1, or 2: also shm's queue for plain ones) against tern's
 * writes with none ($TERN_INJECT=0), switched block by block on the same
 * ctx: inj = bandwidth injecting / not (docs/performance.md).
 * --peer-loop adds tern's writes with the target switched, block by
 * block, between tern_wait() (as `tern bench --listen` waits) and the
 * bare fi_cq_read() loop of bench/raw's target: on shm the target's
 * progress is what copies the data, so its loop is on the data path.
 *
 * It reads tern's endpoint, completion queue and keys from the library's
 * internal structures (src/engine/engine.h, src/prov/prov.h): a benchmark of
 * the library, built with it, never installed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <tern/tern.h>

#include "common.h"
#include "engine/engine.h"

#define IP_MAX_SIZES  16
#define IP_MAX_PAIRS  100000
#define IP_MAX_WINDOW 4096
#define IP_CQ_BATCH   64
#define IP_MAX_SIZE   (1ULL << 30)

struct ip_opts {
	const char *prov;
	const char *node;
	uint64_t sizes[IP_MAX_SIZES];
	unsigned int nsizes;
	unsigned int window;
	unsigned int batch;
	unsigned int pairs;
	uint64_t block_bytes;
	int control;
	int inject; /* --inject 1|2: tern injecting against tern not */
	int peer_loop;
	int idle;
};

/*
 * Shared by the two processes (an anonymous shared page, mapped before the
 * fork): with --peer-loop the initiator sets @want, the loop the target
 * runs (0: tern_wait(), 1: a bare fi_cq_read() loop), and waits until the
 * target shows it in @have.
 */
struct ip_shared {
	int want;
	int have;
};

/* The initiator's state: tern's objects, and the same endpoint raw. */
struct ip {
	const struct ip_opts *o;
	struct ip_shared *sh;
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	struct tern_mr *mr;
	struct tern_mr_desc rdesc;
	uint8_t *buf;
	uint64_t max_size;

	/* tern's way: one request per slot in the window */
	struct tern_req *reqs;
	unsigned int *free; /* stack of free slots, shared by both ways */
	unsigned int nfree;
	uint64_t done;
	int err;

	/* raw's way, on tern's rail 0 */
	struct fid_ep *ep;
	struct fid_cq *cq;
	void *desc;
	fi_addr_t addr;
	uint64_t raddr, rkey;
	struct fi_context2 *fictx;
	unsigned int inflight;
	size_t inject_max0; /* the ctx's own, as $TERN_INJECT set them */
	int rma_queue0;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int full_io(int fd, void *p, size_t len, int wr)
{
	uint8_t *b = p;

	while (len > 0) {
		ssize_t n = wr ? write(fd, b, len) : read(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* --- the target: a child process with its own ctx ------------------------- */

/*
 * The loop of bench/raw's target: bare fi_cq_read() on the target's
 * completion queue, 1000 reads between looks at the pipe. A target of
 * plain writes gets no completions; one would be an error here.
 */
static int bare_loop(struct tern_ctx *ctx)
{
	struct fi_cq_data_entry ent[IP_CQ_BATCH];

	for (int i = 0; i < 1000; i++) {
		ssize_t n = fi_cq_read(ctx->rails[0].prov.cq, ent, IP_CQ_BATCH);

		if (n != -FI_EAGAIN)
			return n < 0 ? (int)n : -EPROTO;
	}
	return 0;
}

/*
 * Register a region of @max bytes for remote writes, hand the card and the
 * descriptor to the parent ([u32 len][card][u32 len][desc]), then progress
 * (tcp needs the target's progress) until the parent closes the pipe.
 */
static int target(const struct ip_opts *o, struct ip_shared *sh, uint64_t max,
		  int rfd, int wfd)
{
	/* It spins, as tern bench's peer and raw's do while they measure. */
	struct tern_ctx_attr attr = { .provider = o->prov,
				      .node = o->node,
				      .flags = TERN_CTX_BUSY_POLL };
	uint8_t card[TERN_CARD_MAX], desc[TERN_MR_DESC_MAX];
	struct tern_ctx *ctx = NULL;
	struct tern_mr *mr = NULL;
	struct tern_mr_desc d;
	uint32_t clen, dlen;
	void *region = NULL;
	ssize_t n;
	int ret;

	ret = tern_ctx_open(&attr, &ctx);
	if (ret == 0 && posix_memalign(&region, 4096, max) != 0)
		ret = -ENOMEM;
	if (ret == 0) {
		memset(region, 0, max);
		ret = tern_mr_reg(ctx, region, max, TERN_ACCESS_REMOTE_WRITE,
				  &mr);
	}
	if (ret == 0)
		ret = tern_mr_desc(mr, &d);
	n = ret == 0 ? tern_ctx_card(ctx, card, sizeof(card)) : ret;
	if (n < 0)
		ret = (int)n;
	clen = (uint32_t)n;
	n = ret == 0 ? tern_mr_desc_pack(&d, desc, sizeof(desc)) : ret;
	if (n < 0)
		ret = (int)n;
	dlen = (uint32_t)n;
	if (ret != 0) {
		fprintf(stderr, "inproc: target: %s\n", tern_strerror(ret));
		goto out;
	}
	if (full_io(wfd, &clen, 4, 1) || full_io(wfd, card, clen, 1) ||
	    full_io(wfd, &dlen, 4, 1) || full_io(wfd, desc, dlen, 1)) {
		ret = -EPIPE;
		goto out;
	}
	for (;;) {
		struct pollfd pfd = { .fd = rfd, .events = POLLIN };
		int mode = __atomic_load_n(&sh->want, __ATOMIC_ACQUIRE);

		__atomic_store_n(&sh->have, mode, __ATOMIC_RELEASE);
		ret = mode ? bare_loop(ctx) : tern_wait(ctx, NULL, 1);
		if (ret < 0 && ret != -ETIMEDOUT) {
			fprintf(stderr, "inproc: target: %s\n",
				tern_strerror(ret));
			break;
		}
		ret = 0;
		if (poll(&pfd, 1, 0) != 0)
			break; /* end of file: the parent is done (or gone) */
	}
out:
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(region);
	return ret == 0 ? 0 : 1;
}

/* --- tern's way ------------------------------------------------------------
 */

static void tern_done(struct tern_req *req)
{
	struct ip *p = req->data;

	if (req->status != 0 && p->err == 0) {
		p->err = req->status;
		fprintf(stderr, "inproc: tern write: %s%s%s\n",
			tern_strerror(req->status), req->errmsg[0] ? ": " : "",
			req->errmsg);
	}
	p->free[p->nfree++] = (unsigned int)(req - p->reqs);
	p->done++;
}

/* @count writes of @size, up to --window at a time. */
static int tern_block(struct ip *p, size_t size, uint64_t count)
{
	uint64_t posted = 0;

	p->done = 0;
	while (p->done < count && p->err == 0) {
		while (posted < count && p->nfree > 0) {
			unsigned int s = p->free[--p->nfree];
			int ret = tern_write(p->peer, p->mr, p->buf, size,
					     &p->rdesc, 0, &p->reqs[s]);

			if (ret != 0) {
				fprintf(stderr, "inproc: tern_write: %s\n",
					tern_strerror(ret));
				return ret;
			}
			posted++;
		}
		int n = tern_progress(p->ctx);

		if (n < 0) {
			fprintf(stderr, "inproc: tern_progress: %s\n",
				tern_strerror(n));
			return n;
		}
	}
	return p->err;
}

/* --- raw's way: bench/raw's loop on the same endpoint ----------------------
 */

static int raw_fail(const char *what, ssize_t ret)
{
	fprintf(stderr, "inproc: %s: %s\n", what, fi_strerror((int)-ret));
	return ret < 0 ? (int)ret : -EIO;
}

static int raw_reap(struct ip *p)
{
	struct fi_cq_data_entry ent[IP_CQ_BATCH];
	ssize_t n = fi_cq_read(p->cq, ent, IP_CQ_BATCH);

	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		n = fi_cq_readerr(p->cq, &err, 0);
		if (n < 0)
			return raw_fail("fi_cq_readerr", n);
		return raw_fail("raw write", -err.err);
	}
	if (n < 0)
		return raw_fail("fi_cq_read", n);
	for (ssize_t i = 0; i < n; i++) {
		struct fi_context2 *c = ent[i].op_context;

		/* Only raw's writes are out now: tern has drained. */
		if (c < p->fictx || c >= p->fictx + p->o->window)
			return raw_fail("completion with an unknown context",
					-FI_EOTHER);
		p->free[p->nfree++] = (unsigned int)(c - p->fictx);
		p->inflight--;
	}
	return 0;
}

static int raw_post(struct ip *p, size_t size, uint64_t flags)
{
	unsigned int s = p->free[--p->nfree];
	struct iovec iov = { .iov_base = p->buf, .iov_len = size };
	struct fi_rma_iov rma = { .addr = p->raddr,
				  .len = size,
				  .key = p->rkey };
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &p->desc,
		.iov_count = 1,
		.addr = p->addr,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = &p->fictx[s],
	};
	ssize_t ret;

	for (;;) {
		ret = fi_writemsg(p->ep, &msg, flags);
		if (ret != -FI_EAGAIN)
			break;
		flags &= ~FI_MORE; /* full: flush what it holds, make room */
		ret = raw_reap(p);
		if (ret < 0)
			break;
	}
	if (ret != 0) {
		p->free[p->nfree++] = s;
		return raw_fail("fi_writemsg", ret);
	}
	p->inflight++;
	return 0;
}

static int raw_block(struct ip *p, size_t size, uint64_t count)
{
	uint64_t posted = 0;
	int ret = 0;

	while (ret == 0 && (posted < count || p->inflight > 0)) {
		uint64_t n = p->o->window - p->inflight;

		if (n > p->o->batch)
			n = p->o->batch;
		if (n > count - posted)
			n = count - posted;
		for (uint64_t i = 0; i < n && ret == 0; i++)
			ret = raw_post(p, size, i + 1 < n ? FI_MORE : 0);
		posted += n;
		if (ret == 0)
			ret = raw_reap(p);
	}
	return ret;
}

/* --- measuring --------------------------------------------------------------
 */

/* One block one way (0: tern, 1: raw): its time in ns, or 0 on error. */
static uint64_t block(struct ip *p, int way, size_t size, uint64_t count)
{
	uint64_t t0 = now_ns();
	int ret = way ? raw_block(p, size, count) : tern_block(p, size, count);

	return ret == 0 ? TERN_MAX(now_ns() - t0, 1) : 0;
}

/* Have the target run loop @mode (struct ip_shared) from now on. */
static int peer_mode(struct ip *p, int mode)
{
	uint64_t until = now_ns() + 5000000000ULL;

	__atomic_store_n(&p->sh->want, mode, __ATOMIC_RELEASE);
	while (__atomic_load_n(&p->sh->have, __ATOMIC_ACQUIRE) != mode) {
		if (now_ns() > until) {
			fprintf(stderr, "inproc: the target does not answer\n");
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* A block of tern's writes with small writes injected (@on: --inject's
 * mode) or not: the ctx's and the rail's switches, as $TERN_INJECT sets
 * them at open. */
static uint64_t inject_block(struct ip *p, int on, size_t size, uint64_t count)
{
	struct tern_rail *rail = &p->ctx->rails[0];

	p->ctx->inject_max = on ? p->ctx->caps.inject_size : 0;
	rail->prov.rma_queue = on && p->o->inject == 2 &&
			       strcmp(p->ctx->caps.prov_name, "shm") == 0;
	return block(p, 0, size, count);
}

/* A block of tern's writes with the target on loop @mode. */
static uint64_t peer_block(struct ip *p, int mode, size_t size, uint64_t count)
{
	return peer_mode(p, mode) == 0 ? block(p, 0, size, count) : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sort @v and give its median and a distribution-free 95% CI of it
 * (order statistics k and n+1-k, k = floor((n - 1.96 sqrt(n)) / 2), as
 * bench/compare.sh; min and max below 6 values). */
static void median_ci(double *v, unsigned int n, double *med, double *lo,
		      double *hi)
{
	int k;

	qsort(v, n, sizeof(*v), cmp_double);
	*med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	k = (int)((n - 1.96 * sqrt(n)) / 2);
	if (k < 1)
		k = 1;
	*lo = v[k - 1];
	*hi = v[n - k];
}

/*
 * One size: a warm-up block each way, then --pairs ABBA pairs of tern and
 * raw (and with --control, of tern and tern). Prints one line.
 */
static int measure(struct ip *p, size_t size, double *ratio, double *tbw,
		   double *rbw, double *ctl, double *pl, double *inj)
{
	const struct ip_opts *o = p->o;
	unsigned int n = o->pairs;
	uint64_t count = o->block_bytes / size;
	double med[3], lo[3], hi[3];

	count = TERN_MIN(TERN_MAX(count, 16), 20000);
	if (block(p, 0, size, count) == 0 || block(p, 1, size, count) == 0)
		return -EIO;
	for (unsigned int i = 0; i < n; i++) {
		int first = i % 2; /* pair i: tern then raw, or raw then tern */
		uint64_t t[2];

		t[first] = block(p, first, size, count);
		t[!first] = block(p, !first, size, count);
		if (t[0] == 0 || t[1] == 0)
			return -EIO;
		/* bandwidth tern/raw = time raw / time tern */
		ratio[i] = (double)t[1] / (double)t[0];
		tbw[i] = (double)size * 8 * (double)count / (double)t[0];
		rbw[i] = (double)size * 8 * (double)count / (double)t[1];
		if (o->control) {
			t[0] = block(p, 0, size, count);
			t[1] = block(p, 0, size, count);
			if (t[0] == 0 || t[1] == 0)
				return -EIO;
			ctl[i] = first ? (double)t[1] / (double)t[0]
				       : (double)t[0] / (double)t[1];
		}
		if (o->inject) {
			t[first] = inject_block(p, first, size, count);
			t[!first] = inject_block(p, !first, size, count);
			if (t[0] == 0 || t[1] == 0)
				return -EIO;
			inj[i] = (double)t[0] / (double)t[1];
			p->ctx->inject_max = p->inject_max0;
			p->ctx->rails[0].prov.rma_queue = p->rma_queue0;
		}
		if (o->peer_loop) {
			/* tern's writes, the target on tern_wait() or bare */
			t[first] = peer_block(p, first, size, count);
			t[!first] = peer_block(p, !first, size, count);
			if (t[0] == 0 || t[1] == 0 || peer_mode(p, 0) != 0)
				return -EIO;
			pl[i] = (double)t[1] / (double)t[0];
		}
	}
	median_ci(ratio, n, &med[0], &lo[0], &hi[0]);
	median_ci(tbw, n, &med[1], &lo[1], &hi[1]);
	median_ci(rbw, n, &med[2], &lo[2], &hi[2]);
	printf("inproc write size=%zu ops=%" PRIu64 " pairs=%u tern_gbps=%.3f "
	       "raw_gbps=%.3f tern_mpps=%.4f raw_mpps=%.4f ratio=%.3f "
	       "lo=%.3f hi=%.3f",
	       size, count, n, med[1], med[2], med[1] * 1e3 / 8 / (double)size,
	       med[2] * 1e3 / 8 / (double)size, med[0], lo[0], hi[0]);
	if (o->control) {
		median_ci(ctl, n, &med[0], &lo[0], &hi[0]);
		printf(" control=%.3f control_lo=%.3f control_hi=%.3f", med[0],
		       lo[0], hi[0]);
	}
	if (o->inject) {
		median_ci(inj, n, &med[0], &lo[0], &hi[0]);
		printf(" inj=%.3f inj_lo=%.3f inj_hi=%.3f", med[0], lo[0],
		       hi[0]);
	}
	if (o->peer_loop) {
		median_ci(pl, n, &med[0], &lo[0], &hi[0]);
		printf(" peer=%.3f peer_lo=%.3f peer_hi=%.3f", med[0], lo[0],
		       hi[0]);
	}
	printf("\n");
	fflush(stdout);
	return 0;
}

/* @passes empty passes one way (0: tern_progress(), 1: fi_cq_read() on
 * the same CQ); @return ns per pass, or <0 when one found something. */
static double idle_block(struct ip *p, int way, unsigned int passes)
{
	struct fi_cq_data_entry ent[IP_CQ_BATCH];
	uint64_t t0 = now_ns();

	for (unsigned int i = 0; i < passes; i++) {
		if (way == 0) {
			if (tern_progress(p->ctx) != 0)
				return -1;
		} else if (fi_cq_read(p->cq, ent, IP_CQ_BATCH) != -FI_EAGAIN) {
			return -1;
		}
	}
	return (double)(now_ns() - t0) / passes;
}

/*
 * The idle pass: blocks of about 2 ms each way in --pairs ABBA pairs.
 * Prints ns per pass each way and the per-pair difference tern - raw.
 */
static int measure_idle(struct ip *p, double *diff, double *tns, double *rns)
{
	unsigned int n = p->o->pairs, passes = 1000;
	double med[3], lo[3], hi[3], warm = idle_block(p, 0, passes);

	if (warm < 0 || idle_block(p, 1, passes) < 0)
		return -EIO;
	/* About 2 ms a block: 1000 passes on tcp, 100000 on shm. */
	passes = (unsigned int)TERN_MIN(
		TERN_MAX(2e6 / TERN_MAX(warm, 1.0), 1000.0), 1e6);
	for (unsigned int i = 0; i < n; i++) {
		int first = i % 2;
		double t[2];

		t[first] = idle_block(p, first, passes);
		t[!first] = idle_block(p, !first, passes);
		if (t[0] < 0 || t[1] < 0)
			return -EIO;
		diff[i] = t[0] - t[1];
		tns[i] = t[0];
		rns[i] = t[1];
	}
	median_ci(diff, n, &med[0], &lo[0], &hi[0]);
	median_ci(tns, n, &med[1], &lo[1], &hi[1]);
	median_ci(rns, n, &med[2], &lo[2], &hi[2]);
	printf("inproc idle passes=%u pairs=%u tern_ns=%.1f raw_ns=%.1f "
	       "diff_ns=%.1f lo=%.1f hi=%.1f\n",
	       passes, n, med[1], med[2], med[0], lo[0], hi[0]);
	fflush(stdout);
	return 0;
}

static int initiator(const struct ip_opts *o, struct ip_shared *sh,
		     uint64_t max, int rfd)
{
	/* No wait fd on the CQ, as tern bench and raw (FI_WAIT_NONE). */
	struct tern_ctx_attr attr = { .provider = o->prov,
				      .node = o->node,
				      .flags = TERN_CTX_BUSY_POLL };
	uint8_t card[TERN_CARD_MAX], desc[TERN_MR_DESC_MAX];
	struct ip p = { .o = o, .sh = sh, .max_size = max };
	double *v = NULL;
	uint32_t clen, dlen;
	ssize_t n;
	int ret;

	ret = full_io(rfd, &clen, 4, 0);
	if (ret == 0 && clen > sizeof(card))
		ret = -EPROTO;
	if (ret == 0)
		ret = full_io(rfd, card, clen, 0);
	if (ret == 0)
		ret = full_io(rfd, &dlen, 4, 0);
	if (ret == 0 && dlen > sizeof(desc))
		ret = -EPROTO;
	if (ret == 0)
		ret = full_io(rfd, desc, dlen, 0);
	if (ret != 0) {
		fprintf(stderr, "inproc: no card from the target process\n");
		return ret;
	}
	ret = tern_ctx_open(&attr, &p.ctx);
	if (ret != 0) {
		fprintf(stderr, "inproc: tern_ctx_open: %s\n",
			tern_strerror(ret));
		return ret;
	}
	if (posix_memalign((void **)&p.buf, 4096, max) != 0)
		ret = -ENOMEM;
	p.reqs = calloc(o->window, sizeof(*p.reqs));
	p.free = calloc(o->window, sizeof(*p.free));
	p.fictx = calloc(o->window, sizeof(*p.fictx));
	v = calloc(6 * (size_t)o->pairs, sizeof(*v));
	if (ret == 0 && (!p.reqs || !p.free || !p.fictx || !v))
		ret = -ENOMEM;
	if (ret == 0) {
		for (uint64_t i = 0; i < max; i++)
			p.buf[i] = (uint8_t)(i * 131 + 7);
		ret = tern_mr_reg(p.ctx, p.buf, max, TERN_ACCESS_LOCAL, &p.mr);
	}
	if (ret == 0)
		ret = tern_peer_add(p.ctx, card, clen, &p.peer);
	if (ret == 0) {
		n = tern_mr_desc_unpack(desc, dlen, &p.rdesc);
		ret = n < 0 ? (int)n : 0;
	}
	if (ret != 0) {
		fprintf(stderr, "inproc: setting up: %s\n", tern_strerror(ret));
		goto out;
	}
	if (p.ctx->nrails != 1) {
		fprintf(stderr, "inproc: one rail only\n");
		ret = -EINVAL;
		goto out;
	}
	p.ep = p.ctx->rails[0].prov.ep;
	p.cq = p.ctx->rails[0].prov.cq;
	p.desc = p.mr->desc[0];
	p.addr = p.peer->fiaddr[0];
	p.raddr = tern__raddr(&p.rdesc, 0);
	p.rkey = p.rdesc.keys[0];
	p.inject_max0 = p.ctx->inject_max;
	p.rma_queue0 = p.ctx->rails[0].prov.rma_queue;
	for (unsigned int i = 0; i < o->window; i++) {
		tern_req_init(&p.reqs[i], tern_done, &p);
		p.free[p.nfree++] = i;
	}
	printf("inproc: provider %s, window %u, raw batch %u, %u ABBA pairs "
	       "of blocks of about %" PRIu64 " bytes per size%s\n",
	       p.ctx->caps.prov_name, o->window, o->batch, o->pairs,
	       o->block_bytes,
	       o->control ? ", with the tern/tern control" : "");
	for (unsigned int k = 0; k < o->nsizes && ret == 0; k++)
		ret = measure(
			&p, (size_t)o->sizes[k], v, v + o->pairs,
			v + 2 * (size_t)o->pairs, v + 3 * (size_t)o->pairs,
			v + 4 * (size_t)o->pairs, v + 5 * (size_t)o->pairs);
	if (ret == 0 && o->idle) {
		ret = measure_idle(&p, v, v + o->pairs,
				   v + 2 * (size_t)o->pairs);
		if (ret != 0)
			fprintf(stderr, "inproc: --idle: a pass found a "
					"completion (nothing was in flight)\n");
	}
out:
	if (p.peer != NULL)
		tern_peer_remove(p.peer);
	tern_mr_close(p.mr);
	tern_ctx_close(p.ctx);
	free(p.buf);
	free(p.reqs);
	free(p.free);
	free(p.fictx);
	free(v);
	return ret;
}

/* --- options and main --------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inproc [--provider shm|tcp] [--node ADDR] "
		"[--sizes 8,4K,64K,1M,16M]\n"
		"              [--window 64] [--batch 16] [--pairs 40] "
		"[--block-bytes 32M] [--control]\n"
		"              [--inject 1|2] [--peer-loop] [--idle]\n"
		"tern_write()/tern_progress() against fi_writemsg()/"
		"fi_cq_read() on the same tern\n"
		"endpoint, in alternating blocks of one process; prints the "
		"per-pair ratio\n"
		"tern/raw of bandwidth, median [95%% CI], per size.\n"
		"  --control    also tern against tern: what the method "
		"resolves\n"
		"  --inject M   also tern with small writes injected "
		"($TERN_INJECT=M) against\n"
		"               tern without (inj=: bandwidth with / "
		"without)\n"
		"  --peer-loop  also tern's writes with the target on "
		"tern_wait() against\n"
		"               a bare fi_cq_read() loop (peer=): what "
		"tern's passive side\n"
		"               costs (on shm the target's progress does "
		"the copy)\n"
		"TERN_BENCH_CPUS=A,B runs the initiator on CPU A, the target "
		"on B.\n");
}

static int parse_uint(const char *name, const char *s, unsigned long max,
		      unsigned int *v)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(s, &end, 10);
	if (errno || *end || end == s || *s == '-' || x == 0 || x > max) {
		fprintf(stderr, "inproc: %s: '%s' is not a number in 1..%lu\n",
			name, s, max);
		return -1;
	}
	*v = (unsigned int)x;
	return 0;
}

static int parse_sizes(const char *arg, struct ip_opts *o)
{
	char *list = strdup(arg), *save = NULL;
	int ret = 0;

	if (list == NULL)
		return -1;
	o->nsizes = 0;
	for (char *t = strtok_r(list, ",", &save); t && ret == 0;
	     t = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (tern_parse_size(t, &v) != 0 || v == 0 || v > IP_MAX_SIZE) {
			fprintf(stderr,
				"inproc: --sizes: bad size '%s' "
				"(1 B to 1 GiB)\n",
				t);
			ret = -1;
		} else if (o->nsizes == IP_MAX_SIZES) {
			fprintf(stderr, "inproc: --sizes: at most %d\n",
				IP_MAX_SIZES);
			ret = -1;
		} else {
			o->sizes[o->nsizes++] = v;
		}
	}
	free(list);
	if (ret == 0 && o->nsizes == 0) {
		fprintf(stderr, "inproc: --sizes: empty\n");
		ret = -1;
	}
	return ret;
}

static int parse_opts(int argc, char **argv, struct ip_opts *o)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "batch", required_argument, NULL, 'b' },
		{ "pairs", required_argument, NULL, 'P' },
		{ "block-bytes", required_argument, NULL, 'B' },
		{ "control", no_argument, NULL, 'c' },
		{ "inject", required_argument, NULL, 'j' },
		{ "peer-loop", no_argument, NULL, 'L' },
		{ "idle", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct ip_opts){ .prov = "shm",
			       .window = 64,
			       .batch = 16,
			       .pairs = 40,
			       .block_bytes = 32ULL << 20 };
	parse_sizes("8,4K,64K,1M,16M", o);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->prov = optarg;
			break;
		case 'n':
			o->node = optarg;
			break;
		case 's':
			if (parse_sizes(optarg, o) != 0)
				return -1;
			break;
		case 'w':
			if (parse_uint("--window", optarg, IP_MAX_WINDOW,
				       &o->window) != 0)
				return -1;
			break;
		case 'b':
			if (parse_uint("--batch", optarg, IP_MAX_WINDOW,
				       &o->batch) != 0)
				return -1;
			break;
		case 'P':
			if (parse_uint("--pairs", optarg, IP_MAX_PAIRS,
				       &o->pairs) != 0)
				return -1;
			break;
		case 'B':
			if (tern_parse_size(optarg, &o->block_bytes) != 0 ||
			    o->block_bytes == 0 ||
			    o->block_bytes > IP_MAX_SIZE) {
				fprintf(stderr,
					"inproc: --block-bytes: bad "
					"size '%s' (1 B to 1 GiB)\n",
					optarg);
				return -1;
			}
			break;
		case 'c':
			o->control = 1;
			break;
		case 'j':
			if (strcmp(optarg, "1") != 0 &&
			    strcmp(optarg, "2") != 0) {
				fprintf(stderr, "inproc: --inject: 1 or 2\n");
				return -1;
			}
			o->inject = optarg[0] - '0';
			break;
		case 'L':
			o->peer_loop = 1;
			break;
		case 'I':
			o->idle = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "inproc: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	/* tcp over loopback unless told otherwise, as tern bench does */
	if (o->node == NULL && strncmp(o->prov, "tcp", 3) == 0)
		o->node = "127.0.0.1";
	return 0;
}

int main(int argc, char **argv)
{
	struct ip_opts o;
	int to_child[2], to_parent[2], status, ret;
	struct ip_shared *sh;
	uint64_t max = 0;
	pid_t pid;

	if (parse_opts(argc, argv, &o) != 0)
		return 2;
	for (unsigned int i = 0; i < o.nsizes; i++)
		max = TERN_MAX(max, o.sizes[i]);
	signal(SIGPIPE, SIG_IGN);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("inproc: mmap");
		return 1;
	}
	if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
		perror("inproc: pipe");
		return 1;
	}
	/* Fork before either side opens libfabric. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("inproc: fork");
		return 1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		bench_split_cpus("inproc", 1);
		close(to_child[1]);
		close(to_parent[0]);
		_exit(target(&o, sh, max, to_child[0], to_parent[1]));
	}
	bench_split_cpus("inproc", 0);
	close(to_child[0]);
	close(to_parent[1]);
	ret = initiator(&o, sh, max, to_parent[0]);
	close(to_child[1]); /* end of file: the target stops */
	close(to_parent[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		fprintf(stderr, "inproc: the target process failed\n");
		ret = -EIO;
	}
	return ret == 0 ? 0 : 1;
}
