/* SPDX-License-Identifier: MIT */
/*
 * The copy limit on this host: single-thread memcpy bandwidth, and
 * cross-process process_vm_writev bandwidth (what shm's large transfers
 * use), for 1 MiB and 16 MiB, so benchmarks over shm can be read against
 * the best a copy can do. With --cuda, also the copies that staged GPU
 * regions make (src/engine/stage.c): pinned host -> GPU, GPU -> pinned host
 * and GPU -> GPU, through the CUDA driver loaded at run time as tern loads
 * it, so this builds without CUDA.
 *
 * usage: copy_limit [--cuda[=DEVICE]] [SECONDS-PER-CASE]   (default 0.5)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *buffer(size_t len, int fill)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len) != 0) {
		perror("copy_limit: posix_memalign");
		exit(1);
	}
	memset(p, fill, len);
	return p;
}

/* Bytes per second of @fn over @len-byte copies for about @secs. */
static double rate(size_t len, double secs, int (*fn)(void *, size_t),
		   void *arg)
{
	double t0 = now(), t;
	unsigned long n = 0;

	do {
		for (int i = 0; i < 8; i++, n++) {
			if (fn(arg, len) != 0)
				return -1;
		}
		t = now() - t0;
	} while (t < secs);
	return (double)n * (double)len / t;
}

static char *g_src, *g_dst;
static pid_t g_child;
static void *g_remote;

static int do_memcpy(void *arg, size_t len)
{
	(void)arg;
	memcpy(g_dst, g_src, len);
	/* Keep the compiler from dropping the copy. */
	__asm__ volatile("" : : "r"(g_dst) : "memory");
	return 0;
}

static int do_vm_writev(void *arg, size_t len)
{
	struct iovec local = { .iov_base = g_src, .iov_len = len };
	struct iovec remote = { .iov_base = g_remote, .iov_len = len };

	(void)arg;
	if (process_vm_writev(g_child, &local, 1, &remote, 1, 0) !=
	    (ssize_t)len) {
		fprintf(stderr, "copy_limit: process_vm_writev: %s\n",
			strerror(errno));
		return -1;
	}
	return 0;
}

/* --- CUDA: the driver API by dlopen, as src/hmem/cuda.c loads it -------- */

typedef int cu_result;
typedef unsigned long long cu_ptr;

static struct {
	cu_result (*Init)(unsigned int);
	cu_result (*DeviceGet)(int *, int);
	cu_result (*DevicePrimaryCtxRetain)(void **, int);
	cu_result (*CtxSetCurrent)(void *);
	cu_result (*MemAlloc)(cu_ptr *, size_t);
	cu_result (*MemHostAlloc)(void **, size_t, unsigned int);
	cu_result (*Memcpy)(cu_ptr, cu_ptr, size_t);
	cu_result (*GetErrorString)(cu_result, const char **);
} g_cu;
static cu_ptr g_hsrc, g_hdst, g_dsrc, g_ddst;

static int cu_check(cu_result r, const char *what)
{
	const char *why = NULL;

	if (r == 0)
		return 0;
	if (g_cu.GetErrorString != NULL)
		g_cu.GetErrorString(r, &why);
	fprintf(stderr, "copy_limit: %s: %s (CUDA error %d)\n", what,
		why != NULL ? why : "unknown", r);
	return -1;
}

/* 0, or -1 having said why on stderr. */
static int cu_open(int dev, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	void *ctx, *hs, *hd;
	int d;

	if (h == NULL) {
		fprintf(stderr, "copy_limit: --cuda: %s\n", dlerror());
		return -1;
	}
#define SYM(field, name)                                                  \
	do {                                                              \
		*(void **)&g_cu.field = dlsym(h, name);                   \
		if (g_cu.field == NULL) {                                 \
			fprintf(stderr, "copy_limit: libcuda lacks %s\n", \
				name);                                    \
			return -1;                                        \
		}                                                         \
	} while (0)
	SYM(Init, "cuInit");
	SYM(DeviceGet, "cuDeviceGet");
	SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(CtxSetCurrent, "cuCtxSetCurrent");
	SYM(MemAlloc, "cuMemAlloc_v2");
	SYM(MemHostAlloc, "cuMemHostAlloc");
	SYM(Memcpy, "cuMemcpy");
	SYM(GetErrorString, "cuGetErrorString");
#undef SYM
	if (cu_check(g_cu.Init(0), "cuInit") ||
	    cu_check(g_cu.DeviceGet(&d, dev), "cuDeviceGet") ||
	    cu_check(g_cu.DevicePrimaryCtxRetain(&ctx, d),
		     "cuDevicePrimaryCtxRetain") ||
	    cu_check(g_cu.CtxSetCurrent(ctx), "cuCtxSetCurrent") ||
	    cu_check(g_cu.MemAlloc(&g_dsrc, len), "cuMemAlloc") ||
	    cu_check(g_cu.MemAlloc(&g_ddst, len), "cuMemAlloc") ||
	    cu_check(g_cu.MemHostAlloc(&hs, len, 0), "cuMemHostAlloc") ||
	    cu_check(g_cu.MemHostAlloc(&hd, len, 0), "cuMemHostAlloc"))
		return -1;
	memset(hs, 1, len);
	memset(hd, 2, len);
	g_hsrc = (cu_ptr)(uintptr_t)hs;
	g_hdst = (cu_ptr)(uintptr_t)hd;
	/* Touch both device buffers once. */
	if (cu_check(g_cu.Memcpy(g_dsrc, g_hsrc, len), "cuMemcpy") ||
	    cu_check(g_cu.Memcpy(g_ddst, g_hsrc, len), "cuMemcpy"))
		return -1;
	return 0;
}

