/* SPDX-License-Identifier: MIT */
/*
 * The same-host path (docs/local.md): a peer whose card says it runs on
 * this boot of this host, in this user namespace, under this uid, is
 * written and read with the CPU instead of through the provider.
 *
 * Each ctx owns an inbox, a memfd it never names anywhere: its card
 * carries the pid, the process's start time and the fd number, and a
 * peer fetches it with pidfd_getfd(), which the kernel allows under the
 * same rules as ptrace (so a peer of another uid never gets it, whatever
 * its card says). The inbox holds
 *   - a header and the table of the owner's regions (peers map these
 *     read-only): base, length, rights, and for memory from
 *     tern_mem_alloc(TERN_MEM_SHARED) the memfd (fd number, inode,
 *     offset) a peer maps once to write with memcpy; for GPU memory
 *     the registration reaches zero-copy, its allocation's CUDA IPC
 *     handle, which a peer opens once to copy device to device; other
 *     memory is reached with process_vm_writev/readv (cross-memory
 *     attach);
 *   - one slot per writing peer (mapped read-write): a ring of the
 *     immediates its writes carried, and a word saying which region it
 *     is copying into.
 *
 * Memory ordering. A writer copies the bytes, then stores the ring entry
 * and publishes it with a release store of the slot's tail; the owner
 * reads the tail with an acquire load before it reads the entry and
 * counts it, and the user reads the bytes after that count completed an
 * expectation: the bytes happen-before the count. A region's entry is a
 * seqlock: its generation is odd while live and changes (release) around
 * every rewrite; a reader that sees the same odd generation before and
 * after reading the fields (acquire) has a consistent entry. Revocation
 * is a Dekker pair in sequential consistency: the writer stores "copying
 * into region i" then loads its generation; the owner's close stores the
 * new generation then loads each writer's word. Either the writer sees
 * the region gone and copies nothing, or the owner sees the copy under
 * way and waits for it (up to a second: a writer killed mid-copy does not
 * hold the owner for ever). Sleeping is a Dekker pair too: the owner
 * stores "sleeping" then looks at the rings; a writer publishes then
 * loads "sleeping" and, when set, writes the owner's eventfd.
 *
 * Trust: the kernel's ptrace rule decides who gets the inbox; a process
 * that passes it could read and write all of ours anyway. Every field a
 * peer's inbox holds is still bounds-checked before use, so a buggy one
 * cannot make tern copy outside what it maps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stddef.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "engine.h"
#include "local.h"

#include "../hmem/cuda.h"
#include "../wire/card.h"

#define LMAGIC	    0x4c4e5254u /* "TRNL" */
#define LVER	    2
#define LREG	    256	 /* regions a ctx exports */
#define LSLOT	    64	 /* peers writing to one ctx */
#define LRING	    4096 /* immediates in flight per writer */
#define PAGE	    4096
#define LREG_FABRIC 1u /* GPU memory without an IPC handle: the fabric's */
#define LREG_CUDA   2u /* GPU memory: its CUDA IPC handle is in lcuda */
#define LDEVS	    16 /* GPUs a ctx keeps a copy stream for */
/* header + regions + their CUDA handles: 13 pages */
#define RO_SIZE (PAGE + LREG * 64 + LREG * 128)

struct lhdr {
	uint32_t magic, version;
	uint32_t nreg, nslot, ring;
	uint32_t nused;		   /* regions ever used: a bound for lookups */
	_Atomic uint32_t sleeping; /* the owner may sleep on its eventfd */
	uint32_t overflow; /* a region found the table full: not in it */
	uint64_t self;	   /* where the owner maps the header (a CMA probe) */
};

struct lreg {
	_Atomic uint64_t gen; /* odd: live */
	uint64_t base, len;
	uint64_t access; /* TERN_ACCESS_* */
	uint64_t shm_off;
	uint64_t shm_ino; /* 0: not shared memory: cross-memory attach */
	int32_t shm_fd;
	uint32_t flags; /* LREG_FABRIC, LREG_CUDA */
	uint64_t pad2;
};

/* A GPU region's CUDA IPC handle (read under its lreg's generation). */
struct lcuda {
	uint8_t handle[TERN_CU_IPC_HANDLE_SIZE]; /* of the allocation */
	uint64_t off;  /* the region's first byte in it */
	uint64_t alen; /* the allocation's length */
	int32_t dev;   /* the owner's device ordinal */
	uint8_t pad[44];
};

struct lslot {
	_Atomic uint64_t owner; /* 0: free; else the writer's pid */
	_Atomic uint64_t nonce; /* the writer ctx's */
	_Atomic uint64_t tail;	/* the writer's */
	_Atomic uint64_t busy;	/* region index + 1 being copied into */
	uint8_t pad[32];
	_Atomic uint64_t head; /* the owner's */
	uint8_t pad2[56];
	uint32_t ring[LRING];
};

struct lbell {
	_Atomic uint64_t claimed; /* slots in use, a bit each */
	uint8_t pad[PAGE - 8];
};

#define RW_SIZE	   (sizeof(struct lbell) + LSLOT * sizeof(struct lslot))
#define INBOX_SIZE (RO_SIZE + RW_SIZE)

_Static_assert(sizeof(struct lreg) == 64, "lreg is one cache line");
_Static_assert(sizeof(struct lcuda) == 128, "lcuda is two cache lines");
_Static_assert(sizeof(struct lhdr) <= PAGE, "lhdr fits its page");
_Static_assert(LSLOT <= 64, "one claim bit per slot");
_Static_assert(LREG <= 256, "a request keeps its region index in a byte");

/* The owner's side. */
struct tern__local {
	int fd;
	uint8_t *map;
	struct lhdr *hdr;
	struct lreg *reg;
	struct lcuda *cu;
	struct lbell *bell;
	struct lslot *slot;
	struct tern__card_local id;
	struct {
		tern_cu_ctx cctx; /* the context it was made in */
		tern_cu_stream s;
	} stream[LDEVS]; /* GPU copies, per device */
	int lsock;	 /* the fd broker's socket, or -1 (none) */
	int exited;	 /* a peer's pidfd fired in the loop: sweep */
	unsigned int ticks;
	uint64_t next_sweep;	    /* ns: look at the peers' pidfds again */
	pthread_t broker;	    /* its thread, while lsock >= 0 */
	uint64_t slot_nonce[LSLOT]; /* attribution cache */
	uint32_t slot_src[LSLOT];
	uint64_t peers_gen, slot_gen[LSLOT];
	struct tern__reqq q; /* local operations waiting for ring room */
	uint64_t copies, bytes, dropped;
	int told; /* a refusal was logged */
};

/* A writer's view of one region it mapped. */
struct lmap {
	uint64_t gen;
	uint8_t *ptr; /* the region's first byte, mapped here */
	void *map;    /* the mapping (from a page boundary) */
	size_t maplen;
	int cuda;	  /* GPU memory: @ptr is a device pointer */
	int dev;	  /* the device whose context opened it */
	tern_cu_ptr dptr; /* what cuIpcOpenMemHandle gave (0: none) */
};

/* The writer's side, per peer. */
struct tern__local_peer {
	int pidfd;
	pid_t pid;
	int wake_fd;
	const uint8_t *ro;
	uint8_t *rw;
	const struct lhdr *hdr;
	const struct lreg *reg;
	const struct lcuda *cu;
	struct lbell *bell;
	struct lslot *slot;
	unsigned int slot_idx;
	int cma;	/* 1 works, 0 refused (then the fabric) */
	int broker;	/* fds come from the owner's broker (SCM_RIGHTS) */
	uint64_t nonce; /* the owner ctx's: its broker's name */
	unsigned int hint;
	struct lmap maps[LREG];
};

