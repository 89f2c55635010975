/* SPDX-License-Identifier: MIT */
/*
 * One rank of tests/integration/world_etcd.sh: join the world SPEC (lease
 * 2 s), print every membership event with the time it was seen, and on
 * each file DIR/roundN the script creates, run round N: write 8 B with
 * immediate N to every live rank (tern_world_peer: a joiner is reached
 * without a restart) and count one from each, then print
 * "round N: wrote to and heard from ranks ...". A rank gone since the
 * last round must be refused at once (tern_world_peer, a write to its
 * old handle: -TERN_EPEERGONE), and an expectation counting on it ended
 * with -TERN_EPEERGONE. Stops when DIR/stop appears.
 *
 * usage: world_member SPEC RANK SIZE PROVIDER DIR [FIRST-ROUND]
 * (a joiner starts at the round the others are at)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "check.h"

#define MAXR 16

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_member(struct tern_world *w, int rank, enum tern_world_event ev,
		      void *arg)
{
	(void)w;
	(void)arg;
	printf("event %s %d at %llu\n",
	       ev == TERN_WORLD_GONE ? "gone" : "joined", rank,
	       (unsigned long long)now_ms());
	fflush(stdout);
}

static int exists(const char *dir, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* A rank: its ctx, world and regions (inbox, where every rank writes its
 * 8 B; out, what it writes from). From round 1 on, per peer: its handle,
 * and an expectation counting on it that only its departure ends
 * (-TERN_EPEERGONE). */
struct member {
	struct tern_ctx *ctx;
	struct tern_world *w;
	struct tern_mr *mr, *omr;
	int rank;
	struct tern_peer *held[MAXR];
	struct tern_req waits[MAXR];
	struct tern_mr_desc descs[MAXR];
	int waiting[MAXR];
};

static uint8_t inbox[MAXR * 8], out[8];

/* Open the ctx on @prov and the world @spec of @size as rank m->rank;
 * publish the inbox. */
static void member_open(struct member *m, const char *spec, int size,
			const char *prov)
{
	struct tern_ctx_attr ca = { .rails = 1 };
	struct tern_world_attr wa;
	struct tern_mr_desc d;
	int ret;

	ca.provider = prov;
	/* $TERN_NODE (the test hosts' addresses), else loopback */
	if (strcmp(prov, "tcp") == 0 && getenv("TERN_NODE") == NULL)
		ca.node = "127.0.0.1";
	ret = tern_ctx_open(&ca, &m->ctx);
	CHECK(ret == 0, "ctx: %s", tern_strerror(ret));
	tern_world_attr_init(&wa);
	wa.rank = m->rank;
	wa.size = size;
	wa.lease_s = 2;
	wa.timeout_ms = 20000;
	wa.on_member = on_member;
	ret = tern_world_open(m->ctx, spec, &wa, &m->w);
	CHECK(ret == 0, "rank %d: open %s: %s", m->rank, spec,
	      tern_strerror(ret));
	printf("open: rank %d of %d\n", tern_world_rank(m->w),
	       tern_world_size(m->w));
	fflush(stdout);
	CHECK(tern_mr_reg(m->ctx, inbox, sizeof(inbox),
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &m->mr) == 0 &&
		      tern_mr_reg(m->ctx, out, sizeof(out), TERN_ACCESS_LOCAL,
				  &m->omr) == 0,
	      "reg");
	tern_mr_desc(m->mr, &d);
	CHECK(tern_world_publish(m->w, "inbox", &d) == 0, "publish");
}

/* Round @round's writes: 8 B with immediate @round to each of the @np
 * live ranks @peers, their ranks appended to @heard. */
static void write_round(struct member *m, int round, const int *peers, int np,
			char *heard, size_t cap)
{
	int rank = m->rank, ret;

	for (int i = 0; i < np; i++) {
		struct tern_mr_desc d;
		struct tern_peer *p;
		struct tern_req req;

		ret = tern_world_lookup(m->w, peers[i], "inbox", &d);
		CHECK(ret == 0, "round %d: rank %d's inbox: %s", round,
		      peers[i], tern_strerror(ret));
		ret = tern_world_peer(m->w, peers[i], &p);
		CHECK(ret == 0, "round %d: peer %d: %s", round, peers[i],
		      tern_strerror(ret));
		memset(out, rank + 1, sizeof(out));
		tern_req_init(&req, NULL, NULL);
		ret = tern_write_imm(p, m->omr, out, 8, &d, (uint64_t)rank * 8,
				     (uint32_t)round, &req);
		CHECK(ret == 0 && tern_wait(m->ctx, &req, 10000) == 0 &&
			      req.status == 0,
		      "round %d: write to %d", round, peers[i]);
		snprintf(heard + strlen(heard), cap - strlen(heard), " %d",
			 peers[i]);
	}
}

