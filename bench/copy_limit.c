/* SPDX-License-Identifier: MIT */
/*
 * The copy limit on this host: single-thread memcpy bandwidth, and
 * cross-process process_vm_writev bandwidth (what shm's large transfers
 * use), for 1 MiB and 16 MiB, so benchmarks over shm can be read against
 * the best a copy can do.
 *
 * usage: copy_limit [SECONDS-PER-CASE]   (default 0.5)
 */
#define _GNU_SOURCE
#include <errno.h>
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

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1u << 20, 16u << 20 };
	double secs = argc > 1 ? atof(argv[1]) : 0.5;
	int p[2], q[2]; /* child -> parent: its buffer; parent -> child: go */

	if (!(secs > 0 && secs < 60)) {
		fprintf(stderr, "usage: copy_limit [seconds per case]\n");
		return 2;
	}
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
	return 0;
}
