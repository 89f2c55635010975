/* SPDX-License-Identifier: MIT */
/*
 * Random-fill server, driven by the ctx's loop (docs/loop.md). Each client
 * is a small state machine, CONNECT -> FILL* -> BYE, advanced only by
 * callbacks: a receive, a fill's writes completing, a reply going out, a
 * timer. Fills run on a few writers (each with its registered source
 * buffer); a client may have one fill outstanding, and fills that find
 * every writer busy wait in one FIFO, so no client starves another.
 *
 * It trusts nothing a client sends: every message is parsed and checked
 * before use, every refusal is answered with an ERROR (when the sender can
 * be identified), and a bad or dead client never stops the server from
 * serving the others.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/fill.h"

#define NRECV	      32
#define REPLY_MAX     512
#define SESS_REPLIES  2 /* per client: a RESULT and an ERROR at most */
#define ANON_REPLIES  8 /* ERRORs to senders without a session */
#define SPARE_WRITERS 4 /* replace writers stuck on a dead client */
#define SRC_ALIGN     128

struct fill_server;
struct session;

/* A reply buffer and its send. */
struct reply {
	struct tern_req req;
	struct fill_server *srv;
	struct session *sess; /* NULL for an anonymous reply */
	struct tern_peer *anon_peer;
	uint8_t *buf;
	int busy;
};

/* One fill being written: a registered source buffer, its pieces. */
struct writer {
	struct fill_server *srv;
	struct session *sess; /* NULL once its client is gone */
	uint8_t *src;
	struct tern_mr *srcmr;
	struct tern_piece *pieces;
	struct tern_req wreq;
	struct tern_timer timer;
	uint32_t id;
	uint32_t pages;
	uint32_t page_size;
	uint64_t bytes;
	uint64_t t0;
	int busy;
	int stuck;     /* abandoned with its writes still out */
	int imm_phase; /* split_imm: the data is written, the marks are out */
};

enum sess_state { S_FREE = 0, S_LIVE, S_CLOSING };

struct session {
	struct fill_server *srv;
	enum sess_state state;
	uint64_t id;
	struct tern_peer *peer;
	struct tern_mr_desc regions[FILL_REGIONS];
	uint8_t card[TERN_CARD_MAX]; /* the client's, to find it by */
	size_t card_len;
	uint64_t fills;
	struct tern_timer idle;
	struct reply tx[SESS_REPLIES];
	struct writer *w; /* its fill being written */
	uint8_t *pending; /* its FILL waiting for a writer */
	size_t pending_len;
	struct session *qnext; /* FIFO of sessions waiting */
	int end_after_reply;   /* the client looks gone: end once told */
	const char *end_why;
};

struct rx {
	struct tern_req req;
	struct fill_server *srv;
	uint8_t *buf;
};

struct fill_server {
	struct tern_ctx *ctx;
	struct fill_server_opts opts;
	uint8_t *msgmem;
	struct tern_mr *msgmr;
	struct rx rx[NRECV];
	struct reply anon[ANON_REPLIES];
	struct session *sess;
	int nsess;
	unsigned long live;
	struct writer *writers;
	int nwriters; /* allocated: parallel + spares */
	struct session *qhead, *qtail;
	unsigned long qlen;
	uint32_t *scratch;
	int split_imm; /* data first, then zero-length immediates (shm) */
	struct tern_timer tick;
	struct fill_server_stats st;
	uint8_t card[TERN_CARD_MAX]; /* our own: never a client's */
	size_t card_len;
	uint64_t unsolicited; /* replies sent to us, never answered */
	volatile sig_atomic_t *stop;
	int finished;
	int err;
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

static void pump(struct fill_server *srv);
static void session_end(struct fill_server *srv, struct session *s,
			const char *why);

static uint64_t new_session_id(void)
{
	uint64_t id = 0;

	while (id == 0) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = tern__now_ns() * 0x9E3779B97F4A7C15ULL;
	}
	return id;
}

/* ---- replies ------------------------------------------------------- */

static int replies_busy(const struct session *s)
{
	for (int i = 0; i < SESS_REPLIES; i++) {
		if (s->tx[i].busy)
			return 1;
	}
	return 0;
}

/* A closing session's slot is free once nothing of it is in flight. */
static void session_settle(struct session *s)
{
	if (s->state == S_CLOSING && !replies_busy(s) && s->w == NULL)
		s->state = S_FREE;
}

static void reply_done(struct tern_req *req)
{
	struct reply *r = req->data;
	struct session *s = r->sess;

	r->busy = 0;
	if (req->status != 0 && req->status != -ECANCELED)
		tern__warn("fill server: reply failed: %s%s%s",
			   tern_strerror(req->status),
			   req->errmsg[0] ? ": " : "", req->errmsg);
	if (r->anon_peer != NULL) {
		struct tern_peer *p = r->anon_peer;

		r->anon_peer = NULL;
		tern_peer_remove(p);
		return;
	}
	if (s == NULL)
		return;
	if (s->state == S_LIVE && s->end_after_reply)
		session_end(r->srv, s, s->end_why);
	session_settle(s);
}

