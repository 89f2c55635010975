/* SPDX-License-Identifier: MIT */
/*
 * The random-fill service over the TCP bootstrap (tern/boot.h): a fill
 * server that also hands its card out at HOST:PORT, admitting by the
 * handshake's ticket and ending a client's sessions when its connection
 * closes; and a client waiting for such a server to take clients again.
 */
#ifndef FILL_BOOT_H
#define FILL_BOOT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>

#include "apps/fill/fill.h"

/* A fill server's bootstrap side. The caller sets log and log_prefix
 * (one line per bootstrap event, or log NULL), the rest is this file's. */
struct fill_boot {
	FILE *log;
	const char *log_prefix;
	struct fill_server *fill;
	struct tern_boot_server *boot; /* NULL until open, after close */
};

/* Before fill_server_open(): every CONNECT's ticket claims its handshake
 * (one not claimed in time is closed); with @required (a token server) a
 * CONNECT without a valid ticket is refused. */
void fill_boot_admit(struct fill_boot *fb, struct fill_server_opts *so,
		     int required);
/*
 * Serve the bootstrap for @srv on @listen (HOST:PORT), checking @token
 * (NULL: none), handing out @card (@ctx's); up to @max_clients clients
 * (0: 256) at once, two connections each. @return 0, or an error with
 * @why set.
 */
int fill_boot_open(struct fill_boot *fb, struct tern_ctx *ctx,
		   struct fill_server *srv, const char *listen,
		   const char *token, int max_clients, const void *card,
		   size_t card_len, char *why, size_t whylen);
/* Stop serving the bootstrap (before fill_server_close(), which may still
 * admit: it is told none is left). */
void fill_boot_close(struct fill_boot *fb);

/* Wait until @addr accepts connections again (a dial every 200 ms), until
 * @deadline_ns (tern__now_ns()) or *stop. @return 0, or -ETIMEDOUT. */
int fill_boot_wait(const char *addr, uint64_t deadline_ns,
		   volatile sig_atomic_t *stop);

#endif /* FILL_BOOT_H */
