/* SPDX-License-Identifier: MIT */
/*
 * The store world: a key-value store the caller supplies as two
 * callbacks (struct tern_world_store in tern/world.h), such as a
 * torch.distributed Store reached from Python. Rank r's value NAME is the
 * key "PREFIX/r/NAME"; fence G is one key per rank, "PREFIX/fence/G/r".
 * Reads ask the store with a short timeout, growing from 0 to 20 ms, and
 * let the ctx progress between asks. No thread and no membership: a rank
 * that leaves is never reported gone (what waits for it times out). What
 * the store returns is untrusted: a value longer than tern ever writes is
 * refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/core.h"
#include "world.h"

#define STORE_ASK_MAX_MS 20
/* "PREFIX/" + "fence/" + a generation + "/" + a rank, or + a rank + "/"
 * + a name */
#define STORE_KEY_MAX (TERN_WORLD_PREFIX_MAX + 96)

struct store_world {
	struct tern_world_store s;
	char prefix[TERN_WORLD_PREFIX_MAX + 2]; /* "PREFIX/", or "" */
};

static struct store_world *sw(struct tern_world *w)
{
	return w->be;
}

int tern__world_store_open(struct tern_world *w,
			   const struct tern_world_store *store)
{
	struct store_world *s;
	size_t plen;

	if (store == NULL || store->set == NULL || store->get == NULL) {
		tern__warn("world store: pass a store with both set and get");
		return -EINVAL;
	}
	plen = store->prefix != NULL ? strlen(store->prefix) : 0;
	if (plen > TERN_WORLD_PREFIX_MAX) {
		tern__warn("world store: a prefix of %zu characters, more than "
			   "%d",
			   plen, TERN_WORLD_PREFIX_MAX);
		return -EINVAL;
	}
	if (w->rank < 0 || w->size <= 0) {
		tern__warn("world store: rank %d of %d: a store world needs "
			   "this rank and the world's size in its attr",
			   w->rank, w->size);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->s = *store;
	if (plen > 0)
		snprintf(s->prefix, sizeof(s->prefix), "%s/", store->prefix);
	s->s.prefix = s->prefix;
	w->be = s;
	return 0;
}

/* Sleep @ns, but not past @deadline_ns. */
static void nap(uint64_t ns, uint64_t deadline_ns)
{
	uint64_t now = tern__now_ns();
	struct timespec ts;

	if (now >= deadline_ns)
		return;
	if (ns > deadline_ns - now)
		ns = deadline_ns - now;
	ts.tv_sec = (time_t)(ns / 1000000000ULL);
	ts.tv_nsec = (long)(ns % 1000000000ULL);
	nanosleep(&ts, NULL);
}

/*
 * Ask the store for @key until it is there or @deadline_ns passes: the
 * store's answer (the value's whole length); -ETIMEDOUT; -TERN_EPROV when
 * the store failed (logged here).
 */
static ssize_t ask(struct tern_world *w, const char *key, void *buf, size_t len,
		   uint64_t deadline_ns)
{
	struct store_world *s = sw(w);
	unsigned int ms = 0;

	for (;;) {
		uint64_t t0 = tern__now_ns(), now;
		ssize_t n = s->s.get(s->s.arg, key, buf, len, (int)ms);

		if (n >= 0)
			return n;
		if (n != -ENOENT && n != -ETIMEDOUT) {
			tern__warn("world store: get '%s': %s", key,
				   tern_strerror((int)n));
			return -TERN_EPROV;
		}
		now = tern__now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		tern__world_idle(w);
		/* A store that answered sooner than asked: wait the rest. */
		if (now - t0 < (uint64_t)ms * 1000000ULL)
			nap((uint64_t)ms * 1000000ULL - (now - t0),
			    deadline_ns);
		ms = ms == 0 ? 1 : ms * 2;
		if (ms > STORE_ASK_MAX_MS)
			ms = STORE_ASK_MAX_MS;
	}
}

/* Store @key = @val: 0, or -TERN_EPROV when the store failed (logged). */
static int set(struct tern_world *w, const char *key, const void *val,
	       size_t len)
{
	struct store_world *s = sw(w);
	int ret = s->s.set(s->s.arg, key, val, len);

	if (ret < 0) {
		tern__warn("world store: set '%s' (%zu bytes): %s", key, len,
			   tern_strerror(ret));
		return -TERN_EPROV;
	}
	return 0;
}

static int store_put(struct tern_world *w, const char *name, const void *val,
		     size_t len)
{
	char key[STORE_KEY_MAX];

	snprintf(key, sizeof(key), "%s%d/%s", sw(w)->prefix, w->rank, name);
	return set(w, key, val, len);
}

static ssize_t store_get(struct tern_world *w, int rank, const char *name,
			 void *buf, size_t len, uint64_t deadline_ns)
{
	size_t max = strcmp(name, "card") == 0 ? TERN_CARD_MAX
					       : TERN_WORLD_VALUE_MAX;
	struct store_world *s = sw(w);
	char key[STORE_KEY_MAX];
	ssize_t n;

	snprintf(key, sizeof(key), "%s%d/%s", s->prefix, rank, name);
	n = ask(w, key, buf, len, deadline_ns);
	if (n == -ETIMEDOUT)
		tern__warn("world store: rank %d has not published '%s' (key "
			   "'%s')",
			   rank, name, key);
	if (n < 0)
		return n;
	if ((size_t)n > max) {
		tern__warn("world store: '%s': %zd bytes, not a value tern "
			   "wrote (at most %zu)",
			   key, n, max);
		return -TERN_EPROTO;
	}
	return (size_t)n > len ? -ENOSPC : n;
}

static int store_fence(struct tern_world *w, uint64_t gen, uint64_t deadline_ns)
{
	struct store_world *s = sw(w);
	char key[STORE_KEY_MAX];
	uint8_t mark[8];
	ssize_t n;
	int ret;

	snprintf(key, sizeof(key), "%sfence/%llu/%d", s->prefix,
		 (unsigned long long)gen, w->rank);
	ret = set(w, key, "1", 1);
	if (ret != 0)
		return ret;
	/* Wait for each rank in turn: one found stays found. */
	for (int r = 0; r < w->size; r++) {
		if (r == w->rank || !tern_world_alive(w, r))
			continue;
		snprintf(key, sizeof(key), "%sfence/%llu/%d", s->prefix,
			 (unsigned long long)gen, r);
		n = ask(w, key, mark, sizeof(mark), deadline_ns);
		if (n == -ETIMEDOUT)
			tern__warn("world store: fence %llu: rank %d never "
				   "came (key '%s')",
				   (unsigned long long)gen, r, key);
		if (n < 0)
			return (int)n;
	}
	return 0;
}

static void store_close(struct tern_world *w)
{
	free(w->be);
	w->be = NULL;
}

const struct tern__world_ops tern__world_store = {
	.kind = "store",
	.put = store_put,
	.get = store_get,
	.fence = store_fence,
	.close = store_close,
};
