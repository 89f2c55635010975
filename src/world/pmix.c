/* SPDX-License-Identifier: MIT */
/*
 * The PMIx world: the ranks a PMIx launcher started (mpirun of Open MPI,
 * srun --mpi=pmix of Slurm, prterun), with values in its key-value store.
 * libpmix.so.2 is loaded at run time, so libtern does not depend on it;
 * PMIx's header (libpmix-dev) is needed at build time only.
 *
 * Values are put with scope PMIX_GLOBAL under "tern.<name>" and committed;
 * a fence collects them (PMIX_COLLECT_DATA), and a get of one not yet
 * collected asks its owner's server (direct modex) within the timeout.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "../core/core.h"
#include "world.h"

#define PMIX_LIB "libpmix.so.2"

struct pmix_api {
	void *dl;
	pmix_status_t (*init)(pmix_proc_t *, pmix_info_t[], size_t);
	pmix_status_t (*finalize)(const pmix_info_t[], size_t);
	pmix_status_t (*put)(pmix_scope_t, const char[], pmix_value_t *);
	pmix_status_t (*commit)(void);
	pmix_status_t (*fence)(const pmix_proc_t[], size_t, const pmix_info_t[],
			       size_t);
	pmix_status_t (*get)(const pmix_proc_t *, const char[],
			     const pmix_info_t[], size_t, pmix_value_t **);
	void (*value_destruct)(pmix_value_t *);
	const char *(*strerror)(pmix_status_t);
};

struct pmix_world {
	struct pmix_api api;
	pmix_proc_t me;
};

static struct pmix_world *pw(struct tern_world *w)
{
	return w->be;
}

static int load(struct pmix_api *a)
{
	a->dl = dlopen(PMIX_LIB, RTLD_NOW | RTLD_LOCAL);
	if (a->dl == NULL) {
		tern__warn("world pmix: cannot load %s (%s): install the PMIx "
			   "client library (Debian: libpmix2)",
			   PMIX_LIB, dlerror());
		return -TERN_ENOTSUP;
	}
#define SYM(field, name)                                                       \
	do {                                                                   \
		*(void **)&a->field = dlsym(a->dl, name);                      \
		if (a->field == NULL) {                                        \
			tern__warn("world pmix: %s lacks %s", PMIX_LIB, name); \
			dlclose(a->dl);                                        \
			return -TERN_ENOTSUP;                                  \
		}                                                              \
	} while (0)
	SYM(init, "PMIx_Init");
	SYM(finalize, "PMIx_Finalize");
	SYM(put, "PMIx_Put");
	SYM(commit, "PMIx_Commit");
	SYM(fence, "PMIx_Fence");
	SYM(get, "PMIx_Get");
	SYM(value_destruct, "PMIx_Value_destruct");
	SYM(strerror, "PMIx_Error_string");
#undef SYM
	return 0;
}

/* An info of one bool or int, without PMIx's loading functions. */
static void info_bool(pmix_info_t *i, const char *key)
{
	memset(i, 0, sizeof(*i));
	snprintf(i->key, sizeof(i->key), "%s", key);
	i->value.type = PMIX_BOOL;
	i->value.data.flag = true;
}

static void info_int(pmix_info_t *i, const char *key, int v)
{
	memset(i, 0, sizeof(*i));
	snprintf(i->key, sizeof(i->key), "%s", key);
	i->value.type = PMIX_INT;
	i->value.data.integer = v;
}

/* Seconds left until @deadline_ns, at least 1. */
static int secs_left(uint64_t deadline_ns)
{
	uint64_t now = tern__now_ns();

	return now >= deadline_ns
		       ? 1
		       : (int)((deadline_ns - now) / 1000000000ULL) + 1;
}

static void pmix_release(struct pmix_world *p, pmix_value_t *v)
{
	if (v != NULL) {
		p->api.value_destruct(v);
		free(v);
	}
}

static void pmix_close(struct tern_world *w);

