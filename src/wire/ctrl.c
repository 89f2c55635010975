/* SPDX-License-Identifier: MIT */
/* Control messages (ctrl.h, docs/protocol.md): a fixed 16-byte frame. */
#include <errno.h>

#include <tern/tern.h>

#include "ctrl.h"
#include "wire.h"

ssize_t tern__ctrl_pack(const struct tern__ctrl_msg *m, void *buf, size_t len)
{
	struct tern__wr w;

	tern__wr_init(&w, buf, len);
	tern__wr_u32(&w, TERN_CTRL_MAGIC);
	tern__wr_u8(&w, TERN_CTRL_VERSION);
	tern__wr_u8(&w, m->type);
	tern__wr_u16(&w, TERN_CTRL_LEN);
	if (m->type == TERN_CTRL_IMM_ABORT) {
		tern__wr_u32(&w, m->imm);
		tern__wr_u32(&w, 0);
	} else {
		tern__wr_u32(&w, m->rail);
		tern__wr_u32(&w, m->token);
	}
	return tern__wr_end(&w);
}

int tern__ctrl_parse(const void *buf, size_t len, struct tern__ctrl_msg *m)
{
	struct tern__rd r;
	uint32_t magic, word1, word2;
	uint8_t version, type;
	uint16_t mlen;

	if (buf == NULL || len != TERN_CTRL_LEN)
		return -TERN_EPROTO;
	tern__rd_init(&r, buf, len);
	magic = tern__rd_u32(&r);
	version = tern__rd_u8(&r);
	type = tern__rd_u8(&r);
	mlen = tern__rd_u16(&r);
	word1 = tern__rd_u32(&r);
	word2 = tern__rd_u32(&r);
	if (!tern__rd_ok(&r) || magic != TERN_CTRL_MAGIC)
		return -TERN_EPROTO;
	if (version != TERN_CTRL_VERSION)
		return -TERN_EVERSION;
	if (mlen != TERN_CTRL_LEN)
		return -TERN_EPROTO;
	switch (type) {
	case TERN_CTRL_IMM_ABORT:
		if (word2 != 0)
			return -TERN_EPROTO;
		*m = (struct tern__ctrl_msg){ .type = type, .imm = word1 };
		return 0;
	case TERN_CTRL_FENCE:
	case TERN_CTRL_FENCED:
		if (word1 >= TERN_CTRL_RAILS)
			return -TERN_EPROTO;
		*m = (struct tern__ctrl_msg){ .type = type,
					      .rail = word1,
					      .token = word2 };
		return 0;
	default:
		return -TERN_EPROTO;
	}
}
