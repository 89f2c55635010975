/* SPDX-License-Identifier: MIT */
/*
 * Inside a world: the core (world.c) over a key-value store backend
 * (file.c, pmix.c, etcd.c, store.c). The core owns ranks, cards, peers and
 * membership events; a backend only stores and finds bytes. Keys are
 * (rank, name) pairs: a backend writes only its own rank's keys.
 */
#ifndef TERN_WORLD_INT_H
#define TERN_WORLD_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

struct tern__world_backend;

struct tern__world_ops {
	const char *kind; /* "file", "pmix", "etcd", "store" */
	/*
	 * Open from @arg (what follows "file:", "etcd://"; NULL for pmix).
	 * On entry w->rank / w->size hold the caller's values (-1 / 0 for
	 * "ask the launcher"); a backend that knows them (pmix) fills them,
	 * one that does not fails -EINVAL naming what is missing. Sets
	 * w->be. May start a thread that reports membership through
	 * tern__world_event(). The store backend has none: it is opened
	 * by tern__world_store_open() with the caller's callbacks.
	 */
	int (*open)(struct tern_world *w, const char *arg);
	/* Store (own rank, name) = val. Visible per the header's rule. */
	int (*put)(struct tern_world *w, const char *name, const void *val,
		   size_t len);
	/*
	 * Read (rank, name), waiting until @deadline_ns (tern__now_ns()
	 * clock) for it: the length; -ENOSPC (len too small, *need set);
	 * -ETIMEDOUT; -TERN_EPEERGONE.
	 */
	ssize_t (*get)(struct tern_world *w, int rank, const char *name,
		       void *buf, size_t len, uint64_t deadline_ns);
	/* Collective barrier number @gen over live ranks, until @deadline_ns.
	 */
	int (*fence)(struct tern_world *w, uint64_t gen, uint64_t deadline_ns);
	/* Stop any thread, withdraw this rank, free w->be. */
	void (*close)(struct tern_world *w);
};

/* The fields a backend may read (rank, size, attr) and own (be). The
 * core keeps the rest. */
struct tern_world {
	const struct tern__world_ops *ops;
	struct tern_ctx *ctx;
	struct tern_world_attr attr; /* defaults filled in */
	int rank;
	int size; /* starting size; grows with joiners */
	void *be; /* the backend's state */
	struct tern__world_core *core;
};

extern const struct tern__world_ops tern__world_file;
extern const struct tern__world_ops tern__world_pmix;
extern const struct tern__world_ops tern__world_etcd;
extern const struct tern__world_ops tern__world_store;

/* Open the store backend over the caller's @store (copied): w->rank and
 * w->size are the attr's, required. */
int tern__world_store_open(struct tern_world *w,
			   const struct tern_world_store *store);

/*
 * Membership, from any thread (a backend's watcher): queued, and the
 * core delivers it from the ctx's progress (on_member, peer failure).
 */
void tern__world_event(struct tern_world *w, int rank,
		       enum tern_world_event ev);

/* A backend waiting (a poll between store reads) lets the ctx progress:
 * peers' RMA over software providers needs it. */
void tern__world_idle(struct tern_world *w);
/* now + attr.timeout_ms, on the tern__now_ns() clock */
uint64_t tern__world_deadline(const struct tern_world *w);

/* A name as the header allows ([A-Za-z0-9_.-], 1..TERN_WORLD_NAME_MAX). */
int tern__world_name_ok(const char *name);

#endif /* TERN_WORLD_INT_H */
