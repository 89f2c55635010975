/* SPDX-License-Identifier: MIT */
/*
 * CUDA regions end to end on a real provider, two ctxs in one process.
 * `hmem PROVIDER fake` runs on the fake CUDA driver ($TERN_FAKE_CUDA: its
 * copy engine runs one queued copy per query, so a chunk posted before its
 * copy finished carries stale bytes and the data checks fail), `hmem
 * PROVIDER real` on a GPU (exit 77 without one), `hmem PROVIDER nocuda`
 * checks the errors where CUDA is absent (77 where it is present).
 * Every transfer is checked byte for byte; each request completes once.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "check.h"

#define SKIP   77
#define CHUNK  (64u * 1024) /* $TERN_STAGE_CHUNK for this test */
#define REGION (2u * 1024 * 1024)

/* The fake driver's hooks (src/hmem/cuda.h); absent from the real one. */
struct tern__cu_fake_stats {
	uint64_t copies;
	uint64_t bytes;
	uint64_t max_pending;
	uint64_t ipc_opens, ipc_copies;
	uint64_t dmabufs, dmabufs_refused;
};
void tern__cu_fake_stats(struct tern__cu_fake_stats *s);
void tern__cu_fake_fail(uint64_t n);

static const char *g_prov;
static int g_fake;
static int g_calls;

struct side {
	struct tern_ctx *ctx;
	struct tern_peer *peer; /* the other side */
	void *dev;		/* CUDA region */
	uint8_t *host;		/* host region */
	struct tern_mr *mdev, *mhost;
	struct tern_mr_desc ddev, dhost;
};

static struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr a = {
		.provider = g_prov,
		.node = strcmp(g_prov, "tcp") == 0 ? "127.0.0.1" : NULL,
	};
	struct tern_ctx *c;
	int r = tern_ctx_open(&a, &c);

	CHECK(r == 0, "ctx: %s", tern_strerror(r));
	return c;
}

static void count_cb(struct tern_req *r)
{
	(void)r;
	g_calls++;
}

static void run2(struct side *a, struct side *b, struct tern_req *req)
{
	for (long i = 0; i < 20000000 && !req->done; i++) {
		tern_progress(a->ctx);
		tern_progress(b->ctx);
	}
	CHECK(req->done, "no completion (%zu bytes)", req->len);
}

static void pattern(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)((i * 2654435761u + seed * 40503u) >> 13);
}

/* Device bytes, read back to the host. */
static void dev_get(void *host, const void *dev, size_t len)
{
	CHECK(tern_mem_copy(host, dev, len) == 0, "copy from GPU");
}

static void dev_set(void *dev, const void *host, size_t len)
{
	CHECK(tern_mem_copy(dev, host, len) == 0, "copy to GPU");
}

static void side_open(struct side *s)
{
	const uint64_t acc = TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ |
			     TERN_ACCESS_REMOTE_WRITE;
	struct tern_mr_attr ma = {
		.len = REGION,
		.access = acc,
		.kind = TERN_MEM_CUDA,
		.device = 0,
	};
	int r;

	s->ctx = open_ctx();
	r = tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &s->dev);
	CHECK(r == 0, "cuda alloc: %s", tern_strerror(r));
	ma.buf = s->dev;
	r = tern_mr_regattr(s->ctx, &ma, &s->mdev);
	CHECK(r == 0, "regattr cuda: %s", tern_strerror(r));
	CHECK(tern_mr_addr(s->mdev) == s->dev && tern_mr_len(s->mdev) == REGION,
	      "region");
	s->host = aligned_alloc(4096, REGION);
	CHECK(s->host != NULL, "alloc");
	memset(s->host, 0, REGION);
	CHECK(tern_mr_reg(s->ctx, s->host, REGION, acc, &s->mhost) == 0,
	      "reg host");
	tern_mr_desc(s->mdev, &s->ddev);
	tern_mr_desc(s->mhost, &s->dhost);
}

static void pair(struct side *a, struct side *b)
{
	uint8_t card[TERN_CARD_MAX];
	ssize_t n;

	n = tern_ctx_card(b->ctx, card, sizeof(card));
	CHECK(n > 0 && tern_peer_add(a->ctx, card, (size_t)n, &a->peer) == 0,
	      "peer");
	n = tern_ctx_card(a->ctx, card, sizeof(card));
	CHECK(n > 0 && tern_peer_add(b->ctx, card, (size_t)n, &b->peer) == 0,
	      "peer");
}

