/* SPDX-License-Identifier: MIT */
/*
 * The random-fill protocol (docs/protocol.md): message codecs and the checks
 * a server makes before it touches a client's memory. Pure functions, so the
 * unit tests and the fuzzers reach every branch without a fabric.
 */
#ifndef FILL_PROTO_H
#define FILL_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/tern.h>

#define FILL_MAGIC   0x4c465254u /* "TRFL" little-endian */
#define FILL_VERSION 1
#define FILL_HDR     24

enum fill_type {
	FILL_CONNECT = 1,
	FILL_ACCEPT = 2,
	FILL_REQUEST = 3,
	FILL_RESULT = 4,
	FILL_ERROR = 5,
	FILL_BYE = 6,
};

/* Server limits, advertised in ACCEPT (see `tern fill --help`). */
#define FILL_MAX_PAGE_SIZE (16u << 20)
#define FILL_MAX_PAGES	   16384u
#define FILL_MAX_BYTES	   (32u << 20)
#define FILL_MAX_REGION	   (1ULL << 30)
#define FILL_REGIONS	   2
#define FILL_MSG_MAX	   (FILL_HDR + 24 + 4 * FILL_MAX_PAGES + 2 * TERN_CARD_MAX)
#define FILL_TEXT_MAX	   200

struct fill_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length; /* whole message, header included */
	uint64_t session;
};

#define FILL_TICKET_LEN 16 /* TERN_BOOT_TICKET_LEN */

struct fill_connect {
	uint64_t nonce; /* header session field of a CONNECT */
	const uint8_t *card;
	size_t card_len;
	struct tern_mr_desc regions[FILL_REGIONS];
	/* The bootstrap WELCOME's ticket, when the client came that way
	 * (points into the message; ticket_len 0 or FILL_TICKET_LEN). */
	const uint8_t *ticket;
	size_t ticket_len;
};

struct fill_accept {
	uint64_t nonce;
	uint32_t max_page_size;
	uint32_t max_pages;
	uint64_t max_bytes;
};

struct fill_request {
	uint32_t id; /* also the immediate of every write */
	uint32_t page_size;
	uint64_t seed;
	uint32_t page_count;
	const uint8_t *indices; /* page_count little-endian u32 */
};

struct fill_result {
	uint32_t id;
	int32_t status;
	uint64_t bytes;
	uint64_t write_ns; /* server: first post to last local completion */
};

struct fill_error {
	uint32_t id;
	int32_t code;
	char text[FILL_TEXT_MAX + 1];
};

/* Parse and check a header against the received length. */
int fill_hdr_parse(const void *buf, size_t len, struct fill_hdr *h);

ssize_t fill_connect_encode(void *buf, size_t cap, uint64_t nonce,
			    const void *card, size_t card_len,
			    const struct tern_mr_desc *regions);
/* The same with the ticket of a bootstrap WELCOME (@ticket_len 0 or
 * FILL_TICKET_LEN) after the regions. */
ssize_t fill_connect_encode_ticket(void *buf, size_t cap, uint64_t nonce,
				   const void *card, size_t card_len,
				   const struct tern_mr_desc *regions,
				   const void *ticket, size_t ticket_len);
int fill_connect_decode(const void *buf, size_t len, struct fill_connect *c);
/* Why fill_connect_decode() refused @buf with @err, naming the field and
 * its rule, in @why. */
void fill_connect_why(const void *buf, size_t len, int err, char *why,
		      size_t whylen);
/* The card of a CONNECT of any version (its prefix never changes). */
int fill_connect_card(const void *buf, size_t len, const uint8_t **card_p,
		      size_t *card_len_p);

ssize_t fill_accept_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_accept *a);
int fill_accept_decode(const void *buf, size_t len, struct fill_accept *a);

ssize_t fill_request_encode(void *buf, size_t cap, uint64_t session,
			    const struct fill_request *r,
			    const uint32_t *indices);
int fill_request_decode(const void *buf, size_t len, struct fill_request *r);
uint32_t fill_request_index(const struct fill_request *r, uint32_t k);

ssize_t fill_result_encode(void *buf, size_t cap, uint64_t session,
			   const struct fill_result *r);
int fill_result_decode(const void *buf, size_t len, struct fill_result *r);

ssize_t fill_error_encode(void *buf, size_t cap, uint64_t session, uint32_t id,
			  int32_t code, const char *text);
int fill_error_decode(const void *buf, size_t len, struct fill_error *e);

ssize_t fill_bye_encode(void *buf, size_t cap, uint64_t session);

/* Number of whole pages of @page_size in a region of @len bytes. */
uint64_t fill_region_pages(uint64_t len, uint32_t page_size);

/*
 * Where page @index lands: pages are numbered through region 0, then
 * region 1. @return 0 and *region_p / *offset_p, or -TERN_EBOUNDS.
 */
int fill_page_target(const struct tern_mr_desc *regions, uint32_t page_size,
		     uint32_t index, unsigned int *region_p,
		     uint64_t *offset_p);

/*
 * The server's checks of a request against the client's declared regions:
 * sizes, counts, every index in bounds and none repeated. @scratch holds
 * page_count u32 (for the duplicate check). On refusal, a reason for the
 * client goes into @why. @return 0 or a negative tern code.
 */
int fill_request_check(const struct fill_request *r,
		       const struct tern_mr_desc *regions, uint32_t *scratch,
		       char *why, size_t whylen);

#endif /* FILL_PROTO_H */