static long pidfd_open(pid_t pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

static long pidfd_getfd(int pidfd, int fd)
{
	return syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

/* Start time of @pid (clock ticks after boot), 0 when unknown. */
static uint64_t start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	if (p == NULL)
		return 0;
	/* Fields after the name: state is 3rd, starttime the 22nd. */
	for (int field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &v) != 1)
		return 0;
	return v;
}

static int read_boot(uint8_t boot[16])
{
	char buf[64];
	unsigned int b;
	ssize_t n;
	int fd, j = 0;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 32)
		return -EIO;
	buf[n] = '\0';
	for (char *p = buf; *p != '\0' && j < 16; p++) {
		if (*p == '-')
			continue;
		if (sscanf(p, "%2x", &b) != 1)
			return -EIO;
		boot[j++] = (uint8_t)b;
		p++;
	}
	return j == 16 ? 0 : -EIO;
}

int tern__local_enabled(void)
{
	return tern__env_long("TERN_LOCAL", 1, 0, 1) != 0;
}

/* ---- the fd broker: SCM_RIGHTS where pidfd_getfd() is refused -----
 *
 * Where the kernel's ptrace rule refuses pidfd_getfd() between
 * processes of one uid (Yama ptrace_scope >= 1, as on Ubuntu; seccomp in
 * containers), the owner hands its fds out itself: a thread per ctx
 * listens on an abstract unix socket named by the ctx's nonce (in its
 * network namespace; nothing in the file system), takes one request per
 * connection, checks the caller's uid with SO_PEERCRED, and sends the
 * inbox and wake fds, or one exported shared region's memfd, with
 * SCM_RIGHTS. Only what tern would give a local peer anyway: never other
 * memory (cross-memory attach stays refused, and such regions go over
 * the provider). A caller that connects and says nothing holds the
 * broker for at most LBROKER_WAIT_MS. */

#define LBROKER_MAGIC	0x424c5254u /* "TRLB" */
#define LBROKER_INBOX	1
#define LBROKER_REGION	2
#define LBROKER_WAIT_MS 1000

struct lbroker_msg {
	uint32_t magic;
	uint32_t what;	/* request: LBROKER_*; answer: 0 */
	int32_t status; /* answer: 0 (fds attached) or -errno */
	uint32_t idx;	/* LBROKER_REGION: the region's entry */
};

static void broker_name(struct sockaddr_un *a, socklen_t *len, uint64_t nonce)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* Abstract: sun_path[0] is NUL; the name is not NUL-terminated. */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "tern-local-%016" PRIx64, nonce);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* What the broker may hand out for @m: fds in @fds (not ours to close). */
static int broker_fds(struct tern__local *l, const struct lbroker_msg *m,
		      int fds[2], int *nfds)
{
	if (m->what == LBROKER_INBOX) {
		fds[0] = l->fd;
		fds[1] = (int)l->id.wake_fd;
		*nfds = 2;
		return 0;
	}
	if (m->what == LBROKER_REGION && m->idx < LREG) {
		const struct lreg *e = &l->reg[m->idx];
		uint64_t g = atomic_load_explicit(&e->gen,
						  memory_order_acquire);
		int32_t fd = e->shm_fd;
		uint64_t ino = e->shm_ino;

		atomic_thread_fence(memory_order_acquire);
		/* A live shared region's memfd (the peer checks its inode
		 * against the entry, so a stale one is harmless). */
		if (!(g & 1) || fd < 0 || ino == 0 ||
		    atomic_load_explicit(&e->gen, memory_order_relaxed) != g)
			return -ENOENT;
		fds[0] = fd;
		*nfds = 1;
		return 0;
	}
	return -EINVAL;
}

static void broker_serve(struct tern__local *l, int c)
{
	struct timeval tv = { LBROKER_WAIT_MS / 1000,
			      (LBROKER_WAIT_MS % 1000) * 1000 };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct lbroker_msg m;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[2], nfds = 0, st;

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (recv(c, &m, sizeof(m), 0) != (ssize_t)sizeof(m) ||
	    m.magic != LBROKER_MAGIC)
		return;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
	    cred.uid != getuid()) {
		tern_debug("same-host fd broker: pid %d of uid %u refused",
			   (int)cred.pid, (unsigned int)cred.uid);
		st = -EPERM;
	} else {
		st = broker_fds(l, &m, fds, &nfds);
	}
	m = (struct lbroker_msg){ .magic = LBROKER_MAGIC, .status = st };
	if (st == 0) {
		struct cmsghdr *cm;

		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	if (sendmsg(c, &mh, MSG_NOSIGNAL) < 0 && st == 0) {
		/* An fd closed since (a region freed): say so instead. */
		m.status = -errno;
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		(void)sendmsg(c, &mh, MSG_NOSIGNAL);
	}
}

static void *broker_main(void *arg)
{
	struct tern__local *l = arg;

	for (;;) {
		int c = accept4(l->lsock, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EMFILE || errno == ENFILE)
				usleep(10000);
			else if (errno != EINTR && errno != ECONNABORTED)
				return NULL; /* shut down: the ctx closes */
			continue;
		}
		broker_serve(l, c);
		close(c);
	}
}

/* Does this process need a broker: $TERN_LOCAL_BROKER (0, 1; default:
 * where Yama restricts ptrace, or pidfd_getfd() fails even on ourselves,
 * as under a seccomp filter)? */
static int broker_wanted(void)
{
	long v = tern__env_long("TERN_LOCAL_BROKER", -1, -1, 1);
	char buf[8] = "";
	long pfd, fd;
	int yama;

	if (v >= 0)
		return (int)v;
	fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		yama = read((int)fd, buf, sizeof(buf) - 1) > 0 && buf[0] != '0';
		close((int)fd);
		if (yama)
			return 1;
	}
	pfd = pidfd_open(getpid());
	if (pfd < 0)
		return 1;
	fd = pidfd_getfd((int)pfd, (int)pfd);
	close((int)pfd);
	if (fd < 0)
		return 1;
	close((int)fd);
	return 0;
}

static void broker_start(struct tern__local *l)
{
	struct sockaddr_un a;
	socklen_t alen;

	l->lsock = -1;
	if (!broker_wanted())
		return;
	l->lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	broker_name(&a, &alen, l->id.nonce);
	if (l->lsock < 0 || bind(l->lsock, (struct sockaddr *)&a, alen) != 0 ||
	    listen(l->lsock, 64) != 0 ||
	    pthread_create(&l->broker, NULL, broker_main, l) != 0) {
		tern_info("same-host path: no fd broker (%s): peers the "
			  "kernel's ptrace rule refuses go over the provider",
			  strerror(errno));
		if (l->lsock >= 0)
			close(l->lsock);
		l->lsock = -1;
		return;
	}
	tern_debug("same-host path: fd broker @%s", a.sun_path + 1);
}

static void broker_stop(struct tern__local *l)
{
	if (l->lsock < 0)
		return;
	shutdown(l->lsock, SHUT_RDWR); /* accept() returns: the thread ends */
	pthread_join(l->broker, NULL);
	close(l->lsock);
	l->lsock = -1;
}

/* Ask the broker of ctx @nonce for @what (@idx): exactly @max fds into
 * @fds. @return @max, or -errno (-EPERM: refused). */
