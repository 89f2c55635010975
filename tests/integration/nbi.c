/* SPDX-License-Identifier: MIT */
/*
 * Implicit operations (tern_write_nbi() and kin, tern_quiet()) over a real
 * provider or the same-host path, every byte checked:
 *
 *   data   one process, ctx a (initiator) and ctx b (target), one thread
 *          driving both: 20,000 writes of 1 B to 64 KiB to distinct
 *          places of b's region and 3,000 writes with immediate, posted
 *          without a request each (retrying -ENOBUFS after a progress
 *          pass, so that the in-flight limit is met, not exceeded), then
 *          one tern_quiet() for the peer: it completes only when every
 *          byte is in b (checked), it counts every operation, b counts
 *          the immediate exactly 3,000 times; then reads of all of it
 *          back, one quiet for the ctx, every byte checked; atomic adds
 *          where the provider has them.
 *   death  the target is a child process; the parent posts writes, the
 *          child is killed, and the quiet fails (not hangs) within 10 s,
 *          naming the first operation that failed.
 *
 * usage: nbi --provider PROV [--node ADDR] [--mem host|shared] data|death
 * Exit 0 when every check held, 1 otherwise (it says which).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "check.h"
#include "pair.h"

#define REGION (16u << 20)
#define NWRITE 20000
#define NIMM   3000
#define IMM    0x5150u

static const char *prov, *node;
static int shared_mem;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pat(uint64_t off, unsigned int seed)
{
	uint32_t x = (uint32_t)(off * 2654435761u) ^ (seed * 40503u);

	x ^= x >> 13;
	return (uint8_t)(x | 1);
}

static struct tern_ctx *open_ctx(void)
{
	return pair_open(prov, node);
}

static uint8_t *alloc(size_t len)
{
	void *p = NULL;

	CHECK(tern_mem_alloc(shared_mem ? TERN_MEM_SHARED : TERN_MEM_HOST, 0,
			     len, &p) == 0,
	      "tern_mem_alloc");
	memset(p, 0, len);
	return p;
}

/* Unless TERN_LOCAL=0, the same-host path: progress both until the
 * target has admitted us (docs/local.md), at most 5 s. */
static void wait_path(struct tern_ctx *a, struct tern_ctx *b,
		      struct tern_peer *peer)
{
	const char *env = getenv("TERN_LOCAL");
	uint64_t end = now_ms() + 5000;

	if (env != NULL && strcmp(env, "0") == 0)
		return;
	while (tern_peer_path(peer) != TERN_PATH_LOCAL && now_ms() < end) {
		(void)tern_progress(a);
		if (b != NULL)
			(void)tern_progress(b);
	}
	CHECK(tern_peer_path(peer) == TERN_PATH_LOCAL,
	      "no same-host path after 5 s");
}

/* Progress both until @req is done, at most @ms. */
static void drive(struct tern_ctx *a, struct tern_ctx *b, struct tern_req *req,
		  int ms, const char *what)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (!req->done) {
		CHECK(now_ms() < end, "%s: not done after %d ms", what, ms);
		CHECK(tern_progress(a) >= 0, "progress a");
		if (b != NULL)
			CHECK(tern_progress(b) >= 0, "progress b");
	}
}

/* Post with @fn's arguments, progressing while the in-flight limit says
 * -ENOBUFS. */
