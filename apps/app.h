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

#define APP_MSGBOX_MAX 8192

/* One registered buffer pair for control messages on a ctx. */
struct app_msgbox {
	struct tern_ctx *ctx;
	struct tern_mr *mr;
	uint8_t *sbuf;
	uint8_t *rbuf;
	struct tern_req sreq;
	struct tern_req rreq;
	int recv_posted;
};

int app_msgbox_open(struct tern_ctx *ctx, struct app_msgbox *mb);
void app_msgbox_close(struct app_msgbox *mb);
/* Send @len bytes of mb->sbuf to @peer and wait for the send. */
int app_msgbox_send(struct app_msgbox *mb, struct tern_peer *peer, size_t len,
		    int timeout_ms);
/* Wait for the next message into mb->rbuf. @return its length. */
ssize_t app_msgbox_recv(struct app_msgbox *mb, int timeout_ms);

/* --- HELLO rendezvous ---------------------------------------------------- */

#define APP_HELLO_MAGIC	  0x4c485254u /* "TRHL" */
#define APP_HELLO_VERSION 1
#define APP_HELLO_PARAMS  1024

enum app_hello_kind {
	APP_HELLO_PING = 1,
	APP_HELLO_ATOMIC = 2,
	APP_HELLO_ACK = 3,
	APP_HELLO_ERROR = 4, /* params: a reason, printable text */
	APP_HELLO_BYE = 5,
	APP_HELLO_BENCH = 6, /* params: bench parameters */
	APP_HELLO_KIND_MAX = APP_HELLO_BENCH,
};

struct app_hello {
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
ssize_t app_hello_encode(void *buf, size_t cap, const struct app_hello *h);
int app_hello_decode(const void *buf, size_t len, struct app_hello *h);

/* --- ping ------------------------------------------------------------------
 */

enum app_ping_mode {
	APP_PING_SEND = 1,  /* send/recv ping-pong */
	APP_PING_WRITE = 2, /* write-with-immediate ping-pong */
};

#define APP_PING_MAX_SIZES 64
#define APP_PING_MAX_SIZE  (16u << 20)
#define APP_PING_MAX_ITERS 10000000u

struct app_ping_params {
	uint32_t mode;
	uint32_t iters;
	uint32_t warmup;
	uint32_t nsizes;
	uint32_t sizes[APP_PING_MAX_SIZES];
};

/* Encode/decode/check ping parameters (a HELLO's params). */
ssize_t app_ping_params_encode(const struct app_ping_params *p, void *buf,
			       size_t cap);
int app_ping_params_decode(const void *buf, size_t len,
			   struct app_ping_params *p, char *why, size_t whylen);

struct app_ping_result {
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
int app_ping_client(struct tern_ctx *ctx, const void *card, size_t card_len,
		    const struct app_ping_params *p,
		    volatile sig_atomic_t *stop,
		    struct app_ping_result *results, char *why, size_t whylen);

/* Serve ping clients, one at a time, until *stop. */
int app_ping_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		    FILE *log);

/* --- atomic -------------------------------------------------------------- */

/* Words in the server's atomic page. */
#define APP_ATOMIC_COUNTER 0
#define APP_ATOMIC_LOCK	   8
#define APP_ATOMIC_HOLDERS 16

/* Serve the atomic page until *stop; prints the counter on exit. */
int app_atomic_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		      FILE *log, uint64_t *final_counter);

/* Ask an atomic server for its page's descriptor. */
int app_atomic_hello(struct tern_ctx *ctx, const void *card, size_t card_len,
		     struct tern_peer **peer_p, struct tern_mr_desc *desc,
		     char *why, size_t whylen);

/* Tell the server this client is done (it forgets the peer). */
int app_atomic_bye(struct tern_ctx *ctx, struct tern_peer *peer);

/* A client of the server's page: one ctx, its peer, the page's descriptor;
 * the first error (0 while none) and what it was. */
struct app_atomic_client {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	struct tern_mr_desc desc;
	int lost; /* one timed out: the provider's, no more go */
	int err;
	char why[256];
};

/* One fetch-add (@cas 0: add @a) or compare-swap (@cas 1: @a compare, @b
 * swap) at @off of the page, waited for (10 s): the old value, or 0 with
 * c->err set. */
uint64_t app_atomic_op(struct app_atomic_client *c, int cas, uint64_t off,
		       uint64_t a, uint64_t b);

/* A worker's run: @reps fetch-adds of the counter, 16 in flight, their old
 * values into @old, then reps/10 rounds of taking the lock, proving no
 * other holder, giving it back. 0, -EINTR (*stop), -TERN_EVERIFY or the
 * error (c->why says it). */
int app_atomic_work(struct app_atomic_client *c, uint64_t reps,
		    volatile sig_atomic_t *stop, uint64_t *old);

/* Every worker's old values (@n in all, sorted here) are each of
 * before..before+n-1 once: 0, or -TERN_EVERIFY with @why. */
int app_atomic_check(uint64_t *old, uint64_t n, uint64_t before, char *why,
		     size_t whylen);

#endif /* TERN_APP_H */