static int broker_get(uint64_t nonce, uint32_t what, uint32_t idx, int *fds,
		      int max)
{
	struct timeval tv = { LBROKER_WAIT_MS / 1000,
			      (LBROKER_WAIT_MS % 1000) * 1000 };
	struct lbroker_msg m = { .magic = LBROKER_MAGIC,
				 .what = what,
				 .idx = idx };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct sockaddr_un a;
	struct cmsghdr *cm;
	socklen_t alen;
	int s, n = 0, ret;

	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	broker_name(&a, &alen, nonce);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&a, alen) != 0 ||
	    send(s, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m) ||
	    recvmsg(s, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(m)) {
		ret = -errno;
		close(s);
		return ret != 0 ? ret : -EPROTO;
	}
	close(s);
	for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0;
		     k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	if (m.magic != LBROKER_MAGIC || m.status != 0 || n != max) {
		for (int k = 0; k < n; k++)
			close(fds[k]);
		return m.status != 0 ? m.status : -EPROTO;
	}
	return n;
}

int tern__local_broker_ask(const struct tern_ctx *owner, unsigned int what,
			   unsigned int idx, int *fds, int max)
{
	if (owner->local == NULL)
		return -ENOENT;
	return broker_get(owner->local->id.nonce, what, idx, fds, max);
}

int tern__local_open(struct tern_ctx *ctx)
{
	struct tern__local *l;
	struct stat st;
	int ret;

	if (!tern__local_enabled())
		return 0;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	ret = read_boot(l->id.boot);
	if (ret == 0 && stat("/proc/self/ns/user", &st) != 0)
		ret = -errno;
	if (ret != 0) {
		tern_info("same-host path off: no boot id or user namespace "
			  "to prove a peer is here (%s)",
			  strerror(-ret));
		free(l);
		return 0;
	}
	l->id.userns = (uint64_t)st.st_ino;
	l->id.uid = (uint32_t)getuid();
	l->id.pid = (uint32_t)getpid();
	l->id.start = start_time(getpid());
	l->fd = memfd_create("tern-inbox", MFD_CLOEXEC);
	if (l->fd < 0 || ftruncate(l->fd, (off_t)INBOX_SIZE) != 0 ||
	    fstat(l->fd, &st) != 0) {
		tern_info("same-host path off: inbox: %s", strerror(errno));
		goto err;
	}
	l->map = mmap(NULL, INBOX_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		      l->fd, 0);
	if (l->map == MAP_FAILED) {
		tern_info("same-host path off: mapping the inbox: %s",
			  strerror(errno));
		goto err;
	}
	l->hdr = (struct lhdr *)(void *)l->map;
	l->reg = (struct lreg *)(void *)(l->map + PAGE);
	l->cu = (struct lcuda *)(void *)(l->map + PAGE + LREG * 64);
	l->bell = (struct lbell *)(void *)(l->map + RO_SIZE);
	l->slot = (struct lslot *)(void *)(l->map + RO_SIZE +
					   sizeof(struct lbell));
	l->hdr->magic = LMAGIC;
	l->hdr->version = LVER;
	l->hdr->nreg = LREG;
	l->hdr->nslot = LSLOT;
	l->hdr->ring = LRING;
	l->hdr->self = (uint64_t)(uintptr_t)l->map;
	l->id.inbox_fd = (uint32_t)l->fd;
	l->id.inbox_ino = (uint64_t)st.st_ino;
	l->id.wake_fd = (uint32_t)ctx->wakefd;
	do {
		l->id.nonce = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^
			      tern__now_ns() ^ (uint64_t)(uintptr_t)l;
	} while (l->id.nonce == 0);
	broker_start(l);
	ctx->local = l;
	return 0;

err:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return 0;
}

void tern__local_close(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;

	if (l == NULL)
		return;
	broker_stop(l);
	for (int d = 0; d < LDEVS; d++) {
		const struct tern__cu *cu = tern__cu_get(NULL, 0);
		tern_cu_ctx cur = NULL;

		if (l->stream[d].s == NULL || cu == NULL)
			continue;
		/* Destroyed in its own context, as CUDA wants. */
		if (cu->CtxGetCurrent(&cur) == TERN_CU_SUCCESS &&
		    cu->CtxSetCurrent(l->stream[d].cctx) == TERN_CU_SUCCESS) {
			cu->StreamDestroy(l->stream[d].s);
			cu->CtxSetCurrent(cur);
		}
	}
	munmap(l->map, INBOX_SIZE);
	close(l->fd);
	free(l);
	ctx->local = NULL;
}

const struct tern__card_local *tern__local_id(const struct tern_ctx *ctx)
{
	return ctx->local != NULL ? &ctx->local->id : NULL;
}

/* ---- the owner's regions ------------------------------------------ */

/* GPU region @mr in entry @i: its allocation's CUDA IPC handle, for a
 * peer to open. @return 0, or -1 (the fabric's: staged, or no IPC). */
static int cuda_export(struct tern__local *l, unsigned int i,
		       const struct tern_mr *mr)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	struct lcuda *c = &l->cu[i];
	tern_cu_ptr abase = 0;
	tern_cu_ipc_handle h;
	tern_cu_result r;
	size_t alen = 0;

	if (cu == NULL || cu->IpcGetMemHandle == NULL ||
	    mr->path != TERN_MR_PATH_ZCOPY)
		return -1;
	r = cu->MemGetAddressRange(&abase, &alen,
				   (tern_cu_ptr)(uintptr_t)mr->buf);
	if (r == TERN_CU_SUCCESS)
		r = cu->IpcGetMemHandle(&h, abase);
	if (r != TERN_CU_SUCCESS || (uintptr_t)mr->buf < abase ||
	    (uintptr_t)mr->buf - abase > alen ||
	    mr->len > alen - ((uintptr_t)mr->buf - abase)) {
		tern_info("CUDA region at %p: no IPC handle (%s); same-host "
			  "peers reach it over the fabric",
			  mr->buf, tern__cu_errstr(cu, r));
		return -1;
	}
	memcpy(c->handle, h.reserved, sizeof(c->handle));
	c->off = (uint64_t)((uintptr_t)mr->buf - abase);
	c->alen = alen;
	c->dev = mr->device;
	return 0;
}

void tern__local_mr_reg(struct tern_ctx *ctx, struct tern_mr *mr)
{
	struct tern__local *l = ctx->local;
	struct lreg *e = NULL;
	uint64_t off = 0, ino = 0, g;
	int fd = -1;
	unsigned int i;

	mr->local_idx = -1;
	if (l == NULL ||
	    !(mr->access & (TERN_ACCESS_REMOTE_READ | TERN_ACCESS_REMOTE_WRITE |
			    TERN_ACCESS_REMOTE_ATOMIC)))
		return;
	for (i = 0; i < LREG; i++) {
		if (!(atomic_load_explicit(&l->reg[i].gen,
					   memory_order_relaxed) &
		      1)) {
			e = &l->reg[i];
			break;
		}
	}
	if (e == NULL) {
		tern_debug("same-host path: %d regions exported; this one "
			   "goes over the fabric only",
			   LREG);
		l->hdr->overflow = 1;
		return;
	}
	if (tern__shmem_find(mr->buf, mr->len, &fd, &off, &ino) != 0) {
		fd = -1;
		off = ino = 0;
	}
	g = atomic_load_explicit(&e->gen, memory_order_relaxed);
	e->base = (uint64_t)(uintptr_t)mr->buf;
	e->len = mr->len;
	e->access = mr->access;
	e->shm_fd = fd;
	e->shm_off = off;
	e->shm_ino = ino;
	/* Exported even when only the fabric reaches it, so that a peer
	 * tells "not local" from "not registered" (closed). GPU memory
	 * goes by its IPC handle, written before the generation. */
	if (mr->hidden)
		e->flags = LREG_FABRIC;
	else if (mr->kind != TERN_MEM_HOST)
		e->flags = cuda_export(l, i, mr) == 0 ? LREG_CUDA : LREG_FABRIC;
	else
		e->flags = 0;
	atomic_store_explicit(&e->gen, g + 1, memory_order_release);
	if (i + 1 > l->hdr->nused)
		l->hdr->nused = i + 1;
	mr->local_idx = (int)i;
}