/* Send @len bytes already in r->buf; @return 0 or the post's error. */
static int reply_send(struct fill_server *srv, struct reply *r,
		      struct tern_peer *peer, ssize_t len)
{
	int ret;

	if (len < 0) {
		srv->st.dropped++;
		return (int)len;
	}
	tern_req_init(&r->req, reply_done, r);
	ret = tern_send(peer, srv->msgmr, r->buf, (size_t)len, &r->req);
	if (ret != 0) {
		tern__warn("fill server: reply: %s", tern_strerror(ret));
		srv->st.dropped++;
		return ret;
	}
	r->busy = 1;
	return 0;
}

static struct reply *sess_reply(struct session *s)
{
	for (int i = 0; i < SESS_REPLIES; i++) {
		if (!s->tx[i].busy)
			return &s->tx[i];
	}
	return NULL;
}

static void reply_error(struct fill_server *srv, struct session *s, uint32_t id,
			int code, const char *text)
{
	struct reply *r = sess_reply(s);

	srv->st.refused++;
	slog(srv, "refused session %016" PRIx64 ": %s", s->id, text);
	if (r == NULL) {
		/* It has two replies unread: a client that floods us gets
		 * no more answers, and the others lose nothing. */
		srv->st.dropped++;
		return;
	}
	reply_send(srv, r, s->peer,
		   fill_error_encode(r->buf, REPLY_MAX, s->id, id, code, text));
}

/* Answer a client we have no session with, through a short-lived peer
 * that its reply's completion removes. */
static void reply_error_card(struct fill_server *srv, const void *msg,
			     size_t len, int code, const char *text)
{
	struct reply *r = NULL;
	const uint8_t *card;
	struct tern_peer *peer;
	size_t card_len;

	srv->st.refused++;
	slog(srv, "refused unknown client: %s", text);
	for (int i = 0; i < ANON_REPLIES && r == NULL; i++) {
		if (!srv->anon[i].busy)
			r = &srv->anon[i];
	}
	if (r == NULL || fill_connect_card(msg, len, &card, &card_len) ||
	    (card_len == srv->card_len &&
	     memcmp(card, srv->card, card_len) == 0) ||
	    /* Not admitted: reached through the provider only, nothing of
	     * it touched on this host (docs/local.md, "Trust"). */
	    tern_peer_add_flags(srv->ctx, card, card_len, TERN_PEER_FABRIC_ONLY,
				&peer) != 0) {
		srv->st.dropped++;
		slog(srv,
		     "no reply to a %zu-byte message from an unknown "
		     "sender",
		     len);
		return;
	}
	if (reply_send(srv, r, peer,
		       fill_error_encode(r->buf, REPLY_MAX, 0, 0, code,
					 text)) != 0) {
		tern_peer_remove(peer);
		return;
	}
	r->anon_peer = peer;
}

/* ---- sessions ------------------------------------------------------ */

static struct session *session_find(struct fill_server *srv, uint64_t id)
{
	for (int i = 0; id != 0 && i < srv->nsess; i++) {
		if (srv->sess[i].state == S_LIVE && srv->sess[i].id == id)
			return &srv->sess[i];
	}
	return NULL;
}

static void queue_remove(struct fill_server *srv, struct session *s)
{
	struct session **pp = &srv->qhead, *prev = NULL;

	for (; *pp != NULL; prev = *pp, pp = &(*pp)->qnext) {
		if (*pp == s) {
			*pp = s->qnext;
			if (srv->qtail == s)
				srv->qtail = prev;
			s->qnext = NULL;
			srv->qlen--;
			return;
		}
	}
}

static void session_end(struct fill_server *srv, struct session *s,
			const char *why)
{
	struct tern_peer *peer = s->peer;

	if (s->state != S_LIVE)
		return;
	slog(srv, "session %016" PRIx64 " ended (%s) after %" PRIu64 " fill(s)",
	     s->id, why, s->fills);
	s->state = S_CLOSING;
	srv->live--;
	tern_timer_stop(&s->idle);
	if (s->pending != NULL) {
		queue_remove(srv, s);
		free(s->pending);
		s->pending = NULL;
	}
	if (s->w != NULL) {
		/* Its writes finish (or fail) on their own; the writer
		 * forgets the session. */
		s->w->sess = NULL;
		s->w = NULL;
	}
	s->peer = NULL;
	/* Cancels what is still queued to it (replies included: their
	 * callbacks run from the next progress pass and settle the slot). */
	tern_peer_remove(peer);
	session_settle(s);
	if (srv->opts.once)
		srv->finished = 1;
}

