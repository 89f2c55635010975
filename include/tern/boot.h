/* SPDX-License-Identifier: MIT */
/**
 * @file tern/boot.h
 * Out-of-band bootstrap over TCP: two processes exchange their cards and
 * memory descriptors through a small versioned handshake, with an
 * optional shared-secret token, and may keep the socket open as a
 * liveness channel (docs/bootstrap.md, wire format in docs/protocol.md).
 *
 * A client dials (tern_boot_dial), opens its ctx (on the address the
 * socket left from, tern_boot_local_host, so the server can reach it) and
 * swaps hellos (tern_boot_hello). A server (tern_boot_server_open) accepts
 * inside a ctx's loop: handshakes are small state machines with a
 * deadline, so a slow or hostile client never holds up another.
 */
#ifndef TERN_BOOT_H
#define TERN_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include <tern/ctx.h>
#include <tern/mr.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_BOOT_VERSION    1
#define TERN_BOOT_PORT	     7471 /**< used when an address names no port */
#define TERN_BOOT_DESCS_MAX  8	  /**< descriptors one hello may carry */
#define TERN_BOOT_TOKEN_MAX  256  /**< bytes of a token */
#define TERN_BOOT_TICKET_LEN 16	  /**< bytes of a welcome's ticket */

/** What one side tells the other. */
struct tern_boot_info {
	uint8_t card[TERN_CARD_MAX];
	size_t card_len;
	struct tern_mr_desc descs[TERN_BOOT_DESCS_MAX];
	unsigned int ndesc;
	/** In a WELCOME: a random secret for this connection alone (0 or
	 * TERN_BOOT_TICKET_LEN bytes). The client hands it back over the
	 * fabric (e.g. in its first message), and the server checks it with
	 * tern_boot_server_claim(): a copied card is not enough. */
	uint8_t ticket[TERN_BOOT_TICKET_LEN];
	size_t ticket_len;
};

/**
 * Connect to "HOST:PORT", "[IPV6]:PORT" or "HOST" (port TERN_BOOT_PORT),
 * trying every address HOST resolves to, within @p timeout_ms in all.
 * @return 0 and the connected socket in *@p fd_p; a negative errno with
 * the reason in @p why (unresolvable name, refused, timed out...).
 */
TERN_API int tern_boot_dial(const char *addr, int timeout_ms, int *fd_p,
			    char *why, size_t whylen);

/** The numeric address this side of a connected socket has (no port). */
TERN_API int tern_boot_local_host(int fd, char *host, size_t len);

/**
 * Client side of the handshake on a dialled socket: send our hello (card,
 * descriptors, @p token or NULL), wait up to @p timeout_ms for the
 * server's. @return 0 with *@p theirs filled; -TERN_EREFUSED (the server
 * said why: bad token, busy...), -TERN_EVERSION, -TERN_EPROTO for a
 * malformed answer, -ETIMEDOUT, -TERN_EPEERGONE when the server closed
 * the socket; @p why says it in words.
 */
TERN_API int tern_boot_hello(int fd, const char *token,
			     const struct tern_boot_info *mine,
			     struct tern_boot_info *theirs, int timeout_ms,
			     char *why, size_t whylen);

struct tern_boot_server;

/**
 * Called from the ctx's loop. @p info is the client's hello (NULL for
 * refusals that came before one); @p text says what happened in words,
 * with the client's address. A callback must not close the server.
 */
typedef void (*tern_boot_cb)(struct tern_boot_server *srv,
			     const struct tern_boot_info *info,
			     const char *text, void *data);

/**
 * What to serve (tern_boot_server_open()). Start with
 * tern_boot_server_attr_init(), then set what you need.
 *
 * @p field_mask says which fields the caller filled: tern reads a field
 * only when its TERN_BOOT_SERVER_ATTR_FIELD_* bit is set, and takes the
 * field's default when it is not: 0 or NULL, with the meaning said at
 * the field. A bit this library does not know is refused: -EINVAL, the
 * log names the bit. field_mask 0 reads every field of tern 0.1 (all
 * those below), as before field_mask (docs/api.md, "Attribute structs").
 */
struct tern_boot_server_attr {
	/** TERN_BOOT_SERVER_ATTR_FIELD_* bits: the fields set below. */
	uint64_t field_mask;
	/** "HOST:PORT", "[IPV6]:PORT", ":PORT"; required */
	const char *listen;
	const char *token;	 /**< clients must present it; NULL: any */
	int handshake_ms;	 /**< a hello must arrive by then; 0 = 5000 */
	int max_conns;		 /**< connections at once; 0 = 1024 */
	tern_boot_cb on_hello;	 /**< a client passed the handshake */
	tern_boot_cb on_gone;	 /**< a client's connection closed later */
	tern_boot_cb on_refused; /**< a connection was refused and closed */
	void *data;		 /**< passed to the callbacks */
	/** A welcomed client not claimed (tern_boot_server_claim()) within
	 * this many ms is closed (on_gone says so); 0 = never. */
	int claim_ms;
};

