/* SPDX-License-Identifier: MIT */
/*
 * The etcd world: ranks register in an etcd cluster (v3, through its
 * HTTP/JSON gateway) under a key prefix, with a lease. Keys:
 *
 *   PREFIX/members/R        "1", under this rank's lease: it is alive
 *   PREFIX/rR/NAME          what rank R published (its card: NAME "card")
 *   PREFIX/fence/G/R        rank R reached fence G
 *   PREFIX/joined/R         rank R was here once
 *
 * The members and values carry the rank's lease, so they vanish when it
 * stops renewing; the fence and joined marks do not (a rank that passed a
 * fence and left at once must not take its mark from a slower one, and a
 * joiner must tell a rank that left from one not yet started): give each
 * job a fresh prefix, and delete it afterwards
 * (etcdctl del --prefix PREFIX). A thread renews the lease every TTL/3 and
 * reads the members every TTL/4 (at least every 0.2 s): a rank that went away
 * is reported GONE within TTL plus that period, one that appeared JOINED. It
 * reads the members rather than holding the gateway's watch stream open: a poll
 * has no stream to resume after a reset, and costs one small request per rank
 * and period.
 *
 * libcurl is loaded at run time (libcurl.so.4): libtern does not depend on
 * it; its header is needed at build time. Everything etcd answers is
 * untrusted: bodies are bounded (1 MiB), base64 is checked, and a field
 * that is missing or malformed is -TERN_EPROTO, named in the log.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "../core/core.h"
#include "world.h"

#define CURL_LIB   "libcurl.so.4"
#define BODY_MAX   (1u << 20)
#define KEY_MAX	   512
#define B64_LEN(n) (((n) + 2) / 3 * 4)

struct curl_api {
	void *dl;
	CURLcode (*global_init)(long);
	CURL *(*init)(void);
	CURLcode (*setopt)(CURL *, CURLoption, ...);
	CURLcode (*perform)(CURL *);
	CURLcode (*getinfo)(CURL *, CURLINFO, ...);
	void (*cleanup)(CURL *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	const char *(*strerror)(CURLcode);
};

struct body {
	char *p;
	size_t len, cap;
	int over; /* more than BODY_MAX */
};

struct etcd_world {
	struct curl_api api;
	char base[300];	  /* http://HOST:PORT */
	char prefix[200]; /* without a trailing '/' */
	char lease[32];	  /* the lease ID, decimal */
	CURL *h;	  /* the caller's thread */
	struct tern_world *w;
	/* the watcher */
	pthread_t thread;
	int running;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop;
	unsigned char *seen; /* ranks seen alive */
};

static struct etcd_world *ew(struct tern_world *w)
{
	return w->be;
}