/* Those gone since the last round: refused at once, and what counted on
 * them ended. */
static void check_gone(struct member *m, int round)
{
	int ret;

	for (int r = 0; r < MAXR; r++) {
		struct tern_req q;
		struct tern_peer *p;

		if (m->held[r] == NULL || tern_world_alive(m->w, r))
			continue;
		CHECK(tern_world_peer(m->w, r, &p) == -TERN_EPEERGONE,
		      "rank %d is gone: tern_world_peer", r);
		tern_req_init(&q, NULL, NULL);
		ret = tern_write(m->held[r], m->omr, out, 8, &m->descs[r], 0,
				 &q);
		CHECK(ret == -TERN_EPEERGONE, "a write to gone rank %d: %s", r,
		      tern_strerror(ret));
		if (m->waiting[r]) {
			tern_wait(m->ctx, &m->waits[r], 5000);
			CHECK(m->waits[r].done &&
				      m->waits[r].status == -TERN_EPEERGONE,
			      "an expectation from gone rank %d: %s", r,
			      tern_strerror(m->waits[r].status));
		}
		printf("round %d: rank %d gone: peer and write refused "
		       "(-TERN_EPEERGONE)%s\n",
		       round, r,
		       m->waiting[r] ? ", its expectation ended so" : "");
		m->held[r] = NULL;
		m->waiting[r] = 0;
	}
}

/* Hold each of the @np ranks @peers not held yet: its handle, its
 * descriptor, an expectation only its going ends. */
static void hold_new(struct member *m, const int *peers, int np)
{
	for (int i = 0; i < np; i++) {
		int r = peers[i];

		if (m->held[r] != NULL)
			continue;
		tern_world_peer(m->w, r, &m->held[r]);
		tern_world_lookup(m->w, r, "inbox", &m->descs[r]);
		tern_req_init(&m->waits[r], NULL, NULL);
		/* imm 1000+r never comes: only r's going ends it (where the
		 * provider's sources are trusted) */
		m->waiting[r] = tern_imm_expect_from(m->ctx, m->held[r],
						     1000u + (uint32_t)r, 1, -1,
						     &m->waits[r]) == 0;
	}
}

/* Round @round: write to every live rank, hear one from each. */
static void run_round(struct member *m, int round)
{
	int peers[MAXR], np = 0, ret;
	struct tern_req ex;
	char heard[256] = "";

	for (int r = 0; r < tern_world_size(m->w) && r < MAXR; r++)
		if (r != m->rank && tern_world_alive(m->w, r))
			peers[np++] = r;
	tern_req_init(&ex, NULL, NULL);
	CHECK(np > 0 && tern_imm_expect(m->ctx, (uint32_t)round, (uint64_t)np,
					&ex) == 0,
	      "expect %d", np);
	write_round(m, round, peers, np, heard, sizeof(heard));
	check_gone(m, round);
	ret = tern_wait(m->ctx, &ex, 15000);
	CHECK(ret == 0 && ex.status == 0, "round %d: %llu of %d writes came",
	      round,
	      (unsigned long long)tern_imm_count(m->ctx, (uint32_t)round), np);
	for (int i = 0; i < np; i++)
		CHECK(inbox[peers[i] * 8] == peers[i] + 1,
		      "round %d: rank %d's bytes", round, peers[i]);
	hold_new(m, peers, np);
	printf("round %d: wrote to and heard from ranks%s\n", round, heard);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static struct member m;
	int round = 1;

	CHECK(argc == 6 || argc == 7,
	      "usage: world_member SPEC RANK SIZE PROVIDER DIR [FIRST-ROUND]");
	if (argc == 7)
		round = atoi(argv[6]);
	m.rank = atoi(argv[2]);
	member_open(&m, argv[1], atoi(argv[3]), argv[4]);
	while (!exists(argv[5], "stop")) {
		char name[32];

		snprintf(name, sizeof(name), "round%d", round);
		if (!exists(argv[5], name)) {
			tern_wait(m.ctx, NULL, 50); /* events run from here */
			continue;
		}
		run_round(&m, round);
		round++;
	}
	tern_world_close(m.w);
	tern_mr_close(m.mr);
	tern_mr_close(m.omr);
	tern_ctx_close(m.ctx);
	return 0;
}
