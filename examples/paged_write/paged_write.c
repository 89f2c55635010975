/* SPDX-License-Identifier: MIT */
/*
 * A paged write with a counted immediate between two processes, built
 * against the installed tern (README, "Install"; tern(7)).
 *
 * The parent is the target: it registers a region, expects NPAGES writes
 * carrying IMM (tern_imm_expect) and hands its card and the region's
 * descriptor to the child over a pipe. The child, the initiator, writes
 * every page with tern_write_imm() and that same IMM, last page first.
 * Writes may land in any order (EFA's SRD does that): the target counts
 * them, and checks every byte once all NPAGES have landed.
 *
 * usage: paged_write [PROVIDER]   (default shm; exit 0 when verified)
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#define NPAGES 16
#define PAGE   (64 * 1024)
#define IMM    0x7e57u
#define SEED   2024

static int fail(const char *who, const char *what, int ret)
{
	fprintf(stderr, "paged_write %s: %s: %s\n", who, what,
		tern_strerror(ret));
	return 1;
}

/* A length, then that many bytes: one card or descriptor per call. */
static int put(int fd, const void *buf, size_t len)
{
	if (write(fd, &len, sizeof(len)) != sizeof(len) ||
	    write(fd, buf, len) != (ssize_t)len)
		return -EPIPE;
	return 0;
}

static ssize_t get(int fd, void *buf, size_t cap)
{
	size_t len, got = 0;
	ssize_t n = 1;

	if (read(fd, &len, sizeof(len)) != sizeof(len) || len > cap)
		return -EPIPE;
	while (got < len && (n = read(fd, (char *)buf + got, len - got)) > 0)
		got += (size_t)n;
	return got == len ? (ssize_t)len : -EPIPE;
}