/** tern_boot_server_attr.field_mask: one bit per field. */
#define TERN_BOOT_SERVER_ATTR_FIELD_LISTEN	 (1ULL << 0)
#define TERN_BOOT_SERVER_ATTR_FIELD_TOKEN	 (1ULL << 1)
#define TERN_BOOT_SERVER_ATTR_FIELD_HANDSHAKE_MS (1ULL << 2)
#define TERN_BOOT_SERVER_ATTR_FIELD_MAX_CONNS	 (1ULL << 3)
#define TERN_BOOT_SERVER_ATTR_FIELD_ON_HELLO	 (1ULL << 4)
#define TERN_BOOT_SERVER_ATTR_FIELD_ON_GONE	 (1ULL << 5)
#define TERN_BOOT_SERVER_ATTR_FIELD_ON_REFUSED	 (1ULL << 6)
#define TERN_BOOT_SERVER_ATTR_FIELD_DATA	 (1ULL << 7)
#define TERN_BOOT_SERVER_ATTR_FIELD_CLAIM_MS	 (1ULL << 8)
/** Every field this header declares. */
#define TERN_BOOT_SERVER_ATTR_FIELDS_ALL ((1ULL << 9) - 1)

/**
 * Set the fields of @p attr that @p fields names
 * (TERN_BOOT_SERVER_ATTR_FIELD_* bits) to their defaults, and
 * attr->field_mask to @p fields; nothing else of @p attr is written.
 * @return 0; -EINVAL for NULL, or for a bit this library does not know
 * (the fields it knows are set all the same, and tern_boot_server_open()
 * refuses the mask).
 */
TERN_API int tern_boot_server_attr_defaults(struct tern_boot_server_attr *attr,
					    uint64_t fields);

/**
 * Set every field of @p attr to its default and field_mask to
 * TERN_BOOT_SERVER_ATTR_FIELDS_ALL: then assign the fields you need.
 */
static inline void tern_boot_server_attr_init(
	struct tern_boot_server_attr *attr)
{
	(void)tern_boot_server_attr_defaults(attr,
					     TERN_BOOT_SERVER_ATTR_FIELDS_ALL);
}

/**
 * Listen and serve handshakes from @p ctx's loop (tern_run, tern_wait),
 * answering with @p mine. @return 0; -EADDRINUSE, -EINVAL (bad address
 * or a field_mask bit this library does not know, with @p why), another
 * negative errno.
 */
TERN_API int tern_boot_server_open(struct tern_ctx *ctx,
				   const struct tern_boot_server_attr *attr,
				   const struct tern_boot_info *mine,
				   struct tern_boot_server **srv_p, char *why,
				   size_t whylen);

/** The bound address as "HOST:PORT" (the real port when 0 was asked). */
TERN_API int tern_boot_server_addr(const struct tern_boot_server *srv,
				   char *buf, size_t len);

/** Handshakes completed, refused, and live connections now. */
struct tern_boot_server_stats {
	uint64_t accepted;
	uint64_t refused;
	uint64_t gone;
	uint64_t live;
};

/** Copy @p srv's counters into @p st. */
TERN_API void tern_boot_server_stats(const struct tern_boot_server *srv,
				     struct tern_boot_server_stats *st);

/** Is a client with this card connected (handshake passed, socket open)? */
TERN_API int tern_boot_server_has_card(const struct tern_boot_server *srv,
				       const void *card, size_t len);

/**
 * Does a connected client (handshake passed, socket open) have this card
 * and this ticket (its WELCOME's, compared in constant time)? If so the
 * connection is claimed: claim_ms no longer applies to it.
 * @return 1 (claimed now or before), 0 (no such client).
 */
TERN_API int tern_boot_server_claim(struct tern_boot_server *srv,
				    const void *card, size_t len,
				    const void *ticket, size_t ticket_len);

/** Close the listener and every connection (no callbacks). */
TERN_API void tern_boot_server_close(struct tern_boot_server *srv);

/**
 * Does @p arg name a bootstrap address rather than a hex card? (It has a
 * ':' or a '.', which a card never has.)
 */
TERN_API int tern_boot_is_addr(const char *arg);

#ifdef __cplusplus
}
#endif

#endif /* TERN_BOOT_H */
