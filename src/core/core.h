/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by every component: logging, lists, wire codecs. */
#ifndef TERN_CORE_H
#define TERN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tern/common.h>

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

#define tern_warn(...)	tern__log(TERN_LOG_WARN, __VA_ARGS__)
#define tern_info(...)	tern__log(TERN_LOG_INFO, __VA_ARGS__)
#define tern_debug(...) tern__log(TERN_LOG_DEBUG, __VA_ARGS__)

/* Environment parameters (TERN_*). */
const char *tern__env_str(const char *name);
long tern__env_long(const char *name, long def, long min, long max);

/* Memory a provider may still touch after its owner closed: never freed,
 * kept reachable so leak checkers can tell it is held on purpose. */
void tern__keep(void *p);

/* Monotonic clock in nanoseconds. */
uint64_t tern__now_ns(void);

struct tern_ctx;
/* Hand what is queued on every rail to the provider now, reading no
 * completions (src/engine/progress.c). For a caller about to start a clock:
 * a CQ read there is the provider's progress, which costs system calls on
 * tcp. Runs no callback (a failed post completes from the next progress
 * pass). @return 0, or -errno. */
int tern__post_queued(struct tern_ctx *ctx);

/* Little-endian wire helpers: bounds are checked by the callers. */
static inline void tern__put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void tern__put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void tern__put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t tern__get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tern__get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t tern__get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#endif /* TERN_CORE_H */
