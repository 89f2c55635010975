/* SPDX-License-Identifier: MIT */
/*
 * A hostile random-fill client. It connects properly, then sends requests a
 * server must refuse: out-of-range page indices, oversized pages, zero
 * pages, a repeated page, truncated and padded messages, a wrong magic, a
 * wrong version, an unknown type, a CONNECT of a future version, a CONNECT
 * with 3 regions, a non-zero reserved field. Each must be answered with an
 * ERROR whose reason names the field, and no byte of the client's regions
 * may change. A server's kinds of message (ACCEPT, RESULT, ERROR) and a
 * CONNECT carrying the server's own card must get no answer at all; one
 * client card gets 4 sessions, not 5. With --addr and --token it first
 * does the bootstrap handshake: a CONNECT without the WELCOME's ticket, or
 * with a wrong one, is refused. Over shm, 12 sessions whose regions name
 * unmapped memory each get a failed RESULT at once. Then a good fill must
 * verify.
 *
 * usage: hostile --provider P [--node ADDR] [--addr HOST:PORT --token T]
 *        [--answer-ms MS] CARD-FILE
 * (--answer-ms: how long a fill into unmapped memory may wait for its
 * RESULT, queueing included; 1500 by default.)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/fill.h"

struct state {
	struct tern_ctx *ctx;
	struct fill_conn *conn;
	uint8_t *msg;
	uint8_t *reply;
	uint8_t ticket[TERN_BOOT_TICKET_LEN]; /* with --addr: the WELCOME's */
	size_t ticket_len;
	int passed;
	int failed;
	int answer_ms; /* --answer-ms: a failed fill's RESULT within */
};

static void check(struct state *st, int ok, const char *what,
		  const char *detail)
{
	if (ok)
		st->passed++;
	else
		st->failed++;
	printf("%s %d - %s%s%s\n", ok ? "ok" : "not ok",
	       st->passed + st->failed, what, detail ? ": " : "",
	       detail ? detail : "");
	fflush(stdout);
}

/* Send @len bytes of st->msg; a failed send fails @what. */
static int send_or_fail(struct state *st, size_t len, const char *what)
{
	char detail[300];
	int ret = fill_conn_send_raw(st->conn, st->msg, len);

	if (ret != 0) {
		snprintf(detail, sizeof(detail), "send: %s",
			 tern_strerror(ret));
		check(st, 0, what, detail);
	}
	return ret;
}

/* Send @len bytes of st->msg; expect an ERROR whose text has @needle. */
static void expect_refusal(struct state *st, size_t len, const char *needle,
			   const char *what)
{
	struct fill_error e;
	uint64_t untouched;
	char detail[300];
	ssize_t n;
	int ret;

	if (send_or_fail(st, len, what) != 0)
		return;
	n = fill_conn_recv_raw(st->conn, st->reply, FILL_MSG_MAX, 5000);
	if (n < 0) {
		snprintf(detail, sizeof(detail), "no reply: %s",
			 tern_strerror((int)n));
		check(st, 0, what, detail);
		return;
	}
	ret = fill_error_decode(st->reply, (size_t)n, &e);
	snprintf(detail, sizeof(detail), "%s", ret == 0 ? e.text : "not ERROR");
	check(st, ret == 0 && e.code < 0 && strstr(e.text, needle) != NULL,
	      what, detail);
	check(st,
	      fill_conn_check_untouched(st->conn, &untouched) == 0 &&
		      untouched == 2ULL * FILL_REGION_SIZE,
	      "  ... and no byte of the regions changed", NULL);
}

static size_t make_fill(struct state *st, uint32_t page_size, uint32_t count,
			const uint32_t *idx)
{
	struct fill_request r = {
		.id = 77,
		.page_size = page_size,
		.seed = 1,
		.page_count = count,
	};

	return (size_t)fill_request_encode(
		st->msg, FILL_MSG_MAX, fill_conn_session(st->conn), &r, idx);
}

