/* SPDX-License-Identifier: MIT */
/*
 * The fake CUDA driver tests use ($TERN_FAKE_CUDA, cuda.h says what it
 * does): its devices and contexts, device memory that the host cannot
 * touch, IPC handles another process opens, a copy engine that runs
 * queued copies in stream order, events, and the virtual memory and
 * dmabuf calls. tern__cu_get() loads it in place of libcuda.so.1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/core.h"
#include "cuda.h"

#define FAKE_ALLOCS 4096
#define FAKE_DEVS   8

struct fake_op {
	struct fake_op *next;
	void *dst;
	const void *src;
	size_t len;
	uint64_t seq;
	int fail;
	int runs; /* dst and src are device addresses, copied a run at a time */
};

struct tern_cu_stream_st {
	struct fake_op *head, *tail;
	uint64_t enq, done, last_rec;
	uint64_t failed; /* seq of the last copy that failed, 0: none */
};

struct tern_cu_event_st {
	struct tern_cu_stream_st *s;
	uint64_t from, seq; /* the copies this event covers */
};

struct tern_cu_ctx_st {
	int dev;
};

static struct {
	pthread_mutex_t lock;
	/* "Device memory": @base is an address range the host cannot touch
	 * (PROT_NONE), as a real GPU's is, so code that dereferences a device
	 * pointer faults in the fake as it would on a GPU; the bytes live at
	 * @mem, where only the fake's copies go. @mem is a memfd (@fd), so
	 * that another process can open it from an IPC handle (@imported:
	 * such a mapping, closed with cuIpcCloseMemHandle, not freed).
	 * With $TERN_FAKE_CUDA_HMEM, @base maps the memfd too (for the
	 * provider), except where imported. */
	struct {
		char *base;
		char *mem;
		size_t len;
		int dev;
		int fd;
		int imported;
		int props; /* a cuMemMap'ed one: its handle types + 1 */
	} alloc[FAKE_ALLOCS];
	/* cuMemCreate's physical allocations: a memfd each (0: free). */
	struct {
		int fd; /* + 1 */
		int dev, props;
		size_t len;
	} phys[FAKE_ALLOCS];
	struct tern_cu_ctx_st ctx[FAKE_DEVS];
	uint64_t ncopies, bytes, pending, max_pending, fail_at;
	uint64_t ipc_opens, ipc_copies, dmabufs, dmabufs_refused;
	int ndev, hmem;
} g_fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread struct tern_cu_ctx_st *g_fake_cur;

