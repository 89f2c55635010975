/* SPDX-License-Identifier: MIT */
/*
 * A failed rail routed around, on a provider whose link really fails: two
 * ctxs in one process, two rails each on two NICs of the fake efa
 * provider (tests/fakeefa/), whose TERN_FAKEEFA_FAIL takes NIC 1's link
 * down mid-run (its operations complete "unreachable" and move nothing)
 * and brings it back. Round after round: writes and reads, plain and
 * striped, land byte for byte in their range and come back whole, every
 * request completing once with no error; writes with immediate while the
 * rail is down are counted exactly once. Then rail 1 is down for the peer
 * (tern_peer_rails), what was on it moved; after the link heals and the
 * cooldown passes, it is back and carries writes again.
 * With --all-down every link fails for good: the peer is gone, and posts
 * to it fail -TERN_EPEERGONE.
 * usage: failover [--all-down]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

#include "check.h"

#define CHUNK  (16u * 1024)
#define REGION (4u * 1024 * 1024)
#define GUARD  0xa5
#define IMM    0x77
#define NIMM   64

struct pair {
	struct tern_ctx *a, *b;
	struct tern_peer *pb;
	struct tern_mr *ma, *mb;
	struct tern_mr_desc d;
	uint8_t *src, *dst, *back;
};

static struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr a = {
		.provider = "efa",
		.domains = "rdmap16s27-rdm,rdmap32s27-rdm",
		.stripe_chunk = CHUNK,
	};
	struct tern_ctx *c;
	int r = tern_ctx_open(&a, &c);

	CHECK(r == 0, "ctx: %s", tern_strerror(r));
	return c;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void run(struct pair *p, struct tern_req *req)
{
	uint64_t until = now_ms() + 10000;

	while (!req->done && now_ms() < until) {
		tern_progress(p->a);
		tern_progress(p->b);
	}
	CHECK(req->done, "no completion in 10 s");
}

static void pair_open(struct pair *p)
{
	uint8_t card[TERN_CARD_MAX];
	unsigned int seed = 4242;
	ssize_t n;

	p->a = open_ctx();
	p->b = open_ctx();
	n = tern_ctx_card(p->b, card, sizeof(card));
	CHECK(n > 0 && tern_peer_add(p->a, card, (size_t)n, &p->pb) == 0,
	      "peer");
	n = tern_ctx_card(p->a, card, sizeof(card));
	CHECK(n > 0, "card");
	{
		struct tern_peer *pa;

		/* efa-direct: the target knows its initiators. */
		CHECK(tern_peer_add(p->b, card, (size_t)n, &pa) == 0, "peer");
	}
	CHECK(posix_memalign((void **)&p->src, 4096, REGION) == 0 &&
		      posix_memalign((void **)&p->dst, 4096, REGION) == 0,
	      "alloc");
	p->back = p->src + REGION / 2;
	for (size_t i = 0; i < REGION / 2; i++)
		p->src[i] = (uint8_t)(rand_r(&seed) >> 7);
	CHECK(tern_mr_reg(p->a, p->src, REGION, TERN_ACCESS_LOCAL, &p->ma) == 0,
	      "reg");
	CHECK(tern_mr_reg(p->b, p->dst, REGION,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE |
				  TERN_ACCESS_REMOTE_READ,
			  &p->mb) == 0,
	      "reg");
	tern_mr_desc(p->mb, &p->d);
}

/* Write @len bytes at @roff, check they landed (and nothing around them),
 * read them back. */
static void write_read(struct pair *p, size_t len, size_t roff)
{
	struct tern_req w, r;

	memset(p->dst, GUARD, roff + len + 4096);
	memset(p->back, 0, len + 1);
	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write(p->pb, p->ma, p->src, len, &p->d, roff, &w) == 0,
	      "write");
	run(p, &w);
	CHECK(w.status == 0 && w.len == len, "write %zu: status %d (%s)", len,
	      w.status, w.errmsg);
	CHECK(memcmp(p->dst + roff, p->src, len) == 0, "write %zu: data", len);
	for (size_t i = 0; i < roff; i++)
		CHECK(p->dst[i] == GUARD, "write %zu: byte %zu before", len, i);
	for (size_t i = roff + len; i < roff + len + 4096; i++)
		CHECK(p->dst[i] == GUARD, "write %zu: byte %zu after", len, i);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_read(p->pb, p->ma, p->back, len, &p->d, roff, &r) == 0,
	      "read");
	run(p, &r);
	CHECK(r.status == 0 && r.len == len, "read %zu: status %d (%s)", len,
	      r.status, r.errmsg);
	CHECK(memcmp(p->back, p->src, len) == 0, "read %zu: data", len);
	CHECK(p->back[len] == 0, "read %zu: past the end", len);
}

