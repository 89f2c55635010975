/* SPDX-License-Identifier: MIT */
/*
 * Random-fill client: two 16 MiB regions open to remote writes only, a
 * CONNECT/ACCEPT handshake, then fills that are complete only when every
 * immediate has been counted (delivery is unordered) and every byte checks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "core/core.h"
#include "apps/fill/fill.h"

#define CANARY	     0xa5
#define REGION_ALIGN 128

struct fill_conn {
	struct tern_ctx *ctx;
	struct tern_peer *peer;
	uint8_t *region[FILL_REGIONS];
	struct tern_mr *rmr[FILL_REGIONS];
	struct tern_mr_desc rdesc[FILL_REGIONS];
	uint8_t *msg; /* [send | receive], FILL_MSG_MAX each */
	struct tern_mr *msgmr;
	struct tern_req sreq;
	struct tern_req rreq;
	struct tern_req ireq; /* the pending immediate expectation */
	int recv_posted;
	uint64_t imm_done_ns;
	uint64_t session;
	uint32_t next_id;
	int broken; /* a fill timed out or failed midway: replies may be off */
	struct fill_accept limits;
	struct tern_io live; /* the bootstrap socket, when watched */
	int gone;	     /* ... and it closed */
	char gone_why[96];
};

#define SBUF(c) ((c)->msg)
#define RBUF(c) ((c)->msg + FILL_MSG_MAX)

uint64_t fill_conn_session(const struct fill_conn *conn)
{
	return conn->session;
}

const struct tern_mr_desc *fill_conn_regions(const struct fill_conn *conn)
{
	return conn->rdesc;
}

static void live_io(struct tern_io *io, unsigned int events)
{
	struct fill_conn *c = io->data;
	char junk[64];
	ssize_t k = recv(io->fd, junk, sizeof(junk), MSG_DONTWAIT);

	(void)events;
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0)
		snprintf(c->gone_why, sizeof(c->gone_why),
			 "bootstrap connection lost (%s)%s", strerror(errno),
			 errno == ETIMEDOUT ? ": the server's host stopped "
					      "answering"
					    : "");
	else
		snprintf(c->gone_why, sizeof(c->gone_why), "%s",
			 k == 0 ? "the server closed its bootstrap connection "
				  "(it exited or was killed)"
				: "the server sent unexpected bytes on its "
				  "bootstrap connection");
	c->gone = 1;
	tern_io_stop(io);
}

int fill_conn_watch(struct fill_conn *conn, int fd)
{
	if (conn == NULL || fd < 0)
		return -EINVAL;
	return tern_io_start(conn->ctx, &conn->live, fd, TERN_IO_READ, live_io,
			     conn);
}

/* tern_wait that also ends, with -TERN_EPEERGONE, when the liveness
 * channel closes. */
static int wait_live(struct fill_conn *c, struct tern_req *req, int timeout_ms)
{
	uint64_t deadline = tern__now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	for (;;) {
		uint64_t now = tern__now_ns();
		int left = now >= deadline ? 0
					   : (int)((deadline - now) / 1000000);
		int ret;

		/* The server may have finished and exited: what it sent
		 * before going may still be in the queues. */
		if (c->gone)
			return tern_wait(c->ctx, req, 50) == 0
				       ? 0
				       : -TERN_EPEERGONE;
		if (!c->live._priv.active)
			return tern_wait(c->ctx, req, left);
		ret = tern_wait(c->ctx, req, TERN_MIN(left, 100));
		if (ret != -ETIMEDOUT || left <= 100)
			return c->gone && ret != 0 ? -TERN_EPEERGONE : ret;
	}
}

/* Send one message and wait up to timeout_ms for its completion. */
static int send_timed(struct fill_conn *conn, const void *buf, size_t len,
		      int timeout_ms)
{
	int ret;

	if (len > FILL_MSG_MAX)
		return -EMSGSIZE;
	if (!conn->sreq.done)
		return -EBUSY; /* an earlier send is still out */
	if (buf != SBUF(conn))
		memcpy(SBUF(conn), buf, len);
	tern_req_init(&conn->sreq, NULL, NULL);
	ret = tern_send(conn->peer, conn->msgmr, SBUF(conn), len, &conn->sreq);
	if (ret != 0)
		return ret;
	ret = wait_live(conn, &conn->sreq, timeout_ms);
	if (ret != 0) {
		/* The send stays with the provider: do not reuse its buffer. */
		return ret;
	}
	return conn->sreq.status;
}

int fill_conn_send_raw(struct fill_conn *conn, const void *buf, size_t len)
{
	return send_timed(conn, buf, len, 10000);
}

