/* SPDX-License-Identifier: MIT */
/*
 * What the parts of the random-fill server share (apps/fill/server*.c):
 * its state, sessions, replies and writers, and the steps one part calls
 * in another. Private to apps/fill/server*.c.
 */
#ifndef FILL_SERVER_INT_H
#define FILL_SERVER_INT_H

#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
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

static inline int replies_busy(const struct session *s)
{
	for (int i = 0; i < SESS_REPLIES; i++) {
		if (s->tx[i].busy)
			return 1;
	}
	return 0;
}

/* A closing session's slot is free once nothing of it is in flight. */
static inline void session_settle(struct session *s)
{
	if (s->state == S_CLOSING && !replies_busy(s) && s->w == NULL)
		s->state = S_FREE;
}

static inline struct reply *sess_reply(struct session *s)
{
	for (int i = 0; i < SESS_REPLIES; i++) {
		if (!s->tx[i].busy)
			return &s->tx[i];
	}
	return NULL;
}

static inline void idle_restart(struct fill_server *srv, struct session *s)
{
	tern_timer_start(srv->ctx, &s->idle,
			 (uint64_t)srv->opts.idle_timeout_ms, 0);
}

/* apps/fill/server_session.c: replies, sessions and CONNECT */
/* Send @len bytes already in r->buf (a negative @len: the encoder's
 * error, counted as dropped). @return 0 or the post's error. */
int fill_srv_reply_send(struct fill_server *srv, struct reply *r,
			struct tern_peer *peer, ssize_t len);
/* Refuse with an ERROR to session @s, or to a sender without one (through
 * a short-lived peer from the card in @msg). */
void fill_srv_reply_error(struct fill_server *srv, struct session *s,
			  uint32_t id, int code, const char *text);
void fill_srv_reply_error_card(struct fill_server *srv, const void *msg,
			       size_t len, int code, const char *text);
/* The live session of @id, or NULL. */
struct session *fill_srv_session_find(struct fill_server *srv, uint64_t id);
/* Take @s out of the FIFO of fills waiting for a writer. */
void fill_srv_queue_remove(struct fill_server *srv, struct session *s);
/* End live session @s: its queued sends cancelled, its writer forgotten. */
void fill_srv_session_end(struct fill_server *srv, struct session *s,
			  const char *why);
void fill_srv_idle_expired(struct tern_timer *t);
void fill_srv_on_connect(struct fill_server *srv, const uint8_t *msg,
			 size_t len);

/* apps/fill/server_fill.c: fills and their writers */
void fill_srv_on_fill(struct fill_server *srv, struct session *s,
		      const uint8_t *msg, size_t len);
/* A writer's fill timer: its client takes no writes; drop it. */
void fill_srv_stalled(struct tern_timer *t);

#endif /* FILL_SERVER_INT_H */
