/* SPDX-License-Identifier: MIT */
/*
 * The world API over a file world (a fresh directory), with PROVIDER:
 * refusals that name the bad value, put/get/publish/lookup, records that
 * are not tern's, a directory another run used, then two processes that
 * find each other, connect lazily (the cost of a first and a later
 * tern_world_peer() printed), write to each other and fence.
 *
 * usage: world PROVIDER
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "check.h"
#include "world_check.h"

static const char *prov;
static char dir[256];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct tern_ctx *ctx_open(void)
{
	return world_check_ctx(prov);
}

static int open_world(struct tern_ctx *ctx, const char *spec, int rank,
		      int size, int timeout_ms, struct tern_world **w)
{
	struct tern_world_attr a;

	tern_world_attr_init(&a);
	a.rank = rank;
	a.size = size;
	a.timeout_ms = timeout_ms;
	return tern_world_open(ctx, spec, &a, w);
}

static void write_file(const char *name, const void *buf, size_t len)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/one/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len, "%s", path);
	close(fd);
}

/* One rank alone: every refusal, and values of its own. */
static void alone(void)
{
	struct tern_ctx *ctx = ctx_open();
	struct tern_world *w = NULL;
	struct tern_mr_desc back;
	char spec[300], big[TERN_WORLD_VALUE_MAX + 1];
	struct tern_mr *mr;
	static uint8_t region[4096];
	ssize_t n;

	unsetenv("TERN_WORLD");
	unsetenv("TERN_WORLD_RANK");
	unsetenv("TERN_WORLD_SIZE");
	CHECK(open_world(ctx, NULL, -1, 0, 0, &w) == -EINVAL,
	      "no spec and no $TERN_WORLD");
	CHECK(open_world(ctx, "bogus:x", 0, 1, 0, &w) == -EINVAL, "bogus:");
	snprintf(spec, sizeof(spec), "file:%s/one", dir);
	CHECK(open_world(ctx, spec, -1, 0, 0, &w) == -EINVAL,
	      "a file world without rank and size");
	CHECK(open_world(ctx, spec, 2, 2, 0, &w) == -EINVAL, "rank 2 of 2");
	setenv("TERN_WORLD_RANK", "x1", 1);
	CHECK(open_world(ctx, spec, -1, 1, 0, &w) == -EINVAL,
	      "$TERN_WORLD_RANK=x1");
	unsetenv("TERN_WORLD_RANK");
	CHECK(open_world(ctx, "etcd://", 0, 1, 0, &w) < 0, "etcd:// alone");
	printf("ok - refusals: no world, bogus:, no rank/size, rank 2 of 2, "
	       "$TERN_WORLD_RANK=x1, etcd:// alone\n");

	CHECK(open_world(ctx, spec, 0, 1, 300, &w) == 0, "rank 0 of 1");
	world_check_alone(w, "file");
	printf("ok - put/get, republish, short buffer, timeout, names, "
	       "sizes\n");

	mr = world_check_publish(ctx, w, region, sizeof(region));
	/* Records that are not tern's. */
	write_file("r0.junk", "not a descriptor", 16);
	CHECK(tern_world_lookup(w, 0, "junk", &back) == -TERN_EDESC,
	      "a junk descriptor");
	{
		static char huge[TERN_WORLD_VALUE_MAX + 100];

		write_file("r0.huge", huge, sizeof(huge));
		n = tern_world_get(w, 0, "huge", big, sizeof(big));
		CHECK(n == -TERN_EPROTO, "an oversized record: %zd", n);
	}
	{
		char link[512];

		snprintf(link, sizeof(link), "%s/one/r0.link", dir);
		CHECK(symlink("/etc/passwd", link) == 0, "symlink");
		n = tern_world_get(w, 0, "link", big, sizeof(big));
		CHECK(n < 0, "a symlink is followed: %zd", n);
	}
	printf("ok - publish/lookup; a junk descriptor, an oversized record "
	       "and a symlink are refused\n");
	CHECK(tern_world_fence(w) == 0, "fence of one");
	tern_world_close(w);
	{
		struct tern_world *again = NULL;

		CHECK(open_world(ctx, spec, 0, 1, 300, &again) == -EEXIST,
		      "a directory another run used");
	}
	printf("ok - a directory another run used is refused\n");
	tern_mr_close(mr);
	tern_ctx_close(ctx);
}

