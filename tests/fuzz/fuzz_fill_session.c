/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the random-fill server's session state machine:
 * each input is a sequence of messages (fuzz_fill_session.h) sent by three
 * clients to one server, all ctxs in this process over shm. The server is
 * the real one (apps/fill/server.c), driven by the harness's progress
 * calls; its limits are small (4 sessions, 2 per client card, 2 writers) so
 * that a few messages reach every refusal.
 *
 * The harness keeps a model of what the server must do and aborts when it
 * does something else:
 * - it sends only ACCEPT, RESULT and ERROR, each well-formed, each to the
 *   client whose card the session (or the refused CONNECT) named;
 * - an ACCEPT answers a CONNECT it could take: never one it must refuse,
 *   never past 2 sessions of one card or 4 in all; and, when nothing else
 *   is in flight, it takes every CONNECT it has room for and refuses every
 *   other with an ERROR;
 * - a RESULT answers a FILL of that session that passes
 *   fill_request_check(), and the pages it wrote hold the MT19937-64 stream
 *   of its seed; no byte of the clients' memory outside the pages of such
 *   FILLs changes;
 * - a FILL of a live session is answered (RESULT or ERROR) unless the
 *   session ended or the server counted a dropped reply; one sent when
 *   nothing else is in flight gets its RESULT;
 * - the count of live sessions (fill_server_stats) is the model's whenever
 *   the server is idle, and 0 after every input, whose sessions all end
 *   with a BYE; after FS_IDLE, 0 without any BYE.
 * Where the server may do either (messages in flight at once, a failed
 * RESULT it could not send, a session it ended for being idle while a
 * loaded machine ran the input slowly) the model accepts either.
 *
 * What the server is never sent: a CONNECT whose regions lie outside the
 * harness's memory (the server writes where a client says: that would be
 * the harness's own heap), or a card that parses but is no ctx's of this
 * process (harmless()).
 *
 * TERN_FUZZ_TRACE=1 prints each operation and reply, and the server's log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tern/tern.h>

#include "core/core.h"
#include "wire/card.h"
#include "wire/wire.h"
#include "apps/fill/fill.h"
#include "fuzz_fill_session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SESSIONS   4
#define MAX_PER_CLIENT 2
#define PARALLEL       2
#define IDLE_MS	       50   /* the server's idle timeout */
#define NTX	       32   /* sends in flight per client */
#define NRX	       16   /* receives posted per client */
#define TX_MAX	       2048 /* largest message the harness sends */
#define RX_MAX	       1024 /* largest the server sends: REPLY_MAX 512 */
#define GUARD	       4096 /* unregistered bytes around each client's */
#define CANARY	       0xa5
#define QUIET_ROUNDS   8
#define PUMP_LIMIT_NS  5000000000ULL
#define MAX_SESS_REC   64
#define MAX_CONN_REC   64
#define MAX_FILL_REC   64
#define MAX_IDX	       (TX_MAX / 4) /* indices in a FILL it sends */

enum { M_LIVE, M_BYE, M_ENDED };
enum { V_ANY, V_ACCEPT, V_REFUSE, V_SILENT };
enum { A_NONE, A_ERROR, A_RESULT };

struct client {
	int index;
	struct tern_ctx *ctx;
	struct tern_peer *srv;
	uint8_t *mem; /* FS_ARENA bytes, registered for remote write */
	struct tern_mr *mr;
	struct tern_mr_desc desc;
	uint8_t *msg; /* NTX send buffers, then NRX receive buffers */
	struct tern_mr *msgmr;
	struct tern_req tx[NTX];
	struct tern_req rx[NRX];
	uint8_t card[TERN_CARD_MAX];
	size_t card_len;
	uint64_t anon_errors; /* ERRORs of session 0 received */
};

/* A session the server ACCEPTed in this input. */
struct msess {
	uint64_t id;
	int owner; /* the client whose card it was opened with */
	int state;
	int unmapped; /* its regions: writes fail */
	struct tern_mr_desc regions[FILL_REGIONS];
};

struct mconn {
	uint64_t nonce;
	int to; /* the client whose card it carries, or -1 */
	int verdict;
	int strict; /* sent with nothing else in flight */
	int accepted;
	uint64_t anon_before;
	int unmapped; /* its regions lie in the hole */
	struct tern_mr_desc regions[FILL_REGIONS];
};

struct mfill {
	int sess; /* index in sessions */
	uint32_t id;
	uint32_t page_size;
	uint32_t count;
	uint64_t seed;
	int ok; /* fill_request_check() passes: the server must write it */
	int live_at_send;
	int strict;
	int answer;
	int32_t status;
	uint64_t dropped_at_send;
	uint32_t idx[MAX_IDX];
};

struct fz {
	int ready;
	int trace;
	struct tern_ctx *sctx;
	struct fill_server *srv;
	uint8_t scard[TERN_CARD_MAX];
	size_t scard_len;
	struct client cl[FS_CLIENTS];
	uint8_t *arena; /* GUARD, then per client FS_ARENA + GUARD */
	size_t arena_len;
	uint8_t *cover; /* per arena byte: FILLs that may write it */
	void *hole;	/* 2 * FS_ARENA mapped PROT_NONE */
	uint32_t scratch[FILL_MAX_PAGES];
	uint8_t out[TX_MAX + 64];
	uint8_t tx[TX_MAX];
	uint8_t last[TX_MAX + 64];
	size_t last_len;

	/* The model, per input. */
	struct msess sess[MAX_SESS_REC];
	int nsess;
	struct mconn conn[MAX_CONN_REC];
	int nconn;
	struct mfill fill[MAX_FILL_REC];
	int nfill;
	int quiet;	       /* nothing in flight since the last pump */
	int idled;	       /* FS_IDLE ran in this input */
	uint64_t expired_base; /* the server's idle ends the model knows */
	uint64_t nonce;	       /* of the harness's own CONNECTs */
	uint64_t fill_id;      /* the last id unique_fill_id() gave */
	uint64_t inputs;       /* inputs run */
	int op;
};

static struct fz F;

/* The ticket the last client's CONNECTs must carry (FS_REG_TICKET), and
 * one that is not it. */
