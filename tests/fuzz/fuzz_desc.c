/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the memory-descriptor codec (tern_mr_desc_unpack,
 * include/tern/mr.h): a descriptor that unpacks packs again to the same
 * bytes and unpacks to the same fields; anything else aborts.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[TERN_MR_DESC_MAX];
	struct tern_mr_desc d, d2;
	unsigned int shift;
	ssize_t used, n;
	uint64_t nk;

	used = tern_mr_desc_unpack(data, size, &d);
	if (used < 0) {
		if (used != -TERN_EDESC && used != -TERN_EVERSION)
			abort();
		return 0;
	}
	/* Version 1: nkeys u64 keys. Version 2 (chunked): chunks times
	 * nkeys, of 4 bytes with TERN_MR_DESC_KEY32, else 8. */
	shift = TERN_MR_DESC_CHUNK_SHIFT(d.flags);
	nk = d.nkeys;
	if (shift != 0) {
		if (shift < 12 || shift > 62)
			abort();
		nk *= (d.len >> shift) + ((d.len & ((1ULL << shift) - 1)) != 0);
	} else if (d.flags & TERN_MR_DESC_KEY32) {
		abort();
	}
	if ((size_t)used > size || d.nkeys == 0 || d.nkeys > TERN_MAX_RAILS ||
	    nk > TERN_MR_DESC_KEYS32_MAX ||
	    (size_t)used !=
		    24 + nk * ((d.flags & TERN_MR_DESC_KEY32) ? 4 : 8) ||
	    (d.flags & ~TERN_MR_DESC_FLAGS_ALL) != 0 || d.len == 0 ||
	    d.base + d.len < d.base || data[4] != (shift != 0 ? 2 : 1))
		abort();

	n = tern_mr_desc_pack(&d, out, sizeof(out));
	if (n != used || memcmp(out, data, (size_t)used) != 0)
		abort();
	if (tern_mr_desc_unpack(out, (size_t)n, &d2) != n ||
	    memcmp(&d, &d2, sizeof(d)) != 0)
		abort();
	/* One byte short: refused, whichever end is cut. */
	if (tern_mr_desc_pack(&d, out, (size_t)n - 1) != -ENOSPC ||
	    tern_mr_desc_unpack(data, (size_t)used - 1, &d2) != -TERN_EDESC)
		abort();
	return 0;
}