static tern_cu_result fk_init(unsigned int flags)
{
	(void)flags;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_version(int *v)
{
	*v = 12000;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_count(int *n)
{
	*n = g_fake.ndev;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_dev(tern_cu_device *d, int i)
{
	if (i < 0 || i >= g_fake.ndev)
		return TERN_CU_ERROR_INVALID;
	*d = i;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_name(char *buf, int len, tern_cu_device d)
{
	snprintf(buf, (size_t)len, "tern fake GPU %d", d);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_retain(tern_cu_ctx *c, tern_cu_device d)
{
	if (d < 0 || d >= g_fake.ndev)
		return TERN_CU_ERROR_INVALID;
	g_fake.ctx[d].dev = d;
	*c = &g_fake.ctx[d];
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_release(tern_cu_device d)
{
	(void)d;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_getcur(tern_cu_ctx *c)
{
	*c = g_fake_cur;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_setcur(tern_cu_ctx c)
{
	g_fake_cur = c;
	return TERN_CU_SUCCESS;
}

static int fake_find(const void *p)
{
	const char *c = p;

	for (int i = 0; i < FAKE_ALLOCS; i++) {
		if (g_fake.alloc[i].base != NULL && c >= g_fake.alloc[i].base &&
		    c < g_fake.alloc[i].base + g_fake.alloc[i].len)
			return i;
	}
	return -1;
}

/* Where the fake's copies find the bytes at @p: a device address's
 * backing, or host memory as it is; @room: bytes to its allocation's end. */
static void *fake_bytes_n(tern_cu_ptr p, int *imported, size_t *room)
{
	char *c = (char *)(uintptr_t)p;
	int i;

	*room = SIZE_MAX;
	pthread_mutex_lock(&g_fake.lock);
	i = fake_find(c);
	if (i >= 0) {
		*room = g_fake.alloc[i].len -
			(size_t)(c - g_fake.alloc[i].base);
		c = g_fake.alloc[i].mem + (c - g_fake.alloc[i].base);
		*imported |= g_fake.alloc[i].imported;
	}
	pthread_mutex_unlock(&g_fake.lock);
	return c;
}

/* The longest run from @d and @s (at most @len) inside one allocation at
 * each end: a range cuMemMap'ed from several is copied a run at a time. */
static size_t fake_run(tern_cu_ptr d, tern_cu_ptr s, size_t len, void **dp,
		       const void **sp, int *imported)
{
	size_t rd, rs;

	*dp = fake_bytes_n(d, imported, &rd);
	*sp = fake_bytes_n(s, imported, &rs);
	if (len > rd)
		len = rd;
	return len < rs ? len : rs;
}

static tern_cu_result fk_attr(void *data, int attr, tern_cu_ptr p)
{
	int i, dev;

	pthread_mutex_lock(&g_fake.lock);
	i = fake_find((const void *)(uintptr_t)p);
	dev = i >= 0 ? g_fake.alloc[i].dev : -1;
	pthread_mutex_unlock(&g_fake.lock);
	if (i < 0)
		return TERN_CU_ERROR_INVALID; /* as CUDA says of malloc'd memory
					       */
	switch (attr) {
	case TERN_CU_PTR_ATTR_MEMTYPE:
		*(unsigned int *)data = TERN_CU_MEMTYPE_DEVICE;
		return TERN_CU_SUCCESS;
	case TERN_CU_PTR_ATTR_ORDINAL:
		*(int *)data = dev;
		return TERN_CU_SUCCESS;
	case TERN_CU_PTR_ATTR_CONTEXT:
		*(tern_cu_ctx *)data = &g_fake.ctx[dev];
		return TERN_CU_SUCCESS;
	case TERN_CU_PTR_ATTR_MAPPING_BASE:
	case TERN_CU_PTR_ATTR_MAPPING_SIZE:
		pthread_mutex_lock(&g_fake.lock);
		if (attr == TERN_CU_PTR_ATTR_MAPPING_BASE)
			*(tern_cu_ptr *)data =
				(tern_cu_ptr)(uintptr_t)g_fake.alloc[i].base;
		else
			*(size_t *)data = g_fake.alloc[i].len;
		pthread_mutex_unlock(&g_fake.lock);
		return TERN_CU_SUCCESS;
	default:
		return TERN_CU_ERROR_INVALID;
	}
}

/* Take a free entry for [base, +len) backed by @mem (memfd @fd). */
static int fake_track(char *base, char *mem, size_t len, int dev, int fd,
		      int imported)
{
	pthread_mutex_lock(&g_fake.lock);
	for (int i = 0; i < FAKE_ALLOCS; i++) {
		if (g_fake.alloc[i].base == NULL) {
			g_fake.alloc[i].base = base;
			g_fake.alloc[i].mem = mem;
			g_fake.alloc[i].len = len;
			g_fake.alloc[i].dev = dev;
			g_fake.alloc[i].fd = fd;
			g_fake.alloc[i].imported = imported;
			if (imported)
				g_fake.ipc_opens++;
			pthread_mutex_unlock(&g_fake.lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&g_fake.lock);
	return -1;
}

/* Map memfd @fd as device memory (@hmem: where the pointer says too). */
static tern_cu_result fake_map(int fd, size_t len, int hmem, int dev,
			       int imported, tern_cu_ptr *p)
{
	void *m, *v;

	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
	v = hmem ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
		 : mmap(NULL, len, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v == MAP_FAILED) {
		munmap(m, len);
		return 2;
	}
	if (fake_track(v, m, len, dev, fd, imported) != 0) {
		munmap(m, len);
		munmap(v, len);
		return 2;
	}
	*p = (tern_cu_ptr)(uintptr_t)v;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_alloc(tern_cu_ptr *p, size_t len)
{
	int dev = g_fake_cur != NULL ? g_fake_cur->dev : -1;
	tern_cu_result r;
	int fd;

	if (dev < 0)
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	fd = memfd_create("tern-fake-gpu", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		if (fd >= 0)
			close(fd);
		return 2;
	}
	r = fake_map(fd, len, g_fake.hmem, dev, 0, p);
	if (r != TERN_CU_SUCCESS)
		close(fd);
	return r;
}

/* cuMemFree of an allocation, or cuIpcCloseMemHandle (@imported) of an
 * opened handle: each refuses the other's pointer. */
static tern_cu_result fake_release(tern_cu_ptr p, int imported)
{
	int i;

	pthread_mutex_lock(&g_fake.lock);
	i = fake_find((const void *)(uintptr_t)p);
	if (i < 0 || g_fake.alloc[i].base != (char *)(uintptr_t)p ||
	    g_fake.alloc[i].imported != imported) {
		pthread_mutex_unlock(&g_fake.lock);
		return TERN_CU_ERROR_INVALID;
	}
	munmap(g_fake.alloc[i].base, g_fake.alloc[i].len);
	munmap(g_fake.alloc[i].mem, g_fake.alloc[i].len);
	close(g_fake.alloc[i].fd);
	g_fake.alloc[i].base = g_fake.alloc[i].mem = NULL;
	pthread_mutex_unlock(&g_fake.lock);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_free(tern_cu_ptr p)
{
	return fake_release(p, 0);
}

static tern_cu_result fk_range(tern_cu_ptr *base, size_t *size, tern_cu_ptr p)
{
	int i;

	pthread_mutex_lock(&g_fake.lock);
	i = fake_find((const void *)(uintptr_t)p);
	if (i >= 0) {
		*base = (tern_cu_ptr)(uintptr_t)g_fake.alloc[i].base;
		*size = g_fake.alloc[i].len;
	}
	pthread_mutex_unlock(&g_fake.lock);
	return i >= 0 ? TERN_CU_SUCCESS : TERN_CU_ERROR_INVALID;
}

/* The fake's IPC handle: the owner's pid, the memfd's number and inode
 * (checked after pidfd_getfd: a reused pid holds another file). */
struct fake_ipc {
	uint32_t magic, pid;
	int32_t fd, dev;
	uint64_t len, ino;
};

#define FAKE_IPC_MAGIC 0x50494654u /* "TFIP" */

static tern_cu_result fk_ipc_get(tern_cu_ipc_handle *h, tern_cu_ptr p)
{
	struct fake_ipc f = { .magic = FAKE_IPC_MAGIC,
			      .pid = (uint32_t)getpid() };
	struct stat st;
	int i;

	pthread_mutex_lock(&g_fake.lock);
	i = fake_find((const void *)(uintptr_t)p);
	/* CUDA wants an allocation's base, and no re-export. */
	if (i < 0 || g_fake.alloc[i].base != (char *)(uintptr_t)p ||
	    g_fake.alloc[i].imported) {
		pthread_mutex_unlock(&g_fake.lock);
		return TERN_CU_ERROR_INVALID;
	}
	f.fd = g_fake.alloc[i].fd;
	f.dev = g_fake.alloc[i].dev;
	f.len = g_fake.alloc[i].len;
	pthread_mutex_unlock(&g_fake.lock);
	if (fstat(f.fd, &st) != 0)
		return TERN_CU_ERROR_INVALID;
	f.ino = (uint64_t)st.st_ino;
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &f, sizeof(f));
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_ipc_open(tern_cu_ptr *p, tern_cu_ipc_handle h,
				  unsigned int flags)
{
	int dev = g_fake_cur != NULL ? g_fake_cur->dev : -1;
	struct fake_ipc f;
	struct stat st;
	tern_cu_result r;
	long pidfd, fd;

	(void)flags;
	memcpy(&f, h.reserved, sizeof(f));
	if (dev < 0)
		return 201;
	/* CUDA refuses a handle of this very process. */
	if (f.magic != FAKE_IPC_MAGIC || f.pid == (uint32_t)getpid() ||
	    f.len == 0)
		return TERN_CU_ERROR_INVALID;
	pidfd = tern__pidfd_open((int)f.pid);
	if (pidfd < 0)
		return TERN_CU_ERROR_INVALID;
	fd = tern__pidfd_getfd((int)pidfd, f.fd);
	close((int)pidfd);
	if (fd < 0)
		return TERN_CU_ERROR_INVALID;
	if (fstat((int)fd, &st) != 0 || (uint64_t)st.st_ino != f.ino ||
	    (uint64_t)st.st_size < f.len) {
		close((int)fd);
		return TERN_CU_ERROR_INVALID;
	}
	r = fake_map((int)fd, (size_t)f.len, 0, dev, 1, p);
	if (r != TERN_CU_SUCCESS)
		close((int)fd);
	return r;
}

static tern_cu_result fk_ipc_close(tern_cu_ptr p)
{
	return fake_release(p, 1);
}

static tern_cu_result fk_hostalloc(void **p, size_t len, unsigned int flags)
{
	(void)flags;
	if (posix_memalign(p, 4096, len) != 0)
		return 2;
	memset(*p, 0, len);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_freehost(void *p)
{
	free(p);
	return TERN_CU_SUCCESS;
}

static void fake_count_ipc(int imported)
{
	if (!imported)
		return;
	pthread_mutex_lock(&g_fake.lock);
	g_fake.ipc_copies++;
	pthread_mutex_unlock(&g_fake.lock);
}

static tern_cu_result fk_memcpy(tern_cu_ptr d, tern_cu_ptr s, size_t len)
{
	int imported = 0;

	while (len != 0) {
		const void *sp;
		void *dp;
		size_t n = fake_run(d, s, len, &dp, &sp, &imported);

		memcpy(dp, sp, n);
		d += n;
		s += n;
		len -= n;
	}
	fake_count_ipc(imported);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_memcpy_async(tern_cu_ptr d, tern_cu_ptr s, size_t len,
				      tern_cu_stream st)
{
	struct fake_op *op = calloc(1, sizeof(*op));
	int imported = 0;

	if (op == NULL)
		return 2;
	/* Across allocations (a cuMemMap'ed range): resolved a run at a
	 * time when it runs. */
	if (fake_run(d, s, len, &op->dst, &op->src, &imported) < len) {
		op->dst = (void *)(uintptr_t)d;
		op->src = (const void *)(uintptr_t)s;
		op->runs = 1;
	}
	fake_count_ipc(imported);
	op->len = len;
	op->seq = ++st->enq;
	pthread_mutex_lock(&g_fake.lock);
	op->fail = ++g_fake.ncopies == g_fake.fail_at;
	g_fake.bytes += len;
	if (++g_fake.pending > g_fake.max_pending)
		g_fake.max_pending = g_fake.pending;
	pthread_mutex_unlock(&g_fake.lock);
	if (st->tail != NULL)
		st->tail->next = op;
	else
		st->head = op;
	st->tail = op;
	return TERN_CU_SUCCESS;
}

/* The copy engine: run the stream's oldest queued copy. */
static void fake_run_one(struct tern_cu_stream_st *st)
{
	struct fake_op *op = st->head;

	if (op == NULL)
		return;
	st->head = op->next;
	if (st->head == NULL)
		st->tail = NULL;
	if (op->fail)
		st->failed = op->seq;
	else if (op->runs)
		fk_memcpy((tern_cu_ptr)(uintptr_t)op->dst,
			  (tern_cu_ptr)(uintptr_t)op->src, op->len);
	else
		memcpy(op->dst, op->src, op->len);
	st->done = op->seq;
	pthread_mutex_lock(&g_fake.lock);
	g_fake.pending--;
	pthread_mutex_unlock(&g_fake.lock);
	free(op);
}

static tern_cu_result fk_stream_create(tern_cu_stream *s, unsigned int flags)
{
	(void)flags;
	*s = calloc(1, sizeof(**s));
	return *s != NULL ? TERN_CU_SUCCESS : 2;
}

static tern_cu_result fk_stream_sync(tern_cu_stream s)
{
	/* The default stream: the fake's Memcpy is synchronous. */
	if (s == NULL)
		return TERN_CU_SUCCESS;
	while (s->head != NULL)
		fake_run_one(s);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_stream_destroy(tern_cu_stream s)
{
	fk_stream_sync(s);
	free(s);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_event_create(tern_cu_event *e, unsigned int flags)
{
	(void)flags;
	*e = calloc(1, sizeof(**e));
	return *e != NULL ? TERN_CU_SUCCESS : 2;
}

static tern_cu_result fk_event_destroy(tern_cu_event e)
{
	free(e);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_event_record(tern_cu_event e, tern_cu_stream s)
{
	/* The copies since the stream's previous record are this event's. */
	e->s = s;
	e->from = s->last_rec + 1;
	e->seq = s->last_rec = s->enq;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_event_query(tern_cu_event e)
{
	struct tern_cu_stream_st *s = e->s;

	if (s == NULL)
		return TERN_CU_SUCCESS;
	if (s->done < e->seq)
		fake_run_one(s);
	if (s->done < e->seq)
		return TERN_CU_ERROR_NOT_READY;
	if (s->failed != 0 && s->failed <= e->seq && s->failed >= e->from)
		return 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_errstr(tern_cu_result r, const char **s)
{
	switch (r) {
	case 1:
		*s = "invalid argument";
		break;
	case 2:
		*s = "out of memory";
		break;
	case 201:
		*s = "invalid device context";
		break;
	case 700:
		*s = "an illegal memory access was encountered (injected)";
		break;
	default:
		*s = "unknown error";
		break;
	}
	return TERN_CU_SUCCESS;
}

/* Virtual memory management: a reservation is PROT_NONE address space;
 * cuMemMap puts a physical allocation's memfd there (readable and
 * writable with $TERN_FAKE_CUDA_HMEM, for the provider), and the mapping
 * is one of the fake's allocations, as cuMemAlloc's. */
static tern_cu_result fk_reserve(tern_cu_ptr *p, size_t len, size_t align,
				 tern_cu_ptr addr, unsigned long long flags)
{
	void *v;

	(void)align;
	(void)addr;
	(void)flags;
	v = mmap(NULL, len, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v == MAP_FAILED)
		return 2;
	*p = (tern_cu_ptr)(uintptr_t)v;
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_addr_free(tern_cu_ptr p, size_t len)
{
	return munmap((void *)(uintptr_t)p, len) == 0 ? TERN_CU_SUCCESS
						      : TERN_CU_ERROR_INVALID;
}

static tern_cu_result fk_create(unsigned long long *h, size_t len,
				const void *prop, unsigned long long flags)
{
	const struct tern_cu_mem_prop *pr = prop;
	int fd;

	(void)flags;
	if (pr == NULL || pr->loc_id < 0 || pr->loc_id >= g_fake.ndev)
		return TERN_CU_ERROR_INVALID;
	fd = memfd_create("tern-fake-gpu-vmm", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		if (fd >= 0)
			close(fd);
		return 2;
	}
	pthread_mutex_lock(&g_fake.lock);
	for (int i = 0; i < FAKE_ALLOCS; i++) {
		if (g_fake.phys[i].fd == 0) {
			g_fake.phys[i].fd = fd + 1;
			g_fake.phys[i].dev = pr->loc_id;
			g_fake.phys[i].props = pr->handle_types + 1;
			g_fake.phys[i].len = len;
			pthread_mutex_unlock(&g_fake.lock);
			*h = (unsigned long long)i + 1;
			return TERN_CU_SUCCESS;
		}
	}
	pthread_mutex_unlock(&g_fake.lock);
	close(fd);
	return 2;
}

static tern_cu_result fk_mem_release(unsigned long long h)
{
	int fd;

	if (h == 0 || h > FAKE_ALLOCS)
		return TERN_CU_ERROR_INVALID;
	pthread_mutex_lock(&g_fake.lock);
	fd = g_fake.phys[h - 1].fd - 1;
	g_fake.phys[h - 1].fd = 0;
	pthread_mutex_unlock(&g_fake.lock);
	if (fd < 0)
		return TERN_CU_ERROR_INVALID;
	close(fd); /* mappings hold their own */
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_map(tern_cu_ptr p, size_t len, size_t off,
			     unsigned long long h, unsigned long long flags)
{
	void *at = (void *)(uintptr_t)p, *m, *v;
	int fd, dev, props;

	(void)flags;
	if (h == 0 || h > FAKE_ALLOCS)
		return TERN_CU_ERROR_INVALID;
	pthread_mutex_lock(&g_fake.lock);
	fd = g_fake.phys[h - 1].fd - 1;
	dev = g_fake.phys[h - 1].dev;
	props = g_fake.phys[h - 1].props;
	if (fd >= 0 && (len == 0 || off > g_fake.phys[h - 1].len ||
			len > g_fake.phys[h - 1].len - off))
		fd = -1;
	fd = fd >= 0 ? dup(fd) : -1;
	pthread_mutex_unlock(&g_fake.lock);
	if (fd < 0)
		return TERN_CU_ERROR_INVALID;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	v = m == MAP_FAILED ? MAP_FAILED
	    : g_fake.hmem   ? mmap(at, len, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_FIXED, fd, (off_t)off)
			    : at;
	if (m == MAP_FAILED || v != at ||
	    fake_track(at, m, len, dev, fd, 0) != 0) {
		if (m != MAP_FAILED)
			munmap(m, len);
		close(fd);
		return 2;
	}
	pthread_mutex_lock(&g_fake.lock);
	{
		int i = fake_find(at);

		if (i >= 0)
			g_fake.alloc[i].props = props;
	}
	pthread_mutex_unlock(&g_fake.lock);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_unmap(tern_cu_ptr p, size_t len)
{
	char *at = (char *)(uintptr_t)p;
	int i;

	pthread_mutex_lock(&g_fake.lock);
	i = fake_find(at);
	if (i < 0 || g_fake.alloc[i].base != at || g_fake.alloc[i].len != len ||
	    g_fake.alloc[i].props == 0) {
		pthread_mutex_unlock(&g_fake.lock);
		return TERN_CU_ERROR_INVALID;
	}
	munmap(g_fake.alloc[i].mem, len);
	close(g_fake.alloc[i].fd);
	g_fake.alloc[i].base = g_fake.alloc[i].mem = NULL;
	g_fake.alloc[i].props = 0;
	pthread_mutex_unlock(&g_fake.lock);
	/* Back to reserved address space. */
	mmap(at, len, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	return TERN_CU_SUCCESS;
}

static tern_cu_result fk_set_access(tern_cu_ptr p, size_t len, const void *d,
				    size_t n)
{
	(void)p;
	(void)len;
	(void)d;
	(void)n;
	return TERN_CU_SUCCESS;
}

/* cuMemGetHandleForAddressRange: the range mapped from end to end by
 * allocations of one device and one set of properties, page-aligned, or
 * refused (counted). The fd is a dup of the first allocation's memfd: the
 * fake's providers never read it (its memory is host memory to them). */
static tern_cu_result fk_dmabuf(void *h, tern_cu_ptr p, size_t len, int type,
				unsigned long long flags)
{
	const char *c = (const char *)(uintptr_t)p, *end = c + len;
	int first = -1, ok = type == TERN_CU_HANDLE_DMABUF_FD && flags == 0 &&
			     len != 0 && (p & 4095) == 0 && (len & 4095) == 0;

	pthread_mutex_lock(&g_fake.lock);
	while (ok && c < end) {
		int i = fake_find(c);

		if (i < 0 || g_fake.alloc[i].imported) {
			ok = 0;
			break;
		}
		if (first < 0)
			first = i;
		else if (g_fake.alloc[i].dev != g_fake.alloc[first].dev ||
			 g_fake.alloc[i].props != g_fake.alloc[first].props)
			ok = 0;
		c = g_fake.alloc[i].base + g_fake.alloc[i].len;
	}
	if (ok)
		*(int *)h = dup(g_fake.alloc[first].fd);
	ok = ok && *(int *)h >= 0;
	if (ok)
		g_fake.dmabufs++;
	else
		g_fake.dmabufs_refused++;
	pthread_mutex_unlock(&g_fake.lock);
	return ok ? TERN_CU_SUCCESS : TERN_CU_ERROR_INVALID;
}

int tern__cu_fake_load(struct tern__cu *cu, const char *env)
{
	const char *fail = getenv("TERN_FAKE_CUDA_FAIL");
	int n = atoi(env);

	g_fake.ndev = n < 1 ? 1 : n > FAKE_DEVS ? FAKE_DEVS : n;
	const char *hmem = getenv("TERN_FAKE_CUDA_HMEM");

	g_fake.fail_at = fail != NULL ? strtoull(fail, NULL, 10) : 0;
	g_fake.hmem = hmem != NULL && strcmp(hmem, "1") == 0;
	*cu = (struct tern__cu){
		.fake = 1,
		.fake_hmem = g_fake.hmem,
		.Init = fk_init,
		.DriverGetVersion = fk_version,
		.DeviceGetCount = fk_count,
		.DeviceGet = fk_dev,
		.DeviceGetName = fk_name,
		.DevicePrimaryCtxRetain = fk_retain,
		.DevicePrimaryCtxRelease = fk_release,
		.CtxGetCurrent = fk_getcur,
		.CtxSetCurrent = fk_setcur,
		.PointerGetAttribute = fk_attr,
		.MemAlloc = fk_alloc,
		.MemFree = fk_free,
		.MemHostAlloc = fk_hostalloc,
		.MemFreeHost = fk_freehost,
		.Memcpy = fk_memcpy,
		.MemcpyAsync = fk_memcpy_async,
		.StreamCreate = fk_stream_create,
		.StreamDestroy = fk_stream_destroy,
		.StreamSynchronize = fk_stream_sync,
		.EventCreate = fk_event_create,
		.EventDestroy = fk_event_destroy,
		.EventRecord = fk_event_record,
		.EventQuery = fk_event_query,
		.GetErrorString = fk_errstr,
		.MemGetAddressRange = fk_range,
		.IpcGetMemHandle = fk_ipc_get,
		.IpcOpenMemHandle = fk_ipc_open,
		.IpcCloseMemHandle = fk_ipc_close,
		.MemGetHandleForAddressRange = fk_dmabuf,
		.MemAddressReserve = fk_reserve,
		.MemAddressFree = fk_addr_free,
		.MemCreate = fk_create,
		.MemRelease = fk_mem_release,
		.MemMap = fk_map,
		.MemUnmap = fk_unmap,
		.MemSetAccess = fk_set_access,
	};
	return 0;
}

void tern__cu_fake_stats(struct tern__cu_fake_stats *s)
{
	pthread_mutex_lock(&g_fake.lock);
	s->dmabufs = g_fake.dmabufs;
	s->dmabufs_refused = g_fake.dmabufs_refused;
	s->copies = g_fake.ncopies;
	s->bytes = g_fake.bytes;
	s->max_pending = g_fake.max_pending;
	s->ipc_opens = g_fake.ipc_opens;
	s->ipc_copies = g_fake.ipc_copies;
	pthread_mutex_unlock(&g_fake.lock);
}

void tern__cu_fake_fail(uint64_t n)
{
	pthread_mutex_lock(&g_fake.lock);
	g_fake.fail_at = n != 0 ? g_fake.ncopies + n : 0;
	pthread_mutex_unlock(&g_fake.lock);
}
