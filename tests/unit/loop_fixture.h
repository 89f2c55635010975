/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the progress engine's unit tests (test_loop_*.c, one
 * program per topic). The engine (src/engine/) is built over the fake
 * provider (fake_prov.c implements src/prov/prov.h, the engine's one view
 * of libfabric), so a hand-built ctx runs the real engine with no
 * provider: fake_env.h (setup() and teardown() of a struct env, and
 * requests that record their callbacks). Every provider call is recorded;
 * post results and completion queue contents are scripted per test
 * (fake_prov.h). Here: the helpers every topic uses.
 */
#ifndef TERN_TEST_LOOP_FIXTURE_H
#define TERN_TEST_LOOP_FIXTURE_H

#include "fake_env.h"

/* Queue a write of 64 bytes from slot @i of the buffer to offset 64*i. */
int write_nth(struct env *e, struct tracked *t, unsigned int i);

/* The context @t's request is posted with (what its completions carry). */
void *ctx_of(struct tracked *t);

/* Two rails to the peer, each with its own key; writes longer than 1 KiB
 * striped; failover on, a first cooldown of @cooldown_ms; probes from
 * the buffer (tern's own scratch). */
void two_rails(struct env *e, uint32_t cooldown_ms);

/* Sleep @ms milliseconds. */
void sleep_ms(long ms);

#endif /* TERN_TEST_LOOP_FIXTURE_H */
