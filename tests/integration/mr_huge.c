/* SPDX-License-Identifier: MIT */
/*
 * A region larger than memory (issue 41): 64 GiB of MAP_NORESERVE address
 * space, never touched, registered on ctx b with remote read and write
 * rights; ctx a, in the same process, writes 4 KiB into it at offset 0
 * and at 64 GiB - 4 KiB, reads both back, and the bytes are checked there
 * and in b's memory. The memory is not committed: RSS grows by less than
 * RSS_MAX from before the registration to after the transfers and the
 * close. The same-host path reaches the region by address (cross-memory
 * attach), the providers by its key.
 *
 * usage: mr_huge --provider PROV [--node ADDR] [--size SIZE]
 * Exit 0 when every check held, 77 when the address space cannot be had
 * (a vm.overcommit_memory of 2, a ulimit -v), 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "check.h"
#include "pair.h"

#define XFER 4096
#define RW   (TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE)
#define RWR  (RW | TERN_ACCESS_REMOTE_READ)

/* RSS growth allowed: the transfers touch two pages of the region, the
 * providers' buffers for one 4 KiB write each way are already there (a
 * warm-up write); anything near the region's size means a page walk. */
#define RSS_MAX ((long)64 << 20)

static const char *prov, *node;
static struct tern_ctx *a, *b;
static struct tern_peer *ab;

static struct tern_ctx *open_ctx(void)
{
	return pair_open(prov, node);
}

static struct tern_peer *peer_of(struct tern_ctx *x, struct tern_ctx *y)
{
	return pair_peer(x, y);
}