/* NIMM writes with immediate, counted by the target exactly once each. */
static void imm_round(struct pair *p)
{
	struct tern_req w[NIMM], x;
	uint64_t got;

	tern_req_init(&x, NULL, NULL);
	CHECK(tern_imm_expect(p->b, IMM, NIMM, &x) == 0, "expect");
	for (int i = 0; i < NIMM; i++) {
		tern_req_init(&w[i], NULL, NULL);
		CHECK(tern_write_imm(p->pb, p->ma, p->src + 4096 * i, 4096,
				     &p->d, 4096 * (uint64_t)i, IMM,
				     &w[i]) == 0,
		      "write_imm");
	}
	for (int i = 0; i < NIMM; i++) {
		run(p, &w[i]);
		CHECK(w[i].status == 0, "write_imm %d: %s", i, w[i].errmsg);
	}
	run(p, &x);
	CHECK(x.status == 0, "expectation: %d", x.status);
	for (int i = 0; i < 1000; i++) {
		tern_progress(p->a);
		tern_progress(p->b);
	}
	got = tern_imm_count(p->b, IMM);
	CHECK(got == 0, "%llu arrivals past the %d expected",
	      (unsigned long long)got, NIMM);
	CHECK(memcmp(p->dst, p->src, 4096 * NIMM) == 0, "write_imm: data");
}

static struct tern_peer_rail rail1(struct pair *p)
{
	struct tern_peer_rail st[2];

	CHECK(tern_peer_rails(p->pb, st, 2) == 2, "tern_peer_rails");
	CHECK(st[0].up == 1 && st[0].downs == 0, "rail 0 went down");
	return st[1];
}

static void heal(struct pair *p)
{
	const size_t lens[] = { 100, 4096, 5 * CHUNK + 7, 1024 * 1024 + 17 };
	struct tern_peer_rail st;
	uint64_t start = now_ms();
	int rounds = 0, seen_down = 0, imm_down = 0;

	/* Until rail 1 went down, and came back. */
	for (;;) {
		for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++)
			write_read(p, lens[t], 3 + t);
		rounds++;
		st = rail1(p);
		if (!st.up) {
			seen_down = 1;
			/* Every write takes rail 0: counted once each. */
			if (!imm_down) {
				imm_round(p);
				imm_down = 1;
			}
		}
		if (seen_down && st.up)
			break;
		CHECK(now_ms() - start < 20000,
		      "rail 1 not back in 20 s (down %d, %llu times)",
		      seen_down, (unsigned long long)st.downs);
	}
	CHECK(st.downs >= 1 && st.rerouted >= 1 && st.probes >= 1,
	      "rail 1: %llu downs, %llu rerouted, %llu probes",
	      (unsigned long long)st.downs, (unsigned long long)st.rerouted,
	      (unsigned long long)st.probes);
	printf("ok: rail 1 went down %llu time(s), %llu operation(s) and "
	       "part(s) moved to rail 0, back after %llu probe(s) and %d "
	       "rounds; every byte written and read back\n",
	       (unsigned long long)st.downs, (unsigned long long)st.rerouted,
	       (unsigned long long)st.probes, rounds);
	/* Back: it carries writes, and immediates count once. */
	for (int i = 0; i < 4; i++)
		write_read(p, 5 * CHUNK + 7, 11);
	imm_round(p);
	st = rail1(p);
	CHECK(st.up, "rail 1 down again");
	printf("ok: %d writes with immediate counted exactly once, rail "
	       "down and rail back\n",
	       2 * NIMM);
}

static void all_down(struct pair *p)
{
	struct tern_req w;
	int ret = 0;
	uint64_t start = now_ms(), failed = 0;

	for (int i = 0; i < 10000 && ret == 0; i++) {
		tern_req_init(&w, NULL, NULL);
		ret = tern_write(p->pb, p->ma, p->src, 5 * CHUNK, &p->d, 0, &w);
		if (ret != 0)
			break;
		run(p, &w);
		if (w.status != 0 && failed == 0)
			failed = now_ms();
	}
	CHECK(ret == -TERN_EPEERGONE, "a post to the peer: %s",
	      tern_strerror(ret));
	CHECK(failed != 0, "no write failed before the peer was gone");
	printf("ok: every rail down: the peer is gone %llu ms after the "
	       "first failure (started %llu ms before); posts fail: %s\n",
	       (unsigned long long)(now_ms() - failed),
	       (unsigned long long)(failed - start), tern_strerror(ret));
}

int main(int argc, char **argv)
{
	struct pair p;

	if (argc > 2 || (argc == 2 && strcmp(argv[1], "--all-down") != 0)) {
		fprintf(stderr, "usage: failover [--all-down]\n");
		return 2;
	}
	memset(&p, 0, sizeof(p));
	pair_open(&p);
	if (argc == 2)
		all_down(&p);
	else
		heal(&p);
	CHECK(tern_ctx_close(p.a) == 0 && tern_ctx_close(p.b) == 0, "close");
	free(p.src);
	free(p.dst);
	printf("PASS: failover%s\n", argc == 2 ? " --all-down" : "");
	return 0;
}
