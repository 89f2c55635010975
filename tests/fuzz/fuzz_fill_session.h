/* SPDX-License-Identifier: MIT */
/*
 * The input format of fuzz_fill_session (shared with gen_corpus, which
 * writes its seeds): a list of operations, each an opcode byte and its
 * arguments. An argument read past the end of the input is 0; at most
 * FS_OPS_MAX operations run.
 *
 * Opcode byte: bits 0-3 the kind (modulo FS_KINDS), bits 4-5 the client
 * that sends it (modulo FS_CLIENTS), bit 6 FS_BATCH (send it and go on:
 * the following operations leave before the server has answered), bit 7
 * a variant bit of the kind.
 *
 * The server admits the last client's card only with a ticket (as a
 * --token server does every client's): its CONNECTs without FS_REG_TICKET
 * are refused.
 *
 * A session selector picks the session id a message carries: below 0x80,
 * the (sel mod n)th of the n sessions the server ACCEPTed in this input
 * (a made-up id while there is none); 0x80-0xbf the id 0; 0xc0 and above
 * an id the server never gave.
 */
#ifndef FUZZ_FILL_SESSION_H
#define FUZZ_FILL_SESSION_H

#define FS_CLIENTS 3	       /* client ctxs, each its own card */
#define FS_OPS_MAX 24	       /* operations per input */
#define FS_ARENA   (64 * 1024) /* each client's registered memory */
#define FS_BATCH   0x40

enum fs_kind {
	/* mode, off0, len0, off1, len1: a CONNECT with two regions inside
	 * the sender's memory (offsets and lengths in KiB, clipped to it).
	 * mode bits 0-1, the card: FS_CARD_*; bits 2-4 the regions:
	 * FS_REG_*; the variant bit picks the region FS_REG_NOWRITE and
	 * FS_REG_HUGE change, or the wrong ticket. */
	FS_CONNECT = 0,
	/* sel, psize, count, flags, id, then count indices (one byte each,
	 * two with FS_FILL_IDX16): a FILL; psize indexes fs_page_sizes. */
	FS_FILL = 1,
	/* sel, flags (bit 0: 4 bytes too long, bit 1: one byte short) */
	FS_BYE = 2,
	/* sel, which (mod 3: ACCEPT, RESULT, ERROR): a server's message */
	FS_SERVER_KIND = 3,
	/* len, then len bytes, sent as they are */
	FS_RAW = 4,
	/* type, sel, len, then len bytes of body: a well-formed header */
	FS_HEADER = 5,
	/* nothing: let the server answer everything sent so far */
	FS_PUMP = 6,
	/* pos, xor, mode (mod 4: flip the byte at pos, cut at pos, add pos
	 * mod 64 zero bytes and fix the length, as it was): the last
	 * message sent, again, from this client */
	FS_RESEND = 7,
	/* nothing: the sending client's bootstrap connection closes, as
	 * the server learns it (fill_server_peer_gone) */
	FS_GONE = 8,
	/* magic: if it is FS_IDLE_MAGIC, wait until every session has been
	 * idle too long and check the server ended them all (once per
	 * input: it takes the server's idle timeout, many times longer than
	 * the rest of an input) */
	FS_IDLE = 9,
	FS_KINDS = 10,
};

enum fs_card {
	FS_CARD_OWN = 0,    /* the sender's own */
	FS_CARD_NEXT = 1,   /* the next client's: replies go there */
	FS_CARD_SERVER = 2, /* the server's own: never answered */
	FS_CARD_CUT = 3,    /* the sender's, one byte short: unusable */
};

enum fs_regions {
	FS_REG_PLAIN = 0,
	FS_REG_NOWRITE = 4,  /* one region without remote write: refused */
	FS_REG_HUGE = 5,     /* one region over FILL_MAX_REGION: refused */
	FS_REG_UNMAPPED = 6, /* both at an address nothing is mapped at */
	/* plain, with the bootstrap ticket the server's admission wants
	 * of the last client (and only of it); the variant bit: another */
	FS_REG_TICKET = 7,
};

#define FS_FILL_IDX16	 0x01 /* indices of two bytes */
#define FS_FILL_IDXHIGH	 0x02 /* indices near 2^32 */
#define FS_FILL_COUNTBAD 0x04 /* page_count one more than the indices */
#define FS_FILL_SHORT	 0x08 /* the message one byte short */
#define FS_FILL_PAD	 0x10 /* four zero bytes more, length fixed */
#define FS_FILL_RESERVED 0x20 /* the header's reserved field not 0 */
#define FS_FILL_VERSION	 0x40 /* protocol version 2 */
#define FS_FILL_TYPE	 0x80 /* an unknown message type */

#define FS_IDLE_MAGIC 0x1d

#define FS_SEL_ZERO  0x80
#define FS_SEL_BOGUS 0xc0

/* Page sizes a FILL's psize byte picks from (modulo 16). */
#define FS_PAGE_SIZES                                                      \
	{                                                                  \
		1, 2, 7, 64, 100, 128, 512, 1000, 1024, 4096, 8192, 32768, \
			65536, 0, 16u << 20, (16u << 20) + 1               \
	}

#endif /* FUZZ_FILL_SESSION_H */
