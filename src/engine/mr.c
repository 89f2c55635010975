/* SPDX-License-Identifier: MIT */
/* Memory registration on every rail (the descriptor codec: wire/desc.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine.h"
#include "local.h"
#include "../core/attr.h"
#include "../hmem/cuda.h"
#include "stage.h"

#define TERN_ACCESS_ALL                                \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | \
	 TERN_ACCESS_REMOTE_WRITE | TERN_ACCESS_REMOTE_ATOMIC)

/*
 * The registration cache. A region of host memory shares the provider
 * registrations of a live one when they cover the same range with the
 * same rights, or, for regions without remote access (TERN_ACCESS_LOCAL
 * alone: sources and sinks of our own operations), when the live one's
 * range holds it. Each shared registration counts the regions using it;
 * the last tern_mr_close() releases it. Nothing is kept after that: a
 * range closed and freed, then reused by new memory, is registered again,
 * never reached through the old registration (tern knows memory is gone
 * from the user's close, as the buffer must stay allocated until then).
 * Remote rights are never widened by sharing: a peer's key reaches only
 * what the region it was given covers, with the rights it was registered
 * with, as without the cache (a sub-range of a remote region gets its own
 * registration, whose bounds the provider enforces).
 */
struct tern__mreg {
	struct tern__mreg *next, *prev; /* ctx->mregs */
	uint8_t *buf;
	size_t len;
	uint64_t access;
	unsigned long refs; /* regions sharing it */
	struct tern__prov_mr *pmr[TERN_MAX_RAILS];
	void *desc[TERN_MAX_RAILS];
	uint64_t key[TERN_MAX_RAILS];
};

/* A live registration @mr may share, or NULL. */
static struct tern__mreg *mreg_find(const struct tern_ctx *ctx,
				    const struct tern_mr *mr)
{
	const uint8_t *b = mr->buf;

	for (struct tern__mreg *g = ctx->mregs; g != NULL; g = g->next) {
		if (g->access != mr->access)
			continue;
		if (g->buf == b && g->len == mr->len)
			return g;
		if (mr->access == TERN_ACCESS_LOCAL && b >= g->buf &&
		    (size_t)(b - g->buf) <= g->len &&
		    mr->len <= g->len - (size_t)(b - g->buf))
			return g;
	}
	return NULL;
}

static void mreg_use(struct tern_mr *mr, struct tern__mreg *g)
{
	g->refs++;
	mr->reg = g;
	for (unsigned int i = 0; i < mr->ctx->nrails; i++) {
		mr->desc[i] = g->desc[i];
		mr->key[i] = g->key[i];
	}
}

/* @mr's registrations, just made, become a shared one it uses. */
static int mreg_keep(struct tern_mr *mr)
{
	struct tern_ctx *ctx = mr->ctx;
	struct tern__mreg *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return -ENOMEM;
	g->buf = mr->buf;
	g->len = mr->len;
	g->access = mr->access;
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		g->pmr[i] = mr->pmr[i];
		g->desc[i] = mr->desc[i];
		g->key[i] = mr->key[i];
		mr->pmr[i] = NULL;
	}
	g->next = ctx->mregs;
	if (ctx->mregs != NULL)
		ctx->mregs->prev = g;
	ctx->mregs = g;
	g->refs = 1;
	mr->reg = g;
	return 0;
}

static void mreg_put(struct tern_ctx *ctx, struct tern__mreg *g)
{
	if (--g->refs != 0)
		return;
	for (unsigned int i = 0; i < ctx->nrails; i++)
		tern__prov_mr_close(g->pmr[i]);
	if (g->prev != NULL)
		g->prev->next = g->next;
	else
		ctx->mregs = g->next;
	if (g->next != NULL)
		g->next->prev = g->prev;
	free(g);
}