ssize_t fill_conn_recv_raw(struct fill_conn *conn, void *buf, size_t len,
			   int timeout_ms)
{
	int ret;

	if (!conn->recv_posted) {
		tern_req_init(&conn->rreq, NULL, NULL);
		ret = tern_recv(conn->ctx, conn->msgmr, RBUF(conn),
				FILL_MSG_MAX, &conn->rreq);
		if (ret != 0)
			return ret;
		conn->recv_posted = 1;
	}
	ret = wait_live(conn, &conn->rreq, timeout_ms);
	if (ret != 0)
		return ret;
	conn->recv_posted = 0;
	if (conn->rreq.status != 0)
		return conn->rreq.status;
	if (conn->rreq.len > len)
		return -TERN_ETRUNC;
	if (buf != RBUF(conn))
		memcpy(buf, RBUF(conn), conn->rreq.len);
	return (ssize_t)conn->rreq.len;
}

/* Describe an ERROR reply, or a message that should not be here. */
static int bad_reply(const uint8_t *msg, size_t len, char *why, size_t whylen)
{
	struct fill_error e;
	struct fill_hdr h;
	int ret = fill_hdr_parse(msg, len, &h);

	if (ret == 0 && h.type == FILL_ERROR &&
	    fill_error_decode(msg, len, &e) == 0) {
		snprintf(why, whylen, "server refused: %s (%s)", e.text,
			 tern_strerror(e.code));
		return -TERN_EREFUSED;
	}
	snprintf(why, whylen, "unexpected reply from server (%zu bytes)", len);
	return -TERN_EPROTO;
}

static void conn_free(struct fill_conn *c)
{
	tern_io_stop(&c->live);
	/* The server died: let the provider see its connections break
	 * before anything is closed (tern_ctx_settle). */
	if (c->gone)
		tern_ctx_settle(c->ctx, 300);
	/* A receive still posted must finish before its buffer goes. */
	if (c->recv_posted) {
		int cr = tern_req_cancel(c->ctx, &c->rreq);
		int wr = cr >= 0 ? tern_wait(c->ctx, &c->rreq, 2000) : 0;

		tern__debug("fill client: cancel receive: %d, wait %d, done %d",
			    cr, wr, c->rreq.done);
	}
	/* A cancelled request is tern's until its callback ran (from the
	 * progress pass a wait makes): only then may its memory go. */
	if (!c->ireq.done && tern_req_cancel(c->ctx, &c->ireq) >= 0)
		tern_wait(c->ctx, &c->ireq, 0);
	if (!c->sreq.done)
		tern_wait(c->ctx, &c->sreq, c->gone ? 200 : 2000);
	tern_peer_remove(c->peer);
	/* A send it cancelled completes from the next progress pass. */
	if (!c->sreq.done)
		tern_wait(c->ctx, &c->sreq, 0);
	if (!c->sreq.done || (c->recv_posted && !c->rreq.done)) {
		/* The provider still holds them: keep their memory. */
		tern__warn("fill client: operations still in flight at close; "
			   "keeping their buffers");
		return;
	}
	for (int i = 0; i < FILL_REGIONS; i++) {
		tern_mr_close(c->rmr[i]);
		free(c->region[i]);
	}
	tern_mr_close(c->msgmr);
	free(c->msg);
	free(c);
}

int fill_conn_open(struct tern_ctx *ctx, const void *card, size_t card_len,
		   int timeout_ms, struct fill_conn **conn_p, char *why,
		   size_t whylen)
{
	return fill_conn_open_ticket(ctx, card, card_len, NULL, 0, timeout_ms,
				     conn_p, why, whylen);
}

