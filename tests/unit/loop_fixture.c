/* SPDX-License-Identifier: MIT */
/* The engine's unit tests' shared helpers (loop_fixture.h). */
#include <stdint.h>

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
