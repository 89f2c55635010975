/* SPDX-License-Identifier: MIT */
/*
 * tern's own control messages between ctxs (docs/protocol.md): "the
 * writes with immediate IMM I sent you failed: stop waiting", and the
 * fence of a rail gone silent: "drop my connection on rail R", answered
 * "dropped".
 */
#ifndef TERN_WIRE_CTRL_H
#define TERN_WIRE_CTRL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TERN_CTRL_MAGIC	  0x434e5254u /* "TRNC" little-endian */
#define TERN_CTRL_VERSION 1
#define TERN_CTRL_LEN	  16 /* every version-1 message */

enum tern__ctrl_type {
	TERN_CTRL_IMM_ABORT = 1,
	TERN_CTRL_FENCE = 2,  /* drop my connection on rail @rail */
	TERN_CTRL_FENCED = 3, /* dropped: @token as the FENCE's */
};

/* The highest rail a FENCE may name, plus one (TERN_MAX_RAILS). */
#define TERN_CTRL_RAILS 32

struct tern__ctrl_msg {
	uint8_t type;	/* enum tern__ctrl_type */
	uint32_t imm;	/* IMM_ABORT */
	uint32_t rail;	/* FENCE, FENCED: below TERN_CTRL_RAILS */
	uint32_t token; /* FENCE, FENCED: the fence's number */
};

/* Write @m into @buf: TERN_CTRL_LEN, or -ENOSPC. */
ssize_t tern__ctrl_pack(const struct tern__ctrl_msg *m, void *buf, size_t len);
/* Read a message of exactly @len bytes: 0, or -TERN_EPROTO (a bad magic,
 * length, type or reserved field) or -TERN_EVERSION; @m written only on
 * success. */
int tern__ctrl_parse(const void *buf, size_t len, struct tern__ctrl_msg *m);

#endif /* TERN_WIRE_CTRL_H */