int fill_conn_open_ticket(struct tern_ctx *ctx, const void *card,
			  size_t card_len, const void *ticket,
			  size_t ticket_len, int timeout_ms,
			  struct fill_conn **conn_p, char *why, size_t whylen)
{
	uint8_t mycard[TERN_CARD_MAX];
	struct fill_conn *c;
	struct fill_hdr h;
	ssize_t n, mylen;
	uint64_t nonce;
	int ret;

	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->ctx = ctx;
	c->ireq.done = 1;
	c->sreq.done = 1;
	ret = -ENOMEM;
	if (posix_memalign((void **)&c->msg, REGION_ALIGN, 2 * FILL_MSG_MAX) !=
	    0) {
		snprintf(why, whylen, "out of memory");
		free(c);
		return ret;
	}
	for (int i = 0; i < FILL_REGIONS; i++) {
		if (posix_memalign((void **)&c->region[i], REGION_ALIGN,
				   FILL_REGION_SIZE) != 0) {
			snprintf(why, whylen, "out of memory");
			goto err;
		}
		memset(c->region[i], CANARY, FILL_REGION_SIZE);
		/* Remote write only: the server can write nothing else. */
		ret = tern_mr_reg(ctx, c->region[i], FILL_REGION_SIZE,
				  TERN_ACCESS_REMOTE_WRITE, &c->rmr[i]);
		if (ret != 0) {
			snprintf(why, whylen, "registering region %d: %s", i,
				 tern_strerror(ret));
			goto err;
		}
		tern_mr_desc(c->rmr[i], &c->rdesc[i]);
	}
	ret = tern_mr_reg(ctx, c->msg, 2 * FILL_MSG_MAX, TERN_ACCESS_LOCAL,
			  &c->msgmr);
	if (ret != 0) {
		snprintf(why, whylen, "registering message buffers: %s",
			 tern_strerror(ret));
		goto err;
	}
	ret = tern_peer_add(ctx, card, card_len, &c->peer);
	if (ret != 0) {
		snprintf(why, whylen, "server card unusable: %s",
			 tern_strerror(ret));
		goto err;
	}
	mylen = tern_ctx_card(ctx, mycard, sizeof(mycard));
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = tern__now_ns();
	n = fill_connect_encode_ticket(SBUF(c), FILL_MSG_MAX, nonce, mycard,
				       (size_t)mylen, c->rdesc, ticket,
				       ticket_len);
	ret = n < 0 ? (int)n : fill_conn_send_raw(c, SBUF(c), (size_t)n);
	if (ret != 0) {
		snprintf(why, whylen, "sending CONNECT: %s%s%s",
			 tern_strerror(ret), c->sreq.errmsg[0] ? ": " : "",
			 c->sreq.errmsg);
		goto err;
	}
	/* Messages of an earlier connection on this ctx (a late RESULT) may
	 * still arrive: skip what is not the answer to this CONNECT. */
	for (;;) {
		n = fill_conn_recv_raw(c, RBUF(c), FILL_MSG_MAX, timeout_ms);
		if (n < 0) {
			ret = (int)n;
			snprintf(why, whylen,
				 "no answer to CONNECT within %d ms: %s",
				 timeout_ms, tern_strerror(ret));
			goto err;
		}
		ret = fill_accept_decode(RBUF(c), (size_t)n, &c->limits);
		if (ret == 0 && c->limits.nonce == nonce)
			break;
		if (fill_hdr_parse(RBUF(c), (size_t)n, &h) == 0 &&
		    h.session != 0 && h.type != FILL_ACCEPT) {
			tern__info("fill client: skipping a stale message of "
				   "session %016llx",
				   (unsigned long long)h.session);
			continue;
		}
		ret = bad_reply(RBUF(c), (size_t)n, why, whylen);
		goto err;
	}
	fill_hdr_parse(RBUF(c), (size_t)n, &h);
	c->session = h.session;
	c->next_id = 1;
	*conn_p = c;
	return 0;

err:
	conn_free(c);
	return ret;
}

static void imm_done(struct tern_req *req)
{
	struct fill_conn *c = req->data;

	c->imm_done_ns = tern__now_ns();
}

/*
 * Pick @n distinct pages of @total, scattered: start + k*stride (mod total)
 * with gcd(stride, total) = 1 is a permutation, so no page repeats.
 */
static void pick_pages(uint32_t *idx, uint32_t n, uint64_t total, uint64_t seed)
{
	struct tern_mt64 rng;
	uint64_t start, stride, a, b;

	tern_mt64_seed(&rng, seed ^ 0x7465726e66696c6cULL);
	start = tern_mt64_next(&rng) % total;
	do {
		stride = 1 + tern_mt64_next(&rng) % total;
		for (a = stride, b = total; b != 0;) {
			uint64_t t = a % b;

			a = b;
			b = t;
		}
	} while (a != 1 && total > 1);
	for (uint32_t k = 0; k < n; k++)
		idx[k] = (uint32_t)((start + (uint64_t)k * stride) % total);
}

int fill_conn_check_untouched(struct fill_conn *conn, uint64_t *bytes_p)
{
	uint64_t n = 0;

	for (int r = 0; r < FILL_REGIONS; r++) {
		for (size_t i = 0; i < FILL_REGION_SIZE; i++, n++) {
			if (conn->region[r][i] != CANARY)
				return -TERN_EVERIFY;
		}
	}
	*bytes_p = n;
	return 0;
}