static long rss_bytes(void)
{
	long size = 0, rss = -1;
	FILE *f = fopen("/proc/self/statm", "re");

	CHECK(f != NULL && fscanf(f, "%ld %ld", &size, &rss) == 2,
	      "/proc/self/statm");
	fclose(f);
	return rss * sysconf(_SC_PAGESIZE);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct tern_mr *reg(struct tern_ctx *ctx, void *buf, size_t len,
			   uint64_t access)
{
	struct tern_mr *mr = NULL;
	int ret = tern_mr_reg(ctx, buf, len, access, &mr);

	CHECK(ret == 0, "register %zu bytes at %p: %s", len, buf,
	      tern_strerror(ret));
	return mr;
}

static void wait_req(struct tern_req *req, const char *what)
{
	for (long i = 0; i < 50000000 && !req->done; i++) {
		tern_progress(a);
		tern_progress(b);
	}
	CHECK(req->done && req->status == 0, "%s: %s %s", what,
	      tern_strerror(req->status), req->errmsg);
}

static void xfer(int write, struct tern_mr *mr, void *buf,
		 const struct tern_mr_desc *d, uint64_t off)
{
	struct tern_req req;
	int ret;

	tern_req_init(&req, NULL, NULL);
	ret = write ? tern_write(ab, mr, buf, XFER, d, off, &req)
		    : tern_read(ab, mr, buf, XFER, d, off, &req);
	CHECK(ret == 0, "%s at %llu: %s", write ? "tern_write" : "tern_read",
	      (unsigned long long)off, tern_strerror(ret));
	wait_req(&req, write ? "write" : "read");
}

/* Read @off back until it holds @want (a write completes at its
 * initiator before it need be at the target: tcp), for a bounded time. */
static int reads_back(struct tern_mr *mr, uint8_t *sink,
		      const struct tern_mr_desc *d, uint64_t off,
		      const uint8_t *want)
{
	for (int tries = 0; tries < 200; tries++) {
		memset(sink, 0, XFER);
		xfer(0, mr, sink, d, off);
		if (memcmp(sink, want, XFER) == 0)
			return 1;
		for (int k = 0; k < 10000; k++)
			tern_progress(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ 0 },
	};
	uint64_t size = 64ULL << 30, offs[2];
	struct tern_mr *smr, *kmr, *wmr, *hmr;
	uint8_t *src, *sink, *warm, *huge;
	struct tern_mr_desc d, wd;
	long rss0, rss1, rss2;
	double t0, reg_us;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			node = optarg;
		else if (c == 's')
			CHECK(tern_parse_size(optarg, &size) == 0 &&
				      size >= 2 * XFER && size % XFER == 0,
			      "--size %s", optarg);
		else
			return 2;
	}
	CHECK(prov != NULL,
	      "usage: mr_huge --provider PROV [--node ADDR] [--size SIZE]");
	a = open_ctx();
	b = open_ctx();
	ab = peer_of(a, b);
	(void)peer_of(b, a); /* b lets a write to it (same host) */
	src = aligned_alloc(XFER, 2 * XFER);
	sink = aligned_alloc(XFER, XFER);
	warm = aligned_alloc(XFER, XFER);
	CHECK(src != NULL && sink != NULL && warm != NULL, "aligned_alloc");
	for (size_t i = 0; i < 2 * XFER; i++)
		src[i] = (uint8_t)(i * 7 + 1 + (i >= XFER ? 0x55 : 0));
	memset(warm, 0, XFER);
	smr = reg(a, src, 2 * XFER, TERN_ACCESS_LOCAL);
	kmr = reg(a, sink, XFER, TERN_ACCESS_LOCAL);
	/* A write and a read of the same size first, into a small region:
	 * what the providers allocate for a connection is not the region. */
	wmr = reg(b, warm, XFER, RWR);
	tern_mr_desc(wmr, &wd);
	xfer(1, smr, src, &wd, 0);
	CHECK(reads_back(kmr, sink, &wd, 0, src), "the warm-up write");

	huge = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (huge == MAP_FAILED) {
		printf("SKIP: mmap of %llu bytes, MAP_NORESERVE: %s (vm."
		       "overcommit_memory 2, or a ulimit -v?)\n",
		       (unsigned long long)size, strerror(errno));
		return 77;
	}
	rss0 = rss_bytes();
	t0 = now_ms();
	hmr = reg(b, huge, size, RWR);
	reg_us = (now_ms() - t0) * 1e3;
	rss1 = rss_bytes();
	tern_mr_desc(hmr, &d);
	CHECK(d.len == size, "the descriptor's length: %llu",
	      (unsigned long long)d.len);
	offs[0] = 0;
	offs[1] = size - XFER;
	for (int i = 0; i < 2; i++) {
		xfer(1, smr, src + i * XFER, &d, offs[i]);
		CHECK(reads_back(kmr, sink, &d, offs[i], src + i * XFER),
		      "read back at %llu", (unsigned long long)offs[i]);
		CHECK(memcmp(huge + offs[i], src + i * XFER, XFER) == 0,
		      "b's memory at %llu", (unsigned long long)offs[i]);
	}
	/* Between the two: never written, still zeros where looked at. */
	CHECK(huge[XFER] == 0 && huge[size / 2] == 0 &&
		      huge[size - XFER - 1] == 0,
	      "bytes outside the writes changed");
	CHECK(tern_mr_close(hmr) == 0, "close the region");
	rss2 = rss_bytes();
	printf("mr_huge %s (%s): %llu GiB registered in %.1f us; written and "
	       "read back at 0 and at size - 4 KiB; RSS %+ld KiB at the "
	       "registration, %+ld KiB at the end\n",
	       prov,
	       tern_peer_path(ab) == TERN_PATH_LOCAL ? "same-host path"
						     : "provider",
	       (unsigned long long)(size >> 30), reg_us, (rss1 - rss0) >> 10,
	       (rss2 - rss0) >> 10);
	CHECK(rss1 - rss0 < RSS_MAX && rss2 - rss0 < RSS_MAX,
	      "RSS grew by %ld KiB (registration) and %ld KiB (end): the "
	      "region's pages were touched",
	      (rss1 - rss0) >> 10, (rss2 - rss0) >> 10);
	munmap(huge, size);
	tern_mr_close(smr);
	tern_mr_close(kmr);
	tern_mr_close(wmr);
	tern_ctx_close(a);
	tern_ctx_close(b);
	free(src);
	free(sink);
	free(warm);
	printf("mr_huge %s: ok\n", prov);
	return 0;
}