void tern__local_mr_close(struct tern_ctx *ctx, struct tern_mr *mr)
{
	struct tern__local *l = ctx->local;
	uint64_t deadline, claimed;
	struct lreg *e;

	if (l == NULL || mr->local_idx < 0)
		return;
	e = &l->reg[mr->local_idx];
	/* Gone for every peer from here on (even: not live). */
	atomic_store_explicit(
		&e->gen,
		atomic_load_explicit(&e->gen, memory_order_relaxed) + 1,
		memory_order_seq_cst);
	/* A copy already under way finishes first. */
	deadline = tern__now_ns() + 1000000000ULL;
	claimed = atomic_load_explicit(&l->bell->claimed, memory_order_seq_cst);
	for (unsigned int s = 0; s < LSLOT; s++) {
		if (!(claimed & (1ULL << s)))
			continue;
		while (atomic_load_explicit(&l->slot[s].busy,
					    memory_order_seq_cst) ==
		       (uint64_t)mr->local_idx + 1) {
			uint64_t who = atomic_load(&l->slot[s].owner);

			/* A writer killed mid-copy copies no more. */
			if (who != 0 && kill((pid_t)who, 0) != 0 &&
			    errno == ESRCH)
				break;
			if (tern__now_ns() > deadline) {
				tern_warn("region %p closed: a same-host "
					  "peer (pid %" PRIu64 ") was still "
					  "copying into it after 1 s",
					  mr->buf,
					  atomic_load(&l->slot[s].owner));
				break;
			}
			sched_yield();
		}
	}
	mr->local_idx = -1;
}

/* ---- the owner's progress: immediates from the rings -------------- */

/* The source id of slot @s's writer: the peer added with its card. */
static uint32_t slot_src(struct tern_ctx *ctx, unsigned int s)
{
	struct tern__local *l = ctx->local;
	uint64_t nonce = atomic_load_explicit(&l->slot[s].nonce,
					      memory_order_acquire);

	if (nonce == l->slot_nonce[s] && l->slot_gen[s] == l->peers_gen)
		return l->slot_src[s];
	l->slot_nonce[s] = nonce;
	l->slot_gen[s] = l->peers_gen;
	l->slot_src[s] = 0;
	for (struct tern_peer *p = ctx->peers; p != NULL; p = p->next) {
		if (!p->removed && p->local_nonce == nonce && nonce != 0) {
			l->slot_src[s] = p->src_id;
			break;
		}
	}
	return l->slot_src[s];
}

void *tern__local_ev(struct tern_ctx *ctx)
{
	return &ctx->local;
}

void tern__local_exited(struct tern_ctx *ctx)
{
	if (ctx->local != NULL)
		ctx->local->exited = 1;
}

/* Peers whose process has ended (their pidfd is readable): gone, as a
 * world says of a dead rank (queued operations and expectations from
 * them fail -TERN_EPEERGONE), and their attachment's fds and mappings
 * let go now; the caller still removes the peer. */
static void sweep_exited(struct tern_ctx *ctx)
{
	for (struct tern_peer *p = ctx->peers; p != NULL; p = p->next) {
		struct pollfd pf;

		if (p->local == NULL || p->removed)
			continue;
		pf = (struct pollfd){ .fd = p->local->pidfd, .events = POLLIN };
		if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLIN))
			continue;
		tern_info("peer pid %d on the same-host path: its process "
			  "ended",
			  (int)p->local->pid);
		if (!p->gone)
			tern__peer_gone(p);
		tern__local_peer_release(ctx, p);
	}
}

int tern__local_poll(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;
	uint64_t claimed;
	int n = 0;

	/* Peers that ended: when the loop saw a pidfd fire, and once a
	 * second or so for loops that never sleep. */
	if (tern_unlikely(l->exited) ||
	    tern_unlikely((++l->ticks & 255) == 0 &&
			  tern__now_ns() >= l->next_sweep)) {
		l->exited = 0;
		l->next_sweep = tern__now_ns() + 1000000000ULL;
		sweep_exited(ctx);
	}

	/* Awake (tern_ctx_arm() may have left it set): no more wake-ups. */
	if (atomic_load_explicit(&l->hdr->sleeping, memory_order_relaxed))
		atomic_store_explicit(&l->hdr->sleeping, 0,
				      memory_order_relaxed);
	claimed = atomic_load_explicit(&l->bell->claimed, memory_order_acquire);
	while (claimed != 0) {
		unsigned int s = (unsigned int)__builtin_ctzll(claimed);
		struct lslot *sl = &l->slot[s];
		uint64_t tail, head;
		uint32_t src;

		claimed &= claimed - 1;
		tail = atomic_load_explicit(&sl->tail, memory_order_acquire);
		head = atomic_load_explicit(&sl->head, memory_order_relaxed);
		if (tail == head)
			continue;
		if (tail - head > LRING) {
			/* Not what a writer does: drop, say so. */
			l->dropped += tail - head;
			tern_warn(
				"same-host path: slot %u's ring claims %" PRIu64
				" entries (at most %d): dropped",
				s, tail - head, LRING);
			atomic_store_explicit(&sl->head, tail,
					      memory_order_release);
			continue;
		}
		src = slot_src(ctx, s);
		for (; head != tail; head++) {
			tern__imm_arrived(ctx, sl->ring[head & (LRING - 1)],
					  src);
			n++;
		}
		atomic_store_explicit(&sl->head, tail, memory_order_release);
	}
	return n;
}

int tern__local_pending(const struct tern_ctx *ctx)
{
	const struct tern__local *l = ctx->local;
	uint64_t claimed;

	if (l->q.len != 0)
		return 1;
	claimed = atomic_load_explicit(&l->bell->claimed, memory_order_seq_cst);
	while (claimed != 0) {
		unsigned int s = (unsigned int)__builtin_ctzll(claimed);

		claimed &= claimed - 1;
		if (atomic_load_explicit(&l->slot[s].tail,
					 memory_order_seq_cst) !=
		    atomic_load_explicit(&l->slot[s].head,
					 memory_order_relaxed))
			return 1;
	}
	return 0;
}

int tern__local_sleep(struct tern_ctx *ctx, int on)
{
	struct tern__local *l = ctx->local;

	atomic_store_explicit(&l->hdr->sleeping, (uint32_t)on,
			      memory_order_seq_cst);
	return on ? tern__local_pending(ctx) : 0;
}

/* ---- the writer's side: attaching to a peer ---------------------- */

static int proc_uid(pid_t pid, uid_t *uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) != 0)
		return -errno;
	*uid = st.st_uid;
	return 0;
}

/* Drop a writer's mapping of a region (shared memory, or an opened
 * CUDA IPC handle). */
