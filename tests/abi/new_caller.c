/* SPDX-License-Identifier: MIT */
/*
 * field_mask from a caller of today's headers (docs/api.md, "Attribute
 * structs"): tern_*_attr_defaults() writes only the fields it is given;
 * an attr whose mask names some fields, the others left as garbage that
 * would fault or be refused if read, takes those fields and the defaults
 * for the rest; a mask of 0 reads the fields of 0.1; a bit the library
 * does not know is refused with -EINVAL, the log naming it.
 *
 * usage: abi_new_caller
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "check.h"

#define GARBAGE 0xa5
#define UNKNOWN (1ULL << 40)

/* Run @call with stderr into a file; @return what it logged. */
static char logged[4096];
#define LOGGED(ret, call)                                        \
	do {                                                     \
		int fd_ = dup(2), tmp_ = fileno(tmpfile());      \
		ssize_t n_;                                      \
		dup2(tmp_, 2);                                   \
		(ret) = (call);                                  \
		fflush(stderr);                                  \
		dup2(fd_, 2);                                    \
		close(fd_);                                      \
		n_ = pread(tmp_, logged, sizeof(logged) - 1, 0); \
		logged[n_ > 0 ? n_ : 0] = '\0';                  \
	} while (0)

static int all_bytes(const void *p, size_t len, int byte)
{
	for (size_t i = 0; i < len; i++)
		if (((const unsigned char *)p)[i] != byte)
			return 0;
	return 1;
}

static void defaults(void)
{
	struct tern_ctx_attr c;
	struct tern_mr_attr m;
	struct tern_world_attr w;
	struct tern_boot_server_attr b;

	/* Only the fields named, and field_mask. */
	memset(&c, GARBAGE, sizeof(c));
	CHECK(tern_ctx_attr_defaults(&c, TERN_CTX_ATTR_FIELD_RAILS |
						 TERN_CTX_ATTR_FIELD_FABRIC) ==
		      0,
	      "ctx defaults");
	CHECK(c.field_mask == (TERN_CTX_ATTR_FIELD_RAILS |
			       TERN_CTX_ATTR_FIELD_FABRIC) &&
		      c.rails == 0 && c.fabric == NULL,
	      "ctx: the fields named not at their defaults");
	CHECK(all_bytes(&c.provider, sizeof(c.provider), GARBAGE) &&
		      all_bytes(&c.post_batch, sizeof(c.post_batch), GARBAGE) &&
		      all_bytes(&c.domains, sizeof(c.domains), GARBAGE),
	      "ctx: a field not named was written");
	memset(&m, GARBAGE, sizeof(m));
	CHECK(tern_mr_attr_defaults(&m, TERN_MR_ATTR_FIELD_DEVICE |
						TERN_MR_ATTR_FIELD_KIND) == 0,
	      "mr defaults");
	CHECK(m.device == -1 && m.kind == TERN_MEM_HOST &&
		      all_bytes(&m.buf, sizeof(m.buf), GARBAGE) &&
		      all_bytes(&m.flags, sizeof(m.flags), GARBAGE),
	      "mr: device %d kind %d", m.device, (int)m.kind);
	memset(&w, GARBAGE, sizeof(w));
	CHECK(tern_world_attr_defaults(&w, TERN_WORLD_ATTR_FIELD_RANK) == 0,
	      "world defaults");
	CHECK(w.rank == -1 && w.field_mask == TERN_WORLD_ATTR_FIELD_RANK &&
		      all_bytes(&w.size, sizeof(w.size), GARBAGE),
	      "world: rank %d", w.rank);

	/* The inline init: every field, the mask of this header. */
	memset(&c, GARBAGE, sizeof(c));
	tern_ctx_attr_init(&c);
	CHECK(c.field_mask == TERN_CTX_ATTR_FIELDS_ALL && c.provider == NULL &&
		      c.rails == 0 && c.flags == 0 && c.fabric == NULL,
	      "tern_ctx_attr_init");
	memset(&m, GARBAGE, sizeof(m));
	tern_mr_attr_init(&m);
	CHECK(m.field_mask == TERN_MR_ATTR_FIELDS_ALL && m.buf == NULL &&
		      m.len == 0 && m.device == -1 && m.flags == 0,
	      "tern_mr_attr_init");
	memset(&w, GARBAGE, sizeof(w));
	tern_world_attr_init(&w);
	CHECK(w.field_mask == TERN_WORLD_ATTR_FIELDS_ALL && w.rank == -1 &&
		      w.size == 0 && w.on_member == NULL,
	      "tern_world_attr_init");
	memset(&b, GARBAGE, sizeof(b));
	tern_boot_server_attr_init(&b);
	CHECK(b.field_mask == TERN_BOOT_SERVER_ATTR_FIELDS_ALL &&
		      b.listen == NULL && b.token == NULL &&
		      b.handshake_ms == 0 && b.claim_ms == 0,
	      "tern_boot_server_attr_init");

	/* A bit of a newer header: the known fields set, -EINVAL. */
	memset(&c, GARBAGE, sizeof(c));
	CHECK(tern_ctx_attr_defaults(&c, TERN_CTX_ATTR_FIELDS_ALL | UNKNOWN) ==
			      -EINVAL &&
		      c.rails == 0 &&
		      c.field_mask == (TERN_CTX_ATTR_FIELDS_ALL | UNKNOWN),
	      "ctx defaults with an unknown bit");
	CHECK(tern_ctx_attr_defaults(NULL, 0) == -EINVAL &&
		      tern_mr_attr_defaults(&m, UNKNOWN) == -EINVAL &&
		      tern_world_attr_defaults(&w, UNKNOWN) == -EINVAL &&
		      tern_boot_server_attr_defaults(&b, UNKNOWN) == -EINVAL,
	      "defaults with an unknown bit");
}

