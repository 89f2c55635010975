/* SPDX-License-Identifier: MIT */
/*
 * Writes the fuzzers' seed corpus: a few well-formed messages of each
 * kind, made by tern's own encoders. The corpus in tests/fuzz/corpus/ is
 * what this program writes (the CTest fuzz_corpus checks it):
 *   gen_corpus DIR    writes DIR/fuzz_boot/, DIR/fuzz_desc/, DIR/fuzz_fill/,
 *                     DIR/fuzz_fill_session/, DIR/fuzz_ctrl/, DIR/fuzz_local/
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tern/tern.h>

#include "wire/boot.h"
#include "wire/card.h"
#include "wire/ctrl.h"
#include "wire/local.h"
#include "core/core.h"
#include "apps/fill/proto.h"
#include "fuzz_fill_session.h"

struct gen {
	const char *dir;
	int failed;
};

static uint8_t buf[FILL_MSG_MAX];

static void put_file(struct gen *g, const char *fuzzer, const char *name,
		     const void *data, ssize_t len)
{
	char path[4096];
	FILE *f;

	if (len < 0) {
		fprintf(stderr, "gen_corpus: %s/%s: encode: %s\n", fuzzer, name,
			strerror((int)-len));
		g->failed = 1;
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", g->dir, fuzzer);
	if (mkdir(path, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		g->failed = 1;
		return;
	}
	snprintf(path, sizeof(path), "%s/%s/%s", g->dir, fuzzer, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, (size_t)len, f) != (size_t)len ||
	    fclose(f) != 0) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		g->failed = 1;
	}
}

/* A card of @nrails addresses of @addrlen bytes. */
static size_t make_card(uint8_t *card, unsigned int nrails, size_t addrlen)
{
	uint8_t addrs[TERN_CARD_MAX];
	struct tern__card c = {
		.nrails = nrails,
		.addrlen = addrlen,
		.addr_format = 2,
		.addrs = addrs,
	};
	ssize_t n;

	for (size_t i = 0; i < sizeof(addrs); i++)
		addrs[i] = (uint8_t)(0x40 + i);
	n = tern__card_pack(&c, card, TERN_CARD_MAX);
	if (n < 0)
		abort();
	return (size_t)n;
}

static void make_desc(struct tern_mr_desc *d, unsigned int i, uint32_t nkeys)
{
	*d = (struct tern_mr_desc){
		.base = 0x7f0000000000ULL + ((uint64_t)i << 32),
		.len = 4096ULL << i,
		.flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_WRITE,
		.nkeys = nkeys,
	};
	for (uint32_t k = 0; k < nkeys; k++)
		d->keys[k] = 0x1000000000000000ULL * (k + 1) + i;
}

_Static_assert(TERN_BOOT_TEXT_MAX == FILL_TEXT_MAX,
	       "REFUSE and ERROR texts share a length");

/* A text as long as REFUSE and ERROR carry (200 bytes), all printable. */
static const char *long_text(void)
{
	static char text[TERN_BOOT_TEXT_MAX + 1];

	for (size_t i = 0; i < TERN_BOOT_TEXT_MAX; i++)
		text[i] = (char)(' ' + i % 95);
	text[TERN_BOOT_TEXT_MAX] = '\0';
	return text;
}

