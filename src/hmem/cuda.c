/* SPDX-License-Identifier: MIT */
/*
 * Loading the CUDA driver at run time (dlopen libcuda.so.1, or the fake
 * driver of cuda_fake.c for tests), and what tern asks it: whether a
 * pointer is device memory, a thread's context, dmabuf export, where a
 * range changes physical allocation.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "../core/core.h"
#include "cuda.h"

#ifdef TERN_HAVE_CUDA_H
#include <cuda.h>
_Static_assert(TERN_CU_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "cuda.h");
_Static_assert(TERN_CU_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "cuda.h");
_Static_assert(TERN_CU_PTR_ATTR_MEMTYPE == CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	       "cuda.h");
_Static_assert(TERN_CU_PTR_ATTR_ORDINAL == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	       "cuda.h");
_Static_assert(TERN_CU_MEMTYPE_DEVICE == CU_MEMORYTYPE_DEVICE, "cuda.h");
_Static_assert(TERN_CU_PTR_ATTR_MAPPING_SIZE ==
		       CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
	       "cuda.h");
_Static_assert(TERN_CU_PTR_ATTR_MAPPING_BASE ==
		       CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
	       "cuda.h");
_Static_assert(offsetof(CUmemAllocationProp, location.id) ==
		       offsetof(struct tern_cu_mem_prop, loc_id),
	       "cuda.h");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable) ==
		       offsetof(struct tern_cu_mem_prop, gdr_capable),
	       "cuda.h");
_Static_assert(sizeof(CUmemAllocationProp) == sizeof(struct tern_cu_mem_prop),
	       "cuda.h");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(struct tern_cu_access_desc),
	       "cuda.h");
_Static_assert(TERN_CU_HANDLE_DMABUF_FD == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
	       "cuda.h");
_Static_assert(TERN_CU_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE, "cuda.h");
_Static_assert(TERN_CU_IPC_LAZY_PEER == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
	       "cuda.h");
_Static_assert(sizeof(tern_cu_ipc_handle) == sizeof(CUipcMemHandle), "cuda.h");
#endif

static struct tern__cu g_cu;
static char g_why[160];
static int g_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* --- the real driver -------------------------------------------------- */