static const uint8_t ticket[FILL_TICKET_LEN] = { 1, 2, 3 };
static const uint8_t ticket_bad[FILL_TICKET_LEN] = { 1, 2, 4 };

#define trace(...)                                    \
	do {                                          \
		if (F.trace)                          \
			fprintf(stderr, __VA_ARGS__); \
	} while (0)

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_fill_session: op %d: %s\n", F.op, what);
	abort();
}

static void want(int ok, const char *what)
{
	if (!ok)
		fail(what);
}

static void server_stats(struct fill_server_stats *st)
{
	fill_server_stats(F.srv, st);
}

/* ---- the model ----------------------------------------------------- */

static struct msess *sess_by_id(uint64_t id, int *index_p)
{
	for (int i = 0; id != 0 && i < F.nsess; i++) {
		if (F.sess[i].id == id) {
			if (index_p != NULL)
				*index_p = i;
			return &F.sess[i];
		}
	}
	return NULL;
}

/* A session whose fill to unmapped memory is out: the server may end it
 * without telling (its failed RESULT dropped), so it counts neither way. */
static int sess_uncertain(int si)
{
	if (!F.sess[si].unmapped || F.sess[si].state != M_LIVE)
		return 0;
	for (int i = 0; i < F.nfill; i++) {
		if (F.fill[i].sess == si && F.fill[i].ok &&
		    F.fill[i].answer != A_RESULT)
			return 1;
	}
	return 0;
}

/*
 * Whether the server ended sessions for being idle (IDLE_MS) since the
 * model last knew: on a loaded machine an input can run that long. The
 * model then no longer knows which sessions live, and checks that count
 * them are off for the rest of the input. FS_IDLE waits for it on purpose.
 */
static int lost(void)
{
	struct fill_server_stats st;

	server_stats(&st);
	return st.expired != F.expired_base;
}

/* Whether the server may hold other sessions than the model's. */
static int model_uncertain(void)
{
	if (lost())
		return 1;
	for (int i = 0; i < F.nsess; i++) {
		if (sess_uncertain(i))
			return 1;
	}
	return 0;
}

/* Live sessions of client @owner (-1: all) the server surely holds. */
static int live_count(int owner)
{
	int n = 0;

	for (int i = 0; i < F.nsess; i++) {
		n += F.sess[i].state == M_LIVE && !sess_uncertain(i) &&
		     (owner < 0 || F.sess[i].owner == owner);
	}
	return n;
}

static int card_owner(const uint8_t *card, size_t len)
{
	for (int c = 0; c < FS_CLIENTS; c++) {
		if (F.cl[c].card_len == len &&
		    memcmp(F.cl[c].card, card, len) == 0)
			return c;
	}
	if (len == F.scard_len && memcmp(F.scard, card, len) == 0)
		return -2;
	return -1;
}

static int in_arena(uint64_t addr, uint64_t len)
{
	uint64_t a = (uint64_t)(uintptr_t)F.arena;

	return addr >= a && len <= F.arena_len && addr - a <= F.arena_len - len;
}

/* Loops over every byte of the clients' memory: without coverage
 * instrumentation, which would make them most of an input's time and
 * tell the fuzzer nothing (and not inlined into a function that is). */
#define NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))

NO_COVERAGE static void cover_add(uint64_t at, uint64_t len)
{
	for (uint64_t b = at; b < at + len; b++) {
		if (F.cover[b] < 255)
			F.cover[b]++;
	}
}

/* Whether a byte of [at, at + len) that one FILL alone names differs
 * from @want. */
NO_COVERAGE static int page_differs(uint64_t at, const uint8_t *want,
				    uint64_t len)
{
	for (uint64_t b = 0; b < len; b++) {
		if (F.cover[at + b] == 1 && F.arena[at + b] != want[b])
			return 1;
	}
	return 0;
}

/* The first byte no FILL names that is not the canary, or -1. */
NO_COVERAGE static ssize_t first_stray(void)
{
	for (size_t i = 0; i < F.arena_len; i++) {
		if (F.cover[i] == 0 && F.arena[i] != CANARY)
			return (ssize_t)i;
	}
	return -1;
}

/* The pages of @r as the server would write them to @s's regions. */
static void fill_cover(struct msess *s, const struct fill_request *r)
{
	for (uint32_t k = 0; k < r->page_count; k++) {
		unsigned int reg = 0;
		uint64_t off = 0, addr;

		if (fill_page_target(s->regions, r->page_size,
				     fill_request_index(r, k), &reg, &off) != 0)
			fail("a checked FILL's page has no target");
		addr = s->regions[reg].base + off;
		if (in_arena(addr, r->page_size))
			cover_add(addr - (uintptr_t)F.arena, r->page_size);
	}
}

/* The server's admission (a --token server's, for the last client). */
static int admitted(const void *card, size_t len, const void *t, size_t t_len)
{
	if (card_owner(card, len) != FS_CLIENTS - 1)
		return 1;
	return t_len == sizeof(ticket) && memcmp(t, ticket, t_len) == 0;
}

static int admit(void *data, const void *card, size_t len, const void *t,
		 size_t t_len)
{
	(void)data;
	return admitted(card, len, t, t_len);
}

/* Where the server may write for @msg, if it is a CONNECT it takes: the
 * harness's memory or the hole, or -1 anywhere else (not sent: the server
 * would write where the client said, into the harness). */
static int connect_target(const uint8_t *msg, size_t len, int *unmapped_p)
{
	struct fill_connect cn;
	int inside = 0, hole = 0;

	*unmapped_p = 0;
	if (fill_connect_decode(msg, len, &cn) != 0)
		return 0;
	for (int i = 0; i < FILL_REGIONS; i++) {
		const struct tern_mr_desc *d = &cn.regions[i];
		uint64_t h = (uint64_t)(uintptr_t)F.hole;

		if (d->len > FILL_MAX_REGION ||
		    !(d->flags & TERN_MR_DESC_REMOTE_WRITE))
			return 0; /* refused */
		if (in_arena(d->base, d->len))
			inside++;
		else if (d->base >= h && d->len <= 2 * FS_ARENA &&
			 d->base - h <= 2 * FS_ARENA - d->len)
			hole++;
	}
	*unmapped_p = hole != 0;
	return inside + hole == FILL_REGIONS ? 0 : -1;
}

