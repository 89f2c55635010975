/* SPDX-License-Identifier: MIT */
/*
 * The store world (tern_world_open_store()) over an in-memory store that
 * every rank of this process shares, with PROVIDER: refusals that name
 * the bad input, a store that fails, one that never answers, records that
 * are not tern's; one rank's put/get/publish/lookup; then 3 ranks as
 * threads (a ctx each) that find each other, write to each other and
 * fence.
 *
 * usage: world_store PROVIDER
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tern/tern.h>

#include "check.h"
#include "world_check.h"

#define NRANKS 3
#define SLOT   4096

static const char *prov;

/* ---- an in-memory store: a list of keys, a lock and a condition ---- */

struct entry {
	struct entry *next;
	char *key;
	size_t len;
	unsigned char val[];
};

struct mem_store {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct entry *head;
	int fail_set; /* set returns this when non-zero */
	int fail_get; /* get returns this when non-zero */
	int gets;     /* calls of get */
};

static void mem_init(struct mem_store *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
}

static void mem_cleanup(struct mem_store *m)
{
	while (m->head != NULL) {
		struct entry *e = m->head;

		m->head = e->next;
		free(e->key);
		free(e);
	}
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
}

static struct entry *find(struct mem_store *m, const char *key)
{
	for (struct entry *e = m->head; e != NULL; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static int mem_set(void *arg, const char *key, const void *val, size_t len)
{
	struct mem_store *m = arg;
	struct entry *e, **pp;

	if (m->fail_set != 0)
		return m->fail_set;
	e = malloc(sizeof(*e) + len);
	CHECK(e != NULL, "malloc");
	e->key = strdup(key);
	e->len = len;
	memcpy(e->val, val, len);
	pthread_mutex_lock(&m->lock);
	for (pp = &m->head; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->key, key) == 0) {
			struct entry *old = *pp;

			e->next = old->next;
			*pp = e;
			free(old->key);
			free(old);
			goto done;
		}
	}
	e->next = m->head;
	m->head = e;
done:
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static ssize_t mem_get(void *arg, const char *key, void *buf, size_t len,
		       int timeout_ms)
{
	struct mem_store *m = arg;
	struct timespec until;
	struct entry *e;
	ssize_t n;

	if (m->fail_get != 0)
		return m->fail_get;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	m->gets++;
	while ((e = find(m, key)) == NULL)
		if (timeout_ms == 0 ||
		    pthread_cond_timedwait(&m->cond, &m->lock, &until) != 0)
			break;
	if (e == NULL) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	memcpy(buf, e->val, e->len < len ? e->len : len);
	n = (ssize_t)e->len;
	pthread_mutex_unlock(&m->lock);
	return n;
}

/* A store that answers "not there" at once, counting its calls. */
static ssize_t never_get(void *arg, const char *key, void *buf, size_t len,
			 int timeout_ms)
{
	struct mem_store *m = arg;

	(void)key;
	(void)buf;
	(void)len;
	(void)timeout_ms;
	m->gets++;
	return -ENOENT;
}

/* ---- helpers ---- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct tern_ctx *ctx_open(void)
{
	return world_check_ctx(prov);
}

static struct tern_world_store store_of(struct mem_store *m, const char *prefix)
{
	return (struct tern_world_store){
		.set = mem_set, .get = mem_get, .arg = m, .prefix = prefix
	};
}

static int open_store(struct tern_ctx *ctx, const struct tern_world_store *s,
		      int rank, int size, int timeout_ms, struct tern_world **w)
{
	struct tern_world_attr a;

	tern_world_attr_init(&a);
	a.rank = rank;
	a.size = size;
	a.timeout_ms = timeout_ms;
	return tern_world_open_store(ctx, s, &a, w);
}

/* ---- one process, one ctx: what is refused ---- */

static void refusals(struct tern_ctx *ctx)
{
	struct mem_store m;
	struct tern_world_store s;
	struct tern_world *w = NULL;
	struct tern_world_attr a;
	char longp[TERN_WORLD_PREFIX_MAX + 2];

	mem_init(&m);
	s = store_of(&m, "r");
	tern_world_attr_init(&a);
	a.size = 1;
	CHECK(tern_world_open_store(ctx, NULL, &a, &w) == -EINVAL && w == NULL,
	      "no store");
	CHECK(tern_world_open_store(ctx, &s, NULL, &w) == -EINVAL,
	      "no attr (rank and size are required)");
	CHECK(open_store(ctx, &s, -1, 1, 0, &w) == -EINVAL, "rank -1");
	CHECK(open_store(ctx, &s, 0, 0, 0, &w) == -EINVAL, "size 0");
	CHECK(open_store(ctx, &s, 2, 2, 0, &w) == -EINVAL, "rank 2 of 2");
	CHECK(open_store(ctx, &s, 0, TERN_WORLD_MAX_RANKS + 1, 0, &w) ==
		      -EINVAL,
	      "size beyond TERN_WORLD_MAX_RANKS");
	s.get = NULL;
	CHECK(open_store(ctx, &s, 0, 1, 0, &w) == -EINVAL, "no get");
	s = store_of(&m, "r");
	s.set = NULL;
	CHECK(open_store(ctx, &s, 0, 1, 0, &w) == -EINVAL, "no set");
	memset(longp, 'p', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	s = store_of(&m, longp);
	CHECK(open_store(ctx, &s, 0, 1, 0, &w) == -EINVAL,
	      "a prefix of %zu characters", strlen(longp));
	CHECK(m.head == NULL, "a refused open wrote nothing");
	printf("ok - refusals: no store, no attr, rank -1, size 0, rank 2 of "
	       "2, size too big, no get, no set, a long prefix\n");
	mem_cleanup(&m);
}

/* A store that fails, one that never has the key, junk from the store. */
static void bad_stores(struct tern_ctx *ctx)
{
	struct mem_store m;
	struct tern_world_store s;
	struct tern_world *w = NULL;
	uint8_t card[TERN_CARD_MAX + 10];
	uint64_t t0, dt;
	int ret;

	mem_init(&m);
	s = store_of(&m, "bad");
	m.fail_set = -EIO;
	ret = open_store(ctx, &s, 0, 1, 300, &w);
	CHECK(ret == -TERN_EPROV && w == NULL, "a set that fails: %s",
	      tern_strerror(ret));
	m.fail_set = 0;
	m.fail_get = -ECONNRESET;
	ret = open_store(ctx, &s, 0, 2, 300, &w);
	CHECK(ret == -TERN_EPROV, "a get that fails: %s", tern_strerror(ret));
	m.fail_get = 0;
	mem_cleanup(&m);

	/* Nobody else ever comes: -ETIMEDOUT after the timeout, without
	 * spinning on a store that answers at once. */
	mem_init(&m);
	s = store_of(&m, "lonely");
	s.get = never_get;
	t0 = now_ms();
	ret = open_store(ctx, &s, 0, 2, 300, &w);
	dt = now_ms() - t0;
	CHECK(ret == -ETIMEDOUT, "a rank that never comes: %s",
	      tern_strerror(ret));
	CHECK(dt >= 290 && dt < 5000, "timed out after %llu ms",
	      (unsigned long long)dt);
	CHECK(m.gets >= 5 && m.gets < 100,
	      "%d asks in 300 ms (no spinning, no single long wait)", m.gets);
	mem_cleanup(&m);

	/* Rank 1's card is junk, then too long for any card. */
	mem_init(&m);
	s = store_of(&m, "junk");
	mem_set(&m, "junk/1/card", "not a card", 10);
	ret = open_store(ctx, &s, 0, 2, 300, &w);
	CHECK(ret == -TERN_ECARD, "a junk card: %s", tern_strerror(ret));
	memset(card, 0, sizeof(card));
	mem_set(&m, "junk/1/card", card, sizeof(card));
	ret = open_store(ctx, &s, 0, 2, 300, &w);
	CHECK(ret == -TERN_EPROTO, "a card of %zu bytes: %s", sizeof(card),
	      tern_strerror(ret));
	mem_cleanup(&m);
	printf("ok - a set or get that fails (-TERN_EPROV), a rank that never "
	       "comes (-ETIMEDOUT, %llu ms, %s), a junk card, an oversized "
	       "card\n",
	       (unsigned long long)dt, "paced");
}

/* Values of a world of one: what every backend passes, then the store's
 * own cases. */
static void values(struct tern_world *w, struct mem_store *m)
{
	char big[TERN_WORLD_VALUE_MAX + 100], buf[64];
	ssize_t n;

	world_check_alone(w, "store");
	CHECK(tern_world_get(w, 0, "a/b", buf, sizeof(buf)) == -EINVAL,
	      "get of a/b");
	CHECK(tern_world_get(w, 0, "max", big, sizeof(big)) ==
		      TERN_WORLD_VALUE_MAX,
	      "read back");
	/* A record longer than tern writes, put there by someone else. */
	memset(big, 1, sizeof(big));
	mem_set(m, "one/0/huge", big, sizeof(big));
	n = tern_world_get(w, 0, "huge", big, sizeof(big));
	CHECK(n == -TERN_EPROTO, "an oversized record: %zd", n);
	/* The store starts failing. */
	m->fail_set = -EIO;
	CHECK(tern_world_put(w, "kv", "x", 1) == -TERN_EPROV, "a failed set");
	CHECK(tern_world_fence(w) == -TERN_EPROV, "a fence whose set fails");
	m->fail_set = 0;
	m->fail_get = -EPIPE;
	CHECK(tern_world_get(w, 0, "kv", buf, sizeof(buf)) == -TERN_EPROV,
	      "a failed get");
	m->fail_get = 0;
	printf("ok - put/get, republish, short buffer, timeout, names, sizes, "
	       "an oversized record, a store that starts failing\n");
}

static void alone(struct tern_ctx *ctx)
{
	struct mem_store m;
	struct tern_world_store s;
	struct tern_world *w = NULL;
	struct tern_mr_desc back;
	static uint8_t region[4096];
	struct tern_peer *p;
	struct tern_mr *mr;

	mem_init(&m);
	s = store_of(&m, "one");
	CHECK(open_store(ctx, &s, 0, 1, 300, &w) == 0, "rank 0 of 1");
	CHECK(find(&m, "one/0/card") != NULL, "key one/0/card");
	CHECK(tern_world_peer(w, 0, &p) == -EINVAL, "own rank");
	values(w, &m);
	mr = world_check_publish(ctx, w, region, sizeof(region));
	mem_set(&m, "one/0/junk", "not a descriptor", 16);
	CHECK(tern_world_lookup(w, 0, "junk", &back) == -TERN_EDESC,
	      "a junk descriptor");
	/* Fence 1 failed in values(): this is fence 2. */
	CHECK(tern_world_fence(w) == 0 && find(&m, "one/fence/2/0") != NULL,
	      "fence of one, key one/fence/2/0");
	tern_world_close(w);
	tern_mr_close(mr);
	mem_cleanup(&m);
	printf("ok - kind store, keys PREFIX/RANK/NAME, publish/lookup, a junk "
	       "descriptor, fence of one\n");
}

/* Rank 0 of 2 where rank 1 published its card and nothing else: a
 * fence waits for rank 1 and times out. No prefix. */
static void fence_timeout(struct tern_ctx *ctx)
{
	struct tern_ctx *other = ctx_open();
	struct mem_store m;
	struct tern_world_store s;
	struct tern_world *w = NULL;
	uint8_t card[TERN_CARD_MAX];
	ssize_t n;
	int ret;

	mem_init(&m);
	s = store_of(&m, NULL);
	n = tern_ctx_card(other, card, sizeof(card));
	CHECK(n > 0, "card");
	mem_set(&m, "1/card", card, (size_t)n);
	ret = open_store(ctx, &s, 0, 2, 300, &w);
	CHECK(ret == 0, "open with rank 1's card there: %s",
	      tern_strerror(ret));
	CHECK(find(&m, "0/card") != NULL, "no prefix: key 0/card");
	ret = tern_world_fence(w);
	CHECK(ret == -ETIMEDOUT, "a fence rank 1 never reaches: %s",
	      tern_strerror(ret));
	tern_world_close(w);
	tern_ctx_close(other);
	mem_cleanup(&m);
	printf("ok - a fence waits for every rank (-ETIMEDOUT)\n");
}

/* ---- NRANKS ranks as threads ---- */

struct rank_arg {
	struct mem_store *m;
	int rank;
};

static void *rank_main(void *p)
{
	const struct rank_arg *ra = p;
	struct tern_world_store s = store_of(ra->m, "job");
	static uint8_t mine[NRANKS][NRANKS * SLOT], src[NRANKS][SLOT];
	struct tern_req req[NRANKS], ex;
	struct tern_mr_desc d, theirs;
	int r = ra->rank, ret;
	struct tern_mr *mr, *smr;
	struct tern_world *w;
	struct tern_peer *peer, *again;
	struct tern_ctx *ctx = ctx_open();

	ret = open_store(ctx, &s, r, NRANKS, 20000, &w);
	CHECK(ret == 0, "rank %d: open: %s", r, tern_strerror(ret));
	CHECK(tern_world_size(w) == NRANKS && tern_world_rank(w) == r,
	      "rank %d: rank, size", r);
	CHECK(tern_mr_reg(ctx, mine[r], sizeof(mine[r]),
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &mr) == 0 &&
		      tern_mr_reg(ctx, src[r], sizeof(src[r]),
				  TERN_ACCESS_LOCAL, &smr) == 0,
	      "rank %d: reg", r);
	tern_mr_desc(mr, &d);
	CHECK(tern_world_publish(w, "buf", &d) == 0, "publish");
	tern_req_init(&ex, NULL, NULL);
	CHECK(tern_imm_expect(ctx, 77, NRANKS - 1, &ex) == 0, "expect");
	CHECK(tern_world_fence(w) == 0, "rank %d: fence 1", r);
	memset(src[r], r + 1, sizeof(src[r]));
	for (int o = 0; o < NRANKS; o++) {
		if (o == r)
			continue;
		CHECK(tern_world_lookup(w, o, "buf", &theirs) == 0,
		      "rank %d: lookup of %d", r, o);
		ret = tern_world_peer(w, o, &peer);
		CHECK(ret == 0, "rank %d: peer %d: %s", r, o,
		      tern_strerror(ret));
		CHECK(tern_world_peer(w, o, &again) == 0 && again == peer,
		      "the same handle again");
		tern_req_init(&req[o], NULL, NULL);
		ret = tern_write_imm(peer, smr, src[r], SLOT, &theirs,
				     (uint64_t)r * SLOT, 77, &req[o]);
		CHECK(ret == 0, "rank %d: write to %d: %s", r, o,
		      tern_strerror(ret));
	}
	for (int o = 0; o < NRANKS; o++)
		if (o != r)
			CHECK(tern_wait(ctx, &req[o], 20000) == 0 &&
				      req[o].status == 0,
			      "rank %d: write to %d done", r, o);
	CHECK(tern_wait(ctx, &ex, 20000) == 0 && ex.status == 0,
	      "rank %d: the others' writes landed", r);
	for (int o = 0; o < NRANKS; o++)
		for (size_t i = 0; i < SLOT; i++)
			CHECK(mine[r][o * SLOT + i] ==
				      (o == r ? 0 : (uint8_t)(o + 1)),
			      "rank %d: byte %zu of %d's slot", r, i, o);
	CHECK(tern_world_fence(w) == 0, "rank %d: fence 2", r);
	CHECK(tern_world_warmup(w) == 0, "warmup");
	tern_world_close(w);
	tern_mr_close(mr);
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	return NULL;
}

static void ranks(void)
{
	struct mem_store m;
	struct rank_arg args[NRANKS];
	pthread_t t[NRANKS];

	mem_init(&m);
	for (int r = 0; r < NRANKS; r++) {
		args[r] = (struct rank_arg){ .m = &m, .rank = r };
		CHECK(pthread_create(&t[r], NULL, rank_main, &args[r]) == 0,
		      "thread");
	}
	for (int r = 0; r < NRANKS; r++)
		pthread_join(t[r], NULL);
	CHECK(find(&m, "job/fence/2/2") != NULL, "fence keys PREFIX/fence/G/R");
	mem_cleanup(&m);
	printf("ok - %d ranks (threads) found each other, wrote to each other "
	       "and fenced over %s\n",
	       NRANKS, prov);
}

int main(int argc, char **argv)
{
	struct tern_ctx *ctx;

	CHECK(argc == 2, "usage: world_store PROVIDER");
	prov = argv[1];
	ctx = ctx_open();
	refusals(ctx);
	bad_stores(ctx);
	alone(ctx);
	fence_timeout(ctx);
	tern_ctx_close(ctx);
	ranks();
	return 0;
}
