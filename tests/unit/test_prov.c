/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of src/prov/ itself: what the provider layer hands libfabric.
 * The engine's tests (test_loop_*.c) run over a fake of prov.h and cannot
 * see this; here the real prov code runs over endpoints and completion queues
 * whose libfabric ops tables are fakes (its data-path calls are inline
 * wrappers over fid->ops), and every call is recorded.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "prov/prov.h"

enum rec_op {
	REC_WRITE = 1,
	REC_READ,
	REC_TSEND,
	REC_TRECV,
	REC_SEND,
	REC_RECV
};

static struct {
	enum rec_op op;
	uint64_t flags;
	fi_addr_t addr;
	uint64_t tag;
	size_t iov_count;
	size_t rma_count;
	void *buf;
	size_t len;
	void *desc;
	uint64_t raddr;
	size_t rlen;
	uint64_t rkey;
	uint64_t data;
	void *context;
	int calls;
	/* fi_cq_readerr's scripted entry, and what fi_cq_strerror was asked */
	struct fi_cq_err_entry err;
	ssize_t readerr_ret;
	int strerror_calls;
	int strerror_prov_errno;
	const void *strerror_err_data;
} rec;

static ssize_t fake_rma(enum rec_op op, const struct fi_msg_rma *msg,
			uint64_t flags)
{
	rec.op = op;
	rec.flags = flags;
	rec.addr = msg->addr;
	rec.iov_count = msg->iov_count;
	rec.rma_count = msg->rma_iov_count;
	rec.buf = msg->msg_iov[0].iov_base;
	rec.len = msg->msg_iov[0].iov_len;
	rec.desc = msg->desc != NULL ? msg->desc[0] : NULL;
	rec.raddr = msg->rma_iov[0].addr;
	rec.rlen = msg->rma_iov[0].len;
	rec.rkey = msg->rma_iov[0].key;
	rec.data = msg->data;
	rec.context = msg->context;
	rec.calls++;
	return 0;
}

static ssize_t fake_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			     uint64_t flags)
{
	(void)ep;
	return fake_rma(REC_WRITE, msg, flags);
}

static ssize_t fake_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	(void)ep;
	return fake_rma(REC_READ, msg, flags);
}

static ssize_t fake_tagged(enum rec_op op, const struct fi_msg_tagged *msg,
			   uint64_t flags)
{
	rec.op = op;
	rec.flags = flags;
	rec.addr = msg->addr;
	rec.tag = msg->tag;
	rec.iov_count = msg->iov_count;
	rec.buf = msg->msg_iov[0].iov_base;
	rec.len = msg->msg_iov[0].iov_len;
	rec.desc = msg->desc != NULL ? msg->desc[0] : NULL;
	rec.data = msg->data;
	rec.context = msg->context;
	rec.calls++;
	return 0;
}

static ssize_t fake_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			     uint64_t flags)
{
	(void)ep;
	return fake_tagged(REC_TSEND, msg, flags);
}

static ssize_t fake_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			     uint64_t flags)
{
	(void)ep;
	return fake_tagged(REC_TRECV, msg, flags);
}

static ssize_t fake_untagged(enum rec_op op, const struct fi_msg *msg,
			     uint64_t flags)
{
	rec.op = op;
	rec.flags = flags;
	rec.addr = msg->addr;
	rec.iov_count = msg->iov_count;
	rec.buf = msg->msg_iov[0].iov_base;
	rec.len = msg->msg_iov[0].iov_len;
	rec.desc = msg->desc != NULL ? msg->desc[0] : NULL;
	rec.data = msg->data;
	rec.context = msg->context;
	rec.calls++;
	return 0;
}

static ssize_t fake_sendmsg(struct fid_ep *ep, const struct fi_msg *msg,
			    uint64_t flags)
{
	(void)ep;
	return fake_untagged(REC_SEND, msg, flags);
}

static ssize_t fake_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			 fi_addr_t src, void *context)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg msg = { .msg_iov = &iov,
			      .desc = &desc,
			      .iov_count = 1,
			      .addr = src,
			      .context = context };

	(void)ep;
	return fake_untagged(REC_RECV, &msg, 0);
}