int fill_server_peer_gone(struct fill_server *srv, const void *card, size_t len,
			  const char *why)
{
	int n = 0;

	for (int i = 0; i < srv->nsess; i++) {
		struct session *s = &srv->sess[i];

		if (s->state == S_LIVE && s->card_len == len &&
		    memcmp(s->card, card, len) == 0) {
			session_end(srv, s, why);
			n++;
		}
	}
	return n;
}

static void idle_expired(struct tern_timer *t)
{
	struct session *s = t->data;

	s->srv->st.expired++;
	session_end(s->srv, s, "idle timeout");
}

static void idle_restart(struct fill_server *srv, struct session *s)
{
	tern_timer_start(srv->ctx, &s->idle,
			 (uint64_t)srv->opts.idle_timeout_ms, 0);
}

static void on_connect(struct fill_server *srv, const uint8_t *msg, size_t len)
{
	struct fill_connect c;
	struct fill_accept a;
	struct session *s = NULL;
	struct reply *out;
	char why[200];
	int ret;

	ret = fill_connect_decode(msg, len, &c);
	if (ret != 0) {
		char detail[160];

		fill_connect_why(msg, len, ret, detail, sizeof(detail));
		snprintf(why, sizeof(why), "malformed CONNECT (%zu bytes): %s",
			 len, detail);
		reply_error_card(srv, msg, len, ret, why);
		return;
	}
	/* Our own card: answering it would have us talk to ourselves. */
	if (c.card_len == srv->card_len &&
	    memcmp(c.card, srv->card, c.card_len) == 0) {
		srv->st.dropped++;
		slog(srv, "dropped a CONNECT carrying this server's own card");
		return;
	}
	for (int i = 0; i < FILL_REGIONS; i++) {
		if (c.regions[i].len > FILL_MAX_REGION) {
			snprintf(why, sizeof(why),
				 "region %d is %" PRIu64 " bytes; the limit "
				 "is %llu",
				 i, c.regions[i].len,
				 (unsigned long long)FILL_MAX_REGION);
			reply_error_card(srv, msg, len, -TERN_EREFUSED, why);
			return;
		}
		/* Every fill writes: a region the client did not open to
		 * remote writes would fail each one. */
		if (!(c.regions[i].flags & TERN_MR_DESC_REMOTE_WRITE)) {
			snprintf(why, sizeof(why),
				 "region %d: its descriptor grants no remote "
				 "write (flags 0x%x); register it for "
				 "remote writes",
				 i, c.regions[i].flags);
			reply_error_card(srv, msg, len, -TERN_EACCESS, why);
			return;
		}
	}
	/* The ticket binds the CONNECT to the handshake that admitted its
	 * card: a copied card alone is refused on a token server. */
	if (srv->opts.admit != NULL &&
	    !srv->opts.admit(srv->opts.admit_data, c.card, c.card_len, c.ticket,
			     c.ticket_len) &&
	    srv->opts.admit_required) {
		snprintf(why, sizeof(why),
			 c.ticket_len == 0
				 ? "this server admits only clients that "
				   "passed its bootstrap handshake (tern fill "
				   "HOST:PORT --token): the CONNECT carries no "
				   "ticket"
				 : "the CONNECT's ticket matches no bootstrap "
				   "handshake of this card (tern fill "
				   "HOST:PORT --token)");
		reply_error_card(srv, msg, len, -TERN_EREFUSED, why);
		return;
	}
	/* One client (one card) holds at most max_per_client sessions, so
	 * one endpoint cannot take every slot. */
	{
		int mine = 0;

		for (int i = 0; i < srv->nsess; i++) {
			struct session *o = &srv->sess[i];

			mine += o->state == S_LIVE &&
				o->card_len == c.card_len &&
				memcmp(o->card, c.card, c.card_len) == 0;
		}
		if (mine >= srv->opts.max_per_client) {
			snprintf(why, sizeof(why),
				 "server busy for this client: it has %d "
				 "sessions (the limit per client, "
				 "--max-per-client)",
				 mine);
			reply_error_card(srv, msg, len, -EBUSY, why);
			return;
		}
	}
	for (int i = 0; i < srv->nsess && s == NULL; i++) {
		if (srv->sess[i].state == S_FREE)
			s = &srv->sess[i];
	}
	if (s == NULL) {
		snprintf(why, sizeof(why),
			 "server busy: %d clients connected (the limit)",
			 srv->nsess);
		reply_error_card(srv, msg, len, -EBUSY, why);
		return;
	}
	ret = tern_peer_add(srv->ctx, c.card, c.card_len, &s->peer);
	if (ret != 0) {
		srv->st.dropped++;
		slog(srv, "dropped CONNECT: client card unusable: %s",
		     tern_strerror(ret));
		return;
	}
	s->state = S_LIVE;
	s->id = new_session_id();
	memcpy(s->regions, c.regions, sizeof(s->regions));
	memcpy(s->card, c.card, c.card_len);
	s->card_len = c.card_len;
	s->fills = 0;
	s->end_after_reply = 0;
	srv->live++;
	srv->st.sessions++;
	if (srv->live > srv->st.peak_active)
		srv->st.peak_active = srv->live;
	slog(srv,
	     "session %016" PRIx64 " connected: regions of %" PRIu64
	     " and %" PRIu64 " bytes",
	     s->id, c.regions[0].len, c.regions[1].len);
	idle_restart(srv, s);
	out = sess_reply(s); /* a new session has both free */
	a = (struct fill_accept){
		.nonce = c.nonce,
		.max_page_size = FILL_MAX_PAGE_SIZE,
		.max_pages = FILL_MAX_PAGES,
		.max_bytes = FILL_MAX_BYTES,
	};
	if (reply_send(srv, out, s->peer,
		       fill_accept_encode(out->buf, REPLY_MAX, s->id, &a)) != 0)
		session_end(srv, s, "accept could not be sent");
}

