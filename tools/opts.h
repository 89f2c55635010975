/* SPDX-License-Identifier: MIT */
/*
 * The tern command's one option table (tools/opts.c). Every option of every
 * subcommand is a row of it: one long name, at most one letter, one
 * meaning. A subcommand lists the rows it takes; getopt's tables and the
 * options part of its --help are made from them, so a letter cannot mean
 * two things in two subcommands. docs/cli.md is the same table in prose.
 */
#ifndef TERN_CLI_OPTS_H
#define TERN_CLI_OPTS_H

#include <getopt.h>
#include <stdio.h>

/* Keys of the options without a letter (those with one use it). */
enum cli_key {
	CLI_NODE = 256,
	CLI_RAILS,
	CLI_PIN,
	CLI_LISTEN,
	CLI_PEER,
	CLI_TOKEN,
	CLI_CARD_FILE,
	CLI_ONCE,
	CLI_LOG,
	CLI_CSV,
	CLI_PLOT,
	CLI_WARMUP,
	CLI_VERIFY,
	CLI_MEM,
	CLI_PEER_MEM,
	CLI_WAIT_FD,
	CLI_PAGE_SIZE,
	CLI_PAGES,
	CLI_TIMEOUT,
	CLI_FILL_TIMEOUT,
	CLI_IDLE_TIMEOUT,
	CLI_MAX_CLIENTS,
	CLI_MAX_PER_CLIENT,
	CLI_PARALLEL,
	CLI_RECONNECT,
	CLI_CLIENTS,
	CLI_WORKER_FD,
	CLI_FABRIC,
	CLI_INTERVAL,
	CLI_ROOT,
	CLI_DEVICE,
	CLI_REGION_SIZE,
	CLI_WORLD,
	CLI_IMPLICIT,
	CLI_CHURN,
	CLI_BATCH,
};

struct cli_opt {
	const char *name; /* long name, without "--" */
	int key;	  /* its letter, or a CLI_* key */
	int has_arg;	 /* no_argument, required_argument, optional_argument */
	const char *arg; /* what the argument is, for --help */
	const char *help; /* its one meaning; NULL: internal, not shown */
};

#define CLI_MAX_OPTS 40

/* One subcommand's parser, made by cli_opts_init() from its keys. */
struct cli_parser {
	const char *cmd;
	const int *keys; /* 0-terminated: xkeys */
	int xkeys[CLI_MAX_OPTS + 2];
	struct option lo[CLI_MAX_OPTS + 1];
	char shorts[2 * CLI_MAX_OPTS + 2];
};

/* The row of @key, or NULL. */
const struct cli_opt *cli_opt_find(int key);
/* Build @p for subcommand @cmd taking the options @keys (0-terminated). */
void cli_opts_init(struct cli_parser *p, const char *cmd, const int *keys);
/*
 * getopt_long() over @p: the next option's key, -1 at the end, or '?'
 * after saying what is wrong: an option this subcommand does not take
 * (named, with the subcommand that does, or its new spelling when it is
 * an old one), or a missing argument. An optional argument may follow
 * as its own word only where it is a HOST:PORT (--listen); a --json
 * followed by a word that looks like a file (a '.' or '/', no ':') is
 * refused (write --json=FILE), so that a file is never taken for the peer.
 */
int cli_getopt(struct cli_parser *p, int argc, char **argv);

/* cli_cmd.args: what may follow the options. */
#define CLI_ARG_PEER	 1u /* one word: the peer, into *peer_p */
#define CLI_ARG_SEE_HELP 2u /* a word too many points at --help */
#define CLI_ARG_LATER	 4u /* the command checks them: cli_args() */

/* A subcommand's command line, as cli_parse() reads it. */
struct cli_cmd {
	const char *name;
	const int *keys; /* its options (0-terminated) */
	void (*usage)(const struct cli_parser *p, FILE *f);
	/* One option of @key into @data: 0, or a negative errno once it
	 * has said why. */
	int (*option)(void *data, int key, const char *arg);
	unsigned int args; /* CLI_ARG_* */
};

/* cli_parse(): the command runs. */
#define CLI_GO (-1)

/*
 * Parse a subcommand's command line, the same way for every one: each
 * option cli_getopt() returns goes to @cmd's option() with @data; --help
 * prints its usage on stdout; then the words after the options, as
 * cli_args() takes them (unless CLI_ARG_LATER).
 * @return CLI_GO, with optind at the first word after the options; else
 * the command's exit status: 0 after --help, 2 after a usage error (said).
 */
int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, void *data,
	      const char **peer_p);
/*
 * The words after the options: with CLI_ARG_PEER the first is the peer,
 * into *peer_p (NULL when there is none); any other is refused: "tern
 * CMD: unexpected argument 'WORD'", then " (see tern CMD --help)" under
 * CLI_ARG_SEE_HELP. @return 0, or 2 (the exit status) after saying why.
 */
int cli_args(const char *cmd, int argc, char **argv, unsigned int args,
	     const char **peer_p);

/* The options part of @p's --help, from the table. */
void cli_opts_help(const struct cli_parser *p, FILE *f);
/* Every TERN_* variable tern reads, one per line (tern --help). */
void cli_env_help(FILE *f);

#endif /* TERN_CLI_OPTS_H */
