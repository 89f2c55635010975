/* SPDX-License-Identifier: MIT */
/*
 * local's cuda case: GPU memory across processes by CUDA IPC (the fake
 * driver with $TERN_FAKE_CUDA_HMEM, or a GPU), the parent's side and the
 * child's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_cases.h"

/* The fake driver's counters (src/hmem/cuda.h; tern_internal only). */
struct tern__cu_fake_stats {
	uint64_t copies, bytes, max_pending, ipc_opens, ipc_copies;
	uint64_t dmabufs, dmabufs_refused;
};
void tern__cu_fake_stats(struct tern__cu_fake_stats *s);

#define CU_OFF	5   /* where the child writes its pattern */
#define CU_STG	100 /* where its staged region's bytes go */
#define CU_STGN 65537
#define CU_IMM	0x77
#define CU_NIMM 3
#define CU_RW \
	(TERN_ACCESS_LOCAL | TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE)

/* What the parent's GPU region holds once the child has written: pattern
 * 1, the child's pattern 2 at CU_OFF, its staged pattern 3 at CU_STG. */
static void cuda_want(uint8_t *w)
{
	fill(w, REGION, 1);
	fill(w + CU_OFF, REGION - 2 * CU_OFF, 2);
	fill(w + CU_STG, CU_STGN, 3);
}

static struct tern_mr *cuda_reg(struct tern_ctx *ctx, void *p, uint64_t flags)
{
	struct tern_mr_attr a = { .buf = p,
				  .len = REGION,
				  .access = CU_RW,
				  .kind = TERN_MEM_CUDA,
				  .device = 0,
				  .flags = flags };
	struct tern_mr *mr;
	int ret = tern_mr_regattr(ctx, &a, &mr);

	CHECK(ret == 0, "register GPU memory: %s", tern_strerror(ret));
	return mr;
}

static void rma(struct tern_peer *p, struct tern_ctx *ctx, int write,
		struct tern_mr *mr, void *buf, size_t len,
		const struct tern_mr_desc *d, uint64_t roff, const char *what)
{
	struct tern_req r;
	int ret;

	tern_req_init(&r, NULL, NULL);
	ret = write ? tern_write(p, mr, buf, len, d, roff, &r)
		    : tern_read(p, mr, buf, len, d, roff, &r);
	CHECK(ret == 0 && pump(&r, ctx, NULL, NULL) == 0, "child: %s: %s", what,
	      tern_strerror(ret != 0 ? ret : r.status));
}

