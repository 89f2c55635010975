/* SPDX-License-Identifier: MIT */
/* What tern ping and tern atomic share (tools/net.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <tern/tern.h>

#include "cli.h"
#include "net.h"
#include "opts.h"

int net_option(struct net_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'p':
		o->provider = strcmp(arg, "auto") ? arg : NULL;
		return 1;
	case CLI_NODE:
		o->node = arg;
		return 1;
	case CLI_CARD_FILE:
		o->card_file = arg;
		return 1;
	case CLI_RAILS:
		o->rails_arg = arg;
		return cli_rails(o->cmd, arg, &o->rails, &o->domains) ? -EINVAL
								      : 1;
	case CLI_LISTEN:
		o->server = 1;
		o->listen = arg;
		return 1;
	case CLI_TOKEN:
		o->token = arg;
		return 1;
	case CLI_LOG:
		return cli_log(o->cmd, arg) ? -EINVAL : 1;
	}
	return 0;
}

int net_args(struct net_opts *o, int argc, char **argv, const char **peer_p)
{
	const char *peer;

	if (optind < argc && strcmp(argv[optind], "serve") == 0) {
		cli_err(o->cmd,
			"'tern %s serve' is now 'tern %s --listen "
			"[HOST:PORT]'",
			o->cmd, o->cmd);
		return 2;
	}
	if (cli_args(o->cmd, argc, argv, CLI_ARG_PEER, peer_p) != 0)
		return 2;
	peer = *peer_p;
	if (o->server && peer != NULL) {
		cli_err(o->cmd,
			"--listen (be the server) and a peer '%s' "
			"exclude each other",
			peer);
		return 2;
	}
	if (o->token != NULL && !(o->server && o->listen != NULL) &&
	    !(peer != NULL && tern_boot_is_addr(peer))) {
		cli_err(o->cmd, "--token needs --listen HOST:PORT or a "
				"HOST:PORT peer (it is checked in the TCP "
				"handshake)");
		return 2;
	}
	if (cli_addr_check(o->cmd, "--listen", o->listen) != 0 ||
	    (peer != NULL && o->card_file == NULL && tern_boot_is_addr(peer) &&
	     cli_addr_check(o->cmd, "peer", peer) != 0))
		return 2;
	return cli_token(o->cmd, o->token, &o->token) != 0 ? 2 : 0;
}

static void net_attr(const struct net_opts *o, uint64_t flags,
		     struct tern_ctx_attr *attr)
{
	*attr = (struct tern_ctx_attr){
		.provider = o->provider,
		.node = o->node,
		.rails = (unsigned int)o->rails,
		.domains = o->domains,
		.flags = flags,
	};
}

int net_open_ctx(const struct net_opts *o, uint64_t flags,
		 struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr;

	net_attr(o, flags, &attr);
	return cli_open_ctx(o->cmd, &attr, ctx_p);
}

int net_boot(const struct net_opts *o, const char *addr, uint64_t flags,
	     struct tern_ctx **ctx_p, uint8_t *card, size_t *len_p, int *fd_p)
{
	struct tern_boot_info theirs;
	struct tern_ctx_attr attr;

	net_attr(o, flags, &attr);
	if (cli_boot_client(o->cmd, addr, o->token, 10000, &attr, ctx_p,
			    &theirs, fd_p) != 0)
		return 1;
	memcpy(card, theirs.card, theirs.card_len);
	*len_p = theirs.card_len;
	return 0;
}

int net_announce(const struct net_opts *o, struct tern_ctx *ctx)
{
	char hex[2 * TERN_CARD_MAX + 1];
	uint8_t card[TERN_CARD_MAX];
	ssize_t len = tern_ctx_card(ctx, card, sizeof(card));

	tern_hex_encode(card, (size_t)len, hex, sizeof(hex));
	/* A ';' would end the command in a shell: quote it. */
	printf("card: %s\nrun:  tern %s %s --provider %s%s%s\n", hex, o->cmd,
	       hex, o->provider && strchr(o->provider, ';') ? "'" : "",
	       o->provider ? o->provider : "<same>",
	       o->provider && strchr(o->provider, ';') ? "'" : "");
	fflush(stdout);
	return cli_card_write(o->cmd, o->card_file, hex);
}
