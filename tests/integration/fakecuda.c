/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for the CUDA driver, built as libcuda.so.1 for `tern doctor`'s
 * tests (doctor.sh puts its folder on LD_LIBRARY_PATH): the few entry
 * points the doctor's CUDA check calls, with GPUs and dma-buf support as
 * the environment says. Never installed.
 *
 *   FAKE_LIBCUDA_DEVICES=N   GPUs (default 2; 0: cuInit says "no device")
 *   FAKE_LIBCUDA_DMABUF=0|1  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (1)
 */
#include <stdlib.h>

#define CUDA_SUCCESS		 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NO_DEVICE	 100
#define ATTR_DMA_BUF_SUPPORTED	 124

int cuInit(unsigned flags);
int cuDriverGetVersion(int *v);
int cuDeviceGetCount(int *n);
int cuDeviceGet(int *dev, int ordinal);
int cuDeviceGetAttribute(int *v, int attr, int dev);
int cuGetErrorString(int r, const char **s);

static int env(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? atoi(v) : dflt;
}

int cuInit(unsigned flags)
{
	(void)flags;
	return env("FAKE_LIBCUDA_DEVICES", 2) > 0 ? CUDA_SUCCESS
						  : CUDA_ERROR_NO_DEVICE;
}

int cuDriverGetVersion(int *v)
{
	*v = 12040;
	return CUDA_SUCCESS;
}

int cuDeviceGetCount(int *n)
{
	*n = env("FAKE_LIBCUDA_DEVICES", 2);
	return CUDA_SUCCESS;
}

int cuDeviceGet(int *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= env("FAKE_LIBCUDA_DEVICES", 2))
		return CUDA_ERROR_INVALID_VALUE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	(void)dev;
	if (attr != ATTR_DMA_BUF_SUPPORTED)
		return CUDA_ERROR_INVALID_VALUE;
	*v = env("FAKE_LIBCUDA_DMABUF", 1);
	return CUDA_SUCCESS;
}

int cuGetErrorString(int r, const char **s)
{
	*s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected"
				       : "fake error";
	return CUDA_SUCCESS;
}