/* Register chunk @c of @mr (the whole region when it has one) on @r. */
static int reg_rail(struct tern_mr *mr, struct tern_rail *r, uint32_t c)
{
	struct tern_ctx *ctx = mr->ctx;
	/* The fake driver's "HMEM" memory is host memory to the provider. */
	int zcopy = mr->path == TERN_MR_PATH_ZCOPY && mr->device_for_prov;
	uint64_t off = (uint64_t)c << mr->chunk_shift, len = mr->len;
	size_t i = (size_t)c * ctx->nrails + r->idx;
	/* A dmabuf of the whole region, or of this chunk alone (a range of
	 * several GPU allocations: reg_vmm()). */
	uint64_t dmoff = mr->dmabuf_per_chunk ? mr->dmabuf_off
					      : mr->dmabuf_off + off;

	if (mr->nchunks <= 1)
		return tern__prov_mr_reg(
			&r->prov, r->idx, mr->buf, mr->len, mr->access,
			ctx->caps.prov_key ? 0 : ctx->next_key++,
			zcopy ? mr->device : -1, zcopy ? mr->dmabuf_fd : -1,
			mr->dmabuf_off, ctx->caps.mr_endpoint, &mr->pmr[r->idx],
			&mr->desc[r->idx], &mr->key[r->idx]);
	if (len - off > (1ULL << mr->chunk_shift))
		len = off + (1ULL << mr->chunk_shift);
	return tern__prov_mr_reg(
		&r->prov, r->idx, (char *)mr->buf + off, len - off, mr->access,
		ctx->caps.prov_key ? 0 : ctx->next_key++,
		zcopy ? mr->device : -1, zcopy ? mr->dmabuf_fd : -1, dmoff,
		ctx->caps.mr_endpoint, &mr->cpmr[i], &mr->cdesc[i],
		&mr->ckey[i]);
}

static void dereg(struct tern_mr *mr)
{
	if (mr->reg != NULL) {
		mreg_put(mr->ctx, mr->reg);
		mr->reg = NULL;
		return;
	}
	for (unsigned int i = 0; i < mr->ctx->nrails; i++) {
		tern__prov_mr_close(mr->pmr[i]);
		mr->pmr[i] = NULL;
	}
	if (mr->cpmr != NULL) {
		for (size_t i = 0; i < (size_t)mr->nchunks * mr->ctx->nrails;
		     i++) {
			tern__prov_mr_close(mr->cpmr[i]);
			mr->cpmr[i] = NULL;
		}
	}
}

static void chunks_free(struct tern_mr *mr)
{
	free(mr->cpmr);
	free(mr->cdesc);
	free(mr->ckey);
	mr->cpmr = NULL;
	mr->cdesc = NULL;
	mr->ckey = NULL;
	mr->nchunks = 1;
}

/*
 * Regions larger than one registration. A region longer than the ctx's
 * chunk (ctx.c, mr_chunk(): TERN_MR_CHUNK, or 64 GiB on EFA and verbs) is
 * registered as chunks of that size, each on every rail, behind one
 * tern_mr; its descriptor carries every chunk's keys (tern/mr.h), and
 * operations are cut where they cross a chunk (submit.c, post.c). A
 * descriptor holds 32 keys, 64 of 32 bits: a chunk size tern chose is
 * doubled until the region's fit; one the user set is kept, and a region
 * that would need more is refused (-E2BIG), naming the numbers.
 */
static int chunks_plan(struct tern_mr *mr, unsigned int cap)
{
	struct tern_ctx *ctx = mr->ctx;
	unsigned int shift = mr->whole ? 0 : ctx->mr_chunk_shift;
	uint64_t n;

	/* GPU allocations cut where they change (reg_vmm()). */
	if (mr->seg_shift != 0 && (shift == 0 || mr->seg_shift < shift))
		shift = mr->seg_shift;
	mr->nchunks = 1;
	if (shift == 0 || mr->len <= (1ULL << shift))
		return 0;
	for (;;) {
		n = tern__desc_nchunks(mr->len, shift);
		if (n * ctx->nrails <= cap)
			break;
		if (mr->seg_shift != 0) {
			tern__warn("CUDA region of %zu bytes at %p: its GPU "
				   "allocations change every %llu bytes from "
				   "its start at best, %" PRIu64
				   " chunks on %u "
				   "rail(s), a descriptor holds %d keys; "
				   "register it from an allocation's start",
				   mr->len, mr->buf, 1ULL << shift, n,
				   ctx->nrails, TERN_MR_DESC_KEYS32_MAX);
			return -E2BIG;
		}
		if (ctx->mr_chunk_user || shift >= TERN__DESC_SHIFT_MAX) {
			tern__warn("registering %zu bytes at %p: %" PRIu64
				   " chunks of %llu bytes on %u rail(s) need "
				   "%" PRIu64 " keys, a descriptor holds %d; "
				   "raise TERN_MR_CHUNK",
				   mr->len, mr->buf, n, 1ULL << shift,
				   ctx->nrails, n * ctx->nrails,
				   TERN_MR_DESC_KEYS32_MAX);
			return -E2BIG;
		}
		shift++;
	}
	if (n < 2)
		return 0;
	mr->nchunks = (uint32_t)n;
	mr->chunk_shift = (uint8_t)shift;
	n *= ctx->nrails;
	mr->cpmr = calloc(n, sizeof(*mr->cpmr));
	mr->cdesc = calloc(n, sizeof(*mr->cdesc));
	mr->ckey = calloc(n, sizeof(*mr->ckey));
	if (mr->cpmr == NULL || mr->cdesc == NULL || mr->ckey == NULL) {
		chunks_free(mr);
		mr->nchunks = 1;
		return -ENOMEM;
	}
	return 0;
}