/* ---- fills --------------------------------------------------------- */

static void fill_reply(struct fill_server *srv, struct session *s,
		       const struct fill_result *res)
{
	struct reply *out = sess_reply(s);

	if (out == NULL) {
		srv->st.dropped++;
		return;
	}
	reply_send(srv, out, s->peer,
		   fill_result_encode(out->buf, REPLY_MAX, s->id, res));
}

static void writer_release(struct fill_server *srv, struct writer *w)
{
	w->busy = 0;
	w->sess = NULL;
	if (w->stuck) {
		w->stuck = 0;
		slog(srv, "fill %u: writes abandoned earlier completed late",
		     w->id);
	}
	pump(srv);
}

static void fill_written(struct tern_req *req)
{
	struct writer *w = req->data;
	struct fill_server *srv = w->srv;
	struct session *s = w->sess;
	struct fill_result res;
	int ret = req->status;

	if (ret == 0 && srv->split_imm && !w->imm_phase && !w->stuck &&
	    s != NULL) {
		/* The data is in place: now one zero-length write with the
		 * immediate per page, so the client counts its pages as it
		 * would on any other provider. */
		for (uint32_t k = 0; k < w->pages; k++)
			w->pieces[k].len = 0;
		w->imm_phase = 1;
		tern_req_init(&w->wreq, fill_written, w);
		ret = tern_write_pieces(s->peer, w->srcmr, w->pieces, w->pages,
					s->regions, FILL_REGIONS,
					TERN_PIECES_IMM, w->id, &w->wreq);
		if (ret == 0)
			return;
	}
	tern_timer_stop(&w->timer);
	if (w->stuck || s == NULL) {
		writer_release(srv, w);
		return;
	}
	s->w = NULL;
	res = (struct fill_result){
		.id = w->id,
		.status = ret,
		.bytes = ret ? 0 : w->bytes,
		.write_ns = tern__now_ns() - w->t0,
	};
	s->fills++;
	srv->st.fills++;
	if (ret == 0) {
		srv->st.bytes += w->bytes;
		srv->st.write_ns += res.write_ns;
		slog(srv,
		     "fill %u: %u page(s) of %u bytes = %" PRIu64
		     " bytes written in %.3f ms (%.2f Gbit/s)",
		     w->id, w->pages, w->page_size, w->bytes,
		     (double)res.write_ns / 1e6,
		     (double)w->bytes * 8 / (double)res.write_ns);
	} else {
		srv->st.failed++;
		slog(srv, "fill %u failed: %s%s%s", w->id, tern_strerror(ret),
		     req->errmsg[0] ? ": " : "", req->errmsg);
		/* A provider error on the writes: the client is most likely
		 * gone. Tell it (if it is not), then end the session. */
		if (ret != -TERN_EACCESS && ret != -TERN_EBOUNDS) {
			s->end_after_reply = 1;
			s->end_why = "writes failed";
		}
	}
	fill_reply(srv, s, &res);
	if (s->state == S_LIVE && !s->end_after_reply)
		idle_restart(srv, s);
	if (s->state == S_LIVE && s->end_after_reply && !replies_busy(s))
		session_end(srv, s, s->end_why);
	session_settle(s);
	writer_release(srv, w);
}

static void fill_stalled(struct tern_timer *t)
{
	struct writer *w = t->data;
	struct fill_server *srv = w->srv;
	struct session *s = w->sess;

	/* A client that takes no writes must not hold a writer: drop it.
	 * The writer stays out of use until its writes finish or fail
	 * (on shm, writes to a process that has gone may never); a spare
	 * takes its place. */
	srv->st.stalled++;
	w->stuck = 1;
	slog(srv, "fill %u: not done in %d ms; dropping session %016" PRIx64,
	     w->id, srv->opts.fill_timeout_ms, s != NULL ? s->id : 0);
	if (s != NULL)
		session_end(srv, s, "writes stalled");
	pump(srv);
}