static ssize_t fake_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf,
			       uint64_t flags)
{
	(void)cq;
	(void)flags;
	if (rec.readerr_ret != 1)
		return rec.readerr_ret;
	*buf = rec.err;
	return 1;
}

static const char *fake_cq_strerror(struct fid_cq *cq, int prov_errno,
				    const void *err_data, char *buf, size_t len)
{
	(void)cq;
	rec.strerror_calls++;
	rec.strerror_prov_errno = prov_errno;
	rec.strerror_err_data = err_data;
	if (buf != NULL && len > 0)
		snprintf(buf, len, "fake says %d", prov_errno);
	return "fake says no";
}

static struct fi_ops_rma rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.writemsg = fake_writemsg,
	.readmsg = fake_readmsg,
};
static struct fi_ops_tagged tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.sendmsg = fake_tsendmsg,
	.recvmsg = fake_trecvmsg,
};
/* A provider without FI_TAGGED (efa-direct) has no tagged ops. */
static struct fi_ops_msg msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.sendmsg = fake_sendmsg,
	.recv = fake_recv,
};
static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.readerr = fake_cq_readerr,
	.strerror = fake_cq_strerror,
};

static struct fid_ep ep;
static struct fid_cq cq;
static struct tern__prov_rail rail;

static int setup(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	memset(&ep, 0, sizeof(ep));
	memset(&cq, 0, sizeof(cq));
	ep.fid.fclass = FI_CLASS_EP;
	ep.rma = &rma_ops;
	ep.tagged = &tagged_ops;
	ep.msg = &msg_ops;
	cq.fid.fclass = FI_CLASS_CQ;
	cq.ops = &cq_ops;
	rail = (struct tern__prov_rail){ .ep = &ep, .cq = &cq, .tagged = 1 };
	return 0;
}

/* A write is one iov to one remote iov, the flags are libfabric's own. */
static void test_rma_write_shape(void **state)
{
	char buf[64];
	int desc_token, ctx_token;

	(void)state;
	assert_int_equal(tern__prov_rma(&rail, 0, buf, sizeof(buf), &desc_token,
					7, 0x1000, 0xabc, 0x5a5a, &ctx_token,
					TERN__PF_MORE | TERN__PF_IMM),
			 0);
	assert_int_equal(rec.calls, 1);
	assert_int_equal(rec.op, REC_WRITE);
	assert_int_equal(rec.iov_count, 1);
	assert_int_equal(rec.rma_count, 1);
	assert_ptr_equal(rec.buf, buf);
	assert_int_equal(rec.len, sizeof(buf));
	assert_ptr_equal(rec.desc, &desc_token);
	assert_int_equal(rec.addr, 7);
	assert_int_equal(rec.raddr, 0x1000);
	assert_int_equal(rec.rlen, sizeof(buf));
	assert_int_equal(rec.rkey, 0xabc);
	assert_int_equal(rec.data, 0x5a5a);
	assert_ptr_equal(rec.context, &ctx_token);
	assert_int_equal(rec.flags, FI_MORE | FI_REMOTE_CQ_DATA);
}

static void test_rma_read_shape(void **state)
{
	char buf[16];

	(void)state;
	assert_int_equal(tern__prov_rma(&rail, 1, buf, sizeof(buf), NULL, 3,
					0x2000, 9, 0, NULL, 0),
			 0);
	assert_int_equal(rec.op, REC_READ);
	assert_int_equal(rec.iov_count, 1);
	assert_int_equal(rec.rma_count, 1);
	assert_int_equal(rec.flags, 0);
}