/* What the server will make of @msg (the same parse), before it sees it. */
static void model_sent(const uint8_t *msg, size_t len, int strict)
{
	struct fill_server_stats st;
	struct fill_request r;
	struct fill_hdr h;
	struct msess *s;
	struct mfill *m;
	int si = -1;

	if (fill_hdr_parse(msg, len, &h) != 0)
		return;
	if (h.type == FILL_CONNECT) {
		struct fill_connect cn;
		const uint8_t *card;
		struct mconn *k;
		size_t card_len;
		int owner;

		if (fill_connect_card(msg, len, &card, &card_len) != 0)
			return;
		owner = card_owner(card, card_len);
		if (F.nconn == MAX_CONN_REC)
			fail("too many CONNECTs for the model");
		k = &F.conn[F.nconn++];
		*k = (struct mconn){
			.nonce = h.session,
			.to = owner >= 0 ? owner : -1,
			.verdict = V_SILENT,
		};
		/* The server's own card, or one that does not parse: no
		 * answer (tern_peer_add refuses it). */
		if (owner < 0)
			return;
		k->anon_before = F.cl[owner].anon_errors;
		k->verdict = V_REFUSE;
		if (fill_connect_decode(msg, len, &cn) != 0)
			return;
		memcpy(k->regions, cn.regions, sizeof(k->regions));
		for (int i = 0; i < FILL_REGIONS; i++) {
			if (cn.regions[i].len > FILL_MAX_REGION ||
			    !(cn.regions[i].flags & TERN_MR_DESC_REMOTE_WRITE))
				return;
		}
		if (!admitted(cn.card, cn.card_len, cn.ticket, cn.ticket_len))
			return;
		k->verdict = V_ANY; /* the limits decide */
		connect_target(msg, len, &k->unmapped);
		return;
	}
	s = sess_by_id(h.session, &si);
	if (s == NULL)
		return; /* dropped: an unknown session */
	if (h.type == FILL_BYE) {
		if (s->state == M_LIVE)
			s->state = M_BYE;
		return;
	}
	if (h.type != FILL_REQUEST)
		return;
	if (F.nfill == MAX_FILL_REC)
		fail("too many FILLs for the model");
	m = &F.fill[F.nfill++];
	server_stats(&st);
	*m = (struct mfill){
		.sess = si,
		.live_at_send = s->state == M_LIVE,
		.strict = strict && s->state == M_LIVE && !model_uncertain(),
		.dropped_at_send = st.dropped,
	};
	if (fill_request_decode(msg, len, &r) != 0)
		return; /* answered with an ERROR of id 0 */
	m->id = r.id;
	m->page_size = r.page_size;
	m->count = r.page_count;
	m->seed = r.seed;
	m->ok = fill_request_check(&r, s->regions, F.scratch, NULL, 0) == 0;
	if (!m->ok)
		return;
	if (r.page_count > MAX_IDX)
		fail("a FILL of more pages than the harness can send");
	for (uint32_t k = 0; k < r.page_count; k++)
		m->idx[k] = fill_request_index(&r, k);
	fill_cover(s, &r);
}

/* ---- replies ------------------------------------------------------- */

/* A RESULT's pages that no other FILL may have written hold the stream. */
static void check_content(const struct msess *s, const struct mfill *m)
{
	uint64_t bytes = (uint64_t)m->page_size * m->count;
	struct tern_mt64 rng;
	uint8_t *want_buf = malloc(bytes);

	want(want_buf != NULL, "out of memory");
	tern_mt64_seed(&rng, m->seed);
	tern_mt64_fill(&rng, want_buf, bytes);
	for (uint32_t k = 0; k < m->count; k++) {
		unsigned int reg = 0;
		uint64_t off = 0, addr, at;

		fill_page_target(s->regions, m->page_size, m->idx[k], &reg,
				 &off);
		addr = s->regions[reg].base + off;
		if (!in_arena(addr, m->page_size))
			continue;
		at = addr - (uintptr_t)F.arena;
		if (page_differs(at, want_buf + (uint64_t)k * m->page_size,
				 m->page_size))
			fail("a RESULT's page does not hold its stream");
	}
	free(want_buf);
}

static void on_accept(int c, const uint8_t *msg, size_t len, uint64_t session)
{
	struct fill_accept a;
	struct mconn *m = NULL;
	int refused = 0;

	want(fill_accept_decode(msg, len, &a) == 0, "malformed ACCEPT");
	want(a.max_page_size == FILL_MAX_PAGE_SIZE &&
		     a.max_pages == FILL_MAX_PAGES &&
		     a.max_bytes == FILL_MAX_BYTES,
	     "ACCEPT with other limits");

	/* CONNECTs of one nonce have one card and the same regions
	 * (send_msg() sees to it), so any of them will do. */
	for (int i = 0; i < F.nconn && m == NULL; i++) {
		struct mconn *k = &F.conn[i];

		if (k->nonce != a.nonce || k->to != c || k->accepted)
			continue;
		if (k->verdict == V_ANY || k->verdict == V_ACCEPT)
			m = k;
		else
			refused = 1;
	}
	want(m != NULL || !refused,
	     "ACCEPT of a CONNECT the server must refuse");
	want(m != NULL, "ACCEPT of no CONNECT to this client");
	want(session != 0 && sess_by_id(session, NULL) == NULL,
	     "ACCEPT with a session id of 0 or one given before");
	want(lost() || live_count(c) < MAX_PER_CLIENT,
	     "ACCEPT past the limit of sessions per client");
	want(lost() || live_count(-1) < MAX_SESSIONS,
	     "ACCEPT past the session limit");
	m->accepted = 1;
	if (F.nsess == MAX_SESS_REC)
		fail("too many sessions for the model");
	F.sess[F.nsess] = (struct msess){
		.id = session,
		.owner = c,
		.state = M_LIVE,
		.unmapped = m->unmapped,
	};
	memcpy(F.sess[F.nsess].regions, m->regions, sizeof(m->regions));
	F.nsess++;
}

