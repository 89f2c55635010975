/* SPDX-License-Identifier: MIT */
/*
 * Random-fill server. It trusts nothing a client sends: every message is
 * parsed and checked before use, every refusal is answered with an ERROR
 * (when the sender can be identified), and a bad client never stops the
 * server from serving the next one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/core.h"
#include "fill/fill.h"

#define NRECV	     8
#define NREPLY	     32
#define REPLY_MAX    512
#define MAX_SESSIONS 64
#define SRC_ALIGN    128

struct session {
	uint64_t id; /* 0: free */
	struct tern_peer *peer;
	struct tern_mr_desc regions[TERN_FILL_REGIONS];
	uint64_t last_ns;
	uint64_t fills;
};

struct slot {
	struct tern_req req;
	uint8_t *buf;
	int busy;
};

struct tern_fill_server {
	struct tern_ctx *ctx;
	struct tern_fill_server_opts opts;
	uint8_t *msgmem;
	struct tern_mr *msgmr;
	struct slot rx[NRECV];
	struct slot tx[NREPLY];
	uint8_t *src;
	struct tern_mr *srcmr;
	struct tern_piece *pieces; /* the fill in progress, one per page */
	struct tern_req wreq;
	uint32_t *scratch;
	struct session sess[MAX_SESSIONS];
	struct tern_fill_server_stats st;
	int finished;
	int w_busy; /* wreq is in flight */
};

#define slog(srv, ...)                                         \
	do {                                                   \
		if ((srv)->opts.log != NULL) {                 \
			if ((srv)->opts.log_prefix != NULL)    \
				fputs((srv)->opts.log_prefix,  \
				      (srv)->opts.log);        \
			fprintf((srv)->opts.log, __VA_ARGS__); \
			fputc('\n', (srv)->opts.log);          \
			fflush((srv)->opts.log);               \
		}                                              \
	} while (0)

static uint64_t new_session_id(void)
{
	uint64_t id = 0;

	while (id == 0) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = tern__now_ns() * 0x9E3779B97F4A7C15ULL;
	}
	return id;
}

static void tx_done(struct tern_req *req)
{
	struct slot *s = req->data;

	s->busy = 0;
	if (req->status != 0)
		tern_warn("fill server: reply failed: %s%s%s",
			  tern_strerror(req->status),
			  req->errmsg[0] ? ": " : "", req->errmsg);
}

/* A free reply slot; waits a little for one. NULL when none frees up. */
static struct slot *tx_slot(struct tern_fill_server *srv)
{
	uint64_t deadline = tern__now_ns() + 5000000000ULL;
	int ret;

	for (;;) {
		for (int i = 0; i < NREPLY; i++) {
			if (!srv->tx[i].busy)
				return &srv->tx[i];
		}
		if (tern__now_ns() > deadline)
			return NULL;
		ret = tern_wait(srv->ctx, NULL, 100);
		if (ret != 0 && ret != -ETIMEDOUT)
			return NULL;
	}
}

static void reply(struct tern_fill_server *srv, struct tern_peer *peer,
		  struct slot *s, ssize_t len)
{
	int ret;

	if (len < 0) {
		srv->st.dropped++;
		return;
	}
	tern_req_init(&s->req, tx_done, s);
	ret = tern_send(peer, srv->msgmr, s->buf, (size_t)len, &s->req);
	if (ret != 0) {
		tern_warn("fill server: reply: %s", tern_strerror(ret));
		srv->st.dropped++;
		return;
	}
	s->busy = 1;
}

/* @return the slot the ERROR went out in, or NULL. */
static struct slot *reply_error(struct tern_fill_server *srv,
				struct tern_peer *peer, uint64_t session,
				uint32_t id, int code, const char *text)
{
	struct slot *s = tx_slot(srv);

	srv->st.refused++;
	slog(srv, "refused %s%016" PRIx64 ": %s",
	     session ? "session " : "unknown client ", session, text);
	if (s == NULL) {
		srv->st.dropped++;
		return NULL;
	}
	reply(srv, peer, s,
	      tern_fill_error_encode(s->buf, REPLY_MAX, session, id, code,
				     text));
	return s->busy ? s : NULL;
}

