/* SPDX-License-Identifier: MIT */
/*
 * The random-fill server's clients (apps/fill/server_int.h): replies to
 * them, their sessions from CONNECT to their end, and the checks a CONNECT
 * passes before it is accepted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "apps/fill/server_int.h"

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
		fill_srv_session_end(r->srv, s, s->end_why);
	session_settle(s);
}

/* Send @len bytes already in r->buf; @return 0 or the post's error. */
int fill_srv_reply_send(struct fill_server *srv, struct reply *r,
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

void fill_srv_reply_error(struct fill_server *srv, struct session *s,
			  uint32_t id, int code, const char *text)
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
	fill_srv_reply_send(
		srv, r, s->peer,
		fill_error_encode(r->buf, REPLY_MAX, s->id, id, code, text));
}

/* Answer a client we have no session with, through a short-lived peer
 * that its reply's completion removes. */
void fill_srv_reply_error_card(struct fill_server *srv, const void *msg,
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
	if (fill_srv_reply_send(srv, r, peer,
				fill_error_encode(r->buf, REPLY_MAX, 0, 0, code,
						  text)) != 0) {
		tern_peer_remove(peer);
		return;
	}
	r->anon_peer = peer;
}

/* ---- sessions ------------------------------------------------------ */

struct session *fill_srv_session_find(struct fill_server *srv, uint64_t id)
{
	for (int i = 0; id != 0 && i < srv->nsess; i++) {
		if (srv->sess[i].state == S_LIVE && srv->sess[i].id == id)
			return &srv->sess[i];
	}
	return NULL;
}

void fill_srv_queue_remove(struct fill_server *srv, struct session *s)
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

void fill_srv_session_end(struct fill_server *srv, struct session *s,
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
		fill_srv_queue_remove(srv, s);
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
			fill_srv_session_end(srv, s, why);
			n++;
		}
	}
	return n;
}

void fill_srv_idle_expired(struct tern_timer *t)
{
	struct session *s = t->data;

	s->srv->st.expired++;
	fill_srv_session_end(s->srv, s, "idle timeout");
}

/* The regions of a CONNECT: each within the limit and open to remote
 * writes. @return 0, or the code to refuse it with (@why says why). */
static int connect_regions(const struct fill_connect *c, char *why,
			   size_t whylen)
{
	for (int i = 0; i < FILL_REGIONS; i++) {
		if (c->regions[i].len > FILL_MAX_REGION) {
			snprintf(why, whylen,
				 "region %d is %" PRIu64 " bytes; the limit "
				 "is %llu",
				 i, c->regions[i].len,
				 (unsigned long long)FILL_MAX_REGION);
			return -TERN_EREFUSED;
		}
		/* Every fill writes: a region the client did not open to
		 * remote writes would fail each one. */
		if (!(c->regions[i].flags & TERN_MR_DESC_REMOTE_WRITE)) {
			snprintf(why, whylen,
				 "region %d: its descriptor grants no remote "
				 "write (flags 0x%x); register it for "
				 "remote writes",
				 i, c->regions[i].flags);
			return -TERN_EACCESS;
		}
	}
	return 0;
}

/* Whether the client of a CONNECT may open a session: its ticket, and the
 * sessions it holds. @return 0, or the code to refuse it with (@why says
 * why). */