static void lmap_drop(struct lmap *m)
{
	if (m->map != NULL)
		munmap(m->map, m->maplen);
	if (m->dptr != 0) {
		const struct tern__cu *cu = tern__cu_get(NULL, 0);

		if (cu != NULL && tern__cu_ctx_ensure(cu, m->dev) == 0)
			cu->IpcCloseMemHandle(m->dptr);
	}
	memset(m, 0, sizeof(*m));
}

static void local_peer_free(struct tern__local_peer *lp)
{
	for (unsigned int i = 0; i < LREG; i++)
		lmap_drop(&lp->maps[i]);
	if (lp->slot != NULL) {
		atomic_fetch_and_explicit(&lp->bell->claimed,
					  ~(1ULL << lp->slot_idx),
					  memory_order_seq_cst);
		atomic_store_explicit(&lp->slot->busy, 0, memory_order_seq_cst);
		atomic_store_explicit(&lp->slot->owner, 0,
				      memory_order_seq_cst);
	}
	if (lp->ro != NULL)
		munmap((void *)(uintptr_t)lp->ro, RO_SIZE);
	if (lp->rw != NULL)
		munmap(lp->rw, RW_SIZE);
	if (lp->wake_fd >= 0)
		close(lp->wake_fd);
	if (lp->pidfd >= 0)
		close(lp->pidfd);
	free(lp);
}

/* Take a free slot of the owner's inbox (or one a dead writer left). */
static int claim_slot(struct tern__local_peer *lp, uint64_t nonce)
{
	uint64_t me = (uint64_t)getpid();

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int s = 0; s < LSLOT; s++) {
			struct lslot *sl =
				(struct lslot
					 *)(void *)(lp->rw +
						    sizeof(struct lbell) +
						    s * sizeof(struct lslot));
			uint64_t cur = atomic_load(&sl->owner);

			if (cur != 0 && pass == 0)
				continue;
			/* Second pass: a slot whose writer is dead. */
			if (cur != 0 &&
			    (kill((pid_t)cur, 0) == 0 || errno != ESRCH))
				continue;
			if (!atomic_compare_exchange_strong(&sl->owner, &cur,
							    me))
				continue;
			atomic_store(&sl->busy, 0);
			atomic_store(&sl->nonce, nonce);
			atomic_fetch_or(&lp->bell->claimed, 1ULL << s);
			lp->slot = sl;
			lp->slot_idx = s;
			return 0;
		}
	}
	return -EBUSY;
}

/* Why @c's maker cannot have the local path with @ctx, or NULL. */
static const char *not_here(const struct tern_ctx *ctx,
			    const struct tern__card_local *c)
{
	const struct tern__card_local *me = &ctx->local->id;

	if (memcmp(c->boot, me->boot, sizeof(me->boot)) != 0)
		return NULL; /* another host (or boot): not a refusal */
	if (c->userns != me->userns)
		return "another user namespace";
	if (c->uid != me->uid)
		return "another uid";
	return "";
}

static void refuse(struct tern_ctx *ctx, pid_t pid, const char *why)
{
	if (ctx->local->told++ == 0)
		tern_warn("peer pid %d on this host: same-host path refused "
			  "(%s); it goes over %s (said once per ctx)",
			  (int)pid, why, ctx->prov_name);
	else
		tern_debug("peer pid %d: same-host path refused (%s)", (int)pid,
			   why);
}

void tern__local_peer_add(struct tern_ctx *ctx, struct tern_peer *peer,
			  const struct tern__card_local *c)
{
	struct tern__local_peer *lp;
	const char *why;
	char whybuf[160];
	struct stat st;
	uid_t uid = 0;
	long fd;
	void *p;

	peer->local = NULL;
	peer->local_nonce = 0;
	if (ctx->local == NULL || c == NULL)
		return;
	why = not_here(ctx, c);
	if (why == NULL)
		return;
	if (*why != '\0') {
		refuse(ctx, (pid_t)c->pid, why);
		return;
	}
	peer->local_nonce = c->nonce;
	ctx->local->peers_gen++;
	lp = calloc(1, sizeof(*lp));
	if (lp == NULL)
		return;
	lp->pidfd = lp->wake_fd = -1;
	lp->pid = (pid_t)c->pid;
	lp->cma = 1;
	if (c->pid == 0 || c->pid > INT32_MAX) {
		why = "a bad pid";
		goto refused;
	}
	fd = pidfd_open(lp->pid);
	if (fd < 0) {
		snprintf(whybuf, sizeof(whybuf), "pidfd_open: %s",
			 strerror(errno));
		why = whybuf;
		goto refused;
	}
	lp->pidfd = (int)fd;
	/* Checked after the pidfd is held: a pid reused since the card
	 * was made shows another start time. */
	if (start_time(lp->pid) != c->start) {
		why = "its process is gone (pid reused)";
		goto refused;
	}
	if (proc_uid(lp->pid, &uid) != 0 || uid != getuid()) {
		why = "its process runs under another uid";
		goto refused;
	}
	lp->nonce = c->nonce;
	fd = pidfd_getfd(lp->pidfd, (int)c->inbox_fd);
	if (fd < 0) {
		int err = errno, two[2], ret;

		/* The kernel's ptrace rule (Yama ptrace_scope, a container):
		 * ask the owner's broker instead. */
		ret = broker_get(c->nonce, LBROKER_INBOX, 0, two, 2);
		if (ret < 0) {
			snprintf(whybuf, sizeof(whybuf),
				 "pidfd_getfd: %s (the kernel's ptrace rule: "
				 "Yama ptrace_scope, a container), and its fd "
				 "broker: %s",
				 strerror(err), strerror(-ret));
			why = whybuf;
			goto refused;
		}
		fd = two[0];
		lp->wake_fd = two[1];
		lp->broker = 1;
		tern_debug("peer pid %d: pidfd_getfd refused (%s); fds from "
			   "its broker",
			   (int)lp->pid, strerror(err));
	}
	if (fstat((int)fd, &st) != 0 || (uint64_t)st.st_ino != c->inbox_ino ||
	    (size_t)st.st_size < INBOX_SIZE) {
		close((int)fd);
		why = "its inbox is not the one its card names";
		goto refused;
	}
	p = mmap(NULL, RO_SIZE, PROT_READ, MAP_SHARED, (int)fd, 0);
	lp->ro = p == MAP_FAILED ? NULL : p;
	p = mmap(NULL, RW_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd,
		 RO_SIZE);
	lp->rw = p == MAP_FAILED ? NULL : p;
	close((int)fd);
	if (lp->ro == NULL || lp->rw == NULL) {
		why = "mapping its inbox failed";
		goto refused;
	}
	lp->hdr = (const struct lhdr *)(const void *)lp->ro;
	lp->reg = (const struct lreg *)(const void *)(lp->ro + PAGE);
	lp->cu = (const struct lcuda *)(const void *)(lp->ro + PAGE +
						      LREG * 64);
	lp->bell = (struct lbell *)(void *)lp->rw;
	if (lp->hdr->magic != LMAGIC || lp->hdr->version != LVER ||
	    lp->hdr->nreg != LREG || lp->hdr->nslot != LSLOT ||
	    lp->hdr->ring != LRING) {
		why = "its inbox is of another layout (another tern version)";
		goto refused;
	}
	if (!lp->broker) {
		fd = pidfd_getfd(lp->pidfd, (int)c->wake_fd);
		if (fd < 0) {
			why = "pidfd_getfd of its eventfd failed";
			goto refused;
		}
		lp->wake_fd = (int)fd;
	}
	if (claim_slot(lp, ctx->local->id.nonce) != 0) {
		why = "its inbox has no free slot (64 same-host writers)";
		goto refused;
	}
	/* Cross-memory attach: allowed by the same rule, but probe. */
	{
		uint64_t v;
		struct iovec li = { &v, sizeof(v) };
		struct iovec ri = { (void *)(uintptr_t)lp->hdr->self,
				    sizeof(v) };

		if (process_vm_readv(lp->pid, &li, 1, &ri, 1, 0) !=
			    (ssize_t)sizeof(v) ||
		    v != *(const uint64_t *)(const void *)lp->hdr) {
			lp->cma = 0;
			tern_info("peer pid %d: cross-memory attach refused "
				  "(%s): only its shared regions are local",
				  (int)lp->pid, strerror(errno));
		}
	}
	peer->local = lp;
	/* Its pidfd turns readable when its process ends: the loop wakes
	 * (once) and the next pass lets its attachment go. */
	if (ctx->epfd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
					  .data.ptr = tern__local_ev(ctx) };

		(void)epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, lp->pidfd, &ev);
	}
	tern_debug("peer pid %d: same-host path (slot %u)", (int)lp->pid,
		   lp->slot_idx);
	return;

