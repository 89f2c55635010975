/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the control-message codec (src/wire/ctrl.c,
 * docs/protocol.md): what a peer's tern sends to this ctx's control
 * receives. A message that parses is one of its kinds (a fence names a
 * rail a ctx can have) and packs again to the same bytes; a refusal is
 * -TERN_EPROTO or -TERN_EVERSION; anything else aborts.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "wire/ctrl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[TERN_CTRL_LEN];
	struct tern__ctrl_msg m;
	int ret;

	ret = tern__ctrl_parse(data, size, &m);
	if (ret != 0) {
		if (ret != -TERN_EPROTO && ret != -TERN_EVERSION)
			abort();
		return 0;
	}
	if (size != TERN_CTRL_LEN ||
	    (m.type != TERN_CTRL_IMM_ABORT && m.type != TERN_CTRL_FENCE &&
	     m.type != TERN_CTRL_FENCED) ||
	    (m.type != TERN_CTRL_IMM_ABORT && m.rail >= TERN_CTRL_RAILS))
		abort();
	if (tern__ctrl_pack(&m, out, sizeof(out)) != TERN_CTRL_LEN ||
	    memcmp(out, data, size) != 0)
		abort();
	return 0;
}
