/* SPDX-License-Identifier: MIT */
/*
 * The TERN_0 ABI of the attr structs: what a binary built against tern 0.1
 * calls. Its structs have no field_mask (0.1's layouts, frozen below), so
 * the functions that take one keep their 0.1 entry point as name@TERN_0;
 * each copies the old struct, reading no byte past its old size, into
 * today's with field_mask 0 (the fields of 0.1: all of these), and calls
 * today's function, name@@TERN_0.2 (docs/api.md, "ABI").
 * The 0.1 layouts never change; tests/abi/old_caller.c holds them too.
 */
#include <stddef.h>
#include <stdint.h>

#include <tern/tern.h>

/* name@TERN_0 is @impl, exported by the version script's TERN_0 node;
 * the shim itself is local (the script's "local: *"). */
#define TERN_V0(impl, name) __asm__(".symver " #impl ", " #name "@TERN_0")

struct ctx_attr_v0 {
	const char *provider;
	const char *node;
	const char *domain;
	unsigned int rails;
	enum tern_log_level log_level;
	unsigned int post_batch;
	uint64_t flags;
	uint64_t stripe_chunk;
	const char *domains;
	const char *fabric;
};

struct mr_attr_v0 {
	void *buf;
	size_t len;
	uint64_t access;
	enum tern_mem_kind kind;
	int device;
	uint64_t flags;
};

struct world_attr_v0 {
	int rank;
	int size;
	int timeout_ms;
	int lease_s;
	tern_world_cb on_member;
	void *arg;
};

struct boot_server_attr_v0 {
	const char *listen;
	const char *token;
	int handshake_ms;
	int max_conns;
	tern_boot_cb on_hello;
	tern_boot_cb on_gone;
	tern_boot_cb on_refused;
	void *data;
	int claim_ms;
};

TERN_API int tern__ctx_open_v0(const struct ctx_attr_v0 *o,
			       struct tern_ctx **ctx_p);
TERN_API int tern__mr_regattr_v0(struct tern_ctx *ctx,
				 const struct mr_attr_v0 *o,
				 struct tern_mr **mr_p);
TERN_API void tern__world_attr_init_v0(struct world_attr_v0 *o);
TERN_API int tern__world_open_v0(struct tern_ctx *ctx, const char *spec,
				 const struct world_attr_v0 *o,
				 struct tern_world **world_p);
TERN_API int tern__boot_server_open_v0(struct tern_ctx *ctx,
				       const struct boot_server_attr_v0 *o,
				       const struct tern_boot_info *mine,
				       struct tern_boot_server **srv_p,
				       char *why, size_t whylen);

TERN_V0(tern__ctx_open_v0, tern_ctx_open);
int tern__ctx_open_v0(const struct ctx_attr_v0 *o, struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr a;

	if (o == NULL)
		return tern_ctx_open(NULL, ctx_p);
	a = (struct tern_ctx_attr){
		.field_mask = 0, /* the fields of 0.1 */
		.provider = o->provider,
		.node = o->node,
		.domain = o->domain,
		.rails = o->rails,
		.log_level = o->log_level,
		.post_batch = o->post_batch,
		.flags = o->flags,
		.stripe_chunk = o->stripe_chunk,
		.domains = o->domains,
		.fabric = o->fabric,
	};
	return tern_ctx_open(&a, ctx_p);
}

TERN_V0(tern__mr_regattr_v0, tern_mr_regattr);
int tern__mr_regattr_v0(struct tern_ctx *ctx, const struct mr_attr_v0 *o,
			struct tern_mr **mr_p)
{
	struct tern_mr_attr a;

	if (o == NULL)
		return tern_mr_regattr(ctx, NULL, mr_p);
	a = (struct tern_mr_attr){
		.field_mask = 0, /* the fields of 0.1 */
		.buf = o->buf,
		.len = o->len,
		.access = o->access,
		.kind = o->kind,
		.device = o->device,
		.flags = o->flags,
	};
	return tern_mr_regattr(ctx, &a, mr_p);
}

/* 0.1's tern_world_attr_init(): the defaults, in the old layout. */
TERN_V0(tern__world_attr_init_v0, tern_world_attr_init);
void tern__world_attr_init_v0(struct world_attr_v0 *o)
{
	if (o != NULL)
		*o = (struct world_attr_v0){ .rank = -1 };
}

TERN_V0(tern__world_open_v0, tern_world_open);
int tern__world_open_v0(struct tern_ctx *ctx, const char *spec,
			const struct world_attr_v0 *o,
			struct tern_world **world_p)
{
	struct tern_world_attr a;

	if (o == NULL)
		return tern_world_open(ctx, spec, NULL, world_p);
	a = (struct tern_world_attr){
		.field_mask = 0, /* the fields of 0.1 */
		.rank = o->rank,
		.size = o->size,
		.timeout_ms = o->timeout_ms,
		.lease_s = o->lease_s,
		.on_member = o->on_member,
		.arg = o->arg,
	};
	return tern_world_open(ctx, spec, &a, world_p);
}

TERN_V0(tern__boot_server_open_v0, tern_boot_server_open);
int tern__boot_server_open_v0(struct tern_ctx *ctx,
			      const struct boot_server_attr_v0 *o,
			      const struct tern_boot_info *mine,
			      struct tern_boot_server **srv_p, char *why,
			      size_t whylen)
{
	struct tern_boot_server_attr a;

	if (o == NULL)
		return tern_boot_server_open(ctx, NULL, mine, srv_p, why,
					     whylen);
	a = (struct tern_boot_server_attr){
		.field_mask = 0, /* the fields of 0.1 */
		.listen = o->listen,
		.token = o->token,
		.handshake_ms = o->handshake_ms,
		.max_conns = o->max_conns,
		.on_hello = o->on_hello,
		.on_gone = o->on_gone,
		.on_refused = o->on_refused,
		.data = o->data,
		.claim_ms = o->claim_ms,
	};
	return tern_boot_server_open(ctx, &a, mine, srv_p, why, whylen);
}
