/* SPDX-License-Identifier: MIT */
/* Error codes and their descriptions. */
#include <string.h>

#include "core.h"

static const char *const tern_errstr[] = {
	[TERN_ENOPROV - TERN_EBASE] = "no usable libfabric provider",
	[TERN_EPROV - TERN_EBASE] = "provider error",
	[TERN_EPROTO - TERN_EBASE] = "protocol error from peer",
	[TERN_EVERSION - TERN_EBASE] = "unsupported version",
	[TERN_ECARD - TERN_EBASE] = "malformed peer card",
	[TERN_EDESC - TERN_EBASE] = "malformed or mismatched memory descriptor",
	[TERN_EACCESS - TERN_EBASE] = "access outside the region's rights",
	[TERN_EBOUNDS - TERN_EBASE] = "access outside the region's bounds",
	[TERN_EREFUSED - TERN_EBASE] = "request refused by peer",
	[TERN_EVERIFY - TERN_EBASE] = "data verification failed",
	[TERN_ETRUNC - TERN_EBASE] = "message truncated",
	[TERN_ENOTSUP - TERN_EBASE] = "operation not supported by provider",
	[TERN_ECLOSED - TERN_EBASE] = "ctx closed by a callback",
	[TERN_EPEERGONE - TERN_EBASE] = "peer gone",
	[TERN_ENOCUDA -
		TERN_EBASE] = "CUDA not available (no libcuda.so.1 or no GPU)",
	[TERN_EHMEM - TERN_EBASE] = "GPU memory copy or CUDA call failed",
	[TERN_EABORTED - TERN_EBASE] = "aborted by the sender",
};

const char *tern_strerror(int ret)
{
	long e = ret < 0 ? -(long)ret : ret;

	if (e == 0)
		return "success";
	if (e >= TERN_EBASE && e < TERN_ELAST)
		return tern_errstr[e - TERN_EBASE];
	if (e < TERN_EBASE) {
		/* strerror() of glibc returns static strings for known codes.
		 */
		return strerror(e);
	}
	return "unknown error";
}
