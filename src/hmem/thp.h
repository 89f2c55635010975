/* SPDX-License-Identifier: MIT */
/* Host memory placed for transparent huge pages (core/thp.h: the mode). */
#ifndef TERN_HMEM_THP_H
#define TERN_HMEM_THP_H

#include <stddef.h>

#include "../core/thp.h"

/*
 * tern_mem_alloc(TERN_MEM_HOST, ...) for a given @mode and @on (the unit
 * test calls it with each): @on and @len >= 2 MiB: 2 MiB-aligned, @len
 * rounded up to a multiple of 2 MiB, and madvise(MADV_HUGEPAGE) when
 * @mode is madvise; otherwise page-aligned. Freed with free().
 * @return 0 or -ENOMEM.
 */
int tern__mem_host_alloc(size_t len, int on, enum tern__thp mode, void **ptr_p);

#endif /* TERN_HMEM_THP_H */