/* Compare every page, then restore it to the canary. */
static int verify(struct fill_conn *c, const struct fill_params *p,
		  const uint32_t *idx, struct fill_report *rep)
{
	uint64_t bytes = (uint64_t)p->page_size * p->pages;
	struct tern_mt64 rng;
	uint8_t *expect;
	int ret = 0;

	expect = malloc(bytes);
	if (expect == NULL) {
		snprintf(rep->error, sizeof(rep->error), "out of memory");
		return -ENOMEM;
	}
	tern_mt64_seed(&rng, p->seed);
	tern_mt64_fill(&rng, expect, bytes);
	for (uint32_t k = 0; k < p->pages; k++) {
		const uint8_t *want = expect + (uint64_t)k * p->page_size;
		unsigned int r;
		uint64_t off;
		uint8_t *got;

		fill_page_target(c->rdesc, p->page_size, idx[k], &r, &off);
		got = c->region[r] + off;
		if (ret == 0 && memcmp(got, want, p->page_size) != 0) {
			size_t i = 0;

			while (got[i] == want[i])
				i++;
			snprintf(rep->error, sizeof(rep->error),
				 "page %u (index %u): byte %zu is 0x%02x, "
				 "expected 0x%02x",
				 k, idx[k], i, got[i], want[i]);
			ret = -TERN_EVERIFY;
		}
		if (ret == 0)
			rep->verified += p->page_size;
		memset(got, CANARY, p->page_size);
	}
	free(expect);
	if (ret == 0 && fill_conn_check_untouched(c, &rep->untouched) != 0) {
		snprintf(rep->error, sizeof(rep->error),
			 "bytes outside the requested pages were written");
		ret = -TERN_EVERIFY;
	}
	if (ret == 0)
		rep->untouched -= rep->verified;
	return ret;
}

/* Whether fill @p can be asked on @c: the connection is sound, and the
 * pages fit its regions (*total_p of that size) and the server's limits.
 * @return 0, or an error with rep->error set. */
static int fill_check(const struct fill_conn *c, const struct fill_params *p,
		      uint64_t *total_p, struct fill_report *rep)
{
	uint64_t total;

	if (c->broken) {
		snprintf(rep->error, sizeof(rep->error),
			 "this connection failed earlier (a late reply could "
			 "be taken for the next one): reconnect");
		return -TERN_EPROTO;
	}
	total = fill_region_pages(c->rdesc[0].len, p->page_size) +
		fill_region_pages(c->rdesc[1].len, p->page_size);
	if (p->page_size == 0 || p->page_size > c->limits.max_page_size ||
	    p->pages == 0 || p->pages > c->limits.max_pages ||
	    p->pages > total ||
	    (uint64_t)p->page_size * p->pages > c->limits.max_bytes) {
		snprintf(rep->error, sizeof(rep->error),
			 "%u page(s) of %u bytes do not fit: the regions hold "
			 "%" PRIu64 " such pages; the server takes pages of "
			 "1..%u bytes, at most %u pages and %" PRIu64
			 " bytes per fill",
			 p->pages, p->page_size, total, c->limits.max_page_size,
			 c->limits.max_pages, c->limits.max_bytes);
		return -EINVAL;
	}
	*total_p = total;
	return 0;
}

/* Wait for fill @id, asked with a timeout of @timeout ms ending at
 * @deadline: done when every immediate is counted and the server's RESULT
 * is in; an ERROR ends it early. @return 0, or an error with rep->error
 * set. */
static int fill_wait(struct fill_conn *c, const struct fill_params *p,
		     uint32_t id, uint64_t deadline, int timeout,
		     struct fill_report *rep)
{
	struct fill_result res;
	int have_result = 0, ret;
	ssize_t n;

	while (!c->ireq.done || !have_result) {
		int left = (int)((deadline -
				  TERN_MIN(deadline, tern__now_ns())) /
				 1000000);

		/* Past the deadline, no further look: a wait that overslept
		 * it (a starved guest's timer) must not let a late fill pass
		 * for one that met it. */
		if (tern__now_ns() >= deadline)
			n = -ETIMEDOUT;
		else if (have_result)
			n = wait_live(c, &c->ireq, left);
		else
			n = fill_conn_recv_raw(c, RBUF(c), FILL_MSG_MAX, left);
		if (n == -ETIMEDOUT) {
			snprintf(rep->error, sizeof(rep->error),
				 "timed out after %d ms: %" PRIu64 " of %u "
				 "writes landed%s",
				 timeout,
				 c->ireq.done ? p->pages
					      : tern_imm_count(c->ctx, id),
				 p->pages,
				 have_result ? "" : ", no reply from server");
			return -ETIMEDOUT;
		}
		if (n < 0) {
			ret = (int)n;
			snprintf(rep->error, sizeof(rep->error), "%s",
				 tern_strerror(ret));
			return ret;
		}
		if (have_result)
			continue;
		if (fill_result_decode(RBUF(c), (size_t)n, &res) != 0 ||
		    res.id != id)
			return bad_reply(RBUF(c), (size_t)n, rep->error,
					 sizeof(rep->error));
		if (res.status != 0) {
			snprintf(rep->error, sizeof(rep->error),
				 "server's writes failed: %s",
				 tern_strerror(res.status));
			return res.status;
		}
		have_result = 1;
		rep->server_write_ns = res.write_ns;
	}
	return 0;
}