static int connect_admit(struct fill_server *srv, const struct fill_connect *c,
			 char *why, size_t whylen)
{
	int mine = 0;

	/* The ticket binds the CONNECT to the handshake that admitted its
	 * card: a copied card alone is refused on a token server. */
	if (srv->opts.admit != NULL &&
	    !srv->opts.admit(srv->opts.admit_data, c->card, c->card_len,
			     c->ticket, c->ticket_len) &&
	    srv->opts.admit_required) {
		snprintf(why, whylen,
			 c->ticket_len == 0
				 ? "this server admits only clients that "
				   "passed its bootstrap handshake (tern fill "
				   "HOST:PORT --token): the CONNECT carries no "
				   "ticket"
				 : "the CONNECT's ticket matches no bootstrap "
				   "handshake of this card (tern fill "
				   "HOST:PORT --token)");
		return -TERN_EREFUSED;
	}
	/* One client (one card) holds at most max_per_client sessions, so
	 * one endpoint cannot take every slot. */
	for (int i = 0; i < srv->nsess; i++) {
		struct session *o = &srv->sess[i];

		mine += o->state == S_LIVE && o->card_len == c->card_len &&
			memcmp(o->card, c->card, c->card_len) == 0;
	}
	if (mine >= srv->opts.max_per_client) {
		snprintf(why, whylen,
			 "server busy for this client: it has %d "
			 "sessions (the limit per client, "
			 "--max-per-client)",
			 mine);
		return -EBUSY;
	}
	return 0;
}

/* Session @s (its peer added) starts for CONNECT @c: ACCEPT it. */
static void session_start(struct fill_server *srv, struct session *s,
			  const struct fill_connect *c)
{
	struct fill_accept a;
	struct reply *out;

	s->state = S_LIVE;
	s->id = new_session_id();
	memcpy(s->regions, c->regions, sizeof(s->regions));
	memcpy(s->card, c->card, c->card_len);
	s->card_len = c->card_len;
	s->fills = 0;
	s->end_after_reply = 0;
	srv->live++;
	srv->st.sessions++;
	if (srv->live > srv->st.peak_active)
		srv->st.peak_active = srv->live;
	slog(srv,
	     "session %016" PRIx64 " connected: regions of %" PRIu64
	     " and %" PRIu64 " bytes",
	     s->id, c->regions[0].len, c->regions[1].len);
	idle_restart(srv, s);
	out = sess_reply(s); /* a new session has both free */
	a = (struct fill_accept){
		.nonce = c->nonce,
		.max_page_size = FILL_MAX_PAGE_SIZE,
		.max_pages = FILL_MAX_PAGES,
		.max_bytes = FILL_MAX_BYTES,
	};
	if (fill_srv_reply_send(
		    srv, out, s->peer,
		    fill_accept_encode(out->buf, REPLY_MAX, s->id, &a)) != 0)
		fill_srv_session_end(srv, s, "accept could not be sent");
}

void fill_srv_on_connect(struct fill_server *srv, const uint8_t *msg,
			 size_t len)
{
	struct fill_connect c;
	struct session *s = NULL;
	char why[200];
	int ret;

	ret = fill_connect_decode(msg, len, &c);
	if (ret != 0) {
		char detail[160];

		fill_connect_why(msg, len, ret, detail, sizeof(detail));
		snprintf(why, sizeof(why), "malformed CONNECT (%zu bytes): %s",
			 len, detail);
		fill_srv_reply_error_card(srv, msg, len, ret, why);
		return;
	}
	/* Our own card: answering it would have us talk to ourselves. */
	if (c.card_len == srv->card_len &&
	    memcmp(c.card, srv->card, c.card_len) == 0) {
		srv->st.dropped++;
		slog(srv, "dropped a CONNECT carrying this server's own card");
		return;
	}
	ret = connect_regions(&c, why, sizeof(why));
	if (ret == 0)
		ret = connect_admit(srv, &c, why, sizeof(why));
	if (ret != 0) {
		fill_srv_reply_error_card(srv, msg, len, ret, why);
		return;
	}
	for (int i = 0; i < srv->nsess && s == NULL; i++) {
		if (srv->sess[i].state == S_FREE)
			s = &srv->sess[i];
	}
	if (s == NULL) {
		snprintf(why, sizeof(why),
			 "server busy: %d clients connected (the limit)",
			 srv->nsess);
		fill_srv_reply_error_card(srv, msg, len, -EBUSY, why);
		return;
	}
	ret = tern_peer_add(srv->ctx, c.card, c.card_len, &s->peer);
	if (ret != 0) {
		srv->st.dropped++;
		slog(srv, "dropped CONNECT: client card unusable: %s",
		     tern_strerror(ret));
		return;
	}
	session_start(srv, s, &c);
}
