/* SPDX-License-Identifier: MIT */
/*
 * The fake provider (fake_prov.h): src/prov/prov.h implemented with
 * recorded calls, scripted post results and scripted completions. The
 * calls a hand-built ctx never makes (getinfo, opening rails, regions,
 * addresses) fail the test.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_prov.h"

struct fake fk;

void fake_reset(void)
{
	memset(&fk, 0, sizeof(fk));
}

static unsigned int fake_rail_of(const struct tern__prov_rail *r)
{
	for (unsigned int i = 0; i < FAKE_RAILS; i++) {
		if (fk.rails[i] == r)
			return i;
	}
	fail_msg("call on an unknown rail");
	return 0;
}

/* Rail whose endpoint last took @context (rail 0 for none). */
static unsigned int fake_rail_of_context(const void *context)
{
	for (size_t i = fk.ncalls; i > 0; i--) {
		if (fk.calls[i - 1].context == context &&
		    fk.calls[i - 1].op != FOP_CANCEL)
			return fk.calls[i - 1].rail;
	}
	return 0;
}

void fake_cq_push(unsigned int rail, const struct fake_cqe *c)
{
	assert_true(rail < FAKE_RAILS);
	assert_true(fk.cq_len[rail] < FAKE_MAX_CQ);
	fk.cq[rail][fk.cq_len[rail]++] = *c;
}

void cq_ok(void *context, size_t len, uint64_t flags, uint64_t data)
{
	struct fake_cqe c = {
		.ent.e = { .op_context = context,
			   .flags = flags,
			   .len = len,
			   .data = data },
	};

	fake_cq_push(fake_rail_of_context(context), &c);
}

void cq_imm_on(unsigned int rail, uint32_t imm)
{
	struct fake_cqe c = {
		.ent.e = { .flags = TERN__CQ_REMOTE_WRITE | TERN__CQ_IMM,
			   .data = imm },
	};

	fake_cq_push(rail, &c);
}

void cq_imm(uint32_t imm)
{
	cq_imm_on(0, imm);
}

void cq_imm_from(uint64_t src, uint32_t imm)
{
	struct fake_cqe c = {
		.ent.e = { .flags = TERN__CQ_REMOTE_WRITE | TERN__CQ_IMM,
			   .data = imm },
		.src = src,
	};

	fake_cq_push(0, &c);
}

void cq_imm_data(unsigned int rail, uint64_t src, uint64_t data)
{
	struct fake_cqe c = {
		.ent.e = { .flags = TERN__CQ_REMOTE_WRITE | TERN__CQ_IMM,
			   .data = data },
		.src = src,
	};

	fake_cq_push(rail, &c);
}

void cq_msg_from(void *context, uint64_t src, size_t len)
{
	struct fake_cqe c = {
		.ent.e = { .op_context = context, .len = len },
		.src = src,
	};

	fake_cq_push(0, &c);
}

void cq_err(void *context, int status, int prov_errno, size_t len)
{
	struct fake_cqe c = {
		.is_err = 1,
		.err = { .context = context,
			 .status = status,
			 .prov_errno = prov_errno,
			 .len = len },
	};

	fake_cq_push(fake_rail_of_context(context), &c);
}

void cq_err_path(void *context, int status)
{
	struct fake_cqe c = {
		.is_err = 1,
		.err = { .context = context, .status = status, .path = 1 },
	};

	fake_cq_push(fake_rail_of_context(context), &c);
}

size_t fake_count(enum fake_op op)
{
	size_t n = 0;

	for (size_t i = 0; i < fk.ncalls; i++)
		n += fk.calls[i].op == op;
	return n;
}

long fake_last_ok_post(void)
{
	for (size_t i = fk.ncalls; i > 0; i--) {
		const struct fake_call *c = &fk.calls[i - 1];

		if (c->op != FOP_CANCEL && c->op != FOP_SINK_RECV &&
		    c->ret == 0)
			return (long)(i - 1);
	}
	return -1;
}

void fake_script(size_t n, const ssize_t *rets)
{
	assert_true(n <= FAKE_MAX_SCRIPT);
	memcpy(fk.script, rets, n * sizeof(*rets));
	fk.nscript = n;
	fk.script_pos = 0;
}

