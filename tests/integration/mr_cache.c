/* SPDX-License-Identifier: MIT */
/*
 * The registration cache (docs/api.md, "The registration cache") over a
 * real provider, one process, ctx a writing into ctx b:
 *
 *   the same range with the same rights registered twice shares one
 *   registration (the same keys), and either close leaves the other
 *   working (a write through it lands, checked); different rights, a
 *   remote sub-range, TERN_MR_F_NOCACHE and $TERN_MR_CACHE=0 register
 *   anew (other keys); a sub-range of a local-only region shares it, and
 *   a write from it carries its bytes;
 *   reuse: a range registered, closed and unmapped, then mapped again at
 *   the same address with other contents and registered, is a new
 *   registration, and a peer's write into it lands in the new memory.
 *
 * usage: mr_cache --provider PROV [--node ADDR] [--nocache]
 * (--nocache: run with $TERN_MR_CACHE=0 set, where nothing is shared).
 * Exit 0 when every check held, 1 otherwise (it says which).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tern/tern.h>

#include "check.h"
#include "pair.h"

#define LEN  (1u << 20)
#define RW   (TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE)
#define RDWR (RW | TERN_ACCESS_REMOTE_READ)

static const char *prov, *node;
static struct tern_ctx *a, *b;
static struct tern_peer *ab;
static int cache = 1;

static struct tern_ctx *open_ctx(void)
{
	return pair_open(prov, node);
}

static struct tern_peer *peer_of(struct tern_ctx *x, struct tern_ctx *y)
{
	return pair_peer(x, y);
}

static struct tern_mr *reg(struct tern_ctx *ctx, void *buf, size_t len,
			   uint64_t access, uint64_t flags)
{
	struct tern_mr_attr attr = {
		.buf = buf,
		.len = len,
		.access = access,
		.kind = TERN_MEM_HOST,
		.device = -1,
		.flags = flags,
	};
	struct tern_mr *mr = NULL;
	int ret = tern_mr_regattr(ctx, &attr, &mr);

	CHECK(ret == 0, "register %zu bytes at %p: %s", len, buf,
	      tern_strerror(ret));
	return mr;
}

static int same_keys(const struct tern_mr *x, const struct tern_mr *y)
{
	struct tern_mr_desc dx, dy;

	tern_mr_desc(x, &dx);
	tern_mr_desc(y, &dy);
	return dx.nkeys == dy.nkeys &&
	       memcmp(dx.keys, dy.keys, dx.nkeys * sizeof(dx.keys[0])) == 0;
}

/* Write @len bytes of @src (region @smr) to @roff of @dst; wait. */
static void write_wait(struct tern_mr *smr, const void *src, size_t len,
		       struct tern_mr *dst, uint64_t roff)
{
	struct tern_mr_desc d;
	struct tern_req req;
	int ret;

	tern_mr_desc(dst, &d);
	tern_req_init(&req, NULL, NULL);
	ret = tern_write(ab, smr, src, len, &d, roff, &req);
	CHECK(ret == 0, "tern_write: %s", tern_strerror(ret));
	for (long i = 0; i < 50000000 && !req.done; i++) {
		tern_progress(a);
		tern_progress(b);
	}
	CHECK(req.done && req.status == 0, "write: %s %s",
	      tern_strerror(req.status), req.errmsg);
	/* tcp: a write completes at its initiator once on its way */
	for (int i = 0; i < 100000; i++)
		tern_progress(b);
}