static uint64_t copies(struct tern_ctx *c)
{
	struct tern_ctx_info i;

	CHECK(tern_ctx_query(c, &i) == 0, "query");
	return i.stage_copies;
}

/* Wait (bounded) until b's host region holds want at off. */
static void landed(struct side *a, struct side *b, const uint8_t *want,
		   size_t off, size_t len, const char *what)
{
	for (long i = 0; i < 20000000 && memcmp(b->host + off, want, len);
	     i++) {
		tern_progress(b->ctx);
		tern_progress(a->ctx);
	}
	CHECK(memcmp(b->host + off, want, len) == 0, "%s: data", what);
}

/* GPU source -> host target: writes cut in chunks, each copied before it
 * is posted; the device content changes between writes so a stale shadow
 * shows. */
static void t_write(struct side *a, struct side *b, uint8_t *buf)
{
	const size_t lens[] = { 1,	   CHUNK - 1,	    CHUNK,
				CHUNK + 1, 5 * CHUNK + 123, REGION - 16 };

	for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
		size_t len = lens[t], roff = 5 + t;
		uint64_t c0 = copies(a->ctx), want;
		struct tern_req w;
		int rc;

		pattern(buf, len, (unsigned int)t + 1);
		dev_set(a->dev, buf, len);
		tern_req_init(&w, count_cb, NULL);
		g_calls = 0;
		rc = tern_write(a->peer, a->mdev, a->dev, len, &b->dhost, roff,
				&w);
		CHECK(rc == 0, "write: %s", tern_strerror(rc));
		run2(a, b, &w);
		CHECK(w.status == 0 && w.len == len && g_calls == 1,
		      "write %zu: status %d (%s) len %zu calls %d", len,
		      w.status, w.errmsg, w.len, g_calls);
		landed(a, b, buf, roff, len, "write");
		want = (len + CHUNK - 1) / CHUNK;
		CHECK(copies(a->ctx) - c0 == want,
		      "write %zu: %llu copies, want %llu (one per chunk)", len,
		      (unsigned long long)(copies(a->ctx) - c0),
		      (unsigned long long)want);
	}
	printf("ok: GPU -> host writes of 1 B .. 2 MiB, one copy per %u KiB "
	       "chunk\n",
	       CHUNK / 1024);
}

/* write_imm from a GPU source: the target counts one arrival per write,
 * and when it does, every chunk's bytes are there. */
static void t_write_imm(struct side *a, struct side *b, uint8_t *buf)
{
	const size_t len = 7 * CHUNK + 99;
	struct tern_req w, e;

	for (unsigned int round = 0; round < 3; round++) {
		pattern(buf, len, 100 + round);
		dev_set(a->dev, buf, len);
		tern_req_init(&e, NULL, NULL);
		CHECK(tern_imm_expect(b->ctx, 0x77 + round, 1, &e) == 0,
		      "expect");
		tern_req_init(&w, NULL, NULL);
		CHECK(tern_write_imm(a->peer, a->mdev, a->dev, len, &b->dhost,
				     0, 0x77 + round, &w) == 0,
		      "write_imm");
		run2(a, b, &e);
		CHECK(memcmp(b->host, buf, len) == 0,
		      "write_imm: the immediate came before the data");
		run2(a, b, &w);
		CHECK(w.status == 0 && e.status == 0, "write_imm status %d %d",
		      w.status, e.status);
		for (int i = 0; i < 2000; i++) {
			tern_progress(a->ctx);
			tern_progress(b->ctx);
		}
		CHECK(tern_imm_count(b->ctx, 0x77 + round) == 0,
		      "write_imm: more than one arrival counted");
	}
	printf("ok: GPU -> host write with immediate: 8 chunks, one arrival, "
	       "data complete on arrival\n");
}

/* Host target region -> GPU sink by read; and a GPU target read from,
 * after SYNC_OUT. */