static void gen_boot(struct gen *g)
{
	static const char *const addrs[] = {
		"1.2.3.4:80",
		"[2001:db8::1]:7000",
	};
	struct tern_boot_info info = { 0 };
	char token[TERN_BOOT_TOKEN_MAX + 1];
	ssize_t n;

	info.card_len = make_card(info.card, 2, 16);
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info,
			      "s3cret");
	put_file(g, "fuzz_boot", "hello-0desc-token", buf, n);
	for (unsigned int i = 0; i < TERN_BOOT_DESCS_MAX; i++)
		make_desc(&info.descs[i], i, 1 + i);
	info.ndesc = 1;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info, NULL);
	put_file(g, "fuzz_boot", "hello-1desc", buf, n);
	info.ndesc = TERN_BOOT_DESCS_MAX;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info,
			      "a-longer-token-0123456789");
	put_file(g, "fuzz_boot", "hello-8desc-token", buf, n);
	info.ndesc = 0;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_WELCOME, &info, NULL);
	put_file(g, "fuzz_boot", "welcome-0desc", buf, n);
	info.ndesc = 2;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_WELCOME, &info, NULL);
	put_file(g, "fuzz_boot", "welcome-2desc", buf, n);
	/* A welcome with its ticket (any bytes, NULs too). */
	for (unsigned int i = 0; i < TERN_BOOT_TICKET_LEN; i++)
		info.ticket[i] = (uint8_t)(i * 37);
	info.ticket_len = TERN_BOOT_TICKET_LEN;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_WELCOME, &info, NULL);
	put_file(g, "fuzz_boot", "welcome-ticket", buf, n);
	info.ticket_len = 0;
	/* A card of 4 rails of 24-byte addresses. */
	info.card_len = make_card(info.card, 4, 24);
	info.ndesc = 1;
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info, "t");
	put_file(g, "fuzz_boot", "hello-4rails", buf, n);
	/* The same from a newer peer: read whole, refused by version. */
	if (n > 0)
		buf[4] = TERN_BOOT_VERSION + 1;
	put_file(g, "fuzz_boot", "hello-newer", buf, n);
	/* A version 2 card: the same-host part (docs/protocol.md). */
	{
		struct tern__card_local l = { .userns = 7,
					      .start = 99,
					      .inbox_ino = 5,
					      .nonce = 11,
					      .uid = 1000,
					      .pid = 4242,
					      .inbox_fd = 3,
					      .wake_fd = 4 };
		uint8_t laddr[2 * 16];
		struct tern__card c = { .nrails = 2,
					.addrlen = 16,
					.addr_format = 2,
					.addrs = laddr,
					.local = &l };
		ssize_t cn;

		memset(laddr, 0x41, sizeof(laddr));
		cn = tern__card_pack(&c, info.card, TERN_CARD_MAX);
		if (cn < 0)
			abort();
		info.card_len = (size_t)cn;
		n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info,
				      "t");
		put_file(g, "fuzz_boot", "hello-card-local", buf, n);
	}

	n = tern__boot_encode_refuse(buf, sizeof(buf), TERN_EREFUSED,
				     "bad token");
	put_file(g, "fuzz_boot", "refuse", buf, n);
	n = tern__boot_encode_refuse(buf, sizeof(buf), EBUSY, "");
	put_file(g, "fuzz_boot", "refuse-empty", buf, n);
	n = tern__boot_encode_refuse(buf, sizeof(buf), EBUSY, long_text());
	put_file(g, "fuzz_boot", "refuse-text-max", buf, n);
	/* The largest there is: every limit reached at once. */
	info.card_len = make_card(info.card, TERN_MAX_RAILS, 64);
	for (unsigned int i = 0; i < TERN_BOOT_DESCS_MAX; i++)
		make_desc(&info.descs[i], i, TERN_MAX_RAILS);
	info.ndesc = TERN_BOOT_DESCS_MAX;
	memset(token, 'k', TERN_BOOT_TOKEN_MAX);
	token[TERN_BOOT_TOKEN_MAX] = '\0';
	n = tern__boot_encode(buf, sizeof(buf), TERN_BOOT_HELLO, &info, token);
	put_file(g, "fuzz_boot", "hello-largest", buf, n);
	for (size_t i = 0; i < TERN_ARRAY_SIZE(addrs); i++) {
		char name[16];

		snprintf(name, sizeof(name), "addr-%zu", i);
		put_file(g, "fuzz_boot", name, addrs[i],
			 (ssize_t)strlen(addrs[i]));
	}
}

static void gen_desc(struct gen *g)
{
	static const uint32_t nkeys[] = { 1, 2, TERN_MAX_RAILS };
	struct tern_mr_desc d;
	uint8_t out[TERN_MR_DESC_MAX];
	char name[32];
	ssize_t n;

	for (size_t i = 0; i < TERN_ARRAY_SIZE(nkeys); i++) {
		make_desc(&d, (unsigned int)i, nkeys[i]);
		n = tern_mr_desc_pack(&d, out, sizeof(out));
		snprintf(name, sizeof(name), "desc-%ukeys", nkeys[i]);
		put_file(g, "fuzz_desc", name, out, n);
	}
	/* Every right, and an offset-addressed region ending at 2^64 - 1. */
	make_desc(&d, 3, 4);
	d.flags = TERN_MR_DESC_FLAGS & ~TERN_MR_DESC_VIRT_ADDR;
	d.base = 1ULL << 40;
	d.len = UINT64_MAX - d.base;
	n = tern_mr_desc_pack(&d, out, sizeof(out));
	put_file(g, "fuzz_desc", "desc-all-rights", out, n);
	/* Chunked (version 2): 10 chunks of 1 MiB on 2 rails, u64 keys;
	 * 64 chunks of 4 KiB on one, 32-bit keys. */
	make_desc(&d, 4, 2);
	d.len = 10ULL << 20;
	d.flags |= 20U << 8;
	for (unsigned int k = 0; k < 20; k++)
		d.keys[k] = 0x1000 + k;
	n = tern_mr_desc_pack(&d, out, sizeof(out));
	put_file(g, "fuzz_desc", "desc-chunked", out, n);
	make_desc(&d, 5, 1);
	d.len = 64 * 4096;
	d.flags |= (12U << 8) | TERN_MR_DESC_KEY32;
	for (unsigned int k = 0; k < 32; k++)
		d.keys[k] = ((uint64_t)(2 * k + 2) << 32) | (2 * k + 1);
	n = tern_mr_desc_pack(&d, out, sizeof(out));
	put_file(g, "fuzz_desc", "desc-chunked-key32", out, n);
}