static void *map(void *at)
{
	void *p = mmap(at, LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1,
		       0);

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

static int lands(const uint8_t *p, size_t len, uint8_t v)
{
	for (int tries = 0; tries < 200; tries++) {
		size_t i = 0;

		while (i < len && p[i] == v)
			i++;
		if (i == len)
			return 1;
		for (int k = 0; k < 10000; k++)
			tern_progress(b);
	}
	return 0;
}

static void shared_range(uint8_t *src, struct tern_mr *smr)
{
	uint8_t *far = map(NULL);
	struct tern_mr *x = reg(b, far, LEN, RW, 0);
	struct tern_mr *y = reg(b, far, LEN, RW, 0);

	CHECK(same_keys(x, y) == cache,
	      "the same range and rights twice: %s keys",
	      same_keys(x, y) ? "the same" : "other");
	/* Either close leaves the other whole. */
	CHECK(tern_mr_close(x) == 0, "close the first");
	memset(src, 0x5a, 4096);
	write_wait(smr, src, 4096, y, 8192);
	CHECK(lands(far + 8192, 4096, 0x5a),
	      "a write through the second after the first's close");
	CHECK(tern_mr_close(y) == 0, "close the second");
	munmap(far, LEN);
}

static void apart(void)
{
	uint8_t *far = map(NULL);
	struct tern_mr *x = reg(b, far, LEN, RW, 0);
	struct tern_mr *rights = reg(b, far, LEN, RDWR, 0);
	struct tern_mr *sub = reg(b, far + 4096, 4096, RW, 0);
	struct tern_mr *own = reg(b, far, LEN, RW, TERN_MR_F_NOCACHE);

	CHECK(!same_keys(x, rights), "other rights share a registration");
	CHECK(!same_keys(x, sub), "a remote sub-range shares a registration "
				  "(its key would reach the whole range)");
	CHECK(!same_keys(x, own), "TERN_MR_F_NOCACHE shares a registration");
	CHECK(tern_mr_close(own) == 0 && tern_mr_close(sub) == 0 &&
		      tern_mr_close(rights) == 0 && tern_mr_close(x) == 0,
	      "close");
	munmap(far, LEN);
}

/* A sub-range of a local-only region: shares it, and writes from it. */
static void local_sub(void)
{
	uint8_t *big = map(NULL), *far = map(NULL);
	struct tern_mr *whole = reg(a, big, LEN, TERN_ACCESS_LOCAL, 0);
	struct tern_mr *part = reg(a, big + 65536, 8192, TERN_ACCESS_LOCAL, 0);
	struct tern_mr *dst = reg(b, far, LEN, RW, 0);

	CHECK(same_keys(whole, part) == cache,
	      "a local-only sub-range: %s keys",
	      same_keys(whole, part) ? "the same" : "other");
	CHECK(tern_mr_close(whole) == 0, "close the whole");
	memset(big + 65536, 0xc3, 8192);
	write_wait(part, big + 65536, 8192, dst, 0);
	CHECK(lands(far, 8192, 0xc3), "a write from the sub-range");
	CHECK(tern_mr_close(part) == 0 && tern_mr_close(dst) == 0, "close");
	munmap(big, LEN);
	munmap(far, LEN);
}

/* Closed, unmapped, mapped again at the same address: a new
 * registration, and a write lands in the new memory. */
static void reuse(uint8_t *src, struct tern_mr *smr)
{
	uint8_t *far = map(NULL), *again;
	struct tern_mr *x = reg(b, far, LEN, RW, 0);
	struct tern_mr_desc old, now;
	struct tern_mr *y;

	tern_mr_desc(x, &old);
	CHECK(tern_mr_close(x) == 0, "close");
	munmap(far, LEN);
	again = map(far);
	CHECK(again == far, "mapped again at %p, not %p", (void *)again,
	      (void *)far);
	memset(again, 0x11, LEN);
	y = reg(b, again, LEN, RW, 0);
	tern_mr_desc(y, &now);
	CHECK(memcmp(old.keys, now.keys, old.nkeys * sizeof(old.keys[0])) != 0,
	      "memory mapped again reached through the old registration");
	memset(src, 0xe7, 4096);
	write_wait(smr, src, 4096, y, LEN - 4096);
	CHECK(lands(again + LEN - 4096, 4096, 0xe7),
	      "a write into the memory mapped again");
	CHECK(again[0] == 0x11, "bytes outside the write changed");
	CHECK(tern_mr_close(y) == 0, "close");
	munmap(again, LEN);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "nocache", no_argument, NULL, 'c' },
		{ 0 },
	};
	struct tern_mr *smr;
	uint8_t *src;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			prov = optarg;
		else if (c == 'n')
			node = optarg;
		else if (c == 'c')
			cache = 0;
		else
			return 2;
	}
	CHECK(prov != NULL, "usage: mr_cache --provider PROV [--node ADDR] "
			    "[--nocache]");
	if (!cache)
		setenv("TERN_MR_CACHE", "0", 1);
	a = open_ctx();
	b = open_ctx();
	ab = peer_of(a, b);
	(void)peer_of(b, a); /* b lets a write to it (same host) */
	src = map(NULL);
	smr = reg(a, src, LEN, TERN_ACCESS_LOCAL, 0);

	shared_range(src, smr);
	apart();
	local_sub();
	reuse(src, smr);

	CHECK(tern_mr_close(smr) == 0, "close");
	tern_ctx_close(a);
	tern_ctx_close(b);
	munmap(src, LEN);
	printf("mr_cache %s%s: ok\n", prov, cache ? "" : " (cache off)");
	return 0;
}
