/* SPDX-License-Identifier: MIT */
/* The tern command line: shared helpers of the subcommands. */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

int cmd_info(int argc, char **argv);
int cmd_fill(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_ping(int argc, char **argv);
int cmd_atomic(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_counters(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

/* Print "tern CMD: msg" to stderr. */
void cli_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Parse a size option ("1M", "4096"); exits with a message when invalid. */
int cli_size(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out);
/* Parse an unsigned integer option the same way. */
int cli_uint(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out);
/* --rails N (endpoints on one domain), gpu=N (the NICs tern topo maps to
 * GPU N) or DOMAIN,DOMAIN,... (one rail each): sets one of the two. */
int cli_rails(const char *cmd, const char *val, uint64_t *rails,
	      const char **domains);
/* A comma-separated list of sizes (--sizes), each 1..@max, at most @cap;
 * @return 0 with *n_p set, or -EINVAL (said why). */
int cli_sizes(const char *cmd, const char *list, uint64_t max, uint64_t *sizes,
	      size_t cap, size_t *n_p);
/* Apply --log LEVEL. */
int cli_log(const char *cmd, const char *val);

struct bench_world_opts;
/*
 * --world: open a ctx (@provider, @node), join the world @spec and run
 * the all-to-all (@ping 0) or the latency matrix (@ping 1) there; rank 0
 * prints, and writes JSON to @json when not NULL ("-": stdout).
 * @return the command's exit status.
 */
int cli_world(const char *cmd, const char *spec, const char *provider,
	      const char *node, const struct bench_world_opts *o,
	      const char *json, int ping);
/* Ctrl-C / SIGTERM set the returned flag; SIGPIPE is ignored. */
volatile sig_atomic_t *cli_catch_signals(void);
/* Write a card's hex to @path (a no-op when NULL). */
int cli_card_write(const char *cmd, const char *path, const char *hex);
/* A card from @path if given, else from the hex argument @arg. */
int cli_card_read(const char *cmd, const char *path, const char *arg,
		  uint8_t *card, size_t *len_p);

/*
 * Start this binary again (/proc/self/exe) with @args (args[0] "tern",
 * NULL-terminated) as a child that dies with this process, with a pipe from
 * it: an argument "{path}" becomes /dev/fd/N and "{fd}" becomes N, N the
 * pipe's write end in the child. @quiet sends its stdout to /dev/null;
 * @in_child (or NULL) runs in the child before the exec.
 * @return its pid with the pipe's read end in *fd_p, or -1 (errno).
 */
pid_t cli_spawn(const char *const *args, int quiet, void (*in_child)(void),
		int *fd_p);
/* One line (without its newline) from @fd, within @timeout_ms.
 * @return 0; -EPIPE at end of file; -ETIMEDOUT. */
int cli_read_line(int fd, char *buf, size_t len, int timeout_ms);
/* Wait up to @timeout_ms for @pid to exit, then SIGTERM it and wait.
 * @return its wait status. */
int cli_reap(pid_t pid, int timeout_ms);

/* --json=FILE: stdout goes to @path (made or truncated) until
 * cli_stdout_back(). @return the saved stdout; -2 for a NULL @path
 * (nothing to do); -1 (said why). */
int cli_stdout_to(const char *cmd, const char *path);
/* Stdout back from cli_stdout_to()'s @saved (< 0: nothing to do).
 * @return 0, or -EIO if the file could not be written (said). */
int cli_stdout_back(const char *cmd, int saved);

struct tern_ctx;
struct tern_ctx_attr;
/* Open a ctx and say what it runs on, or say why it could not. */
int cli_open_ctx(const char *cmd, const struct tern_ctx_attr *attr,
		 struct tern_ctx **ctx_p);
/* The same, its line on stdout tagged @tag instead of @cmd (tern fill
 * --listen's lines say "serve:", its errors "tern fill:"). */
int cli_open_ctx_as(const char *cmd, const char *tag,
		    const struct tern_ctx_attr *attr, struct tern_ctx **ctx_p);

/* ---- bootstrap over TCP ---- */
struct tern_boot_info;
struct tern_boot_server;
/* --token @opt, else $TERN_TOKEN, into *token_p: NULL when neither (or
 * an empty $TERN_TOKEN). @return 0, or -EINVAL for one longer than
 * TERN_BOOT_TOKEN_MAX (said why). */
int cli_token(const char *cmd, const char *opt, const char **token_p);
/* Is @addr (NULL: nothing to check) a HOST:PORT tern can dial or bind?
 * @what names it in the message ("peer", "--listen"). @return 0, or
 * -EINVAL (said why): a usage error, before anything runs. */
int cli_addr_check(const char *cmd, const char *what, const char *addr);
/* The node a server listening on @listen should bind over tcp (its host,
 * when it names one and the user chose none), else @node. */
/* The provider for a command that runs atomics: efa on its efa fabric
 * (sets $TERN_FABRIC unless set), "tcp" as tcp;ofi_rxm (libfabric 2.x's
 * native tcp has none); else @prov as given. */
const char *cli_atomic_provider(const char *prov);
const char *cli_listen_node(const char *provider, const char *node,
			    const char *listen, char *buf, size_t len);
#define CLI_BOOT_NOCTX 1
/* Dial @addr, open a ctx (over tcp on the address the socket left from,
 * unless attr->node says otherwise) and swap cards. @return 0 with the
 * socket in *fd_p (a liveness channel: keep it open); CLI_BOOT_NOCTX
 * when the ctx could not open; a negative errno. Errors are printed. */
int cli_boot_client(const char *cmd, const char *addr, const char *token,
		    int timeout_ms, struct tern_ctx_attr *attr,
		    struct tern_ctx **ctx_p, struct tern_boot_info *theirs,
		    int *fd_p);
/* Serve bootstrap handshakes in @ctx's loop, logging to stdout. */
int cli_boot_serve(const char *cmd, struct tern_ctx *ctx, const char *listen,
		   const char *token, struct tern_boot_server **srv_p);

#endif /* TERN_CLI_H */