static int target(const char *prov, int to_child, pid_t child)
{
	struct tern_ctx_attr attr = { .provider = prov };
	uint8_t card[TERN_CARD_MAX], packed[TERN_MR_DESC_MAX];
	static uint8_t buf[NPAGES * PAGE], want[NPAGES * PAGE];
	struct tern_ctx *ctx;
	struct tern_mr *mr;
	struct tern_mr_desc desc;
	struct tern_req expect;
	struct tern_mt64 rng;
	ssize_t clen, dlen;
	int ret, status;

	ret = tern_ctx_open(&attr, &ctx);
	if (ret != 0)
		return fail("target", "tern_ctx_open", ret);
	ret = tern_mr_reg(ctx, buf, sizeof(buf), TERN_ACCESS_REMOTE_WRITE, &mr);
	if (ret != 0)
		return fail("target", "tern_mr_reg", ret);
	tern_req_init(&expect, NULL, NULL);
	ret = tern_imm_expect(ctx, IMM, NPAGES, &expect);
	if (ret != 0)
		return fail("target", "tern_imm_expect", ret);
	clen = tern_ctx_card(ctx, card, sizeof(card));
	if (clen < 0)
		return fail("target", "tern_ctx_card", (int)clen);
	tern_mr_desc(mr, &desc);
	dlen = tern_mr_desc_pack(&desc, packed, sizeof(packed));
	if (dlen < 0)
		return fail("target", "tern_mr_desc_pack", (int)dlen);
	if (put(to_child, card, (size_t)clen) != 0 ||
	    put(to_child, packed, (size_t)dlen) != 0)
		return fail("target", "sending the card", -EPIPE);
	/* Done when NPAGES immediates are counted, in whatever order. */
	ret = tern_wait(ctx, &expect, 10000);
	if (ret != 0)
		return fail("target", "waiting for the pages", ret);
	if (expect.status != 0)
		return fail("target", "the expectation", expect.status);
	tern_mt64_seed(&rng, SEED);
	tern_mt64_fill(&rng, want, sizeof(want));
	if (memcmp(buf, want, sizeof(buf)) != 0)
		return fail("target", "checking the pages", -TERN_EVERIFY);
	printf("target: %d pages of %d bytes counted (imm 0x%x), verified\n",
	       NPAGES, PAGE, IMM);
	/* The initiator goes first, then the target closes. */
	if (write(to_child, "D", 1) != 1 || waitpid(child, &status, 0) < 0 ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return fail("target", "the initiator", -EPIPE);
	ret = tern_mr_close(mr);
	if (ret == 0)
		ret = tern_ctx_close(ctx);
	return ret == 0 ? 0 : fail("target", "closing", ret);
}

static int initiator(const char *prov, int from_parent)
{
	struct tern_ctx_attr attr = { .provider = prov };
	uint8_t card[TERN_CARD_MAX], packed[TERN_MR_DESC_MAX];
	static uint8_t src[NPAGES * PAGE];
	static struct tern_req req[NPAGES];
	struct pollfd pfd = { .fd = from_parent, .events = POLLIN };
	struct tern_ctx *ctx;
	struct tern_mr *mr;
	struct tern_peer *peer;
	struct tern_mr_desc rdesc;
	struct tern_mt64 rng;
	ssize_t clen, dlen;
	int ret;

	ret = tern_ctx_open(&attr, &ctx);
	if (ret != 0)
		return fail("initiator", "tern_ctx_open", ret);
	tern_mt64_seed(&rng, SEED);
	tern_mt64_fill(&rng, src, sizeof(src));
	ret = tern_mr_reg(ctx, src, sizeof(src), TERN_ACCESS_LOCAL, &mr);
	if (ret != 0)
		return fail("initiator", "tern_mr_reg", ret);
	clen = get(from_parent, card, sizeof(card));
	dlen = clen < 0 ? clen : get(from_parent, packed, sizeof(packed));
	if (dlen < 0)
		return fail("initiator", "reading the card", (int)dlen);
	ret = tern_peer_add(ctx, card, (size_t)clen, &peer);
	if (ret != 0)
		return fail("initiator", "tern_peer_add", ret);
	dlen = tern_mr_desc_unpack(packed, (size_t)dlen, &rdesc);
	if (dlen < 0)
		return fail("initiator", "tern_mr_desc_unpack", (int)dlen);
	for (int i = NPAGES - 1; i >= 0; i--) {
		uint64_t off = (uint64_t)i * PAGE;

		tern_req_init(&req[i], NULL, NULL);
		ret = tern_write_imm(peer, mr, src + off, PAGE, &rdesc, off,
				     IMM, &req[i]);
		if (ret != 0)
			return fail("initiator", "tern_write_imm", ret);
	}
	for (int i = 0; i < NPAGES; i++) {
		ret = tern_wait(ctx, &req[i], 10000);
		if (ret == 0)
			ret = req[i].status;
		if (ret != 0)
			return fail("initiator", "a page's write", ret);
	}
	/* A local completion means the source may be reused, not that the
	 * bytes have landed: progress on until the target has them all. */
	while (poll(&pfd, 1, 0) == 0) {
		ret = tern_wait(ctx, NULL, 10);
		if (ret != 0 && ret != -ETIMEDOUT)
			return fail("initiator", "progress", ret);
	}
	ret = tern_peer_remove(peer);
	if (ret == 0)
		ret = tern_mr_close(mr);
	if (ret == 0)
		ret = tern_ctx_close(ctx);
	return ret == 0 ? 0 : fail("initiator", "closing", ret);
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "shm";
	int fds[2], ret;
	pid_t pid;

	/* Fork before any tern call: each process opens its own ctx. */
	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		perror("paged_write");
		return 1;
	}
	if (pid == 0) {
		close(fds[1]);
		return initiator(prov, fds[0]);
	}
	close(fds[0]);
	ret = target(prov, fds[1], pid);
	printf("paged_write: %s\n", ret == 0 ? "OK" : "FAILED");
	return ret;
}