static void t_read(struct side *a, struct side *b, uint8_t *buf, uint8_t *chk)
{
	const size_t len = 3 * CHUNK + 17;
	struct tern_req r, s;

	pattern(b->host, len, 7);
	tern_req_init(&r, count_cb, NULL);
	g_calls = 0;
	CHECK(tern_read(a->peer, a->mdev, (char *)a->dev + 11, len, &b->dhost,
			0, &r) == 0,
	      "read");
	run2(a, b, &r);
	CHECK(r.status == 0 && r.len == len && g_calls == 1, "read: %d %s",
	      r.status, r.errmsg);
	dev_get(chk, (char *)a->dev + 11, len);
	CHECK(memcmp(chk, b->host, len) == 0, "read into GPU: data");

	/* b's GPU region, published with SYNC_OUT, read into a's host. */
	pattern(buf, len, 8);
	dev_set(b->dev, buf, len);
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_mr_sync(b->mdev, 0, len, TERN_MR_SYNC_OUT, &s) == 0, "sync");
	run2(a, b, &s);
	CHECK(s.status == 0, "sync out: %d", s.status);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_read(a->peer, a->mhost, a->host, len, &b->ddev, 0, &r) == 0,
	      "read");
	run2(a, b, &r);
	CHECK(r.status == 0 && memcmp(a->host, buf, len) == 0,
	      "read from a GPU region after SYNC_OUT: data");
	printf("ok: reads into a GPU region, and from one after SYNC_OUT\n");
}

/* Host -> GPU target: the bytes land in the shadow and reach the GPU at
 * SYNC_IN (with the fake driver: not before). */
static void t_sync_in(struct side *a, struct side *b, uint8_t *buf,
		      uint8_t *chk)
{
	const size_t len = 4 * CHUNK + 5, off = 1000;
	struct tern_req w, e, s;

	memset(chk, 0x5a, len);
	dev_set((char *)b->dev + off, chk, len);
	pattern(a->host, len, 9);
	tern_req_init(&e, NULL, NULL);
	CHECK(tern_imm_expect(b->ctx, 0x99, 1, &e) == 0, "expect");
	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write_imm(a->peer, a->mhost, a->host, len, &b->ddev, off,
			     0x99, &w) == 0,
	      "write");
	run2(a, b, &e);
	run2(a, b, &w);
	if (g_fake) {
		dev_get(buf, (char *)b->dev + off, len);
		CHECK(memcmp(buf, chk, len) == 0,
		      "the GPU changed before SYNC_IN");
	}
	tern_req_init(&s, count_cb, NULL);
	g_calls = 0;
	CHECK(tern_mr_sync(b->mdev, off, len, TERN_MR_SYNC_IN, &s) == 0,
	      "sync");
	run2(a, b, &s);
	CHECK(s.status == 0 && g_calls == 1, "sync in: %d", s.status);
	dev_get(buf, (char *)b->dev + off, len);
	CHECK(memcmp(buf, a->host, len) == 0, "write into GPU region: data");
	/* A host region syncs at once, with nothing to do. */
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_mr_sync(b->mhost, 0, REGION, TERN_MR_SYNC_IN, &s) == 0,
	      "sync host");
	CHECK(!s.done, "sync completed inside the call");
	run2(a, b, &s);
	CHECK(s.status == 0, "sync host: %d", s.status);
	CHECK(tern_mr_sync(b->mdev, 1, REGION, TERN_MR_SYNC_IN, &s) ==
		      -TERN_EBOUNDS,
	      "sync past the end");
	CHECK(tern_mr_sync(b->mdev, 0, 1, TERN_MR_SYNC_IN | TERN_MR_SYNC_OUT,
			   &s) == -EINVAL,
	      "sync both ways");
	printf("ok: host -> GPU region writes reach the GPU at SYNC_IN\n");
}

/* GPU -> GPU messages: send, send with immediate, truncation. */
static void t_msg(struct side *a, struct side *b, uint8_t *buf, uint8_t *chk)
{
	const size_t len = 2 * CHUNK + 3;
	struct tern_req s, r;

	pattern(buf, len, 11);
	dev_set(a->dev, buf, len);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_recv(b->ctx, b->mdev, (char *)b->dev + 64, REGION - 64,
			&r) == 0,
	      "recv");
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_send_imm(a->peer, a->mdev, a->dev, len, 0xabc, &s) == 0,
	      "send");
	run2(a, b, &r);
	run2(a, b, &s);
	CHECK(s.status == 0 && r.status == 0 && r.len == len &&
		      (r.flags & TERN_REQ_F_IMM) && r.imm == 0xabc,
	      "send_imm: %d %d len %zu imm %llx", s.status, r.status, r.len,
	      (unsigned long long)r.imm);
	dev_get(chk, (char *)b->dev + 64, len);
	CHECK(memcmp(chk, buf, len) == 0, "GPU -> GPU message: data");

	/* Truncation: on shm only (tcp;ofi_rxm 1.17 drops the connection,
	 * staged or not). shm 1.17 reports it as truncation or as a provider
	 * error depending on the protocol: an error either way, passed on. */
	if (strcmp(g_prov, "shm") != 0) {
		printf("ok: GPU -> GPU send, send with immediate\n");
		return;
	}
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_recv(b->ctx, b->mdev, b->dev, 100, &r) == 0, "recv");
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_send(a->peer, a->mdev, a->dev, 200, &s) == 0, "send");
	run2(a, b, &r);
	run2(a, b, &s);
	CHECK(r.status == -TERN_ETRUNC || r.status == -TERN_EPROV,
	      "truncated receive: %d", r.status);
	printf("ok: GPU -> GPU send, send with immediate, truncation\n");
}