static void gen_fill(struct gen *g)
{
	static const uint32_t idx[] = { 0, 1, 7, 255, 300 };
	struct tern_mr_desc regions[FILL_REGIONS];
	struct fill_accept a = {
		.nonce = 0xfedcba9876543210ULL,
		.max_page_size = FILL_MAX_PAGE_SIZE,
		.max_pages = FILL_MAX_PAGES,
		.max_bytes = FILL_MAX_BYTES,
	};
	struct fill_request r = {
		.id = 7,
		.page_size = 4096,
		.seed = 0x1122334455667788ULL,
		.page_count = TERN_ARRAY_SIZE(idx),
	};
	struct fill_result res = {
		.id = 7,
		.status = 0,
		.bytes = 5 * 4096,
		.write_ns = 123456,
	};
	uint8_t card[TERN_CARD_MAX];
	size_t card_len = make_card(card, 2, 16);
	uint64_t session = 0x0123456789abcdefULL;
	ssize_t n;

	make_desc(&regions[0], 0, 2);
	regions[0].len = 1 << 20;
	make_desc(&regions[1], 1, 2);
	regions[1].len = 1 << 16;
	n = fill_connect_encode(buf, sizeof(buf), a.nonce, card, card_len,
				regions);
	put_file(g, "fuzz_fill", "connect", buf, n);
	n = fill_accept_encode(buf, sizeof(buf), session, &a);
	put_file(g, "fuzz_fill", "accept", buf, n);
	n = fill_request_encode(buf, sizeof(buf), session, &r, idx);
	put_file(g, "fuzz_fill", "request", buf, n);
	r.page_count = 0;
	n = fill_request_encode(buf, sizeof(buf), session, &r, NULL);
	put_file(g, "fuzz_fill", "request-empty", buf, n);
	n = fill_result_encode(buf, sizeof(buf), session, &res);
	put_file(g, "fuzz_fill", "result", buf, n);
	n = fill_error_encode(buf, sizeof(buf), session, 7, -TERN_EBOUNDS,
			      "page index 300 outside");
	put_file(g, "fuzz_fill", "error", buf, n);
	n = fill_error_encode(buf, sizeof(buf), session, 8, -TERN_EPROTO,
			      long_text());
	put_file(g, "fuzz_fill", "error-text-max", buf, n);
	n = fill_bye_encode(buf, sizeof(buf), session);
	put_file(g, "fuzz_fill", "bye", buf, n);
}

/* A sequence of fuzz_fill_session operations (fuzz_fill_session.h). */
struct seq {
	uint8_t b[512];
	size_t n;
};

/* Operation @kind from @client, its @nargs argument bytes after it. */
static void op(struct seq *q, int kind, int client, int flags, int nargs, ...)
{
	va_list ap;

	if (q->n + 1 + (size_t)nargs > sizeof(q->b))
		abort();
	q->b[q->n++] = (uint8_t)(kind | client << 4 | flags);
	va_start(ap, nargs);
	for (int i = 0; i < nargs; i++)
		q->b[q->n++] = (uint8_t)va_arg(ap, int);
	va_end(ap);
}

static void byte(struct seq *q, int b)
{
	if (q->n == sizeof(q->b))
		abort();
	q->b[q->n++] = (uint8_t)b;
}

/* A CONNECT of two regions of 32 KiB (card and regions as @mode); the
 * last client's card with plain regions carries the ticket it needs. */