/* Receives match exactly the tag sends carry; a receive takes any peer. */
static void test_tagged_send_recv_tags(void **state)
{
	char buf[32];
	uint64_t send_tag;

	(void)state;
	assert_int_equal(tern__prov_tsend(&rail, buf, 8, NULL, 5, 0x77, NULL,
					  FI_REMOTE_CQ_DATA),
			 0);
	assert_int_equal(rec.op, REC_TSEND);
	assert_int_equal(rec.iov_count, 1);
	assert_int_equal(rec.addr, 5);
	assert_int_equal(rec.data, 0x77);
	assert_int_equal(rec.flags, FI_REMOTE_CQ_DATA);
	send_tag = rec.tag;
	assert_int_equal(tern__prov_trecv(&rail, buf, sizeof(buf), NULL,
					  FI_ADDR_UNSPEC, NULL, 0),
			 0);
	assert_int_equal(rec.op, REC_TRECV);
	assert_int_equal(rec.iov_count, 1);
	assert_int_equal(rec.addr, FI_ADDR_UNSPEC);
	assert_int_equal(rec.tag, send_tag);
}

/* On a rail without FI_TAGGED a message is an untagged fi_sendmsg with the
 * same fields, and the engine's own buffers are plain receives from any
 * peer, with their descriptor (FI_MR_LOCAL). */
static void test_untagged_send_recv(void **state)
{
	char buf[32];
	int desc_token;

	(void)state;
	ep.tagged = NULL; /* any tagged call would crash */
	rail.tagged = 0;
	assert_int_equal(tern__prov_tsend(&rail, buf, 8, &desc_token, 5, 0x77,
					  buf, FI_REMOTE_CQ_DATA),
			 0);
	assert_int_equal(rec.op, REC_SEND);
	assert_int_equal(rec.iov_count, 1);
	assert_int_equal(rec.addr, 5);
	assert_int_equal(rec.data, 0x77);
	assert_int_equal(rec.len, 8);
	assert_ptr_equal(rec.desc, &desc_token);
	assert_ptr_equal(rec.context, buf);
	assert_int_equal(rec.flags, FI_REMOTE_CQ_DATA);
	assert_int_equal(
		tern__prov_recv(&rail, buf, sizeof(buf), &desc_token, buf + 1),
		0);
	assert_int_equal(rec.op, REC_RECV);
	assert_int_equal(rec.addr, FI_ADDR_UNSPEC);
	assert_int_equal(rec.len, sizeof(buf));
	assert_ptr_equal(rec.desc, &desc_token);
	assert_ptr_equal(rec.context, buf + 1);
}

/* A completion error: the provider's text is asked for with its errno and
 * error data, and only when it gave an errno. */
static void test_cq_readerr_text(void **state)
{
	struct tern__prov_cqerr e;
	int ctx_token, data_token;

	(void)state;
	rec.readerr_ret = 1;
	rec.err = (struct fi_cq_err_entry){ .op_context = &ctx_token,
					    .err = FI_EIO,
					    .prov_errno = 5,
					    .err_data = &data_token,
					    .len = 12 };
	assert_int_equal(tern__prov_cq_readerr(&rail, 2, &e), 1);
	assert_ptr_equal(e.context, &ctx_token);
	assert_int_equal(e.len, 12);
	assert_int_equal(e.prov_errno, 5);
	assert_int_equal(e.status, tern__err_from_fi(FI_EIO));
	assert_int_equal(rec.strerror_calls, 1);
	assert_int_equal(rec.strerror_prov_errno, 5);
	assert_ptr_equal(rec.strerror_err_data, &data_token);
	assert_non_null(strstr(e.text, "rail 2: "));
	assert_non_null(strstr(e.text, "fake says no"));

	rec.strerror_calls = 0;
	rec.err.prov_errno = 0;
	assert_int_equal(tern__prov_cq_readerr(&rail, 0, &e), 1);
	assert_int_equal(rec.strerror_calls, 0);
	assert_null(strstr(e.text, "fake says"));

	rec.readerr_ret = -FI_EAGAIN;
	assert_int_equal(tern__prov_cq_readerr(&rail, 0, &e), 0);
	rec.readerr_ret = -FI_EINVAL;
	assert_int_equal(tern__prov_cq_readerr(&rail, 0, &e), -TERN_EPROV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_rma_write_shape, setup),
		cmocka_unit_test_setup(test_rma_read_shape, setup),
		cmocka_unit_test_setup(test_tagged_send_recv_tags, setup),
		cmocka_unit_test_setup(test_untagged_send_recv, setup),
		cmocka_unit_test_setup(test_cq_readerr_text, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
