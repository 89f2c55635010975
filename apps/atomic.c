/* SPDX-License-Identifier: MIT */
/*
 * tern atomic: a server exposes one page of 64-bit words (a counter, a lock
 * word, a holders count) for remote atomics; clients learn its descriptor
 * with a HELLO and then work on it with fetch-add and compare-and-swap:
 * fetch-adds whose old values must each come once, and a lock no two
 * clients ever hold together. The CLI (tools/cmd_ping.c) spawns the
 * client processes and prints.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/app.h"
#include "core/core.h"

#define PAGE	    4096
#define MAX_CLIENTS 256

struct client {
	struct tern_peer *peer;
	uint8_t card[TERN_CARD_MAX];
	size_t card_len;
	uint64_t seen; /* order of arrival, to evict the oldest */
};

static uint64_t client_clock;

static int client_find(struct client *cl, const uint8_t *card, size_t len)
{
	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (cl[i].peer != NULL && cl[i].card_len == len &&
		    memcmp(cl[i].card, card, len) == 0)
			return i;
	}
	return -1;
}

static void client_drop(struct client *c)
{
	tern_peer_remove(c->peer);
	c->peer = NULL;
}

/* Add a client, evicting the oldest when all slots are taken. */
static int client_add(struct tern_ctx *ctx, struct client *cl,
		      const uint8_t *card, size_t len)
{
	int slot = 0, ret;

	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (cl[i].peer == NULL) {
			slot = i;
			break;
		}
		if (cl[i].seen < cl[slot].seen)
			slot = i;
	}
	if (len > TERN_CARD_MAX)
		return -TERN_ECARD;
	if (cl[slot].peer != NULL)
		client_drop(&cl[slot]);
	ret = tern_peer_add(ctx, card, len, &cl[slot].peer);
	if (ret != 0)
		return ret;
	memcpy(cl[slot].card, card, len);
	cl[slot].card_len = len;
	cl[slot].seen = ++client_clock;
	return slot;
}

/* The idle loop's 1 ms wake-up: progress runs after it, nothing else. */
static void tick_cb(struct tern_timer *t)
{
	(void)t;
}

int app_atomic_server(struct tern_ctx *ctx, volatile sig_atomic_t *stop,
		      FILE *log, uint64_t *final_counter)
{
	struct client *cl = calloc(MAX_CLIENTS, sizeof(*cl));
	struct app_msgbox mb;
	struct tern_mr *mr = NULL;
	uint64_t *page = NULL, clients = 0;
	struct tern_timer tick;
	int ret;

	if (cl == NULL)
		return -ENOMEM;
	/* Peers' atomics need this side's progress and give it no
	 * completions: never let an idle loop sleep long. Without a wait fd
	 * (shm) the poll cap does it; with one (tcp;ofi_rxm) a 1 ms timer,
	 * since libfabric 2.1's rxm wakes no wait fd for a peer's atomic:
	 * clients then timed out in 1 run of 3 (atomic_tcp on Debian 13). */
	tern_ctx_set_poll_max(ctx, 50);
	tern_timer_init(&tick, tick_cb, NULL);
	ret = app_msgbox_open(ctx, &mb);
	if (ret != 0) {
		free(cl);
		return ret;
	}
	if (posix_memalign((void **)&page, PAGE, PAGE) != 0) {
		ret = -ENOMEM;
		goto out;
	}
	memset(page, 0, PAGE);
	ret = tern_mr_reg(ctx, page, PAGE, TERN_ACCESS_REMOTE_ATOMIC, &mr);
	if (ret != 0)
		goto out;
	tern_timer_start(ctx, &tick, 1, 1);
	while (!*stop) {
		struct app_hello h, ack = { .kind = APP_HELLO_ACK };
		ssize_t n = app_msgbox_recv(&mb, 200);
		int slot;

		if (n == -ETIMEDOUT)
			continue;
		if (n < 0 || app_hello_decode(mb.rbuf, (size_t)n, &h) != 0 ||
		    (h.kind != APP_HELLO_ATOMIC && h.kind != APP_HELLO_BYE)) {
			fprintf(log, "atomic: dropped a message that is not an "
				     "atomic HELLO or BYE\n");
			continue;
		}
		/* Clients stay peers until they say goodbye: removing one
		 * while its atomics are in flight would lose them. */
		slot = client_find(cl, h.card, h.card_len);
		if (h.kind == APP_HELLO_BYE) {
			if (slot >= 0)
				client_drop(&cl[slot]);
			continue;
		}
		if (slot < 0)
			slot = client_add(ctx, cl, h.card, h.card_len);
		if (slot < 0) {
			fprintf(log, "atomic: dropped a HELLO: %s\n",
				tern_strerror(slot));
			continue;
		}
		ack.has_desc = 1;
		tern_mr_desc(mr, &ack.desc);
		n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &ack);
		if (n > 0 &&
		    app_msgbox_send(&mb, cl[slot].peer, (size_t)n, 5000) == 0)
			clients++;
		/* The page is the target's own memory: read it directly. */
		if (clients % 16 == 1)
			fprintf(log,
				"atomic: %" PRIu64 " client(s) so far, "
				"counter %" PRIu64 "\n",
				clients, page[APP_ATOMIC_COUNTER / 8]);
		fflush(log);
	}
	fprintf(log,
		"atomic: served %" PRIu64 " client(s); counter %" PRIu64
		", lock word %" PRIu64 "\n",
		clients, page[APP_ATOMIC_COUNTER / 8],
		page[APP_ATOMIC_LOCK / 8]);
	*final_counter = page[APP_ATOMIC_COUNTER / 8];
