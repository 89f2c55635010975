/* SPDX-License-Identifier: MIT */
/* Hex codec and size parsing. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <tern/util.h>

#include "core.h"

ssize_t tern_hex_encode(const void *buf, size_t len, char *out, size_t outlen)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *p = buf;

	if (outlen < 2 * len + 1)
		return -ENOSPC;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 0xf];
	}
	out[2 * len] = '\0';
	return (ssize_t)(2 * len);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t tern_hex_decode(const char *hex, void *out, size_t outlen)
{
	size_t n = strlen(hex);
	uint8_t *p = out;

	if (n % 2 != 0)
		return -EINVAL;
	if (n / 2 > outlen)
		return -ENOSPC;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		p[i] = (uint8_t)(hi << 4 | lo);
	}
	return (ssize_t)(n / 2);
}

int tern_parse_size(const char *s, uint64_t *val_p)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 'b':
	case 'B':
		break;
	default:
		return -EINVAL;
	}
	if (shift != 0 && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end != '\0')
		return -EINVAL;
	if (shift != 0 && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*val_p = (uint64_t)v << shift;
	return 0;
}

const char *tern_format_size(uint64_t bytes, char *buf, size_t buflen)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (u + 1 < TERN_ARRAY_SIZE(unit) && bytes >= 1024 &&
	       bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, buflen, "%" PRIu64 " %s", bytes, unit[u]);
	return buf;
}

struct kept {
	void *p;
	struct kept *next;
};

static struct kept *kept_list;

void tern__keep(void *p)
{
	struct kept *k;

	if (p == NULL || (k = malloc(sizeof(*k))) == NULL)
		return;
	k->p = p;
	k->next = __atomic_load_n(&kept_list, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&kept_list, &k->next, k, 1,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}
