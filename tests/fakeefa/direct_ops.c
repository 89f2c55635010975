/* SPDX-License-Identifier: MIT */
/*
 * tern's operations over the fake efa provider's efa-direct fabric (and,
 * with "efa", over its efa fabric), two ctxs in one process, checking what
 * tern does with each of efa-direct's rules (docs/efa.md):
 *   untagged messages, matched by tern, with their immediates;
 *   a send above the MTU refused at the call (-EMSGSIZE);
 *   a write longer than max_rdma_size split, completing once, every byte;
 *   a write with immediate that long refused;
 *   atomics refused (-TERN_ENOTSUP) on efa-direct, run on efa;
 *   a queued receive cancelled (no fi_cancel there);
 *   both ctxs know each other before any RMA (the fake fails an RMA whose
 *   target lacks its initiator; tern_rules.sh fails on any broken rule).
 * usage: direct_ops direct|efa
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#define BIG (3u * 1024 * 1024 + 5) /* over the fake's 1 MiB max_rdma_size */

static int failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failed = 1;                                          \
		}                                                            \
	} while (0)

/* Two ctxs over one fabric, a sending to b's registered buffer. */
struct pair {
	struct tern_ctx *a, *b;
	struct tern_mr *amr, *bmr;
	struct tern_peer *ab;
	struct tern_mr_desc bd;
	struct tern_ctx_info ia;
	uint8_t *abuf, *bbuf;
	int direct;
};

static struct tern_peer *peer_of(struct tern_ctx *x, struct tern_ctx *y)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p = NULL;
	ssize_t len = tern_ctx_card(y, card, sizeof(card));

	if (len < 0 || tern_peer_add(x, card, (size_t)len, &p) != 0) {
		fprintf(stderr, "peer_add failed\n");
		exit(1);
	}
	return p;
}

/* Progress both ctxs until @req is done (10 s at most). */
static void drive(struct pair *t, struct tern_req *req)
{
	for (long i = 0; i < 10000000 && !req->done; i++) {
		tern_progress(t->a);
		tern_progress(t->b);
	}
	CHECK(req->done, "request never completed");
}

/* Progress b until immediate @imm has come (or 100000 rounds). */
static void wait_imm(struct pair *t, uint64_t imm)
{
	for (int i = 0; i < 100000 && tern_imm_count(t->b, imm) == 0; i++)
		tern_progress(t->b);
}

/* Open both ctxs on @fabric, register a buffer in each, and make each
 * the other's peer; 0 or 1 (said on stderr). */
static int pair_open(struct pair *t, const struct tern_ctx_attr *attr)
{
	if (tern_ctx_open(attr, &t->a) != 0 ||
	    tern_ctx_open(attr, &t->b) != 0) {
		fprintf(stderr, "cannot open ctxs on efa %s\n", attr->fabric);
		return 1;
	}
	t->abuf = calloc(1, BIG);
	t->bbuf = calloc(1, BIG);
	if (t->abuf == NULL || t->bbuf == NULL ||
	    tern_mr_reg(t->a, t->abuf, BIG, TERN_ACCESS_LOCAL, &t->amr) != 0 ||
	    tern_mr_reg(t->b, t->bbuf, BIG,
			TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE |
				TERN_ACCESS_REMOTE_ATOMIC,
			&t->bmr) != 0 ||
	    tern_mr_desc(t->bmr, &t->bd) != 0) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	/* Both ways before any RMA: a target knows its initiator. */
	t->ab = peer_of(t->a, t->b);
	(void)peer_of(t->b, t->a);
	return 0;
}

/* What tern reports of the fabric. */
static void check_info(struct pair *t, const char *fabric)
{
	struct tern_ctx_info *ia = &t->ia;

	tern_ctx_query(t->a, ia);
	CHECK(strcmp(ia->fabric, fabric) == 0, "fabric %s", ia->fabric);
	if (t->direct) {
		CHECK(!ia->tagged, "efa-direct has no tagged messages");
		CHECK(ia->max_msg_size <= 8928, "max message %llu",
		      (unsigned long long)ia->max_msg_size);
		CHECK(ia->max_rma_size == 1024 * 1024, "max RMA %llu",
		      (unsigned long long)ia->max_rma_size);
		CHECK(!ia->atomic_fadd, "efa-direct has no atomics");
	} else {
		CHECK(ia->tagged && ia->atomic_fadd,
		      "efa has tags and atomics");
	}
}

/* A message with an immediate, matched by tern on efa-direct; above the
 * MTU: refused at the call, naming no provider error. */
static void check_messages(struct pair *t)
{
	struct tern_req s, r;
	int ret;

	memcpy(t->abuf, "hello efa", 9);
	tern_req_init(&r, NULL, NULL);
	tern_req_init(&s, NULL, NULL);
	CHECK(tern_recv(t->b, t->bmr, t->bbuf, 64, &r) == 0, "recv");
	CHECK(tern_send_imm(t->ab, t->amr, t->abuf, 9, 77, &s) == 0, "send");
	drive(t, &s);
	drive(t, &r);
	CHECK(r.status == 0 && r.len == 9 &&
		      memcmp(t->bbuf, "hello efa", 9) == 0,
	      "message: status %d len %zu", r.status, r.len);
	CHECK((r.flags & TERN_REQ_F_IMM) && r.imm == 77, "imm %llu",
	      (unsigned long long)r.imm);
	if (t->direct) {
		tern_req_init(&s, NULL, NULL);
		ret = tern_send(t->ab, t->amr, t->abuf, t->ia.max_msg_size + 1,
				&s);
		CHECK(ret == -EMSGSIZE, "oversized send: %s",
		      tern_strerror(ret));
	}
}