#define POST(a, b, call)                                            \
	do {                                                        \
		int r_;                                             \
		while ((r_ = (call)) == -ENOBUFS) {                 \
			(void)tern_progress(a);                     \
			(void)tern_progress(b);                     \
			nobufs++;                                   \
		}                                                   \
		CHECK(r_ == 0, "%s: %s", #call, tern_strerror(r_)); \
	} while (0)

static size_t len_of(unsigned int i)
{
	static const size_t lens[] = { 1, 8, 63, 512, 4096, 4097, 65536, 300 };

	return lens[i % 8];
}

/* run_data's two ctxs: a writes from src (and reads into back) through
 * peer, to b's region dst (its descriptor d); b adds a back. */
struct data {
	struct tern_ctx *a, *b;
	uint8_t *src, *dst, *back;
	struct tern_mr *smr, *dmr, *bmr;
	struct tern_mr_desc d;
	struct tern_peer *peer, *back_peer;
};

static void data_open(struct data *x)
{
	uint8_t card[TERN_CARD_MAX];
	ssize_t clen;

	x->a = open_ctx();
	x->b = open_ctx();
	x->src = alloc(REGION);
	x->dst = alloc(REGION);
	x->back = alloc(REGION);
	clen = tern_ctx_card(x->b, card, sizeof(card));
	CHECK(clen > 0 &&
		      tern_peer_add(x->a, card, (size_t)clen, &x->peer) == 0,
	      "peer_add");
	/* The owner of memory lets a same-host peer in once it has added
	 * that peer's card in turn (docs/local.md). */
	clen = tern_ctx_card(x->a, card, sizeof(card));
	CHECK(clen > 0 && tern_peer_add(x->b, card, (size_t)clen,
					&x->back_peer) == 0,
	      "peer_add back");
	CHECK(tern_mr_reg(x->a, x->src, REGION, TERN_ACCESS_LOCAL, &x->smr) ==
		      0,
	      "reg src");
	CHECK(tern_mr_reg(x->a, x->back, REGION, TERN_ACCESS_LOCAL, &x->bmr) ==
		      0,
	      "reg back");
	CHECK(tern_mr_reg(x->b, x->dst, REGION,
			  TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_READ |
				  TERN_ACCESS_REMOTE_ATOMIC,
			  &x->dmr) == 0,
	      "reg dst");
	CHECK(tern_mr_desc(x->dmr, &x->d) == 0, "desc");
	for (uint64_t k = 0; k < REGION; k++)
		x->src[k] = pat(k, 1);
	wait_path(x->a, x->b, x->peer);
	printf("path: %s, memory: %s\n",
	       tern_peer_path(x->peer) == TERN_PATH_LOCAL ? "same host"
							  : "fabric",
	       shared_mem ? "shared" : "host");
}

/* Writes to distinct places: [off, off + len) of both; then writes with
 * immediate; one quiet of the peer, after which every byte is there. */
static void data_writes(struct data *x)
{
	struct tern_ctx *a = x->a, *b = x->b;
	struct tern_peer *peer = x->peer;
	uint8_t *src = x->src, *dst = x->dst;
	uint64_t off = 0, nobufs = 0;
	struct tern_req q;
	unsigned int i;

	for (i = 0; i < NWRITE; i++) {
		size_t len = len_of(i);

		if (off + len > REGION - 8 * NIMM)
			off = 0; /* wraps: the same bytes again */
		POST(a, b,
		     tern_write_nbi(peer, x->smr, src + off, len, &x->d, off));
		off += len + (i % 3);
	}
	for (i = 0; i < NIMM; i++) {
		uint64_t o = REGION - 8 * NIMM + 8 * (uint64_t)i;

		POST(a, b,
		     tern_write_imm_nbi(peer, x->smr, src + o, 8, &x->d, o,
					IMM));
	}
	tern_req_init(&q, NULL, NULL);
	CHECK(tern_quiet(a, peer, &q) == 0, "quiet");
	drive(a, b, &q, 60000, "the quiet of the writes");
	CHECK(q.status == 0, "quiet: %s (%s)", tern_strerror(q.status),
	      q.errmsg);
	CHECK(q.len == NWRITE + NIMM && q.value == 0,
	      "the quiet counted %zu operations, %" PRIu64 " failed; %d posted",
	      q.len, q.value, NWRITE + NIMM);
	/* Every byte written is there the moment the quiet is done. */
	off = 0;
	for (i = 0; i < NWRITE; i++) {
		size_t len = len_of(i);

		if (off + len > REGION - 8 * NIMM)
			off = 0;
		for (size_t k = 0; k < len; k++)
			CHECK(dst[off + k] == pat(off + k, 1),
			      "write %u: byte %zu at %" PRIu64 " not there", i,
			      k, off);
		off += len + (i % 3);
	}
	for (uint64_t k = REGION - 8 * NIMM; k < REGION; k++)
		CHECK(dst[k] == pat(k, 1), "write_imm: byte at %" PRIu64, k);
	for (int k = 0; k < 1000 && tern_imm_count(b, IMM) < NIMM; k++) {
		tern_progress(b);
		usleep(1000);
	}
	for (int k = 0; k < 20; k++)
		tern_progress(b);
	CHECK(tern_imm_count(b, IMM) == NIMM,
	      "b counted the immediate %" PRIu64 " times, %d sent",
	      tern_imm_count(b, IMM), NIMM);
	printf("ok: %d writes and %d with immediate, one quiet: every byte "
	       "there, the immediate counted %d times (%" PRIu64
	       " posts waited for room)\n",
	       NWRITE, NIMM, NIMM, nobufs);
}

/* Reads of it all back, 64 KiB each, one quiet for the ctx. */
static void data_reads(struct data *x)
{
	struct tern_ctx *a = x->a, *b = x->b;
	uint64_t off, nobufs = 0;
	struct tern_req q;

	for (uint64_t k = 0; k < REGION; k++)
		x->dst[k] = pat(k, 2);
	for (off = 0; off < REGION; off += 65536)
		POST(a, b,
		     tern_read_nbi(x->peer, x->bmr, x->back + off, 65536, &x->d,
				   off));
	tern_req_init(&q, NULL, NULL);
	CHECK(tern_quiet(a, NULL, &q) == 0, "quiet ctx");
	drive(a, b, &q, 60000, "the quiet of the reads");
	/* The ctx's quiet covers every implicit operation of the ctx since
	 * its last: the writes too. */
	CHECK(q.status == 0 && q.len == NWRITE + NIMM + REGION / 65536,
	      "read quiet: %s, %zu operations", tern_strerror(q.status), q.len);
	for (uint64_t k = 0; k < REGION; k++)
		CHECK(x->back[k] == pat(k, 2), "read: byte at %" PRIu64, k);
	printf("ok: %u reads of 64 KiB, one quiet for the ctx: every byte\n",
	       REGION / 65536);
}

/* Atomic adds, where the provider has them. */
static void data_adds(struct data *x)
{
	struct tern_ctx *a = x->a, *b = x->b;
	uint64_t *word = (uint64_t *)(void *)x->dst, nobufs = 0;
	struct tern_req q;
	int r;

	*word = 5;
	r = tern_atomic_add_nbi(x->peer, &x->d, 0, 3);
	if (r == -TERN_ENOTSUP) {
		printf("ok: no 64-bit atomics here: "
		       "tern_atomic_add_nbi() says -TERN_ENOTSUP\n");
		return;
	}
	CHECK(r == 0, "atomic_add_nbi: %s", tern_strerror(r));
	for (unsigned int i = 1; i < 100; i++)
		POST(a, b, tern_atomic_add_nbi(x->peer, &x->d, 0, 3));
	tern_req_init(&q, NULL, NULL);
	CHECK(tern_quiet(a, x->peer, &q) == 0, "quiet");
	drive(a, b, &q, 30000, "the quiet of the adds");
	/* The peer's quiet covers the reads too: the ctx's quiet did not
	 * end the peer's epoch. */
	CHECK(q.status == 0 && q.len == 100 + REGION / 65536, "adds: %s, %zu",
	      tern_strerror(q.status), q.len);
	CHECK(*word == 5 + 300, "the word is %" PRIu64, *word);
	printf("ok: 100 atomic adds, the word is 305\n");
}

static int run_data(void)
{
	struct data x;

	data_open(&x);
	data_writes(&x);
	data_reads(&x);
	data_adds(&x);
	tern_peer_remove(x.peer);
	tern_peer_remove(x.back_peer);
	tern_mr_close(x.smr);
	tern_mr_close(x.bmr);
	tern_mr_close(x.dmr);
	CHECK(tern_ctx_close(x.a) == 0 && tern_ctx_close(x.b) == 0, "close");
	tern_mem_free(shared_mem ? TERN_MEM_SHARED : TERN_MEM_HOST, x.src);
	tern_mem_free(shared_mem ? TERN_MEM_SHARED : TERN_MEM_HOST, x.dst);
	tern_mem_free(shared_mem ? TERN_MEM_SHARED : TERN_MEM_HOST, x.back);
	return 0;
}

static void put_all(int fd, const void *p, size_t n)
{
	CHECK(write(fd, p, n) == (ssize_t)n, "pipe write");
}

static void get_all(int fd, void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);

		CHECK(r > 0, "pipe read");
		got += (size_t)r;
	}
}