static void run(struct state *st)
{
	uint32_t idx[4] = { 0, 1, 2, 3 };
	uint8_t card[TERN_CARD_MAX];
	size_t len;
	ssize_t clen;

	idx[2] = 2 * 16; /* 16 pages of 1 MiB per region: 32 is past end */
	len = make_fill(st, 1 << 20, 4, idx);
	expect_refusal(st, len, "outside", "page index past the regions");

	idx[2] = 2;
	len = make_fill(st, 32u << 20, 1, idx);
	expect_refusal(st, len, "page size", "page size above 16 MiB");

	len = make_fill(st, 4096, 0, idx);
	expect_refusal(st, len, "page count 0", "zero pages");

	idx[3] = 1;
	len = make_fill(st, 4096, 4, idx);
	expect_refusal(st, len, "twice", "a page listed twice");

	idx[3] = 3;
	len = make_fill(st, 4096, 4, idx);
	expect_refusal(st, len - 6, "malformed", "truncated FILL");

	len = make_fill(st, 4096, 4, idx);
	memset(st->msg + len, 0, 4);
	tern__wire_put_u32(st->msg + 8, (uint32_t)len + 4);
	expect_refusal(st, len + 4, "malformed", "FILL with trailing bytes");

	len = make_fill(st, 4096, 4, idx);
	tern__wire_put_u32(st->msg, 0xdeadbeef);
	expect_refusal(st, len, "bad magic", "wrong magic");

	len = make_fill(st, 4096, 4, idx);
	tern__wire_put_u16(st->msg + 4, 99);
	expect_refusal(st, len, "version 99", "wrong protocol version");

	len = make_fill(st, 4096, 4, idx);
	tern__wire_put_u16(st->msg + 6, 42);
	expect_refusal(st, len, "type 42", "unknown message type");

	/* A CONNECT from a future version is refused by a reply to its card
	 * (the prefix every version keeps). */
	clen = tern_ctx_card(st->ctx, card, sizeof(card));
	len = (size_t)fill_connect_encode(st->msg, FILL_MSG_MAX, 1, card,
					  (size_t)clen,
					  fill_conn_regions(st->conn));
	tern__wire_put_u16(st->msg + 4, 2);
	expect_refusal(st, len, "version 2", "CONNECT of a newer version");

	/* A CONNECT whose descriptors are cut short. */
	len = (size_t)fill_connect_encode(st->msg, FILL_MSG_MAX, 1, card,
					  (size_t)clen,
					  fill_conn_regions(st->conn));
	tern__wire_put_u32(st->msg + 8, (uint32_t)len - 9);
	expect_refusal(st, len - 9, "malformed CONNECT",
		       "CONNECT with a truncated descriptor");

	/* Refusals name the field and its rule. */
	len = (size_t)fill_connect_encode(st->msg, FILL_MSG_MAX, 1, card,
					  (size_t)clen,
					  fill_conn_regions(st->conn));
	tern__wire_put_u16(st->msg + FILL_HDR + 2, 3);
	expect_refusal(st, len, "nregions 3", "CONNECT with 3 regions");
	{
		struct tern_mr_desc ro[FILL_REGIONS];

		memcpy(ro, fill_conn_regions(st->conn), sizeof(ro));
		ro[1].flags &= ~(uint32_t)TERN_MR_DESC_REMOTE_WRITE;
		len = (size_t)fill_connect_encode(st->msg, FILL_MSG_MAX, 1,
						  card, (size_t)clen, ro);
		expect_refusal(st, len,
			       "region 1: its descriptor grants no "
			       "remote write",
			       "CONNECT with a region closed to writes");
	}
	len = make_fill(st, 4096, 4, idx);
	tern__wire_put_u32(st->msg + 12, 7);
	expect_refusal(st, len, "reserved field is 0x00000007",
		       "FILL with a non-zero reserved field");
}

/* Send @len bytes of st->msg; the server must not answer in 1 s. */
static void expect_silence(struct state *st, size_t len, const char *what)
{
	ssize_t n;

	if (send_or_fail(st, len, what) != 0)
		return;
	n = fill_conn_recv_raw(st->conn, st->reply, FILL_MSG_MAX, 1000);
	check(st, n == -ETIMEDOUT, what, n >= 0 ? "the server answered" : NULL);
}

