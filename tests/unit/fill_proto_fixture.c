/* SPDX-License-Identifier: MIT */
/* The random-fill protocol's unit tests' shared helpers
 * (fill_proto_fixture.h). */
#include <stdint.h>

#include <tern/tern.h>

#include "apps/fill/proto.h"
#include "fill_proto_fixture.h"

uint8_t msg[FILL_MSG_MAX + 64];

void make_regions(struct tern_mr_desc *regions, uint64_t len0, uint64_t len1)
{
	for (int i = 0; i < FILL_REGIONS; i++) {
		regions[i] = (struct tern_mr_desc){
			.base = 0x7f0000000000ULL + (uint64_t)i * (1ULL << 32),
			.len = i == 0 ? len0 : len1,
			.flags = TERN_MR_DESC_VIRT_ADDR,
			.nkeys = 2,
			.keys = { 0x1111000000000000ULL + (uint64_t)i,
				  0x2222000000000000ULL + (uint64_t)i },
		};
	}
}
