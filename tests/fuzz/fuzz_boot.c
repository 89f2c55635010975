/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the bootstrap handshake's codec (src/wire/boot.h).
 * Whatever decodes must encode again, and the encoding must decode to the
 * same fields: a peer's message and ours are one format. Any mismatch, or
 * an answer outside the documented ones, aborts. Addresses (what users
 * type, not peers) go through tern__boot_split as well.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "wire/boot.h"
#include "wire/card.h"
#include "core/core.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[TERN_BOOT_MSG_MAX];

static int printable(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] >= 0x7f)
			return 0;
	return 1;
}

static void decode_or_abort(const uint8_t *buf, size_t len,
			    struct tern__boot_msg *m)
{
	char why[256];

	if (tern__boot_decode(buf, len, m, why, sizeof(why)) != 0)
		abort();
}

static void check_info(const struct tern__boot_msg *m, const uint8_t *data,
		       size_t size)
{
	struct tern__boot_msg m2;
	struct tern__card card;
	char token[TERN_BOOT_TOKEN_MAX + 1], why[256];
	size_t tl;
	int welcome;
	ssize_t n;

	if (m->info.card_len == 0 || m->info.card_len > TERN_CARD_MAX ||
	    m->info.ndesc > TERN_BOOT_DESCS_MAX ||
	    m->token_len > TERN_BOOT_TOKEN_MAX ||
	    (m->token_len == 0) != (m->token == NULL))
		abort();
	if (m->token != NULL &&
	    (m->token < data || m->token + m->token_len > data + size))
		abort();
	if (tern__card_parse(m->info.card, m->info.card_len, &card, why,
			     sizeof(why)) != 0)
		abort();

	/* The encoder takes a C string: a token is cut at a NUL byte. */
	if (m->token_len != 0)
		memcpy(token, m->token, m->token_len);
	token[m->token_len] = '\0';
	tl = strlen(token);
	if (tern__boot_token_eq(m->token, m->token_len, token) !=
	    (tl == m->token_len))
		abort();

	/* A welcome's token field is its ticket, encoded from info (any
	 * bytes, NULs too). */
	welcome = m->type == TERN_BOOT_WELCOME;
	if (welcome &&
	    (m->info.ticket_len != m->token_len ||
	     (m->token_len != 0 && m->token_len != TERN_BOOT_TICKET_LEN)))
		abort();
	if (welcome)
		tl = m->token_len;
	n = tern__boot_encode(out, sizeof(out), m->type, &m->info,
			      !welcome && tl != 0 ? token : NULL);
	if (n < 0)
		abort();
	/* One encoding per message: the same bytes, unless the token was
	 * cut. */
	if (tl == m->token_len &&
	    ((size_t)n != size || memcmp(out, data, size) != 0))
		abort();

	decode_or_abort(out, (size_t)n, &m2);
	if (m2.type != m->type || m2.version != m->version ||
	    m2.info.card_len != m->info.card_len ||
	    memcmp(m2.info.card, m->info.card, m->info.card_len) != 0 ||
	    m2.info.ndesc != m->info.ndesc || m2.token_len != tl ||
	    (tl != 0 &&
	     memcmp(m2.token, welcome ? m->info.ticket : (const uint8_t *)token,
		    tl) != 0))
		abort();
	for (unsigned int i = 0; i < m->info.ndesc; i++)
		if (memcmp(&m2.info.descs[i], &m->info.descs[i],
			   sizeof(m->info.descs[i])) != 0)
			abort();
}

static void check_refuse(const struct tern__boot_msg *m, const uint8_t *data,
			 size_t size)
{
	struct tern__boot_msg m2;
	size_t tl = strlen(m->text);
	ssize_t n;

	if (m->code == 0 || m->code > 4096 || tl > TERN_BOOT_TEXT_MAX ||
	    !printable((const uint8_t *)m->text, tl))
		abort();
	n = tern__boot_encode_refuse(out, sizeof(out), m->code, m->text);
	if (n < 0 || (size_t)n != size)
		abort();
	/* The same bytes, unless the decoder had to replace some. */
	if (printable(data + TERN_BOOT_HDR + 8, tl) &&
	    memcmp(out, data, size) != 0)
		abort();
	decode_or_abort(out, (size_t)n, &m2);
	if (m2.type != TERN_BOOT_REFUSE || m2.code != m->code ||
	    strcmp(m2.text, m->text) != 0)
		abort();
}

/* The address splitter reads what users type: short inputs only. */
static void check_split(const uint8_t *data, size_t size)
{
	char addr[300], host[256], port[8], why[256];
	int ret;

	if (size >= sizeof(addr))
		return;
	memcpy(addr, data, size);
	addr[size] = '\0';
	ret = tern__boot_split(addr, host, sizeof(host), port, sizeof(port),
			       why, sizeof(why));
	if (ret == -EINVAL)
		return;
	if (ret != 0 || strlen(host) >= sizeof(host) || port[0] == '\0' ||
	    strspn(port, "0123456789") != strlen(port) ||
	    strtoul(port, NULL, 10) > 65535)
		abort();
}

static void check_msg(const uint8_t *data, size_t size)
{
	struct tern__boot_msg m;
	char why[256];
	ssize_t need;
	int ret;

	need = tern__boot_need(data, size, why, sizeof(why));
	if (size < TERN_BOOT_HDR && need != 0)
		abort();
	if (size >= TERN_BOOT_HDR &&
	    (need == 0 || need > (ssize_t)TERN_BOOT_MSG_MAX))
		abort();
	if (need < 0 && need != -TERN_EPROTO && need != -TERN_EVERSION)
		abort();

	ret = tern__boot_decode(data, size, &m, why, sizeof(why));
	if (ret != 0) {
		if (ret != -TERN_EPROTO && ret != -TERN_ECARD &&
		    ret != -TERN_EDESC && ret != -TERN_EVERSION)
			abort();
		return;
	}
	if (need != (ssize_t)size || m.version != TERN_BOOT_VERSION)
		abort();
	switch (m.type) {
	case TERN_BOOT_HELLO:
	case TERN_BOOT_WELCOME:
		check_info(&m, data, size);
		break;
	case TERN_BOOT_REFUSE:
		check_refuse(&m, data, size);
		break;
	default:
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;

	check_split(data, size);
	check_msg(data, size);

	/* Again with the header's body length (and a REFUSE's text length)
	 * made right, so the fuzzer need not find them to reach the checks
	 * behind them. */
	if (size < TERN_BOOT_HDR ||
	    tern__wire_get_u32(data + 8) == size - TERN_BOOT_HDR)
		return 0;
	fixed = malloc(size);
	if (fixed == NULL)
		abort();
	memcpy(fixed, data, size);
	tern__wire_put_u32(fixed + 8, (uint32_t)(size - TERN_BOOT_HDR));
	if (tern__wire_get_u16(fixed + 6) == TERN_BOOT_REFUSE &&
	    size >= TERN_BOOT_HDR + 8 && size - TERN_BOOT_HDR - 8 <= UINT16_MAX)
		tern__wire_put_u16(fixed + TERN_BOOT_HDR + 4,
				   (uint16_t)(size - TERN_BOOT_HDR - 8));
	check_msg(fixed, size);
	free(fixed);
	return 0;
}