/* Regressions: receives waiting on staged memory never starve other
 * staged work (they have chunks of their own); a receive cancelled after
 * its message landed completes normally, with the message. */
static void t_recvs(struct side *a, struct side *b, uint8_t *buf, uint8_t *chk)
{
	struct tern_req rv[12], s, y, c;
	uint64_t c0;

	for (int i = 0; i < 12; i++) {
		tern_req_init(&rv[i], NULL, NULL);
		CHECK(tern_recv(b->ctx, b->mdev, (char *)b->dev + 4096 * i,
				4096, &rv[i]) == 0,
		      "recv");
	}
	tern_req_init(&y, NULL, NULL);
	CHECK(tern_mr_sync(b->mdev, 0, 4096, TERN_MR_SYNC_OUT, &y) == 0,
	      "sync");
	run2(a, b, &y);
	CHECK(y.status == 0, "sync beside 12 waiting receives: %d", y.status);
	for (int i = 0; i < 12; i++)
		CHECK(tern_req_cancel(b->ctx, &rv[i]) == 0 || rv[i].done,
		      "cancel");
	for (int i = 0; i < 12; i++)
		run2(a, b, &rv[i]);
	if (!g_fake)
		return;
	pattern(buf, 100, 31);
	dev_set(a->dev, buf, 100);
	tern_req_init(&c, NULL, NULL);
	CHECK(tern_recv(b->ctx, b->mdev, b->dev, 4096, &c) == 0, "recv");
	c0 = copies(b->ctx);
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_send(a->peer, a->mdev, a->dev, 100, &s) == 0, "send");
	for (long i = 0; i < 20000000 && copies(b->ctx) == c0; i++) {
		tern_progress(a->ctx);
		if (copies(b->ctx) == c0)
			tern_progress(b->ctx);
	}
	CHECK(copies(b->ctx) == c0 + 1 && !c.done, "message not in flight");
	CHECK(tern_req_cancel(b->ctx, &c) == 0, "cancel");
	run2(a, b, &c);
	run2(a, b, &s);
	dev_get(chk, b->dev, 100);
	CHECK(c.status == 0 && c.len == 100 && memcmp(chk, buf, 100) == 0,
	      "cancel after landing: status %d len %zu", c.status, c.len);
	printf("ok: waiting receives do not starve staging; a landed receive "
	       "survives its cancel\n");
}

/* GPU source pieces (each its own chunk) with immediates. */
static void t_pieces(struct side *a, struct side *b, uint8_t *buf)
{
	struct tern_piece pc[6];
	struct tern_req w, e;

	pattern(buf, REGION, 13);
	dev_set(a->dev, buf, REGION);
	memset(b->host, 0, REGION);
	for (unsigned int i = 0; i < 6; i++)
		pc[i] = (struct tern_piece){ .loff = 100000u * (5 - i),
					     .roff = 150000u * i,
					     .len = 4096u * (i + 1) + i };
	tern_req_init(&e, NULL, NULL);
	CHECK(tern_imm_expect(b->ctx, 0x55, 6, &e) == 0, "expect");
	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write_pieces(a->peer, a->mdev, pc, 6, &b->dhost, 1,
				TERN_PIECES_IMM, 0x55, &w) == 0,
	      "pieces");
	run2(a, b, &w);
	run2(a, b, &e);
	CHECK(w.status == 0 && e.status == 0, "pieces: %d %d", w.status,
	      e.status);
	for (unsigned int i = 0; i < 6; i++)
		CHECK(memcmp(b->host + pc[i].roff, buf + pc[i].loff,
			     pc[i].len) == 0,
		      "piece %u: data", i);
	printf("ok: GPU pieces with immediates\n");
}