static int run_death(void)
{
	int fds[2], tofd[2];
	pid_t pid;

	CHECK(pipe(fds) == 0 && pipe(tofd) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	/* The child never outlives the parent (a failed check exits it
	 * before its kill). */
	if (pid == 0 &&
	    (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1))
		_exit(1);
	if (pid == 0) {
		struct tern_ctx *b = open_ctx();
		uint8_t card[TERN_CARD_MAX], *dst = alloc(REGION);
		struct tern_mr *dmr;
		struct tern_mr_desc d;
		struct tern_peer *back;
		ssize_t clen = tern_ctx_card(b, card, sizeof(card));
		uint32_t n = (uint32_t)clen;

		CHECK(clen > 0, "card");
		CHECK(tern_mr_reg(b, dst, REGION, TERN_ACCESS_REMOTE_WRITE,
				  &dmr) == 0,
		      "reg");
		CHECK(tern_mr_desc(dmr, &d) == 0, "desc");
		put_all(fds[1], &n, sizeof(n));
		put_all(fds[1], card, n);
		put_all(fds[1], &d, sizeof(d));
		/* The parent's card: it may write to us (docs/local.md). */
		get_all(tofd[0], &n, sizeof(n));
		CHECK(n <= sizeof(card), "card length %u", n);
		get_all(tofd[0], card, n);
		CHECK(tern_peer_add(b, card, n, &back) == 0, "peer_add back");
		for (;;)
			tern_run(b, TERN_RUN_DEFAULT);
	}
	close(fds[1]);
	{
		struct tern_ctx *a = open_ctx();
		uint8_t card[TERN_CARD_MAX], *src = alloc(REGION);
		struct tern_peer *peer;
		struct tern_mr *smr;
		struct tern_mr_desc d;
		struct tern_req q, q0;
		uint64_t nobufs = 0, t0;
		ssize_t clen;
		uint32_t n;

		get_all(fds[0], &n, sizeof(n));
		CHECK(n <= sizeof(card), "card length %u", n);
		get_all(fds[0], card, n);
		get_all(fds[0], &d, sizeof(d));
		CHECK(tern_peer_add(a, card, n, &peer) == 0, "peer_add");
		clen = tern_ctx_card(a, card, sizeof(card));
		CHECK(clen > 0, "card");
		n = (uint32_t)clen;
		put_all(tofd[1], &n, sizeof(n));
		put_all(tofd[1], card, n);
		CHECK(tern_mr_reg(a, src, REGION, TERN_ACCESS_LOCAL, &smr) == 0,
		      "reg");
		wait_path(a, NULL, peer);
		/* It lives: a first round lands. */
		for (unsigned int i = 0; i < 64; i++)
			POST(a, a,
			     tern_write_nbi(peer, smr, src, 65536, &d,
					    65536 * (uint64_t)i));
		tern_req_init(&q0, NULL, NULL);
		CHECK(tern_quiet(a, peer, &q0) == 0, "quiet");
		drive(a, NULL, &q0, 30000, "the first round");
		CHECK(q0.status == 0, "first round: %s (%s)",
		      tern_strerror(q0.status), q0.errmsg);
		printf("path: %s\n", tern_peer_path(peer) == TERN_PATH_LOCAL
					     ? "same host"
					     : "fabric");
		/* Then it dies with writes posted and not yet done. */
		for (unsigned int i = 0; i < 2000; i++)
			POST(a, a,
			     tern_write_nbi(peer, smr, src, 65536, &d,
					    65536 * (uint64_t)(i % 256)));
		CHECK(kill(pid, SIGKILL) == 0, "kill");
		CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
		t0 = now_ms();
		tern_req_init(&q, NULL, NULL);
		CHECK(tern_quiet(a, peer, &q) == 0, "quiet");
		drive(a, NULL, &q, 10000, "the quiet after the target died");
		printf("the quiet: %s after %" PRIu64 " ms: %zu operations, "
		       "%" PRIu64 " failed, the first #%" PRIu64 " (%s)\n",
		       tern_strerror(q.status), now_ms() - t0, q.len, q.value,
		       q.imm, q.errmsg);
		CHECK(q.len == 2000, "it covers %zu operations", q.len);
		if (q.status == 0) {
			/* Copied in their posts (mapped shared memory): they
			 * all landed before it died. */
			printf("ok: every write landed before the death\n");
		} else {
			CHECK(q.value > 0 && q.imm > 64 &&
				      strstr(q.errmsg, "write #") != NULL,
			      "the report: %" PRIu64 " failed, first #%" PRIu64
			      ", \"%s\"",
			      q.value, q.imm, q.errmsg);
			printf("ok: the quiet failed, naming write #%" PRIu64
			       "\n",
			       q.imm);
		}
		tern_peer_remove(peer);
		tern_mr_close(smr);
		tern_ctx_close(a);
		tern_mem_free(shared_mem ? TERN_MEM_SHARED : TERN_MEM_HOST,
			      src);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "mem", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			prov = optarg;
			break;
		case 'n':
			node = optarg;
			break;
		case 'm':
			CHECK(strcmp(optarg, "host") == 0 ||
				      strcmp(optarg, "shared") == 0,
			      "--mem: '%s' is neither host nor shared", optarg);
			shared_mem = strcmp(optarg, "shared") == 0;
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: nbi --provider PROV [--node ADDR] "
				"[--mem host|shared] data|death\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(argv[optind], "data") == 0)
		return run_data();
	if (strcmp(argv[optind], "death") == 0)
		return run_death();
	fprintf(stderr, "nbi: unknown case '%s' (data, death)\n", argv[optind]);
	return 2;
}
