/* SPDX-License-Identifier: MIT */
/* The engine's unit tests' fixture (fake_env.h). */
#include <stdlib.h>
#include <string.h>

#include "fake_env.h"

int local_desc_token[FAKE_RAILS];

int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct tern_rail *rail;

	if (e == NULL)
		return -1;
	fake_reset();
	e->ctx = calloc(1, sizeof(*e->ctx));
	if (e->ctx == NULL) {
		free(e);
		return -1;
	}
	e->ctx->nrails = 1;
	e->ctx->post_batch = 4;
	e->ctx->caps.tx_size = 8;
	e->ctx->caps.rx_size = 8;
	e->ctx->max_msg_size = 1ULL << 30;
	e->ctx->max_rma_size = 1ULL << 30;
	e->ctx->caps.tagged = 1;
	e->ctx->nbi_max = 1u << 16;
	if (tern__imm_init(&e->ctx->imm) != 0) {
		free(e->ctx);
		free(e);
		return -1;
	}
	/* FAKE_RAILS rails are wired; ctx->nrails says how many are used. */
	for (unsigned int r = 0; r < FAKE_RAILS; r++) {
		rail = &e->ctx->rails[r];
		fk.rails[r] = &rail->prov;
		rail->ctx = e->ctx;
		rail->idx = r;
		rail->tx_credits = 8;
		rail->rx_credits = 8;
		rail->wait_fd = -1; /* the fake offers no wait fd: polling */
		/* One slot per credit, as rail_open() makes them. */
		rail->slots = calloc(8, sizeof(*rail->slots));
		rail->free_slots = calloc(8, sizeof(*rail->free_slots));
		rail->slots_span = 8 * sizeof(*rail->slots);
		if (rail->slots == NULL || rail->free_slots == NULL)
			return -1;
		for (rail->nfree = 0; rail->nfree < 8; rail->nfree++)
			rail->free_slots[rail->nfree] = 7 - rail->nfree;
	}
	if (tern__loop_init(e->ctx) != 0) {
		tern__imm_fini(&e->ctx->imm);
		free(e->ctx);
		free(e);
		return -1;
	}

	e->peer.ctx = e->ctx;
	e->peer.nrails = 1;
	e->peer.fiaddr[0] = PEER_ADDR;

	e->mr.ctx = e->ctx;
	e->mr.buf = e->buf;
	e->mr.len = sizeof(e->buf);
	e->mr.access = TERN_ACCESS_LOCAL;
	e->mr.desc[0] = &local_desc_token[0];
	for (unsigned int r = 1; r < FAKE_RAILS; r++)
		e->mr.desc[r] = &local_desc_token[r];

	e->rdesc.base = RBASE;
	e->rdesc.len = RLEN;
	e->rdesc.flags = TERN_MR_DESC_VIRT_ADDR | TERN_MR_DESC_REMOTE_WRITE;
	e->rdesc.nkeys = 1;
	e->rdesc.keys[0] = RKEY;
	*state = e;
	return 0;
}

int teardown(void **state)
{
	struct env *e = *state;

	free(e->peer.paths);		    /* a rail went down (failover.c) */
	tern__stamps_put(e->ctx, &e->peer); /* stamped (dedup.h) */
	free(e->ctx->stamps_of);
	free(e->ctx->tag_src);
	tern__redo_fini(e->ctx);
	tern__nbi_scope_fini(e->ctx, &e->peer.nbi);
	tern__nbi_fini(e->ctx);
	tern__loop_fini(e->ctx);
	tern__imm_fini(&e->ctx->imm);
	for (unsigned int r = 0; r < FAKE_RAILS; r++) {
		free(e->ctx->rails[r].slots);
		free(e->ctx->rails[r].free_slots);
		free(e->ctx->rails[r].sync_ring);
		free(e->ctx->rails[r].src_of);
	}
	free(e->ctx);
	free(e);
	return 0;
}

static void track_cb(struct tern_req *req)
{
	struct tracked *t = req->data;

	t->calls++;
	t->status = req->status;
	t->done_in_cb = req->done;
}

void track_init(struct tracked *t)
{
	memset(t, 0, sizeof(*t));
	tern_req_init(&t->req, track_cb, t);
}
