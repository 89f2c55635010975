/* SPDX-License-Identifier: MIT */
/*
 * CUDA's virtual memory (docs/gpu.md, "CUDA virtual memory"): a range
 * cuMemMap'ed from several physical allocations, registered zero-copy as
 * one region and moved across the allocations' boundaries, two ctxs of one
 * process. `mr_vmm PROVIDER fake` runs on the fake CUDA driver with
 * $TERN_FAKE_CUDA_HMEM (its device memory reaches the provider as host
 * memory; its dmabuf export refuses a range of unlike allocations, as
 * CUDA's does); `mr_vmm PROVIDER real` on a GPU (exit 77 without one).
 *
 * Alike allocations (one device, one set of properties) register as one
 * registration: CUDA exports them as one dmabuf. Unlike ones register one
 * allocation at a time: the descriptor is chunked at the allocations'
 * size, the fake counts the whole range's export refused. Either way every
 * byte of a write out of the range and a read into it, each across every
 * boundary, is checked; a range of unlike allocations starting inside one
 * is refused (its boundaries are no multiple of a chunk a descriptor can
 * hold).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "check.h"
#include "hmem/cuda.h"
#include "pair.h"

#define SKIP   77
#define NALLOC 8

static const struct tern__cu *g_cu;
static size_t g_gran; /* one allocation: 2 MiB */

struct vmm {
	tern_cu_ptr base;
	size_t len;
	unsigned long long h[NALLOC];
};

static void cu_ok(tern_cu_result r, const char *what)
{
	CHECK(r == TERN_CU_SUCCESS, "%s: %s", what, tern__cu_errstr(g_cu, r));
}

/* NALLOC allocations of g_gran mapped one after another on device 0;
 * @unlike: every other one with other properties (handle types). */
static void vmm_make(struct vmm *v, int unlike)
{
	struct tern_cu_access_desc acc = { .loc_type = TERN_CU_LOC_DEVICE,
					   .loc_id = 0,
					   .flags = TERN_CU_ACCESS_RW };

	v->len = NALLOC * g_gran;
	cu_ok(g_cu->MemAddressReserve(&v->base, v->len, g_gran, 0, 0),
	      "cuMemAddressReserve");
	for (int i = 0; i < NALLOC; i++) {
		struct tern_cu_mem_prop p = {
			.type = TERN_CU_MEM_PINNED,
			.handle_types = unlike ? (i & 1) : 0,
			.loc_type = TERN_CU_LOC_DEVICE,
			.loc_id = 0,
			.gdr_capable = 1,
		};

		cu_ok(g_cu->MemCreate(&v->h[i], g_gran, &p, 0), "cuMemCreate");
		cu_ok(g_cu->MemMap(v->base + i * g_gran, g_gran, 0, v->h[i], 0),
		      "cuMemMap");
	}
	cu_ok(g_cu->MemSetAccess(v->base, v->len, &acc, 1), "cuMemSetAccess");
}

static void vmm_free(struct vmm *v)
{
	for (int i = 0; i < NALLOC; i++) {
		cu_ok(g_cu->MemUnmap(v->base + i * g_gran, g_gran),
		      "cuMemUnmap");
		cu_ok(g_cu->MemRelease(v->h[i]), "cuMemRelease");
	}
	cu_ok(g_cu->MemAddressFree(v->base, v->len), "cuMemAddressFree");
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) ^ seed);
}

static void wait_req(struct tern_ctx *a, struct tern_ctx *b, struct tern_req *r,
		     const char *what)
{
	for (long i = 0; !r->done && i < 100000000L; i++) {
		tern_progress(a);
		tern_progress(b);
	}
	CHECK(r->done, "%s: never completed", what);
	CHECK(r->status == 0, "%s: %s", what, tern_strerror(r->status));
}

static void fake_stats(struct tern__cu_fake_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (g_cu->fake)
		tern__cu_fake_stats(s);
}

/* @dmr (its descriptor into @d), of NALLOC allocations alike or
 * @unlike, between the fake driver's counts @s0 and @s1: zero-copy; one
 * registration, or one per allocation (the whole's dmabuf refused). */