/* A failing copy fails its request (once, with the reason), and the next
 * one works; the pipeline keeps copies queued ahead of the network. */
static void t_fail(struct side *a, struct side *b, uint8_t *buf)
{
	const size_t len = 6 * CHUNK;
	struct tern__cu_fake_stats st;
	struct tern_req w;

	tern__cu_fake_fail(3);
	tern_req_init(&w, count_cb, NULL);
	g_calls = 0;
	CHECK(tern_write(a->peer, a->mdev, a->dev, len, &b->dhost, 0, &w) == 0,
	      "write");
	run2(a, b, &w);
	for (int i = 0; i < 2000; i++) {
		tern_progress(a->ctx);
		tern_progress(b->ctx);
	}
	CHECK(w.status == -TERN_EHMEM && g_calls == 1 &&
		      strstr(w.errmsg, "CUDA copy") != NULL,
	      "failed copy: status %d (%s), %d callbacks", w.status, w.errmsg,
	      g_calls);
	tern__cu_fake_fail(0);
	pattern(buf, len, 21);
	dev_set(a->dev, buf, len);
	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write(a->peer, a->mdev, a->dev, len, &b->dhost, 0, &w) == 0,
	      "write");
	run2(a, b, &w);
	CHECK(w.status == 0, "write after a failure: %d", w.status);
	landed(a, b, buf, 0, len, "write after a failure");
	tern__cu_fake_stats(&st);
	CHECK(st.max_pending > 1, "copies never queued ahead (max %llu)",
	      (unsigned long long)st.max_pending);
	printf("ok: a failed GPU copy fails its write once (%s); copies ran "
	       "up to %llu ahead\n",
	       tern_strerror(-TERN_EHMEM), (unsigned long long)st.max_pending);
}

/* Cancelled before its copies ran: completes once, -ECANCELED. */
static void t_cancel(struct side *a, struct side *b)
{
	struct tern_req w;

	tern_req_init(&w, count_cb, NULL);
	g_calls = 0;
	CHECK(tern_write(a->peer, a->mdev, a->dev, REGION, &b->dhost, 0, &w) ==
		      0,
	      "write");
	tern_progress(a->ctx); /* chunks start, copies queued */
	CHECK(tern_req_cancel(a->ctx, &w) == 0, "cancel");
	run2(a, b, &w);
	for (int i = 0; i < 2000; i++) {
		tern_progress(a->ctx);
		tern_progress(b->ctx);
	}
	CHECK(w.status == -ECANCELED && g_calls == 1,
	      "cancel: status %d, %d callbacks", w.status, g_calls);
	CHECK(tern_req_cancel(a->ctx, &w) == -EALREADY, "cancel again");
	printf("ok: cancelling a staged write\n");
}

static void t_refuse(struct side *a)
{
	struct tern_mr_attr ma = {
		.buf = a->host,
		.len = 4096,
		.access = TERN_ACCESS_LOCAL,
		.kind = TERN_MEM_CUDA,
		.device = -1,
	};
	struct tern_mr *m;
	enum tern_mem_kind k;
	int dev;

	CHECK(tern_mr_regattr(a->ctx, &ma, &m) == -EINVAL,
	      "host memory registered as CUDA");
	ma.buf = a->dev;
	ma.access = TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_ATOMIC;
	CHECK(tern_mr_regattr(a->ctx, &ma, &m) == -TERN_ENOTSUP,
	      "atomics on a staged region");
	ma.access = TERN_ACCESS_LOCAL;
	ma.len = REGION + 1;
	CHECK(tern_mr_regattr(a->ctx, &ma, &m) == -EINVAL,
	      "a CUDA region past its allocation");
	CHECK(tern_mem_query(a->dev, &k, &dev) == 0 && k == TERN_MEM_CUDA &&
		      dev == 0,
	      "query device");
	CHECK(tern_mem_query(a->host, &k, &dev) == 0 && k == TERN_MEM_HOST &&
		      dev == -1,
	      "query host");
	CHECK(tern_mr_path(a->mdev) == TERN_MR_PATH_STAGED ||
		      tern_mr_path(a->mdev) == TERN_MR_PATH_ZCOPY,
	      "path");
	printf("ok: refused: host memory as CUDA, atomics on staged, past "
	       "the end; region path: %s\n",
	       tern_mr_path_str(tern_mr_path(a->mdev)));
}