/* A server never answers a server's kind of message, nor a CONNECT that
 * carries its own card (it would talk to itself for ever). */
static void run_silence(struct state *st, const uint8_t *scard,
			size_t scard_len)
{
	struct fill_accept a = { .nonce = 1 };
	struct fill_result r = { .id = 1 };
	uint64_t sid = fill_conn_session(st->conn);
	ssize_t n;

	n = fill_accept_encode(st->msg, FILL_MSG_MAX, sid, &a);
	expect_silence(st, (size_t)n, "an ACCEPT sent to the server");
	n = fill_result_encode(st->msg, FILL_MSG_MAX, sid, &r);
	expect_silence(st, (size_t)n, "a RESULT sent to the server");
	n = fill_error_encode(st->msg, FILL_MSG_MAX, sid, 1, -TERN_EPROTO,
			      "unexpected message type 2");
	expect_silence(st, (size_t)n, "an ERROR sent to the server");
	n = fill_connect_encode(st->msg, FILL_MSG_MAX, 2, scard, scard_len,
				fill_conn_regions(st->conn));
	expect_silence(st, (size_t)n,
		       "a CONNECT carrying the server's own card");
}

/* One client card holds at most 4 sessions (--max-per-client): with this
 * connection's, 3 more CONNECTs of our card are accepted and the next is
 * refused. (Raw messages: the answers come to this connection.) */
static void run_per_client(struct state *st)
{
	uint8_t card[TERN_CARD_MAX];
	struct fill_accept a;
	struct fill_error e;
	char detail[300];
	ssize_t clen, n;
	int ok = 1;

	clen = tern_ctx_card(st->ctx, card, sizeof(card));
	for (int i = 0; i < 4; i++) {
		n = fill_connect_encode_ticket(
			st->msg, FILL_MSG_MAX, 100 + (uint64_t)i, card,
			(size_t)clen, fill_conn_regions(st->conn), st->ticket,
			st->ticket_len);
		if (n < 0 || fill_conn_send_raw(st->conn, st->msg, (size_t)n))
			ok = 0;
		n = fill_conn_recv_raw(st->conn, st->reply, FILL_MSG_MAX, 5000);
		if (i < 3) {
			if (n < 0 ||
			    fill_accept_decode(st->reply, (size_t)n, &a) ||
			    a.nonce != 100 + (uint64_t)i) {
				snprintf(detail, sizeof(detail),
					 "session %d not accepted", i + 2);
				ok = 0;
			}
			continue;
		}
		check(st, ok, "the same client opens sessions 2 to 4",
		      ok ? NULL : detail);
		snprintf(detail, sizeof(detail), "%s",
			 n < 0 ? "no answer"
			 : fill_error_decode(st->reply, (size_t)n, &e)
				 ? "not an ERROR"
				 : e.text);
		check(st, strstr(detail, "server busy for this client") != NULL,
		      "its fifth session is refused (--max-per-client 4)",
		      detail);
	}
}

/*
 * Sessions whose regions name memory the client never mapped (shm): each
 * FILL's writes fail. Every one must be answered at once with a RESULT
 * naming the failure, never left to --fill-timeout, and however many
 * there are (more than the server has writers), others are still served.
 * Each of 4 fresh ctxs (4 cards) opens its own session and 3 more whose
 * CONNECT declares the regions at an unmapped address.
 */
#define UNMAPPED_CTXS 4
#define UNMAPPED_BASE 0x10000ULL

