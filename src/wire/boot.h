/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap handshake's wire format (docs/protocol.md): pure codec,
 * no sockets, so the fuzzers (tests/fuzz/) can drive it directly.
 *
 *   header, 16 bytes, little-endian:
 *     u32 magic "TRNB", u16 version, u16 type, u32 body length, u32 zero
 *   HELLO (client) / WELCOME (server) body:
 *     u16 card length (1..TERN_CARD_MAX), u16 token length (0..256; in a
 *     WELCOME 0 or 16: its ticket), u16 descriptor count (0..8), u16 zero,
 *     then the card, the token (ticket), and the descriptors
 *     (tern_mr_desc_pack), nothing after.
 *   REFUSE body:
 *     u32 tern error code (positive), u16 text length (0..200), u16 zero,
 *     then the text (printable ASCII).
 */
#ifndef TERN_WIRE_BOOT_H
#define TERN_WIRE_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tern/boot.h>

#define TERN_BOOT_MAGIC	   0x424e5254u /* "TRNB" little-endian */
#define TERN_BOOT_HDR	   16
#define TERN_BOOT_TEXT_MAX 200
#define TERN_BOOT_BODY_MAX                         \
	(8 + TERN_CARD_MAX + TERN_BOOT_TOKEN_MAX + \
	 TERN_BOOT_DESCS_MAX * TERN_MR_DESC_MAX)
#define TERN_BOOT_MSG_MAX (TERN_BOOT_HDR + TERN_BOOT_BODY_MAX)

enum { TERN_BOOT_HELLO = 1, TERN_BOOT_WELCOME = 2, TERN_BOOT_REFUSE = 3 };

struct tern__boot_msg {
	uint16_t version;
	uint16_t type;
	struct tern_boot_info info; /* HELLO, WELCOME */
	const uint8_t *token;	    /* HELLO: points into the buffer */
	size_t token_len;
	uint32_t code; /* REFUSE: a positive tern/errno code */
	char text[TERN_BOOT_TEXT_MAX + 1];
};

/*
 * How long the message starting at @buf is, once its header is in.
 * @return 0 when fewer than TERN_BOOT_HDR bytes are there; the total
 * length; -TERN_EPROTO (bad magic, nonzero reserved field, body too
 * large) or -TERN_EVERSION, with @why.
 */
ssize_t tern__boot_need(const uint8_t *buf, size_t len, char *why,
			size_t whylen);

/*
 * Check and parse one whole message of exactly @len bytes.
 * @return 0; -TERN_EPROTO / -TERN_ECARD / -TERN_EDESC / -TERN_EVERSION
 * with @why. A message of a newer version is refused before its body is
 * looked at.
 */
int tern__boot_decode(const uint8_t *buf, size_t len, struct tern__boot_msg *m,
		      char *why, size_t whylen);

/* HELLO (with @token) or WELCOME (@token NULL; info->ticket goes in the
 * token field). @return its length, or -ENOSPC / -EINVAL. */
ssize_t tern__boot_encode(uint8_t *buf, size_t len, uint16_t type,
			  const struct tern_boot_info *info, const char *token);

/* REFUSE with a positive @code and @text (cut at 200, made printable). */
ssize_t tern__boot_encode_refuse(uint8_t *buf, size_t len, uint32_t code,
				 const char *text);

/* Constant-time: do the two tokens (NULL = none) match? */
int tern__boot_token_eq(const uint8_t *a, size_t alen, const char *want);

/*
 * Split "HOST:PORT", "[V6]:PORT", ":PORT", "HOST", "V6" into host (""
 * for any) and port. @return 0, or -EINVAL with @why.
 */
int tern__boot_split(const char *addr, char *host, size_t hostlen, char *port,
		     size_t portlen, char *why, size_t whylen);

#endif /* TERN_WIRE_BOOT_H */
