/* SPDX-License-Identifier: MIT */
/*
 * Shared host memory (shmem.c, tern_mem_alloc(TERN_MEM_SHARED)): a memfd
 * per allocation, mapped 2 MiB-aligned. find: is [ptr, ptr+len) inside
 * one? Its fd, ptr's offset in it and the fd's inode; -ENOENT when not.
 */
#ifndef TERN_HMEM_SHMEM_H
#define TERN_HMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>

int tern__shmem_alloc(size_t len, void **ptr_p);
int tern__shmem_free(void *ptr);
int tern__shmem_find(const void *ptr, size_t len, int *fd_p, uint64_t *off_p,
		     uint64_t *ino_p);

#endif /* TERN_HMEM_SHMEM_H */
