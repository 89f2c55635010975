/* SPDX-License-Identifier: MIT */
/* Transparent huge pages: the kernel's mode, and tern's policy under it. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "thp.h"

enum tern__thp tern__thp_parse(const char *line)
{
	static const struct {
		const char *word;
		enum tern__thp mode;
	} modes[] = {
		{ "[always]", TERN__THP_ALWAYS },
		{ "[madvise]", TERN__THP_MADVISE },
		{ "[never]", TERN__THP_NEVER },
	};

	if (line == NULL)
		return TERN__THP_UNKNOWN;
	for (size_t i = 0; i < TERN_ARRAY_SIZE(modes); i++) {
		if (strstr(line, modes[i].word) != NULL)
			return modes[i].mode;
	}
	return TERN__THP_UNKNOWN;
}

enum tern__thp tern__thp_mode(const char *root)
{
	char path[PATH_MAX], line[128];
	FILE *f;
	int n;

	n = snprintf(path, sizeof(path), "%s%s", root != NULL ? root : "",
		     TERN__THP_PATH);
	if (n < 0 || (size_t)n >= sizeof(path))
		return TERN__THP_UNKNOWN;
	f = fopen(path, "re");
	if (f == NULL)
		return errno == ENOENT ? TERN__THP_ABSENT : TERN__THP_UNKNOWN;
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	return tern__thp_parse(line);
}

const char *tern__thp_name(enum tern__thp mode)
{
	switch (mode) {
	case TERN__THP_ABSENT:
		return "absent";
	case TERN__THP_NEVER:
		return "never";
	case TERN__THP_MADVISE:
		return "madvise";
	case TERN__THP_ALWAYS:
		return "always";
	default:
		return "unknown";
	}
}

int tern__thp_on(void)
{
	return tern__env_long("TERN_THP", 1, 0, 1) != 0;
}

const char *tern__thp_policy(enum tern__thp mode, int on)
{
	if (!on)
		return "TERN_THP=0: tern neither aligns nor advises its "
		       "buffers";
	switch (mode) {
	case TERN__THP_MADVISE:
		return "tern advises its own buffers: 2 MiB-aligned, "
		       "MADV_HUGEPAGE";
	case TERN__THP_ALWAYS:
		return "the kernel backs every buffer; tern aligns its own "
		       "to 2 MiB";
	case TERN__THP_NEVER:
		return "every buffer sits on 4 KiB pages, tern's too";
	case TERN__THP_ABSENT:
		return "none in this kernel";
	default:
		return "mode unreadable: tern aligns its buffers, advises "
		       "nothing";
	}
}