static int writer_buffers(struct fill_server *srv, struct writer *w)
{
	int ret;

	if (w->srcmr != NULL)
		return 0;
	w->pieces = calloc(FILL_MAX_PAGES, sizeof(*w->pieces));
	if (w->pieces == NULL ||
	    posix_memalign((void **)&w->src, SRC_ALIGN, FILL_MAX_BYTES))
		goto err;
	ret = tern_mr_reg(srv->ctx, w->src, FILL_MAX_BYTES, TERN_ACCESS_LOCAL,
			  &w->srcmr);
	if (ret == 0)
		return 0;
	tern__warn("fill server: registering a source buffer: %s",
		   tern_strerror(ret));
err:
	free(w->pieces);
	free(w->src);
	w->pieces = NULL;
	w->src = NULL;
	return -ENOMEM;
}

/* Write the checked request @r of @s with writer @w. */
static void fill_start(struct fill_server *srv, struct session *s,
		       struct writer *w, const struct fill_request *r)
{
	struct fill_result res = { .id = r->id };
	struct tern_mt64 rng;
	int ret;

	ret = writer_buffers(srv, w);
	if (ret != 0) {
		res.status = ret;
		fill_reply(srv, s, &res);
		return;
	}
	w->sess = s;
	w->id = r->id;
	w->pages = r->page_count;
	w->page_size = r->page_size;
	w->bytes = (uint64_t)r->page_size * r->page_count;
	/* Page k of the request carries bytes [k*ps, (k+1)*ps) of the
	 * MT19937-64(seed) stream (docs/protocol.md). */
	tern_mt64_seed(&rng, r->seed);
	tern_mt64_fill(&rng, w->src, w->bytes);
	for (uint32_t k = 0; k < r->page_count; k++) {
		unsigned int region = 0;
		uint64_t off = 0;

		/* Checked before: every index has a target. */
		fill_page_target(s->regions, r->page_size,
				 fill_request_index(r, k), &region, &off);
		w->pieces[k] = (struct tern_piece){
			.loff = (uint64_t)k * r->page_size,
			.roff = off,
			.len = r->page_size,
			.region = region,
		};
	}
	/* One operation: every page a write carrying imm = request id
	 * (with split_imm, the data now and the immediates after it). */
	w->t0 = tern__now_ns();
	w->imm_phase = 0;
	tern_req_init(&w->wreq, fill_written, w);
	ret = tern_write_pieces(s->peer, w->srcmr, w->pieces, r->page_count,
				s->regions, FILL_REGIONS,
				srv->split_imm ? 0 : TERN_PIECES_IMM, r->id,
				&w->wreq);
	if (ret != 0) {
		res.status = ret;
		slog(srv, "fill %u failed: %s", r->id, tern_strerror(ret));
		fill_reply(srv, s, &res);
		idle_restart(srv, s);
		return;
	}
	w->busy = 1;
	s->w = w;
	tern_timer_stop(&s->idle); /* the fill timer watches it now */
	tern_timer_start(srv->ctx, &w->timer,
			 (uint64_t)srv->opts.fill_timeout_ms, 0);
}

/* A writer for the next fill: at most `parallel` write at once; the
 * spares stand in only for writers stuck on a dead client. */
static struct writer *writer_free(struct fill_server *srv)
{
	struct writer *primary = NULL, *spare = NULL;
	int in_use = 0;

	for (int i = 0; i < srv->nwriters; i++) {
		struct writer *w = &srv->writers[i];

		if (w->busy)
			in_use += !w->stuck;
		else if (i < srv->opts.parallel && primary == NULL)
			primary = w;
		else if (spare == NULL)
			spare = w;
	}
	if (in_use >= srv->opts.parallel)
		return NULL;
	return primary != NULL ? primary : spare;
}

/* Start fills waiting in the FIFO while writers are free. */
static void pump(struct fill_server *srv)
{
	struct writer *w;
	struct session *s;

	while (srv->qhead != NULL && (w = writer_free(srv)) != NULL) {
		struct fill_request r;
		uint8_t *msg;

		s = srv->qhead;
		queue_remove(srv, s);
		msg = s->pending;
		s->pending = NULL;
		/* Decoded and checked when it arrived. */
		if (fill_request_decode(msg, s->pending_len, &r) == 0)
			fill_start(srv, s, w, &r);
		free(msg);
	}
}

