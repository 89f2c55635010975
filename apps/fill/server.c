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
 *
 * This file holds the server's life (open, run, close) and its receives,
 * each message handed to its step; the clients' sessions and replies are
 * in server_session.c, the fills and their writers in server_fill.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "apps/fill/server_int.h"

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
	s = len >= FILL_HDR
		    ? fill_srv_session_find(srv, tern__wire_get_u64(msg + 16))
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
			fill_srv_reply_error(srv, s, 0, ret, why);
		else
			fill_srv_reply_error_card(srv, msg, len, ret, why);
		return;
	}
	switch (h.type) {
	case FILL_CONNECT:
		fill_srv_on_connect(srv, msg, len);
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
			fill_srv_session_end(srv, s, "bye");
		else
			fill_srv_on_fill(srv, s, msg, len);
		return;
	default:
		snprintf(why, sizeof(why), "unexpected message type %u",
			 h.type);
		if (s != NULL)
			fill_srv_reply_error(srv, s, 0, -TERN_EPROTO, why);
		else
			fill_srv_reply_error_card(srv, msg, len, -TERN_EPROTO,
						  why);
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

/* The options, their defaults filled in. @return 0, or -EINVAL. */
static int server_opts(struct fill_server *srv,
		       const struct fill_server_opts *opts)
{
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
	if (srv->opts.max_sessions > 65536 || srv->opts.parallel > 64)
		return -EINVAL;
	return 0;
}

/* Whether each fill writes its data first, then zero-length writes with
 * the immediates, on @ctx's provider. */
static int wants_split_imm(struct tern_ctx *ctx)
{
	struct tern_ctx_info ci;

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
	return tern_ctx_query(ctx, &ci) == 0 && ci.provider != NULL &&
	       (strcmp(ci.provider, "shm") == 0 ||
		(strcmp(ci.provider, "tcp;ofi_rxm") == 0 && ci.rails <= 1 &&
		 atoi(tern_fabric_version()) >= 2));
}

/* The sessions, the writers and the message buffer (registered): the
 * receives first, then each session's replies and the anonymous ones.
 * @return 0 or a negative errno; the caller frees what was allocated. */
static int server_alloc(struct fill_server *srv)
{
	size_t msglen, replies;
	uint8_t *p;
	int ret;

	srv->nsess = srv->opts.max_sessions;
	srv->nwriters = srv->opts.parallel + SPARE_WRITERS;
	replies = (size_t)srv->nsess * SESS_REPLIES + ANON_REPLIES;
	msglen = NRECV * FILL_MSG_MAX + replies * REPLY_MAX;
	srv->sess = calloc((size_t)srv->nsess, sizeof(*srv->sess));
	srv->writers = calloc((size_t)srv->nwriters, sizeof(*srv->writers));
	srv->scratch = calloc(FILL_MAX_PAGES, sizeof(*srv->scratch));
	if (srv->sess == NULL || srv->writers == NULL || srv->scratch == NULL ||
	    posix_memalign((void **)&srv->msgmem, SRC_ALIGN, msglen) != 0)
		return -ENOMEM;
	ret = tern_mr_reg(srv->ctx, srv->msgmem, msglen, TERN_ACCESS_LOCAL,
			  &srv->msgmr);
	if (ret != 0)
		return ret;
	p = srv->msgmem + NRECV * FILL_MSG_MAX;
	for (int i = 0; i < srv->nsess; i++) {
		struct session *s = &srv->sess[i];

		s->srv = srv;
		tern_timer_init(&s->idle, fill_srv_idle_expired, s);
		for (int k = 0; k < SESS_REPLIES; k++, p += REPLY_MAX) {
			s->tx[k].srv = srv;
			s->tx[k].sess = s;
			s->tx[k].buf = p;
		}
	}
	for (int i = 0; i < ANON_REPLIES; i++, p += REPLY_MAX) {
		srv->anon[i].srv = srv;
		srv->anon[i].buf = p;
	}
	for (int i = 0; i < srv->nwriters; i++) {
		srv->writers[i].srv = srv;
		tern_timer_init(&srv->writers[i].timer, fill_srv_stalled,
				&srv->writers[i]);
	}
	return 0;
}

/* Queue every receive. @return 0, or the error, with none left queued. */
static int post_receives(struct fill_server *srv)
{
	int ret, i;

	for (i = 0; i < NRECV; i++) {
		srv->rx[i].srv = srv;
		srv->rx[i].buf = srv->msgmem + (size_t)i * FILL_MSG_MAX;
		ret = post_rx(srv, &srv->rx[i]);
		if (ret != 0)
			goto err_cancel_rx;
	}
	return 0;

err_cancel_rx:
	/* Receives already queued must not outlive their buffers. */
	while (i-- > 0) {
		if (tern_req_cancel(srv->ctx, &srv->rx[i].req) >= 0)
			tern_wait(srv->ctx, &srv->rx[i].req, 2000);
	}
	return ret;
}

int fill_server_open(struct tern_ctx *ctx, const struct fill_server_opts *opts,
		     struct fill_server **srv_p)
{
	struct fill_server *srv;
	ssize_t n;
	int ret;

	srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return -ENOMEM;
	srv->ctx = ctx;
	ret = server_opts(srv, opts);
	if (ret != 0)
		goto err_free;
	n = tern_ctx_card(ctx, srv->card, sizeof(srv->card));
	srv->card_len = n > 0 ? (size_t)n : 0;
	srv->split_imm = wants_split_imm(ctx);
	ret = server_alloc(srv);
	if (ret != 0)
		goto err_free;
	ret = post_receives(srv);
	if (ret != 0)
		goto err_close_mr;
	tern_timer_init(&srv->tick, tick, srv);
	tern_timer_start(ctx, &srv->tick, 1000, 1000);
	*srv_p = srv;
	return 0;

err_close_mr:
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
		fill_srv_session_end(srv, &srv->sess[i], "server closing");
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
