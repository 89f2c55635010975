/* SPDX-License-Identifier: MIT */
/*
 * The one little-endian reader and writer every wire codec uses (card, MR
 * descriptor, bootstrap, fill protocol; docs/protocol.md).
 *
 * A cursor walks a byte buffer of known length. Each put or get checks the
 * bytes are there; one that is not sets a sticky error and moves nothing,
 * so a codec writes or reads a whole message and checks once at the end:
 *
 *	struct tern__wr w;
 *
 *	tern__wr_init(&w, buf, cap);
 *	tern__wr_u32(&w, MAGIC);
 *	tern__wr_u16(&w, len);
 *	return tern__wr_end(&w);	(length written, or -ENOSPC)
 *
 * Gets past the end return 0 and set the error (tern__rd_ok() is false);
 * what a failed read means (-TERN_EPROTO, -TERN_ECARD, ...) is the codec's
 * to say. Byte order is spelled out byte by byte: no struct casts, no
 * unaligned loads, the same bytes on every host. Header-only; knows no ctx.
 */
#ifndef TERN_WIRE_H
#define TERN_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* Unchecked loads and stores: for bytes whose bounds the caller checked
 * (e.g. an array a reader has already taken whole). */
static inline void tern__wire_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void tern__wire_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void tern__wire_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t tern__wire_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tern__wire_get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t tern__wire_get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* A writer of at most @len bytes at @p; @off bytes written so far. */
struct tern__wr {
	uint8_t *p;
	size_t len;
	size_t off;
	int err; /* sticky: a put did not fit */
};

/* A reader of the @len bytes at @p; @off bytes read so far. */
struct tern__rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	int err; /* sticky: a get ran past the end */
};

static inline void tern__wr_init(struct tern__wr *w, void *buf, size_t len)
{
	*w = (struct tern__wr){ .p = buf, .len = len };
}

/*
 * Reserve the next @n bytes for the caller to fill. @return where they
 * start, or NULL (and the sticky error) when fewer than @n are left.
 */
static inline uint8_t *tern__wr_take(struct tern__wr *w, size_t n)
{
	uint8_t *at;

	if (w->err || n > w->len - w->off) {
		w->err = 1;
		return NULL;
	}
	at = w->p + w->off;
	w->off += n;
	return at;
}

static inline void tern__wr_u8(struct tern__wr *w, uint8_t v)
{
	uint8_t *at = tern__wr_take(w, 1);

	if (at != NULL)
		at[0] = v;
}

static inline void tern__wr_u16(struct tern__wr *w, uint16_t v)
{
	uint8_t *at = tern__wr_take(w, 2);

	if (at != NULL)
		tern__wire_put_u16(at, v);
}

static inline void tern__wr_u32(struct tern__wr *w, uint32_t v)
{
	uint8_t *at = tern__wr_take(w, 4);

	if (at != NULL)
		tern__wire_put_u32(at, v);
}

static inline void tern__wr_u64(struct tern__wr *w, uint64_t v)
{
	uint8_t *at = tern__wr_take(w, 8);

	if (at != NULL)
		tern__wire_put_u64(at, v);
}

/* Copy @n bytes from @src (which may be NULL when @n is 0). */
static inline void tern__wr_bytes(struct tern__wr *w, const void *src, size_t n)
{
	uint8_t *at = tern__wr_take(w, n);

	if (at != NULL && n != 0)
		memcpy(at, src, n);
}

/* Where the next byte goes, and how many are left: for a nested codec
 * that writes into the buffer itself (then tern__wr_take() what it used). */
static inline uint8_t *tern__wr_ptr(const struct tern__wr *w)
{
	return w->p + w->off;
}

static inline size_t tern__wr_left(const struct tern__wr *w)
{
	return w->err ? 0 : w->len - w->off;
}

/* @return the bytes written, or -ENOSPC when any put did not fit. */
static inline ssize_t tern__wr_end(const struct tern__wr *w)
{
	return w->err ? -ENOSPC : (ssize_t)w->off;
}

static inline void tern__rd_init(struct tern__rd *r, const void *buf,
				 size_t len)
{
	*r = (struct tern__rd){ .p = buf, .len = len };
}

/*
 * Take the next @n bytes as they are (no copy). @return where they start,
 * or NULL (and the sticky error) when fewer than @n are left.
 */
static inline const uint8_t *tern__rd_take(struct tern__rd *r, size_t n)
{
	const uint8_t *at;

	if (r->err || n > r->len - r->off) {
		r->err = 1;
		return NULL;
	}
	at = r->p + r->off;
	r->off += n;
	return at;
}

static inline uint8_t tern__rd_u8(struct tern__rd *r)
{
	const uint8_t *at = tern__rd_take(r, 1);

	return at != NULL ? at[0] : 0;
}

static inline uint16_t tern__rd_u16(struct tern__rd *r)
{
	const uint8_t *at = tern__rd_take(r, 2);

	return at != NULL ? tern__wire_get_u16(at) : 0;
}

static inline uint32_t tern__rd_u32(struct tern__rd *r)
{
	const uint8_t *at = tern__rd_take(r, 4);

	return at != NULL ? tern__wire_get_u32(at) : 0;
}

static inline uint64_t tern__rd_u64(struct tern__rd *r)
{
	const uint8_t *at = tern__rd_take(r, 8);

	return at != NULL ? tern__wire_get_u64(at) : 0;
}

/* Where the next byte is, and how many are left (0 after an overrun). */
static inline const uint8_t *tern__rd_ptr(const struct tern__rd *r)
{
	return r->p + r->off;
}

static inline size_t tern__rd_left(const struct tern__rd *r)
{
	return r->err ? 0 : r->len - r->off;
}

/* @return 1 while every get so far found its bytes. */
static inline int tern__rd_ok(const struct tern__rd *r)
{
	return !r->err;
}

#endif /* TERN_WIRE_H */
