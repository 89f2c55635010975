/* SPDX-License-Identifier: MIT */
/*
 * ops' batches of pieces (pieces, pieces_arrays): scattered writes and
 * reads in one call, every byte and canary checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

/* --- scatter (pieces) ------------------------------------------------- */

#define PC_N	  256
#define PC_REGION (4 * MIB)
#define PC_SLOT	  (2 * PC_REGION / PC_N)
#define PC_LOCAL  (8 * MIB)
#define PC_CANARY 0x5a

/* The same 256 pieces on both sides: one per 32 KiB slot of the two
 * remote regions, random offset and length inside it, random source. */
static void make_pieces(struct tern_piece *pc)
{
	struct tern_mt64 rng;

	tern_mt64_seed(&rng, 22);
	for (uint32_t i = 0; i < PC_N; i++) {
		uint64_t slot = i / 2, len = 1 + tern_mt64_next(&rng) % 16384;
		uint64_t off = tern_mt64_next(&rng) % (PC_SLOT - len);

		pc[i] = (struct tern_piece){
			.loff = tern_mt64_next(&rng) % (PC_LOCAL - len),
			.roff = slot * PC_SLOT + off,
			.len = len,
			.region = i % 2,
		};
	}
	/* Post them in a scrambled order. */
	for (uint32_t i = PC_N - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(tern_mt64_next(&rng) % (i + 1));
		struct tern_piece t = pc[i];

		pc[i] = pc[j];
		pc[j] = t;
	}
}

void pieces_target(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *reg_buf[2], *src = alloc_buf(PC_LOCAL, 0);
	static struct tern_piece pc[PC_N];
	struct tern_mr *mr[2];
	struct tern_req expect;
	uint64_t checked = 0;

	(void)arg;
	for (int r = 0; r < 2; r++) {
		reg_buf[r] = alloc_buf(PC_REGION, PC_CANARY);
		mr[r] = reg(ctx, reg_buf[r], PC_REGION,
			    TERN_ACCESS_REMOTE_WRITE);
	}
	tern_req_init(&expect, NULL, NULL);
	CHECK(tern_imm_expect(ctx, 0x77, PC_N, &expect) == 0, "expect");
	send_card(ch->from_b[1], ctx);
	send_desc(ch->from_b[1], mr[0]);
	send_desc(ch->from_b[1], mr[1]);
	/* Done when all 256 immediates are counted, in whatever order. */
	wait_ok(ctx, &expect, "256 immediates");
	mt_fill(src, PC_LOCAL, 21);
	make_pieces(pc);
	for (int i = 0; i < PC_N; i++) {
		uint8_t *dst = reg_buf[pc[i].region] + pc[i].roff;

		CHECK(memcmp(dst, src + pc[i].loff, pc[i].len) == 0,
		      "piece %d (%llu bytes) differs", i,
		      (unsigned long long)pc[i].len);
		memset(dst, PC_CANARY, pc[i].len);
		checked += pc[i].len;
	}
	/* Everything between the pieces is untouched. */
	for (int r = 0; r < 2; r++) {
		for (size_t j = 0; j < PC_REGION; j++)
			CHECK(reg_buf[r][j] == PC_CANARY,
			      "byte %zu of region %d written outside a piece",
			      j, r);
	}
	printf("ok: 256 pieces, %llu bytes, land exactly; gaps untouched\n",
	       (unsigned long long)checked);
	target_has_it(ch);
	serve_until(ctx, ch->to_b[0]);
	tern_mr_close(mr[0]);
	tern_mr_close(mr[1]);
	tern_ctx_close(ctx);
	free(reg_buf[0]);
	free(reg_buf[1]);
	free(src);
}

/* The same pieces through tern_write_pieces_arrays(): one batch of three
 * arrays per remote region (the arrays name one region each), both out
 * at once; the target counts 256 immediates as before. */