/* Rank @rank of two: lazily connect, write to the other, fence. */
static int pair(int rank)
{
	struct tern_ctx *ctx = ctx_open();
	struct tern_world *w;
	struct tern_peer *p, *p2;
	struct tern_mr_desc theirs, d;
	static uint8_t mine[1 << 16], src[1 << 16];
	struct tern_req req, ex;
	struct tern_mr *mr, *smr;
	uint64_t t0, t1, t2;
	char spec[300];
	int ret;

	snprintf(spec, sizeof(spec), "file:%s/two", dir);
	t0 = now_ns();
	ret = open_world(ctx, spec, rank, 2, 20000, &w);
	CHECK(ret == 0, "rank %d: open: %s", rank, tern_strerror(ret));
	t1 = now_ns();
	if (rank == 0)
		printf("# open, 2 ranks: %.2f ms\n", (t1 - t0) / 1e6);
	CHECK(tern_world_peer(w, rank, &p) == -EINVAL, "own rank");
	CHECK(tern_world_peer(w, 7, &p) == -EINVAL, "rank 7 of 2");
	CHECK(tern_mr_reg(ctx, mine, sizeof(mine),
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &mr) == 0 &&
		      tern_mr_reg(ctx, src, sizeof(src), TERN_ACCESS_LOCAL,
				  &smr) == 0,
	      "reg");
	tern_mr_desc(mr, &d);
	CHECK(tern_world_publish(w, "buf", &d) == 0, "publish");
	tern_req_init(&ex, NULL, NULL);
	CHECK(tern_imm_expect(ctx, 77, 1, &ex) == 0, "expect");
	CHECK(tern_world_fence(w) == 0, "fence 1");
	CHECK(tern_world_lookup(w, 1 - rank, "buf", &theirs) == 0, "lookup");
	t0 = now_ns();
	ret = tern_world_peer(w, 1 - rank, &p);
	t1 = now_ns();
	CHECK(ret == 0, "peer: %s", tern_strerror(ret));
	CHECK(tern_world_peer(w, 1 - rank, &p2) == 0 && p2 == p,
	      "the same handle again");
	t2 = now_ns();
	if (rank == 0)
		printf("# tern_world_peer: first %.1f us (address vector "
		       "insert; open read the cards), later %.3f us\n",
		       (t1 - t0) / 1e3, (t2 - t1) / 1e3);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + rank);
	tern_req_init(&req, NULL, NULL);
	ret = tern_write_imm(p, smr, src, sizeof(src), &theirs, 0, 77, &req);
	CHECK(ret == 0, "write: %s", tern_strerror(ret));
	CHECK(tern_wait(ctx, &req, 20000) == 0 && req.status == 0,
	      "write done: %s", tern_strerror(req.status));
	CHECK(tern_wait(ctx, &ex, 20000) == 0 && ex.status == 0,
	      "the other's write landed");
	for (size_t i = 0; i < sizeof(mine); i++)
		CHECK(mine[i] == (uint8_t)(i * 7 + 1 - rank), "byte %zu", i);
	CHECK(tern_world_fence(w) == 0, "fence 2");
	CHECK(tern_world_warmup(w) == 0, "warmup");
	tern_world_close(w);
	tern_mr_close(mr);
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	int st;
	pid_t pid;

	CHECK(argc == 2, "usage: world PROVIDER");
	prov = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/tern-world-test.%d", (int)getpid());
	CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
	alone();
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(pair(1));
	pair(0);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		      WEXITSTATUS(st) == 0,
	      "rank 1 failed");
	printf("ok - two ranks found each other, wrote and fenced over %s\n",
	       prov);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}