refused:
	refuse(ctx, lp->pid, why);
	local_peer_free(lp);
}

void tern__local_peer_release(struct tern_ctx *ctx, struct tern_peer *peer)
{
	if (peer->local != NULL)
		local_peer_free(peer->local);
	peer->local = NULL;
	if (ctx->local != NULL)
		ctx->local->peers_gen++;
}

/* ---- the writer's side: operations ------------------------------- */

/* The live region of the owner holding [addr, addr + len) with @right:
 * its index, and its generation in @gen_p; -1 when none has it (not
 * registered, closed, or without that right), -2 when one does but only
 * the fabric reaches it. */
static int region_find(struct tern__local_peer *lp, uint64_t addr, uint64_t len,
		       uint64_t right, uint64_t *gen_p)
{
	unsigned int n = lp->hdr->nused;

	if (n > LREG)
		n = LREG;
	for (unsigned int k = 0; k < n; k++) {
		unsigned int i = (lp->hint + k) % n;
		const struct lreg *e = &lp->reg[i];
		uint64_t g1, g2, base, rlen, access;
		uint32_t flags;
		int tries = 0;

	again:
		g1 = atomic_load_explicit(&e->gen, memory_order_acquire);
		if (!(g1 & 1))
			continue;
		base = e->base;
		rlen = e->len;
		access = e->access;
		flags = e->flags;
		atomic_thread_fence(memory_order_acquire);
		g2 = atomic_load_explicit(&e->gen, memory_order_relaxed);
		if (g1 != g2) {
			if (++tries < 3) /* being rewritten: look again */
				goto again;
			continue;
		}
		if (addr < base || addr - base > rlen ||
		    len > rlen - (addr - base))
			continue;
		if (!(access & right))
			return -1;
		if (flags & LREG_FABRIC)
			return -2;
		lp->hint = i;
		*gen_p = g1;
		return (int)i;
	}
	return -1;
}

/* When region_find() gave @i < 0: the fabric takes it (1) where the owner
 * said so or could not list every region (overflow); else (0) the region
 * is not one the owner has registered with that right, and the operation
 * is queued to complete with -TERN_EACCESS, as a NIC fails a write with a
 * key it does not know (the post succeeds; a write with immediate that
 * fails tells its target: ctrl.c). */
static int missed(const struct tern__local_peer *lp, int i)
{
	return i == -2 || lp->hdr->overflow;
}

/* Open GPU region @i (generation @gen) by its CUDA IPC handle, once:
 * the region's first byte as a device pointer here, or NULL (no CUDA
 * here, or the handle refused: the fabric takes it). In the owner's own
 * process its pointer is ours already (CUDA refuses to open a handle
 * there). */
static uint8_t *cuda_map(struct tern__local_peer *lp, int i, uint64_t gen,
			 uint64_t base, uint64_t len)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	const struct lcuda *c = &lp->cu[i];
	struct lmap *m = &lp->maps[i];
	tern_cu_ipc_handle h;
	tern_cu_ptr p = 0;
	tern_cu_result r;
	uint64_t off, alen;
	int dev;

	memcpy(h.reserved, c->handle, sizeof(h.reserved));
	off = c->off;
	alen = c->alen;
	dev = c->dev;
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&lp->reg[i].gen, memory_order_relaxed) !=
		    gen ||
	    cu == NULL || off > alen || len > alen - off)
		return NULL;
	/* Opened in the owner's device's context where we see that device
	 * (the same numbering both sides: CUDA_VISIBLE_DEVICES), else the
	 * first; peer access comes with it (NVLink where present). */
	if (dev < 0 || dev >= cu->ndev)
		dev = 0;
	if (lp->pid == getpid()) {
		m->ptr = (uint8_t *)(uintptr_t)base;
	} else {
		if (cu->IpcOpenMemHandle == NULL ||
		    tern__cu_ctx_ensure(cu, dev) != 0)
			return NULL;
		r = cu->IpcOpenMemHandle(&p, h, TERN_CU_IPC_LAZY_PEER);
		if (r != TERN_CU_SUCCESS) {
			tern_info("peer pid %d: opening the CUDA IPC handle of "
				  "its region at 0x%" PRIx64
				  ": %s; the fabric takes it",
				  (int)lp->pid, base, tern__cu_errstr(cu, r));
			return NULL;
		}
		m->dptr = p;
		m->ptr = (uint8_t *)(uintptr_t)(p + off);
	}
	m->cuda = 1;
	m->dev = dev;
	m->gen = gen;
	return m->ptr;
}

/* Map region @i (generation @gen) when it is shared memory or GPU
 * memory with an IPC handle. @return its base here (for GPU memory, a
 * device pointer: lp->maps[i].cuda), or NULL: not shared (cross-memory
 * attach), or unmappable. */
static uint8_t *region_map(struct tern__local_peer *lp, int i, uint64_t gen)
{
	const struct lreg *e = &lp->reg[i];
	struct lmap *m = &lp->maps[i];
	uint64_t off, ino, len, base;
	uint32_t flags;
	int32_t sfd;
	struct stat st;
	long fd;
	void *p;

	if (m->gen == gen && m->ptr != NULL)
		return m->ptr;
	/* An older region's (closed since): let it go. */
	if (m->ptr != NULL)
		lmap_drop(m);
	off = e->shm_off;
	ino = e->shm_ino;
	len = e->len;
	base = e->base;
	sfd = e->shm_fd;
	flags = e->flags;
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&e->gen, memory_order_relaxed) != gen)
		return NULL;
	if (flags & LREG_CUDA)
		return cuda_map(lp, i, gen, base, len);
	if (ino == 0 || sfd < 0)
		return NULL;
	if (lp->broker) {
		int one;

		fd = broker_get(lp->nonce, LBROKER_REGION, (uint32_t)i, &one,
				1) == 1
			     ? one
			     : -1;
	} else {
		fd = pidfd_getfd(lp->pidfd, sfd);
	}
	if (fd < 0)
		return NULL;
	if (fstat((int)fd, &st) != 0 || (uint64_t)st.st_ino != ino ||
	    off > (uint64_t)st.st_size || len > (uint64_t)st.st_size - off) {
		close((int)fd);
		return NULL;
	}
	/* Map from the page holding the region's first byte. */
	m->maplen = (size_t)(len + (off & (PAGE - 1)));
	p = mmap(NULL, m->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd,
		 (off_t)(off & ~(uint64_t)(PAGE - 1)));
	close((int)fd);
	if (p == MAP_FAILED)
		return NULL;
	m->map = p;
	m->ptr = (uint8_t *)p + (off & (PAGE - 1));
	m->gen = gen;
	return m->ptr;
}

