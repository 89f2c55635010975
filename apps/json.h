/* SPDX-License-Identifier: MIT */
/* The one JSON string writer of the tools (apps/json.c). */
#ifndef APP_JSON_H
#define APP_JSON_H

#include <stddef.h>
#include <stdio.h>

/* The length of the well-formed UTF-8 sequence (RFC 3629) at @s, at most
 * @n bytes long, or 0 if there is none. */
size_t app_utf8_seq(const unsigned char *s, size_t n);
/* @s (at most @cap bytes, a fixed-size field need not end in NUL) as a
 * quoted JSON string: quotes, backslashes and control characters escaped,
 * bytes that are not UTF-8 written as U+FFFD. */
void app_json_string(FILE *f, const char *s, size_t cap);

#endif /* APP_JSON_H */
