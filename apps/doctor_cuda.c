/* SPDX-License-Identifier: MIT */
/*
 * `tern doctor`'s CUDA finding (apps/doctor.h): the driver, its GPUs, and
 * whether a NIC can reach their memory (dma-buf or a peer-memory module).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "apps/doctor_int.h"

/* ---- CUDA ----------------------------------------------------------- */

/*
 * The CUDA driver, probed here on its own (as bench/copy_limit.c does)
 * rather than through the library: the doctor asks the machine, not
 * tern's loader ($TERN_FAKE_CUDA would answer for the fake), and needs one
 * attribute libtern has no use for.
 */
#define DMA_BUF_SUPPORTED 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
#define NO_DEVICE	  100 /* CUDA_ERROR_NO_DEVICE */

struct cuda_api {
	int (*init)(unsigned);
	int (*version)(int *);
	int (*count)(int *);
	int (*get)(int *, int);
	int (*attr)(int *, int, int);
	int (*errstr)(int, const char **);
};

static const char *cu_err(const struct cuda_api *cu, int r)
{
	const char *s = NULL;

	if (cu->errstr == NULL || cu->errstr(r, &s) != 0 || s == NULL)
		return "unknown error";
	return s;
}

/* The module that lets a NIC register GPU memory without dma-buf:
 * NVIDIA's nvidia_peermem, or AWS's efa_nv_peermem. @return its name. */
static const char *peermem(const struct doctor *d)
{
	static const char *const mods[] = { "nvidia_peermem",
					    "efa_nv_peermem" };
	char path[PATH_MAX], line[256];
	const char *found = NULL;
	FILE *f;

	for (size_t i = 0; i < 2; i++) {
		if (doctor_exists(doctor_at(d, path, sizeof(path),
					    "/sys/module/%s", mods[i])))
			return mods[i];
	}
	f = fopen(doctor_at(d, path, sizeof(path), "/proc/modules"), "re");
	while (f != NULL && found == NULL && fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < 2; i++) {
			size_t len = strlen(mods[i]);

			if (strncmp(line, mods[i], len) == 0 &&
			    line[len] == ' ')
				found = mods[i];
		}
	}
	if (f != NULL)
		fclose(f);
	return found;
}

void doctor_check_cuda(struct doctor *d)
{
	struct cuda_api cu = { 0 };
	int r, ver = 0, ndev = 0, dmabuf = 0, unknown = 0, nic;
	const char *peer;
	struct doctor_finding *x;
	char gpus[64];
	void *h;

	doctor_scan(d);
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		doctor_add(d, "cuda", DOCTOR_OK,
			   "no CUDA driver (libcuda.so.1 not found): GPU paths "
			   "not needed");
		return;
	}
	*(void **)&cu.init = dlsym(h, "cuInit");
	*(void **)&cu.version = dlsym(h, "cuDriverGetVersion");
	*(void **)&cu.count = dlsym(h, "cuDeviceGetCount");
	*(void **)&cu.get = dlsym(h, "cuDeviceGet");
	*(void **)&cu.attr = dlsym(h, "cuDeviceGetAttribute");
	*(void **)&cu.errstr = dlsym(h, "cuGetErrorString");
	if (cu.init == NULL || cu.count == NULL || cu.get == NULL) {
		doctor_add(d, "cuda", DOCTOR_WARN,
			   "libcuda.so.1 lacks cuInit, cuDeviceGetCount or "
			   "cuDeviceGet: not a CUDA driver tern can use");
		return;
	}
	r = cu.init(0);
	if (r == NO_DEVICE) {
		doctor_add(
			d, "cuda", DOCTOR_OK,
			"CUDA driver found, but no GPU: GPU paths not needed");
		return;
	}
	if (r != 0) {
		x = doctor_add(d, "cuda", DOCTOR_WARN,
			       "the CUDA driver is there, but cuInit failed: "
			       "%s (%d): tern cannot use GPU memory",
			       cu_err(&cu, r), r);
		doctor_fix(x, "nvidia-smi says whether the driver and the GPUs "
			      "are well");
		return;
	}
	if (cu.version != NULL)
		cu.version(&ver);
	if (cu.count(&ndev) != 0)
		ndev = 0;
	for (int i = 0; i < ndev; i++) {
		int dev, v = 0;

		if (cu.attr == NULL || cu.get(&dev, i) != 0 ||
		    cu.attr(&v, DMA_BUF_SUPPORTED, dev) != 0)
			unknown++;
		else if (v != 0)
			dmabuf++;
	}
	peer = peermem(d);
	nic = d->ndevs > 0;
	doctor_put(gpus, sizeof(gpus), "CUDA %d.%d, %d GPU(s)", ver / 1000,
		   ver % 1000 / 10, ndev);
	if (dmabuf > 0 || peer != NULL) {
		char how[256] = "";

		if (dmabuf > 0)
			doctor_cat(how, sizeof(how), "dma-buf on %d of %d",
				   dmabuf, ndev);
		if (peer != NULL)
			doctor_cat(how, sizeof(how), "%s%s loaded",
				   how[0] ? ", " : "", peer);
		doctor_add(d, "cuda", DOCTOR_OK,
			   "%s; a NIC can reach GPU memory: %s (zero-copy also "
			   "needs a libfabric with CUDA: tern info says which "
			   "path GPU buffers take)",
			   gpus, how);
		return;
	}
	x = doctor_add(
		d, "cuda", nic ? DOCTOR_WARN : DOCTOR_OK,
		"%s, but %s and no peer-memory module (nvidia_peermem, "
		"efa_nv_peermem) is loaded: no NIC can reach GPU memory, so "
		"tern stages GPU buffers through host memory%s",
		gpus,
		unknown == ndev ? "dma-buf support is not known"
				: "no dma-buf support",
		nic ? "" : " (and with no RDMA device here, it would anyway)");
	if (nic)
		doctor_fix(x, "modprobe nvidia-peermem (on EFA: "
			      "efa_nv_peermem, from AWS's EFA installer), or a "
			      "driver and kernel with dma-buf (NVIDIA's open "
			      "kernel modules, Linux 5.12 or later)");
}