static void connect(struct seq *q, int client, int flags, int mode)
{
	int card = mode & 3;

	if (mode >> 2 == FS_REG_PLAIN &&
	    ((card == FS_CARD_OWN && client == FS_CLIENTS - 1) ||
	     (card == FS_CARD_NEXT && client == FS_CLIENTS - 2)))
		mode |= FS_REG_TICKET << 2;
	op(q, FS_CONNECT, client, flags, 5, mode, 0, 32, 32, 32);
}

/* A FILL of @count pages of 4096 bytes (fs_page_sizes[9]): 0, 2, 4... */
static void fill(struct seq *q, int client, int flags, int sel, int count,
		 int fflags, int id)
{
	op(q, FS_FILL, client, flags, 5, sel, 9, count, fflags, id);
	for (int k = 0; k < count; k++)
		byte(q, 2 * k); /* one index byte each */
}

static void bye(struct seq *q, int client, int flags, int sel)
{
	op(q, FS_BYE, client, flags, 2, sel, 0);
}

static void put_seq(struct gen *g, const char *name, const struct seq *q)
{
	put_file(g, "fuzz_fill_session", name, q->b, (ssize_t)q->n);
}

/* Sessions within the server's limits, at them, and fills at once. */
static void gen_session_limits(struct gen *g)
{
	struct seq q = { .n = 0 };

	/* One session's life. */
	connect(&q, 0, 0, FS_CARD_OWN);
	fill(&q, 0, 0, 0, 4, 0, 7);
	bye(&q, 0, 0, 0);
	put_seq(g, "connect-fill-bye", &q);

	/* Two sessions per card, then room again after a BYE. */
	q.n = 0;
	for (int i = 0; i < 3; i++)
		connect(&q, 0, 0, FS_CARD_OWN);
	fill(&q, 0, 0, 0, 2, 0, 1);
	fill(&q, 0, 0, 1, 2, 0, 2);
	bye(&q, 0, 0, 0);
	connect(&q, 0, 0, FS_CARD_OWN);
	put_seq(g, "per-client-limit", &q);

	/* Four sessions in all; a client gone frees its two. */
	q.n = 0;
	for (int c = 0; c < FS_CLIENTS; c++) {
		connect(&q, c, 0, FS_CARD_OWN);
		connect(&q, c, 0, FS_CARD_OWN);
	}
	op(&q, FS_GONE, 1, 0, 0);
	connect(&q, 2, 0, FS_CARD_OWN);
	fill(&q, 2, 0, 4, 3, 0, 9);
	put_seq(g, "session-limit", &q);

	/* Fills at once: two writers, a queue, one at a time per session,
	 * a BYE while its fill waits. */
	q.n = 0;
	for (int c = 0; c < FS_CLIENTS; c++)
		connect(&q, c, 0, FS_CARD_OWN);
	fill(&q, 0, FS_BATCH, 0, 8, 0, 1);
	fill(&q, 1, FS_BATCH, 1, 8, 0, 2);
	fill(&q, 2, FS_BATCH, 2, 8, 0, 3);
	fill(&q, 0, FS_BATCH, 0, 2, 0, 4);
	bye(&q, 2, FS_BATCH, 2);
	op(&q, FS_PUMP, 0, 0, 0);
	fill(&q, 1, 0, 1, 1, 0, 5);
	put_seq(g, "batched-fills", &q);
}

