/* SPDX-License-Identifier: MIT */
/*
 * What tern ping and tern atomic share (tools/net.c): the options that
 * say where to run and whom to reach, the peer argument, the ctx they
 * open and the card a server prints.
 */
#ifndef TERN_CLI_NET_H
#define TERN_CLI_NET_H

#include <stddef.h>
#include <stdint.h>

struct tern_ctx;

struct net_opts {
	const char *cmd;
	const char *provider;
	const char *node;
	const char *card_file;
	const char *rails_arg; /* --rails as given, for a local peer */
	uint64_t rails;
	const char *domains;
	const char *listen; /* --listen HOST:PORT */
	const char *token;
	int server; /* --listen */
};

/* An option ping and atomic share. @return 1 if @c was one, 0 if not,
 * -EINVAL if its value is wrong (said why). */
int net_option(struct net_opts *o, int c, const char *arg);
/* What is left after the options: at most one PEER (card hex or
 * HOST:PORT); "serve" is the old spelling of --listen. @return 0 or 2. */
int net_args(struct net_opts *o, int argc, char **argv, const char **peer_p);
/* Open the ctx the options name, with @flags. */
int net_open_ctx(const struct net_opts *o, uint64_t flags,
		 struct tern_ctx **ctx_p);
/* Dial the HOST:PORT @addr, open the ctx (@flags) and swap cards: the
 * server's into @card. @return 0 with the bootstrap socket in *fd_p, or
 * 1 (said why). */
int net_boot(const struct net_opts *o, const char *addr, uint64_t flags,
	     struct tern_ctx **ctx_p, uint8_t *card, size_t *len_p, int *fd_p);
/* Print the card and, with --card-file, write it there too. */
int net_announce(const struct net_opts *o, struct tern_ctx *ctx);

#endif /* TERN_CLI_NET_H */