static void unmapped_fill(struct state *st, struct fill_conn *conn,
			  const uint8_t *card, size_t card_len, uint64_t nonce,
			  int *ok, char *detail, size_t dlen)
{
	struct tern_mr_desc bad[FILL_REGIONS];
	struct fill_request r = {
		.id = (uint32_t)nonce,
		.page_size = 1 << 20,
		.seed = 3,
		.page_count = 1,
	};
	uint32_t idx[1] = { 0 };
	struct fill_result res;
	struct fill_error e;
	struct fill_hdr h;
	uint64_t t0;
	ssize_t n;

	memcpy(bad, fill_conn_regions(conn), sizeof(bad));
	for (int i = 0; i < FILL_REGIONS; i++)
		bad[i].base = UNMAPPED_BASE;
	n = fill_connect_encode(st->msg, FILL_MSG_MAX, nonce, card, card_len,
				bad);
	if (n < 0 || fill_conn_send_raw(conn, st->msg, (size_t)n) != 0) {
		snprintf(detail, dlen, "sending CONNECT %" PRIu64, nonce);
		*ok = 0;
		return;
	}
	n = fill_conn_recv_raw(conn, st->reply, FILL_MSG_MAX, 5000);
	if (n < 0 || fill_hdr_parse(st->reply, (size_t)n, &h) != 0 ||
	    h.type != FILL_ACCEPT) {
		snprintf(detail, dlen, "CONNECT %" PRIu64 " not accepted",
			 nonce);
		*ok = 0;
		return;
	}
	n = fill_request_encode(st->msg, FILL_MSG_MAX, h.session, &r, idx);
	t0 = tern__now_ns();
	if (n < 0 || fill_conn_send_raw(conn, st->msg, (size_t)n) != 0) {
		snprintf(detail, dlen, "sending FILL %u", r.id);
		*ok = 0;
		return;
	}
	/* Well inside the server's --fill-timeout (hostile.sh: 2000). */
	n = fill_conn_recv_raw(conn, st->reply, FILL_MSG_MAX, st->answer_ms);
	if (n < 0) {
		snprintf(detail, dlen, "FILL %u: no answer in %d ms", r.id,
			 st->answer_ms);
		*ok = 0;
	} else if (fill_result_decode(st->reply, (size_t)n, &res) == 0) {
		if (res.status == 0 || res.id != r.id) {
			snprintf(detail, dlen,
				 "FILL %u: RESULT id %u status %d", r.id,
				 res.id, res.status);
			*ok = 0;
		} else if (nonce == 300) {
			printf("# FILL into unmapped memory: RESULT %s after "
			       "%.1f ms\n",
			       tern_strerror(res.status),
			       (double)(tern__now_ns() - t0) / 1e6);
		}
	} else if (fill_error_decode(st->reply, (size_t)n, &e) == 0) {
		snprintf(detail, dlen, "FILL %u: ERROR %s", r.id, e.text);
		*ok = 0;
	} else {
		snprintf(detail, dlen, "FILL %u: an answer of neither kind",
			 r.id);
		*ok = 0;
	}
}

static void run_unmapped(struct state *st, const struct tern_ctx_attr *attr,
			 const uint8_t *scard, size_t scard_len)
{
	char detail[300] = "";
	int ok = 1;

	for (int c = 0; c < UNMAPPED_CTXS && ok; c++) {
		uint8_t card[TERN_CARD_MAX];
		struct fill_conn *conn;
		struct tern_ctx *ctx;
		char why[256];
		ssize_t clen;

		if (tern_ctx_open(attr, &ctx) != 0) {
			snprintf(detail, sizeof(detail), "ctx %d", c);
			ok = 0;
			break;
		}
		clen = tern_ctx_card(ctx, card, sizeof(card));
		if (fill_conn_open(ctx, scard, scard_len, 10000, &conn, why,
				   sizeof(why)) != 0) {
			snprintf(detail, sizeof(detail), "connect: %s", why);
			ok = 0;
			tern_ctx_close(ctx);
			break;
		}
		for (int i = 0; i < 3 && ok; i++)
			unmapped_fill(st, conn, card, (size_t)clen,
				      300 + 10 * (uint64_t)c + (uint64_t)i, &ok,
				      detail, sizeof(detail));
		fill_conn_close(conn);
		tern_ctx_close(ctx);
	}
	check(st, ok,
	      "12 fills into unmapped memory each get a failed RESULT at "
	      "once",
	      ok ? NULL : detail);
}

