/* SPDX-License-Identifier: MIT */
/* The engine's unit tests' shared helpers (loop_fixture.h). */
#include <stdint.h>
#include <time.h>

#include "engine/engine.h"
#include "loop_fixture.h"

int write_nth(struct env *e, struct tracked *t, unsigned int i)
{
	track_init(t);
	return tern_write(&e->peer, &e->mr, e->buf + 64 * (i % 64), 64,
			  &e->rdesc, 64 * (uint64_t)i, &t->req);
}

void *ctx_of(struct tracked *t)
{
	return tern__rp(&t->req)->fictx;
}

void two_rails(struct env *e, uint32_t cooldown_ms)
{
	e->ctx->nrails = 2;
	e->ctx->stripe_chunk = 1024;
	e->ctx->failover = 1;
	e->ctx->cooldown_ms = cooldown_ms;
	e->peer.nrails = 2;
	e->peer.fiaddr[1] = PEER_ADDR + 1;
	e->rdesc.nkeys = 2;
	e->rdesc.keys[1] = RKEY + 1;
	e->ctx->scratch_mr = &e->mr;
	e->ctx->scratch = (uint64_t *)(void *)e->buf;
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}