static void on_fill(struct fill_server *srv, struct session *s,
		    const uint8_t *msg, size_t len)
{
	struct fill_request r;
	struct writer *w;
	char why[200];
	int ret;

	ret = fill_request_decode(msg, len, &r);
	if (ret != 0) {
		snprintf(why, sizeof(why), "malformed FILL (%zu bytes)", len);
		reply_error(srv, s, 0, ret, why);
		return;
	}
	if (s->w != NULL || s->pending != NULL) {
		reply_error(srv, s, r.id, -EBUSY,
			    "one fill at a time per client: the previous one "
			    "has not finished");
		return;
	}
	ret = fill_request_check(&r, s->regions, srv->scratch, why,
				 sizeof(why));
	if (ret != 0) {
		reply_error(srv, s, r.id, ret, why);
		return;
	}
	w = srv->qhead == NULL ? writer_free(srv) : NULL;
	if (w != NULL) {
		fill_start(srv, s, w, &r);
		return;
	}
	/* Every writer is busy: wait in line (a copy: the receive buffer
	 * goes back to the provider). */
	s->pending = malloc(len);
	if (s->pending == NULL) {
		reply_error(srv, s, r.id, -ENOMEM, "server out of memory");
		return;
	}
	memcpy(s->pending, msg, len);
	s->pending_len = len;
	s->qnext = NULL;
	if (srv->qtail != NULL)
		srv->qtail->qnext = s;
	else
		srv->qhead = s;
	srv->qtail = s;
	srv->qlen++;
	srv->st.queued++;
	tern_timer_stop(&s->idle);
}

/* ---- messages ------------------------------------------------------ */

static void on_message(struct fill_server *srv, const uint8_t *msg, size_t len)
{
	struct fill_hdr h;
	struct session *s;
	char why[160];
	int ret;

	ret = fill_hdr_parse(msg, len, &h);
	/* The session field sits at a fixed offset in every version; a
	 * random 64-bit session id is proof enough of who is talking. */
	s = len >= FILL_HDR ? session_find(srv, tern__wire_get_u64(msg + 16))
			    : NULL;
	if (s != NULL && s->w == NULL && s->pending == NULL)
		idle_restart(srv, s);
	if (ret != 0) {
		if (len >= FILL_HDR && tern__wire_get_u32(msg) != FILL_MAGIC)
			snprintf(why, sizeof(why), "bad magic 0x%08x",
				 tern__wire_get_u32(msg));
		else if (ret == -TERN_EVERSION)
			snprintf(why, sizeof(why),
				 "protocol version %u not supported (this "
				 "server speaks %u)",
				 tern__wire_get_u16(msg + 4), FILL_VERSION);
		else if (len >= FILL_HDR && tern__wire_get_u32(msg + 8) == len)
			snprintf(why, sizeof(why),
				 "header's reserved field is 0x%08x; it must "
				 "be 0",
				 tern__wire_get_u32(msg + 12));
		else
			snprintf(why, sizeof(why),
				 "malformed message: %zu bytes received, "
				 "header says %u",
				 len,
				 len >= 12 ? tern__wire_get_u32(msg + 8) : 0);
		if (s != NULL)
			reply_error(srv, s, 0, ret, why);
		else
			reply_error_card(srv, msg, len, ret, why);
		return;
	}
	switch (h.type) {
	case FILL_CONNECT:
		on_connect(srv, msg, len);
		return;
	case FILL_ACCEPT:
	case FILL_RESULT:
	case FILL_ERROR:
		/* A server's own kinds of message: never answered (an
		 * answer to an unsolicited reply could start an endless
		 * exchange, with ourselves or another server). Logged at
		 * 1, 2, 4, 8... */
		srv->st.dropped++;
		srv->unsolicited++;
		if ((srv->unsolicited & (srv->unsolicited - 1)) == 0)
			slog(srv,
			     "dropped a message of type %u (a server's "
			     "reply; %" PRIu64 " so far)",
			     h.type, srv->unsolicited);
		return;
	case FILL_REQUEST:
	case FILL_BYE:
		if (s == NULL) {
			srv->st.dropped++;
			slog(srv,
			     "dropped a message for unknown session "
			     "%016" PRIx64,
			     h.session);
			return;
		}
		if (h.type == FILL_BYE)
			session_end(srv, s, "bye");
		else
			on_fill(srv, s, msg, len);
		return;
	default:
		snprintf(why, sizeof(why), "unexpected message type %u",
			 h.type);
		if (s != NULL)
			reply_error(srv, s, 0, -TERN_EPROTO, why);
		else
			reply_error_card(srv, msg, len, -TERN_EPROTO, why);
	}
}

static int post_rx(struct fill_server *srv, struct rx *in);

static void rx_done(struct tern_req *req)
{
	struct rx *in = req->data;
	struct fill_server *srv = in->srv;
	int ret;

	if (req->status == -ECANCELED)
		return; /* closing */
	if (req->status != 0) {
		srv->st.dropped++;
		slog(srv, "receive failed: %s%s%s (message dropped)",
		     tern_strerror(req->status), req->errmsg[0] ? ": " : "",
		     req->errmsg);
	} else {
		on_message(srv, in->buf, req->len);
	}
	ret = post_rx(srv, in);
	if (ret != 0 && ret != -ECANCELED) {
		tern__warn("fill server: re-posting a receive: %s",
			   tern_strerror(ret));
		srv->err = ret;
	}
}