static struct tern_ctx *ctx_masked(void)
{
	struct tern_ctx_attr a;
	struct tern_ctx_info info;
	struct tern_ctx *ctx;
	int ret;

	/* Garbage in every field left out: a pointer there would fault. */
	memset(&a, GARBAGE, sizeof(a));
	a.field_mask = TERN_CTX_ATTR_FIELD_PROVIDER | TERN_CTX_ATTR_FIELD_RAILS;
	a.provider = "shm";
	a.rails = 2;
	ret = tern_ctx_open(&a, &ctx);
	CHECK(ret == 0, "ctx, two fields: %s", tern_strerror(ret));
	CHECK(tern_ctx_query(ctx, &info) == 0 && info.rails == 2 &&
		      strcmp(info.provider, "shm") == 0,
	      "ctx: %s, %u rails", info.provider, info.rails);
	CHECK(tern_ctx_close(ctx) == 0, "close");

	/* rails left out: its default (one), not the garbage. */
	a.field_mask = TERN_CTX_ATTR_FIELD_PROVIDER;
	ret = tern_ctx_open(&a, &ctx);
	CHECK(ret == 0, "ctx, provider only: %s", tern_strerror(ret));
	CHECK(tern_ctx_query(ctx, &info) == 0 && info.rails == 1,
	      "ctx: %u rails, not the default 1", info.rails);
	CHECK(tern_ctx_close(ctx) == 0, "close");

	/* A bit this library does not know: refused, and named. */
	a.field_mask |= UNKNOWN;
	LOGGED(ret, tern_ctx_open(&a, &ctx));
	CHECK(ret == -EINVAL, "unknown bit: %s", tern_strerror(ret));
	CHECK(strstr(logged, "tern_ctx_attr.field_mask sets bit 40") != NULL,
	      "the log does not name bit 40: %s", logged);

	/* field_mask 0: every field of 0.1, as a zeroed struct set by
	 * designated initialisers before field_mask. */
	a = (struct tern_ctx_attr){ .provider = "shm", .rails = 3 };
	ret = tern_ctx_open(&a, &ctx);
	CHECK(ret == 0, "ctx, mask 0: %s", tern_strerror(ret));
	CHECK(tern_ctx_query(ctx, &info) == 0 && info.rails == 3,
	      "ctx, mask 0: %u rails, not 3", info.rails);
	return ctx;
}

