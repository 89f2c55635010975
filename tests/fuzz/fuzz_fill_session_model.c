/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fill_session's model of the random-fill server
 * (fuzz_fill_session_int.h): what each message the harness sends must
 * make the server do (fs_model_sent()), which sessions it surely holds,
 * which bytes of the clients' memory a FILL may write; and the judge of
 * every reply a client receives (fs_on_reply()), which aborts the input
 * at the first the model rules out.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "core/core.h"
#include "apps/fill/fill.h"
#include "fuzz_fill_session_int.h"

const uint8_t ticket[FILL_TICKET_LEN] = { 1, 2, 3 };
const uint8_t ticket_bad[FILL_TICKET_LEN] = { 1, 2, 4 };

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
int fs_lost(void)
{
	struct fill_server_stats st;

	server_stats(&st);
	return st.expired != F.expired_base;
}

/* Whether the server may hold other sessions than the model's. */
int fs_model_uncertain(void)
{
	if (fs_lost())
		return 1;
	for (int i = 0; i < F.nsess; i++) {
		if (sess_uncertain(i))
			return 1;
	}
	return 0;
}

/* Live sessions of client @owner (-1: all) the server surely holds. */
int fs_live_count(int owner)
{
	int n = 0;

	for (int i = 0; i < F.nsess; i++) {
		n += F.sess[i].state == M_LIVE && !sess_uncertain(i) &&
		     (owner < 0 || F.sess[i].owner == owner);
	}
	return n;
}

int fs_card_owner(const uint8_t *card, size_t len)
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
NO_COVERAGE ssize_t fs_first_stray(void)
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
	if (fs_card_owner(card, len) != FS_CLIENTS - 1)
		return 1;
	return t_len == sizeof(ticket) && memcmp(t, ticket, t_len) == 0;
}

int fs_admit(void *data, const void *card, size_t len, const void *t,
	     size_t t_len)
{
	(void)data;
	return admitted(card, len, t, t_len);
}

/* Where the server may write for @msg, if it is a CONNECT it takes: the
 * harness's memory or the hole, or -1 anywhere else (not sent: the server
 * would write where the client said, into the harness). */
int fs_connect_target(const uint8_t *msg, size_t len, int *unmapped_p)
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
void fs_model_sent(const uint8_t *msg, size_t len, int strict)
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
		owner = fs_card_owner(card, card_len);
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
		fs_connect_target(msg, len, &k->unmapped);
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
		.strict = strict && s->state == M_LIVE && !fs_model_uncertain(),
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
	 * (fs_send_msg() sees to it), so any of them will do. */
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
	want(fs_lost() || fs_live_count(c) < MAX_PER_CLIENT,
	     "ACCEPT past the limit of sessions per client");
	want(fs_lost() || fs_live_count(-1) < MAX_SESSIONS,
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

void fs_on_reply(int c, const uint8_t *msg, size_t len)
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