out:
	tern_timer_stop(&tick);
	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (cl[i].peer != NULL)
			client_drop(&cl[i]);
	}
	free(cl);
	tern_mr_close(mr);
	free(page);
	app_msgbox_close(&mb);
	return ret;
}

int app_atomic_bye(struct tern_ctx *ctx, struct tern_peer *peer)
{
	uint8_t mycard[TERN_CARD_MAX];
	struct app_hello h = { .kind = APP_HELLO_BYE };
	struct app_msgbox mb;
	ssize_t n;
	int ret = app_msgbox_open(ctx, &mb);

	if (ret != 0)
		return ret;
	h.card = mycard;
	h.card_len = (size_t)tern_ctx_card(ctx, mycard, sizeof(mycard));
	n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &h);
	ret = n < 0 ? (int)n : app_msgbox_send(&mb, peer, (size_t)n, 5000);
	app_msgbox_close(&mb);
	return ret;
}

int app_atomic_hello(struct tern_ctx *ctx, const void *card, size_t card_len,
		     struct tern_peer **peer_p, struct tern_mr_desc *desc,
		     char *why, size_t whylen)
{
	uint8_t mycard[TERN_CARD_MAX];
	struct app_hello h = { .kind = APP_HELLO_ATOMIC }, ack;
	struct tern_peer *peer = NULL;
	struct app_msgbox mb;
	ssize_t n;
	int ret;

	ret = app_msgbox_open(ctx, &mb);
	if (ret != 0)
		return ret;
	ret = tern_peer_add(ctx, card, card_len, &peer);
	if (ret != 0) {
		snprintf(why, whylen, "server card unusable: %s",
			 tern_strerror(ret));
		goto out;
	}
	h.card = mycard;
	h.card_len = (size_t)tern_ctx_card(ctx, mycard, sizeof(mycard));
	n = app_hello_encode(mb.sbuf, APP_MSGBOX_MAX, &h);
	ret = n < 0 ? (int)n : app_msgbox_send(&mb, peer, (size_t)n, 5000);
	if (ret == 0) {
		n = app_msgbox_recv(&mb, 10000);
		ret = n < 0 ? (int)n : 0;
	}
	if (ret != 0) {
		snprintf(why, whylen, "no answer from the atomic server: %s",
			 tern_strerror(ret));
		goto out;
	}
	ret = app_hello_decode(mb.rbuf, (size_t)n, &ack);
	if (ret != 0 || ack.kind != APP_HELLO_ACK || !ack.has_desc) {
		snprintf(why, whylen, "unexpected answer from the server");
		ret = -TERN_EPROTO;
		goto out;
	}
	*desc = ack.desc;
	*peer_p = peer;
	peer = NULL;
out:
	tern_peer_remove(peer);
	app_msgbox_close(&mb);
	return ret;
}

/* --- the client's work ------------------------------------------------- */

/* The first error of @c, in words. */
static void client_fail(struct app_atomic_client *c, int err, const char *fmt,
			...) __attribute__((format(printf, 3, 4)));