/* --addr HOST:PORT --token T: a token server admits the CONNECT of a
 * card that passed the handshake only with that handshake's ticket. */
static void run_ticket(struct state *st, const char *addr, const char *token,
		       uint8_t *scard, size_t *scard_len)
{
	struct tern_boot_info mine = { 0 }, theirs;
	uint8_t wrong[TERN_BOOT_TICKET_LEN] = { 0 };
	struct fill_conn *conn;
	char why[256];
	ssize_t n;
	int fd, ret;

	n = tern_ctx_card(st->ctx, mine.card, sizeof(mine.card));
	mine.card_len = (size_t)n;
	ret = tern_boot_dial(addr, 5000, &fd, why, sizeof(why));
	if (ret == 0)
		ret = tern_boot_hello(fd, token, &mine, &theirs, 5000, why,
				      sizeof(why));
	check(st, ret == 0 && theirs.ticket_len == TERN_BOOT_TICKET_LEN,
	      "the handshake's WELCOME carries a 16-byte ticket",
	      ret ? why : NULL);
	if (ret != 0)
		exit(1);
	memcpy(scard, theirs.card, theirs.card_len);
	*scard_len = theirs.card_len;
	/* What a peer that copied our card would send: no ticket. */
	ret = fill_conn_open(st->ctx, scard, *scard_len, 10000, &conn, why,
			     sizeof(why));
	check(st, ret != 0 && strstr(why, "carries no ticket"),
	      "an admitted card's CONNECT without the ticket is refused",
	      ret ? why : "it was accepted");
	if (ret == 0)
		fill_conn_close(conn);
	ret = fill_conn_open_ticket(st->ctx, scard, *scard_len, wrong,
				    sizeof(wrong), 10000, &conn, why,
				    sizeof(why));
	check(st, ret != 0 && strstr(why, "matches no bootstrap handshake"),
	      "and with a wrong ticket", ret ? why : "it was accepted");
	if (ret == 0)
		fill_conn_close(conn);
	ret = fill_conn_open_ticket(st->ctx, scard, *scard_len, theirs.ticket,
				    theirs.ticket_len, 10000, &st->conn, why,
				    sizeof(why));
	check(st, ret == 0, "with its ticket it is accepted", ret ? why : NULL);
	memcpy(st->ticket, theirs.ticket, theirs.ticket_len);
	st->ticket_len = theirs.ticket_len;
	if (ret != 0)
		exit(1);
	/* fd stays open: it is the session's liveness channel. */
}

/* The card in hex in the file @path, decoded into @card (@cap bytes):
 * its length, or 0 or less (said why where the file cannot be read). */
static ssize_t read_card(const char *path, uint8_t *card, size_t cap)
{
	char hex[2 * TERN_CARD_MAX + 2];
	FILE *f = fopen(path, "r");

	if (f == NULL || fgets(hex, sizeof(hex), f) == NULL) {
		fprintf(stderr, "hostile: cannot read %s\n", path);
		return 0;
	}
	fclose(f);
	hex[strcspn(hex, "\n")] = '\0';
	return tern_hex_decode(hex, card, cap);
}

/* Fills into unmapped memory, where the provider lets them be seen. */
static void maybe_unmapped(struct state *st, const struct tern_ctx_attr *attr,
			   const char *addr, const uint8_t *card,
			   size_t card_len)
{
	/* Over tcp the client's provider refuses such writes after the
	 * server's local completion: nothing the server can see. From
	 * libfabric 1.18 shm refuses the post: the fill waits for
	 * --fill-timeout, then the session ends and the writer is freed. */
	if (addr == NULL && attr->provider != NULL &&
	    strcmp(attr->provider, "shm") == 0 &&
	    strncmp(tern_fabric_version(), "1.17", 4) == 0)
		run_unmapped(st, attr, card, card_len);
	else if (addr == NULL && attr->provider != NULL &&
		 strcmp(attr->provider, "shm") == 0)
		printf("# fills into unmapped memory: not run on libfabric "
		       "%s, whose shm refuses such writes: they end at "
		       "--fill-timeout (docs/testing.md)\n",
		       tern_fabric_version());
}