static void check_chunks(struct tern_mr *dmr, struct tern_mr_desc *d,
			 int unlike, const struct tern__cu_fake_stats *s0,
			 const struct tern__cu_fake_stats *s1)
{
	unsigned int shift;

	CHECK(tern_mr_path(dmr) == TERN_MR_PATH_ZCOPY, "not zero-copy: %s",
	      tern_mr_path_str(tern_mr_path(dmr)));
	CHECK(tern_mr_desc(dmr, d) == 0, "desc");
	shift = TERN_MR_DESC_CHUNK_SHIFT(d->flags);
	if (unlike) {
		CHECK((1ULL << shift) == g_gran,
		      "unlike allocations: chunks of %llu bytes, want %zu",
		      shift ? 1ULL << shift : 0ULL, g_gran);
		if (g_cu->fake)
			CHECK(s1->dmabufs_refused > s0->dmabufs_refused,
			      "the whole range's dmabuf was never refused");
	} else {
		CHECK(shift == 0, "alike allocations: chunked (%u)", shift);
		if (g_cu->fake)
			CHECK(s1->dmabufs_refused == s0->dmabufs_refused &&
				      s1->dmabufs > s0->dmabufs,
			      "alike allocations: %llu refused, %llu dmabufs",
			      (unsigned long long)(s1->dmabufs_refused -
						   s0->dmabufs_refused),
			      (unsigned long long)(s1->dmabufs - s0->dmabufs));
	}
	printf("ok: %d %s allocations of %zu bytes: one region, %s\n", NALLOC,
	       unlike ? "unlike" : "alike", g_gran,
	       shift ? "one registration per allocation" : "one registration");
}

/* Unlike allocations from inside one: their boundaries fall every
 * 4 KiB from its start at best, too many chunks for a descriptor:
 * not zero-copy, staged through host memory instead. */
static void reg_inside(struct tern_ctx *a, struct tern_mr_attr *at,
		       const struct vmm *v)
{
	struct tern_mr *dmr;
	int ret;

	at->buf = (char *)(uintptr_t)v->base + g_gran / 2 + 4096;
	at->len = 5 * g_gran;
	ret = tern_mr_regattr(a, at, &dmr);
	CHECK(ret == 0 || ret == -TERN_ENOTSUP,
	      "unlike allocations from inside one: %s", tern_strerror(ret));
	if (ret == 0) {
		CHECK(tern_mr_path(dmr) == TERN_MR_PATH_STAGED,
		      "unlike allocations from inside one: %s",
		      tern_mr_path_str(tern_mr_path(dmr)));
		CHECK(tern_mr_close(dmr) == 0, "close");
	}
	printf("ok: unlike allocations from inside one: %s\n",
	       ret == 0 ? "staged" : tern_strerror(ret));
}