static int pmix_open(struct tern_world *w, const char *arg)
{
	struct pmix_world *p;
	pmix_value_t *v = NULL;
	pmix_proc_t job;
	pmix_status_t rc;
	int ret;

	(void)arg;
	if (getenv("PMIX_RANK") == NULL && getenv("PMIX_NAMESPACE") == NULL) {
		tern__warn("world pmix: not started by a PMIx launcher ($PMIX_"
			   "RANK unset): run under mpirun, srun --mpi=pmix or "
			   "prterun");
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	ret = load(&p->api);
	if (ret != 0) {
		free(p);
		return ret;
	}
	rc = p->api.init(&p->me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		tern__warn("world pmix: PMIx_Init: %s", p->api.strerror(rc));
		dlclose(p->api.dl);
		free(p);
		return -TERN_EPROV;
	}
	w->be = p;
	job = p->me;
	job.rank = PMIX_RANK_WILDCARD;
	rc = p->api.get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
	if (rc != PMIX_SUCCESS || v == NULL || v->type != PMIX_UINT32) {
		tern__warn("world pmix: the job's size (PMIX_JOB_SIZE): %s",
			   rc != PMIX_SUCCESS ? p->api.strerror(rc)
					      : "not a uint32");
		pmix_release(p, v);
		pmix_close(w);
		return -TERN_EPROTO;
	}
	if ((w->rank >= 0 && (uint32_t)w->rank != p->me.rank) ||
	    (w->size > 0 && (uint32_t)w->size != v->data.uint32))
		tern__warn("world pmix: rank %d of %d given, but the launcher "
			   "says %u of %u: using the launcher's",
			   w->rank, w->size, p->me.rank, v->data.uint32);
	w->rank = (int)p->me.rank;
	w->size = v->data.uint32 > TERN_WORLD_MAX_RANKS
			  ? TERN_WORLD_MAX_RANKS + 1
			  : (int)v->data.uint32;
	pmix_release(p, v);
	return 0;
}

static int pmix_put(struct tern_world *w, const char *name, const void *val,
		    size_t len)
{
	struct pmix_world *p = pw(w);
	char key[PMIX_MAX_KEYLEN + 1];
	pmix_value_t v;
	pmix_status_t rc;

	snprintf(key, sizeof(key), "tern.%s", name);
	memset(&v, 0, sizeof(v));
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)val;
	v.data.bo.size = len;
	rc = p->api.put(PMIX_GLOBAL, key, &v);
	if (rc == PMIX_SUCCESS)
		rc = p->api.commit();
	if (rc != PMIX_SUCCESS) {
		tern__warn("world pmix: putting %s: %s", key,
			   p->api.strerror(rc));
		return -TERN_EPROV;
	}
	/* A card is the first thing every rank reads: collect them all. */
	if (strcmp(name, "card") == 0)
		return w->ops->fence(w, 0, tern__world_deadline(w));
	return 0;
}

static ssize_t pmix_get(struct tern_world *w, int rank, const char *name,
			void *buf, size_t len, uint64_t deadline_ns)
{
	struct pmix_world *p = pw(w);
	char key[PMIX_MAX_KEYLEN + 1];
	pmix_value_t *v = NULL;
	pmix_proc_t proc;
	pmix_info_t info;
	pmix_status_t rc;
	ssize_t n;

	snprintf(key, sizeof(key), "tern.%s", name);
	proc = p->me;
	proc.rank = (pmix_rank_t)rank;
	info_int(&info, PMIX_TIMEOUT, secs_left(deadline_ns));
	rc = p->api.get(&proc, key, &info, 1, &v);
	if (rc == PMIX_ERR_TIMEOUT || rc == PMIX_ERR_NOT_FOUND) {
		tern__warn("world pmix: rank %d has not published '%s' (%s)",
			   rank, name, p->api.strerror(rc));
		return -ETIMEDOUT;
	}
	if (rc != PMIX_SUCCESS) {
		tern__warn("world pmix: %s of rank %d: %s", key, rank,
			   p->api.strerror(rc));
		return -TERN_EPROV;
	}
	if (v == NULL || v->type != PMIX_BYTE_OBJECT) {
		tern__warn("world pmix: %s of rank %d is not bytes", key, rank);
		pmix_release(p, v);
		return -TERN_EPROTO;
	}
	if (v->data.bo.size > len) {
		n = -ENOSPC;
	} else {
		memcpy(buf, v->data.bo.bytes, v->data.bo.size);
		n = (ssize_t)v->data.bo.size;
	}
	pmix_release(p, v);
	return n;
}

static int pmix_fence(struct tern_world *w, uint64_t gen, uint64_t deadline_ns)
{
	struct pmix_world *p = pw(w);
	pmix_info_t info[2];
	pmix_status_t rc;

	(void)gen;
	info_bool(&info[0], PMIX_COLLECT_DATA);
	info_int(&info[1], PMIX_TIMEOUT, secs_left(deadline_ns));
	rc = p->api.fence(NULL, 0, info, 2);
	if (rc == PMIX_ERR_TIMEOUT)
		return -ETIMEDOUT;
	if (rc != PMIX_SUCCESS) {
		tern__warn("world pmix: fence: %s", p->api.strerror(rc));
		return -TERN_EPROV;
	}
	return 0;
}

static void pmix_close(struct tern_world *w)
{
	struct pmix_world *p = pw(w);

	if (p == NULL)
		return;
	p->api.finalize(NULL, 0);
	/* libpmix keeps threads and handlers: it is never unloaded. */
	free(p);
	w->be = NULL;
}

const struct tern__world_ops tern__world_pmix = {
	.kind = "pmix",
	.open = pmix_open,
	.put = pmix_put,
	.get = pmix_get,
	.fence = pmix_fence,
	.close = pmix_close,
};