static void pieces_as_arrays(struct tern_ctx *ctx, struct tern_peer *peer,
			     struct tern_mr *mr, const struct tern_piece *pc,
			     const struct tern_mr_desc *rd, uint64_t total)
{
	static uint64_t lo[2][PC_N], ro[2][PC_N], ln[2][PC_N];
	struct tern_req req[2];
	size_t n[2] = { 0, 0 };

	for (int i = 0; i < PC_N; i++) {
		uint32_t r = pc[i].region;

		lo[r][n[r]] = pc[i].loff;
		ro[r][n[r]] = pc[i].roff;
		ln[r][n[r]++] = pc[i].len;
	}
	tern_req_init(&req[0], NULL, NULL);
	/* Checked as a table's pieces are: a NULL array, a piece past the
	 * remote region or past the local one refuse the batch. */
	CHECK(tern_write_pieces_arrays(peer, mr, lo[0], NULL, ln[0], n[0],
				       &rd[0], TERN_PIECES_IMM, 0x77,
				       &req[0]) == -EINVAL,
	      "NULL roffs not refused");
	ro[0][3] += PC_REGION;
	CHECK(tern_write_pieces_arrays(peer, mr, lo[0], ro[0], ln[0], n[0],
				       &rd[0], TERN_PIECES_IMM, 0x77,
				       &req[0]) == -TERN_EBOUNDS,
	      "piece past the remote region not refused");
	ro[0][3] -= PC_REGION;
	lo[0][5] += PC_LOCAL;
	CHECK(tern_write_pieces_arrays(peer, mr, lo[0], ro[0], ln[0], n[0],
				       &rd[0], TERN_PIECES_IMM, 0x77,
				       &req[0]) == -TERN_EBOUNDS,
	      "piece past the local region not refused");
	lo[0][5] -= PC_LOCAL;
	for (int r = 0; r < 2; r++) {
		tern_req_init(&req[r], NULL, NULL);
		CHECK(tern_write_pieces_arrays(peer, mr, lo[r], ro[r], ln[r],
					       n[r], &rd[r], TERN_PIECES_IMM,
					       0x77, &req[r]) == 0,
		      "post pieces (arrays, region %d)", r);
	}
	wait_ok(ctx, &req[0], "pieces (arrays, region 0)");
	wait_ok(ctx, &req[1], "pieces (arrays, region 1)");
	CHECK(req[0].len + req[1].len == total,
	      "batch lengths %zu + %zu, want %llu", req[0].len, req[1].len,
	      (unsigned long long)total);
}

void pieces_initiator(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *src = alloc_buf(PC_LOCAL, 0);
	struct tern_mr *mr = reg(ctx, src, PC_LOCAL, TERN_ACCESS_LOCAL);
	struct tern_peer *peer = get_peer(ch->from_b[0], ctx);
	static struct tern_piece pc[PC_N];
	struct tern_mr_desc rd[2];
	struct tern_req req;
	uint64_t total = 0;
	char c = 'x';

	get_desc(ch->from_b[0], &rd[0]);
	get_desc(ch->from_b[0], &rd[1]);
	mt_fill(src, PC_LOCAL, 21);
	make_pieces(pc);
	for (int i = 0; i < PC_N; i++)
		total += pc[i].len;
	/* A piece past a region's end refuses the whole batch up front. */
	pc[7].roff += PC_REGION;
	tern_req_init(&req, NULL, NULL);
	CHECK(tern_write_pieces(peer, mr, pc, PC_N, rd, 2, TERN_PIECES_IMM,
				0x77, &req) == -TERN_EBOUNDS,
	      "out-of-bounds piece not refused");
	pc[7].roff -= PC_REGION;
	if (arg != NULL) {
		pieces_as_arrays(ctx, peer, mr, pc, rd, total);
	} else {
		tern_req_init(&req, NULL, NULL);
		CHECK(tern_write_pieces(peer, mr, pc, PC_N, rd, 2,
					TERN_PIECES_IMM, 0x77, &req) == 0,
		      "post pieces");
		wait_ok(ctx, &req, "pieces");
		CHECK(req.len == total, "batch length %zu, want %llu", req.len,
		      (unsigned long long)total);
	}
	wait_target(ctx, ch);
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	tern_peer_remove(peer);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(src);
}

void pieces_initiator_arrays(struct chan *ch, void *arg)
{
	(void)arg;
	pieces_initiator(ch, "arrays");
}