/* What the server refuses: CONNECTs, FILLs, regions it cannot write. */
static void gen_session_refusals(struct gen *g)
{
	struct seq q = { .n = 0 };

	/* CONNECTs the server refuses or never answers. */
	q.n = 0;
	connect(&q, 0, 0, FS_REG_NOWRITE << 2);
	connect(&q, 0, 0x80, FS_REG_NOWRITE << 2);
	connect(&q, 0, 0, FS_REG_HUGE << 2);
	connect(&q, 0, 0, FS_CARD_SERVER);
	connect(&q, 0, 0, FS_CARD_CUT);
	/* The last client's card without its ticket, with another, then
	 * with it. */
	op(&q, FS_CONNECT, 2, 0, 5, FS_CARD_OWN, 0, 32, 32, 32);
	op(&q, FS_CONNECT, 2, 0x80, 5, FS_CARD_OWN | FS_REG_TICKET << 2, 0, 32,
	   32, 32);
	connect(&q, 1, 0, FS_CARD_NEXT);
	fill(&q, 1, 0, FS_SEL_BOGUS, 1, 0, 1);
	put_seq(g, "connect-refusals", &q);

	/* FILLs the server refuses, of a live session. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	fill(&q, 0, 0, 0, 2, FS_FILL_IDXHIGH, 1);
	fill(&q, 0, 0, 0, 0, 0, 2);
	op(&q, FS_FILL, 0, 0, 7, 0, 9, 2, 0, 3, 5, 5); /* a page twice */
	op(&q, FS_FILL, 0, 0, 6, 0, 13, 1, 0, 4, 0);   /* page size 0 */
	op(&q, FS_FILL, 0, 0, 6, 0, 15, 1, 0, 5, 0);   /* 16 MiB + 1 */
	fill(&q, 0, 0, 0, 1, FS_FILL_COUNTBAD, 6);
	fill(&q, 0, 0, 0, 1, FS_FILL_SHORT, 7);
	fill(&q, 0, 0, 0, 1, FS_FILL_PAD, 8);
	fill(&q, 0, 0, 0, 1, FS_FILL_RESERVED | FS_FILL_VERSION, 9);
	fill(&q, 0, 0, 0, 1, FS_FILL_TYPE, 10);
	fill(&q, 0, 0, 0, 1, 0, 11);
	put_seq(g, "fill-refusals", &q);

	/* Regions at unmapped memory: the writes fail. */
	q.n = 0;
	connect(&q, 0, 0, FS_REG_UNMAPPED << 2);
	fill(&q, 0, 0, 0, 2, 0, 1);
	fill(&q, 0, 0, 0, 2, 0, 2);
	connect(&q, 0, 0, FS_CARD_OWN);
	put_seq(g, "unmapped", &q);
}

/* Messages no client should send: a server's, garbage, resends, another
 * client's session id. */
