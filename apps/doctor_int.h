/* SPDX-License-Identifier: MIT */
/*
 * What the parts of `tern doctor` share (apps/doctor*.c): adding findings,
 * building their sentences, reading files under the root and the RDMA
 * devices scanned once. Private to apps/doctor*.c.
 */
#ifndef APP_DOCTOR_INT_H
#define APP_DOCTOR_INT_H

#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/doctor.h"

/* Copy @src into @dst of @len bytes, cut where it does not fit. */
static inline void doctor_set(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static inline int doctor_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline int doctor_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* A finding of @check with its sentence; NULL when it could not be
 * stored (d->nomem says so). */
struct doctor_finding *doctor_add(struct doctor *d, const char *check,
				  enum doctor_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Its fix; nothing when @x is NULL. */
void doctor_fix(struct doctor_finding *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append to a string being built in @buf. */
void doctor_cat(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Write into @buf what @fmt makes, cut where it does not fit. */
void doctor_put(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* <root> followed by the path @fmt makes, into @buf. @return @buf. */
const char *doctor_at(const struct doctor *d, char *buf, size_t len,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The first line of @path (without its newline). @return 0 or -errno. */
int doctor_read_line(const char *path, char *buf, size_t len);

/* Find the RDMA devices under <root>/sys/class/infiniband, their uverbs
 * and whether those open (d->devs, d->nefa, d->devdir_err); once. */
void doctor_scan(struct doctor *d);

#endif /* APP_DOCTOR_INT_H */
