/* SPDX-License-Identifier: MIT */
/*
 * The random-fill service (seed 000, made correct): a server that fills a
 * client's pages from MT19937-64 with RDMA writes carrying immediates, and
 * a client that counts the immediates and verifies every byte.
 */
#ifndef FILL_H
#define FILL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>

#include "apps/fill/proto.h"

struct fill_server;

struct fill_server_opts {
	int once;		/* exit after the first session ends */
	int idle_timeout_ms;	/* drop sessions idle this long; 0 = 120 s */
	int fill_timeout_ms;	/* drop a client whose fill stalls; 0 = 60 s */
	int max_sessions;	/* clients connected at once; 0 = 256 */
	int parallel;		/* fills written at once; 0 = 4 */
	FILE *log;		/* one line per event, or NULL */
	const char *log_prefix; /* put before each line, or NULL */
	/* Admission: a CONNECT's card and ticket (NULL, 0 without one) go
	 * to admit(), which says whether they match a bootstrap handshake
	 * (and claims it). With admit_required (a token server) a CONNECT
	 * it says no to is refused; without, it only claims. */
	int (*admit)(void *data, const void *card, size_t len,
		     const void *ticket, size_t ticket_len);
	void *admit_data;
	int admit_required;
	int max_per_client; /* sessions of one client card; 0 = 4 */
};

struct fill_server_stats {
	uint64_t sessions;
	uint64_t fills;
	uint64_t refused;
	uint64_t dropped; /* messages that could not be answered */
	uint64_t bytes;
	uint64_t write_ns;
	uint64_t queued;      /* fills that waited for a free writer */
	uint64_t peak_active; /* most sessions connected at once */
	uint64_t stalled;     /* fills abandoned after fill_timeout_ms */
	uint64_t failed;      /* fills whose writes failed */
	uint64_t active;      /* sessions connected now */
	uint64_t expired;     /* sessions ended after idle_timeout_ms */
};

int fill_server_open(struct tern_ctx *ctx, const struct fill_server_opts *opts,
		     struct fill_server **srv_p);
/* Serve until *stop becomes non-zero (or, with once, a session ends). */
int fill_server_run(struct fill_server *srv, volatile sig_atomic_t *stop);
void fill_server_stats(const struct fill_server *srv,
		       struct fill_server_stats *st);
int fill_server_close(struct fill_server *srv);
/* End every session of the client with this card (its bootstrap
 * connection closed): its queued writes are cancelled, its state freed.
 * @return the number of sessions ended. */
int fill_server_peer_gone(struct fill_server *srv, const void *card, size_t len,
			  const char *why);

/* A client's session with a server. */
struct fill_conn;

struct fill_params {
	uint32_t page_size;
	uint32_t pages;
	uint64_t seed;
	uint32_t id;	/* request id = immediate; 0 picks one */
	int timeout_ms; /* for the whole fill; 0 = 30 s */
};

struct fill_report {
	uint32_t id;
	uint64_t bytes;
	uint64_t elapsed_ns; /* request sent to last immediate counted */
	uint64_t verified;   /* bytes checked equal to the expected stream */
	uint64_t untouched;  /* bytes outside the pages, checked unchanged */
	uint64_t server_write_ns;
	char error[256]; /* why it failed, for the user */
};

/* Regions of 16 MiB each, as in seed 000. */
#define FILL_REGION_SIZE (16u << 20)

/* Register the regions, CONNECT and wait for ACCEPT (or ERROR). */
int fill_conn_open(struct tern_ctx *ctx, const void *card, size_t card_len,
		   int timeout_ms, struct fill_conn **conn_p, char *why,
		   size_t whylen);
/* The same, handing back a bootstrap WELCOME's ticket (@ticket_len 0 or
 * FILL_TICKET_LEN): a --token server admits only CONNECTs with one. */
int fill_conn_open_ticket(struct tern_ctx *ctx, const void *card,
			  size_t card_len, const void *ticket,
			  size_t ticket_len, int timeout_ms,
			  struct fill_conn **conn_p, char *why, size_t whylen);
/* One verified fill. @return 0, or an error with report->error set. */
int fill_conn_fill(struct fill_conn *conn, const struct fill_params *p,
		   struct fill_report *report);
/* Watch @fd (a bootstrap connection, still the caller's to close after
 * fill_conn_close) as a liveness channel: once it closes, waits of
 * this connection end with -TERN_EPEERGONE instead of running out their
 * timeouts. */
int fill_conn_watch(struct fill_conn *conn, int fd);
/* Send raw bytes as a message (for tests of hostile clients). */
int fill_conn_send_raw(struct fill_conn *conn, const void *buf, size_t len);
/* Wait for the next message; copies it into buf. @return its length. */
ssize_t fill_conn_recv_raw(struct fill_conn *conn, void *buf, size_t len,
			   int timeout_ms);
uint64_t fill_conn_session(const struct fill_conn *conn);
const struct tern_mr_desc *fill_conn_regions(const struct fill_conn *conn);
/* Check that no byte of the regions changed since open (or last fill). */
int fill_conn_check_untouched(struct fill_conn *conn, uint64_t *bytes_p);
/* Send BYE and release everything. */
int fill_conn_close(struct fill_conn *conn);

#endif /* FILL_H */
