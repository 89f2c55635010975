/* SPDX-License-Identifier: MIT */
/*
 * A program built against tern 0.1 keeps running (docs/api.md, "ABI"):
 * compiled against 0.1's attr structs (tests/abi/v0.h, no field_mask) and
 * bound to the TERN_0 entry points, it opens a ctx over shm with fields
 * that are not the defaults and sees them taken, registers a region, joins
 * a file world and serves the bootstrap. Each struct ends at a guard page:
 * reading or writing a byte past 0.1's layout would fault.
 *
 * usage: abi_old_caller
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v0.h"
#include "check.h"

static struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr *a = at_guard(sizeof(*a));
	struct tern_ctx_info info;
	struct tern_ctx *ctx;
	int ret;

	/* A field past what the library allows: refused, so it was read. */
	*a = (struct tern_ctx_attr){ .provider = "shm", .log_level = 99 };
	CHECK(tern_ctx_open(a, &ctx) == -EINVAL, "log_level 99 taken");
	*a = (struct tern_ctx_attr){ .provider = "shm", .rails = 2 };
	ret = tern_ctx_open(a, &ctx);
	CHECK(ret == 0, "tern_ctx_open@TERN_0: %s", tern_strerror(ret));
	CHECK(tern_ctx_query(ctx, &info) == 0, "query");
	CHECK(strcmp(info.provider, "shm") == 0, "provider %s", info.provider);
	CHECK(info.rails == 2, "rails %u, not the 2 asked", info.rails);
	return ctx;
}

static void reg_region(struct tern_ctx *ctx)
{
	struct tern_mr_attr *a = at_guard(sizeof(*a));
	static uint8_t buf[8192];
	struct tern_mr *mr;
	int ret;

	*a = (struct tern_mr_attr){ .buf = buf,
				    .len = sizeof(buf),
				    .access = TERN_ACCESS_LOCAL,
				    .kind = TERN_MEM_HOST,
				    .flags = 1ULL << 20 };
	CHECK(tern_mr_regattr(ctx, a, &mr) == -EINVAL, "unknown flag taken");
	a->flags = TERN_MR_F_NOCACHE;
	ret = tern_mr_regattr(ctx, a, &mr);
	CHECK(ret == 0, "tern_mr_regattr@TERN_0: %s", tern_strerror(ret));
	CHECK(tern_mr_addr(mr) == buf && tern_mr_len(mr) == sizeof(buf),
	      "region %p + %zu", tern_mr_addr(mr), tern_mr_len(mr));
	CHECK(tern_mr_close(mr) == 0, "mr close");
}

static void join_world(struct tern_ctx *ctx)
{
	struct tern_world_attr *a = at_guard(sizeof(*a));
	char dir[] = "/tmp/tern-abi-XXXXXX", spec[64];
	struct tern_world *w;
	int ret;

	memset(a, 0x5a, sizeof(*a));
	tern_world_attr_init(a);
	CHECK(a->rank == -1 && a->size == 0 && a->timeout_ms == 0 &&
		      a->lease_s == 0 && a->on_member == NULL && a->arg == NULL,
	      "tern_world_attr_init@TERN_0: not 0.1's defaults");
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(spec, sizeof(spec), "file:%s", dir);
	a->rank = 0;
	a->size = 1;
	a->timeout_ms = 10000;
	ret = tern_world_open(ctx, spec, a, &w);
	CHECK(ret == 0, "tern_world_open@TERN_0: %s", tern_strerror(ret));
	CHECK(tern_world_rank(w) == 0 && tern_world_size(w) == 1,
	      "rank %d of %d", tern_world_rank(w), tern_world_size(w));
	tern_world_close(w);
	/* What the file world left: its records, then the directory. */
	snprintf(spec, sizeof(spec), "rm -rf '%s'", dir);
	CHECK(system(spec) == 0, "%s", spec);
}

static void serve_boot(struct tern_ctx *ctx)
{
	struct tern_boot_server_attr *a = at_guard(sizeof(*a));
	static struct tern_boot_info mine;
	char why[256], addr[128], token[300];
	struct tern_boot_server *srv;
	ssize_t n;
	int ret;

	n = tern_ctx_card(ctx, mine.card, sizeof(mine.card));
	CHECK(n > 0, "card");
	mine.card_len = (size_t)n;
	/* A token longer than the library takes: refused, so it was read. */
	memset(token, 'x', sizeof(token) - 1);
	token[sizeof(token) - 1] = '\0';
	*a = (struct tern_boot_server_attr){ .listen = "127.0.0.1:0",
					     .token = token };
	CHECK(tern_boot_server_open(ctx, a, &mine, &srv, why, sizeof(why)) ==
		      -22,
	      "a %zu-byte token taken", strlen(token));
	*a = (struct tern_boot_server_attr){ .listen = "127.0.0.1:0",
					     .token = "abi",
					     .max_conns = 4,
					     .claim_ms = 1000 };
	ret = tern_boot_server_open(ctx, a, &mine, &srv, why, sizeof(why));
	CHECK(ret == 0, "tern_boot_server_open@TERN_0: %s (%s)",
	      tern_strerror(ret), why);
	CHECK(tern_boot_server_addr(srv, addr, sizeof(addr)) == 0 &&
		      strncmp(addr, "127.0.0.1:", 10) == 0,
	      "bound to %s", addr);
	tern_boot_server_close(srv);
}

int main(void)
{
	struct tern_ctx *ctx = open_ctx();

	reg_region(ctx);
	join_world(ctx);
	serve_boot(ctx);
	CHECK(tern_ctx_close(ctx) == 0, "ctx close");
	printf("ok: a 0.1 caller opened a ctx (shm, 2 rails), registered a "
	       "region, joined a file world and served the bootstrap through "
	       "the TERN_0 entry points\n");
	return 0;
}
