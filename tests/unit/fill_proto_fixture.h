/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the random-fill protocol's unit tests (the program
 * test_fill_proto, of several sources): test_fill_proto.c holds every
 * message's codec and the header checks, and main();
 * test_fill_proto_check.c the checks a server makes before it writes a
 * client's memory (page targets, fill_request_check()). Everything there
 * arrives from an untrusted peer. Here: what both use.
 */
#ifndef TERN_TEST_FILL_PROTO_FIXTURE_H
#define TERN_TEST_FILL_PROTO_FIXTURE_H

#include <stdint.h>

#include <tern/tern.h>

#include "apps/fill/proto.h"

#define SESSION 0x0123456789abcdefULL
#define NONCE	0xfedcba9876543210ULL
#define MIB	(1ULL << 20)

/* A buffer for one encoded message, and some slack past the largest. */
extern uint8_t msg[FILL_MSG_MAX + 64];

/* The FILL_REGIONS regions of a client: region 0 of @len0 bytes, the
 * others of @len1, each with two keys. */
void make_regions(struct tern_mr_desc *regions, uint64_t len0, uint64_t len1);

/* The cases of test_fill_proto_check.c, which main() runs. */
void test_region_pages(void **state);
void test_page_target(void **state);
void test_page_target_uneven(void **state);
void test_check_good(void **state);
void test_check_page_size(void **state);
void test_check_page_count(void **state);
void test_check_bytes(void **state);
void test_check_bounds(void **state);
void test_check_duplicate(void **state);

#endif /* TERN_TEST_FILL_PROTO_FIXTURE_H */