static ssize_t fake_record(struct fake_call *c)
{
	ssize_t ret = 0;

	if (fk.script_pos < fk.nscript)
		ret = fk.script[fk.script_pos++];
	if (ret == 0 && fk.inject_takes && (c->flags & TERN__PF_INJECT))
		ret = TERN__PROV_TAKEN;
	c->ret = ret;
	c->cq_reads = fk.cq_reads;
	assert_true(fk.ncalls < FAKE_MAX_CALLS);
	fk.calls[fk.ncalls++] = *c;
	if (ret == 0 && fk.auto_complete)
		cq_ok(c->context, c->len, 0, 0);
	return ret;
}

/* ---- The data path ---- */

ssize_t tern__prov_tsend(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, uint64_t data,
			 void *context, uint64_t flags)
{
	struct fake_call c = {
		.op = FOP_SEND,
		.rail = fake_rail_of(r),
		.flags = flags,
		.addr = addr,
		.buf = buf,
		.len = len,
		.desc = desc,
		.data = data,
		.context = context,
	};

	return fake_record(&c);
}

ssize_t tern__prov_ctrl_send(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, uint64_t addr, void *context)
{
	struct fake_call c = {
		.op = FOP_CTRL_SEND,
		.rail = fake_rail_of(r),
		.addr = addr,
		.buf = buf,
		.len = len,
		.desc = desc,
		.context = context,
	};

	return fake_record(&c);
}

ssize_t tern__prov_ctrl_recv(struct tern__prov_rail *r, void *buf, size_t len,
			     void *desc, void *context)
{
	struct fake_call c = {
		.op = FOP_CTRL_RECV,
		.rail = fake_rail_of(r),
		.buf = buf,
		.len = len,
		.desc = desc,
		.context = context,
	};

	return fake_record(&c);
}

/* An untagged receive (the engine's message buffers): FOP_BOUNCE_RECV. */
ssize_t tern__prov_recv(struct tern__prov_rail *r, void *buf, size_t len,
			void *desc, void *context)
{
	struct fake_call c = {
		.op = FOP_BOUNCE_RECV,
		.rail = fake_rail_of(r),
		.buf = buf,
		.len = len,
		.desc = desc,
		.context = context,
	};

	return fake_record(&c);
}

ssize_t tern__prov_trecv(struct tern__prov_rail *r, void *buf, size_t len,
			 void *desc, uint64_t addr, void *context,
			 uint64_t flags)
{
	struct fake_call c = {
		.op = FOP_RECV,
		.rail = fake_rail_of(r),
		.flags = flags,
		.addr = addr,
		.buf = buf,
		.len = len,
		.desc = desc,
		.context = context,
	};

	return fake_record(&c);
}

ssize_t tern__prov_rma(struct tern__prov_rail *r, int read, void *buf,
		       size_t len, void *desc, uint64_t addr, uint64_t raddr,
		       uint64_t key, uint64_t data, void *context,
		       uint64_t flags)
{
	struct fake_call c = {
		.op = read ? FOP_READ : FOP_WRITE,
		.rail = fake_rail_of(r),
		.flags = flags,
		.addr = addr,
		.buf = buf,
		.len = len,
		.desc = desc,
		.raddr = raddr,
		.rlen = len,
		.rkey = key,
		.data = data,
		.context = context,
	};

	return fake_record(&c);
}

ssize_t tern__prov_atomic(struct tern__prov_rail *r, int fadd, uint64_t *w,
			  void *desc, uint64_t addr, uint64_t raddr,
			  uint64_t key, void *context, uint64_t flags)
{
	struct fake_call c = {
		.op = FOP_ATOMIC,
		.rail = fake_rail_of(r),
		.flags = flags,
		.addr = addr,
		.buf = w,
		.len = 8,
		.desc = desc,
		.raddr = raddr,
		.rlen = 8,
		.rkey = key,
		.data = (uint64_t)fadd,
		.context = context,
	};

	return fake_record(&c);
}

/* Only sink receives are re-posted so; none exist here. */
ssize_t tern__prov_recv_sink(struct tern__prov_rail *r, void *context)
{
	struct fake_call c = { .op = FOP_SINK_RECV,
			       .rail = fake_rail_of(r),
			       .context = context };

	assert_true(fk.ncalls < FAKE_MAX_CALLS);
	fk.calls[fk.ncalls++] = c;
	return 0;
}