static void on_result(int c, const uint8_t *msg, size_t len, uint64_t session)
{
	struct fill_result res;
	struct mfill *m = NULL;
	struct msess *s;
	int si = -1;

	want(fill_result_decode(msg, len, &res) == 0, "malformed RESULT");
	s = sess_by_id(session, &si);
	want(s != NULL, "RESULT of a session never accepted");
	want(s->owner == c, "RESULT sent to another client");
	for (int i = 0; i < F.nfill && m == NULL; i++) {
		if (F.fill[i].sess == si && F.fill[i].id == res.id)
			m = &F.fill[i];
	}
	want(m != NULL && res.id != 0, "RESULT of no FILL");
	want(m->answer == A_NONE, "a second answer to one FILL");
	want(m->ok, "RESULT of a FILL the check refuses");
	m->answer = A_RESULT;
	m->status = res.status;
	if (res.status == 0) {
		want(!s->unmapped, "RESULT 0 of a fill to unmapped memory");
		want(res.bytes == (uint64_t)m->page_size * m->count,
		     "RESULT with the wrong byte count");
		check_content(s, m);
		return;
	}
	want(res.bytes == 0, "failed RESULT with bytes");
	want(s->unmapped, "a fill to good memory failed");
	if (res.status != -TERN_EACCESS && res.status != -TERN_EBOUNDS &&
	    s->state == M_LIVE)
		s->state = M_ENDED;
}

static void on_error(int c, const uint8_t *msg, size_t len, uint64_t session)
{
	struct fill_error e;
	struct msess *s;
	int si = -1;

	want(fill_error_decode(msg, len, &e) == 0, "malformed ERROR");
	want(e.code < 0, "ERROR with a code that is not negative");
	if (session == 0) {
		F.cl[c].anon_errors++;
		return;
	}
	s = sess_by_id(session, &si);
	want(s != NULL, "ERROR of a session never accepted");
	want(s->owner == c, "ERROR sent to another client");
	/* Id 0: a message that is no FILL the server could decode. */
	for (int i = 0; i < F.nfill; i++) {
		struct mfill *f = &F.fill[i];

		if (f->sess != si || f->id != e.id)
			continue;
		if (e.id == 0 && f->answer != A_NONE)
			continue;
		want(f->answer == A_NONE, "a second answer to one FILL");
		want(!f->ok || e.code == -EBUSY || e.code == -ENOMEM,
		     "ERROR of a FILL the check passes");
		f->answer = A_ERROR;
		f->status = e.code;
		return;
	}
	want(e.id == 0, "ERROR of no FILL");
}

static void on_reply(int c, const uint8_t *msg, size_t len)
{
	struct fill_hdr h;

	want(fill_hdr_parse(msg, len, &h) == 0, "malformed message");
	trace("  client %d <- type %u session %016" PRIx64 " (%zu bytes)\n", c,
	      h.type, h.session, len);
	switch (h.type) {
	case FILL_ACCEPT:
		on_accept(c, msg, len, h.session);
		return;
	case FILL_RESULT:
		on_result(c, msg, len, h.session);
		return;
	case FILL_ERROR:
		if (F.trace) {
			struct fill_error e;

			if (fill_error_decode(msg, len, &e) == 0)
				trace("    error %d id %u: %s\n", e.code, e.id,
				      e.text);
		}
		on_error(c, msg, len, h.session);
		return;
	default:
		fail("the server sent a client's kind of message");
	}
}

static void rx_done(struct tern_req *req);

static void post_rx(struct client *cl, int i)
{
	tern_req_init(&cl->rx[i], rx_done, cl);
	want(tern_recv(cl->ctx, cl->msgmr, cl->msg + NTX * TX_MAX + i * RX_MAX,
		       RX_MAX, &cl->rx[i]) == 0,
	     "posting a receive");
}

static void rx_done(struct tern_req *req)
{
	struct client *cl = req->data;
	int i = (int)(req - cl->rx);

	if (req->status == -ECANCELED)
		return;
	want(req->status == 0, "a receive failed");
	on_reply(cl->index, cl->msg + NTX * TX_MAX + i * RX_MAX, req->len);
	post_rx(cl, i);
}

/* ---- driving ------------------------------------------------------- */

static int sends_busy(void)
{
	for (int c = 0; c < FS_CLIENTS; c++) {
		for (int i = 0; i < NTX; i++) {
			if (!F.cl[c].tx[i].done)
				return 1;
		}
	}
	return 0;
}

static uint64_t stats_sum(void)
{
	struct fill_server_stats st;

	server_stats(&st);
	return st.sessions + st.fills + st.refused + st.dropped + st.active;
}

/* Progress every ctx until none completes anything for a while. */
static void pump(void)
{
	uint64_t t0 = tern__now_ns(), before = stats_sum();
	int quiet = 0;

	while (quiet < QUIET_ROUNDS) {
		int n = tern_progress(F.sctx);
		uint64_t now;

		want(n >= 0, "server progress failed");
		for (int c = 0; c < FS_CLIENTS; c++) {
			int k = tern_progress(F.cl[c].ctx);

			want(k >= 0, "client progress failed");
			n += k;
		}
		now = stats_sum();
		if (n == 0 && now == before && !sends_busy()) {
			quiet++;
		} else {
			quiet = 0;
			before = now;
		}
		if (tern__now_ns() - t0 > PUMP_LIMIT_NS)
			fail("the server never went quiet");
	}
	F.quiet = 1;
}

/*
 * Whether the server may be sent @msg. A CONNECT names where the server
 * will write (the harness's memory or the hole, never elsewhere in this
 * process) and any message of the CONNECT type names whom it answers: a
 * card that parses must be one of ours. Another shm name (a changed pid or
 * endpoint number) reaches whatever endpoint of this host has it, in
 * another process (its ACCEPT arrives there), or a region a dead process
 * left in /dev/shm; once, while this harness was written, libfabric 1.17's
 * shm then crashed in fi_tsendmsg() (a SEGV in a spin lock).
 */
static int harmless(const uint8_t *msg, size_t len)
{
	const uint8_t *card;
	struct tern__card tc;
	char why[128];
	size_t card_len;
	struct fill_hdr h;
	int unmapped;

	if (fill_hdr_parse(msg, len, &h) == 0 && h.type == FILL_CONNECT &&
	    connect_target(msg, len, &unmapped) != 0)
		return 0;
	if (fill_connect_card(msg, len, &card, &card_len) != 0 ||
	    tern__card_parse(card, card_len, &tc, why, sizeof(why)) != 0)
		return 1;
	return card_owner(card, card_len) != -1;
}

