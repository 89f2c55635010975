/* SPDX-License-Identifier: MIT */
/*
 * raw: the reference that `tern bench` is measured against. It does the
 * same work straight on libfabric, written the way a careful user would by
 * hand: one process pair (the parent initiates, a forked child is the
 * target), an RDM endpoint each, names and keys exchanged through pipes,
 * and (write) one message each way over the fabric before the writes, as
 * tern bench's control exchange sends (--no-handshake: none).
 *
 *   --op write     windowed RMA writes, like fabtests' fi_rma_bw
 *   --op pingpong  send/receive round trips, like fi_rdm_pingpong
 *
 * Deliberately standalone: no tern code, so nothing of tern's is measured.
 * The command line is raw_opts.c's (raw.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "../common.h"
#include "raw.h"

#define RAW_FI_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define RAW_NAME_MAX   256 /* endpoint name bytes */

/* Completions per fi_cq_read, and empty reads between looks at the pipe. */
#define RAW_CQ_BATCH   64
#define RAW_TAG	       0x7465726eULL /* the tag tern puts on its messages */
#define RAW_PEEK_EVERY 1000
#define RAW_HS_LEN     8 /* the handshake's messages */

/* Writes above RAW_BIG_SIZE move about RAW_BIG_BYTES per size. */
#define RAW_BIG_SIZE  65536
#define RAW_BIG_BYTES (1ul << 30)

/* Bytes on the pipes after the start-up exchange. */
#define RAW_MSG_READY 'R' /* target: receive posted for the next size */
#define RAW_MSG_DONE  'D' /* either side: finished */

/* What each side tells the other through its pipe once its endpoint is up. */
struct raw_hello {
	uint32_t namelen;
	uint8_t name[RAW_NAME_MAX];
	uint64_t addr; /* target buffer as the initiator names it (write) */
	uint64_t key;  /* its remote key (write) */
};

struct raw {
	const struct raw_opts *o;
	int initiator;
	pid_t ppid; /* the parent, as the child checks for it */
	int rfd;    /* pipe from the peer */
	int wfd;    /* pipe to the peer */

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	fi_addr_t peer;

	uint8_t *buf; /* write: source or target; pingpong: [recv | send] */
	size_t maxsize;
	void *desc;
	uint64_t raddr; /* the peer's target buffer (write initiator) */
	uint64_t rkey;

	/* Write: one context per operation in flight, and a stack of the
	 * free ones (completions may come back in any order). */
	struct fi_context2 *ctxs;
	uint64_t *t_post; /* per slot: when it was posted */
	uint64_t lat_sum; /* post-to-completion, ns, like tern bench */
	uint64_t lat_n;
	uint64_t lat_log2[64];
	size_t *free;
	size_t nfree;
	size_t inflight;

	/* Pingpong: one receive and one send at a time. */
	struct fi_context2 rctx;
	struct fi_context2 sctx;
	size_t rsize; /* length the posted receive must deliver */
	uint64_t nrx;
	uint64_t ntx;

	unsigned long idle; /* empty CQ reads */
	int done;	    /* target: the initiator said done */
	struct fi_cq_data_entry comp[RAW_CQ_BATCH];
};

