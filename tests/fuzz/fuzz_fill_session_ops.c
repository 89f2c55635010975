/* SPDX-License-Identifier: MIT */
/*
 * fuzz_fill_session's operations (fuzz_fill_session_int.h): each turns
 * its bytes of the input (fuzz_fill_session.h) into a message a client
 * sends, or into an event (a client gone, every session idle), and checks
 * the outcome the model is sure of.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <tern/tern.h>

#include "core/core.h"
#include "wire/wire.h"
#include "apps/fill/fill.h"
#include "fuzz_fill_session_int.h"

/* ---- operations ---------------------------------------------------- */

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
	int strict = F.quiet && !batch && !fs_model_uncertain();
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
	if (fs_send_msg(c, F.out, (size_t)n, 1) != 0)
		return;
	want(F.nconn == before + 1, "the CONNECT's record");
	/* The record fs_model_sent() made. With nothing else in flight, the
	 * limits decide what the server does with a CONNECT it can take. */
	m = &F.conn[F.nconn - 1];
	if (m->verdict == V_ANY && strict)
		m->verdict = fs_live_count(m->to) < MAX_PER_CLIENT &&
					     fs_live_count(-1) < MAX_SESSIONS
				     ? V_ACCEPT
				     : V_REFUSE;
	m->strict = strict && m->verdict != V_SILENT;
	if (!batch) {
		fs_pump();
		fs_check_connect(m);
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

	fs_send_msg(c, F.out, len, batch);
	if (!batch && F.nfill > before)
		fs_check_fill(&F.fill[F.nfill - 1]);
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
	fs_send_msg(c, F.out, len, batch);
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
	fs_send_msg(c, F.out, (size_t)n, batch);
}

static void op_raw(struct input *in, int c, int batch)
{
	size_t len = get8(in);

	for (size_t i = 0; i < len; i++)
		F.out[i] = get8(in);
	trace("op %d: %zu raw bytes\n", F.op, len);
	fs_send_msg(c, F.out, len, batch);
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
	fs_send_msg(c, F.out, FILL_HDR + len, batch);
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
	fs_send_msg(c, F.out, len, batch);
}

/* The client's bootstrap connection closed: its sessions end. */
static void op_gone(int c)
{
	int strict = F.quiet && !fs_model_uncertain();
	int expect = fs_live_count(c);
	int n = fill_server_peer_gone(F.srv, F.cl[c].card, F.cl[c].card_len,
				      "bootstrap connection closed");

	trace("op %d: client %d gone: %d sessions ended\n", F.op, c, n);
	want(n >= 0, "peer_gone failed");
	if (strict && !fs_lost())
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
	fs_pump();
	server_stats(&st);
	/* Ends after about IDLE_MS; the bound is for a loaded machine. */
	while (tern__now_ns() - t0 < 20 * IDLE_MS * 1000000ULL) {
		fs_pump();
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

void fs_run_op(struct input *in)
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
		fs_pump();
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
		fs_check_quiet();
}