/* Fill @id failed midway with @ret. @return the error to report. */
static int fill_abandon(struct fill_conn *c, const struct fill_params *p,
			uint32_t id, int ret, struct fill_report *rep)
{
	/* Unless the server refused (it wrote nothing and answered), writes
	 * or replies of this fill may still arrive: never reuse the
	 * connection for another fill. */
	c->broken = ret != -TERN_EREFUSED;
	if (c->gone) {
		snprintf(rep->error, sizeof(rep->error),
			 "peer gone: %s; %" PRIu64 " of %u writes had landed",
			 c->gone_why,
			 c->ireq.done ? p->pages : tern_imm_count(c->ctx, id),
			 p->pages);
		ret = -TERN_EPEERGONE;
	}
	/* Completed from the next progress pass: wait for it before the
	 * request is used for the next fill. */
	if (tern_req_cancel(c->ctx, &c->ireq) >= 0)
		tern_wait(c->ctx, &c->ireq, 0);
	/* Pages may have been written: restore the canary everywhere. */
	for (int i = 0; i < FILL_REGIONS; i++)
		memset(c->region[i], CANARY, FILL_REGION_SIZE);
	return ret;
}

int fill_conn_fill(struct fill_conn *c, const struct fill_params *p,
		   struct fill_report *rep)
{
	struct fill_request r;
	uint64_t total, t0;
	int timeout = p->timeout_ms > 0 ? p->timeout_ms : 30000;
	uint32_t *idx;
	ssize_t n;
	int ret;

	memset(rep, 0, sizeof(*rep));
	ret = fill_check(c, p, &total, rep);
	if (ret != 0)
		return ret;
	idx = malloc(sizeof(*idx) * p->pages);
	if (idx == NULL)
		return -ENOMEM;
	pick_pages(idx, p->pages, total, p->seed);
	r = (struct fill_request){
		.id = p->id ? p->id : c->next_id++,
		.page_size = p->page_size,
		.seed = p->seed,
		.page_count = p->pages,
	};
	rep->id = r.id;
	rep->bytes = (uint64_t)p->page_size * p->pages;

	/* Expect before asking, so no immediate can be missed. */
	tern_req_init(&c->ireq, imm_done, c);
	ret = tern_imm_expect(c->ctx, r.id, p->pages, &c->ireq);
	if (ret != 0) {
		snprintf(rep->error, sizeof(rep->error), "imm expect: %s",
			 tern_strerror(ret));
		goto out;
	}
	n = fill_request_encode(SBUF(c), FILL_MSG_MAX, c->session, &r, idx);
	t0 = tern__now_ns();
	/* The fill's timeout covers sending the request too: a send
	 * completion that comes late (rxe under load reports it after the
	 * server's writes and reply) must not let a fill past its deadline
	 * look like one that met it. */
	ret = n < 0 ? (int)n : send_timed(c, SBUF(c), (size_t)n, timeout);
	if (ret != 0) {
		snprintf(rep->error, sizeof(rep->error), "sending FILL: %s",
			 tern_strerror(ret));
		goto out_abandon;
	}
	ret = fill_wait(c, p, r.id, t0 + (uint64_t)timeout * 1000000ULL,
			timeout, rep);
	if (ret != 0)
		goto out_abandon;
	if (c->ireq.status != 0) {
		ret = c->ireq.status;
		goto out;
	}
	rep->elapsed_ns = c->imm_done_ns - t0;
	ret = verify(c, p, idx, rep);
	goto out;

out_abandon:
	ret = fill_abandon(c, p, r.id, ret, rep);
out:
	free(idx);
	return ret;
}

int fill_conn_close(struct fill_conn *conn)
{
	ssize_t n;

	if (conn == NULL)
		return 0;
	n = fill_bye_encode(SBUF(conn), FILL_MSG_MAX, conn->session);
	if (n > 0 && !conn->gone)
		fill_conn_send_raw(conn, SBUF(conn), (size_t)n);
	conn_free(conn);
	return 0;
}