/* After all that, a good fill verifies; then one that times out, after
 * which the connection refuses to fill again. */
static void run_last(struct state *st)
{
	struct fill_params good = {
		.page_size = 3000,
		.pages = 21,
		.seed = 5489,
	};
	struct fill_report rep;
	int ret;

	ret = fill_conn_fill(st->conn, &good, &rep);
	check(st, ret == 0 && rep.verified == 3000ULL * 21,
	      "then a good fill (21 pages of 3000 bytes) verifies",
	      ret ? rep.error : NULL);
	/* A fill that times out leaves its writes and reply in flight: the
	 * connection must refuse further fills instead of taking the late
	 * reply for the next one. */
	good.pages = 8;
	good.page_size = 1 << 20;
	good.timeout_ms = 1;
	ret = fill_conn_fill(st->conn, &good, &rep);
	check(st, ret != 0, "a fill with a 1 ms timeout fails",
	      ret ? rep.error : "it did not");
	good.timeout_ms = 10000;
	ret = fill_conn_fill(st->conn, &good, &rep);
	check(st, ret != 0 && strstr(rep.error, "reconnect") != NULL,
	      "and the connection then refuses to fill again",
	      ret ? rep.error : "it filled");
	/* Let the late writes and reply of the timed-out fill arrive (the
	 * regions stay registered until close), so the server finishes it;
	 * hostile.sh then checks a new client is served. */
	for (int i = 0; i < 300; i++)
		tern_wait(st->ctx, NULL, 10);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "addr", required_argument, NULL, 'a' },
		{ "token", required_argument, NULL, 't' },
		{ "answer-ms", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	const char *addr = NULL, *token = NULL;
	struct tern_ctx_attr attr = { 0 };
	struct state st = { 0 };
	uint8_t card[TERN_CARD_MAX];
	char why[256];
	ssize_t card_len;
	int c, ret;

	st.answer_ms = 1500;
	while ((c = getopt_long(argc, argv, "p:n:a:t:m:", opts, NULL)) != -1) {
		if (c == 'p')
			attr.provider = optarg;
		else if (c == 'n')
			attr.node = optarg;
		else if (c == 'a')
			addr = optarg;
		else if (c == 't')
			token = optarg;
		else if (c == 'm' && atoi(optarg) > 0)
			st.answer_ms = atoi(optarg);
		else
			return 2;
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: hostile --provider P [--node A] "
				"[--addr HOST:PORT --token T] [--answer-ms MS] "
				"CARD-FILE\n");
		return 2;
	}
	card_len = read_card(argv[optind], card, sizeof(card));
	st.msg = malloc(FILL_MSG_MAX);
	st.reply = malloc(FILL_MSG_MAX);
	if (card_len <= 0 || st.msg == NULL || st.reply == NULL)
		return 2;
	ret = tern_ctx_open(&attr, &st.ctx);
	if (ret != 0) {
		fprintf(stderr, "hostile: ctx: %s\n", tern_strerror(ret));
		return 1;
	}
	if (addr != NULL) {
		size_t l;

		run_ticket(&st, addr, token, card, &l);
		card_len = (ssize_t)l;
	} else {
		ret = fill_conn_open(st.ctx, card, (size_t)card_len, 10000,
				     &st.conn, why, sizeof(why));
		if (ret != 0) {
			fprintf(stderr, "hostile: connect: %s\n", why);
			return 1;
		}
	}
	run(&st);
	run_silence(&st, card, (size_t)card_len);
	run_per_client(&st);
	maybe_unmapped(&st, &attr, addr, card, (size_t)card_len);
	run_last(&st);
	if (st.conn != NULL)
		fill_conn_close(st.conn);
	tern_ctx_close(st.ctx);
	free(st.msg);
	free(st.reply);
	printf("%d passed, %d failed\n", st.passed, st.failed);
	return st.failed == 0 && st.passed > 0 ? 0 : 1;
}
