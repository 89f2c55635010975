/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver API, loaded at run time (dlopen "libcuda.so.1"): tern
 * builds and runs without CUDA, and says so when a CUDA buffer is used
 * where it is absent. Only the few calls tern needs are declared here; with
 * CUDA's own cuda.h at build time (TERN_HAVE_CUDA_H) the constants are
 * checked against it.
 *
 * $TERN_FAKE_CUDA=N (tests only) loads a fake driver instead: N "devices"
 * whose memory is host memory tern tracks, and a copy engine that runs one
 * queued copy per event query, in stream order, so a pipeline that posts
 * before its copy is done sends stale bytes and a test sees it.
 * $TERN_FAKE_CUDA_FAIL=K makes the K-th asynchronous copy of the process
 * fail. $TERN_FAKE_CUDA_HMEM=1 stands in for a provider that reaches GPU
 * memory: the fake's device memory is also mapped where its pointer
 * says (the provider reads and writes it as host memory), so CUDA
 * regions register zero-copy. The fake's device memory is a memfd, and
 * its IPC handles name the owner's pid and fd: another process opens
 * one with pidfd_getfd() and gets its own device pointer, which the host
 * cannot touch (only the fake's copies reach the bytes). It has CUDA's
 * virtual memory calls too (reserve, create, map): each mapping is its own
 * physical allocation, and a dmabuf export of a range whose allocations
 * differ in properties (handle types) or device is refused, as CUDA's
 * cuMemGetHandleForAddressRange() refuses it.
 */
#ifndef TERN_HMEM_CUDA_H
#define TERN_HMEM_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int tern_cu_result;
typedef int tern_cu_device;
typedef unsigned long long tern_cu_ptr;
typedef struct tern_cu_ctx_st *tern_cu_ctx;
typedef struct tern_cu_stream_st *tern_cu_stream;
typedef struct tern_cu_event_st *tern_cu_event;

#define TERN_CU_SUCCESS		 0
#define TERN_CU_ERROR_INVALID	 1
#define TERN_CU_ERROR_NOT_INIT	 3
#define TERN_CU_ERROR_NO_DEVICE	 100
#define TERN_CU_ERROR_NOT_READY	 600
#define TERN_CU_ERROR_UNKNOWN	 999
#define TERN_CU_PTR_ATTR_CONTEXT 1
#define TERN_CU_PTR_ATTR_MEMTYPE 2
#define TERN_CU_PTR_ATTR_ORDINAL 9
/* The physical allocation mapped at a pointer (CUDA >= 11.3): where its
 * mapping starts and how long it is. */
#define TERN_CU_PTR_ATTR_MAPPING_SIZE 18
#define TERN_CU_PTR_ATTR_MAPPING_BASE 19
#define TERN_CU_MEMTYPE_HOST	      1
#define TERN_CU_MEMTYPE_DEVICE	      2
#define TERN_CU_MEMTYPE_UNIFIED	      4
#define TERN_CU_STREAM_DEFAULT	      0
#define TERN_CU_EVENT_NO_TIMING	      2
#define TERN_CU_HOSTALLOC_PORTABLE    1
#define TERN_CU_HANDLE_DMABUF_FD      1
#define TERN_CU_IPC_HANDLE_SIZE	      64
#define TERN_CU_IPC_LAZY_PEER	      1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */

/* CUDA's virtual memory management (cuMemCreate, cuMemMap): the layout of
 * CUmemAllocationProp and CUmemAccessDesc (checked against cuda.h where
 * it is at build time), which the fake driver reads and tests fill. */
struct tern_cu_mem_prop {
	int type;	  /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
	int handle_types; /* requestedHandleTypes */
	int loc_type;	  /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
	int loc_id;	  /* the device */
	void *win32;	  /* win32HandleMetaData */
	unsigned char compression;
	unsigned char gdr_capable; /* allocFlags.gpuDirectRDMACapable */
	unsigned short usage;
	unsigned char reserved[4];
};
struct tern_cu_access_desc {
	int loc_type, loc_id;
	int flags; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
};
#define TERN_CU_MEM_PINNED 1
#define TERN_CU_LOC_DEVICE 1
#define TERN_CU_ACCESS_RW  3

/* CUipcMemHandle: passed by value, as CUDA does. */
typedef struct {
	char reserved[TERN_CU_IPC_HANDLE_SIZE];
} tern_cu_ipc_handle;

/* The driver entry points tern calls (names in libcuda.so.1 in comments). */
struct tern__cu {
	int fake; /* the test driver of $TERN_FAKE_CUDA */
	/* The fake's device memory is where its pointer says, for the
	 * provider ($TERN_FAKE_CUDA_HMEM): register it as host memory. */
	int fake_hmem;
	int version; /* cuDriverGetVersion, e.g. 12040 */
	int ndev;
	tern_cu_result (*Init)(unsigned int);		    /* cuInit */
	tern_cu_result (*DriverGetVersion)(int *);	    /* ... */
	tern_cu_result (*DeviceGetCount)(int *);	    /* ... */
	tern_cu_result (*DeviceGet)(tern_cu_device *, int); /* ... */
	tern_cu_result (*DeviceGetName)(char *, int, tern_cu_device);
	tern_cu_result (*DevicePrimaryCtxRetain)(tern_cu_ctx *, tern_cu_device);
	tern_cu_result (*DevicePrimaryCtxRelease)(tern_cu_device); /* _v2 */
	tern_cu_result (*CtxGetCurrent)(tern_cu_ctx *);
	tern_cu_result (*CtxSetCurrent)(tern_cu_ctx);
	tern_cu_result (*PointerGetAttribute)(void *, int, tern_cu_ptr);
	tern_cu_result (*MemAlloc)(tern_cu_ptr *, size_t); /* _v2 */
	tern_cu_result (*MemFree)(tern_cu_ptr);		   /* _v2 */
	tern_cu_result (*MemHostAlloc)(void **, size_t, unsigned int);
	tern_cu_result (*MemFreeHost)(void *);
	tern_cu_result (*Memcpy)(tern_cu_ptr, tern_cu_ptr, size_t);
	tern_cu_result (*MemcpyAsync)(tern_cu_ptr, tern_cu_ptr, size_t,
				      tern_cu_stream);
	tern_cu_result (*StreamCreate)(tern_cu_stream *, unsigned int);
	tern_cu_result (*StreamDestroy)(tern_cu_stream); /* _v2 */
	tern_cu_result (*StreamSynchronize)(tern_cu_stream);
	tern_cu_result (*EventCreate)(tern_cu_event *, unsigned int);
	tern_cu_result (*EventDestroy)(tern_cu_event); /* _v2 */
	tern_cu_result (*EventRecord)(tern_cu_event, tern_cu_stream);
	tern_cu_result (*EventQuery)(tern_cu_event);
	tern_cu_result (*GetErrorString)(tern_cu_result, const char **);
	/* Optional (CUDA >= 11.7): export a range as a dmabuf fd. */
	tern_cu_result (*MemGetHandleForAddressRange)(void *, tern_cu_ptr,
						      size_t, int,
						      unsigned long long);
	/* Optional: CUDA IPC, GPU memory shared with another process of
	 * this host (the same-host path: engine/local_*.c). */
	tern_cu_result (*MemGetAddressRange)(tern_cu_ptr *, size_t *,
					     tern_cu_ptr); /* _v2 */
	tern_cu_result (*IpcGetMemHandle)(tern_cu_ipc_handle *, tern_cu_ptr);
	tern_cu_result (*IpcOpenMemHandle)(tern_cu_ptr *, tern_cu_ipc_handle,
					   unsigned int); /* _v2 */
	tern_cu_result (*IpcCloseMemHandle)(tern_cu_ptr);
	/* Optional: virtual memory management. tern itself only asks where
	 * a pointer's physical allocation is mapped (PointerGetAttribute,
	 * TERN_CU_PTR_ATTR_MAPPING_*); tests and benchmarks build ranges
	 * of several allocations with these. */
	tern_cu_result (*MemAddressReserve)(tern_cu_ptr *, size_t, size_t,
					    tern_cu_ptr, unsigned long long);
	tern_cu_result (*MemAddressFree)(tern_cu_ptr, size_t);
	tern_cu_result (*MemCreate)(unsigned long long *, size_t, const void *,
				    unsigned long long);
	tern_cu_result (*MemRelease)(unsigned long long);
	tern_cu_result (*MemMap)(tern_cu_ptr, size_t, size_t,
				 unsigned long long, unsigned long long);
	tern_cu_result (*MemUnmap)(tern_cu_ptr, size_t);
	tern_cu_result (*MemSetAccess)(tern_cu_ptr, size_t, const void *,
				       size_t);
};

/*
 * The driver, loaded and initialised once per process (process-wide, as a
 * driver is: a table of function pointers, immutable once loaded; the fake
 * driver's allocations and counters sit behind a mutex).
 * @return the table, or NULL with the reason in @why.
 */
const struct tern__cu *tern__cu_get(char *why, size_t whylen);

/* CUDA's description of a result (cuGetErrorString), never NULL. */
const char *tern__cu_errstr(const struct tern__cu *cu, tern_cu_result r);

/*
 * Is @p a CUDA device pointer? @return 1 with its device in @dev_p, 0 for
 * host memory, or a negative error (CUDA absent: -TERN_ENOCUDA).
 */
int tern__cu_ptr_device(const void *p, int *dev_p);

/* Make the primary context of @dev current on this thread (retaining it:
 * users' top failure is a thread with no context). @return 0 or -errno. */
int tern__cu_ctx_ensure(const struct tern__cu *cu, int dev);

/* Export [buf, buf+len) as a dmabuf where the driver can (CUDA >= 11.7
 * and a kernel with dmabuf): *fd_p and the offset of @buf in it, else
 * *fd_p = -1 (libfabric then finds its own way to the GPU). */
void tern__cu_dmabuf(const struct tern__cu *cu, const void *buf, size_t len,
		     int *fd_p, uint64_t *off_p);

/*
 * Where [buf, buf+len) of device memory changes physical allocation (a
 * range cuMemMap'ed from several, as PyTorch's expandable segments and
 * cudaMallocAsync pools are): up to @max offsets from @buf, in order, in
 * @bounds. @return how many (0: one allocation), or -1 when the driver
 * cannot say (then tern treats it as one).
 */
int tern__cu_segments(const struct tern__cu *cu, const void *buf, size_t len,
		      uint64_t *bounds, int max);

/* The fake driver (cuda_fake.c): its table in @cu, with @env
 * ($TERN_FAKE_CUDA) devices. tern__cu_get() calls it once. @return 0. */
int tern__cu_fake_load(struct tern__cu *cu, const char *env);

/* Fake driver introspection for tests: copies queued so far, and the most
 * ever queued and not yet run. */
struct tern__cu_fake_stats {
	uint64_t copies;
	uint64_t bytes;
	uint64_t max_pending;
	uint64_t ipc_opens;	  /* handles another process opened here */
	uint64_t ipc_copies;	  /* cuMemcpyAsync calls touching them */
	uint64_t dmabufs;	  /* dmabuf exports */
	uint64_t dmabufs_refused; /* ranges of unlike allocations */
};
void tern__cu_fake_stats(struct tern__cu_fake_stats *s);
/* Make the @n-th asynchronous copy from now fail (0: none). */
void tern__cu_fake_fail(uint64_t n);

#endif /* TERN_HMEM_CUDA_H */