static int nocuda(void)
{
	struct tern_mem_info mi;
	struct tern_ctx *c;
	struct tern_mr *m;
	void *p;
	struct tern_mr_attr ma = { .len = 4096,
				   .access = TERN_ACCESS_LOCAL,
				   .kind = TERN_MEM_CUDA,
				   .device = -1 };

	CHECK(tern_mem_probe(TERN_MEM_CUDA, &mi) == 0, "probe");
	if (mi.available) {
		printf("SKIP: CUDA is available here\n");
		return SKIP;
	}
	CHECK(mi.why[0] != '\0', "no reason given");
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, 4096, &p) == -TERN_ENOCUDA,
	      "alloc without CUDA");
	c = open_ctx();
	ma.buf = malloc(4096);
	CHECK(tern_mr_regattr(c, &ma, &m) == -TERN_ENOCUDA,
	      "CUDA region without CUDA");
	CHECK(tern_ctx_close(c) == 0, "close");
	free(ma.buf);
	printf("PASS: without CUDA: -TERN_ENOCUDA (%s): %s\n",
	       tern_strerror(-TERN_ENOCUDA), mi.why);
	return 0;
}

int main(int argc, char **argv)
{
	struct tern_mem_info mi;
	struct side a = { 0 }, b = { 0 };
	uint8_t *buf, *chk;
	char chunk[32];

	if (argc != 3 || (strcmp(argv[2], "fake") && strcmp(argv[2], "real") &&
			  strcmp(argv[2], "nocuda"))) {
		fprintf(stderr, "usage: hmem shm|tcp fake|real|nocuda\n");
		return 2;
	}
	g_prov = argv[1];
	if (strcmp(argv[2], "nocuda") == 0) {
		unsetenv("TERN_FAKE_CUDA");
		return nocuda();
	}
	g_fake = strcmp(argv[2], "fake") == 0;
	if (g_fake)
		setenv("TERN_FAKE_CUDA", "1", 1);
	snprintf(chunk, sizeof(chunk), "%u", CHUNK);
	setenv("TERN_STAGE_CHUNK", chunk, 1);
	CHECK(tern_mem_probe(TERN_MEM_CUDA, &mi) == 0, "probe");
	if (!mi.available) {
		printf("SKIP: %s\n", mi.why);
		return SKIP;
	}
	CHECK(mi.fake == g_fake && mi.devices >= 1, "probe: fake %d devices %d",
	      mi.fake, mi.devices);
	side_open(&a);
	side_open(&b);
	pair(&a, &b);
	buf = malloc(REGION);
	chk = malloc(REGION);
	CHECK(buf != NULL && chk != NULL, "alloc");
	t_refuse(&a);
	t_write(&a, &b, buf);
	t_write_imm(&a, &b, buf);
	t_read(&a, &b, buf, chk);
	t_sync_in(&a, &b, buf, chk);
	t_msg(&a, &b, buf, chk);
	t_pieces(&a, &b, buf);
	t_recvs(&a, &b, buf, chk);
	if (g_fake)
		t_fail(&a, &b, buf);
	t_cancel(&a, &b);
	/* Closing a ctx with a staged write in flight: it completes once. */
	{
		struct tern_req w;

		tern_req_init(&w, count_cb, NULL);
		g_calls = 0;
		CHECK(tern_write(a.peer, a.mdev, a.dev, REGION, &b.dhost, 0,
				 &w) == 0,
		      "write");
		tern_progress(a.ctx);
		CHECK(tern_ctx_close(a.ctx) == 0, "close a");
		CHECK(w.done && g_calls == 1, "close: %d callbacks", g_calls);
	}
	CHECK(tern_ctx_close(b.ctx) == 0, "close b");
	CHECK(tern_mem_free(TERN_MEM_CUDA, a.dev) == 0 &&
		      tern_mem_free(TERN_MEM_CUDA, b.dev) == 0,
	      "free");
	free(a.host);
	free(b.host);
	free(buf);
	free(chk);
	printf("PASS: CUDA regions (%s driver) over %s\n",
	       g_fake ? "fake" : "real", g_prov);
	return 0;
}