void child_cuda(struct pipe2 *pp)
{
	uint8_t card[TERN_CARD_MAX], *h = malloc(REGION), *w = malloc(REGION);
	struct tern__cu_fake_stats st = { 0 };
	struct tern_mr *hmr, *gmr, *smr;
	struct tern_mr_desc dg, ds;
	struct tern_mem_info info;
	struct tern_peer *p;
	struct tern_ctx *ctx;
	void *g = NULL, *s = NULL;
	struct tern_req r;
	size_t len;
	ssize_t n;
	int path;

	CHECK(h != NULL && w != NULL, "alloc");
	tern_mem_probe(TERN_MEM_CUDA, &info);
	ctx = open_ctx();
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp->to_parent[1], card, (size_t)n);
	len = get(pp->to_child[0], card, sizeof(card));
	if (len == 4 && memcmp(card, "skip", 4) == 0)
		exit(0); /* the parent has no GPU either */
	CHECK(info.available, "child: no CUDA where the parent has it: %s",
	      info.why);
	CHECK(tern_peer_add(ctx, card, len, &p) == 0, "child: peer add");
	get(pp->to_child[0], &dg, sizeof(dg));
	get(pp->to_child[0], &ds, sizeof(ds));
	path = tern_peer_path(p);
	put(pp->to_parent[1], &path, sizeof(path));
	CHECK(tern_mr_reg(ctx, h, REGION, CU_RW, &hmr) == 0, "child: reg");
	/* 1. Host memory out of the parent's GPU memory. */
	memset(h, 0, REGION);
	rma(p, ctx, 0, hmr, h + 3, REGION - 9, &dg, 7, "read GPU -> host");
	fill(w, REGION, 1);
	CHECK(memcmp(h + 3, w + 7, REGION - 9) == 0,
	      "child: what it read from the parent's GPU memory differs");
	/* 2. Host memory into it, read back. */
	fill(h, REGION, 2);
	rma(p, ctx, 1, hmr, h, REGION - 2 * CU_OFF, &dg, CU_OFF,
	    "write host -> GPU");
	memset(h, 0, REGION);
	rma(p, ctx, 0, hmr, h, REGION, &dg, 0, "read back");
	cuda_want(w);
	CHECK(memcmp(h, w, CU_STG) == 0 &&
		      memcmp(h + CU_STG + CU_STGN, w + CU_STG + CU_STGN,
			     REGION - CU_STG - CU_STGN) == 0,
	      "child: the parent's GPU memory differs after its write");
	/* 3. Its GPU memory into ours (device to device), and ours into
	 * the parent's shared host region. */
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &g) == 0, "cuda alloc");
	gmr = cuda_reg(ctx, g, 0);
	rma(p, ctx, 0, gmr, g, REGION, &dg, 0, "read GPU -> GPU");
	rma(p, ctx, 1, gmr, g, REGION, &ds, 0, "write GPU -> shared host");
	/* 4. A staged region's GPU buffer into the parent's GPU memory. */
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &s) == 0, "cuda alloc");
	fill(w, REGION, 3);
	CHECK(tern_mem_copy(s, w, REGION) == 0, "fill staged");
	smr = cuda_reg(ctx, s, TERN_MR_F_STAGED);
	CHECK(tern_mr_path(smr) == TERN_MR_PATH_STAGED, "not staged");
	rma(p, ctx, 1, smr, s, CU_STGN, &dg, CU_STG, "write staged -> GPU");
	/* 5. Writes with immediate: each counted after its bytes. */
	for (int k = 0; k < CU_NIMM; k++) {
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(p, smr, s, CU_STGN, &dg, CU_STG, CU_IMM,
				     &r) == 0 &&
			      pump(&r, ctx, NULL, NULL) == 0,
		      "child: write_imm: %s", tern_strerror(r.status));
	}
	if (info.fake) {
		tern__cu_fake_stats(&st);
		CHECK(st.ipc_opens >= 1 && st.ipc_copies >= 4,
		      "child: the fake driver saw %llu IPC opens and %llu "
		      "copies through them (the path was not CUDA IPC)",
		      (unsigned long long)st.ipc_opens,
		      (unsigned long long)st.ipc_copies);
	}
	put(pp->to_parent[1], "done", 4);
	/* 6. The parent closes its GPU region: no more writes into it. */
	wait_msg(pp->to_child[0], ctx);
	get(pp->to_child[0], card, sizeof(card));
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, hmr, h, 4096, &dg, 0, &r) == 0, "post");
	CHECK(pump(&r, ctx, NULL, NULL) == -TERN_EACCESS,
	      "child: a write into a closed GPU region: %s (want %s)",
	      tern_strerror(r.status), tern_strerror(-TERN_EACCESS));
	printf("child: %llu IPC open(s), %llu GPU copies through them; the "
	       "closed region refused\n",
	       (unsigned long long)st.ipc_opens,
	       (unsigned long long)st.ipc_copies);
	put(pp->to_parent[1], "done", 4);
	wait_msg(pp->to_child[0], ctx);
	tern_mr_close(hmr);
	tern_mr_close(gmr);
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	tern_mem_free(TERN_MEM_CUDA, g);
	tern_mem_free(TERN_MEM_CUDA, s);
	exit(0);
}

