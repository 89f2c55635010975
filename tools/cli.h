/* SPDX-License-Identifier: MIT */
/* The tern command line: shared helpers of the subcommands. */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_fill(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_atomic(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_topo(int argc, char **argv);

/* Print "tern CMD: msg" to stderr. */
void cli_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Parse a size option ("1M", "4096"); exits with a message when invalid. */
int cli_size(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out);
/* Parse an unsigned integer option the same way. */
int cli_uint(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out);
/* Apply --log LEVEL. */
int cli_log(const char *cmd, const char *val);
/* Ctrl-C / SIGTERM set the returned flag; SIGPIPE is ignored. */
volatile sig_atomic_t *cli_catch_signals(void);
/* Write a card's hex to @path (a no-op when NULL). */
int cli_card_write(const char *cmd, const char *path, const char *hex);
/* A card from @path if given, else from the hex argument @arg. */
int cli_card_read(const char *cmd, const char *path, const char *arg,
		  uint8_t *card, size_t *len_p);

struct tern_ctx;
struct tern_ctx_attr;
/* Open a ctx and say what it runs on, or say why it could not. */
int cli_open_ctx(const char *cmd, const struct tern_ctx_attr *attr,
		 struct tern_ctx **ctx_p);

#endif /* TERN_CLI_H */