static void mr_masked(struct tern_ctx *ctx)
{
	static uint8_t buf[4096];
	struct tern_mr_attr a;
	struct tern_mr *mr;
	int ret;

	memset(&a, GARBAGE, sizeof(a));
	a.field_mask = TERN_MR_ATTR_FIELD_BUF | TERN_MR_ATTR_FIELD_LEN |
		       TERN_MR_ATTR_FIELD_ACCESS;
	a.buf = buf;
	a.len = sizeof(buf);
	a.access = TERN_ACCESS_LOCAL;
	ret = tern_mr_regattr(ctx, &a, &mr);
	CHECK(ret == 0, "mr, three fields: %s", tern_strerror(ret));
	CHECK(tern_mr_path(mr) == TERN_MR_PATH_HOST &&
		      tern_mr_len(mr) == sizeof(buf),
	      "mr: path %d", (int)tern_mr_path(mr));
	CHECK(tern_mr_close(mr) == 0, "mr close");
	/* The kind set: read (an unknown kind is refused). */
	a.field_mask |= TERN_MR_ATTR_FIELD_KIND;
	a.kind = (enum tern_mem_kind)77;
	CHECK(tern_mr_regattr(ctx, &a, &mr) == -EINVAL, "kind 77 taken");
	a.field_mask |= UNKNOWN;
	a.kind = TERN_MEM_HOST;
	CHECK(tern_mr_regattr(ctx, &a, &mr) == -EINVAL, "mr: unknown bit");
}

static void world_masked(struct tern_ctx *ctx)
{
	char dir[] = "/tmp/tern-abi-XXXXXX", spec[64], cmd[96];
	struct tern_world_attr a;
	struct tern_world *w;
	int ret;

	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(spec, sizeof(spec), "file:%s", dir);
	/* rank left out: -1, so $TERN_WORLD_RANK says it. */
	memset(&a, GARBAGE, sizeof(a));
	a.field_mask = TERN_WORLD_ATTR_FIELD_SIZE |
		       TERN_WORLD_ATTR_FIELD_TIMEOUT_MS;
	a.size = 1;
	a.timeout_ms = 10000;
	CHECK(setenv("TERN_WORLD_RANK", "0", 1) == 0, "setenv");
	ret = tern_world_open(ctx, spec, &a, &w);
	CHECK(ret == 0, "world: %s", tern_strerror(ret));
	CHECK(tern_world_rank(w) == 0 && tern_world_size(w) == 1,
	      "world: rank %d of %d", tern_world_rank(w), tern_world_size(w));
	tern_world_close(w);
	unsetenv("TERN_WORLD_RANK");
	a.field_mask |= UNKNOWN;
	CHECK(tern_world_open(ctx, spec, &a, &w) == -EINVAL,
	      "world: unknown bit");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "%s", cmd);
}

static void boot_masked(struct tern_ctx *ctx)
{
	static struct tern_boot_info mine;
	struct tern_boot_server_attr a;
	struct tern_boot_server *srv;
	char why[256], addr[128];
	ssize_t n;
	int ret;

	n = tern_ctx_card(ctx, mine.card, sizeof(mine.card));
	CHECK(n > 0, "card");
	mine.card_len = (size_t)n;
	memset(&a, GARBAGE, sizeof(a)); /* a garbage token would fault */
	a.field_mask = TERN_BOOT_SERVER_ATTR_FIELD_LISTEN;
	a.listen = "127.0.0.1:0";
	ret = tern_boot_server_open(ctx, &a, &mine, &srv, why, sizeof(why));
	CHECK(ret == 0, "boot: %s (%s)", tern_strerror(ret), why);
	CHECK(tern_boot_server_addr(srv, addr, sizeof(addr)) == 0 &&
		      strncmp(addr, "127.0.0.1:", 10) == 0,
	      "bound to %s", addr);
	tern_boot_server_close(srv);
	a.field_mask |= UNKNOWN;
	CHECK(tern_boot_server_open(ctx, &a, &mine, &srv, why, sizeof(why)) ==
		      -EINVAL,
	      "boot: unknown bit");
}

int main(void)
{
	struct tern_ctx *ctx;

	defaults();
	ctx = ctx_masked();
	mr_masked(ctx);
	world_masked(ctx);
	boot_masked(ctx);
	CHECK(tern_ctx_close(ctx) == 0, "close");
	printf("ok: field_mask: defaults written field by field; fields left "
	       "out never read; 0 reads 0.1's; an unknown bit refused and "
	       "named\n");
	return 0;
}