/* Answer a client we have no session with, through a short-lived peer. */
static void reply_error_card(struct tern_fill_server *srv, const void *msg,
			     size_t len, int code, const char *text)
{
	const uint8_t *card;
	struct tern_peer *peer;
	struct slot *s;
	size_t card_len;

	if (tern_fill_connect_card(msg, len, &card, &card_len) != 0 ||
	    tern_peer_add(srv->ctx, card, card_len, &peer) != 0) {
		srv->st.dropped++;
		slog(srv,
		     "dropped a %zu-byte message from an unknown sender: "
		     "%s",
		     len, text);
		return;
	}
	s = reply_error(srv, peer, 0, 0, code, text);
	/* Removing a peer cancels what is still queued to it: let the
	 * reply go first (bounded; a dead client must not hold us). */
	if (s != NULL)
		tern_wait(srv->ctx, &s->req, 2000);
	tern_peer_remove(peer);
}

static struct session *session_find(struct tern_fill_server *srv, uint64_t id)
{
	for (int i = 0; id != 0 && i < MAX_SESSIONS; i++) {
		if (srv->sess[i].id == id)
			return &srv->sess[i];
	}
	return NULL;
}

static void session_end(struct tern_fill_server *srv, struct session *s,
			const char *why)
{
	slog(srv, "session %016" PRIx64 " ended (%s) after %" PRIu64 " fill(s)",
	     s->id, why, s->fills);
	tern_peer_remove(s->peer);
	memset(s, 0, sizeof(*s));
	if (srv->opts.once)
		srv->finished = 1;
}

static void expire_idle(struct tern_fill_server *srv)
{
	uint64_t now = tern__now_ns();
	uint64_t idle = (uint64_t)srv->opts.idle_timeout_ms * 1000000ULL;

	for (int i = 0; i < MAX_SESSIONS; i++) {
		if (srv->sess[i].id != 0 && now - srv->sess[i].last_ns > idle)
			session_end(srv, &srv->sess[i], "idle timeout");
	}
}

static void on_connect(struct tern_fill_server *srv, const uint8_t *msg,
		       size_t len)
{
	struct tern_fill_connect c;
	struct tern_fill_accept a;
	struct session *s = NULL;
	struct slot *out;
	char why[160];
	int ret;

	ret = tern_fill_connect_decode(msg, len, &c);
	if (ret != 0) {
		snprintf(why, sizeof(why), "malformed CONNECT (%zu bytes): %s",
			 len, tern_strerror(ret));
		reply_error_card(srv, msg, len, ret, why);
		return;
	}
	for (int i = 0; i < TERN_FILL_REGIONS; i++) {
		if (c.regions[i].len > TERN_FILL_MAX_REGION) {
			snprintf(why, sizeof(why),
				 "region %d is %" PRIu64 " bytes; the limit "
				 "is %llu",
				 i, c.regions[i].len,
				 (unsigned long long)TERN_FILL_MAX_REGION);
			reply_error_card(srv, msg, len, -TERN_EREFUSED, why);
			return;
		}
	}
	expire_idle(srv);
	for (int i = 0; i < MAX_SESSIONS && s == NULL; i++) {
		if (srv->sess[i].id == 0)
			s = &srv->sess[i];
	}
	if (s == NULL) {
		reply_error_card(srv, msg, len, -EBUSY,
				 "server busy: too many sessions");
		return;
	}
	ret = tern_peer_add(srv->ctx, c.card, c.card_len, &s->peer);
	if (ret != 0) {
		srv->st.dropped++;
		slog(srv, "dropped CONNECT: client card unusable: %s",
		     tern_strerror(ret));
		return;
	}
	s->id = new_session_id();
	memcpy(s->regions, c.regions, sizeof(s->regions));
	s->last_ns = tern__now_ns();
	s->fills = 0;
	srv->st.sessions++;
	slog(srv,
	     "session %016" PRIx64 " connected: regions of %" PRIu64
	     " and %" PRIu64 " bytes",
	     s->id, c.regions[0].len, c.regions[1].len);
	out = tx_slot(srv);
	if (out == NULL) {
		session_end(srv, s, "no reply slot");
		return;
	}
	a = (struct tern_fill_accept){
		.nonce = c.nonce,
		.max_page_size = TERN_FILL_MAX_PAGE_SIZE,
		.max_pages = TERN_FILL_MAX_PAGES,
		.max_bytes = TERN_FILL_MAX_BYTES,
	};
	reply(srv, s->peer, out,
	      tern_fill_accept_encode(out->buf, REPLY_MAX, s->id, &a));
}

