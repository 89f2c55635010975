/* SPDX-License-Identifier: MIT */
/* Memory of any kind for tools and tests: probe, allocate, copy, query. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "../core/core.h"
#include "cuda.h"
#include "shmem.h"
#include "thp.h"

int tern_mem_probe(enum tern_mem_kind kind, struct tern_mem_info *info)
{
	const struct tern__cu *cu;

	if (info == NULL)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	if (kind == TERN_MEM_HOST) {
		info->available = 1;
		return 0;
	}
	if (kind != TERN_MEM_CUDA)
		return -EINVAL;
	cu = tern__cu_get(info->why, sizeof(info->why));
	if (cu == NULL)
		return 0;
	info->available = 1;
	info->devices = cu->ndev;
	info->driver_version = cu->version;
	info->fake = cu->fake;
	return 0;
}

static const struct tern__cu *cuda(int device)
{
	char why[160];
	const struct tern__cu *cu = tern__cu_get(why, sizeof(why));

	if (cu == NULL) {
		tern__warn("CUDA memory: %s", why);
		return NULL;
	}
	if (device >= cu->ndev) {
		tern__warn("CUDA device %d: there are %d", device, cu->ndev);
		return NULL;
	}
	return cu;
}

int tern_mem_alloc(enum tern_mem_kind kind, int device, size_t len,
		   void **ptr_p)
{
	const struct tern__cu *cu;
	tern_cu_ptr p = 0;
	tern_cu_result r;
	int ret;

	if (ptr_p == NULL || len == 0)
		return -EINVAL;
	if (kind == TERN_MEM_SHARED)
		return tern__shmem_alloc(len, ptr_p);
	if (kind == TERN_MEM_HOST) {
		int on = tern__thp_on();
		/* The mode is read only where it decides something. */
		enum tern__thp mode = on && len >= TERN__THP_SIZE
					      ? tern__thp_mode(NULL)
					      : TERN__THP_ABSENT;

		return tern__mem_host_alloc(len, on, mode, ptr_p);
	}
	if (kind != TERN_MEM_CUDA || device < 0)
		return -EINVAL;
	cu = cuda(device);
	if (cu == NULL)
		return -TERN_ENOCUDA;
	ret = tern__cu_ctx_ensure(cu, device);
	if (ret != 0)
		return ret;
	r = cu->MemAlloc(&p, len);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("CUDA device %d: allocating %zu bytes: %s", device,
			   len, tern__cu_errstr(cu, r));
		return r == 2 ? -ENOMEM : -TERN_EHMEM;
	}
	*ptr_p = (void *)(uintptr_t)p;
	return 0;
}

int tern_mem_free(enum tern_mem_kind kind, void *ptr)
{
	const struct tern__cu *cu;
	tern_cu_result r;

	if (ptr == NULL)
		return 0;
	if (kind == TERN_MEM_HOST) {
		/* posix_memalign at any alignment (thp.c) */
		free(ptr);
		return 0;
	}
	if (kind == TERN_MEM_SHARED)
		return tern__shmem_free(ptr);
	cu = tern__cu_get(NULL, 0);
	if (kind != TERN_MEM_CUDA || cu == NULL)
		return -EINVAL;
	r = cu->MemFree((tern_cu_ptr)(uintptr_t)ptr);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("CUDA: freeing %p: %s", ptr, tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	return 0;
}

int tern_mem_query(const void *ptr, enum tern_mem_kind *kind_p, int *device_p)
{
	int dev = -1, ret;

	if (ptr == NULL || kind_p == NULL)
		return -EINVAL;
	/* Without CUDA, nothing is device memory. */
	ret = tern__cu_get(NULL, 0) != NULL ? tern__cu_ptr_device(ptr, &dev)
					    : 0;
	if (ret < 0)
		return ret;
	*kind_p = ret == 1 ? TERN_MEM_CUDA : TERN_MEM_HOST;
	if (device_p != NULL)
		*device_p = ret == 1 ? dev : -1;
	return 0;
}

int tern_mem_copy(void *dst, const void *src, size_t len)
{
	enum tern_mem_kind kd, ks;
	const struct tern__cu *cu;
	tern_cu_result r;
	int ret;

	if ((dst == NULL || src == NULL) && len != 0)
		return -EINVAL;
	if (len == 0)
		return 0;
	ret = tern_mem_query(dst, &kd, NULL);
	if (ret == 0)
		ret = tern_mem_query(src, &ks, NULL);
	if (ret != 0)
		return ret;
	if (kd == TERN_MEM_HOST && ks == TERN_MEM_HOST) {
		memcpy(dst, src, len);
		return 0;
	}
	cu = tern__cu_get(NULL, 0);
	r = cu->Memcpy((tern_cu_ptr)(uintptr_t)dst, (tern_cu_ptr)(uintptr_t)src,
		       len);
	/*
	 * cuMemcpy from pageable host memory to the GPU returns once the
	 * bytes are in CUDA's own staging buffer, before they reach the
	 * device: a copy on another stream (tern's staging) could then read
	 * the old bytes. This function promises the copy is done, so wait
	 * for the default stream.
	 */
	if (r == TERN_CU_SUCCESS)
		r = cu->StreamSynchronize(NULL);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("CUDA copy of %zu bytes: %s", len,
			   tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	return 0;
}
