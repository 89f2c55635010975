/* SPDX-License-Identifier: MIT */
/* JSON strings for every tool that writes JSON (tern info, topo, bench). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "apps/json.h"

/*
 * The length of the well-formed UTF-8 sequence (RFC 3629) at @s, at most
 * @n bytes long, or 0 if there is none.
 */
size_t app_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

void app_json_string(FILE *f, const char *s, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, cap);

	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t len = app_utf8_seq(u + i, n - i);

		if (len == 0) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (len > 1) {
			fwrite(u + i, 1, len, f);
			i += len;
			continue;
		}
		switch (u[i]) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (u[i] < 0x20 || u[i] == 0x7f)
				fprintf(f, "\\u%04x", u[i]);
			else
				fputc(u[i], f);
		}
		i++;
	}
	fputc('"', f);
}