int tern__prov_cancel(struct tern__prov_rail *r, void *context)
{
	struct fake_call c = { .op = FOP_CANCEL,
			       .rail = fake_rail_of(r),
			       .context = context,
			       .ret = fk.cancel_ret };

	assert_true(fk.ncalls < FAKE_MAX_CALLS);
	fk.calls[fk.ncalls++] = c;
	if (fk.cancel_ret == 0 && fk.cancel_completes)
		cq_err(context, -ECANCELED, 0, 0);
	return fk.cancel_ret == 0 ? 0 : -TERN_EPROV;
}

int tern__prov_post_error(ssize_t ret, char *msg, size_t len, int *prov_errno_p)
{
	if (ret == -EAGAIN)
		return -EAGAIN;
	snprintf(msg, len, "post: fake post error %zd", ret);
	*prov_errno_p = (int)-ret;
	return (int)ret;
}

int tern__prov_cq_failed(unsigned int idx, ssize_t ret)
{
	(void)idx;
	(void)ret;
	return -TERN_EPROV;
}

ssize_t tern__prov_cq_read(struct tern__prov_rail *rail,
			   struct tern__prov_cqent *out, size_t count,
			   uint64_t *src)
{
	unsigned int r = fake_rail_of(rail);
	struct fake_cqe *q = fk.cq[r];
	size_t n = 0, *pos = &fk.cq_pos[r];

	fk.cq_reads++;
	if (count > fk.cq_max_count)
		fk.cq_max_count = count;
	if (fk.cq_fail != 0)
		return fk.cq_fail;
	if (*pos == fk.cq_len[r] && r == 0 && fk.gen_left > 0) {
		for (; n < count && fk.gen_left > 0; n++, fk.gen_left--) {
			out[n] = (struct tern__prov_cqent){
				.e = { .flags = TERN__CQ_REMOTE_WRITE |
						TERN__CQ_IMM,
				       .data = fk.gen_next++ },
			};
			if (rail->source)
				src[n] = TERN__PROV_ADDR_NONE;
		}
		return (ssize_t)n;
	}
	if (*pos == fk.cq_len[r])
		return TERN__PROV_CQ_EMPTY;
	if (q[*pos].is_err)
		return TERN__PROV_CQ_ERROR;
	while (n < count && *pos < fk.cq_len[r] && !q[*pos].is_err) {
		/* As fi_cq_readfrom(): where the rail has FI_SOURCE. */
		if (rail->source)
			src[n] = q[*pos].src;
		out[n++] = q[(*pos)++].ent;
	}
	return (ssize_t)n;
}

int tern__prov_cq_readerr(struct tern__prov_rail *rail, unsigned int idx,
			  struct tern__prov_cqerr *err)
{
	unsigned int r = fake_rail_of(rail);
	const struct fake_cqe *c;

	if (fk.cq_pos[r] == fk.cq_len[r] || !fk.cq[r][fk.cq_pos[r]].is_err)
		return 0;
	c = &fk.cq[r][fk.cq_pos[r]++];
	*err = (struct tern__prov_cqerr){
		.context = c->err.context,
		.len = c->err.len,
		.status = c->err.status,
		.prov_errno = c->err.prov_errno,
		.what = "fake completion error",
		.tx_orphan = c->err.tx_orphan,
		.path = c->err.path,
	};
	/* The provider's own text only where it gave an errno. */
	if (c->err.prov_errno != 0)
		snprintf(err->text, sizeof(err->text), "rail %u: %s: %s (%d)",
			 idx, err->what, FAKE_PROV_TEXT, c->err.prov_errno);
	else
		snprintf(err->text, sizeof(err->text), "rail %u: %s", idx,
			 err->what);
	return 1;
}

/* ---- What a hand-built ctx never calls ---- */

int tern__prov_choose(struct tern__prov *p, const struct tern__prov_want *w,
		      struct tern__prov_rail *const *rails)
{
	(void)p;
	(void)w;
	(void)rails;
	fail_msg("the fake provider offers nothing to choose");
	return -TERN_ENOPROV;
}

