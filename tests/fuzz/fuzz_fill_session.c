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
 *
 * This file drives the clients and the server, and checks each input's
 * end; fuzz_fill_session_model.c holds the model, fuzz_fill_session_ops.c
 * the operations (fuzz_fill_session_int.h).
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
#include "fuzz_fill_session_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz F;

/* ---- the clients' receives ----------------------------------------- */

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
	fs_on_reply(cl->index, cl->msg + NTX * TX_MAX + i * RX_MAX, req->len);
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
void fs_pump(void)
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
	    fs_connect_target(msg, len, &unmapped) != 0)
		return 0;
	if (fill_connect_card(msg, len, &card, &card_len) != 0 ||
	    tern__card_parse(card, card_len, &tc, why, sizeof(why)) != 0)
		return 1;
	return fs_card_owner(card, card_len) != -1;
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
	owner = fs_card_owner(card, card_len);
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
int fs_send_msg(int c, const uint8_t *msg, size_t len, int batch)
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
			fs_pump();
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
	fs_model_sent(msg, len, strict);
	F.quiet = 0;
	if (!batch)
		fs_pump();
	return 0;
}

/* ---- the checks at quiet points ------------------------------------ */

void fs_check_quiet(void)
{
	struct fill_server_stats st;

	if (!F.quiet || fs_model_uncertain())
		return;
	server_stats(&st);
	if (st.active != (uint64_t)fs_live_count(-1)) {
		char why[128];

		snprintf(why, sizeof(why),
			 "the server holds %" PRIu64 " sessions, the model %d",
			 st.active, fs_live_count(-1));
		fail(why);
	}
}

/* After a CONNECT sent with nothing else in flight: the one outcome. */
void fs_check_connect(struct mconn *m)
{
	if (!m->strict || fs_lost())
		return;
	if (m->verdict == V_ACCEPT)
		want(m->accepted,
		     "a CONNECT the server had room for was not accepted");
	if (m->verdict == V_REFUSE)
		want(F.cl[m->to].anon_errors > m->anon_before,
		     "a refused CONNECT got no ERROR");
}

void fs_check_fill(struct mfill *m)
{
	if (!m->strict || !m->ok || F.sess[m->sess].unmapped || fs_lost())
		return;
	want(m->answer == A_RESULT && m->status == 0,
	     "a FILL sent to an idle server did not complete");
}

/* ---- an input ------------------------------------------------------ */

static void finish_input(void)
{
	struct fill_server_stats st;
	ssize_t stray;

	F.op = FS_OPS_MAX;
	fs_pump();
	fs_check_quiet();
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
		    fs_lost())
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

			fs_send_msg(F.sess[i].owner, F.out, (size_t)n, 1);
		}
	}
	fs_pump();
	server_stats(&st);
	if (st.active != 0) {
		char why[96];

		snprintf(why, sizeof(why),
			 "%" PRIu64 " sessions left after every BYE",
			 st.active);
		fail(why);
	}
	/* No byte that no checked FILL names has changed. */
	stray = fs_first_stray();
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
		.admit = fs_admit,
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
	fs_pump();
	for (F.op = 0; F.op < FS_OPS_MAX && in.left > 0; F.op++)
		fs_run_op(&in);
	finish_input();
	return 0;
}