static void gen_session_strangers(struct gen *g)
{
	struct seq q = { .n = 0 };

	/* A server's messages, garbage, a header of every type. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	for (int which = 0; which < 3; which++) {
		op(&q, FS_SERVER_KIND, 0, 0, 2, 0, which);
		op(&q, FS_SERVER_KIND, 1, 0, 2, FS_SEL_BOGUS, which);
	}
	op(&q, FS_RAW, 0, 0, 5, 4, 'T', 'R', 'F', 'L');
	for (int type = 0; type <= 7; type++)
		op(&q, FS_HEADER, 0, FS_BATCH, 3, type, 0, 0);
	bye(&q, 0, 0, 0);
	put_seq(g, "server-kinds", &q);

	/* A CONNECT again: as it was, changed, cut, longer. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	op(&q, FS_RESEND, 0, 0, 3, 0, 0, 3);
	op(&q, FS_RESEND, 0, 0, 3, 4, 1, 0);
	op(&q, FS_RESEND, 1, 0, 3, 30, 0, 1);
	op(&q, FS_RESEND, 2, 0, 3, 8, 0, 2);
	put_seq(g, "resend", &q);

	/* Another client uses a session's id: the server knows sessions
	 * by id alone. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	connect(&q, 2, 0, FS_CARD_NEXT);
	fill(&q, 1, 0, 0, 3, 0, 1);
	fill(&q, 2, 0, 1, 3, 0, 2);
	bye(&q, 2, 0, 0);
	bye(&q, 0, 0, 1);
	put_seq(g, "foreign-id", &q);
}

/* Sessions idle too long, and fills and replies that wait in line. */
static void gen_session_timing(struct gen *g)
{
	struct seq q = { .n = 0 };

	/* Sessions idle too long end; their ids are then unknown. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	connect(&q, 1, 0, FS_CARD_OWN);
	fill(&q, 1, FS_BATCH, 1, 4, 0, 1);
	op(&q, FS_IDLE, 0, 0, 1, FS_IDLE_MAGIC);
	fill(&q, 0, 0, 0, 1, 0, 2);
	connect(&q, 0, 0, FS_CARD_OWN);
	put_seq(g, "idle", &q);

	/* Four fills at once on two writers: two wait in line. */
	q.n = 0;
	for (int c = 0; c < 2; c++) {
		connect(&q, c, 0, FS_CARD_OWN);
		connect(&q, c, 0, FS_CARD_OWN);
	}
	for (int i = 0; i < 4; i++)
		fill(&q, i % 2, FS_BATCH, i, 8, 0, 1 + i);
	bye(&q, 1, FS_BATCH, 3);
	put_seq(g, "queue", &q);

	/* A fill and two refusals at once: the session's two replies are
	 * out when its RESULT is due; then the same at unmapped memory,
	 * whose failed fill ends the session. */
	q.n = 0;
	connect(&q, 0, 0, FS_CARD_OWN);
	connect(&q, 1, 0, FS_REG_UNMAPPED << 2);
	for (int s = 0; s < 2; s++) {
		fill(&q, s, FS_BATCH, s, 8, 0, 1);
		fill(&q, s, FS_BATCH, s, 1, FS_FILL_PAD, 2);
		fill(&q, s, FS_BATCH, s, 1, FS_FILL_PAD, 3);
		op(&q, FS_PUMP, 0, 0, 0);
	}
	put_seq(g, "reply-flood", &q);
}

/* fuzz_fill_session's seeds: sequences of its operations. */
static void gen_session(struct gen *g)
{
	gen_session_limits(g);
	gen_session_refusals(g);
	gen_session_strangers(g);
	gen_session_timing(g);
}

/* Control messages (docs/protocol.md): an abort of a low and a high imm. */
static void gen_ctrl(struct gen *g)
{
	static const uint32_t imms[] = { 0, 0xfffffffe };
	uint8_t out[TERN_CTRL_LEN];

	for (size_t i = 0; i < TERN_ARRAY_SIZE(imms); i++) {
		struct tern__ctrl_msg m = { .type = TERN_CTRL_IMM_ABORT,
					    .imm = imms[i] };
		char name[32];

		snprintf(name, sizeof(name), "imm-abort-%zu", i);
		put_file(g, "fuzz_ctrl", name, out,
			 tern__ctrl_pack(&m, out, sizeof(out)));
	}
}

/* The same-host path (fuzz_local.c): byte 0 even, then a broker request
 * or answer; byte 0 odd, then patches and operations on a peer's inbox. */
static void gen_local(struct gen *g)
{
	static const uint8_t ops[] = {
		1,	 /* odd: the inbox */
		0,	 /* no patches */
		0,    3, /* its ring 0 to us: 3 entries */
		7,    0,    0, 0,    8,	   0,  0,
		0,			      /* of imm 7, 8, 9 */
		9,    0,    0, 0,    3,	   0, /* its tail 3 on */
		5,			      /* 5 operations: */
		0,    0,    1, 0,    16,   0, /* write 17 bytes at 256 */
		2,    0,    1, 0,    16,   0, /* read them back */
		3,    8,    0, 0,    8,	   0, /* write_imm 9 bytes at 8 */
		5,    64,   0, 0,    0,	   0, /* fetch-add at 64 */
		16,   0,    0, 0,    1,	   0, /* a write with wrong keys */
		1,			      /* then 1 patch: region 0's */
		0x10, 0x10, 0, 0,	      /* length (at 4096 + 16) */
		0,    0,    0, 0x40, 0,	   0,  0,
		0,				  /* 1 GiB, same generation */
		0,    0,    0, 0,		  /* no ring */
		1,    0,    0, 0,    0xf0, 16, 0, /* 1 op: a write at 15 MiB */
	};
	struct tern__lb_req r = { .what = TERN__LB_REGION,
				  .idx = 3,
				  .nonce = 0x1122334455667788ull,
				  .nkeys = 2,
				  .keys = { 7, 9 } };
	struct tern__lb_ans a = { .status = 0, .what = 1, .nfds = 2 };
	uint8_t out[1 + TERN__LB_REQ_MAX];
	ssize_t n;

	out[0] = 0;
	n = tern__lb_req_pack(&r, out + 1, sizeof(out) - 1);
	put_file(g, "fuzz_local", "broker-req-region", out, n < 0 ? n : n + 1);
	r.what = TERN__LB_INBOX;
	r.nkeys = 0;
	n = tern__lb_req_pack(&r, out + 1, sizeof(out) - 1);
	put_file(g, "fuzz_local", "broker-req-inbox", out, n < 0 ? n : n + 1);
	n = tern__lb_ans_pack(&a, out + 1, sizeof(out) - 1);
	put_file(g, "fuzz_local", "broker-ans", out, n < 0 ? n : n + 1);
	put_file(g, "fuzz_local", "inbox-ops", ops, sizeof(ops));
}

int main(int argc, char **argv)
{
	struct gen g = { 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	g.dir = argv[1];
	if (mkdir(g.dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "gen_corpus: %s: %s\n", g.dir, strerror(errno));
		return 1;
	}
	gen_boot(&g);
	gen_desc(&g);
	gen_fill(&g);
	gen_session(&g);
	gen_ctrl(&g);
	gen_local(&g);
	return g.failed;
}