static int post_rx(struct fill_server *srv, struct rx *in)
{
	tern_req_init(&in->req, rx_done, in);
	return tern_recv(srv->ctx, srv->msgmr, in->buf, FILL_MSG_MAX, &in->req);
}

/* Once a second: wake a loop that slept through a signal, and report
 * fills that take long. */
static void tick(struct tern_timer *t)
{
	struct fill_server *srv = t->data;
	uint64_t now = tern__now_ns();

	for (int i = 0; i < srv->nwriters; i++) {
		struct writer *w = &srv->writers[i];
		uint64_t age = now - w->t0;

		if (w->busy && !w->stuck && age > 10000000000ULL &&
		    (age / 1000000000ULL) % 10 == 0)
			slog(srv, "fill %u: still writing %u page(s)", w->id,
			     w->pages);
	}
	if (srv->stop != NULL && *srv->stop)
		tern_stop(srv->ctx);
}

/* ---- the server ---------------------------------------------------- */

int fill_server_open(struct tern_ctx *ctx, const struct fill_server_opts *opts,
		     struct fill_server **srv_p)
{
	size_t msglen, replies;
	struct fill_server *srv;
	uint8_t *p;
	int ret = -ENOMEM, i;

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
	if (srv->opts.max_sessions <= 0)
		srv->opts.max_sessions = 256;
	if (srv->opts.parallel <= 0)
		srv->opts.parallel = 4;
	if (srv->opts.max_per_client <= 0)
		srv->opts.max_per_client = 4;
	{
		ssize_t n = tern_ctx_card(ctx, srv->card, sizeof(srv->card));

		srv->card_len = n > 0 ? (size_t)n : 0;
	}
	if (srv->opts.max_sessions > 65536 || srv->opts.parallel > 64) {
		free(srv);
		return -EINVAL;
	}
	/* libfabric's shm (1.17) hands out send completions in the order
	 * they were posted, across all peers, and a write with remote CQ
	 * data larger than its inject size waits for the target to answer:
	 * one client killed with such a write outstanding would stall every
	 * later completion of this endpoint. A plain write is done by the
	 * initiator itself (process_vm_writev) and completes at once, as
	 * does a zero-length write with an immediate; so on shm each fill
	 * writes its data first, then the immediates.
	 * libfabric 2.x's tcp;ofi_rxm (2.1 to at least 2.6) crashes the
	 * target of a write with remote CQ data whose connection breaks
	 * mid-write: tcp reports the failed incoming write with a context
	 * it never set (xnet_handle_write()'s entry, xnet_report_error()),
	 * and rxm_handle_comp_error() reads its protocol state through that
	 * pointer (SIGSEGV in the client's progress when a server is killed
	 * mid-fill). A zero-length write has no payload to cut: the same
	 * split keeps a killed server from taking its clients along. Only
	 * on one rail: there the immediates follow their data down the same
	 * connection, while over several a tcp write's completion does not
	 * mean it has landed, and an immediate on another rail could
	 * overtake it (several rails keep the writes with immediate). */
	{
		struct tern_ctx_info ci;

		srv->split_imm = tern_ctx_query(ctx, &ci) == 0 &&
				 ci.provider != NULL &&
				 (strcmp(ci.provider, "shm") == 0 ||
				  (strcmp(ci.provider, "tcp;ofi_rxm") == 0 &&
				   ci.rails <= 1 &&
				   atoi(tern_fabric_version()) >= 2));
	}
	srv->nsess = srv->opts.max_sessions;
	srv->nwriters = srv->opts.parallel + SPARE_WRITERS;
	replies = (size_t)srv->nsess * SESS_REPLIES + ANON_REPLIES;
	msglen = NRECV * FILL_MSG_MAX + replies * REPLY_MAX;
	srv->sess = calloc((size_t)srv->nsess, sizeof(*srv->sess));
	srv->writers = calloc((size_t)srv->nwriters, sizeof(*srv->writers));
	srv->scratch = calloc(FILL_MAX_PAGES, sizeof(*srv->scratch));
	if (srv->sess == NULL || srv->writers == NULL || srv->scratch == NULL ||
	    posix_memalign((void **)&srv->msgmem, SRC_ALIGN, msglen) != 0)
		goto err_free;
	ret = tern_mr_reg(ctx, srv->msgmem, msglen, TERN_ACCESS_LOCAL,
			  &srv->msgmr);
	if (ret != 0)
		goto err_free;
	p = srv->msgmem + NRECV * FILL_MSG_MAX;
	for (i = 0; i < srv->nsess; i++) {
		struct session *s = &srv->sess[i];

		s->srv = srv;
		tern_timer_init(&s->idle, idle_expired, s);
		for (int k = 0; k < SESS_REPLIES; k++, p += REPLY_MAX) {
			s->tx[k].srv = srv;
			s->tx[k].sess = s;
			s->tx[k].buf = p;
		}
	}
	for (i = 0; i < ANON_REPLIES; i++, p += REPLY_MAX) {
		srv->anon[i].srv = srv;
		srv->anon[i].buf = p;
	}
	for (i = 0; i < srv->nwriters; i++) {
		srv->writers[i].srv = srv;
		tern_timer_init(&srv->writers[i].timer, fill_stalled,
				&srv->writers[i]);
	}
	for (i = 0; i < NRECV; i++) {
		srv->rx[i].srv = srv;
		srv->rx[i].buf = srv->msgmem + (size_t)i * FILL_MSG_MAX;
		ret = post_rx(srv, &srv->rx[i]);
		if (ret != 0)
			goto err_rx;
	}
	tern_timer_init(&srv->tick, tick, srv);
	tern_timer_start(ctx, &srv->tick, 1000, 1000);
	*srv_p = srv;
	return 0;

err_rx:
	/* Receives already queued must not outlive their buffers. */
	while (i-- > 0) {
		if (tern_req_cancel(ctx, &srv->rx[i].req) >= 0)
			tern_wait(ctx, &srv->rx[i].req, 2000);
	}
	tern_mr_close(srv->msgmr);
err_free:
	free(srv->msgmem);
	free(srv->scratch);
	free(srv->writers);
	free(srv->sess);
	free(srv);
	return ret;
}