/* Longer than one RMA: split, one completion, every byte. With an
 * immediate (efa-direct): split too, the immediate with the last part,
 * once the others completed (delivery complete): counted once, every
 * byte there when it is. */
static void check_big_writes(struct pair *t)
{
	struct tern_req w;
	int ret;

	for (size_t i = 0; i < BIG; i++)
		t->abuf[i] = (uint8_t)(i * 7 + 3);
	memset(t->bbuf, 0, BIG);
	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write(t->ab, t->amr, t->abuf, BIG, &t->bd, 0, &w) == 0,
	      "big write");
	drive(t, &w);
	CHECK(w.status == 0, "big write: %s", tern_strerror(w.status));
	CHECK(memcmp(t->abuf, t->bbuf, BIG) == 0, "big write: bytes differ");
	if (!t->direct)
		return;
	for (size_t i = 0; i < BIG; i++)
		t->abuf[i] = (uint8_t)(i * 5 + 1);
	memset(t->bbuf, 0, BIG);
	tern_req_init(&w, NULL, NULL);
	ret = tern_write_imm(t->ab, t->amr, t->abuf, BIG, &t->bd, 0, 5, &w);
	CHECK(ret == 0, "big write_imm: %s", tern_strerror(ret));
	drive(t, &w);
	CHECK(w.status == 0, "big write_imm: %s", tern_strerror(w.status));
	wait_imm(t, 5);
	CHECK(tern_imm_count(t->b, 5) == 1,
	      "big write_imm: imm 5 counted %llu times",
	      (unsigned long long)tern_imm_count(t->b, 5));
	CHECK(memcmp(t->abuf, t->bbuf, BIG) == 0,
	      "big write_imm: bytes differ");
}

/* A write with immediate, counted at the target; writes within the
 * inject size (docs/api.md, "Small writes"): on efa an injected write,
 * completed by tern; efa-direct reports an inject size but has no RMA
 * inject (-FI_ENOSYS): posted whole, each still completes once and
 * lands. */
static void check_small_writes(struct pair *t)
{
	struct tern_req w;
	int ret;

	tern_req_init(&w, NULL, NULL);
	CHECK(tern_write_imm(t->ab, t->amr, t->abuf, 4096, &t->bd, 0, 9, &w) ==
		      0,
	      "write_imm");
	drive(t, &w);
	wait_imm(t, 9);
	CHECK(tern_imm_count(t->b, 9) == 1, "imm 9 counted %llu times",
	      (unsigned long long)tern_imm_count(t->b, 9));
	for (int k = 0; k < 3; k++) {
		memset(t->abuf, 0x50 + k, 16);
		memset(t->bbuf, 0, 16);
		tern_req_init(&w, NULL, NULL);
		ret = k == 2 ? tern_write_imm(t->ab, t->amr, t->abuf, 16,
					      &t->bd, 0, 11, &w)
			     : tern_write(t->ab, t->amr, t->abuf, 16, &t->bd, 0,
					  &w);
		CHECK(ret == 0, "small write %d: %s", k, tern_strerror(ret));
		drive(t, &w);
		CHECK(w.status == 0, "small write %d: %s", k,
		      tern_strerror(w.status));
		for (int i = 0; i < 100000 && t->bbuf[15] != 0x50 + k; i++)
			tern_progress(t->b);
		for (int i = 0; i < 16; i++)
			CHECK(t->bbuf[i] == 0x50 + k, "small write %d: byte %d",
			      k, i);
	}
	wait_imm(t, 11);
	CHECK(tern_imm_count(t->b, 11) == 1, "imm 11 counted %llu times",
	      (unsigned long long)tern_imm_count(t->b, 11));
}

/* Atomics: none on efa-direct (never emulated), run on efa. A queued
 * receive is cancelled (efa-direct has no fi_cancel). */
static void check_atomic_cancel(struct pair *t)
{
	struct tern_req w, r;
	int ret;

	tern_req_init(&w, NULL, NULL);
	ret = tern_atomic_fetch_add(t->ab, &t->bd, 0, 1, &w);
	if (t->direct) {
		CHECK(ret == -TERN_ENOTSUP, "atomic: %s", tern_strerror(ret));
	} else {
		CHECK(ret == 0, "atomic: %s", tern_strerror(ret));
		drive(t, &w);
		CHECK(w.status == 0, "atomic: %s", tern_strerror(w.status));
	}
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_recv(t->b, t->bmr, t->bbuf, 64, &r) == 0, "recv 2");
	tern_progress(t->b);
	CHECK(tern_req_cancel(t->b, &r) == 0, "cancel");
	drive(t, &r);
	CHECK(r.status == -ECANCELED, "cancelled recv: %s",
	      tern_strerror(r.status));
}

int main(int argc, char **argv)
{
	struct tern_ctx_attr attr = { .provider = "efa" };
	struct pair t = { 0 };

	if (argc != 2 ||
	    (strcmp(argv[1], "direct") != 0 && strcmp(argv[1], "efa") != 0)) {
		fprintf(stderr, "usage: direct_ops direct|efa\n");
		return 2;
	}
	t.direct = strcmp(argv[1], "direct") == 0;
	attr.fabric = t.direct ? "efa-direct" : "efa";
	if (pair_open(&t, &attr) != 0)
		return 1;
	check_info(&t, attr.fabric);
	check_messages(&t);
	check_big_writes(&t);
	check_small_writes(&t);
	check_atomic_cancel(&t);

	tern_ctx_close(t.a);
	tern_ctx_close(t.b);
	free(t.abuf);
	free(t.bbuf);
	printf("%s: %s\n", failed ? "FAIL" : "PASS", attr.fabric);
	return failed;
}