/* Every chunk registered: chunk 0's keys where one-chunk code finds
 * them; whether its keys fit the descriptor. */
static int chunks_done(struct tern_mr *mr)
{
	struct tern_ctx *ctx = mr->ctx;
	size_t n = (size_t)mr->nchunks * ctx->nrails;

	mr->key32 = 1;
	for (size_t i = 0; i < n; i++) {
		if (mr->ckey[i] > UINT32_MAX)
			mr->key32 = 0;
	}
	if (!mr->key32 && n > TERN_MR_DESC_KEYS_MAX) {
		tern__warn("registering %zu bytes at %p: %u chunks on %u "
			   "rail(s) have %zu keys of more than 32 bits, a "
			   "descriptor holds %d such; raise TERN_MR_CHUNK",
			   mr->len, mr->buf, mr->nchunks, ctx->nrails, n,
			   TERN_MR_DESC_KEYS_MAX);
		return -E2BIG;
	}
	for (unsigned int i = 0; i < ctx->nrails; i++) {
		mr->desc[i] = mr->cdesc[i];
		mr->key[i] = mr->ckey[i];
	}
	return 0;
}

static int args_ok(const struct tern_ctx *ctx, const void *buf, size_t len,
		   uint64_t access, struct tern_mr **mr_p)
{
	return ctx != NULL && buf != NULL && len != 0 && mr_p != NULL &&
	       (access & TERN_ACCESS_ALL) != 0 &&
	       (access & ~TERN_ACCESS_ALL) == 0;
}

static void link_mr(struct tern_ctx *ctx, struct tern_mr *mr)
{
	ctx->nmr++;
	mr->next = ctx->mrs;
	if (ctx->mrs != NULL)
		ctx->mrs->prev = mr;
	ctx->mrs = mr;
}

static void unlink_mr(struct tern_mr *mr)
{
	mr->ctx->nmr--;
	if (mr->prev != NULL)
		mr->prev->next = mr->next;
	else
		mr->ctx->mrs = mr->next;
	if (mr->next != NULL)
		mr->next->prev = mr->prev;
	mr->next = mr->prev = NULL;
}

static struct tern_mr *mr_new(struct tern_ctx *ctx, void *buf, size_t len,
			      uint64_t access, int kind, int device, int path)
{
	struct tern_mr *mr = calloc(1, sizeof(*mr));

	if (mr == NULL)
		return NULL;
	mr->ctx = ctx;
	mr->buf = buf;
	mr->len = len;
	mr->access = access;
	mr->kind = kind;
	mr->device = device;
	mr->path = path;
	mr->dmabuf_fd = -1;
	mr->local_idx = -1;
	return mr;
}

/* A region of several GPU allocations, registered one chunk (inside one
 * allocation) at a time: chunk @c's own dmabuf, where the provider takes
 * dmabufs. */
static int chunk_dmabuf(struct tern_mr *mr, uint32_t c)
{
	const struct tern__cu *cu;
	uint64_t off = (uint64_t)c << mr->chunk_shift, len;

	if (!mr->dmabuf_per_chunk || !tern__prov_has_dmabuf())
		return 0;
	cu = tern__cu_get(NULL, 0);
	len = mr->len - off;
	if (len > (1ULL << mr->chunk_shift))
		len = 1ULL << mr->chunk_shift;
	tern__cu_dmabuf(cu, (char *)mr->buf + off, len, &mr->dmabuf_fd,
			&mr->dmabuf_off);
	if (mr->dmabuf_fd < 0) {
		tern__warn("CUDA region at %p: no dmabuf for its %zu bytes at "
			   "offset %" PRIu64 " (one GPU allocation)",
			   mr->buf, (size_t)len, off);
		return -TERN_EPROV;
	}
	return 0;
}

