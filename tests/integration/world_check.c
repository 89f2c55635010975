/* SPDX-License-Identifier: MIT */
/* Checks every world backend passes alike (world_check.h). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "world_check.h"

struct tern_ctx *world_check_ctx(const char *prov)
{
	struct tern_ctx_attr a = { .provider = prov, .rails = 1 };
	struct tern_ctx *ctx;
	int ret;

	if (strcmp(prov, "tcp") == 0)
		a.node = "127.0.0.1";
	ret = tern_ctx_open(&a, &ctx);
	CHECK(ret == 0, "ctx over %s: %s", prov, tern_strerror(ret));
	return ctx;
}

void world_check_alone(struct tern_world *w, const char *kind)
{
	char big[TERN_WORLD_VALUE_MAX + 1], buf[64];
	char longname[TERN_WORLD_NAME_MAX + 2];
	ssize_t n;

	CHECK(tern_world_rank(w) == 0 && tern_world_size(w) == 1 &&
		      strcmp(tern_world_kind(w), kind) == 0 &&
		      tern_world_alive(w, 0) && !tern_world_alive(w, 1),
	      "rank, size, kind, alive");
	CHECK(tern_world_put(w, "kv", "hello", 5) == 0, "put");
	n = tern_world_get(w, 0, "kv", buf, sizeof(buf));
	CHECK(n == 5 && memcmp(buf, "hello", 5) == 0, "get: %zd", n);
	CHECK(tern_world_put(w, "kv", "bye", 3) == 0, "put again");
	CHECK(tern_world_get(w, 0, "kv", buf, sizeof(buf)) == 3,
	      "a republished name has the new value");
	CHECK(tern_world_get(w, 0, "kv", buf, 2) == -ENOSPC, "short buffer");
	n = tern_world_get(w, 0, "never", buf, sizeof(buf));
	CHECK(n == -ETIMEDOUT, "a name never published: %zd", n);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(tern_world_put(w, "", "x", 1) == -EINVAL, "empty name");
	CHECK(tern_world_put(w, "a/b", "x", 1) == -EINVAL, "a/b");
	CHECK(tern_world_put(w, longname, "x", 1) == -EINVAL, "64 chars");
	CHECK(tern_world_put(w, "card", "x", 1) == -EINVAL, "card");
	memset(big, 1, sizeof(big));
	CHECK(tern_world_put(w, "big", big, sizeof(big)) == -EINVAL,
	      "a value of %zu bytes", sizeof(big));
	CHECK(tern_world_put(w, "max", big, TERN_WORLD_VALUE_MAX) == 0,
	      "a value of TERN_WORLD_VALUE_MAX bytes");
	CHECK(tern_world_get(w, 5, "kv", buf, sizeof(buf)) == -EINVAL,
	      "rank 5 of 1");
}

struct tern_mr *world_check_publish(struct tern_ctx *ctx, struct tern_world *w,
				    void *region, size_t len)
{
	struct tern_mr_desc d = { 0 }, back;
	struct tern_mr *mr;

	CHECK(tern_mr_reg(ctx, region, len,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE,
			  &mr) == 0,
	      "reg");
	CHECK(tern_mr_desc(mr, &d) == 0, "desc");
	CHECK(tern_world_publish(w, "region", &d) == 0, "publish");
	CHECK(tern_world_lookup(w, 0, "region", &back) == 0 &&
		      back.len == d.len && back.base == d.base,
	      "lookup");
	return mr;
}