int case_cuda(void)
{
	uint8_t card[TERN_CARD_MAX], *w = malloc(REGION), *h = malloc(REGION);
	struct tern_mem_info info;
	struct tern_mr_desc d;
	struct tern_mr *gmr, *smr;
	struct tern_peer *peer;
	struct tern_ctx *ctx;
	struct tern_req x;
	void *g = NULL, *s = NULL;
	struct pipe2 pp;
	size_t len;
	ssize_t n;
	pid_t pid;
	int path, st, ret;

	CHECK(w != NULL && h != NULL, "alloc");
	/* The child first: CUDA does not survive a fork. */
	pid = spawn(&pp, "cuda", 0, 0);
	tern_mem_probe(TERN_MEM_CUDA, &info);
	ctx = open_ctx();
	len = get(pp.to_parent[0], card, sizeof(card));
	if (!info.available) {
		put(pp.to_child[1], "skip", 4);
		waitpid(pid, &st, 0);
		printf("SKIP: no CUDA (%s); $TERN_FAKE_CUDA=1 "
		       "$TERN_FAKE_CUDA_HMEM=1 runs this on the fake driver\n",
		       info.why);
		tern_ctx_close(ctx);
		free(w);
		free(h);
		return 77;
	}
	CHECK(tern_mem_alloc(TERN_MEM_CUDA, 0, REGION, &g) == 0, "cuda alloc");
	fill(w, REGION, 1);
	CHECK(tern_mem_copy(g, w, REGION) == 0, "fill GPU memory");
	gmr = cuda_reg(ctx, g, 0);
	if (tern_mr_path(gmr) != TERN_MR_PATH_ZCOPY) {
		put(pp.to_child[1], "skip", 4);
		waitpid(pid, &st, 0);
		printf("SKIP: %s reaches no GPU memory here (the region is "
		       "%s): CUDA IPC is for zero-copy regions\n",
		       g_prov, tern_mr_path_str(tern_mr_path(gmr)));
		tern_ctx_close(ctx);
		tern_mem_free(TERN_MEM_CUDA, g);
		free(w);
		free(h);
		return 77;
	}
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, REGION, &s) == 0, "shared");
	memset(s, 0, REGION);
	CHECK(tern_mr_reg(ctx, s, REGION, CU_RW, &smr) == 0, "reg shared");
	CHECK(tern_peer_add(ctx, card, len, &peer) == 0, "peer add");
	n = tern_ctx_card(ctx, card, sizeof(card));
	put(pp.to_child[1], card, (size_t)n);
	tern_mr_desc(gmr, &d);
	put(pp.to_child[1], &d, sizeof(d));
	tern_mr_desc(smr, &d);
	put(pp.to_child[1], &d, sizeof(d));
	get(pp.to_parent[0], &path, sizeof(path));
	CHECK(path == TERN_PATH_LOCAL, "child's path %d", path);
	tern_req_init(&x, NULL, NULL);
	ret = tern_imm_expect_from(ctx, peer, CU_IMM, CU_NIMM, 20000, &x);
	CHECK(ret == 0, "expect: %s", tern_strerror(ret));
	wait_done(&pp, ctx);
	for (int i = 0; i < 1000 && !x.done; i++) {
		tern_progress(ctx);
		usleep(1000);
	}
	CHECK(x.done && x.status == 0, "the child's %d immediates: %s", CU_NIMM,
	      x.done ? tern_strerror(x.status) : "not counted");
	/* Its reads of our GPU memory, device to device, then written into
	 * our shared region: before its staged write. */
	cuda_want(w);
	{
		uint8_t *before = malloc(REGION);

		CHECK(before != NULL, "alloc");
		fill(before, REGION, 1);
		fill(before + CU_OFF, REGION - 2 * CU_OFF, 2);
		CHECK(memcmp(s, before, REGION) == 0,
		      "the child's GPU -> GPU -> shared host bytes differ");
		free(before);
	}
	CHECK(tern_mem_copy(h, g, REGION) == 0, "copy back");
	CHECK(memcmp(h, w, REGION) == 0,
	      "our GPU memory differs from what the child wrote");
	CHECK(tern_mr_close(gmr) == 0, "close the GPU region");
	put(pp.to_child[1], "closed", 6);
	wait_done(&pp, ctx);
	put(pp.to_child[1], "bye", 3);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed");
	printf("cuda: GPU memory across processes on the same-host path "
	       "(%s driver), byte-exact\n",
	       info.fake ? "fake" : "CUDA");
	tern_mr_close(smr);
	tern_ctx_close(ctx);
	tern_mem_free(TERN_MEM_CUDA, g);
	tern_mem_free(TERN_MEM_SHARED, s);
	free(w);
	free(h);
	return 0;
}