/* Register @mr (its path set) on every rail and link it; @cache: host
 * memory that may share a live registration, or be shared. */
static int reg_all(struct tern_mr *mr, int cache)
{
	struct tern_ctx *ctx = mr->ctx;
	uint64_t t0 = tern__now_ns();
	struct tern__mreg *g;
	int ret, retried = 0;

	ret = chunks_plan(mr, TERN_MR_DESC_KEYS32_MAX);
	if (ret != 0)
		return ret;
	/* A region in chunks keeps its own (the cache shares one each). */
	if (mr->nchunks > 1)
		cache = 0;
	if (cache && (g = mreg_find(ctx, mr)) != NULL) {
		mreg_use(mr, g);
		ctx->mr_cache_hits++;
		link_mr(ctx, mr);
		tern__local_mr_reg(ctx, mr);
		tern__debug(
			"registered %zu bytes at %p: shares the registration "
			"of %zu bytes at %p (%lu regions)",
			mr->len, mr->buf, g->len, (void *)g->buf, g->refs);
		return 0;
	}
again:
	for (uint32_t c = 0; c < mr->nchunks; c++) {
		ret = chunk_dmabuf(mr, c);
		for (unsigned int i = 0; i < ctx->nrails && ret == 0; i++)
			ret = reg_rail(mr, &ctx->rails[i], c);
		if (mr->dmabuf_per_chunk && mr->dmabuf_fd >= 0) {
			close(mr->dmabuf_fd);
			mr->dmabuf_fd = -1;
		}
		if (ret != 0) {
			dereg(mr);
			chunks_free(mr);
			return ret;
		}
	}
	if (mr->nchunks > 1 && (ret = chunks_done(mr)) != 0) {
		dereg(mr);
		chunks_free(mr);
		/* Keys of 64 bits: 32 fit. A chunk tern chose doubles
		 * again; the user's is kept (refused, named). */
		if (ret == -E2BIG && !ctx->mr_chunk_user &&
		    mr->seg_shift == 0 && !retried) {
			retried = 1;
			ret = chunks_plan(mr, TERN_MR_DESC_KEYS_MAX);
			if (ret == 0)
				goto again;
		}
		return ret;
	}
	if (cache) {
		ctx->mr_cache_misses++;
		if (mreg_keep(mr) != 0) {
			dereg(mr);
			return -ENOMEM;
		}
	}
	link_mr(ctx, mr);
	tern__local_mr_reg(ctx, mr);
	tern__debug("registered %zu bytes of %s at %p on %u rail(s), %u "
		    "chunk(s), in %.3f ms",
		    mr->len, tern_mr_path_str(mr->path), mr->buf, ctx->nrails,
		    mr->nchunks, (double)(tern__now_ns() - t0) / 1e6);
	return 0;
}

/* Host memory; @whole: tern's own buffer (never chunked nor shared). */
static int reg_host(struct tern_ctx *ctx, void *buf, size_t len,
		    uint64_t access, int cache, int whole,
		    struct tern_mr **mr_p)
{
	struct tern_mr *mr;
	int ret;

	if (!args_ok(ctx, buf, len, access, mr_p))
		return -EINVAL;
	mr = mr_new(ctx, buf, len, access, TERN_MEM_HOST, -1,
		    TERN_MR_PATH_HOST);
	if (mr == NULL)
		return -ENOMEM;
	mr->whole = (uint8_t)whole;
	ret = reg_all(mr, cache && !whole && ctx->mr_cache);
	if (ret != 0) {
		free(mr);
		return ret;
	}
	*mr_p = mr;
	return 0;
}

int tern_mr_reg(struct tern_ctx *ctx, void *buf, size_t len, uint64_t access,
		struct tern_mr **mr_p)
{
	return reg_host(ctx, buf, len, access, 1, 0, mr_p);
}

/* tern's own buffers (bounce, control, atomics' scratch): small, posted
 * with their one descriptor, so never in chunks, and never shared. */
int tern__mr_reg_own(struct tern_ctx *ctx, void *buf, size_t len,
		     uint64_t access, struct tern_mr **mr_p)
{
	return reg_host(ctx, buf, len, access, 0, 1, mr_p);
}

/* A staged region: a pinned host shadow of the same size is what the
 * provider sees (and what peers address); @mr keeps the device range. */