/* cuMemcpy returns once the copy is done (unified addressing picks the
 * direction from the pointers). */
static int do_cu(void *arg, size_t len)
{
	const cu_ptr *p = arg;

	return cu_check(g_cu.Memcpy(p[1], p[0], len), "cuMemcpy");
}

static int cuda_limits(int dev, const size_t *sizes, size_t n, double secs)
{
	for (size_t i = 0; i < n; i++) {
		cu_ptr h2d[2] = { g_hsrc, g_dsrc }, d2h[2] = { g_dsrc, g_hdst },
		       d2d[2] = { g_dsrc, g_ddst };
		double a = rate(sizes[i], secs, do_cu, h2d);
		double b = rate(sizes[i], secs, do_cu, d2h);
		double c = rate(sizes[i], secs, do_cu, d2d);

		if (a < 0 || b < 0 || c < 0)
			return 1;
		printf("cuda size=%zu device=%d h2d_gbps=%.2f d2h_gbps=%.2f "
		       "d2d_gbps=%.2f\n",
		       sizes[i], dev, a * 8 / 1e9, b * 8 / 1e9, c * 8 / 1e9);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1u << 20, 16u << 20 };
	int p[2], q[2]; /* child -> parent: its buffer; parent -> child: go */
	double secs = 0.5;
	int cuda = -1, ret = 0;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (strcmp(argv[i], "--cuda") == 0) {
			cuda = 0;
		} else if (strncmp(argv[i], "--cuda=", 7) == 0) {
			cuda = (int)strtol(argv[i] + 7, &end, 10);
			if (end == argv[i] + 7 || *end != '\0' || cuda < 0)
				goto usage;
		} else {
			secs = strtod(argv[i], &end);
			if (end == argv[i] || *end != '\0' ||
			    !(secs > 0 && secs < 60))
				goto usage;
		}
	}
	/* Say at once when CUDA is not there. */
	if (cuda >= 0 && cu_open(cuda, sizes[1]) != 0)
		return 1;
	g_src = buffer(16u << 20, 1);
	g_dst = buffer(16u << 20, 2);
	/* A child that only holds its buffer; we write into it. */
	if (pipe(p) != 0 || pipe(q) != 0)
		return 1;
	g_child = fork();
	if (g_child == 0) {
		void *mine = buffer(16u << 20, 3);
		char c;

		close(q[1]);
		if (write(p[1], &mine, sizeof(mine)) != sizeof(mine))
			_exit(1);
		/* Until the parent closes its end. */
		if (read(q[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	if (g_child < 0 ||
	    read(p[0], &g_remote, sizeof(g_remote)) != sizeof(g_remote)) {
		fprintf(stderr, "copy_limit: no child\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double m = rate(sizes[i], secs, do_memcpy, NULL);
		double v = rate(sizes[i], secs, do_vm_writev, NULL);

		printf("copy size=%zu memcpy_gbps=%.2f vm_writev_gbps=%.2f\n",
		       sizes[i], m * 8 / 1e9, v < 0 ? -1.0 : v * 8 / 1e9);
	}
	close(q[1]);
	kill(g_child, SIGTERM);
	waitpid(g_child, NULL, 0);
	if (cuda >= 0)
		ret = cuda_limits(cuda, sizes, sizeof(sizes) / sizeof(sizes[0]),
				  secs);
	return ret;
usage:
	fprintf(stderr, "usage: copy_limit [--cuda[=DEVICE]] [seconds per "
			"case, 0 < s < 60]\n");
	return 2;
}