/* A CONNECT whose nonce an earlier one of other card or regions had gets
 * a new one: an ACCEPT (which echoes the nonce) then names its CONNECT. */
static void unique_nonce(uint8_t *msg, size_t len)
{
	const uint8_t *card;
	struct fill_connect cn;
	struct fill_hdr h;
	size_t card_len;
	int owner;

	if (fill_hdr_parse(msg, len, &h) != 0 || h.type != FILL_CONNECT ||
	    fill_connect_card(msg, len, &card, &card_len) != 0)
		return;
	owner = card_owner(card, card_len);
	if (fill_connect_decode(msg, len, &cn) != 0)
		memset(cn.regions, 0, sizeof(cn.regions));
	for (int i = 0; i < F.nconn; i++) {
		struct mconn *k = &F.conn[i];

		if (k->nonce != tern__wire_get_u64(msg + 16))
			continue;
		if (k->to == (owner >= 0 ? owner : -1) &&
		    memcmp(k->regions, cn.regions, sizeof(cn.regions)) == 0)
			continue;
		tern__wire_put_u64(msg + 16, ++F.nonce);
		i = -1; /* and check the new one */
	}
}

/* A FILL gets an id no other FILL of the input has, and never 0 (the id
 * of ERRORs that answer no FILL): each answer then names its FILL. */
static void unique_fill_id(uint8_t *msg, size_t len)
{
	struct fill_request r;
	struct fill_hdr h;

	if (fill_hdr_parse(msg, len, &h) != 0 || h.type != FILL_REQUEST ||
	    fill_request_decode(msg, len, &r) != 0)
		return;
	for (int i = 0; i <= F.nfill; i++) {
		if (i == F.nfill ? r.id != 0 : F.fill[i].id != r.id)
			continue;
		r.id = (uint32_t)++F.fill_id;
		tern__wire_put_u32(msg + FILL_HDR, r.id);
		i = -1; /* and check the new one */
	}
}

/* Send @msg from client @c; without @batch, let the server answer.
 * @return 0, or -1 for a CONNECT not sent (its regions lie elsewhere). */
static int send_msg(int c, const uint8_t *msg, size_t len, int batch)
{
	struct client *cl = &F.cl[c];
	int strict = F.quiet && !batch;
	int slot = -1, ret;
	struct fill_hdr h;

	if (len > TX_MAX)
		len = TX_MAX;
	if (!harmless(msg, len)) {
		trace("op %d: not sent: its card or regions name what is "
		      "not the harness's\n",
		      F.op);
		return -1;
	}
	memcpy(F.tx, msg, len);
	msg = F.tx;
	unique_nonce(F.tx, len);
	unique_fill_id(F.tx, len);
	memcpy(F.last, msg, len);
	F.last_len = len;
	while (slot < 0) {
		for (int i = 0; i < NTX && slot < 0; i++) {
			if (cl->tx[i].done)
				slot = i;
		}
		if (slot < 0)
			pump();
	}
	trace("op %d: client %d -> %zu bytes%s\n", F.op, c, len,
	      batch ? " (batched)" : "");
	if (F.trace && fill_hdr_parse(msg, len, &h) == 0 &&
	    h.type == FILL_CONNECT) {
		const uint8_t *card;
		size_t card_len;

		if (fill_connect_card(msg, len, &card, &card_len) == 0) {
			trace("  card of %zu bytes:", card_len);
			for (size_t i = 0; i < card_len; i++)
				trace(i >= 12 && card[i] >= 0x20 &&
						      card[i] < 0x7f
					      ? "%c"
					      : " %02x",
				      card[i]);
			trace("\n");
		}
	}
	memcpy(cl->msg + slot * TX_MAX, msg, len);
	tern_req_init(&cl->tx[slot], NULL, NULL);
	ret = tern_send(cl->srv, cl->msgmr, cl->msg + slot * TX_MAX, len,
			&cl->tx[slot]);
	if (ret != 0) {
		trace("  send refused: %s\n", tern_strerror(ret));
		cl->tx[slot].done = 1;
		return 0;
	}
	/* Queued: the server sees it in a progress pass, after this. */
	model_sent(msg, len, strict);
	F.quiet = 0;
	if (!batch)
		pump();
	return 0;
}

/* ---- the checks at quiet points ------------------------------------ */

static void check_quiet(void)
{
	struct fill_server_stats st;

	if (!F.quiet || model_uncertain())
		return;
	server_stats(&st);
	if (st.active != (uint64_t)live_count(-1)) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server holds %" PRIu64 " sessions, the model %d",
			 st.active, live_count(-1));
		fail(why);
	}
}

/* After a CONNECT sent with nothing else in flight: the one outcome. */
static void check_connect(struct mconn *m)
{
	if (!m->strict || lost())
		return;
	if (m->verdict == V_ACCEPT)
		want(m->accepted,
		     "a CONNECT the server had room for was not accepted");
	if (m->verdict == V_REFUSE)
		want(F.cl[m->to].anon_errors > m->anon_before,
		     "a refused CONNECT got no ERROR");
}

static void check_fill(struct mfill *m)
{
	if (!m->strict || !m->ok || F.sess[m->sess].unmapped || lost())
		return;
	want(m->answer == A_RESULT && m->status == 0,
	     "a FILL sent to an idle server did not complete");
}

/* ---- operations ---------------------------------------------------- */

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t get8(struct input *in)
{
	if (in->left == 0)
		return 0;
	in->left--;
	return *in->p++;
}

static uint64_t pick_session(uint8_t sel)
{
	if (sel >= FS_SEL_BOGUS)
		return 0x5e55000000000000ULL | sel;
	if (sel >= FS_SEL_ZERO)
		return 0;
	if (F.nsess == 0)
		return 0x5e55100000000000ULL | sel;
	return F.sess[sel % F.nsess].id;
}

