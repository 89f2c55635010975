/* SPDX-License-Identifier: MIT */
/*
 * Small services on top of the library, used by the CLI and the tests:
 * a message box (one registered send and receive buffer), the HELLO
 * rendezvous that `tern ping` and `tern atomic` share, and the ping and
 * atomic clients and servers.
 */
#ifndef TERN_APP_H
#define TERN_APP_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>

/* --- message box ------------------------------------------------------- */

#define TERN_MSGBOX_MAX 8192

/* One registered buffer pair for control messages on a ctx. */
struct tern_msgbox {
	struct tern_ctx *ctx;
	struct tern_mr *mr;
	uint8_t *sbuf;
	uint8_t *rbuf;
	struct tern_req sreq;
	struct tern_req rreq;
	int recv_posted;
};

int tern_msgbox_open(struct tern_ctx *ctx, struct tern_msgbox *mb);
void tern_msgbox_close(struct tern_msgbox *mb);
/* Send @len bytes of mb->sbuf to @peer and wait for the send. */
int tern_msgbox_send(struct tern_msgbox *mb, struct tern_peer *peer, size_t len,
		     int timeout_ms);
/* Wait for the next message into mb->rbuf. @return its length. */
ssize_t tern_msgbox_recv(struct tern_msgbox *mb, int timeout_ms);

/* --- HELLO rendezvous ---------------------------------------------------- */

#define TERN_HELLO_MAGIC   0x4c485254u /* "TRHL" */
#define TERN_HELLO_VERSION 1
#define TERN_HELLO_PARAMS  1024

enum tern_hello_kind {
	TERN_HELLO_PING = 1,
	TERN_HELLO_ATOMIC = 2,
	TERN_HELLO_ACK = 3,
	TERN_HELLO_ERROR = 4, /* params: a reason, printable text */
	TERN_HELLO_BYE = 5,
	TERN_HELLO_BENCH = 6, /* params: bench parameters */
	TERN_HELLO_KIND_MAX = TERN_HELLO_BENCH,
};

struct tern_hello {
	uint16_t kind;
	const uint8_t *card; /* may be empty */
	size_t card_len;
	int has_desc;
	struct tern_mr_desc desc;
	const uint8_t *params;
	size_t params_len;
};

/*
 * Wire (little-endian): u32 magic "TRHL", u16 version, u16 kind, u32 total
 * length, u16 card_len, u16 desc_len, u32 params_len, then card, packed MR
 * descriptor, params. Every length is checked against what arrived.
 */
ssize_t tern_hello_encode(void *buf, size_t cap, const struct tern_hello *h);
int tern_hello_decode(const void *buf, size_t len, struct tern_hello *h);

/* --- ping ------------------------------------------------------------------
 */

enum tern_ping_mode {
	TERN_PING_SEND = 1,  /* send/recv ping-pong */
	TERN_PING_WRITE = 2, /* write-with-immediate ping-pong */
};

#define TERN_PING_MAX_SIZES 64
#define TERN_PING_MAX_SIZE  (16u << 20)
#define TERN_PING_MAX_ITERS 10000000u

struct tern_ping_params {
	uint32_t mode;
	uint32_t iters;
	uint32_t warmup;
	uint32_t nsizes;
	uint32_t sizes[TERN_PING_MAX_SIZES];
};

/* Encode/decode/check ping parameters (a HELLO's params). */
ssize_t tern_ping_params_encode(const struct tern_ping_params *p, void *buf,
				size_t cap);
int tern_ping_params_decode(const void *buf, size_t len,
			    struct tern_ping_params *p, char *why,
			    size_t whylen);

struct tern_ping_result {
	uint32_t size;
	uint32_t iters;
	double min_us, p50_us, p99_us, p999_us, max_us; /* half round trip */
	double rate; /* round trips per second */
	double mbps; /* payload Mbit/s one way (10^6) */
};

/* Run the ping-pong against a ping server; results[i] per size. When
 * *stop is set (Ctrl-C; @stop may be NULL) or a round trip fails, it
 * returns -EINTR or the error, with results[] filled for the round trips
 * done so far (results[i].iters < p->iters; 0 for sizes not reached). */
int tern_ping_client(struct tern_ctx *ctx, const void *card, size_t card_len,
		     const struct tern_ping_params *p,
		     volatile sig_atomic_t *stop,
		     struct tern_ping_result *results, char *why,
		     size_t whylen);

/* Serve ping clients, one at a time, until *stop. */
int tern_ping_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		     FILE *log);

/* --- atomic -------------------------------------------------------------- */

/* Words in the server's atomic page. */
#define TERN_ATOMIC_COUNTER 0
#define TERN_ATOMIC_LOCK    8
#define TERN_ATOMIC_HOLDERS 16

/* Serve the atomic page until *stop; prints the counter on exit. */
int tern_atomic_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		       FILE *log, uint64_t *final_counter);

/* Ask an atomic server for its page's descriptor. */
int tern_atomic_hello(struct tern_ctx *ctx, const void *card, size_t card_len,
		      struct tern_peer **peer_p, struct tern_mr_desc *desc,
		      char *why, size_t whylen);

/* Tell the server this client is done (it forgets the peer). */
int tern_atomic_bye(struct tern_ctx *ctx, struct tern_peer *peer);

#endif /* TERN_APP_H */
