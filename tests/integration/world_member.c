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

int main(int argc, char **argv)
{
	struct tern_ctx_attr ca = { .rails = 1 };
	static uint8_t inbox[MAXR * 8], out[8];
	struct tern_world_attr wa;
	struct tern_mr *mr, *omr;
	struct tern_world *w;
	struct tern_ctx *ctx;
	int rank, ret, round = 1;
	/* From round 1 on, per peer: its handle, and an expectation counting
	 * on it that only its departure ends (-TERN_EPEERGONE). */
	struct tern_peer *held[MAXR] = { 0 };
	struct tern_req waits[MAXR];
	struct tern_mr_desc descs[MAXR];
	int waiting[MAXR] = { 0 };

	CHECK(argc == 6 || argc == 7,
	      "usage: world_member SPEC RANK SIZE PROVIDER DIR [FIRST-ROUND]");
	if (argc == 7)
		round = atoi(argv[6]);
	rank = atoi(argv[2]);
	ca.provider = argv[4];
	/* $TERN_NODE (the test hosts' addresses), else loopback */
	if (strcmp(argv[4], "tcp") == 0 && getenv("TERN_NODE") == NULL)
		ca.node = "127.0.0.1";
	ret = tern_ctx_open(&ca, &ctx);
	CHECK(ret == 0, "ctx: %s", tern_strerror(ret));
	tern_world_attr_init(&wa);
	wa.rank = rank;
	wa.size = atoi(argv[3]);
	wa.lease_s = 2;
	wa.timeout_ms = 20000;
	wa.on_member = on_member;
	ret = tern_world_open(ctx, argv[1], &wa, &w);
	CHECK(ret == 0, "rank %d: open %s: %s", rank, argv[1],
	      tern_strerror(ret));
	printf("open: rank %d of %d\n", tern_world_rank(w), tern_world_size(w));
	fflush(stdout);
	CHECK(tern_mr_reg(ctx, inbox, sizeof(inbox),
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &mr) == 0 &&
		      tern_mr_reg(ctx, out, sizeof(out), TERN_ACCESS_LOCAL,
				  &omr) == 0,
	      "reg");
	{
		struct tern_mr_desc d;

		tern_mr_desc(mr, &d);
		CHECK(tern_world_publish(w, "inbox", &d) == 0, "publish");
	}
	while (!exists(argv[5], "stop")) {
		char name[32];
		int peers[MAXR], np = 0;
		struct tern_req ex;
		char heard[256] = "";

		snprintf(name, sizeof(name), "round%d", round);
		if (!exists(argv[5], name)) {
			tern_wait(ctx, NULL, 50); /* events run from here */
			continue;
		}
		for (int r = 0; r < tern_world_size(w) && r < MAXR; r++)
			if (r != rank && tern_world_alive(w, r))
				peers[np++] = r;
		tern_req_init(&ex, NULL, NULL);
		CHECK(np > 0 && tern_imm_expect(ctx, (uint32_t)round,
						(uint64_t)np, &ex) == 0,
		      "expect %d", np);
		for (int i = 0; i < np; i++) {
			struct tern_mr_desc d;
			struct tern_peer *p;
			struct tern_req req;

			ret = tern_world_lookup(w, peers[i], "inbox", &d);
			CHECK(ret == 0, "round %d: rank %d's inbox: %s", round,
			      peers[i], tern_strerror(ret));
			ret = tern_world_peer(w, peers[i], &p);
			CHECK(ret == 0, "round %d: peer %d: %s", round,
			      peers[i], tern_strerror(ret));
			memset(out, rank + 1, sizeof(out));
			tern_req_init(&req, NULL, NULL);
			ret = tern_write_imm(p, omr, out, 8, &d,
					     (uint64_t)rank * 8,
					     (uint32_t)round, &req);
			CHECK(ret == 0 && tern_wait(ctx, &req, 10000) == 0 &&
				      req.status == 0,
			      "round %d: write to %d", round, peers[i]);
			snprintf(heard + strlen(heard),
				 sizeof(heard) - strlen(heard), " %d",
				 peers[i]);
		}
		/* Those gone since: refused at once, and what counted on
		 * them ended. */
		for (int r = 0; r < MAXR; r++) {
			struct tern_req q;
			struct tern_peer *p;

			if (held[r] == NULL || tern_world_alive(w, r))
				continue;
			CHECK(tern_world_peer(w, r, &p) == -TERN_EPEERGONE,
			      "rank %d is gone: tern_world_peer", r);
			tern_req_init(&q, NULL, NULL);
			ret = tern_write(held[r], omr, out, 8, &descs[r], 0,
					 &q);
			CHECK(ret == -TERN_EPEERGONE,
			      "a write to gone rank %d: %s", r,
			      tern_strerror(ret));
			if (waiting[r]) {
				tern_wait(ctx, &waits[r], 5000);
				CHECK(waits[r].done && waits[r].status ==
							       -TERN_EPEERGONE,
				      "an expectation from gone rank %d: %s", r,
				      tern_strerror(waits[r].status));
			}
			printf("round %d: rank %d gone: peer and write refused "
			       "(-TERN_EPEERGONE)%s\n",
			       round, r,
			       waiting[r] ? ", its expectation ended so" : "");
			held[r] = NULL;
			waiting[r] = 0;
		}
		ret = tern_wait(ctx, &ex, 15000);
		CHECK(ret == 0 && ex.status == 0,
		      "round %d: %llu of %d writes came", round,
		      (unsigned long long)tern_imm_count(ctx, (uint32_t)round),
		      np);
		for (int i = 0; i < np; i++)
			CHECK(inbox[peers[i] * 8] == peers[i] + 1,
			      "round %d: rank %d's bytes", round, peers[i]);
		for (int i = 0; i < np; i++) {
			int r = peers[i];

			if (held[r] != NULL)
				continue;
			tern_world_peer(w, r, &held[r]);
			tern_world_lookup(w, r, "inbox", &descs[r]);
			tern_req_init(&waits[r], NULL, NULL);
			/* imm 1000+r never comes: only r's going ends it
			 * (where the provider's sources are trusted) */
			waiting[r] = tern_imm_expect_from(
					     ctx, held[r], 1000u + (uint32_t)r,
					     1, -1, &waits[r]) == 0;
		}
		printf("round %d: wrote to and heard from ranks%s\n", round,
		       heard);
		fflush(stdout);
		round++;
	}
	tern_world_close(w);
	tern_mr_close(mr);
	tern_mr_close(omr);
	tern_ctx_close(ctx);
	return 0;
}
