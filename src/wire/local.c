/* SPDX-License-Identifier: MIT */
/* The same-host inbox's checks and the fd broker's codec (local.h). */
#include <stdio.h>

#include "local.h"
#include "wire.h"

const char *tern__lhdr_check(const struct tern__lhdr *h)
{
	if (h->magic != TERN__L_MAGIC)
		return "not a tern inbox (magic)";
	if (h->version != TERN__L_VERSION)
		return "an inbox of another layout (another tern version)";
	if (h->nreg != TERN__L_NREG || h->npeer != TERN__L_NPEER ||
	    h->ring != TERN__L_RING)
		return "an inbox of other sizes";
	return NULL;
}

/* A 64-bit mix (splitmix64's finaliser). */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t tern__lkeyhash(uint64_t salt, uint32_t nkeys, const uint64_t *keys)
{
	uint64_t h = mix(salt ^ 0x7465726e6b657973ULL) ^ nkeys;

	for (uint32_t i = 0; i < nkeys && i < TERN__L_MAXKEYS; i++)
		h = mix(h ^ mix(keys[i] + i));
	/* 0 is never a hash: an entry without one matches nothing. */
	return h != 0 ? h : 1;
}

long tern__lring_avail(uint64_t head, uint64_t tail)
{
	if (tail - head > TERN__L_RING)
		return -1;
	return (long)(tail - head);
}

ssize_t tern__lb_req_pack(const struct tern__lb_req *r, void *buf, size_t len)
{
	struct tern__wr w;

	if (r->nkeys > TERN__L_MAXKEYS)
		return -EINVAL;
	tern__wr_init(&w, buf, len);
	tern__wr_u32(&w, TERN__LB_MAGIC);
	tern__wr_u32(&w, r->what);
	tern__wr_u32(&w, r->idx);
	tern__wr_u32(&w, r->nkeys);
	tern__wr_u64(&w, r->nonce);
	for (uint32_t i = 0; i < r->nkeys; i++)
		tern__wr_u64(&w, r->keys[i]);
	return tern__wr_end(&w);
}

int tern__lb_req_parse(const void *buf, size_t len, struct tern__lb_req *r,
		       char *why, size_t whylen)
{
	struct tern__rd rd;
	uint32_t magic;

	tern__rd_init(&rd, buf, len);
	magic = tern__rd_u32(&rd);
	r->what = tern__rd_u32(&rd);
	r->idx = tern__rd_u32(&rd);
	r->nkeys = tern__rd_u32(&rd);
	r->nonce = tern__rd_u64(&rd);
	if (!tern__rd_ok(&rd) || magic != TERN__LB_MAGIC) {
		snprintf(why, whylen, "broker request: %s",
			 tern__rd_ok(&rd) ? "bad magic" : "short");
		return -EPROTO;
	}
	if (r->what != TERN__LB_INBOX && r->what != TERN__LB_REGION) {
		snprintf(why, whylen, "broker request: unknown what %u",
			 r->what);
		return -EPROTO;
	}
	if (r->nkeys > TERN__L_MAXKEYS || tern__rd_left(&rd) != 8 * r->nkeys) {
		snprintf(why, whylen,
			 "broker request: nkeys %u disagrees with its %zu "
			 "bytes",
			 r->nkeys, len);
		return -EPROTO;
	}
	if (r->what == TERN__LB_REGION && r->idx >= TERN__L_NREG) {
		snprintf(why, whylen, "broker request: region %u past %d",
			 r->idx, TERN__L_NREG);
		return -EPROTO;
	}
	for (uint32_t i = 0; i < r->nkeys; i++)
		r->keys[i] = tern__rd_u64(&rd);
	return 0;
}

ssize_t tern__lb_ans_pack(const struct tern__lb_ans *a, void *buf, size_t len)
{
	struct tern__wr w;

	tern__wr_init(&w, buf, len);
	tern__wr_u32(&w, TERN__LB_MAGIC);
	tern__wr_u32(&w, (uint32_t)a->status);
	tern__wr_u32(&w, a->what);
	tern__wr_u16(&w, (uint16_t)a->nfds);
	tern__wr_u16(&w, (uint16_t)a->rdonly);
	return tern__wr_end(&w);
}

int tern__lb_ans_parse(const void *buf, size_t len, struct tern__lb_ans *a,
		       char *why, size_t whylen)
{
	struct tern__rd rd;
	uint32_t magic;

	tern__rd_init(&rd, buf, len);
	magic = tern__rd_u32(&rd);
	a->status = (int32_t)tern__rd_u32(&rd);
	a->what = tern__rd_u32(&rd);
	a->nfds = tern__rd_u16(&rd);
	a->rdonly = tern__rd_u16(&rd);
	if (!tern__rd_ok(&rd) || tern__rd_left(&rd) != 0 ||
	    magic != TERN__LB_MAGIC) {
		snprintf(why, whylen, "broker answer: %s",
			 magic != TERN__LB_MAGIC ? "bad magic"
						 : "wrong length");
		return -EPROTO;
	}
	if (a->status > 0 || a->status < -4095 || a->nfds > 2 ||
	    a->rdonly > 1 || (a->status != 0 && a->nfds != 0)) {
		snprintf(why, whylen,
			 "broker answer: status %d with %u fds (rdonly %u)",
			 a->status, a->nfds, a->rdonly);
		return -EPROTO;
	}
	return 0;
}
