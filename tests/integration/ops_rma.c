/* SPDX-License-Identifier: MIT */
/*
 * ops' reads (read: sizes and offsets, odd local offsets, nothing written
 * outside the buffer, past the end refused) and sends with immediate
 * (sendimm).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

/* --- read ---------------------------------------------------------------- */

#define READ_LEN (4 * MIB)

void read_target(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	uint8_t *buf = alloc_buf(READ_LEN, 0);
	struct tern_mr *mr;

	(void)arg;
	mt_fill(buf, READ_LEN, 11);
	mr = reg(ctx, buf, READ_LEN, TERN_ACCESS_REMOTE_READ);
	send_card(ch->from_b[1], ctx);
	send_desc(ch->from_b[1], mr);
	serve_until(ctx, ch->to_b[0]);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(buf);
}

void read_initiator(struct chan *ch, void *arg)
{
	static const struct {
		uint64_t off, len;
	} cases[] = {
		{ 0, 1 },
		{ 3, 7 },
		{ 4093, 4096 },
		{ 65535, 65537 },
		{ MIB + 1, MIB + 3 },
		{ 0, READ_LEN },
		{ READ_LEN - 5, 5 },
	};
	struct tern_ctx *ctx = open_ctx();
	uint8_t *want = alloc_buf(READ_LEN, 0), *got = alloc_buf(READ_LEN, 0);
	struct tern_mr *mr = reg(ctx, got, READ_LEN, TERN_ACCESS_LOCAL);
	struct tern_peer *peer = get_peer(ch->from_b[0], ctx);
	struct tern_mr_desc rd;
	struct tern_req req;
	char c = 'x';

	(void)arg;
	get_desc(ch->from_b[0], &rd);
	mt_fill(want, READ_LEN, 11);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* Land at an odd local offset too. */
		uint64_t loff = (i * 13) % 64;
		uint64_t len = cases[i].len < READ_LEN - loff ? cases[i].len
							      : READ_LEN - loff;

		memset(got, 0xee, READ_LEN);
		tern_req_init(&req, NULL, NULL);
		CHECK(tern_read(peer, mr, got + loff, len, &rd, cases[i].off,
				&req) == 0,
		      "post read");
		wait_ok(ctx, &req, "read");
		CHECK(memcmp(got + loff, want + cases[i].off, len) == 0,
		      "read of %llu bytes at %llu differs",
		      (unsigned long long)len,
		      (unsigned long long)cases[i].off);
		CHECK(loff == 0 || got[loff - 1] == 0xee,
		      "read wrote before its buffer");
		CHECK(loff + len == READ_LEN || got[loff + len] == 0xee,
		      "read wrote past its buffer");
		printf("ok: read %llu bytes at remote offset %llu\n",
		       (unsigned long long)len,
		       (unsigned long long)cases[i].off);
	}
	/* Past the end of the remote region: refused before posting. */
	tern_req_init(&req, NULL, NULL);
	CHECK(tern_read(peer, mr, got, 16, &rd, READ_LEN - 8, &req) ==
		      -TERN_EBOUNDS,
	      "out-of-bounds read not refused");
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	tern_peer_remove(peer);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(want);
	free(got);
}

/* --- send with immediate ---------------------------------------------- */

void sendimm_target(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	char *buf = alloc_buf(4096, 0);
	struct tern_mr *mr = reg(ctx, buf, 4096, TERN_ACCESS_LOCAL);
	struct tern_req r[2];
	int seen_imm = 0, seen_plain = 0;

	(void)arg;
	for (int i = 0; i < 2; i++) {
		tern_req_init(&r[i], NULL, NULL);
		CHECK(tern_recv(ctx, mr, buf + 2048 * i, 2048, &r[i]) == 0,
		      "recv");
	}
	send_card(ch->from_b[1], ctx);
	for (int i = 0; i < 2; i++) {
		const char *msg = buf + 2048 * i;

		wait_ok(ctx, &r[i], "recv");
		if (strcmp(msg, "with imm") == 0) {
			CHECK(r[i].flags & TERN_REQ_F_IMM, "imm flag missing");
			CHECK(r[i].imm == 0xdeadbeef, "imm is 0x%llx",
			      (unsigned long long)r[i].imm);
			CHECK(r[i].len == 9, "length %zu", r[i].len);
			seen_imm = 1;
		} else {
			CHECK(strcmp(msg, "plain") == 0, "got '%s'", msg);
			CHECK(!(r[i].flags & TERN_REQ_F_IMM),
			      "plain send carried an imm flag");
			seen_plain = 1;
		}
	}
	CHECK(seen_imm && seen_plain, "messages missing");
	target_has_it(ch);
	serve_until(ctx, ch->to_b[0]);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(buf);
}

void sendimm_initiator(struct chan *ch, void *arg)
{
	struct tern_ctx *ctx = open_ctx();
	char *buf = alloc_buf(4096, 0);
	struct tern_mr *mr = reg(ctx, buf, 4096, TERN_ACCESS_LOCAL);
	struct tern_peer *peer = get_peer(ch->from_b[0], ctx);
	struct tern_req req;
	char c = 'x';

	(void)arg;
	strcpy(buf, "with imm");
	strcpy(buf + 64, "plain");
	tern_req_init(&req, NULL, NULL);
	CHECK(tern_send_imm(peer, mr, buf, 9, 0xdeadbeef, &req) == 0, "send");
	wait_ok(ctx, &req, "send_imm");
	tern_req_init(&req, NULL, NULL);
	CHECK(tern_send(peer, mr, buf + 64, 6, &req) == 0, "send");
	wait_ok(ctx, &req, "send");
	wait_target(ctx, ch);
	CHECK(write(ch->to_b[1], &c, 1) == 1, "pipe");
	tern_peer_remove(peer);
	tern_mr_close(mr);
	tern_ctx_close(ctx);
	free(buf);
}