static void on_fill(struct tern_fill_server *srv, struct session *s,
		    const uint8_t *msg, size_t len, volatile sig_atomic_t *stop)
{
	struct tern_fill_result res = { 0 };
	struct tern_fill_request r;
	uint64_t bytes, t0, warned;
	struct tern_mt64 rng;
	struct slot *out;
	char why[200];
	int ret;

	ret = tern_fill_request_decode(msg, len, &r);
	if (ret != 0) {
		snprintf(why, sizeof(why), "malformed FILL (%zu bytes)", len);
		reply_error(srv, s->peer, s->id, 0, ret, why);
		return;
	}
	if (srv->w_busy) {
		/* A dropped client's writes are still out. */
		reply_error(srv, s->peer, s->id, r.id, -EBUSY,
			    "server busy finishing an earlier fill; retry");
		return;
	}
	ret = tern_fill_request_check(&r, s->regions, srv->scratch, why,
				      sizeof(why));
	if (ret != 0) {
		reply_error(srv, s->peer, s->id, r.id, ret, why);
		return;
	}
	bytes = (uint64_t)r.page_size * r.page_count;
	/* Page k of the request carries bytes [k*ps, (k+1)*ps) of the
	 * MT19937-64(seed) stream (docs/protocol.md). */
	tern_mt64_seed(&rng, r.seed);
	tern_mt64_fill(&rng, srv->src, bytes);
	for (uint32_t k = 0; k < r.page_count; k++) {
		struct tern_piece *pc = &srv->pieces[k];
		unsigned int region = 0;
		uint64_t off = 0;

		/* Checked above: every index has a target. */
		tern_fill_page_target(s->regions, r.page_size,
				      tern_fill_request_index(&r, k), &region,
				      &off);
		*pc = (struct tern_piece){
			.loff = (uint64_t)k * r.page_size,
			.roff = off,
			.len = r.page_size,
			.region = region,
		};
	}
	/* One operation: every page a write carrying imm = request id. */
	t0 = tern__now_ns();
	tern_req_init(&srv->wreq, NULL, NULL);
	ret = tern_write_pieces(s->peer, srv->srcmr, srv->pieces, r.page_count,
				s->regions, TERN_FILL_REGIONS, TERN_PIECES_IMM,
				r.id, &srv->wreq);
	srv->w_busy = ret == 0;
	warned = t0;
	while (srv->w_busy && !srv->wreq.done && !*stop &&
	       tern__now_ns() - t0 <
		       (uint64_t)srv->opts.fill_timeout_ms * 1000000ULL) {
		int wret = tern_wait(srv->ctx, &srv->wreq, 1000);

		if (wret != 0 && wret != -ETIMEDOUT) {
			ret = wret;
			break;
		}
		if (tern__now_ns() - warned > 10000000000ULL) {
			warned = tern__now_ns();
			slog(srv, "fill %u: still writing %u page(s)", r.id,
			     r.page_count);
		}
	}
	if (srv->w_busy && !srv->wreq.done) {
		if (*stop)
			return; /* closing waits for or cancels the rest */
		/* A client that takes no writes must not hold the server:
		 * drop it. Its writes already out finish or fail on their
		 * own; until then new fills are refused as busy. */
		slog(srv,
		     "fill %u: not done in %d ms; dropping session %016" PRIx64,
		     r.id, srv->opts.fill_timeout_ms, s->id);
		session_end(srv, s, "writes stalled");
		return;
	}
	srv->w_busy = 0;
	if (ret == 0)
		ret = srv->wreq.status;
	res = (struct tern_fill_result){
		.id = r.id,
		.status = ret,
		.bytes = ret ? 0 : bytes,
		.write_ns = tern__now_ns() - t0,
	};
	s->fills++;
	srv->st.fills++;
	if (ret == 0) {
		srv->st.bytes += bytes;
		srv->st.write_ns += res.write_ns;
		slog(srv,
		     "fill %u: %u page(s) of %u bytes = %" PRIu64
		     " bytes written in %.3f ms (%.2f Gbit/s)",
		     r.id, r.page_count, r.page_size, bytes,
		     (double)res.write_ns / 1e6,
		     (double)bytes * 8 / (double)res.write_ns);
	} else {
		slog(srv, "fill %u failed: %s%s%s", r.id, tern_strerror(ret),
		     srv->wreq.errmsg[0] ? ": " : "", srv->wreq.errmsg);
	}
	out = tx_slot(srv);
	if (out == NULL) {
		srv->st.dropped++;
		return;
	}
	reply(srv, s->peer, out,
	      tern_fill_result_encode(out->buf, REPLY_MAX, s->id, &res));
}

