/* SPDX-License-Identifier: MIT */
/*
 * Writes the fuzzers' seed corpus: a few well-formed messages of each
 * kind, made by tern's own encoders. The corpus in tests/fuzz/corpus/ is
 * what this program writes (the CTest fuzz_corpus checks it):
 *   gen_corpus DIR    writes DIR/fuzz_boot/, DIR/fuzz_desc/, DIR/fuzz_fill/
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tern/tern.h>

#include "boot/wire.h"
#include "wire/card.h"
#include "core/core.h"
#include "apps/fill/proto.h"

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
	return g.failed;
}
