/* SPDX-License-Identifier: MIT */
/*
 * The random-fill server's fills (apps/fill/server_int.h): a FILL checked
 * and started on a free writer or queued in the FIFO, its pages written
 * with immediates, the RESULT, and fills that stall on a dead client.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "apps/fill/server_int.h"

static void pump(struct fill_server *srv);

static void fill_reply(struct fill_server *srv, struct session *s,
		       const struct fill_result *res)
{
	struct reply *out = sess_reply(s);

	if (out == NULL) {
		srv->st.dropped++;
		return;
	}
	fill_srv_reply_send(
		srv, out, s->peer,
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
		fill_srv_session_end(srv, s, s->end_why);
	session_settle(s);
	writer_release(srv, w);
}

void fill_srv_stalled(struct tern_timer *t)
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
		fill_srv_session_end(srv, s, "writes stalled");
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
		fill_srv_queue_remove(srv, s);
		msg = s->pending;
		s->pending = NULL;
		/* Decoded and checked when it arrived. */
		if (fill_request_decode(msg, s->pending_len, &r) == 0)
			fill_start(srv, s, w, &r);
		free(msg);
	}
}

void fill_srv_on_fill(struct fill_server *srv, struct session *s,
		      const uint8_t *msg, size_t len)
{
	struct fill_request r;
	struct writer *w;
	char why[200];
	int ret;

	ret = fill_request_decode(msg, len, &r);
	if (ret != 0) {
		snprintf(why, sizeof(why), "malformed FILL (%zu bytes)", len);
		fill_srv_reply_error(srv, s, 0, ret, why);
		return;
	}
	if (s->w != NULL || s->pending != NULL) {
		fill_srv_reply_error(
			srv, s, r.id, -EBUSY,
			"one fill at a time per client: the previous one "
			"has not finished");
		return;
	}
	ret = fill_request_check(&r, s->regions, srv->scratch, why,
				 sizeof(why));
	if (ret != 0) {
		fill_srv_reply_error(srv, s, r.id, ret, why);
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
		fill_srv_reply_error(srv, s, r.id, -ENOMEM,
				     "server out of memory");
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