static int load_real(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	tern_cu_result r;

	if (h == NULL) {
		snprintf(g_why, sizeof(g_why),
			 "CUDA driver not found (dlopen libcuda.so.1: %s)",
			 dlerror());
		return -TERN_ENOCUDA;
	}
#define SYM(field, name)                                                    \
	do {                                                                \
		*(void **)&g_cu.field = dlsym(h, name);                     \
		if (g_cu.field == NULL) {                                   \
			snprintf(g_why, sizeof(g_why),                      \
				 "libcuda.so.1 lacks %s (driver too old?)", \
				 name);                                     \
			return -TERN_ENOCUDA;                               \
		}                                                           \
	} while (0)
	SYM(Init, "cuInit");
	SYM(DriverGetVersion, "cuDriverGetVersion");
	SYM(DeviceGetCount, "cuDeviceGetCount");
	SYM(DeviceGet, "cuDeviceGet");
	SYM(DeviceGetName, "cuDeviceGetName");
	SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(CtxGetCurrent, "cuCtxGetCurrent");
	SYM(CtxSetCurrent, "cuCtxSetCurrent");
	SYM(PointerGetAttribute, "cuPointerGetAttribute");
	SYM(MemAlloc, "cuMemAlloc_v2");
	SYM(MemFree, "cuMemFree_v2");
	SYM(MemHostAlloc, "cuMemHostAlloc");
	SYM(MemFreeHost, "cuMemFreeHost");
	SYM(Memcpy, "cuMemcpy");
	SYM(MemcpyAsync, "cuMemcpyAsync");
	SYM(StreamCreate, "cuStreamCreate");
	SYM(StreamDestroy, "cuStreamDestroy_v2");
	SYM(StreamSynchronize, "cuStreamSynchronize");
	SYM(EventCreate, "cuEventCreate");
	SYM(EventDestroy, "cuEventDestroy_v2");
	SYM(EventRecord, "cuEventRecord");
	SYM(EventQuery, "cuEventQuery");
	SYM(GetErrorString, "cuGetErrorString");
#undef SYM
	/* Optional: dmabuf export (CUDA 11.7+); IPC (the _v2 names are
	 * CUDA 11's; all four, or none). */
	*(void **)&g_cu.MemGetHandleForAddressRange = dlsym(
		h, "cuMemGetHandleForAddressRange");
	*(void **)&g_cu.MemGetAddressRange = dlsym(h,
						   "cuMemGetAddressRange_v2");
	*(void **)&g_cu.IpcGetMemHandle = dlsym(h, "cuIpcGetMemHandle");
	*(void **)&g_cu.IpcOpenMemHandle = dlsym(h, "cuIpcOpenMemHandle_v2");
	*(void **)&g_cu.IpcCloseMemHandle = dlsym(h, "cuIpcCloseMemHandle");
	*(void **)&g_cu.MemAddressReserve = dlsym(h, "cuMemAddressReserve");
	*(void **)&g_cu.MemAddressFree = dlsym(h, "cuMemAddressFree");
	*(void **)&g_cu.MemCreate = dlsym(h, "cuMemCreate");
	*(void **)&g_cu.MemRelease = dlsym(h, "cuMemRelease");
	*(void **)&g_cu.MemMap = dlsym(h, "cuMemMap");
	*(void **)&g_cu.MemUnmap = dlsym(h, "cuMemUnmap");
	*(void **)&g_cu.MemSetAccess = dlsym(h, "cuMemSetAccess");
	if (g_cu.MemGetAddressRange == NULL || g_cu.IpcGetMemHandle == NULL ||
	    g_cu.IpcOpenMemHandle == NULL || g_cu.IpcCloseMemHandle == NULL)
		g_cu.IpcGetMemHandle = NULL;
	r = g_cu.Init(0);
	if (r != TERN_CU_SUCCESS) {
		snprintf(g_why, sizeof(g_why), "cuInit: %s",
			 tern__cu_errstr(&g_cu, r));
		return -TERN_ENOCUDA;
	}
	/* The handle stays open for the process's life. */
	return 0;
}

static void load_once(void)
{
	const char *fake = getenv("TERN_FAKE_CUDA");
	int ret;

	if (fake != NULL && *fake != '\0' && strcmp(fake, "0") != 0)
		ret = tern__cu_fake_load(&g_cu, fake);
	else
		ret = load_real();
	if (ret == 0 && g_cu.DeviceGetCount(&g_cu.ndev) != TERN_CU_SUCCESS)
		g_cu.ndev = 0;
	if (ret == 0 && g_cu.ndev == 0) {
		snprintf(g_why, sizeof(g_why), "CUDA driver found, no device");
		ret = -TERN_ENOCUDA;
	}
	if (ret == 0)
		g_cu.DriverGetVersion(&g_cu.version);
	g_ok = ret == 0;
	if (g_ok)
		tern__debug("CUDA: %s driver %d, %d device(s)",
			    g_cu.fake ? "fake" : "libcuda.so.1", g_cu.version,
			    g_cu.ndev);
	else
		tern__debug("CUDA: %s", g_why);
}

const struct tern__cu *tern__cu_get(char *why, size_t whylen)
{
	pthread_once(&g_once, load_once);
	if (!g_ok) {
		if (why != NULL && whylen > 0)
			snprintf(why, whylen, "%s", g_why);
		return NULL;
	}
	return &g_cu;
}

const char *tern__cu_errstr(const struct tern__cu *cu, tern_cu_result r)
{
	const char *s = NULL;

	if (cu == NULL || cu->GetErrorString == NULL ||
	    cu->GetErrorString(r, &s) != TERN_CU_SUCCESS || s == NULL)
		return "unknown CUDA error";
	return s;
}

