/* SPDX-License-Identifier: MIT */
/*
 * The public attr structs' field_mask (docs/api.md, "Attribute structs"):
 * each struct described as a table of its fields, so that one resolver
 * reads exactly the fields a caller marked and one writer sets defaults.
 * Every such struct starts with its uint64_t field_mask.
 */
#ifndef TERN_CORE_ATTR_H
#define TERN_CORE_ATTR_H

#include <stddef.h>
#include <stdint.h>

/* One field: its field_mask bit, where it lies, its name for the log. */
struct tern__attr_field {
	uint64_t bit;
	size_t off;
	size_t len;
	const char *name;
};

/* One attr struct. */
struct tern__attr_kind {
	const char *name; /* "tern_ctx_attr" */
	size_t size;
	const void *defaults; /* the whole struct, every field at its default */
	const struct tern__attr_field *fields;
	size_t nfields;
	/* The fields a field_mask of 0 stands for: those of tern 0.1 (the
	 * TERN_0 layout), frozen; a field added later never joins them. */
	uint64_t v0;
};

#define TERN__ATTR_FIELD(type, bit, member)                                 \
	{                                                                   \
		(bit), offsetof(type, member), sizeof(((type *)0)->member), \
			#member                                             \
	}

/* The kind of `struct @type`: its defaults, its table of fields, the
 * fields of 0.1 (frozen). */
#define TERN__ATTR_KIND(type, dflt, table, v0mask)                            \
	{                                                                     \
		.name = #type, .size = sizeof(struct type),                   \
		.defaults = &(dflt), .fields = (table),                       \
		.nfields = sizeof(table) / sizeof((table)[0]), .v0 = (v0mask) \
	}

/*
 * What the library uses of @in (a caller's struct of kind @k, or NULL):
 * into @out (a whole struct) the defaults, then each field of @in whose
 * bit its field_mask sets (0: those of k->v0); no other byte of @in is
 * read. out->field_mask says every field. @fn names the caller's call in
 * the log. @return 0, or -EINVAL for a bit @k does not know (logged).
 */
int tern__attr_resolve(const struct tern__attr_kind *k, const char *fn,
		       const void *in, void *out);

/* tern_*_attr_defaults(): the fields of @fields at their defaults, and
 * field_mask = @fields. @return 0, or -EINVAL (NULL, an unknown bit). */
int tern__attr_defaults(const struct tern__attr_kind *k, void *attr,
			uint64_t fields);

#endif /* TERN_CORE_ATTR_H */