static int reg_staged(struct tern_mr *mr, const struct tern__cu *cu)
{
	struct tern_ctx *ctx = mr->ctx;
	void *shadow = NULL;
	tern_cu_result r;
	int ret;

	if (mr->access & TERN_ACCESS_REMOTE_ATOMIC) {
		tern__warn("CUDA region at %p: remote atomics need a provider "
			   "that reaches GPU memory (HMEM); staged, they "
			   "would act on the host shadow",
			   mr->buf);
		return -TERN_ENOTSUP;
	}
	if (tern__stage_device(ctx) >= 0 &&
	    tern__stage_device(ctx) != mr->device) {
		tern__warn("CUDA region on device %d: this ctx stages for "
			   "device %d (open one ctx per GPU)",
			   mr->device, tern__stage_device(ctx));
		return -TERN_ENOTSUP;
	}
	ret = tern__stage_open(ctx, cu, mr->device);
	if (ret != 0)
		return ret;
	r = cu->MemHostAlloc(&shadow, mr->len, TERN_CU_HOSTALLOC_PORTABLE);
	if (r != TERN_CU_SUCCESS) {
		tern__warn(
			"CUDA region of %zu bytes: no pinned host shadow: %s",
			mr->len, tern__cu_errstr(cu, r));
		return -ENOMEM;
	}
	ret = tern_mr_reg(ctx, shadow, mr->len, mr->access, &mr->smr);
	if (ret == 0 && mr->smr->nchunks > 1) {
		/* The staging pipeline cuts at its own sizes. */
		tern__warn("CUDA region of %zu bytes: staged, it would need a "
			   "shadow registered in chunks, which staging does "
			   "not cut at; raise TERN_MR_CHUNK",
			   mr->len);
		tern__mr_close(mr->smr);
		mr->smr = NULL;
		ret = -TERN_ENOTSUP;
	}
	if (ret != 0) {
		cu->MemFreeHost(shadow);
		return ret;
	}
	/* tern's own: not the user's to count or close. */
	unlink_mr(mr->smr);
	mr->smr->hidden = 1;
	link_mr(ctx, mr);
	tern__info("CUDA region of %zu bytes on device %d: staged through "
		   "host memory (%s offers no HMEM%s)",
		   mr->len, mr->device, ctx->caps.prov_name,
		   ctx->caps.hmem ? "; staging was asked" : " on this ctx");
	return 0;
}

/*
 * CUDA's virtual memory. A range cuMemMap'ed from several physical
 * allocations (PyTorch's expandable segments, cudaMallocAsync pools)
 * registers as one where CUDA exports it as one dmabuf (its allocations
 * alike: one device, the same properties) and the provider takes it.
 * Where not, it is registered one allocation at a time: chunks (as for a
 * region larger than one registration) of the largest power of two that
 * every boundary between allocations is a multiple of, from the region's
 * start, each inside one allocation, with its own dmabuf. 2 MiB
 * allocations (CUDA's granularity) make 2 MiB chunks at most: a
 * descriptor's 64 keys then cover 128 MiB on one rail, and a longer
 * region of unlike allocations is refused (-E2BIG), naming them.
 */
static int reg_vmm(struct tern_mr *mr, const uint64_t *bounds, int n)
{
	unsigned int shift = TERN__DESC_SHIFT_MAX;

	for (int i = 0; i < n; i++) {
		unsigned int z = (unsigned int)__builtin_ctzll(bounds[i]);

		if (z < shift)
			shift = z;
	}
	if (shift < TERN__DESC_SHIFT_MIN) {
		tern__warn("CUDA region at %p: its GPU allocations change at "
			   "offset %" PRIu64 ", not a multiple of 4 KiB",
			   mr->buf, bounds[0]);
		return -TERN_EPROV;
	}
	tern__info("CUDA region of %zu bytes at %p: %d GPU allocations that "
		   "one registration cannot span; registered one chunk of "
		   "%llu bytes at a time",
		   mr->len, mr->buf, n + 1, 1ULL << shift);
	mr->seg_shift = (uint8_t)shift;
	mr->dmabuf_per_chunk = 1;
	return reg_all(mr, 0);
}

/* Zero copy: a dmabuf where both ends know it (libfabric >= 1.20), else
 * libfabric's own way to the GPU (iface and device). */
