/* SPDX-License-Identifier: MIT */
/*
 * Shared host memory (tern_mem_alloc(TERN_MEM_SHARED)): each allocation is
 * a memfd of its own, mapped here; a peer on this host maps the same pages
 * (src/engine/local_*.c) after fetching the fd with pidfd_getfd(), under the
 * kernel's ptrace rules, or from our fd broker. Each memfd is sealed at its
 * size, so no holder can shrink it under a peer's mapping. No name is ever
 * made in /dev/shm or anywhere else another user could open.
 *
 * The one process-wide table in tern: tern_mem_alloc() takes no ctx, and a
 * region registered on any ctx must find its memfd. A mutex guards it; it
 * is touched at allocation, free and registration only, never per
 * operation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/core.h"
#include "shmem.h"

#define HUGE_2M (2UL << 20)

struct shm_ent {
	struct shm_ent *next;
	char *ptr;
	size_t len; /* mapped, a multiple of the page size */
	int fd;
	uint64_t ino;
};

static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_ent *shm_head;

/* Map @fd's @len bytes at an address aligned to 2 MiB (when @len is at
 * least that), so transparent huge pages can back it. */
static void *map_aligned(int fd, size_t len)
{
	size_t align = len >= HUGE_2M ? HUGE_2M : 4096;
	size_t span = len + align;
	char *res, *at, *p;

	res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		return NULL;
	at = (char *)(((uintptr_t)res + align - 1) & ~(uintptr_t)(align - 1));
	p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
		 0);
	if (p == MAP_FAILED) {
		munmap(res, span);
		return NULL;
	}
	if (at > res)
		munmap(res, (size_t)(at - res));
	if (res + span > at + len)
		munmap(at + len, (size_t)(res + span - (at + len)));
	/* Where shmem's THP setting is "advise"; harmless elsewhere. */
	if (len >= HUGE_2M)
		(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

int tern__shmem_alloc(size_t len, void **ptr_p)
{
	struct shm_ent *e;
	struct stat st;
	size_t mlen;

	if (len == 0 || ptr_p == NULL || len > SIZE_MAX - HUGE_2M)
		return -EINVAL;
	mlen = (len + 4095) & ~(size_t)4095;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	e->fd = memfd_create("tern-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (e->fd < 0) {
		int err = -errno;

		tern__warn("shared memory: memfd_create: %s", strerror(errno));
		free(e);
		return err;
	}
	/* Sealed at its size: a peer that maps it (src/engine/local_*.c)
	 * must never see it shrink under its mapping (SIGBUS), whoever
	 * holds the fd. */
	if (ftruncate(e->fd, (off_t)mlen) != 0 ||
	    fcntl(e->fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
	    fstat(e->fd, &st) != 0) {
		int err = -errno;

		tern__warn("shared memory: sizing %zu bytes: %s", mlen,
			   strerror(errno));
		close(e->fd);
		free(e);
		return err;
	}
	e->ptr = map_aligned(e->fd, mlen);
	if (e->ptr == NULL) {
		close(e->fd);
		free(e);
		return -ENOMEM;
	}
	e->len = mlen;
	e->ino = (uint64_t)st.st_ino;
	pthread_mutex_lock(&shm_lock);
	e->next = shm_head;
	shm_head = e;
	pthread_mutex_unlock(&shm_lock);
	*ptr_p = e->ptr;
	return 0;
}

int tern__shmem_free(void *ptr)
{
	struct shm_ent **pp, *e = NULL;

	pthread_mutex_lock(&shm_lock);
	for (pp = &shm_head; *pp != NULL; pp = &(*pp)->next) {
		if ((*pp)->ptr == ptr) {
			e = *pp;
			*pp = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&shm_lock);
	if (e == NULL)
		return -EINVAL;
	munmap(e->ptr, e->len);
	close(e->fd);
	free(e);
	return 0;
}

int tern__shmem_find(const void *ptr, size_t len, int *fd_p, uint64_t *off_p,
		     uint64_t *ino_p)
{
	const char *p = ptr;
	int ret = -ENOENT;

	pthread_mutex_lock(&shm_lock);
	for (struct shm_ent *e = shm_head; e != NULL; e = e->next) {
		if (p >= e->ptr && p < e->ptr + e->len &&
		    len <= (size_t)(e->ptr + e->len - p)) {
			*fd_p = e->fd;
			*off_p = (uint64_t)(p - e->ptr);
			*ino_p = e->ino;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&shm_lock);
	return ret;
}
