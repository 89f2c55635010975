/* SPDX-License-Identifier: MIT */
/*
 * A world of ranks over a key-value store (src/world/world.h): ranks,
 * cards, lazily added peers, published values, fences, and membership
 * events carried from a backend's thread to the ctx's loop.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../core/attr.h"
#include "../core/core.h"
#include "../engine/engine.h"
#include "../wire/card.h"
#include "world.h"

#define WORLD_TIMEOUT_MS 60000
#define WORLD_LEASE_S	 10

struct world_ev {
	int rank;
	enum tern_world_event ev;
};

struct tern__world_core {
	pthread_mutex_t lock; /* guards the event queue */
	struct world_ev *q;
	size_t nq, qcap;
	int efd;
	struct tern_io io;
	int cap;		  /* ranks the arrays below hold */
	struct tern_peer **peers; /* added on first use */
	unsigned char *gone;	  /* 1 once a rank left */
	void **cards;		  /* fetched cards, or NULL */
	size_t *card_len;
	uint64_t fence_gen;
	char kind[8];
};

/* tern_world_attr's fields (its field_mask) and their defaults. */
static const struct tern_world_attr world_attr_default = { .rank = -1 };
#define F(bit, m) \
	TERN__ATTR_FIELD(struct tern_world_attr, TERN_WORLD_ATTR_FIELD_##bit, m)
static const struct tern__attr_field world_attr_fields[] = {
	F(RANK, rank),	     F(SIZE, size),	      F(TIMEOUT_MS, timeout_ms),
	F(LEASE_S, lease_s), F(ON_MEMBER, on_member), F(ARG, arg),
};
#undef F
/* field_mask 0: 0.1's six fields, all of them. */
static const struct tern__attr_kind world_attr_kind = TERN__ATTR_KIND(
	tern_world_attr, world_attr_default, world_attr_fields,
	TERN_WORLD_ATTR_FIELDS_ALL);

int tern_world_attr_defaults(struct tern_world_attr *attr, uint64_t fields)
{
	return tern__attr_defaults(&world_attr_kind, attr, fields);
}

int tern__world_name_ok(const char *name)
{
	size_t n;

	if (name == NULL)
		return 0;
	n = strlen(name);
	if (n == 0 || n > TERN_WORLD_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

void tern__world_idle(struct tern_world *w)
{
	tern_progress(w->ctx);
}

uint64_t tern__world_deadline(const struct tern_world *w)
{
	return tern__now_ns() + (uint64_t)w->attr.timeout_ms * 1000000ULL;
}

/* A decimal int from the environment: 0 and *v, 1 when unset, -1 bad. */
static int env_int(const char *name, int *v)
{
	const char *s = getenv(name);
	char *end;
	long x;

	if (s == NULL || *s == '\0')
		return 1;
	errno = 0;
	x = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || x < 0 || x > INT_MAX) {
		tern__warn("$%s=%s: not a number of 0 or more", name, s);
		return -1;
	}
	*v = (int)x;
	return 0;
}

/* Grow the per-rank arrays to hold rank @r. */
static int core_reserve(struct tern__world_core *c, int r)
{
	int cap = c->cap ? c->cap : 8;

	if (r < c->cap)
		return 0;
	if (r >= TERN_WORLD_MAX_RANKS)
		return -EINVAL;
	while (cap <= r)
		cap *= 2;
	if (cap > TERN_WORLD_MAX_RANKS)
		cap = TERN_WORLD_MAX_RANKS;
#define GROW(field)                                                           \
	do {                                                                  \
		void *p = realloc(c->field, sizeof(*c->field) * (size_t)cap); \
		if (p == NULL)                                                \
			return -ENOMEM;                                       \
		c->field = p;                                                 \
		memset(&c->field[c->cap], 0,                                  \
		       sizeof(*c->field) * (size_t)(cap - c->cap));           \
	} while (0)
	GROW(peers);
	GROW(gone);
	GROW(cards);
	GROW(card_len);
#undef GROW
	c->cap = cap;
	return 0;
}

void tern__world_event(struct tern_world *w, int rank, enum tern_world_event ev)
{
	struct tern__world_core *c = w->core;
	uint64_t one = 1;

	pthread_mutex_lock(&c->lock);
	if (c->nq == c->qcap) {
		size_t cap = c->qcap ? c->qcap * 2 : 16;
		struct world_ev *q = realloc(c->q, sizeof(*q) * cap);

		if (q == NULL) {
			pthread_mutex_unlock(&c->lock);
			tern__warn("world: out of memory queueing an event of "
				   "rank %d",
				   rank);
			return;
		}
		c->q = q;
		c->qcap = cap;
	}
	c->q[c->nq++] = (struct world_ev){ rank, ev };
	pthread_mutex_unlock(&c->lock);
	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		tern__warn("world: eventfd: %s", strerror(errno));
}

/* Drop the peer of a rank that left: queued requests to it end. */
static void rank_gone(struct tern_world *w, int rank)
{
	struct tern__world_core *c = w->core;

	if (rank < 0 || rank >= c->cap || c->gone[rank])
		return;
	c->gone[rank] = 1;
	/* Requests to it and expectations counting on it fail now with
	 * -TERN_EPEERGONE, instead of waiting out their timeouts; the
	 * handle stays valid until it is removed (a rejoin, or close). */
	if (c->peers[rank] != NULL)
		tern__peer_gone(c->peers[rank]);
	free(c->cards[rank]);
	c->cards[rank] = NULL;
}

/* Events, from the ctx's loop. */
static void on_events(struct tern_io *io, unsigned int events)
{
	struct tern_world *w = io->data;
	struct tern__world_core *c = w->core;
	struct world_ev *q;
	uint64_t n;
	size_t nq;

	(void)events;
	if (read(c->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&c->lock);
	q = c->q;
	nq = c->nq;
	c->q = NULL;
	c->nq = c->qcap = 0;
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < nq; i++) {
		int r = q[i].rank;

		if (r < 0 || r >= TERN_WORLD_MAX_RANKS || r == w->rank)
			continue;
		if (q[i].ev == TERN_WORLD_JOINED) {
			if (core_reserve(c, r) != 0)
				continue;
			if (r >= w->size)
				w->size = r + 1;
			/* A rank back under the same number is a new process:
			 * its card is read again on first use. */
			if (c->gone[r] && c->peers[r] != NULL) {
				tern_peer_remove(c->peers[r]);
				c->peers[r] = NULL;
			}
			c->gone[r] = 0;
			tern__info("world: rank %d joined", r);
		} else if (q[i].ev == TERN_WORLD_GONE) {
			if (r >= c->cap || c->gone[r])
				continue;
			rank_gone(w, r);
			tern__info("world: rank %d is gone", r);
		} else {
			continue;
		}
		if (w->attr.on_member != NULL)
			w->attr.on_member(w, r, q[i].ev, w->attr.arg);
	}
	free(q);
}

#if !defined(TERN_HAVE_WORLD_PMIX) || !defined(TERN_HAVE_WORLD_ETCD)
/* A backend this build lacks says so. */
static int absent_open(struct tern_world *w, const char *arg)
{
	(void)arg;
	tern__warn("world %s: this build of tern has no %s backend",
		   w->ops->kind, w->ops->kind);
	return -TERN_ENOTSUP;
}
#endif

#ifndef TERN_HAVE_WORLD_PMIX
const struct tern__world_ops tern__world_pmix = { .kind = "pmix",
						  .open = absent_open };
#endif
#ifndef TERN_HAVE_WORLD_ETCD
const struct tern__world_ops tern__world_etcd = { .kind = "etcd",
						  .open = absent_open };
#endif

/* The backend of @spec, and what follows its scheme in *arg. */
static const struct tern__world_ops *backend(const char *spec, const char **arg)
{
	if (strcmp(spec, "pmix") == 0) {
		*arg = NULL;
		return &tern__world_pmix;
	}
	if (strncmp(spec, "file:", 5) == 0) {
		*arg = spec + 5;
		return &tern__world_file;
	}
	if (strncmp(spec, "etcd://", 7) == 0) {
		*arg = spec + 7;
		return &tern__world_etcd;
	}
	return NULL;
}

/* Fetch (and keep) rank @r's card. */
static int card_of(struct tern_world *w, int r, uint64_t deadline)
{
	struct tern__world_core *c = w->core;
	uint8_t buf[TERN_CARD_MAX];
	ssize_t n;

	if (c->cards[r] != NULL)
		return 0;
	n = w->ops->get(w, r, "card", buf, sizeof(buf), deadline);
	if (n == -ENOSPC)
		n = -TERN_ECARD;
	if (n < 0)
		return (int)n;
	{
		/* Checked now, so a store's junk is named at open rather
		 * than at first use. */
		struct tern__card card;
		char why[128];

		if (tern__card_parse(buf, (size_t)n, &card, why, sizeof(why)) !=
		    0) {
			tern__warn("world: rank %d's card: %s", r, why);
			return -TERN_ECARD;
		}
	}
	c->cards[r] = malloc((size_t)n);
	if (c->cards[r] == NULL)
		return -ENOMEM;
	memcpy(c->cards[r], buf, (size_t)n);
	c->card_len[r] = (size_t)n;
	return 0;
}

static void world_free(struct tern_world *w)
{
	struct tern__world_core *c = w->core;

	if (c != NULL) {
		for (int r = 0; r < c->cap; r++) {
			tern_peer_remove(c->peers[r]);
			free(c->cards[r]);
		}
		free(c->peers);
		free(c->gone);
		free(c->cards);
		free(c->card_len);
		free(c->q);
		if (c->efd >= 0)
			close(c->efd);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
	free(w);
}

/* A world on @ctx with @attr's values, the defaults filled in; NULL when
 * out of memory. */
static int world_new(struct tern_ctx *ctx, const struct tern_world_attr *attr,
		     const char *fn, struct tern_world **w_p)
{
	struct tern__world_core *c;
	struct tern_world *w;

	w = calloc(1, sizeof(*w));
	c = calloc(1, sizeof(*c));
	if (w == NULL || c == NULL) {
		free(w);
		free(c);
		return -ENOMEM;
	}
	w->core = c;
	c->efd = -1;
	pthread_mutex_init(&c->lock, NULL);
	w->ctx = ctx;
	if (tern__attr_resolve(&world_attr_kind, fn, attr, &w->attr) != 0) {
		world_free(w);
		return -EINVAL;
	}
	if (w->attr.timeout_ms <= 0)
		w->attr.timeout_ms = WORLD_TIMEOUT_MS;
	if (w->attr.lease_s <= 0)
		w->attr.lease_s = WORLD_LEASE_S;
	w->rank = w->attr.rank;
	w->size = w->attr.size;
	*w_p = w;
	return 0;
}

/* Every rank of the starting size has published its card. */
static int read_cards(struct tern_world *w, const char *label)
{
	uint64_t deadline = tern__world_deadline(w);

	for (int r = 0; r < w->size; r++) {
		int ret;

		if (r == w->rank)
			continue;
		ret = card_of(w, r, deadline);
		if (ret == -TERN_EPEERGONE) { /* left before we came */
			rank_gone(w, r);
			tern__info("world %s: rank %d has left", label, r);
			continue;
		}
		if (ret != 0) {
			tern__warn("world %s: rank %d's card: %s", label, r,
				   tern_strerror(ret));
			return ret;
		}
	}
	return 0;
}

/*
 * Once the backend is open: check rank and size, listen for membership
 * events, publish this ctx's card and read every starting rank's. On
 * failure the backend is closed and @w freed.
 */
static int world_join(struct tern_world *w, const char *label)
{
	struct tern__world_core *c = w->core;
	uint8_t card[TERN_CARD_MAX];
	ssize_t card_len;
	int ret;

	snprintf(c->kind, sizeof(c->kind), "%s", w->ops->kind);
	if (w->size < 1 || w->size > TERN_WORLD_MAX_RANKS || w->rank < 0 ||
	    w->rank >= w->size) {
		tern__warn(
			"world %s: rank %d of %d: a rank must be 0 to size-1, "
			"and size 1 to %d",
			label, w->rank, w->size, TERN_WORLD_MAX_RANKS);
		ret = -EINVAL;
		goto fail;
	}
	ret = core_reserve(c, w->size - 1);
	if (ret != 0)
		goto fail;
	c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->efd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = tern_io_start(w->ctx, &c->io, c->efd, TERN_IO_READ, on_events, w);
	if (ret != 0)
		goto fail;
	card_len = tern_ctx_card(w->ctx, card, sizeof(card));
	ret = card_len < 0 ? (int)card_len
			   : w->ops->put(w, "card", card, (size_t)card_len);
	if (ret == 0)
		ret = read_cards(w, label);
	if (ret != 0)
		goto fail;
	tern__info("world %s: rank %d of %d", label, w->rank, w->size);
	return 0;
fail:
	tern_io_stop(&c->io);
	w->ops->close(w);
	world_free(w);
	return ret;
}

int tern_world_open(struct tern_ctx *ctx, const char *spec,
		    const struct tern_world_attr *attr,
		    struct tern_world **world_p)
{
	struct tern_world *w;
	const char *arg;
	int ret;

	if (ctx == NULL || world_p == NULL)
		return -EINVAL;
	*world_p = NULL;
	if (spec == NULL)
		spec = getenv("TERN_WORLD");
	if (spec == NULL || *spec == '\0') {
		tern__warn("world: none named: pass one (pmix, "
			   "etcd://HOST:PORT/PREFIX, file:/DIR) or set "
			   "$TERN_WORLD");
		return -EINVAL;
	}
	ret = world_new(ctx, attr, "tern_world_open", &w);
	if (ret != 0)
		return ret;
	if ((w->rank < 0 && env_int("TERN_WORLD_RANK", &w->rank) < 0) ||
	    (w->size <= 0 && env_int("TERN_WORLD_SIZE", &w->size) < 0)) {
		world_free(w);
		return -EINVAL;
	}
	w->ops = backend(spec, &arg);
	if (w->ops == NULL) {
		tern__warn("world '%s': not pmix, etcd://HOST:PORT/PREFIX or "
			   "file:/DIR",
			   spec);
		world_free(w);
		return -EINVAL;
	}
	ret = w->ops->open(w, arg);
	if (ret != 0) {
		w->ops = NULL;
		world_free(w);
		return ret;
	}
	ret = world_join(w, spec);
	if (ret != 0)
		return ret;
	*world_p = w;
	return 0;
}

int tern_world_open_store(struct tern_ctx *ctx,
			  const struct tern_world_store *store,
			  const struct tern_world_attr *attr,
			  struct tern_world **world_p)
{
	struct tern_world *w;
	int ret;

	if (ctx == NULL || world_p == NULL)
		return -EINVAL;
	*world_p = NULL;
	if (attr == NULL) {
		tern__warn("world store: pass an attr with this rank and the "
			   "world's size");
		return -EINVAL;
	}
	ret = world_new(ctx, attr, "tern_world_open_store", &w);
	if (ret != 0)
		return ret;
	w->ops = &tern__world_store;
	ret = tern__world_store_open(w, store);
	if (ret != 0) {
		w->ops = NULL;
		world_free(w);
		return ret;
	}
	ret = world_join(w, "store");
	if (ret != 0)
		return ret;
	*world_p = w;
	return 0;
}

void tern_world_close(struct tern_world *w)
{
	if (w == NULL)
		return;
	tern_io_stop(&w->core->io);
	w->ops->close(w);
	world_free(w);
}

int tern_world_rank(const struct tern_world *w)
{
	return w ? w->rank : -EINVAL;
}

int tern_world_size(const struct tern_world *w)
{
	return w ? w->size : -EINVAL;
}

const char *tern_world_kind(const struct tern_world *w)
{
	return w ? w->core->kind : "";
}

int tern_world_alive(const struct tern_world *w, int rank)
{
	if (w == NULL || rank < 0 || rank >= w->size)
		return 0;
	return rank == w->rank || !w->core->gone[rank];
}

int tern_world_peer(struct tern_world *w, int rank, struct tern_peer **peer_p)
{
	struct tern__world_core *c;
	int ret;

	if (w == NULL || peer_p == NULL || rank < 0 || rank >= w->size ||
	    rank == w->rank)
		return -EINVAL;
	c = w->core;
	if (c->gone[rank])
		return -TERN_EPEERGONE;
	if (c->peers[rank] == NULL) {
		ret = card_of(w, rank, tern__world_deadline(w));
		if (ret == 0)
			ret = tern_peer_add(w->ctx, c->cards[rank],
					    c->card_len[rank], &c->peers[rank]);
		if (ret != 0)
			return ret;
	}
	*peer_p = c->peers[rank];
	return 0;
}

int tern_world_warmup(struct tern_world *w)
{
	struct tern_peer *p;

	if (w == NULL)
		return -EINVAL;
	for (int r = 0; r < w->size; r++) {
		int ret;

		if (r == w->rank || w->core->gone[r])
			continue;
		ret = tern_world_peer(w, r, &p);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int tern_world_put(struct tern_world *w, const char *name, const void *val,
		   size_t len)
{
	if (w == NULL || (val == NULL && len > 0))
		return -EINVAL;
	if (!tern__world_name_ok(name) || strcmp(name, "card") == 0) {
		tern__warn("world: name '%s': 1 to %d of [A-Za-z0-9_.-], and "
			   "not 'card'",
			   name ? name : "(null)", TERN_WORLD_NAME_MAX);
		return -EINVAL;
	}
	if (len > TERN_WORLD_VALUE_MAX) {
		tern__warn("world: value of '%s': %zu bytes, more than %d",
			   name, len, TERN_WORLD_VALUE_MAX);
		return -EINVAL;
	}
	return w->ops->put(w, name, val, len);
}

ssize_t tern_world_get(struct tern_world *w, int rank, const char *name,
		       void *buf, size_t len)
{
	if (w == NULL || (buf == NULL && len > 0) || rank < 0 ||
	    rank >= w->size || !tern__world_name_ok(name))
		return -EINVAL;
	if (rank != w->rank && w->core->gone[rank])
		return -TERN_EPEERGONE;
	return w->ops->get(w, rank, name, buf, len, tern__world_deadline(w));
}

int tern_world_publish(struct tern_world *w, const char *name,
		       const struct tern_mr_desc *desc)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	ssize_t n;

	if (desc == NULL)
		return -EINVAL;
	n = tern_mr_desc_pack(desc, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return tern_world_put(w, name, buf, (size_t)n);
}

int tern_world_lookup(struct tern_world *w, int rank, const char *name,
		      struct tern_mr_desc *desc)
{
	uint8_t buf[TERN_MR_DESC_MAX];
	ssize_t n;

	if (desc == NULL)
		return -EINVAL;
	n = tern_world_get(w, rank, name, buf, sizeof(buf));
	if (n == -ENOSPC)
		return -TERN_EDESC;
	if (n < 0)
		return (int)n;
	{
		ssize_t used = tern_mr_desc_unpack(buf, (size_t)n, desc);

		if (used < 0)
			return (int)used;
		return used == n ? 0 : -TERN_EDESC; /* trailing bytes */
	}
}

int tern_world_fence(struct tern_world *w)
{
	if (w == NULL)
		return -EINVAL;
	return w->ops->fence(w, ++w->core->fence_gen, tern__world_deadline(w));
}