static int reg_zcopy(struct tern_mr *mr, const struct tern__cu *cu)
{
	uint64_t bounds[TERN_MR_DESC_KEYS32_MAX];
	int n = tern__cu_segments(cu, mr->buf, mr->len, bounds,
				  (int)TERN_ARRAY_SIZE(bounds));
	int ret;

	/* Several allocations: whether CUDA exports them as one tells
	 * whether one registration can hold them, on any libfabric. */
	if (tern__prov_has_dmabuf() || n > 0)
		tern__cu_dmabuf(cu, mr->buf, mr->len, &mr->dmabuf_fd,
				&mr->dmabuf_off);
	if (n > 0 && mr->dmabuf_fd < 0 &&
	    cu->MemGetHandleForAddressRange != NULL)
		return reg_vmm(mr, bounds, n);
	if (!tern__prov_has_dmabuf() && mr->dmabuf_fd >= 0) {
		close(mr->dmabuf_fd);
		mr->dmabuf_fd = -1;
	}
	ret = reg_all(mr, 0);
	if (mr->dmabuf_fd >= 0)
		close(mr->dmabuf_fd);
	mr->dmabuf_fd = -1;
	if (ret != 0 && n > 0)
		ret = reg_vmm(mr, bounds, n);
	return ret;
}

