/* SPDX-License-Identifier: MIT */
/*
 * Transparent huge pages: the kernel's mode, and what tern does for its
 * host buffers under it (src/hmem/thp.c places them). A transfer between
 * processes (shm's process_vm_writev/readv, a NIC's registration) walks
 * and pins every page it touches: on 2 MiB pages that is 512 times fewer
 * (docs/performance.md, "Huge pages"). Here, not in src/hmem/, so that
 * the tools and the doctor can say the same as the library does.
 */
#ifndef TERN_CORE_THP_H
#define TERN_CORE_THP_H

#include <stddef.h>

#define TERN__THP_SIZE ((size_t)2 << 20) /* x86-64's and arm64's PMD size */
#define TERN__THP_PATH "/sys/kernel/mm/transparent_hugepage/enabled"

/* The bracketed word of TERN__THP_PATH ("always [madvise] never"). */
enum tern__thp {
	TERN__THP_ABSENT = 0, /* no such file: a kernel without THP */
	TERN__THP_UNKNOWN,    /* a file tern cannot read, or a new word */
	TERN__THP_NEVER,
	TERN__THP_MADVISE,
	TERN__THP_ALWAYS,
};

/* The mode a line of TERN__THP_PATH names (TERN__THP_UNKNOWN if none). */
enum tern__thp tern__thp_parse(const char *line);

/* The mode of the kernel under @root ("" or NULL: this host's). */
enum tern__thp tern__thp_mode(const char *root);

/* "absent", "unknown", "never", "madvise", "always". */
const char *tern__thp_name(enum tern__thp mode);

/* $TERN_THP: 1 (default) tern places host buffers for huge pages, 0 not. */
int tern__thp_on(void);

/*
 * What tern does for its host buffers under @mode with $TERN_THP @on,
 * in words for the tools ("tern advises its own buffers ...").
 */
const char *tern__thp_policy(enum tern__thp mode, int on);

#endif /* TERN_CORE_THP_H */
