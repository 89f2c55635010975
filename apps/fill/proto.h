/* SPDX-License-Identifier: MIT */
/*
 * The random-fill protocol (docs/protocol.md): message codecs and the checks
 * a server makes before it touches a client's memory. Pure functions, so the
 * unit tests and the fuzzers reach every branch without a fabric.
 */
#ifndef TERN_FILL_PROTO_H
#define TERN_FILL_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#define TERN_FILL_MAGIC	  0x4c465254u /* "TRFL" little-endian */
#define TERN_FILL_VERSION 1
#define TERN_FILL_HDR	  24

enum tern_fill_type {
	TERN_FILL_CONNECT = 1,
	TERN_FILL_ACCEPT = 2,
	TERN_FILL_REQUEST = 3,
	TERN_FILL_RESULT = 4,
	TERN_FILL_ERROR = 5,
	TERN_FILL_BYE = 6,
};

/* Server limits, advertised in ACCEPT (see `tern serve --help`). */
#define TERN_FILL_MAX_PAGE_SIZE (16u << 20)
#define TERN_FILL_MAX_PAGES	16384u
#define TERN_FILL_MAX_BYTES	(32u << 20)
#define TERN_FILL_MAX_REGION	(1ULL << 30)
#define TERN_FILL_REGIONS	2
#define TERN_FILL_MSG_MAX \
	(TERN_FILL_HDR + 24 + 4 * TERN_FILL_MAX_PAGES + 2 * TERN_CARD_MAX)
#define TERN_FILL_TEXT_MAX 200

struct tern_fill_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length; /* whole message, header included */
	uint64_t session;
};

struct tern_fill_connect {
	uint64_t nonce; /* header session field of a CONNECT */
	const uint8_t *card;
	size_t card_len;
	struct tern_mr_desc regions[TERN_FILL_REGIONS];
};

struct tern_fill_accept {
	uint64_t nonce;
	uint32_t max_page_size;
	uint32_t max_pages;
	uint64_t max_bytes;
};

struct tern_fill_request {
	uint32_t id; /* also the immediate of every write */
	uint32_t page_size;
	uint64_t seed;
	uint32_t page_count;
	const uint8_t *indices; /* page_count little-endian u32 */
};

struct tern_fill_result {
	uint32_t id;
	int32_t status;
	uint64_t bytes;
	uint64_t write_ns; /* server: first post to last local completion */
};

struct tern_fill_error {
	uint32_t id;
	int32_t code;
	char text[TERN_FILL_TEXT_MAX + 1];
};

/* Parse and check a header against the received length. */
int tern_fill_hdr_parse(const void *buf, size_t len, struct tern_fill_hdr *h);

ssize_t tern_fill_connect_encode(void *buf, size_t cap, uint64_t nonce,
				 const void *card, size_t card_len,
				 const struct tern_mr_desc *regions);
int tern_fill_connect_decode(const void *buf, size_t len,
			     struct tern_fill_connect *c);
/* The card of a CONNECT of any version (its prefix never changes). */
int tern_fill_connect_card(const void *buf, size_t len, const uint8_t **card_p,
			   size_t *card_len_p);

ssize_t tern_fill_accept_encode(void *buf, size_t cap, uint64_t session,
				const struct tern_fill_accept *a);
int tern_fill_accept_decode(const void *buf, size_t len,
			    struct tern_fill_accept *a);

ssize_t tern_fill_request_encode(void *buf, size_t cap, uint64_t session,
				 const struct tern_fill_request *r,
				 const uint32_t *indices);
int tern_fill_request_decode(const void *buf, size_t len,
			     struct tern_fill_request *r);
uint32_t tern_fill_request_index(const struct tern_fill_request *r, uint32_t k);

ssize_t tern_fill_result_encode(void *buf, size_t cap, uint64_t session,
				const struct tern_fill_result *r);
int tern_fill_result_decode(const void *buf, size_t len,
			    struct tern_fill_result *r);

ssize_t tern_fill_error_encode(void *buf, size_t cap, uint64_t session,
			       uint32_t id, int32_t code, const char *text);
int tern_fill_error_decode(const void *buf, size_t len,
			   struct tern_fill_error *e);

ssize_t tern_fill_bye_encode(void *buf, size_t cap, uint64_t session);

/* Number of whole pages of @page_size in a region of @len bytes. */
uint64_t tern_fill_region_pages(uint64_t len, uint32_t page_size);

/*
 * Where page @index lands: pages are numbered through region 0, then
 * region 1. @return 0 and *region_p / *offset_p, or -TERN_EBOUNDS.
 */
int tern_fill_page_target(const struct tern_mr_desc *regions,
			  uint32_t page_size, uint32_t index,
			  unsigned int *region_p, uint64_t *offset_p);

/*
 * The server's checks of a request against the client's declared regions:
 * sizes, counts, every index in bounds and none repeated. @scratch holds
 * page_count u32 (for the duplicate check). On refusal, a reason for the
 * client goes into @why. @return 0 or a negative tern code.
 */
int tern_fill_request_check(const struct tern_fill_request *r,
			    const struct tern_mr_desc *regions,
			    uint32_t *scratch, char *why, size_t whylen);

#endif /* TERN_FILL_PROTO_H */