static void region(struct client *cl, struct tern_mr_desc *d, uint8_t off,
		   uint8_t len)
{
	uint64_t o = (uint64_t)off * 1024 % FS_ARENA;
	uint64_t l = TERN_MIN(len != 0 ? (uint64_t)len * 1024 : 1,
			      FS_ARENA - o);

	*d = cl->desc;
	d->base += o;
	d->len = l;
}

static void op_connect(struct input *in, int c, int batch, int variant)
{
	struct client *cl = &F.cl[c];
	uint8_t mode = get8(in);
	uint8_t o0 = get8(in), l0 = get8(in), o1 = get8(in), l1 = get8(in);
	struct tern_mr_desc regions[FILL_REGIONS];
	int card = mode & 3, reg = (mode >> 2) & 7, before;
	int strict = F.quiet && !batch && !model_uncertain();
	const uint8_t *cp = cl->card;
	size_t cp_len = cl->card_len;
	struct mconn *m;
	ssize_t n;

	region(cl, &regions[0], o0, l0);
	region(cl, &regions[1], o1, l1);
	switch (card) {
	case FS_CARD_OWN:
		break;
	case FS_CARD_NEXT:
		cp = F.cl[(c + 1) % FS_CLIENTS].card;
		cp_len = F.cl[(c + 1) % FS_CLIENTS].card_len;
		break;
	case FS_CARD_SERVER:
		cp = F.scard;
		cp_len = F.scard_len;
		break;
	default:
		cp_len--;
		break;
	}
	switch (reg) {
	case FS_REG_NOWRITE:
		regions[variant].flags &= ~(uint32_t)TERN_MR_DESC_REMOTE_WRITE;
		break;
	case FS_REG_HUGE:
		regions[variant].len = FILL_MAX_REGION + 1;
		break;
	case FS_REG_UNMAPPED:
		for (int i = 0; i < FILL_REGIONS; i++)
			regions[i].base = (uintptr_t)F.hole +
					  (regions[i].base - cl->desc.base);
		break;
	default:
		break;
	}
	n = fill_connect_encode_ticket(
		F.out, sizeof(F.out), ++F.nonce, cp, cp_len, regions,
		reg != FS_REG_TICKET ? NULL
		: variant	     ? ticket_bad
				     : ticket,
		reg == FS_REG_TICKET ? sizeof(ticket) : 0);
	want(n > 0, "encoding a CONNECT");
	trace("op %d: CONNECT card %d regions %d\n", F.op, card, reg);
	before = F.nconn;
	if (send_msg(c, F.out, (size_t)n, 1) != 0)
		return;
	want(F.nconn == before + 1, "the CONNECT's record");
	/* The record model_sent() made. With nothing else in flight, the
	 * limits decide what the server does with a CONNECT it can take. */
	m = &F.conn[F.nconn - 1];
	if (m->verdict == V_ANY && strict)
		m->verdict = live_count(m->to) < MAX_PER_CLIENT &&
					     live_count(-1) < MAX_SESSIONS
				     ? V_ACCEPT
				     : V_REFUSE;
	m->strict = strict && m->verdict != V_SILENT;
	if (!batch) {
		pump();
		check_connect(m);
	}
}

static void op_fill(struct input *in, int c, int batch)
{
	static const uint32_t sizes[16] = FS_PAGE_SIZES;
	uint8_t sel = get8(in), psize = get8(in), count = get8(in);
	uint8_t flags = get8(in), id = get8(in);
	uint32_t idx[MAX_IDX + 1];
	struct fill_request r = {
		.id = id,
		.page_size = sizes[psize % 16],
		.seed = 0x5eed000000000000ULL | (F.inputs << 16) |
			(uint64_t)F.op << 8 | id,
		.page_count = count,
	};
	ssize_t n;
	size_t len;

	for (uint32_t k = 0; k < count; k++) {
		uint32_t v = get8(in);

		if (flags & FS_FILL_IDX16)
			v |= (uint32_t)get8(in) << 8;
		if (flags & FS_FILL_IDXHIGH)
			v |= 0xffffff00u;
		idx[k] = v;
	}
	n = fill_request_encode(F.out, sizeof(F.out), pick_session(sel), &r,
				count != 0 ? idx : NULL);
	want(n > 0, "encoding a FILL");
	len = (size_t)n;
	if (flags & FS_FILL_COUNTBAD)
		tern__wire_put_u32(F.out + FILL_HDR + 16, count + 1u);
	if (flags & FS_FILL_SHORT)
		len--;
	if (flags & FS_FILL_PAD) {
		memset(F.out + len, 0, 4);
		len += 4;
		tern__wire_put_u32(F.out + 8, (uint32_t)len);
	}
	if (flags & FS_FILL_RESERVED)
		tern__wire_put_u32(F.out + 12, 1);
	if (flags & FS_FILL_VERSION)
		tern__wire_put_u16(F.out + 4, FILL_VERSION + 1);
	if (flags & FS_FILL_TYPE)
		tern__wire_put_u16(F.out + 6, 42);
	trace("op %d: FILL sel %u id %u %u x %u flags 0x%x\n", F.op, sel, id,
	      count, r.page_size, flags);
	int before = F.nfill;

	send_msg(c, F.out, len, batch);
	if (!batch && F.nfill > before)
		check_fill(&F.fill[F.nfill - 1]);
}

static void op_bye(struct input *in, int c, int batch)
{
	uint8_t sel = get8(in), flags = get8(in);
	ssize_t n = fill_bye_encode(F.out, sizeof(F.out), pick_session(sel));
	size_t len;

	want(n > 0, "encoding a BYE");
	len = (size_t)n;
	if (flags & 1) {
		memset(F.out + len, 0, 4);
		len += 4;
		tern__wire_put_u32(F.out + 8, (uint32_t)len);
	}
	if (flags & 2)
		len--;
	trace("op %d: BYE sel %u flags 0x%x\n", F.op, sel, flags);
	send_msg(c, F.out, len, batch);
}

