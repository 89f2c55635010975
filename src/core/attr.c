/* SPDX-License-Identifier: MIT */
/* The attr structs' field_mask: reading what a caller marked, writing
 * defaults (core/attr.h). */
#include "attr.h"

#include <errno.h>
#include <string.h>

#include "core.h"

static uint64_t known_bits(const struct tern__attr_kind *k)
{
	uint64_t all = 0;

	for (size_t i = 0; i < k->nfields; i++)
		all |= k->fields[i].bit;
	return all;
}

/* The lowest bit of @mask that @k does not know, or 0. */
static uint64_t unknown_bit(const struct tern__attr_kind *k, uint64_t mask)
{
	uint64_t extra = mask & ~known_bits(k);

	return extra & (~extra + 1);
}

int tern__attr_resolve(const struct tern__attr_kind *k, const char *fn,
		       const void *in, void *out)
{
	uint64_t mask, bad;

	memcpy(out, k->defaults, k->size);
	if (in == NULL)
		return 0;
	memcpy(&mask, in, sizeof(mask));
	bad = unknown_bit(k, mask);
	if (bad != 0) {
		tern__warn("%s: %s.field_mask sets bit %d (0x%llx), which "
			   "this libtern (%s) does not know: refused",
			   fn, k->name, __builtin_ctzll(bad),
			   (unsigned long long)bad, TERN_VERSION_STRING);
		return -EINVAL;
	}
	if (mask == 0)
		mask = k->v0;
	for (size_t i = 0; i < k->nfields; i++) {
		const struct tern__attr_field *f = &k->fields[i];

		if ((mask & f->bit) != 0)
			memcpy((char *)out + f->off, (const char *)in + f->off,
			       f->len);
	}
	mask = known_bits(k);
	memcpy(out, &mask, sizeof(mask));
	return 0;
}

int tern__attr_defaults(const struct tern__attr_kind *k, void *attr,
			uint64_t fields)
{
	if (attr == NULL)
		return -EINVAL;
	for (size_t i = 0; i < k->nfields; i++) {
		const struct tern__attr_field *f = &k->fields[i];

		if ((fields & f->bit) != 0)
			memcpy((char *)attr + f->off,
			       (const char *)k->defaults + f->off, f->len);
	}
	memcpy(attr, &fields, sizeof(fields));
	return unknown_bit(k, fields) != 0 ? -EINVAL : 0;
}