static int fail(const char *what, long ret)
{
	fprintf(stderr, "raw: %s: %s\n", what, fi_strerror((int)-ret));
	return ret < 0 ? (int)ret : -FI_EOTHER;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- the pipes ------------------------------------------------------------ */

static int write_full(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len > 0) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("writing to the peer's pipe", -errno);
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_full(int fd, void *p, size_t len)
{
	uint8_t *b = p;

	while (len > 0) {
		ssize_t n = read(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("reading the peer's pipe", -errno);
		if (n == 0)
			return fail("peer process went away", -FI_ECONNRESET);
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_msg(struct raw *r, char msg)
{
	return write_full(r->wfd, &msg, 1);
}

static int expect_msg(struct raw *r, char want)
{
	char msg;
	int ret = read_full(r->rfd, &msg, 1);

	if (ret == 0 && msg != want)
		ret = fail("unexpected message from the peer", -FI_EOTHER);
	return ret;
}

/*
 * Between empty CQ reads: is the peer still there? A "done" for the target
 * is noted; anything else, or end of file, is an error.
 */
static int check_peer(struct raw *r)
{
	struct pollfd pfd = { .fd = r->rfd, .events = POLLIN };
	char msg;
	ssize_t n;

	if (!r->initiator && getppid() != r->ppid)
		return fail("parent process went away", -FI_ECONNRESET);
	n = poll(&pfd, 1, 0);
	if (n < 0 && errno != EINTR)
		return fail("poll", -errno);
	if (n <= 0)
		return 0;
	n = read(r->rfd, &msg, 1);
	if (n < 0 && errno == EINTR)
		return 0;
	if (n < 0)
		return fail("reading the peer's pipe", -errno);
	if (n == 0)
		return fail("peer process went away", -FI_ECONNRESET);
	if (!r->initiator && msg == RAW_MSG_DONE) {
		r->done = 1;
		return 0;
	}
	return fail("unexpected message from the peer", -FI_EOTHER);
}

/* --- completions ---------------------------------------------------------- */

static int cq_error(struct raw *r)
{
	struct fi_cq_err_entry err = { 0 };
	ssize_t ret = fi_cq_readerr(r->cq, &err, 0);

	if (ret < 0)
		return fail("fi_cq_readerr", ret);
	fprintf(stderr, "raw: completion: %s (%s)\n", fi_strerror(err.err),
		fi_cq_strerror(r->cq, err.prov_errno, err.err_data, NULL, 0));
	return err.err > 0 ? -err.err : -FI_EOTHER;
}

static int complete(struct raw *r, const struct fi_cq_data_entry *e)
{
	struct fi_context2 *c = e->op_context;

	if (c == &r->rctx) {
		if (e->len != r->rsize)
			return fail("receive of the wrong length", -FI_EOTHER);
		r->nrx++;
		return 0;
	}
	if (c == &r->sctx) {
		r->ntx++;
		return 0;
	}
	if (r->ctxs == NULL || c < r->ctxs || c >= r->ctxs + r->o->window)
		return fail("completion with an unknown context", -FI_EOTHER);
	/* Time every operation, as tern bench does: the same work. */
	{
		uint64_t lat = now_ns() - r->t_post[c - r->ctxs];

		r->lat_sum += lat;
		r->lat_n++;
		r->lat_log2[lat ? 63 - __builtin_clzll(lat) : 0]++;
	}
	r->free[r->nfree++] = (size_t)(c - r->ctxs);
	r->inflight--;
	return 0;
}

/* One fi_cq_read: take what completed; now and then, look at the peer. */
static int reap(struct raw *r)
{
	ssize_t n = fi_cq_read(r->cq, r->comp, RAW_CQ_BATCH);
	int ret;

	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			ret = complete(r, &r->comp[i]);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	if (n == -FI_EAGAIN) {
		if (!r->initiator && r->o->op == RAW_OP_WRITE)
			bench_pause(r->o->target_pause);
		if (++r->idle % RAW_PEEK_EVERY == 0)
			return check_peer(r);
		return 0;
	}
	if (n == -FI_EAVAIL)
		return cq_error(r);
	return fail("fi_cq_read", n);
}

/* --- posting -------------------------------------------------------------- */

/* One write from the source buffer to offset 0 of the target's. */
static int post_write(struct raw *r, size_t size, uint64_t flags)
{
	size_t slot = r->free[--r->nfree];
	struct iovec iov = { .iov_base = r->buf, .iov_len = size };

	r->t_post[slot] = now_ns();
	struct fi_rma_iov rma = { .addr = r->raddr,
				  .len = size,
				  .key = r->rkey };
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &r->desc,
		.iov_count = 1,
		.addr = r->peer,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.context = &r->ctxs[slot],
	};
	ssize_t ret;

	for (;;) {
		ret = fi_writemsg(r->ep, &msg, flags);
		if (ret != -FI_EAGAIN)
			break;
		/* Full: end the batch here so the provider flushes what it
		 * holds, and make room. */
		flags &= ~FI_MORE;
		ret = reap(r);
		if (ret < 0)
			break;
	}
	if (ret != 0) {
		r->free[r->nfree++] = slot;
		return fail("fi_writemsg", ret);
	}
	r->inflight++;
	return 0;
}

static int post_recv(struct raw *r, size_t size)
{
	ssize_t ret;

	r->rsize = size;
	for (;;) {
		ret = r->o->tagged
			      ? fi_trecv(r->ep, r->buf, size, r->desc,
					 FI_ADDR_UNSPEC, RAW_TAG, 0, &r->rctx)
			      : fi_recv(r->ep, r->buf, size, r->desc, r->peer,
					&r->rctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = reap(r);
		if (ret < 0)
			return ret;
	}
	return ret == 0 ? 0 : fail("fi_recv", ret);
}

static int post_send(struct raw *r, size_t size)
{
	ssize_t ret;

	for (;;) {
		ret = r->o->tagged
			      ? fi_tsend(r->ep, r->buf + r->maxsize, size,
					 r->desc, r->peer, RAW_TAG, &r->sctx)
			      : fi_send(r->ep, r->buf + r->maxsize, size,
					r->desc, r->peer, &r->sctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = reap(r);
		if (ret < 0)
			return ret;
	}
	return ret == 0 ? 0 : fail("fi_send", ret);
}

static int wait_rx(struct raw *r, uint64_t want)
{
	int ret = 0;

	while (ret == 0 && r->nrx < want)
		ret = reap(r);
	return ret;
}

static int wait_tx(struct raw *r, uint64_t want)
{
	int ret = 0;

	while (ret == 0 && r->ntx < want)
		ret = reap(r);
	return ret;
}

/* --- the two operations --------------------------------------------------- */

static long iters_for(const struct raw_opts *o, size_t size)
{
	if (o->iters >= 0)
		return o->iters;
	if (o->op == RAW_OP_PINGPONG)
		return 10000;
	if (size <= RAW_BIG_SIZE)
		return 20000;
	/* About a GiB at most, so a size stays well under a second. */
	if (size >= RAW_BIG_BYTES / 20)
		return 20;
	if (size <= RAW_BIG_BYTES / 200)
		return 200;
	return (long)(RAW_BIG_BYTES / size);
}

static long warmup_for(const struct raw_opts *o, long iters)
{
	if (o->warmup >= 0)
		return o->warmup;
	return iters / 10 > 10 ? iters / 10 : 10;
}

/* Keep up to --window writes in flight until @count have completed. */
static int write_run(struct raw *r, size_t size, uint64_t count)
{
	const struct raw_opts *o = r->o;
	uint64_t posted = 0;
	int ret = 0;

	while (ret == 0 && (posted < count || r->inflight > 0)) {
		size_t n = o->window - r->inflight;

		if (n > o->batch)
			n = o->batch;
		if (n > count - posted)
			n = (size_t)(count - posted);
		for (size_t i = 0; i < n && ret == 0; i++)
			ret = post_write(r, size, i + 1 < n ? FI_MORE : 0);
		posted += n;
		if (ret == 0)
			ret = reap(r);
	}
	return ret;
}

static int write_initiator(struct raw *r)
{
	const struct raw_opts *o = r->o;

	for (unsigned int k = 0; k < o->nsizes; k++) {
		size_t size = o->sizes[k];
		long iters = iters_for(o, size);
		uint64_t t0, t1;
		double s;
		int ret;

		ret = write_run(r, size, (uint64_t)warmup_for(o, iters));
		if (ret < 0)
			return ret;
		t0 = now_ns();
		ret = write_run(r, size, (uint64_t)iters);
		if (ret < 0)
			return ret;
		t1 = now_ns();
		s = (double)(t1 - t0) / 1e9;
		printf("raw write size=%zu ops=%ld seconds=%.6f gbps=%.3f "
		       "mpps=%.6f lat_avg_us=%.3f\n",
		       size, iters, s,
		       s > 0 ? (double)size * 8 * (double)iters / s / 1e9 : 0,
		       s > 0 ? (double)iters / s / 1e6 : 0,
		       r->lat_n ? (double)r->lat_sum / (double)r->lat_n / 1e3
				: 0);
		r->lat_sum = r->lat_n = 0;
		fflush(stdout);
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile of @n sorted round trips, as half a round trip in us. */
static double half_rtt_us(const uint64_t *rtt, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return (double)rtt[i < n ? i : n - 1] / 2e3;
}

/*
 * Each round trip: receive armed, clock started, send, wait for the
 * answer, clock stopped; then the send's own completion, untimed.
 */
static int pingpong_initiator(struct raw *r)
{
	const struct raw_opts *o = r->o;
	uint64_t *rtt = NULL;
	long most = 0;
	int ret = 0;

	for (unsigned int k = 0; k < o->nsizes; k++) {
		long iters = iters_for(o, o->sizes[k]);

		if (iters > most)
			most = iters;
	}
	if (most > 0) {
		rtt = malloc(sizeof(*rtt) * (size_t)most);
		if (rtt == NULL)
			return fail("round-trip times", -FI_ENOMEM);
	}
	for (unsigned int k = 0; k < o->nsizes && ret == 0; k++) {
		size_t size = o->sizes[k];
		long iters = iters_for(o, size);
		long n = warmup_for(o, iters) + iters;
		/* Counts, not flags: the next receive may complete while
		 * this send's completion is awaited. */
		uint64_t rx0 = r->nrx, tx0 = r->ntx;

		ret = expect_msg(r, RAW_MSG_READY);
		for (long i = 0; i < n && ret == 0; i++) {
			uint64_t t0;

			ret = post_recv(r, size);
			t0 = now_ns();
			if (ret == 0)
				ret = post_send(r, size);
			if (ret == 0)
				ret = wait_rx(r, rx0 + (uint64_t)i + 1);
			if (ret == 0 && i >= n - iters)
				rtt[i - (n - iters)] = now_ns() - t0;
			if (ret == 0)
				ret = wait_tx(r, tx0 + (uint64_t)i + 1);
		}
		if (ret != 0 || iters == 0)
			continue;
		qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_u64);
		printf("raw pingpong size=%zu iters=%ld p50_us=%.3f "
		       "p99_us=%.3f min_us=%.3f\n",
		       size, iters, half_rtt_us(rtt, (size_t)iters, 0.5),
		       half_rtt_us(rtt, (size_t)iters, 0.99),
		       half_rtt_us(rtt, (size_t)iters, 0));
		fflush(stdout);
	}
	free(rtt);
	return ret;
}

/* The target's half: armed for the next before answering. */
static int pingpong_target(struct raw *r)
{
	const struct raw_opts *o = r->o;
	int ret = 0;

	for (unsigned int k = 0; k < o->nsizes && ret == 0; k++) {
		size_t size = o->sizes[k];
		long iters = iters_for(o, size);
		long n = warmup_for(o, iters) + iters;
		/* Counts, not flags: the next receive may complete while
		 * this send's completion is awaited. */
		uint64_t rx0 = r->nrx, tx0 = r->ntx;

		if (n > 0)
			ret = post_recv(r, size);
		if (ret == 0)
			ret = send_msg(r, RAW_MSG_READY);
		for (long i = 0; i < n && ret == 0; i++) {
			ret = wait_rx(r, rx0 + (uint64_t)i + 1);
			if (ret == 0 && i + 1 < n)
				ret = post_recv(r, size);
			if (ret == 0)
				ret = post_send(r, size);
			if (ret == 0)
				ret = wait_tx(r, tx0 + (uint64_t)i + 1);
		}
	}
	return ret;
}

/* --- setting up and tearing down ------------------------------------------ */

static int get_info(struct raw *r)
{
	const struct raw_opts *o = r->o;
	struct fi_info *hints, *all = NULL, *fi;
	int ret;

	hints = fi_allocinfo();
	if (hints == NULL)
		return fail("fi_allocinfo", -FI_ENOMEM);
	hints->caps = FI_MSG | FI_RMA | (o->tagged ? FI_TAGGED : 0);
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(o->prov);
	if (hints->fabric_attr->prov_name == NULL) {
		fi_freeinfo(hints);
		return fail("fi_allocinfo", -FI_ENOMEM);
	}
	ret = fi_getinfo(RAW_FI_VERSION, o->node, NULL,
			 o->node != NULL ? FI_SOURCE : 0, hints, &all);
	fi_freeinfo(hints);
	if (ret != 0)
		return fail("fi_getinfo", ret);
	/* A layered provider may list its core provider's offerings too. */
	for (fi = all; fi != NULL; fi = fi->next) {
		if (strcmp(fi->fabric_attr->prov_name, o->prov) == 0)
			break;
	}
	if (fi == NULL) {
		fi_freeinfo(all);
		return fail("fi_getinfo: no offering from the provider",
			    -FI_ENODATA);
	}
	r->info = fi_dupinfo(fi);
	fi_freeinfo(all);
	if (r->info == NULL)
		return fail("fi_dupinfo", -FI_ENOMEM);
	if (r->maxsize > r->info->ep_attr->max_msg_size)
		return fail("size above the provider's largest message",
			    -FI_EMSGSIZE);
	return 0;
}

static int open_endpoint(struct raw *r)
{
	struct fi_info *fi = r->info;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 2 };
	struct fi_cq_attr cq_attr = {
		/* The most completions this endpoint can have outstanding. */
		.size = fi->tx_attr->size + fi->rx_attr->size,
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = FI_WAIT_NONE,
	};
	int ret;

	ret = fi_fabric(fi->fabric_attr, &r->fabric, NULL);
	if (ret != 0)
		return fail("fi_fabric", ret);
	ret = fi_domain(r->fabric, fi, &r->domain, NULL);
	if (ret != 0)
		return fail("fi_domain", ret);
	ret = fi_av_open(r->domain, &av_attr, &r->av, NULL);
	if (ret != 0)
		return fail("fi_av_open", ret);
	ret = fi_cq_open(r->domain, &cq_attr, &r->cq, NULL);
	if (ret != 0)
		return fail("fi_cq_open", ret);
	/* shm refuses (EBUSY) a name that a killed process with our pid
	 * left behind, removing it; the next endpoint takes the next name. */
	for (int tries = 0;; tries++) {
		ret = fi_endpoint(r->domain, fi, &r->ep, NULL);
		if (ret != 0)
			return fail("fi_endpoint", ret);
		ret = fi_ep_bind(r->ep, &r->av->fid, 0);
		if (ret != 0)
			return fail("fi_ep_bind (av)", ret);
		ret = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV);
		if (ret != 0)
			return fail("fi_ep_bind (cq)", ret);
		ret = fi_enable(r->ep);
		if (ret != -FI_EBUSY || tries == 16)
			break;
		fi_close(&r->ep->fid);
	}
	if (ret != 0)
		return fail("fi_enable", ret);
	return 0;
}

/* The buffer this side works on, registered for what it is used for. */
static int open_buffer(struct raw *r)
{
	const struct raw_opts *o = r->o;
	uint64_t mr_mode = r->info->domain_attr->mr_mode;
	/* pingpong: [recv | send]; write: [data | handshake send | recv] */
	size_t len = o->op == RAW_OP_PINGPONG ? 2 * r->maxsize
					      : r->maxsize + 2 * RAW_HS_LEN;
	uint64_t access;
	int ret;

	/* Placed as tern bench places its own (bench_mem_alloc()). */
	r->buf = bench_alloc_huge(len);
	if (r->buf == NULL)
		return fail("allocating the buffer", -FI_ENOMEM);
	memset(r->buf, r->initiator ? 0xa5 : 0, len);
	if (o->op == RAW_OP_PINGPONG)
		access = FI_SEND | FI_RECV;
	else if (r->initiator)
		access = FI_WRITE | FI_SEND | FI_RECV;
	else
		access = FI_REMOTE_WRITE | FI_SEND | FI_RECV;
	/* Keys are ours to choose unless the provider picks them. */
	ret = fi_mr_reg(r->domain, r->buf, len, access, 0,
			(mr_mode & FI_MR_PROV_KEY) ? 0 : 1 + !r->initiator, 0,
			&r->mr, NULL);
	if (ret != 0)
		return fail("fi_mr_reg", ret);
	if (mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(r->mr, &r->ep->fid, 0);
		if (ret != 0)
			return fail("fi_mr_bind", ret);
		ret = fi_mr_enable(r->mr);
		if (ret != 0)
			return fail("fi_mr_enable", ret);
	}
	r->desc = fi_mr_desc(r->mr);
	if (o->op == RAW_OP_WRITE && r->initiator) {
		r->ctxs = calloc(o->window, sizeof(*r->ctxs));
		r->free = calloc(o->window, sizeof(*r->free));
		r->t_post = calloc(o->window, sizeof(*r->t_post));
		if (r->ctxs == NULL || r->free == NULL || r->t_post == NULL)
			return fail("operation contexts", -FI_ENOMEM);
		for (size_t i = 0; i < o->window; i++)
			r->free[i] = o->window - 1 - i;
		r->nfree = o->window;
	}
	return 0;
}

/* Names (and the target's buffer address and key) through the pipes. */
static int exchange(struct raw *r)
{
	struct raw_hello mine = { 0 }, theirs;
	size_t len = sizeof(mine.name);
	int ret;

	ret = fi_getname(&r->ep->fid, mine.name, &len);
	if (ret != 0)
		return fail("fi_getname", ret);
	mine.namelen = (uint32_t)len;
	if (!r->initiator && r->o->op == RAW_OP_WRITE) {
		mine.addr = (r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
				    ? (uint64_t)(uintptr_t)r->buf
				    : 0;
		mine.key = fi_mr_key(r->mr);
		if (mine.key == FI_KEY_NOTAVAIL)
			return fail("fi_mr_key", -FI_ENOKEY);
	}
	ret = write_full(r->wfd, &mine, sizeof(mine));
	if (ret == 0)
		ret = read_full(r->rfd, &theirs, sizeof(theirs));
	if (ret != 0)
		return ret;
	if (theirs.namelen == 0 || theirs.namelen > sizeof(theirs.name))
		return fail("peer's endpoint name", -FI_EINVAL);
	r->raddr = theirs.addr;
	r->rkey = theirs.key;
	ret = fi_av_insert(r->av, theirs.name, 1, &r->peer, 0, NULL);
	if (ret != 1)
		return fail("fi_av_insert", ret < 0 ? ret : -FI_EADDRNOTAVAIL);
	return 0;
}

/*
 * Before the writes, one message each way over the fabric: the initiator
 * says hello, the target answers. tern bench does the same work (its
 * control exchange: HELLO with the parameters, ACK with the region), and
 * so does any application that trades keys over the fabric rather than
 * through a pipe. It is not free: on tcp a connection that has carried a
 * message back from the target then moves one-way writes 6-8% slower,
 * for any tool (docs/performance.md); --no-handshake skips it.
 */
static int handshake(struct raw *r)
{
	uint8_t *sbuf = r->buf + r->maxsize, *rbuf = sbuf + RAW_HS_LEN;
	uint64_t rx0 = r->nrx, tx0 = r->ntx;
	ssize_t ret;

	r->rsize = RAW_HS_LEN;
	memset(sbuf, r->initiator ? 'H' : 'A', RAW_HS_LEN);
	ret = fi_recv(r->ep, rbuf, RAW_HS_LEN, r->desc, r->peer, &r->rctx);
	if (ret != 0)
		return fail("fi_recv (handshake)", ret);
	if (!r->initiator) {
		ret = wait_rx(r, rx0 + 1);
		if (ret == 0 && rbuf[0] != 'H')
			ret = fail("handshake: not a hello", -FI_EOTHER);
		if (ret != 0)
			return (int)ret;
	}
	for (;;) {
		ret = fi_send(r->ep, sbuf, RAW_HS_LEN, r->desc, r->peer,
			      &r->sctx);
		if (ret != -FI_EAGAIN)
			break;
		ret = reap(r);
		if (ret < 0)
			return (int)ret;
	}
	if (ret != 0)
		return fail("fi_send (handshake)", ret);
	ret = wait_tx(r, tx0 + 1);
	if (ret == 0 && r->initiator) {
		ret = wait_rx(r, rx0 + 1);
		if (ret == 0 && rbuf[0] != 'A')
			ret = fail("handshake: not an answer", -FI_EOTHER);
	}
	return (int)ret;
}

static void close_fid(struct fid *fid)
{
	int ret;

	if (fid == NULL)
		return;
	ret = fi_close(fid);
	if (ret != 0)
		fail("fi_close", ret);
}

/* What tern_ctx_close() does over verbs;ofi_rxm (src/engine/ctx.c):
 * progress 20 ms before the endpoint closes, or libfabric's rxm may crash
 * on the peer's last flow-control credit, still queued (issue 11828). */
static void linger(struct raw *r)
{
	struct fi_cq_data_entry ent[16];
	uint64_t end;

	if (r->cq == NULL ||
	    strcmp(r->info->fabric_attr->prov_name, "verbs;ofi_rxm") != 0)
		return;
	end = now_ns() + 20000000ULL;
	while (now_ns() < end) /* all done: nothing to keep */
		(void)fi_cq_read(r->cq, ent, 16);
}

/* The endpoint goes before the region its queued sends may name. */
static void teardown(struct raw *r)
{
	linger(r);
	close_fid(r->ep ? &r->ep->fid : NULL);
	close_fid(r->mr ? &r->mr->fid : NULL);
	close_fid(r->cq ? &r->cq->fid : NULL);
	close_fid(r->av ? &r->av->fid : NULL);
	close_fid(r->domain ? &r->domain->fid : NULL);
	close_fid(r->fabric ? &r->fabric->fid : NULL);
	fi_freeinfo(r->info);
	free(r->ctxs);
	free(r->t_post);
	free(r->free);
	free(r->buf);
	r->mr = NULL;
	r->ep = NULL;
	r->cq = NULL;
	r->av = NULL;
	r->domain = NULL;
	r->fabric = NULL;
	r->info = NULL;
	r->ctxs = NULL;
	r->t_post = NULL;
	r->free = NULL;
	r->buf = NULL;
}

/* One side, start to end. The child says done after it has closed up. */
static int run(struct raw *r)
{
	const struct raw_opts *o = r->o;
	int ret;

	for (unsigned int k = 0; k < o->nsizes; k++) {
		if (o->sizes[k] > r->maxsize)
			r->maxsize = o->sizes[k];
	}
	ret = get_info(r);
	if (ret == 0)
		ret = open_endpoint(r);
	if (ret == 0)
		ret = open_buffer(r);
	if (ret == 0)
		ret = exchange(r);
	if (ret == 0 && o->op == RAW_OP_WRITE && !o->no_handshake)
		ret = handshake(r);
	if (ret == 0 && r->initiator) {
		if (o->op == RAW_OP_WRITE)
			ret = write_initiator(r);
		else
			ret = pingpong_initiator(r);
		if (ret == 0)
			ret = send_msg(r, RAW_MSG_DONE);
		if (ret == 0)
			ret = expect_msg(r, RAW_MSG_DONE);
		teardown(r);
		return ret;
	}
	if (ret == 0 && o->op == RAW_OP_PINGPONG)
		ret = pingpong_target(r);
	/* Drive progress for the initiator's writes until it is done. */
	while (ret == 0 && !r->done)
		ret = reap(r);
	teardown(r);
	if (ret == 0)
		ret = send_msg(r, RAW_MSG_DONE);
	return ret;
}

/* --- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct raw_opts o;
	struct raw r = { .o = &o, .peer = FI_ADDR_UNSPEC };
	int to_child[2], to_parent[2], status, ret;
	pid_t pid;

	if (raw_parse_opts(argc, argv, &o) != 0)
		return 1;
	/* A peer that is gone shows up as EPIPE, not as a signal. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
		fail("signal", -errno);
		return 1;
	}
	if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
		fail("pipe", -errno);
		return 1;
	}
	r.ppid = getpid();
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fail("fork", -errno);
		return 1;
	}
	bench_split_cpus("raw", pid == 0);
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		r.rfd = to_child[0];
		r.wfd = to_parent[1];
		ret = run(&r);
		exit(ret == 0 ? 0 : 1);
	}
	close(to_child[0]);
	close(to_parent[1]);
	r.initiator = 1;
	r.rfd = to_parent[0];
	r.wfd = to_child[1];
	ret = run(&r);
	/* On failure, end of file tells the child to give up. */
	close(r.wfd);
	close(r.rfd);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fail("waitpid", -errno);
			return 1;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			fprintf(stderr,
				"raw: target process: killed by "
				"signal %d\n",
				WTERMSIG(status));
		else
			fprintf(stderr,
				"raw: target process: exit status "
				"%d\n",
				WEXITSTATUS(status));
		return 1;
	}
	return ret == 0 ? 0 : 1;
}