/* A server's message, which a server must never answer. */
static void op_server_kind(struct input *in, int c, int batch)
{
	uint8_t sel = get8(in), which = get8(in);
	uint64_t session = pick_session(sel);
	ssize_t n;

	switch (which % 3) {
	case 0: {
		struct fill_accept a = {
			.nonce = F.nonce,
			.max_page_size = 4096,
			.max_pages = 1,
			.max_bytes = 4096,
		};

		n = fill_accept_encode(F.out, sizeof(F.out), session, &a);
		break;
	}
	case 1: {
		struct fill_result r = { .id = which, .bytes = 4096 };

		n = fill_result_encode(F.out, sizeof(F.out), session, &r);
		break;
	}
	default:
		n = fill_error_encode(F.out, sizeof(F.out), session, which,
				      -TERN_EPROTO, "from a client");
		break;
	}
	want(n > 0, "encoding a server's message");
	trace("op %d: server's kind %d sel %u\n", F.op, which % 3, sel);
	send_msg(c, F.out, (size_t)n, batch);
}

static void op_raw(struct input *in, int c, int batch)
{
	size_t len = get8(in);

	for (size_t i = 0; i < len; i++)
		F.out[i] = get8(in);
	trace("op %d: %zu raw bytes\n", F.op, len);
	send_msg(c, F.out, len, batch);
}

static void op_header(struct input *in, int c, int batch)
{
	uint8_t type = get8(in), sel = get8(in);
	size_t len = get8(in);

	tern__wire_put_u32(F.out, FILL_MAGIC);
	tern__wire_put_u16(F.out + 4, FILL_VERSION);
	tern__wire_put_u16(F.out + 6, type);
	tern__wire_put_u32(F.out + 8, (uint32_t)(FILL_HDR + len));
	tern__wire_put_u32(F.out + 12, 0);
	tern__wire_put_u64(F.out + 16, pick_session(sel));
	for (size_t i = 0; i < len; i++)
		F.out[FILL_HDR + i] = get8(in);
	trace("op %d: header of type %u sel %u, %zu bytes of body\n", F.op,
	      type, sel, len);
	send_msg(c, F.out, FILL_HDR + len, batch);
}

static void op_resend(struct input *in, int c, int batch)
{
	uint8_t pos = get8(in), x = get8(in), mode = get8(in);
	size_t len = F.last_len;

	memcpy(F.out, F.last, len);
	switch (mode % 4) {
	case 0:
		if (len != 0)
			F.out[pos % len] ^= x != 0 ? x : 1;
		break;
	case 1:
		if (len != 0)
			len = pos % len;
		break;
	case 2:
		memset(F.out + len, 0, pos % 64);
		len += pos % 64;
		if (len >= FILL_HDR)
			tern__wire_put_u32(F.out + 8, (uint32_t)len);
		break;
	default:
		break;
	}
	trace("op %d: resend (mode %d) %zu bytes\n", F.op, mode % 4, len);
	send_msg(c, F.out, len, batch);
}

/* The client's bootstrap connection closed: its sessions end. */
static void op_gone(int c)
{
	int strict = F.quiet && !model_uncertain();
	int expect = live_count(c);
	int n = fill_server_peer_gone(F.srv, F.cl[c].card, F.cl[c].card_len,
				      "bootstrap connection closed");

	trace("op %d: client %d gone: %d sessions ended\n", F.op, c, n);
	want(n >= 0, "peer_gone failed");
	if (strict && !lost())
		want(n == expect, "peer_gone ended another number of sessions");
	for (int i = 0; i < F.nsess; i++) {
		if (F.sess[i].owner == c && F.sess[i].state == M_LIVE)
			F.sess[i].state = M_ENDED;
	}
}

/* Every session idle past the timeout: the server must end them all. */
static void op_idle(struct input *in)
{
	struct fill_server_stats st;
	uint64_t t0 = tern__now_ns();

	if (get8(in) != FS_IDLE_MAGIC || F.idled)
		return;
	F.idled = 1;
	trace("op %d: idle\n", F.op);
	pump();
	server_stats(&st);
	/* Ends after about IDLE_MS; the bound is for a loaded machine. */
	while (tern__now_ns() - t0 < 20 * IDLE_MS * 1000000ULL) {
		pump();
		server_stats(&st);
		if (st.active == 0)
			break;
	}
	trace("  idle: %" PRIu64 " sessions left after %.1f ms\n", st.active,
	      (double)(tern__now_ns() - t0) / 1e6);
	want(st.active == 0, "sessions idle past the timeout not ended");
	for (int i = 0; i < F.nsess; i++) {
		if (F.sess[i].state == M_LIVE)
			F.sess[i].state = M_ENDED;
	}
	F.expired_base = st.expired;
}

/* ---- an input ------------------------------------------------------ */

static void finish_input(void)
{
	struct fill_server_stats st;
	ssize_t stray;

	F.op = FS_OPS_MAX;
	pump();
	check_quiet();
	/* Every FILL of a live session has its answer, unless the session
	 * ended or the server counted a reply it dropped since. ERRORs of
	 * FILLs it could not decode all have the id 0: they answer the
	 * earliest of those, and a drop since the first excuses them all. */
	server_stats(&st);
	for (int i = 0; i < F.nfill; i++) {
		struct mfill *m = &F.fill[i];
		uint64_t since = m->dropped_at_send;

		for (int k = 0; m->id == 0 && k < i; k++) {
			if (F.fill[k].sess == m->sess && F.fill[k].id == 0) {
				since = F.fill[k].dropped_at_send;
				break;
			}
		}
		if (m->answer != A_NONE || !m->live_at_send ||
		    F.sess[m->sess].state != M_LIVE || st.dropped > since ||
		    lost())
			continue;
		if (m->ok && F.sess[m->sess].unmapped)
			continue; /* its session may have ended */
		fail("a FILL of a live session got no answer");
	}
	/* End every session the server accepted. */
	for (int i = 0; i < F.nsess; i++) {
		if (F.sess[i].state == M_LIVE) {
			ssize_t n = fill_bye_encode(F.out, sizeof(F.out),
						    F.sess[i].id);

			send_msg(F.sess[i].owner, F.out, (size_t)n, 1);
		}
	}
	pump();
	server_stats(&st);
	if (st.active != 0) {
		char why[96];

		snprintf(why, sizeof(why),
			 "%" PRIu64 " sessions left after every BYE",
			 st.active);
		fail(why);
	}
	/* No byte that no checked FILL names has changed. */
	stray = first_stray();
	if (stray >= 0) {
		char why[96];

		snprintf(why, sizeof(why),
			 "byte %zd of the clients' memory changed (no FILL "
			 "names it)",
			 stray);
		fail(why);
	}
	/* Claim the immediates, so none piles up in the clients' tables. */
	for (int i = 0; i < F.nfill; i++) {
		for (int c = 0; F.fill[i].ok && c < FS_CLIENTS; c++) {
			uint32_t id = F.fill[i].id;
			uint64_t n = tern_imm_count(F.cl[c].ctx, id);
			struct tern_req req;

			if (n == 0)
				continue;
			tern_req_init(&req, NULL, NULL);
			want(tern_imm_expect(F.cl[c].ctx, id, n, &req) == 0 &&
				     tern_wait(F.cl[c].ctx, &req, 1000) == 0,
			     "claiming immediates");
		}
	}
	memset(F.arena, CANARY, F.arena_len);
	memset(F.cover, 0, F.arena_len);
	F.nsess = 0;
	F.nconn = 0;
	F.nfill = 0;
	F.idled = 0;
	F.expired_base = st.expired;
	F.inputs++;
}

