/* SPDX-License-Identifier: MIT */
/*
 * local_hostile's lies about regions: noregion (writes and reads to
 * addresses in no region of the peer, or unmapped) and resize (an owner
 * that rewrites a region's entry under the generation we mapped it at).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tern/tern.h>

#include "local_hostile_fixture.h"

#include "../../src/engine/local_int.h"
#include "../../src/wire/local.h"

/* ---- noregion: addresses in no region ------------------------------- */

int case_noregion(void)
{
	struct tern_ctx *t = open_ctx(), *w = open_ctx();
	uint8_t *tb, *wb = malloc(MEM), *tw = malloc(MEM), *ww = malloc(MEM);
	struct tern_mr *tmr, *wmr;
	struct tern_mr_desc d, nd;
	struct tern_peer *p;
	struct tern_req r;
	void *hole;
	int ret;

	CHECK(wb != NULL && tw != NULL && ww != NULL, "alloc");
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, MEM, (void **)&tb) == 0,
	      "shared alloc");
	fill(tb, MEM, 1);
	fill(g_mem, MEM, 2); /* ours, in no region */
	fill(wb, MEM, 3);
	memcpy(tw, tb, MEM);
	memcpy(ww, wb, MEM);
	CHECK(tern_mr_reg(t, tb, MEM, RW, &tmr) == 0 &&
		      tern_mr_reg(w, wb, MEM, RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(tmr, &d);
	add(t, w);
	p = add(w, t);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL, "no same-host path");
	hole = mmap(NULL, MEM, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(hole != MAP_FAILED && munmap(hole, MEM) == 0, "a hole");
	for (int k = 0; k < 2; k++) {
		const char *where = k == 0 ? "memory in no region"
					   : "an unmapped address";

		nd = d;
		nd.base = k == 0 ? (uint64_t)(uintptr_t)g_mem
				 : (uint64_t)(uintptr_t)hole;
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, wmr, wb, 4096, &nd, 16, &r) == 0, "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a write to %s: %s (want %s)",
		      where, tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_read(p, wmr, wb, 4096, &nd, 16, &r) == 0, "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a read of %s: %s (want %s)", where,
		      tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write_imm(p, wmr, wb, 4096, &nd, 16, 9, &r) == 0,
		      "post");
		ret = pump(&r, w, t);
		CHECK(ret == -TERN_EACCESS, "a write_imm to %s: %s", where,
		      tern_strerror(ret));
		CHECK(memcmp(wb, ww, MEM) == 0, "%s: a read copied bytes",
		      where);
	}
	fill(ww + 4096, MEM - 4096, 2);
	for (size_t i = 0; i < MEM; i++)
		CHECK(g_mem[i] == (uint8_t)(2 * 131 + i * 7 + (i >> 9)),
		      "memory in no region changed at %zu", i);
	CHECK(memcmp(tb, tw, MEM) == 0, "the peer's region changed");
	CHECK(tern_imm_count(t, 9) == 0, "a refused write_imm counted");
	good_peer(t, "noregion");
	spin(w, t, 50); /* the refused write_imm's abort, sent to t */
	printf("noregion: writes, reads and write_imm to memory in no region "
	       "and to an unmapped address: -TERN_EACCESS, nothing copied\n");
	tern_mr_close(tmr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(t);
	tern_mem_free(TERN_MEM_SHARED, tb);
	free(wb);
	free(tw);
	free(ww);
	return 0;
}

/* ---- resize: an owner that rewrites an entry under its generation ---- */

int case_resize(void)
{
	struct tern_ctx *o = open_ctx(), *w = open_ctx();
	uint8_t *ob, *want = malloc(8192), src[4096];
	struct tern_mr *omr, *wmr;
	struct tern_mr_desc d, big;
	struct tern__lreg *e = NULL;
	struct tern_peer *p;
	struct tern_req r;
	uint64_t base;
	int ret;

	CHECK(want != NULL, "alloc");
	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, 8192, (void **)&ob) == 0,
	      "shared alloc");
	memset(ob, 0, 8192);
	CHECK(tern_mr_reg(o, ob, 8192, RW, &omr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(o, w);
	p = add(w, o);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL, "no same-host path");
	/* A first write maps the region's memfd (8 KiB) in w. */
	fill(src, sizeof(src), 6);
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 0, &r) == 0 &&
		      pump(&r, w, o) == 0,
	      "a first write");
	memcpy(want, ob, 8192);
	/* The owner (hostile: it writes its own inbox) says its region is
	 * 1 GiB long, then starts 64 KiB earlier, under the generation w
	 * mapped it at, and hands out a descriptor to match. */
	for (int i = 0; i < TERN__L_NREG; i++)
		if (o->local->reg[i].base == (uint64_t)(uintptr_t)ob)
			e = &o->local->reg[i];
	CHECK(e != NULL, "the region's entry");
	base = e->base;
	big = d;
	big.len = 1ull << 30;
	for (int k = 0; k < 2; k++) {
		const char *how = k == 0 ? "longer" : "earlier";
		uint64_t roff = k == 0 ? 1u << 20 : 0;

		if (k == 0) {
			e->len = big.len;
		} else {
			e->len = 8192;
			e->base = base - 65536;
			big.base = base - 65536;
		}
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_write(p, wmr, src, sizeof(src), &big, roff, &r) == 0,
		      "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "a write past what w mapped (entry made %s): %s (want "
		      "%s)",
		      how, tern_strerror(ret), tern_strerror(-TERN_EACCESS));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_read(p, wmr, src, sizeof(src), &big, roff, &r) == 0,
		      "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "a read past what w mapped (%s): %s", how,
		      tern_strerror(ret));
		tern_req_init(&r, NULL, NULL);
		CHECK(tern_atomic_fetch_add(p, &big, roff, 1, &r) == 0, "post");
		ret = pump(&r, w, o);
		CHECK(ret == -TERN_EACCESS,
		      "an atomic past what w mapped (%s): %s", how,
		      tern_strerror(ret));
	}
	CHECK(memcmp(ob, want, 8192) == 0, "the region changed");
	e->base = base;
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 4096, &r) == 0 &&
		      pump(&r, w, o) == 0,
	      "a write once the entry is honest again");
	CHECK(memcmp(ob + 4096, src, sizeof(src)) == 0, "its bytes");
	good_peer(o, "resize");
	printf("resize: an entry made longer or moved under its generation: "
	       "writes, reads and atomics past the mapping -TERN_EACCESS\n");
	tern_mr_close(omr);
	tern_mr_close(wmr);
	tern_ctx_close(w);
	tern_ctx_close(o);
	tern_mem_free(TERN_MEM_SHARED, ob);
	free(want);
	return 0;
}
