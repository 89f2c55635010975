/* SPDX-License-Identifier: MIT */
/* The random-fill service over the TCP bootstrap (apps/fill/boot.h). */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/fill/boot.h"
#include "core/core.h"

static void boot_event(struct tern_boot_server *b,
		       const struct tern_boot_info *info, const char *text,
		       void *data)
{
	struct fill_boot *fb = data;

	(void)b;
	(void)info;
	if (fb->log == NULL)
		return;
	fprintf(fb->log, "%s%s\n", fb->log_prefix ? fb->log_prefix : "", text);
	fflush(fb->log);
}

/* A client's bootstrap connection closed: its sessions end. */
static void boot_gone(struct tern_boot_server *b,
		      const struct tern_boot_info *info, const char *text,
		      void *data)
{
	struct fill_boot *fb = data;

	boot_event(b, info, text, data);
	fill_server_peer_gone(fb->fill, info->card, info->card_len,
			      "bootstrap connection closed");
}

static int boot_admit(void *data, const void *card, size_t len,
		      const void *ticket, size_t ticket_len)
{
	struct fill_boot *fb = data;

	return fb->boot != NULL &&
	       tern_boot_server_claim(fb->boot, card, len, ticket, ticket_len);
}

void fill_boot_admit(struct fill_boot *fb, struct fill_server_opts *so,
		     int required)
{
	so->admit = boot_admit;
	so->admit_data = fb;
	so->admit_required = required;
}

int fill_boot_open(struct fill_boot *fb, struct tern_ctx *ctx,
		   struct fill_server *srv, const char *listen,
		   const char *token, int max_clients, const void *card,
		   size_t card_len, char *why, size_t whylen)
{
	struct tern_boot_server_attr ba = {
		.listen = listen,
		.token = token,
		.on_hello = boot_event,
		.on_gone = boot_gone,
		.on_refused = boot_event,
		.data = fb,
		.max_conns = (max_clients ? max_clients : 256) * 2,
		/* A welcomed client opens its session at once; one that has
		 * not within 30 s gives its slot back. */
		.claim_ms = 30000,
	};
	struct tern_boot_info mine = { .card_len = card_len };

	if (card_len > sizeof(mine.card)) {
		snprintf(why, whylen, "a card of %zu bytes", card_len);
		return -EINVAL;
	}
	memcpy(mine.card, card, card_len);
	fb->fill = srv;
	return tern_boot_server_open(ctx, &ba, &mine, &fb->boot, why, whylen);
}

void fill_boot_close(struct fill_boot *fb)
{
	tern_boot_server_close(fb->boot);
	fb->boot = NULL;
}

int fill_boot_wait(const char *addr, uint64_t deadline_ns,
		   volatile sig_atomic_t *stop)
{
	while (!*stop && tern__now_ns() < deadline_ns) {
		struct timespec ts = { 0, 200000000 };
		char why[256];
		int fd;

		if (tern_boot_dial(addr, 1000, &fd, why, sizeof(why)) == 0) {
			close(fd);
			return 0;
		}
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}