/* ---- base64 (RFC 4648, with padding) ------------------------------- */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_enc(const void *src, size_t n, char *out)
{
	const uint8_t *s = src;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* Decode @n chars; -1 when not base64 or longer than @cap. */
static ssize_t b64_dec(const char *in, size_t n, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int a = b64_val(in[i]), b = b64_val(in[i + 1]);
		int c = in[i + 2] == '=' ? 0 : b64_val(in[i + 2]);
		int d = in[i + 3] == '=' ? 0 : b64_val(in[i + 3]);
		int pad = (in[i + 2] == '=') + (in[i + 3] == '=');
		uint32_t v;

		if (a < 0 || b < 0 || c < 0 || d < 0 || (pad && i + 4 != n) ||
		    (in[i + 2] == '=' && !pad))
			return -1;
		if (in[i + 2] == '=' && in[i + 3] != '=')
			return -1;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 |
		    (uint32_t)d;
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (uint8_t)(v >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(v >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)v;
	}
	return (ssize_t)o;
}

/* ---- JSON: the few fields etcd's answers carry ---------------------- */

/*
 * The string value of the next "@field": "..." at or after @from in
 * @body (NUL-terminated), as [*s, *s + *n). Base64 and etcd's decimal
 * strings hold no escapes: a backslash in one is refused.
 * @return the position after it, or NULL.
 */
static const char *json_str(const char *from, const char *field, const char **s,
			    size_t *n)
{
	char pat[64];
	const char *p, *q;

	snprintf(pat, sizeof(pat), "\"%s\"", field);
	for (p = strstr(from, pat); p != NULL; p = strstr(p + 1, pat)) {
		q = p + strlen(pat);
		while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
			q++;
		if (*q != ':')
			continue;
		q++;
		while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
			q++;
		if (*q != '"')
			return NULL;
		*s = ++q;
		while (*q != '"' && *q != '\0' && *q != '\\')
			q++;
		if (*q != '"')
			return NULL;
		*n = (size_t)(q - *s);
		return q + 1;
	}
	return NULL;
}

/* ---- HTTP ------------------------------------------------------------ */

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;

	if (b->len + n + 1 > BODY_MAX) {
		b->over = 1;
		return 0; /* stops the transfer */
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (p == NULL)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

/* POST @json to @path on handle @h; the answer in @b (NUL-terminated).
 * @return 0; -TERN_EPROV (unreachable, an HTTP error); -TERN_EPROTO. */
static int post(struct etcd_world *e, CURL *h, const char *path,
		const char *json, struct body *b, int timeout_ms)
{
	char url[400];
	long code = 0;
	CURLcode rc;

	snprintf(url, sizeof(url), "%s%s", e->base, path);
	b->len = 0;
	b->over = 0;
	if (b->p)
		b->p[0] = '\0';
	e->api.setopt(h, CURLOPT_URL, url);
	e->api.setopt(h, CURLOPT_POSTFIELDS, json);
	e->api.setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
	e->api.setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	e->api.setopt(h, CURLOPT_WRITEDATA, b);
	e->api.setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	e->api.setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	e->api.setopt(h, CURLOPT_NOSIGNAL, 1L);
	rc = e->api.perform(h);
	if (b->over) {
		tern__warn("world etcd: %s answered more than %u bytes", path,
			   BODY_MAX);
		return -TERN_EPROTO;
	}
	if (rc != CURLE_OK) {
		tern__warn("world etcd: %s%s: %s", e->base, path,
			   e->api.strerror(rc));
		return -TERN_EPROV;
	}
	e->api.getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		tern__warn("world etcd: %s: HTTP %ld: %.200s", path, code,
			   b->p ? b->p : "");
		return -TERN_EPROV;
	}
	if (b->p == NULL || b->p[0] != '{') {
		tern__warn("world etcd: %s: not a JSON object", path);
		return -TERN_EPROTO;
	}
	return 0;
}

/* PREFIX/@rest into @key. */
static int key_of(struct etcd_world *e, char *key, size_t len, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

static int key_of(struct etcd_world *e, char *key, size_t len, const char *fmt,
		  ...)
{
	va_list ap;
	int n = snprintf(key, len, "%s/", e->prefix);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	va_start(ap, fmt);
	n += vsnprintf(key + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int kv_put_lease(struct etcd_world *e, CURL *h, const char *key,
			const void *val, size_t len, int leased,
			struct body *b);

static int kv_put(struct etcd_world *e, CURL *h, const char *key,
		  const void *val, size_t len, struct body *b)
{
	return kv_put_lease(e, h, key, val, len, 1, b);
}

static int kv_put_lease(struct etcd_world *e, CURL *h, const char *key,
			const void *val, size_t len, int leased, struct body *b)
{
	char kb[B64_LEN(KEY_MAX) + 1];
	char *json = malloc(B64_LEN(len) + sizeof(kb) + 128);
	char *vb = malloc(B64_LEN(len) + 1);
	int ret = -ENOMEM;

	if (json != NULL && vb != NULL) {
		b64_enc(key, strlen(key), kb);
		b64_enc(val, len, vb);
		if (leased)
			sprintf(json,
				"{\"key\":\"%s\",\"value\":\"%s\","
				"\"lease\":\"%s\"}",
				kb, vb, e->lease);
		else
			sprintf(json, "{\"key\":\"%s\",\"value\":\"%s\"}", kb,
				vb);
		ret = post(e, h, "/v3/kv/put", json, b, 5000);
	}
	free(json);
	free(vb);
	return ret;
}

/* Range over the keys starting with @pfx (keys only), or the one @pfx. */
static int kv_range(struct etcd_world *e, CURL *h, const char *pfx,
		    int is_prefix, struct body *b)
{
	char kb[B64_LEN(KEY_MAX) + 1], eb[B64_LEN(KEY_MAX) + 1];
	char end[KEY_MAX + 1];
	char json[2 * sizeof(kb) + 100];
	size_t n = strlen(pfx);

	if (n == 0 || n > KEY_MAX)
		return -ENAMETOOLONG;
	b64_enc(pfx, n, kb);
	if (!is_prefix) {
		snprintf(json, sizeof(json), "{\"key\":\"%s\"}", kb);
	} else {
		memcpy(end, pfx, n + 1);
		end[n - 1]++; /* the prefix's last byte + 1 ends the range */
		b64_enc(end, n, eb);
		snprintf(json, sizeof(json),
			 "{\"key\":\"%s\",\"range_end\":\"%s\","
			 "\"keys_only\":true}",
			 kb, eb);
	}
	return post(e, h, "/v3/kv/range", json, b, 5000);
}

/*
 * The ranks of a keys-only range whose keys are @pfx + decimal rank, set
 * in @set (TERN_WORLD_MAX_RANKS bytes). @return how many, or -TERN_EPROTO.
 */
static int ranks_of(const char *body, const char *pfx, unsigned char *set)
{
	const char *p = body, *s;
	size_t n, pl = strlen(pfx);
	int count = 0;

	memset(set, 0, TERN_WORLD_MAX_RANKS);
	while ((p = json_str(p, "key", &s, &n)) != NULL) {
		char key[KEY_MAX + 1];
		ssize_t k = b64_dec(s, n, (uint8_t *)key, KEY_MAX);
		char *end;
		long r;

		if (k < 0 || (size_t)k <= pl || memcmp(key, pfx, pl) != 0)
			return -TERN_EPROTO;
		key[k] = '\0';
		errno = 0;
		r = strtol(key + pl, &end, 10);
		if (*end != '\0' || errno || r < 0 || r >= TERN_WORLD_MAX_RANKS)
			continue; /* not a rank of ours: ignored */
		count += !set[r];
		set[r] = 1;
	}
	return count;
}

/* ---- opening: the gateway, a lease, the member key ------------------ */

static int load(struct curl_api *a)
{
	a->dl = dlopen(CURL_LIB, RTLD_NOW | RTLD_LOCAL);
	if (a->dl == NULL) {
		tern__warn("world etcd: cannot load %s (%s): install libcurl "
			   "(Debian: libcurl4)",
			   CURL_LIB, dlerror());
		return -TERN_ENOTSUP;
	}
#define SYM(field, name)                                                       \
	do {                                                                   \
		*(void **)&a->field = dlsym(a->dl, name);                      \
		if (a->field == NULL) {                                        \
			tern__warn("world etcd: %s lacks %s", CURL_LIB, name); \
			return -TERN_ENOTSUP;                                  \
		}                                                              \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(init, "curl_easy_init");
	SYM(setopt, "curl_easy_setopt");
	SYM(perform, "curl_easy_perform");
	SYM(getinfo, "curl_easy_getinfo");
	SYM(cleanup, "curl_easy_cleanup");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
	SYM(strerror, "curl_easy_strerror");
#undef SYM
	return 0;
}

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;

/* "HOST:PORT/PREFIX" into the base URL and the prefix. */
static int parse(struct etcd_world *e, const char *arg)
{
	const char *slash = strchr(arg, '/'), *colon;
	char *end;
	long port;
	size_t hl;

	if (slash == NULL || slash[1] == '\0') {
		tern__warn("world etcd://%s: name a key prefix "
			   "(etcd://HOST:PORT/PREFIX)",
			   arg);
		return -EINVAL;
	}
	colon = NULL;
	for (const char *c = arg; c < slash; c++)
		if (*c == ':')
			colon = c;
	if (colon == NULL || colon == arg) {
		tern__warn("world etcd://%s: name the gateway as HOST:PORT",
			   arg);
		return -EINVAL;
	}
	port = strtol(colon + 1, &end, 10);
	if (end != slash || port < 1 || port > 65535) {
		tern__warn("world etcd://%s: port '%.*s': 1 to 65535", arg,
			   (int)(slash - colon - 1), colon + 1);
		return -EINVAL;
	}
	hl = (size_t)(colon - arg);
	for (size_t i = 0; i < hl; i++) {
		char c = arg[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		      c == '[' || c == ']' || c == ':')) {
			tern__warn("world etcd://%s: host '%.*s': a name or an "
				   "address",
				   arg, (int)hl, arg);
			return -EINVAL;
		}
	}
	if (strlen(slash + 1) >= sizeof(e->prefix) ||
	    hl + 20 >= sizeof(e->base)) {
		tern__warn("world etcd://%s: too long", arg);
		return -EINVAL;
	}
	snprintf(e->base, sizeof(e->base), "http://%.*s:%ld", (int)hl, arg,
		 port);
	snprintf(e->prefix, sizeof(e->prefix), "/%s", slash + 1);
	while (strlen(e->prefix) > 1 && e->prefix[strlen(e->prefix) - 1] == '/')
		e->prefix[strlen(e->prefix) - 1] = '\0';
	for (const char *p = e->prefix; *p; p++) {
		if (*p < 0x21 || *p > 0x7e || *p == '"' || *p == '\\') {
			tern__warn("world etcd://%s: the prefix may hold "
				   "printable "
				   "ASCII only",
				   arg);
			return -EINVAL;
		}
	}
	return 0;
}

static void *watcher(void *arg);

static void etcd_close(struct tern_world *w);

static int etcd_open(struct tern_world *w, const char *arg)
{
	char key[KEY_MAX + 1], json[128];
	struct body b = { 0 };
	struct etcd_world *e;
	const char *s;
	size_t n;
	int ret;

	if (w->rank < 0 || w->size <= 0) {
		tern__warn("world etcd://%s: each rank needs its rank and the "
			   "world's size at start: set $TERN_WORLD_RANK and "
			   "$TERN_WORLD_SIZE (or the attr's rank and size)",
			   arg ? arg : "");
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->seen = calloc(TERN_WORLD_MAX_RANKS, 1);
	w->be = e;
	e->w = w;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	ret = e->seen ? parse(e, arg ? arg : "") : -ENOMEM;
	if (ret == 0)
		ret = load(&e->api);
	if (ret != 0) {
		etcd_close(w);
		return ret;
	}
	pthread_mutex_lock(&global_lock);
	e->api.global_init(CURL_GLOBAL_DEFAULT);
	pthread_mutex_unlock(&global_lock);
	e->h = e->api.init();
	if (e->h == NULL) {
		etcd_close(w);
		return -ENOMEM;
	}
	snprintf(json, sizeof(json), "{\"TTL\":%d}", w->attr.lease_s);
	ret = post(e, e->h, "/v3/lease/grant", json, &b, 5000);
	if (ret == 0 &&
	    (json_str(b.p, "ID", &s, &n) == NULL || n == 0 ||
	     n >= sizeof(e->lease) || strspn(s, "0123456789") < n)) {
		tern__warn("world etcd: the lease grant carries no ID: %.200s",
			   b.p);
		ret = -TERN_EPROTO;
	}
	if (ret != 0) {
		free(b.p);
		etcd_close(w);
		return ret;
	}
	memcpy(e->lease, s, n);
	e->lease[n] = '\0';
	ret = key_of(e, key, sizeof(key), "members/%d", w->rank);
	if (ret == 0) {
		/* A live member of this rank already: refuse, do not steal. */
		ret = kv_range(e, e->h, key, 0, &b);
		if (ret == 0 && json_str(b.p, "key", &s, &n) != NULL) {
			tern__warn("world etcd: rank %d is a member already "
				   "(%s): two processes have rank %d",
				   w->rank, key, w->rank);
			ret = -EEXIST;
		}
	}
	if (ret == 0)
		ret = kv_put(e, e->h, key, "1", 1, &b);
	/* Without a lease: that rank R was here outlives it, so a rank that
	 * joins later can tell one that left from one not yet started. */
	if (ret == 0)
		ret = key_of(e, key, sizeof(key), "joined/%d", w->rank);
	if (ret == 0)
		ret = kv_put_lease(e, e->h, key, "1", 1, 0, &b);
	free(b.p);
	if (ret == 0) {
		ret = -pthread_create(&e->thread, NULL, watcher, e);
		e->running = ret == 0;
	}
	if (ret != 0)
		etcd_close(w);
	return ret;
}

/* ---- the watcher: the lease, and who is a member -------------------- */

static void *watcher(void *arg)
{
	struct etcd_world *e = arg;
	struct tern_world *w = e->w;
	unsigned int period_ms = (unsigned int)w->attr.lease_s * 1000 / 4;
	uint64_t renew_ns = (uint64_t)w->attr.lease_s * 1000000000ULL / 3;
	uint64_t renewed = tern__now_ns();
	int expired = 0; /* said once */
	unsigned char *now = calloc(TERN_WORLD_MAX_RANKS, 1);
	char pfx[KEY_MAX + 1], json[96];
	struct body b = { 0 };
	CURL *h = e->api.init();

	if (period_ms > 1000)
		period_ms = 1000;
	if (period_ms < 200)
		period_ms = 200;
	if (h == NULL || now == NULL ||
	    key_of(e, pfx, sizeof(pfx), "members/") != 0) {
		tern__warn("world etcd: the watcher cannot start");
		goto out;
	}
	snprintf(json, sizeof(json), "{\"ID\":\"%s\"}", e->lease);
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		struct timespec ts;
		int n;

		pthread_mutex_unlock(&e->lock);
		if (tern__now_ns() - renewed >= renew_ns &&
		    post(e, h, "/v3/lease/keepalive", json, &b, 2000) == 0) {
			const char *s;
			size_t len;

			/* A lease that expired answers without a TTL. */
			if (json_str(b.p, "TTL", &s, &len) == NULL &&
			    !expired++)
				tern__warn("world etcd: lease %s expired: this "
					   "rank has left the world",
					   e->lease);
			renewed = tern__now_ns();
		}
		if (kv_range(e, h, pfx, 1, &b) == 0 &&
		    (n = ranks_of(b.p, pfx, now)) >= 0) {
			for (int r = 0; r < TERN_WORLD_MAX_RANKS; r++) {
				if (r == w->rank || now[r] == e->seen[r])
					continue;
				tern__world_event(w, r,
						  now[r] ? TERN_WORLD_JOINED
							 : TERN_WORLD_GONE);
				e->seen[r] = now[r];
			}
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)period_ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&e->lock);
		if (!e->stop)
			pthread_cond_timedwait(&e->cond, &e->lock, &ts);
	}
	pthread_mutex_unlock(&e->lock);
out:
	if (h != NULL)
		e->api.cleanup(h);
	free(now);
	free(b.p);
	return NULL;
}

/* ---- values and fences ---------------------------------------------- */

static void nap(struct tern_world *w, unsigned int *us)
{
	struct timespec ts = { 0, (long)*us * 1000 };

	tern__world_idle(w);
	nanosleep(&ts, NULL);
	if (*us < 20000)
		*us *= 2;
}

static int etcd_put(struct tern_world *w, const char *name, const void *val,
		    size_t len)
{
	struct etcd_world *e = ew(w);
	char key[KEY_MAX + 1];
	struct body b = { 0 };
	int ret;

	ret = key_of(e, key, sizeof(key), "r%d/%s", w->rank, name);
	if (ret == 0)
		ret = kv_put(e, e->h, key, val, len, &b);
	free(b.p);
	return ret;
}

/*
 * Rank @r was here once (joined/R) and is no member now. joined/R is read
 * first: a rank puts members/R before joined/R, so one seen joined and
 * then not a member has left, never "not yet registered".
 */
static int left_already(struct etcd_world *e, int r)
{
	char key[KEY_MAX + 1];
	struct body b = { 0 };
	int gone = 0;

	if (key_of(e, key, sizeof(key), "joined/%d", r) == 0 &&
	    kv_range(e, e->h, key, 0, &b) == 0 &&
	    strstr(b.p, "\"kvs\"") != NULL &&
	    key_of(e, key, sizeof(key), "members/%d", r) == 0 &&
	    kv_range(e, e->h, key, 0, &b) == 0)
		gone = strstr(b.p, "\"kvs\"") == NULL;
	free(b.p);
	return gone;
}

static ssize_t etcd_get(struct tern_world *w, int rank, const char *name,
			void *buf, size_t len, uint64_t deadline_ns)
{
	size_t max = strcmp(name, "card") == 0 ? TERN_CARD_MAX
					       : TERN_WORLD_VALUE_MAX;
	struct etcd_world *e = ew(w);
	char key[KEY_MAX + 1];
	struct body b = { 0 };
	unsigned int us = 1000;
	uint8_t *tmp = malloc(max);
	ssize_t ret;

	if (tmp == NULL)
		return -ENOMEM;
	ret = key_of(e, key, sizeof(key), "r%d/%s", rank, name);
	while (ret == 0) {
		const char *s;
		size_t n;

		ret = kv_range(e, e->h, key, 0, &b);
		if (ret != 0)
			break;
		if (strstr(b.p, "\"kvs\"") != NULL) {
			if (json_str(b.p, "value", &s, &n) == NULL)
				ret = -1;
			else
				ret = b64_dec(s, n, tmp, max);
			if (ret < 0) {
				tern__warn(
					"world etcd: %s: not a value tern "
					"wrote (no value, bad base64 or over "
					"%zu bytes)",
					key, max);
				ret = -TERN_EPROTO;
			} else if ((size_t)ret > len) {
				ret = -ENOSPC;
			} else {
				memcpy(buf, tmp, (size_t)ret);
			}
			break;
		}
		if (rank != w->rank &&
		    (!tern_world_alive(w, rank) || left_already(e, rank))) {
			ret = -TERN_EPEERGONE;
			break;
		}
		if (tern__now_ns() >= deadline_ns) {
			tern__warn("world etcd: rank %d has not published '%s' "
				   "(%s)",
				   rank, name, key);
			ret = -ETIMEDOUT;
			break;
		}
		nap(w, &us);
	}
	free(b.p);
	free(tmp);
	return ret;
}

static int etcd_fence(struct tern_world *w, uint64_t gen, uint64_t deadline_ns)
{
	struct etcd_world *e = ew(w);
	unsigned char *set = calloc(TERN_WORLD_MAX_RANKS, 1);
	char key[KEY_MAX + 1], pfx[KEY_MAX + 1];
	struct body b = { 0 };
	unsigned int us = 1000;
	int ret;

	if (set == NULL)
		return -ENOMEM;
	ret = key_of(e, key, sizeof(key), "fence/%llu/%d",
		     (unsigned long long)gen, w->rank);
	if (ret == 0)
		ret = key_of(e, pfx, sizeof(pfx), "fence/%llu/",
			     (unsigned long long)gen);
	/* Without the lease: a rank that passed the fence and left at once
	 * (revoking its lease) must not take its mark from the slower. */
	if (ret == 0)
		ret = kv_put_lease(e, e->h, key, "1", 1, 0, &b);
	while (ret == 0) {
		int r;

		ret = kv_range(e, e->h, pfx, 1, &b);
		if (ret == 0 && ranks_of(b.p, pfx, set) < 0)
			ret = -TERN_EPROTO;
		if (ret != 0)
			break;
		for (r = 0; r < w->size; r++)
			if (!set[r] && tern_world_alive(w, r))
				break;
		if (r == w->size)
			break;
		if (tern__now_ns() >= deadline_ns) {
			tern__warn("world etcd: fence %llu: rank %d never came",
				   (unsigned long long)gen, r);
			ret = -ETIMEDOUT;
			break;
		}
		nap(w, &us);
	}
	free(b.p);
	free(set);
	return ret;
}

static void etcd_close(struct tern_world *w)
{
	struct etcd_world *e = ew(w);

	if (e == NULL)
		return;
	if (e->running) {
		pthread_mutex_lock(&e->lock);
		e->stop = 1;
		pthread_cond_signal(&e->cond);
		pthread_mutex_unlock(&e->lock);
		pthread_join(e->thread, NULL);
	}
	if (e->h != NULL && e->lease[0] != '\0') {
		struct body b = { 0 };
		char json[96];

		/* Everything this rank wrote goes with its lease. */
		snprintf(json, sizeof(json), "{\"ID\":\"%s\"}", e->lease);
		post(e, e->h, "/v3/lease/revoke", json, &b, 2000);
		free(b.p);
	}
	if (e->h != NULL)
		e->api.cleanup(e->h);
	/* libcurl stays loaded: its global state outlives a handle. */
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e->seen);
	free(e);
	w->be = NULL;
}

const struct tern__world_ops tern__world_etcd = {
	.kind = "etcd",
	.open = etcd_open,
	.put = etcd_put,
	.get = etcd_get,
	.fence = etcd_fence,
	.close = etcd_close,
};