/* A copy that a GPU buffer is on one side of (or both): cuMemcpyAsync on
 * this ctx's stream for @dev, waited for. Synchronous, as memcpy is: the
 * operation completes in this pass, and a write's immediate is pushed
 * after its bytes are in GPU memory. */
static int cuda_copy(struct tern__local *l, void *dst, const void *src,
		     size_t len, int dev)
{
	const struct tern__cu *cu = tern__cu_get(NULL, 0);
	tern_cu_stream st = NULL;
	tern_cu_ctx cur = NULL;
	tern_cu_result r;

	if (cu == NULL)
		return -TERN_ENOCUDA;
	if (tern__cu_ctx_ensure(cu, dev) != 0 ||
	    cu->CtxGetCurrent(&cur) != TERN_CU_SUCCESS)
		return -TERN_EHMEM;
	/* Our stream, where the thread's context is the one it was made
	 * in (a stream belongs to its context). */
	if (dev >= 0 && dev < LDEVS) {
		if (l->stream[dev].s == NULL &&
		    cu->StreamCreate(&l->stream[dev].s, 0) == TERN_CU_SUCCESS)
			l->stream[dev].cctx = cur;
		if (l->stream[dev].cctx == cur)
			st = l->stream[dev].s;
	}
	/* Else the context's default stream. */
	r = cu->MemcpyAsync((tern_cu_ptr)(uintptr_t)dst,
			    (tern_cu_ptr)(uintptr_t)src, len, st);
	if (r == TERN_CU_SUCCESS)
		r = cu->StreamSynchronize(st);
	if (r != TERN_CU_SUCCESS) {
		tern_warn("same-host path: GPU copy of %zu bytes on device %d: "
			  "%s",
			  len, dev, tern__cu_errstr(cu, r));
		return -TERN_EHMEM;
	}
	return 0;
}

/* The local side of a copy: @buf, on GPU @dev (-1: host memory). */
struct lside {
	void *buf;
	int dev;
};

/* Copy between our @me and the peer's @raddr, @len bytes, into
 * (@write) or out of region @i of generation @gen. @return 0; 1: not
 * local after all (the region changed, or cross-memory attach refused):
 * the fabric takes it; <0 an error for the request. */
static int copy(struct tern__local *l, struct tern__local_peer *lp, int i,
		uint64_t gen, int write, struct lside me, uint64_t raddr,
		uint64_t len)
{
	uint8_t *base = region_map(lp, i, gen);
	int gpu = me.dev >= 0 || (base != NULL && lp->maps[i].cuda);
	void *lbuf = me.buf;
	int ret = 0;

	/* Cross-memory attach reaches neither GPU memory nor from it. */
	if (base == NULL &&
	    (!lp->cma || me.dev >= 0 || (lp->reg[i].flags & LREG_CUDA)))
		return atomic_load_explicit(&lp->reg[i].gen,
					    memory_order_acquire) != gen
			       ? -TERN_EACCESS /* closed by its owner */
			       : 1;
	atomic_store_explicit(&lp->slot->busy, (uint64_t)i + 1,
			      memory_order_seq_cst);
	if (atomic_load_explicit(&lp->reg[i].gen, memory_order_seq_cst) !=
	    gen) {
		atomic_store_explicit(&lp->slot->busy, 0, memory_order_release);
		return -TERN_EACCESS; /* closed by its owner */
	}
	if (base != NULL) {
		uint8_t *at = base + (raddr - lp->reg[i].base);

		if (gpu)
			ret = cuda_copy(l, write ? (void *)at : lbuf,
					write ? lbuf : (void *)at, len,
					lp->maps[i].cuda ? lp->maps[i].dev
							 : me.dev);
		else if (write)
			memcpy(at, lbuf, len);
		else
			memcpy(lbuf, at, len);
	} else {
		struct iovec li = { lbuf, len };
		struct iovec ri = { (void *)(uintptr_t)raddr, len };
		ssize_t n;

		n = write ? process_vm_writev(lp->pid, &li, 1, &ri, 1, 0)
			  : process_vm_readv(lp->pid, &li, 1, &ri, 1, 0);
		if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
			lp->cma = 0;
			ret = 1;
		} else if (n < 0) {
			ret = errno == ESRCH ? -TERN_EPEERGONE : -EFAULT;
		} else if ((uint64_t)n != len) {
			ret = -EFAULT;
		}
		atomic_thread_fence(memory_order_seq_cst);
	}
	atomic_store_explicit(&lp->slot->busy, 0, memory_order_release);
	return ret;
}

static int ring_room(const struct tern__local_peer *lp, uint64_t n)
{
	uint64_t tail = atomic_load_explicit(&lp->slot->tail,
					     memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&lp->slot->head,
					     memory_order_acquire);

	return tail - head <= LRING && LRING - (tail - head) >= n;
}

static void ring_push(struct tern__local_peer *lp, uint32_t imm)
{
	uint64_t tail = atomic_load_explicit(&lp->slot->tail,
					     memory_order_relaxed);

	lp->slot->ring[tail & (LRING - 1)] = imm;
	atomic_store_explicit(&lp->slot->tail, tail + 1, memory_order_release);
}

static void ring_ring(struct tern__local_peer *lp)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&lp->hdr->sleeping, memory_order_relaxed) &&
	    write(lp->wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* full or gone: the owner is awake anyway */
}

static uint64_t right_of(int write)
{
	return write ? TERN_ACCESS_REMOTE_WRITE : TERN_ACCESS_REMOTE_READ;
}

/* Region @i (generation @gen) can be reached from our memory on GPU
 * @dev (-1: host): mapped shared memory, an opened IPC handle, or
 * cross-memory attach (host memory both sides). */
static int reachable(struct tern__local_peer *lp, int i, uint64_t gen, int dev)
{
	return region_map(lp, i, gen) != NULL ||
	       (lp->cma && dev < 0 && !(lp->reg[i].flags & LREG_CUDA));
}

/* Host memory a CPU atomic may act on: mapped, and not a GPU's. */
static uint8_t *region_host(struct tern__local_peer *lp, int i, uint64_t gen)
{
	uint8_t *p = region_map(lp, i, gen);

	return p != NULL && !lp->maps[i].cuda ? p : NULL;
}

/* Where the local side of @rp's copies is: its region's GPU, or -1. */
static int side_dev(const struct tern__req_priv *rp)
{
	return rp->mr->kind == TERN_MEM_CUDA ? rp->mr->device : -1;
}

