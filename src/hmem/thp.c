/* SPDX-License-Identifier: MIT */
/* Host memory placed for transparent huge pages. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/core.h"
#include "thp.h"

int tern__mem_host_alloc(size_t len, int on, enum tern__thp mode, void **ptr_p)
{
	size_t align = 4096;
	void *p;

	/*
	 * Only buffers of 2 MiB or more are placed for huge pages, rounded
	 * up to whole ones (at most half of it is slack, and only virtual
	 * until touched). Smaller ones are not rounded up: a 4 KiB buffer
	 * would take 2 MiB, and under "always" the kernel would back the
	 * whole 2 MiB at its first touch, 512 times the memory asked for.
	 * A caller that wants a 1 MiB buffer on one huge page asks for
	 * 2 MiB (tern bench does).
	 */
	if (on && len >= TERN__THP_SIZE) {
		if (len > SIZE_MAX - (TERN__THP_SIZE - 1))
			return -ENOMEM;
		align = TERN__THP_SIZE;
		len = (len + TERN__THP_SIZE - 1) & ~(TERN__THP_SIZE - 1);
	}
	/* posix_memalign either way, so that free() frees it either way. */
	if (posix_memalign(&p, align, len) != 0)
		return -ENOMEM;
	/*
	 * "always": the kernel does it for every mapping; "never": nothing
	 * helps. Before the first touch, so that faults take 2 MiB pages.
	 * A failure costs only the speed-up.
	 */
	if (align == TERN__THP_SIZE && mode == TERN__THP_MADVISE &&
	    madvise(p, len, MADV_HUGEPAGE) != 0)
		tern__debug("madvise(MADV_HUGEPAGE) of %zu bytes: %s", len,
			    strerror(errno));
	*ptr_p = p;
	return 0;
}