int tern__cu_ptr_device(const void *p, int *dev_p)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	unsigned int type = 0;
	int dev = -1;

	if (cu == NULL)
		return -TERN_ENOCUDA;
	if (cu->PointerGetAttribute(&type, TERN_CU_PTR_ATTR_MEMTYPE,
				    (tern_cu_ptr)(uintptr_t)p) !=
	    TERN_CU_SUCCESS)
		return 0; /* memory CUDA does not know: host */
	if (type != TERN_CU_MEMTYPE_DEVICE && type != TERN_CU_MEMTYPE_UNIFIED)
		return 0;
	if (cu->PointerGetAttribute(&dev, TERN_CU_PTR_ATTR_ORDINAL,
				    (tern_cu_ptr)(uintptr_t)p) !=
	    TERN_CU_SUCCESS)
		return -TERN_EHMEM;
	*dev_p = dev;
	return 1;
}

int tern__cu_ctx_ensure(const struct tern__cu *cu, int dev)
{
	tern_cu_ctx cur = NULL, pctx;
	tern_cu_device d;
	tern_cu_result r;

	if (cu->CtxGetCurrent(&cur) == TERN_CU_SUCCESS && cur != NULL)
		return 0;
	r = cu->DeviceGet(&d, dev);
	if (r == TERN_CU_SUCCESS)
		r = cu->DevicePrimaryCtxRetain(&pctx, d);
	if (r == TERN_CU_SUCCESS)
		r = cu->CtxSetCurrent(pctx);
	if (r != TERN_CU_SUCCESS) {
		tern__warn("CUDA device %d: making its primary context current "
			   "on this thread: %s",
			   dev, tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	tern__debug("CUDA device %d: primary context made current", dev);
	return 0;
}

void tern__cu_dmabuf(const struct tern__cu *cu, const void *buf, size_t len,
		     int *fd_p, uint64_t *off_p)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)buf & ~(page - 1);
	uintptr_t hi = ((uintptr_t)buf + len + page - 1) & ~(page - 1);
	tern_cu_result r;
	int fd = -1;

	*fd_p = -1;
	*off_p = 0;
	if (cu->MemGetHandleForAddressRange == NULL)
		return;
	r = cu->MemGetHandleForAddressRange(&fd, (tern_cu_ptr)lo, hi - lo,
					    TERN_CU_HANDLE_DMABUF_FD, 0);
	if (r != TERN_CU_SUCCESS) {
		tern__debug("CUDA: no dmabuf for %p (+%zu): %s", buf, len,
			    tern__cu_errstr(cu, r));
		return;
	}
	*fd_p = fd;
	*off_p = (uint64_t)((uintptr_t)buf - lo);
}

int tern__cu_segments(const struct tern__cu *cu, const void *buf, size_t len,
		      uint64_t *bounds, int max)
{
	const char *c = buf, *end = (const char *)buf + len;
	int n = 0;

	while (c < end) {
		tern_cu_ptr base = 0;
		size_t size = 0;
		const char *next;

		if (cu->PointerGetAttribute(
			    &base, TERN_CU_PTR_ATTR_MAPPING_BASE,
			    (tern_cu_ptr)(uintptr_t)c) != TERN_CU_SUCCESS ||
		    cu->PointerGetAttribute(
			    &size, TERN_CU_PTR_ATTR_MAPPING_SIZE,
			    (tern_cu_ptr)(uintptr_t)c) != TERN_CU_SUCCESS ||
		    size == 0 || (const char *)(uintptr_t)base > c)
			return -1;
		next = (const char *)(uintptr_t)base + size;
		if (next <= c)
			return -1;
		if (next >= end)
			break;
		if (n == max)
			return -1;
		bounds[n++] = (uint64_t)(next - (const char *)buf);
		c = next;
	}
	return n;
}