/* Register the whole range, move bytes across every boundary both ways. */
static void run(struct tern_ctx *a, struct tern_ctx *b, struct tern_peer *ab,
		int unlike)
{
	struct tern__cu_fake_stats s0, s1;
	struct tern_mr_attr at = { 0 };
	struct tern_mr *dmr, *hmr, *bmr;
	struct tern_mr_desc dd, bd;
	size_t n = NALLOC * g_gran;
	uint8_t *src = malloc(n), *dst = malloc(n), *remote;
	struct tern_req r;
	struct vmm v;
	int ret;

	CHECK(src != NULL && dst != NULL, "malloc");
	CHECK(posix_memalign((void **)&remote, 4096, n) == 0, "memalign");
	vmm_make(&v, unlike);
	fake_stats(&s0);
	at.buf = (void *)(uintptr_t)v.base;
	at.len = v.len;
	at.kind = TERN_MEM_CUDA;
	at.device = 0;
	at.access = TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ |
		    TERN_ACCESS_REMOTE_WRITE;
	ret = tern_mr_regattr(a, &at, &dmr);
	CHECK(ret == 0, "register %zu bytes of %d %s allocations: %s", v.len,
	      NALLOC, unlike ? "unlike" : "alike", tern_strerror(ret));
	fake_stats(&s1);
	check_chunks(dmr, &dd, unlike, &s0, &s1);

	/* Out of the range: every boundary crossed, odd ends. */
	CHECK(tern_mr_reg(b, remote, n,
			  TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_WRITE |
				  TERN_ACCESS_REMOTE_READ,
			  &bmr) == 0,
	      "register remote");
	CHECK(tern_mr_desc(bmr, &bd) == 0, "desc");
	fill(src, n, unlike + 1);
	cu_ok(g_cu->Memcpy(v.base, (tern_cu_ptr)(uintptr_t)src, n),
	      "cuMemcpy in");
	memset(remote, 0xee, n);
	tern_req_init(&r, NULL, NULL);
	ret = tern_write(ab, dmr, (char *)(uintptr_t)v.base + 3, n - 11, &bd, 5,
			 &r);
	CHECK(ret == 0, "write: %s", tern_strerror(ret));
	wait_req(a, b, &r, "write");
	/* A write completes when its source may be reused; over tcp the
	 * last bytes may land a little later: progress the target. */
	for (long i = 0;
	     i < 10000000L && (memcmp(remote + 5, src + 3, n - 11) != 0); i++) {
		tern_progress(a);
		tern_progress(b);
	}
	for (size_t i = 0; i < n - 11; i++)
		CHECK(remote[5 + i] == src[3 + i],
		      "write: byte %zu of %zu differs (%#x, want %#x)", i,
		      n - 11, remote[5 + i], src[3 + i]);
	CHECK(remote[4] == 0xee && remote[n - 6] == 0xee,
	      "write: bytes outside the range touched");
	printf("ok: write of %zu bytes across %d allocations\n", n - 11,
	       NALLOC);

	/* Into the range. */
	fill(remote, n, 9 + unlike);
	CHECK(tern_mr_reg(a, dst, n, TERN_ACCESS_LOCAL, &hmr) == 0, "reg");
	memset(dst, 0, n);
	cu_ok(g_cu->Memcpy(v.base, (tern_cu_ptr)(uintptr_t)dst, n),
	      "cuMemcpy clear");
	tern_req_init(&r, NULL, NULL);
	ret = tern_read(ab, dmr, (char *)(uintptr_t)v.base + g_gran - 100,
			5 * g_gran + 300, &bd, 17, &r);
	CHECK(ret == 0, "read: %s", tern_strerror(ret));
	wait_req(a, b, &r, "read");
	cu_ok(g_cu->Memcpy((tern_cu_ptr)(uintptr_t)dst, v.base, n),
	      "cuMemcpy out");
	CHECK(memcmp(dst + g_gran - 100, remote + 17, 5 * g_gran + 300) == 0,
	      "read: bytes differ");
	CHECK(dst[g_gran - 101] == 0 && dst[6 * g_gran + 200] == 0,
	      "read: bytes outside the range touched");
	printf("ok: read of %zu bytes across 6 allocations\n",
	       5 * g_gran + 300);

	CHECK(tern_mr_close(hmr) == 0 && tern_mr_close(bmr) == 0 &&
		      tern_mr_close(dmr) == 0,
	      "close");
	if (unlike)
		reg_inside(a, &at, &v);
	vmm_free(&v);
	free(src);
	free(dst);
	free(remote);
}

int main(int argc, char **argv)
{
	char why[160];
	struct tern_ctx *a, *b;
	struct tern_peer *ab, *ba;
	const char *prov;
	int fake;

	CHECK(argc == 3, "usage: mr_vmm PROVIDER fake|real");
	prov = argv[1];
	fake = strcmp(argv[2], "fake") == 0;
	if (fake) {
		setenv("TERN_FAKE_CUDA", "1", 1);
		setenv("TERN_FAKE_CUDA_HMEM", "1", 1);
	}
	g_cu = tern__cu_get(why, sizeof(why));
	if (g_cu == NULL && !fake) {
		printf("skip: %s\n", why);
		return SKIP;
	}
	CHECK(g_cu != NULL, "fake CUDA driver: %s", why);
	if (g_cu->MemCreate == NULL || g_cu->MemMap == NULL) {
		CHECK(!fake, "the fake driver lacks cuMemCreate");
		printf("skip: the CUDA driver has no virtual memory calls\n");
		return SKIP;
	}
	g_gran = 2u << 20;
	cu_ok(tern__cu_ctx_ensure(g_cu, 0) == 0 ? TERN_CU_SUCCESS
						: TERN_CU_ERROR_INVALID,
	      "context");
	a = pair_open(prov, strcmp(prov, "tcp") == 0 ? "127.0.0.1" : NULL);
	b = pair_open(prov, strcmp(prov, "tcp") == 0 ? "127.0.0.1" : NULL);
	ab = pair_peer(a, b);
	ba = pair_peer(b, a);
	run(a, b, ab, 0);
	run(a, b, ab, 1);
	(void)ba;
	tern_ctx_close(a);
	tern_ctx_close(b);
	printf("mr_vmm %s %s: ok\n", prov, argv[2]);
	return 0;
}