void tern__prov_caps(const struct tern__prov *p,
		     struct tern__prov_rail *const *rails, unsigned int n,
		     struct tern__prov_caps *caps)
{
	(void)p;
	(void)rails;
	(void)n;
	memset(caps, 0, sizeof(*caps));
	fail_msg("unexpected call");
}

int tern__prov_open(struct tern__prov *p, struct tern__prov_rail *const *rails,
		    unsigned int n)
{
	(void)p;
	(void)rails;
	(void)n;
	fail_msg("unexpected call");
	return -TERN_EPROV;
}

void tern__prov_close(struct tern__prov *p,
		      struct tern__prov_rail *const *rails, unsigned int n)
{
	(void)p;
	(void)rails;
	(void)n;
}

int tern__prov_rail_open(struct tern__prov *p, struct tern__prov_rail *r,
			 unsigned int idx, int busy_poll, void *addr,
			 size_t *addrlen_p, int *wait_fd_p)
{
	(void)p;
	(void)r;
	(void)idx;
	(void)busy_poll;
	(void)addr;
	(void)addrlen_p;
	(void)wait_fd_p;
	fail_msg("unexpected call");
	return -TERN_EPROV;
}

void tern__prov_rail_close_ep(struct tern__prov_rail *r)
{
	(void)r;
}

void tern__prov_rail_close(struct tern__prov_rail *r)
{
	(void)r;
}

int tern__prov_atomic_ok(struct tern__prov_rail *const *rails,
			 const struct tern__prov *p, unsigned int n, int fadd)
{
	(void)rails;
	(void)p;
	(void)n;
	(void)fadd;
	return 0;
}

/* The fake offers no wait fd: the loop polls, and never asks this. */
int tern__prov_trywait(const struct tern__prov *p,
		       struct tern__prov_rail *const *rails, unsigned int n)
{
	(void)p;
	(void)rails;
	(void)n;
	return -EAGAIN;
}

int tern__prov_mr_reg(struct tern__prov_rail *r, unsigned int idx, void *buf,
		      size_t len, uint64_t access, uint64_t requested_key,
		      int device, int dmabuf_fd, uint64_t dmabuf_off,
		      int bind_ep, struct tern__prov_mr **mr_p, void **desc_p,
		      uint64_t *key_p)
{
	(void)r;
	(void)idx;
	(void)buf;
	(void)len;
	(void)access;
	(void)requested_key;
	(void)device;
	(void)dmabuf_fd;
	(void)dmabuf_off;
	(void)bind_ep;
	(void)mr_p;
	(void)desc_p;
	(void)key_p;
	fail_msg("the fake provider registers no memory");
	return -TERN_EPROV;
}

void tern__prov_mr_close(struct tern__prov_mr *mr)
{
	(void)mr;
}

int tern__prov_has_dmabuf(void)
{
	return 0;
}

int tern__prov_av_insert(struct tern__prov_rail *r, unsigned int idx,
			 const void *addr, uint64_t *fiaddr_p)
{
	(void)r;
	(void)idx;
	(void)addr;
	(void)fiaddr_p;
	fail_msg("the fake provider inserts no address");
	return -TERN_EPROV;
}

void tern__prov_av_remove(struct tern__prov_rail *r, uint64_t fiaddr)
{
	(void)r;
	(void)fiaddr;
}

void tern__prov_rail_deliver(struct tern__prov_rail *r)
{
	r->tx_flags = 1; /* noted; the fake completes as told */
}

int tern__prov_fence(const void *mine, size_t mlen, const void *theirs,
		     size_t tlen, int any_port)
{
	(void)mine;
	(void)mlen;
	(void)theirs;
	(void)tlen;
	(void)any_port;
	fail_msg("the fake provider has no connections to fence");
	return -EAFNOSUPPORT;
}

/* Named in the ctx's log line. */
const char *tern_fabric_version(void)
{
	return "fake";
}

const char *tern_fabric_build_version(void)
{
	return "fake";
}

const char *tern_fabric_api_version(void)
{
	return "fake";
}

void tern__prov_rail_limits(const struct tern__prov *p,
			    const struct tern__prov_rail *r, uint64_t *msg_p,
			    uint64_t *rma_p)
{
	(void)p;
	(void)r;
	fail_msg("a hand-built ctx asked for its rails' limits");
	*msg_p = *rma_p = 0;
}
