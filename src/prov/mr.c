/* SPDX-License-Identifier: MIT */
/* Memory registration and address vectors on a rail's domain. */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "../core/core.h"
#include "prov.h"

static uint64_t fi_access(uint64_t access)
{
	uint64_t a = 0;

	if (access & TERN_ACCESS_LOCAL)
		a |= FI_SEND | FI_RECV | FI_READ | FI_WRITE;
	if (access & TERN_ACCESS_REMOTE_READ)
		a |= FI_REMOTE_READ;
	if (access & TERN_ACCESS_REMOTE_WRITE)
		a |= FI_REMOTE_WRITE;
	if (access & TERN_ACCESS_REMOTE_ATOMIC)
		a |= FI_REMOTE_READ | FI_REMOTE_WRITE;
	return a;
}

/* Why a registration of host memory may have failed -FI_ENOMEM: EFA and
 * verbs pin what they register, against RLIMIT_MEMLOCK (unless the
 * process has CAP_IPC_LOCK). The limit, its value and the fix. Cold. */
static void memlock_hint(char *hint, size_t n, size_t len)
{
	char hard[24];
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return;
	if (rl.rlim_cur == RLIM_INFINITY) {
		snprintf(hint, n,
			 " (not the locked-memory limit, RLIMIT_MEMLOCK is "
			 "unlimited: the provider's own; FI_LOG_LEVEL=warn "
			 "shows it)");
		return;
	}
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(hard, sizeof(hard), "unlimited");
	else
		snprintf(hard, sizeof(hard), "%llu",
			 (unsigned long long)rl.rlim_max);
	snprintf(hint, n,
		 " (the locked-memory limit: RLIMIT_MEMLOCK is %llu bytes, "
		 "hard %s, and this provider pins what it registers; raise "
		 "it: ulimit -l unlimited, LimitMEMLOCK=infinity for a "
		 "systemd service, docker run --ulimit memlock=-1; `tern "
		 "doctor --region-size %zu` checks it)",
		 (unsigned long long)rl.rlim_cur, hard, len);
}

/* A registration refused otherwise, EINVAL mostly: past the device's
 * largest one, which libfabric does not report. Cold. */
static void chunk_hint(char *hint, size_t n, size_t len)
{
	unsigned long long half = 1ULL << (63 - __builtin_clzll(len - 1));
	char sz[24];

	if (half >= (1ULL << 30))
		snprintf(sz, sizeof(sz), "%lluG", half >> 30);
	else if (half >= (1ULL << 20))
		snprintf(sz, sizeof(sz), "%lluM", half >> 20);
	else
		snprintf(sz, sizeof(sz), "%lluK", half >> 10);
	snprintf(hint, n,
		 " (past the device's largest registration? TERN_MR_CHUNK=%s "
		 "registers a region in chunks of at most half this; `tern "
		 "doctor --region-size %zu` says how)",
		 sz, len);
}

int tern__prov_has_dmabuf(void)
{
#ifdef FI_MR_DMABUF
	return 1;
#else
	return 0;
#endif
}

int tern__prov_mr_reg(struct tern__prov_rail *r, unsigned int idx, void *buf,
		      size_t len, uint64_t access, uint64_t requested_key,
		      int device, int dmabuf_fd, uint64_t dmabuf_off,
		      int bind_ep, struct tern__prov_mr **mr_p, void **desc_p,
		      uint64_t *key_p)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = fi_access(access),
		.requested_key = requested_key,
	};
	uint64_t flags = 0;
	struct fid_mr *fmr;
	int ret;

	if (device >= 0) {
		/* The provider reaches the GPU: tell it whose memory. */
		attr.iface = FI_HMEM_CUDA;
		attr.device.cuda = device;
#ifdef FI_MR_DMABUF
		struct fi_mr_dmabuf dmabuf = {
			.fd = dmabuf_fd,
			.offset = dmabuf_off,
			.len = len,
			.base_addr = (char *)buf - dmabuf_off,
		};

		if (dmabuf_fd >= 0) {
			attr.dmabuf = &dmabuf;
			flags |= FI_MR_DMABUF;
		}
#else
		(void)dmabuf_fd;
		(void)dmabuf_off;
#endif
	}
	ret = fi_mr_regattr(r->domain, &attr, flags, &fmr);
	if (ret != 0) {
		char hint[400] = "";

		if (device >= 0 && ret == -FI_EFAULT)
			snprintf(hint, sizeof(hint),
				 " (no GPUDirect path to the NIC: is the "
				 "dmabuf or nvidia-peermem support loaded?)");
		else if (device < 0 && ret == -FI_ENOMEM)
			memlock_hint(hint, sizeof(hint), len);
		else if (len > 4096)
			chunk_hint(hint, sizeof(hint), len);
		tern__warn("rail %u: registering %zu bytes of %s memory at %p: "
			   "%s%s",
			   idx, len, device >= 0 ? "CUDA" : "host", buf,
			   fi_strerror(-ret), hint);
		return -TERN_EPROV;
	}
	if (bind_ep) {
		ret = fi_mr_bind(fmr, &r->ep->fid, 0);
		if (ret == 0)
			ret = fi_mr_enable(fmr);
		if (ret != 0) {
			tern__warn("rail %u: binding region to endpoint: %s",
				   idx, fi_strerror(-ret));
			fi_close(&fmr->fid);
			return -TERN_EPROV;
		}
	}
	*mr_p = (struct tern__prov_mr *)fmr;
	*desc_p = fi_mr_desc(fmr);
	*key_p = fi_mr_key(fmr);
	return 0;
}

void tern__prov_mr_close(struct tern__prov_mr *mr)
{
	if (mr != NULL)
		fi_close(&((struct fid_mr *)mr)->fid);
}

int tern__prov_av_insert(struct tern__prov_rail *r, unsigned int idx,
			 const void *addr, uint64_t *fiaddr_p)
{
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(r->av, addr, 1, &fa, 0, NULL);

	if (ret != 1) {
		tern__warn("rail %u: fi_av_insert: %s", idx,
			   ret < 0 ? fi_strerror(-ret) : "address rejected");
		return ret < 0 && ret != -FI_EINVAL ? -TERN_EPROV : -TERN_ECARD;
	}
	*fiaddr_p = fa;
	if (r->shm_park == 1)
		tern__prov_shm_park_insert(r, addr, fa);
	return 0;
}

void tern__prov_av_remove(struct tern__prov_rail *r, uint64_t fiaddr)
{
	fi_addr_t fa = fiaddr;

	if (r->shm_park != 0) {
		tern__prov_shm_park_remove(r, fiaddr);
		return;
	}
	if (r->av != NULL)
		fi_av_remove(r->av, &fa, 1, 0);
}