static void on_message(struct tern_fill_server *srv, struct slot *in,
		       volatile sig_atomic_t *stop)
{
	const uint8_t *msg = in->buf;
	size_t len = in->req.len;
	struct tern_fill_hdr h;
	struct session *s;
	char why[160];
	int ret;

	if (in->req.status != 0) {
		srv->st.dropped++;
		slog(srv, "receive failed: %s%s%s (message dropped)",
		     tern_strerror(in->req.status),
		     in->req.errmsg[0] ? ": " : "", in->req.errmsg);
		return;
	}
	ret = tern_fill_hdr_parse(msg, len, &h);
	/* The session field sits at a fixed offset in every version; a
	 * random 64-bit session id is proof enough of who is talking. */
	s = len >= TERN_FILL_HDR ? session_find(srv, tern__get_u64(msg + 16))
				 : NULL;
	if (s != NULL)
		s->last_ns = tern__now_ns();
	if (ret != 0) {
		if (len >= TERN_FILL_HDR &&
		    tern__get_u32(msg) != TERN_FILL_MAGIC)
			snprintf(why, sizeof(why), "bad magic 0x%08x",
				 tern__get_u32(msg));
		else if (ret == -TERN_EVERSION)
			snprintf(why, sizeof(why),
				 "protocol version %u not supported (this "
				 "server speaks %u)",
				 tern__get_u16(msg + 4), TERN_FILL_VERSION);
		else
			snprintf(why, sizeof(why),
				 "malformed message: %zu bytes received, "
				 "header says %u",
				 len, len >= 12 ? tern__get_u32(msg + 8) : 0);
		if (s != NULL)
			reply_error(srv, s->peer, s->id, 0, ret, why);
		else
			reply_error_card(srv, msg, len, ret, why);
		return;
	}
	switch (h.type) {
	case TERN_FILL_CONNECT:
		on_connect(srv, msg, len);
		return;
	case TERN_FILL_REQUEST:
	case TERN_FILL_BYE:
		if (s == NULL) {
			srv->st.dropped++;
			slog(srv,
			     "dropped a message for unknown session "
			     "%016" PRIx64,
			     h.session);
			return;
		}
		if (h.type == TERN_FILL_BYE)
			session_end(srv, s, "bye");
		else
			on_fill(srv, s, msg, len, stop);
		return;
	default:
		snprintf(why, sizeof(why), "unexpected message type %u",
			 h.type);
		if (s != NULL)
			reply_error(srv, s->peer, s->id, 0, -TERN_EPROTO, why);
		else
			reply_error_card(srv, msg, len, -TERN_EPROTO, why);
	}
}

static int post_rx(struct tern_fill_server *srv, struct slot *s)
{
	tern_req_init(&s->req, NULL, s);
	return tern_recv(srv->ctx, srv->msgmr, s->buf, TERN_FILL_MSG_MAX,
			 &s->req);
}

int tern_fill_server_open(struct tern_ctx *ctx,
			  const struct tern_fill_server_opts *opts,
			  struct tern_fill_server **srv_p)
{
	size_t msglen = NRECV * TERN_FILL_MSG_MAX + NREPLY * REPLY_MAX;
	struct tern_fill_server *srv;
	int ret = -ENOMEM;

	srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return -ENOMEM;
	srv->ctx = ctx;
	if (opts != NULL)
		srv->opts = *opts;
	if (srv->opts.idle_timeout_ms <= 0)
		srv->opts.idle_timeout_ms = 120000;
	if (srv->opts.fill_timeout_ms <= 0)
		srv->opts.fill_timeout_ms = 60000;
	srv->pieces = calloc(TERN_FILL_MAX_PAGES, sizeof(*srv->pieces));
	srv->scratch = calloc(TERN_FILL_MAX_PAGES, sizeof(*srv->scratch));
	if (srv->pieces == NULL || srv->scratch == NULL ||
	    posix_memalign((void **)&srv->msgmem, SRC_ALIGN, msglen) != 0)
		goto err_free;
	if (posix_memalign((void **)&srv->src, SRC_ALIGN,
			   TERN_FILL_MAX_BYTES) != 0)
		goto err_free;
	ret = tern_mr_reg(ctx, srv->msgmem, msglen, TERN_ACCESS_LOCAL,
			  &srv->msgmr);
	if (ret != 0)
		goto err_free;
	ret = tern_mr_reg(ctx, srv->src, TERN_FILL_MAX_BYTES, TERN_ACCESS_LOCAL,
			  &srv->srcmr);
	if (ret != 0)
		goto err_msgmr;
	for (int i = 0; i < NRECV; i++) {
		srv->rx[i].buf = srv->msgmem + (size_t)i * TERN_FILL_MSG_MAX;
		ret = post_rx(srv, &srv->rx[i]);
		if (ret != 0)
			goto err_srcmr;
	}
	for (int i = 0; i < NREPLY; i++)
		srv->tx[i].buf = srv->msgmem + NRECV * TERN_FILL_MSG_MAX +
				 (size_t)i * REPLY_MAX;
	*srv_p = srv;
	return 0;

err_srcmr:
	/* Receives already queued are cancelled when the ctx closes; they
	 * must not outlive their buffers, so cancel them now. */
	for (int i = 0; i < NRECV; i++)
		tern_req_cancel(ctx, &srv->rx[i].req);
	tern_mr_close(srv->srcmr);
err_msgmr:
	tern_mr_close(srv->msgmr);
err_free:
	free(srv->src);
	free(srv->msgmem);
	free(srv->scratch);
	free(srv->pieces);
	free(srv);
	return ret;
}

int tern_fill_server_run(struct tern_fill_server *srv,
			 volatile sig_atomic_t *stop)
{
	uint64_t last_expire = tern__now_ns();

	while (!*stop && !srv->finished) {
		int ret = tern_wait(srv->ctx, NULL, 200);

		if (ret != 0 && ret != -ETIMEDOUT)
			return ret;
		for (int i = 0; i < NRECV && !*stop; i++) {
			struct slot *in = &srv->rx[i];

			if (!in->req.done)
				continue;
			on_message(srv, in, stop);
			ret = post_rx(srv, in);
			if (ret != 0)
				return ret;
		}
		if (srv->w_busy && srv->wreq.done)
			srv->w_busy = 0;
		if (tern__now_ns() - last_expire > 1000000000ULL) {
			last_expire = tern__now_ns();
			expire_idle(srv);
		}
	}
	/* Let the last replies go out before the caller closes. */
	for (int i = 0; i < NREPLY; i++) {
		if (srv->tx[i].busy)
			tern_wait(srv->ctx, &srv->tx[i].req, 2000);
	}
	return 0;
}

void tern_fill_server_stats(const struct tern_fill_server *srv,
			    struct tern_fill_server_stats *st)
{
	*st = srv->st;
}

int tern_fill_server_close(struct tern_fill_server *srv)
{
	uint64_t deadline;
	int busy = 0, ret;

	if (srv == NULL)
		return 0;
	for (int i = 0; i < MAX_SESSIONS; i++) {
		if (srv->sess[i].id != 0)
			session_end(srv, &srv->sess[i], "server closing");
	}
	/* Receives, replies and writes must complete before their requests
	 * and buffers go: cancel what can be cancelled, wait for the rest. */
	for (int i = 0; i < NRECV; i++)
		tern_req_cancel(srv->ctx, &srv->rx[i].req);
	deadline = tern__now_ns() + 5000000000ULL;
	do {
		busy = srv->w_busy && !srv->wreq.done;
		for (int i = 0; i < NRECV; i++)
			busy |= !srv->rx[i].req.done;
		for (int i = 0; i < NREPLY; i++)
			busy |= srv->tx[i].busy;
		if (!busy || tern__now_ns() >= deadline)
			break;
		ret = tern_wait(srv->ctx, NULL, 100);
	} while (ret == 0 || ret == -ETIMEDOUT);
	if (busy) {
		/* Better a leak than memory the provider may still touch. */
		tern_warn("fill server: operations still in flight at close; "
			  "keeping their buffers");
		return -EBUSY;
	}
	tern_mr_close(srv->srcmr);
	tern_mr_close(srv->msgmr);
	free(srv->src);
	free(srv->msgmem);
	free(srv->scratch);
	free(srv->pieces);
	free(srv);
	return 0;
}