/* A write or read: 0 done (status in @status_p), 2 wait for ring room. */
static int run_rma(struct tern__local *l, struct tern__local_peer *lp,
		   struct tern_req *req, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	int write = rp->op != TERN__OP_READ, ret;
	uint64_t raddr = rp->u.rma.raddr; /* the owner's address */
	uint64_t gen;
	int i;

	if (rp->op == TERN__OP_WRITE_IMM && !ring_room(lp, 1))
		return 2;
	/* The region the post found (its index and generation): copy()
	 * checks the generation again, so a region closed (or its entry
	 * reused) since then is written by no one. */
	i = rp->rail;
	gen = rp->u.rma.rkey;
	ret = copy(l, lp, i, gen, write,
		   (struct lside){ rp->buf, side_dev(rp) }, raddr, req->len);
	if (ret == 1)
		ret = -EPERM; /* cross-memory attach refused since */
	if (ret == 0 && rp->op == TERN__OP_WRITE_IMM) {
		ring_push(lp, rp->imm);
		ring_ring(lp);
	}
	*status_p = ret;
	return 0;
}

static int run_atomic(struct tern__local_peer *lp, struct tern_req *req,
		      int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	uint64_t raddr = rp->u.atomic.raddr, gen, *w, old;
	uint8_t *base;
	int i;

	i = region_find(lp, raddr, 8, TERN_ACCESS_REMOTE_ATOMIC, &gen);
	base = i < 0 ? NULL : region_host(lp, i, gen);
	if (base == NULL) {
		*status_p = -TERN_EACCESS;
		return 0;
	}
	atomic_store_explicit(&lp->slot->busy, (uint64_t)i + 1,
			      memory_order_seq_cst);
	if (atomic_load_explicit(&lp->reg[i].gen, memory_order_seq_cst) !=
	    gen) {
		atomic_store_explicit(&lp->slot->busy, 0, memory_order_release);
		*status_p = -TERN_EACCESS;
		return 0;
	}
	w = (uint64_t *)(void *)(base + (raddr - lp->reg[i].base));
	if (rp->op == TERN__OP_FADD) {
		old = __atomic_fetch_add(w, rp->u.atomic.operand,
					 __ATOMIC_SEQ_CST);
	} else {
		old = rp->u.atomic.compare;
		__atomic_compare_exchange_n(w, &old, rp->u.atomic.operand, 0,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	atomic_store_explicit(&lp->slot->busy, 0, memory_order_release);
	req->value = old;
	*status_p = 0;
	return 0;
}

static int run_pieces(struct tern__local *l, struct tern__local_peer *lp,
		      struct tern_req *req, int *status_p)
{
	struct tern__req_priv *rp = tern__rp(req);
	int write = !rp->u.batch.read, status = 0, ret;

	if (rp->u.batch.with_imm && !ring_room(lp, rp->npieces))
		return 2;
	for (uint32_t k = 0; k < rp->npieces && status == 0; k++) {
		struct tern_piece pc = tern__piece(rp, k);
		const struct tern_mr_desc *d = &rp->u.batch.regions[pc.region];
		uint64_t gen;
		int i;

		i = region_find(lp, d->base + pc.roff, pc.len, right_of(write),
				&gen);
		if (i < 0) {
			status = -TERN_EACCESS;
			break;
		}
		ret = copy(l, lp, i, gen, write,
			   (struct lside){ (uint8_t *)rp->mr->buf + pc.loff,
					   side_dev(rp) },
			   d->base + pc.roff, pc.len);
		if (ret != 0)
			status = ret == 1 ? -EPERM : ret;
		else if (rp->u.batch.with_imm)
			ring_push(lp, rp->imm);
	}
	if (rp->u.batch.with_imm)
		ring_ring(lp);
	*status_p = status;
	return 0;
}

/* Queue a prepared request (its checks passed) for the next pass. */
static void enqueue(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__req_priv *rp = tern__rp(req);

	rp->state = TERN__ST_LOCALQ;
	rp->mr->inflight++;
	rp->peer->inflight++;
	tern__reqq_push(&ctx->local->q, req);
}

int tern__local_rma(struct tern_ctx *ctx, struct tern_req *req,
		    const struct tern_mr_desc *rd, uint64_t roff)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = rp->peer->local;
	int write = rp->op != TERN__OP_READ, i;
	uint64_t gen;

	if (rd->base > UINT64_MAX - roff)
		return -TERN_EBOUNDS;
	i = region_find(lp, rd->base + roff, req->len, right_of(write), &gen);
	if (i < 0 ? missed(lp, i) : !reachable(lp, i, gen, side_dev(rp)))
		return 1;
	if (i < 0) {
		/* Registered nowhere: generation 0 is never live, so the
		 * copy fails -TERN_EACCESS in its pass. */
		i = 0;
		gen = 0;
	}
	rp->u.rma.raddr = rd->base + roff;
	/* Not a rail's: the local queue's. Where run_rma() copies. */
	rp->rail = (uint8_t)i;
	rp->u.rma.rkey = gen;
	enqueue(ctx, req);
	return 0;
}

int tern__local_atomic(struct tern_ctx *ctx, struct tern_req *req,
		       const struct tern_mr_desc *rd, uint64_t roff)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = rp->peer->local;
	uint64_t gen;
	int i;

	if (rd->base > UINT64_MAX - roff)
		return -TERN_EBOUNDS;
	i = region_find(lp, rd->base + roff, 8, TERN_ACCESS_REMOTE_ATOMIC,
			&gen);
	/* Not shared host memory: the fabric's atomics. */
	if (i < 0 ? missed(lp, i) : region_host(lp, i, gen) == NULL)
		return 1;
	rp->u.atomic.raddr = rd->base + roff;
	rp->u.atomic.rkey = 0;
	enqueue(ctx, req);
	return 0;
}

int tern__local_pieces(struct tern_ctx *ctx, struct tern_req *req)
{
	struct tern__req_priv *rp = tern__rp(req);
	struct tern__local_peer *lp = rp->peer->local;
	int write = !rp->u.batch.read;

	/* Every region must be local, or the whole batch goes over the
	 * fabric: checked before any byte moves. */
	if (rp->u.batch.with_imm && rp->npieces > LRING)
		return 1;
	for (unsigned int r = 0; r < rp->u.batch.nregions; r++) {
		const struct tern_mr_desc *d = &rp->u.batch.regions[r];
		uint64_t gen;
		int i = region_find(lp, d->base, d->len, right_of(write), &gen);

		if (i < 0 ? missed(lp, i)
			  : !reachable(lp, i, gen, side_dev(rp)))
			return 1;
	}
	enqueue(ctx, req);
	return 0;
}

int tern__local_flush(struct tern_ctx *ctx)
{
	struct tern__local *l = ctx->local;
	struct tern_req *req;
	int n = 0;

	while ((req = l->q.head) != NULL) {
		struct tern__req_priv *rp = tern__rp(req);
		struct tern__local_peer *lp = rp->peer->local;
		int status = 0, ret;

		switch (rp->op) {
		case TERN__OP_PIECES:
			ret = run_pieces(l, lp, req, &status);
			break;
		case TERN__OP_FADD:
		case TERN__OP_CSWAP:
			ret = run_atomic(lp, req, &status);
			break;
		default:
			ret = run_rma(l, lp, req, &status);
			break;
		}
		if (ret == 2)
			break; /* the ring is full: in order, later */
		tern__reqq_remove(&l->q, req);
		l->copies++;
		l->bytes += req->len;
		tern__req_complete(ctx, req, status);
		n++;
	}
	return n;
}

struct tern__reqq *tern__local_queue(struct tern_ctx *ctx)
{
	return ctx->local != NULL ? &ctx->local->q : NULL;
}

int tern_peer_path(const struct tern_peer *peer)
{
	if (peer == NULL)
		return -EINVAL;
	return peer->local != NULL ? TERN_PATH_LOCAL : TERN_PATH_FABRIC;
}