int fill_server_run(struct fill_server *srv, volatile sig_atomic_t *stop)
{
	int ret = 0;

	srv->stop = stop;
	while (!*stop && !srv->finished && srv->err == 0) {
		ret = tern_run(srv->ctx, TERN_RUN_ONCE);
		if (ret != 0)
			break;
	}
	srv->stop = NULL;
	return ret != 0 ? ret : srv->err;
}

void fill_server_stats(const struct fill_server *srv,
		       struct fill_server_stats *st)
{
	*st = srv->st;
	st->active = srv->live;
}

static int server_busy(const struct fill_server *srv)
{
	for (int i = 0; i < NRECV; i++) {
		if (!srv->rx[i].req.done)
			return 1;
	}
	for (int i = 0; i < ANON_REPLIES; i++) {
		if (srv->anon[i].busy)
			return 1;
	}
	for (int i = 0; i < srv->nwriters; i++) {
		if (srv->writers[i].busy)
			return 1;
	}
	for (int i = 0; i < srv->nsess; i++) {
		if (srv->sess[i].state != S_FREE)
			return 1;
	}
	return 0;
}

int fill_server_close(struct fill_server *srv)
{
	uint64_t deadline;
	int busy, ret = 0;

	if (srv == NULL)
		return 0;
	tern_timer_stop(&srv->tick);
	/* Let the last replies go out before their peers are removed. */
	deadline = tern__now_ns() + 2000000000ULL;
	for (int i = 0; i < srv->nsess; i++) {
		while (srv->sess[i].state == S_LIVE &&
		       replies_busy(&srv->sess[i]) &&
		       tern__now_ns() < deadline &&
		       tern_wait(srv->ctx, NULL, 100) != -TERN_ECLOSED)
			;
	}
	for (int i = 0; i < srv->nsess; i++)
		session_end(srv, &srv->sess[i], "server closing");
	for (int i = 0; i < srv->nwriters; i++)
		tern_timer_stop(&srv->writers[i].timer);
	/* Receives, replies and writes must complete before their requests
	 * and buffers go: cancel what can be cancelled, wait for the rest. */
	for (int i = 0; i < NRECV; i++)
		tern_req_cancel(srv->ctx, &srv->rx[i].req);
	deadline = tern__now_ns() + 5000000000ULL;
	while ((busy = server_busy(srv)) && tern__now_ns() < deadline) {
		ret = tern_wait(srv->ctx, NULL, 100);
		if (ret != 0 && ret != -ETIMEDOUT)
			break;
	}
	if (busy) {
		/* Better a leak than memory the provider may still touch;
		 * kept reachable from a list, so leak checkers see that it is
		 * held on purpose. */
		tern__warn("fill server: operations still in flight at close; "
			   "keeping their buffers");
		tern__keep(srv);
		return -EBUSY;
	}
	for (int i = 0; i < srv->nwriters; i++) {
		tern_mr_close(srv->writers[i].srcmr);
		free(srv->writers[i].src);
		free(srv->writers[i].pieces);
	}
	tern_mr_close(srv->msgmr);
	free(srv->msgmem);
	free(srv->scratch);
	free(srv->writers);
	free(srv->sess);
	free(srv);
	return 0;
}