/* tern_mr_attr's fields (its field_mask) and their defaults. */
static const struct tern_mr_attr mr_attr_default = {
	.kind = TERN_MEM_HOST,
	.device = -1,
};
#define F(bit, m) \
	TERN__ATTR_FIELD(struct tern_mr_attr, TERN_MR_ATTR_FIELD_##bit, m)
static const struct tern__attr_field mr_attr_fields[] = {
	F(BUF, buf),   F(LEN, len),	  F(ACCESS, access),
	F(KIND, kind), F(DEVICE, device), F(FLAGS, flags),
};
#undef F
/* field_mask 0: 0.1's six fields, all of them. */
static const struct tern__attr_kind mr_attr_kind = TERN__ATTR_KIND(
	tern_mr_attr, mr_attr_default, mr_attr_fields, TERN_MR_ATTR_FIELDS_ALL);

int tern_mr_attr_defaults(struct tern_mr_attr *attr, uint64_t fields)
{
	return tern__attr_defaults(&mr_attr_kind, attr, fields);
}

int tern_mr_regattr(struct tern_ctx *ctx, const struct tern_mr_attr *uattr,
		    struct tern_mr **mr_p)
{
	struct tern_mr_attr attr_buf, *attr = &attr_buf;
	const struct tern__cu *cu;
	struct tern_mr *mr;
	char why[160];
	int dev = -1, ret;

	if (uattr == NULL)
		return -EINVAL;
	ret = tern__attr_resolve(&mr_attr_kind, "tern_mr_regattr", uattr, attr);
	if (ret != 0)
		return ret;
	if (!args_ok(ctx, attr->buf, attr->len, attr->access, mr_p) ||
	    (attr->flags & ~(TERN_MR_F_STAGED | TERN_MR_F_NOCACHE)) != 0)
		return -EINVAL;
	if (attr->kind == TERN_MEM_HOST)
		return reg_host(ctx, attr->buf, attr->len, attr->access,
				!(attr->flags & TERN_MR_F_NOCACHE), 0, mr_p);
	if (attr->kind != TERN_MEM_CUDA)
		return -EINVAL;
	cu = tern__cu_get(why, sizeof(why));
	if (cu == NULL) {
		tern__warn("CUDA region at %p: %s", attr->buf, why);
		return -TERN_ENOCUDA;
	}
	ret = tern__cu_ptr_device(attr->buf, &dev);
	if (ret == 1 &&
	    tern__cu_ptr_device((const char *)attr->buf + attr->len - 1,
				&ret) == 1 &&
	    ret == dev)
		ret = 1;
	else if (ret >= 0)
		ret = 0;
	if (ret < 0)
		return ret;
	if (ret == 0 || (attr->device >= 0 && attr->device != dev)) {
		tern__warn("CUDA region at %p (%zu bytes): %s", attr->buf,
			   attr->len,
			   ret == 0 ? "not device memory from end to end"
				    : "on another device than the one given");
		return -EINVAL;
	}
	ret = tern__cu_ctx_ensure(cu, dev);
	if (ret != 0)
		return ret;
	mr = mr_new(ctx, attr->buf, attr->len, attr->access, TERN_MEM_CUDA, dev,
		    ((ctx->caps.hmem && !cu->fake) || cu->fake_hmem) &&
				    !(attr->flags & TERN_MR_F_STAGED)
			    ? TERN_MR_PATH_ZCOPY
			    : TERN_MR_PATH_STAGED);
	if (mr == NULL)
		return -ENOMEM;
	mr->device_for_prov = !cu->fake;
	if (mr->path == TERN_MR_PATH_ZCOPY) {
		ret = reg_zcopy(mr, cu);
		if (ret == 0) {
			tern__info("CUDA region of %zu bytes on device %d: "
				   "zero-copy",
				   mr->len, dev);
		} else {
			/* A provider that says HMEM but was built
			 * without CUDA refuses here: stage instead. */
			tern__warn("CUDA region of %zu bytes on device %d: "
				   "zero-copy registration refused; staging "
				   "through host memory",
				   mr->len, dev);
			mr->path = TERN_MR_PATH_STAGED;
			ret = reg_staged(mr, cu);
		}
	} else {
		ret = reg_staged(mr, cu);
	}
	if (ret != 0) {
		free(mr);
		return ret;
	}
	*mr_p = mr;
	return 0;
}

int tern_mr_close(struct tern_mr *mr)
{
	if (mr == NULL)
		return 0;
	/* Children pin parents: the provider (or the staging pipeline) may
	 * still read or write the buffer, or use its keys. */
	if (mr->inflight != 0) {
		tern__debug("mr close: %lu operation(s) in flight on it",
			    mr->inflight);
		return -EBUSY;
	}
	return tern__mr_close(mr);
}

int tern__mr_close(struct tern_mr *mr)
{
	const struct tern__cu *cu;

	if (mr->smr != NULL) {
		void *shadow = mr->smr->buf;

		/* No copy may still be writing the shadow. */
		tern__stage_quiesce(mr->ctx);
		mr->smr->hidden = 0;
		link_mr(mr->ctx, mr->smr);
		tern__mr_close(mr->smr);
		cu = tern__cu_get(NULL, 0);
		if (cu != NULL)
			cu->MemFreeHost(shadow);
	}
	tern__local_mr_close(mr->ctx, mr);
	dereg(mr);
	chunks_free(mr);
	unlink_mr(mr);
	free(mr);
	return 0;
}

enum tern_mr_path tern_mr_path(const struct tern_mr *mr)
{
	return mr != NULL ? (enum tern_mr_path)mr->path : TERN_MR_PATH_HOST;
}

const char *tern_mr_path_str(enum tern_mr_path path)
{
	switch (path) {
	case TERN_MR_PATH_ZCOPY:
		return "cuda zero-copy";
	case TERN_MR_PATH_STAGED:
		return "cuda staged";
	default:
		return "host";
	}
}

int tern_mr_desc(const struct tern_mr *mr, struct tern_mr_desc *desc)
{
	if (mr == NULL || desc == NULL)
		return -EINVAL;
	/* Staged: peers address the shadow, whose keys these are. */
	if (mr->smr != NULL)
		mr = mr->smr;
	*desc = (struct tern_mr_desc){
		.base = (uint64_t)(uintptr_t)mr->buf,
		.len = mr->len,
		.flags = (mr->ctx->caps.virt_addr ? TERN_MR_DESC_VIRT_ADDR
						  : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_READ)
				  ? TERN_MR_DESC_REMOTE_READ
				  : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_WRITE)
				  ? TERN_MR_DESC_REMOTE_WRITE
				  : 0) |
			 ((mr->access & TERN_ACCESS_REMOTE_ATOMIC)
				  ? TERN_MR_DESC_REMOTE_ATOMIC
				  : 0),
		.nkeys = mr->ctx->nrails,
	};
	if (mr->nchunks > 1) {
		size_t n = (size_t)mr->nchunks * mr->ctx->nrails;

		desc->flags |= (uint32_t)mr->chunk_shift << 8;
		if (mr->key32 && n > TERN_MR_DESC_KEYS_MAX)
			desc->flags |= TERN_MR_DESC_KEY32;
		for (size_t i = 0; i < n; i++)
			tern__desc_set_key(desc, i, mr->ckey[i]);
		return 0;
	}
	for (unsigned int i = 0; i < mr->ctx->nrails; i++)
		desc->keys[i] = mr->key[i];
	return 0;
}

void *tern_mr_addr(const struct tern_mr *mr)
{
	return mr->buf;
}

size_t tern_mr_len(const struct tern_mr *mr)
{
	return mr->len;
}
