/* SPDX-License-Identifier: MIT */
/* Logging to stderr, level from TERN_LOG; environment parameters; clock. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "core.h"

/*
 * The only process-wide state: the log threshold, like libfabric's
 * log level variable. -1 means "not read from the environment yet".
 */
static int log_level = -1;

int tern_log_parse_level(const char *s)
{
	static const char *const names[] = { "none", "warn", "info", "debug" };

	if (s == NULL)
		return -EINVAL;
	for (int i = 0; i < (int)TERN_ARRAY_SIZE(names); i++) {
		if (strcasecmp(s, names[i]) == 0)
			return i;
	}
	if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
		return s[0] - '0';
	return -EINVAL;
}

enum tern_log_level tern_log_get_level(void)
{
	if (log_level < 0) {
		const char *env = tern__env_str("TERN_LOG");
		int l = env != NULL ? tern_log_parse_level(env) : -EINVAL;

		log_level = l < 0 ? TERN_LOG_WARN : l;
		/* A bad value is named once, and the default kept (as
		 * TERN_FI_API's). The level is set first: this logs. */
		if (env != NULL && l < 0)
			tern__warn("TERN_LOG=%.64s: not a log level (none, "
				   "warn, info, debug, or 0 to 3); using warn",
				   env);
	}
	return (enum tern_log_level)log_level;
}

void tern_log_set_level(enum tern_log_level level)
{
	log_level = level;
}

int tern__log_enabled(enum tern_log_level level)
{
	return level != TERN_LOG_NONE &&
	       (int)level <= (int)tern_log_get_level();
}

void tern__log(enum tern_log_level level, const char *fmt, ...)
{
	static const char *const tag[] = { "", "warn", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	if (!tern__log_enabled(level))
		return;
	n = snprintf(line, sizeof(line), "tern %s: ", tag[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}

const char *tern__env_str(const char *name)
{
	const char *v = getenv(name);

	return (v != NULL && v[0] != '\0') ? v : NULL;
}

long tern__env_long(const char *name, long def, long min, long max)
{
	const char *v = tern__env_str(name);
	char *end;
	long l;

	if (v == NULL)
		return def;
	errno = 0;
	l = strtol(v, &end, 0);
	if (errno != 0 || *end != '\0' || l < min || l > max) {
		tern__warn("ignoring %s=%s (expected an integer in [%ld, %ld])",
			   name, v, min, max);
		return def;
	}
	return l;
}

uint64_t tern__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

const char *tern_version(void)
{
	return TERN_VERSION_STRING;
}
