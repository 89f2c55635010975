/* SPDX-License-Identifier: MIT */
/* Helpers every subcommand shares: errors, option values, signals, cards. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "cli.h"

/* The one piece of process state the tools keep: Ctrl-C was pressed. */
static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

volatile sig_atomic_t *cli_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return &stop_flag;
}

void cli_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tern %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_size(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (tern_parse_size(val, &v) != 0 || v < min || v > max) {
		cli_err(cmd,
			"%s '%s': expected a size from %" PRIu64 " to %" PRIu64
			" bytes (suffixes K, M, G)",
			opt, val, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cli_uint(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(val, &end, 0);
	if (val[0] == '-' || val[0] == '\0' || *end != '\0' || errno != 0 ||
	    v < min || v > max) {
		cli_err(cmd,
			"%s '%s': expected an integer from %" PRIu64
			" to %" PRIu64,
			opt, val, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cli_log(const char *cmd, const char *val)
{
	int l = tern_log_parse_level(val);

	if (l < 0) {
		cli_err(cmd, "--log '%s': expected none, warn, info or debug",
			val);
		return -EINVAL;
	}
	tern_log_set_level((enum tern_log_level)l);
	return 0;
}

int cli_card_write(const char *cmd, const char *path, const char *hex)
{
	FILE *f;

	if (path == NULL)
		return 0;
	f = fopen(path, "w");
	if (f == NULL || fprintf(f, "%s\n", hex) < 0 || fclose(f) != 0) {
		cli_err(cmd, "writing the card to %s: %s", path,
			strerror(errno));
		return -EIO;
	}
	return 0;
}

int cli_card_read(const char *cmd, const char *path, const char *arg,
		  uint8_t *card, size_t *len_p)
{
	char buf[2 * TERN_CARD_MAX + 2];
	const char *hex = arg;
	ssize_t n;

	if (path != NULL) {
		FILE *f = fopen(path, "r");

		if (f == NULL || fgets(buf, sizeof(buf), f) == NULL) {
			cli_err(cmd, "reading the card from %s: %s", path,
				f ? "empty file" : strerror(errno));
			if (f != NULL)
				fclose(f);
			return -EINVAL;
		}
		fclose(f);
		buf[strcspn(buf, "\r\n")] = '\0';
		hex = buf;
	}
	if (hex == NULL) {
		cli_err(cmd,
			"no server card: give it as an argument or with "
			"--card-file (see tern %s --help)",
			cmd);
		return -EINVAL;
	}
	n = tern_hex_decode(hex, card, TERN_CARD_MAX);
	if (n <= 0) {
		cli_err(cmd,
			"the card must be the hex string the server "
			"printed (%s)",
			n == -ENOSPC ? "too long" : "not hex");
		return -EINVAL;
	}
	*len_p = (size_t)n;
	return 0;
}

int cli_open_ctx(const char *cmd, const struct tern_ctx_attr *attr,
		 struct tern_ctx **ctx_p)
{
	struct tern_ctx_info ci;
	int ret = tern_ctx_open(attr, ctx_p);

	if (ret != 0) {
		cli_err(cmd, "cannot open a ctx on %s: %s%s",
			attr->provider ? attr->provider : "any provider",
			tern_strerror(ret),
			ret == -TERN_ENOPROV ? " (see `tern info`)" : "");
		return ret;
	}
	tern_ctx_query(*ctx_p, &ci);
	printf("%s: provider %s, fabric %s, domain %s, %u rail(s), "
	       "libfabric %s\n",
	       cmd, ci.provider, ci.fabric, ci.domain, ci.rails,
	       tern_fabric_version());
	return 0;
}