static void client_fail(struct app_atomic_client *c, int err, const char *fmt,
			...)
{
	va_list ap;

	if (c->err != 0)
		return;
	c->err = err;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

/* A request that timed out is still the provider's: never freed nor
 * reused, kept reachable (tern__keep). */
static void req_lost(struct tern_req *req)
{
	tern__keep(req);
}

uint64_t app_atomic_op(struct app_atomic_client *c, int cas, uint64_t off,
		       uint64_t a, uint64_t b)
{
	struct tern_req *req;
	uint64_t value;
	int ret;

	if (c->lost || c->err != 0) {
		client_fail(c, -ETIMEDOUT, "an earlier atomic never completed");
		return 0;
	}
	req = malloc(sizeof(*req));
	if (req == NULL) {
		client_fail(c, -ENOMEM, "out of memory");
		return 0;
	}
	tern_req_init(req, NULL, NULL);
	ret = cas ? tern_atomic_cswap(c->peer, &c->desc, off, a, b, req)
		  : tern_atomic_fetch_add(c->peer, &c->desc, off, a, req);
	if (ret == 0)
		ret = tern_wait(c->ctx, req, 10000);
	if (ret == -ETIMEDOUT) {
		c->lost = 1;
		req_lost(req);
		client_fail(c, ret, "%s: %s",
			    cas ? "compare-swap" : "fetch-add",
			    tern_strerror(ret));
		return 0;
	}
	if (ret == 0)
		ret = req->status;
	if (ret != 0)
		client_fail(c, ret, "%s: %s%s%s",
			    cas ? "compare-swap" : "fetch-add",
			    tern_strerror(ret), req->errmsg[0] ? ": " : "",
			    req->errmsg);
	value = req->value;
	free(req);
	return value;
}

#define WORK_WINDOW 16

int app_atomic_work(struct app_atomic_client *c, uint64_t reps,
		    volatile sig_atomic_t *stop, uint64_t *old)
{
	struct tern_req *req = calloc(WORK_WINDOW, sizeof(*req));
	uint64_t posted = 0, done = 0, rounds = reps / 10 ? reps / 10 : 1;
	uint64_t id = (uint64_t)getpid();
	int err = 0;

	if (req == NULL)
		return -ENOMEM;
	while (done < reps && err == 0) {
		/* Ctrl-C: post no more; what is in flight completes below. */
		if (*stop) {
			err = -EINTR;
			break;
		}
		while (posted < reps && posted - done < WORK_WINDOW) {
			tern_req_init(&req[posted % WORK_WINDOW], NULL, NULL);
			err = tern_atomic_fetch_add(c->peer, &c->desc,
						    APP_ATOMIC_COUNTER, 1,
						    &req[posted % WORK_WINDOW]);
			if (err != 0)
				break;
			posted++;
		}
		if (err == 0)
			err = tern_wait(c->ctx, &req[done % WORK_WINDOW],
					10000);
		if (err == 0)
			err = req[done % WORK_WINDOW].status;
		if (err != 0) {
			client_fail(c, err, "fetch-add: %s %s",
				    tern_strerror(err),
				    req[done % WORK_WINDOW].errmsg);
			break;
		}
		old[done] = req[done % WORK_WINDOW].value;
		done++;
	}
	/* Nothing stays in flight on these requests when we leave. */
	for (; done < posted; done++) {
		if (tern_wait(c->ctx, &req[done % WORK_WINDOW], 10000) != 0) {
			req_lost(req);
			return -ETIMEDOUT;
		}
	}
	free(req);
	if (err != 0)
		return err;
	for (uint64_t r = 0; r < rounds && c->err == 0 && !*stop; r++) {
		/* Take the lock, prove we are alone, give it back. */
		while (app_atomic_op(c, 1, APP_ATOMIC_LOCK, 0, id) != 0 &&
		       c->err == 0) {
			if (*stop) /* no lock taken: nothing to undo */
				return -EINTR;
		}
		if (c->err == 0 &&
		    app_atomic_op(c, 0, APP_ATOMIC_HOLDERS, 1, 0) != 0)
			client_fail(c, -TERN_EVERIFY,
				    "two holders of the lock");
		app_atomic_op(c, 0, APP_ATOMIC_HOLDERS, UINT64_MAX, 0);
		if (c->err == 0 &&
		    app_atomic_op(c, 1, APP_ATOMIC_LOCK, id, 0) != id)
			client_fail(c, -TERN_EVERIFY, "lock stolen");
	}
	if (*stop)
		return -EINTR;
	return c->err;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int app_atomic_check(uint64_t *old, uint64_t n, uint64_t before, char *why,
		     size_t whylen)
{
	qsort(old, n, sizeof(*old), cmp_u64);
	for (uint64_t i = 0; i < n; i++) {
		if (old[i] != before + i) {
			snprintf(why, whylen,
				 "old values are not each of %" PRIu64
				 "..%" PRIu64 " once",
				 before, before + n - 1);
			return -TERN_EVERIFY;
		}
	}
	return 0;
}
