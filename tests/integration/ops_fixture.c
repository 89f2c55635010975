/* SPDX-License-Identifier: MIT */
/* ops' shared helpers (ops.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

#include "pipe.h"

struct opts g_opts;

/* --- pipes ------------------------------------------------------------ */

void put_blob(int fd, const void *buf, uint32_t len)
{
	pipe_put(fd, buf, len);
}

uint32_t get_blob(int fd, void *buf, uint32_t cap)
{
	uint32_t len, got = 0;

	CHECK(read(fd, &len, sizeof(len)) == sizeof(len), "pipe read");
	CHECK(len <= cap, "blob of %u bytes > %u", len, cap);
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		CHECK(n > 0, "pipe read");
		got += (uint32_t)n;
	}
	return len;
}

/* --- fabric helpers ------------------------------------------------------ */

struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr attr = {
		.provider = g_opts.provider,
		.node = g_opts.node,
	};
	struct tern_ctx *ctx;
	int ret = tern_ctx_open(&attr, &ctx);

	CHECK(ret == 0, "ctx: %s", tern_strerror(ret));
	return ctx;
}

void *alloc_buf(size_t len, int fill)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 128, len) == 0, "alloc");
	memset(p, fill, len);
	return p;
}

struct tern_mr *reg(struct tern_ctx *ctx, void *buf, size_t len,
		    uint64_t access)
{
	struct tern_mr *mr;
	int ret = tern_mr_reg(ctx, buf, len, access, &mr);

	CHECK(ret == 0, "mr_reg: %s", tern_strerror(ret));
	return mr;
}

void send_desc(int fd, const struct tern_mr *mr)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	struct tern_mr_desc d;

	tern_mr_desc(mr, &d);
	put_blob(fd, buf, (uint32_t)tern_mr_desc_pack(&d, buf, sizeof(buf)));
}

void get_desc(int fd, struct tern_mr_desc *d)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	uint32_t n = get_blob(fd, buf, sizeof(buf));

	CHECK(tern_mr_desc_unpack(buf, n, d) == (ssize_t)n, "bad desc");
}

void send_card(int fd, struct tern_ctx *ctx)
{
	uint8_t card[TERN_CARD_MAX];

	put_blob(fd, card, (uint32_t)tern_ctx_card(ctx, card, sizeof(card)));
}

struct tern_peer *get_peer(int fd, struct tern_ctx *ctx)
{
	uint8_t card[TERN_CARD_MAX];
	uint32_t n = get_blob(fd, card, sizeof(card));
	struct tern_peer *peer;
	int ret = tern_peer_add(ctx, card, n, &peer);

	CHECK(ret == 0, "peer_add: %s", tern_strerror(ret));
	return peer;
}

void wait_ok(struct tern_ctx *ctx, struct tern_req *req, const char *what)
{
	int ret = tern_wait(ctx, req, 20000);

	CHECK(ret == 0, "%s: wait: %s", what, tern_strerror(ret));
	CHECK(req->status == 0, "%s: %s (%s)", what, tern_strerror(req->status),
	      req->errmsg);
}

/* Drive progress (targets must, on manual-progress providers) until a byte
 * arrives on @fd; return it. */
int serve_until(struct tern_ctx *ctx, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	for (;;) {
		int ret = tern_wait(ctx, NULL, 5);

		CHECK(ret == 0 || ret == -ETIMEDOUT, "progress: %s",
		      tern_strerror(ret));
		if (poll(&p, 1, 0) == 1) {
			CHECK(read(fd, &c, 1) == 1, "pipe");
			return c;
		}
	}
}

/*
 * An initiator's local completion does not mean its data reached the
 * target, and a process that closes its sockets early can lose what is
 * still in flight (tcp). Targets say 'D' once they have everything;
 * initiators wait for it before they go.
 */
void target_has_it(struct chan *ch)
{
	char c = 'D';

	CHECK(write(ch->from_b[1], &c, 1) == 1, "pipe");
}

void wait_target(struct tern_ctx *ctx, struct chan *ch)
{
	CHECK(serve_until(ctx, ch->from_b[0]) == 'D', "target said no");
}

void mt_fill(void *buf, size_t len, uint64_t seed)
{
	struct tern_mt64 rng;

	tern_mt64_seed(&rng, seed);
	tern_mt64_fill(&rng, buf, len);
}

pid_t spawn(void (*fn)(struct chan *, void *), struct chan *ch, void *arg)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		fn(ch, arg);
		exit(0);
	}
	return pid;
}

/* After the last spawn: the parent keeps only to_b[1] and from_b[0], so
 * a child that dies shows as end-of-file instead of a hang. */
void parent_ends(struct chan *ch)
{
	close(ch->to_b[0]);
	close(ch->from_b[1]);
}

int reap(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void need(int have, const char *what)
{
	if (!have) {
		printf("SKIP: provider %s does not offer %s (fi_info)\n",
		       g_opts.provider, what);
		exit(SKIP);
	}
}
