/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by every component: logging, lists, wire codecs. */
#ifndef TERN_CORE_H
#define TERN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tern/common.h>

/* pidfd_open(2) and pidfd_getfd(2) (Linux 5.3, 5.6), for libc headers
 * older than the kernel: the same-host path and the fake CUDA driver. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static inline long tern__pidfd_open(int pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

static inline long tern__pidfd_getfd(int pidfd, int fd)
{
	return syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

#define TERN_XSTR(x)	   #x
#define TERN_STR(x)	   TERN_XSTR(x)
#define TERN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TERN_MIN(a, b)	   ((a) < (b) ? (a) : (b))
#define TERN_MAX(a, b)	   ((a) > (b) ? (a) : (b))
#define tern_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#if defined(__GNUC__)
#define tern_likely(x)	   __builtin_expect(!!(x), 1)
#define tern_unlikely(x)   __builtin_expect(!!(x), 0)
#define TERN_PRINTF(a, b)  __attribute__((format(printf, a, b)))
#define TERN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define tern_likely(x)	 (x)
#define tern_unlikely(x) (x)
#define TERN_PRINTF(a, b)
#define TERN_ALWAYS_INLINE inline
#endif

/* Logging: one line to stderr, prefixed "tern <level>: ". */
void tern__log(enum tern_log_level level, const char *fmt, ...)
	TERN_PRINTF(2, 3);
int tern__log_enabled(enum tern_log_level level);

#define tern__warn(...)	 tern__log(TERN_LOG_WARN, __VA_ARGS__)
#define tern__info(...)	 tern__log(TERN_LOG_INFO, __VA_ARGS__)
#define tern__debug(...) tern__log(TERN_LOG_DEBUG, __VA_ARGS__)

/* Environment parameters (TERN_*). */
const char *tern__env_str(const char *name);
long tern__env_long(const char *name, long def, long min, long max);

/* Memory a provider may still touch after its owner closed: never freed,
 * kept reachable so leak checkers can tell it is held on purpose. */
void tern__keep(void *p);

/* Monotonic clock in nanoseconds. */
uint64_t tern__now_ns(void);

#endif /* TERN_CORE_H */