static void run_op(struct input *in)
{
	uint8_t op = get8(in);
	int c = (op >> 4) & 3, batch = (op & FS_BATCH) != 0;
	int variant = op >> 7;

	c %= FS_CLIENTS;
	switch ((op & 15) % FS_KINDS) {
	case FS_CONNECT:
		op_connect(in, c, batch, variant);
		break;
	case FS_FILL:
		op_fill(in, c, batch);
		break;
	case FS_BYE:
		op_bye(in, c, batch);
		break;
	case FS_SERVER_KIND:
		op_server_kind(in, c, batch);
		break;
	case FS_RAW:
		op_raw(in, c, batch);
		break;
	case FS_HEADER:
		op_header(in, c, batch);
		break;
	case FS_PUMP:
		pump();
		break;
	case FS_RESEND:
		op_resend(in, c, batch);
		break;
	case FS_GONE:
		op_gone(c);
		break;
	default:
		op_idle(in);
		break;
	}
	if (F.quiet)
		check_quiet();
}

/* ---- set-up, once -------------------------------------------------- */

static void open_ctx(struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr = { .provider = "shm" };
	int ret;

	/* The model is libfabric shm's: a client that names another's card
	 * has its regions written anyway (shm checks no key on that path),
	 * where the same-host path refuses an unknown region
	 * (docs/local.md). The server's logic is what is fuzzed here. */
	setenv("TERN_LOCAL", "0", 1);
	ret = tern_ctx_open(&attr, ctx_p);

	if (ret != 0) {
		fprintf(stderr, "fuzz_fill_session: shm ctx: %s\n",
			tern_strerror(ret));
		abort();
	}
}

/* At exit: close everything, so shm leaves nothing in /dev/shm. */
static void teardown(void)
{
	if (fill_server_close(F.srv) != 0)
		fprintf(stderr, "fuzz_fill_session: the server did not "
				"close cleanly\n");
	for (int c = 0; c < FS_CLIENTS; c++) {
		tern_ctx_close(F.cl[c].ctx);
		free(F.cl[c].msg);
	}
	tern_ctx_close(F.sctx);
	munmap(F.hole, 2 * FS_ARENA);
	free(F.cover);
	free(F.arena);
}

static void setup(void)
{
	struct fill_server_opts opts = {
		.idle_timeout_ms = IDLE_MS,
		.max_sessions = MAX_SESSIONS,
		.max_per_client = MAX_PER_CLIENT,
		.parallel = PARALLEL,
		.admit = admit,
		.admit_required = 1,
	};
	ssize_t n;

	F.trace = tern__env_str("TERN_FUZZ_TRACE") != NULL;
	if (!F.trace)
		tern_log_set_level(TERN_LOG_NONE);
	else
		opts.log = stderr;
	open_ctx(&F.sctx);
	n = tern_ctx_card(F.sctx, F.scard, sizeof(F.scard));
	want(n > 0, "the server's card");
	F.scard_len = (size_t)n;
	want(fill_server_open(F.sctx, &opts, &F.srv) == 0,
	     "opening the server");

	F.arena_len = GUARD + FS_CLIENTS * (size_t)(FS_ARENA + GUARD);
	want(posix_memalign((void **)&F.arena, 4096, F.arena_len) == 0 &&
		     (F.cover = calloc(1, F.arena_len)) != NULL,
	     "out of memory");
	memset(F.arena, CANARY, F.arena_len);
	F.hole = mmap(NULL, 2 * FS_ARENA, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	want(F.hole != MAP_FAILED, "mapping the hole");

	for (int c = 0; c < FS_CLIENTS; c++) {
		struct client *cl = &F.cl[c];
		size_t msglen = NTX * TX_MAX + NRX * RX_MAX;

		cl->index = c;
		open_ctx(&cl->ctx);
		cl->mem = F.arena + GUARD + (size_t)c * (FS_ARENA + GUARD);
		want(tern_mr_reg(cl->ctx, cl->mem, FS_ARENA,
				 TERN_ACCESS_REMOTE_WRITE, &cl->mr) == 0,
		     "registering a client's memory");
		tern_mr_desc(cl->mr, &cl->desc);
		want(posix_memalign((void **)&cl->msg, 128, msglen) == 0,
		     "out of memory");
		want(tern_mr_reg(cl->ctx, cl->msg, msglen, TERN_ACCESS_LOCAL,
				 &cl->msgmr) == 0,
		     "registering message buffers");
		n = tern_ctx_card(cl->ctx, cl->card, sizeof(cl->card));
		want(n > 0, "a client's card");
		cl->card_len = (size_t)n;
		want(tern_peer_add(cl->ctx, F.scard, F.scard_len, &cl->srv) ==
			     0,
		     "adding the server");
		for (int i = 0; i < NTX; i++)
			cl->tx[i].done = 1;
		for (int i = 0; i < NRX; i++)
			post_rx(cl, i);
	}
	F.ready = 1;
	atexit(teardown);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { .p = data, .left = size };

	if (!F.ready)
		setup();
	F.quiet = 0;
	pump();
	for (F.op = 0; F.op < FS_OPS_MAX && in.left > 0; F.op++)
		run_op(&in);
	finish_input();
	return 0;
}
