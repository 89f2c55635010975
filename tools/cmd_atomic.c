/* SPDX-License-Identifier: MIT */
/* tern atomic: the remote-atomics demo (apps/atomic.c) from the command
 * line, its client a process per worker. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/app.h"
#include "cli.h"
#include "net.h"
#include "opts.h"

/* Set by Ctrl-C (cli_catch_signals). */
static volatile sig_atomic_t *stop_flag;

static const int atomic_keys[] = {
	CLI_CLIENTS, 'r',	    'p',       CLI_NODE,
	CLI_RAILS,   CLI_LISTEN,    CLI_TOKEN, CLI_CARD_FILE,
	CLI_LOG,     CLI_WORKER_FD, 'h',       0,
};

static void atomic_usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f, "usage: tern atomic PEER [--clients N] [--reps R] "
		   "[--provider P] ...\n"
		   "       tern atomic --listen [HOST:PORT] [--token T] ...\n\n"
		   "Remote 64-bit atomics. The server exposes a counter and a "
		   "lock word.\nThe client starts N processes; each "
		   "fetch-adds the counter R times\n(16 in flight) and takes "
		   "and releases the lock with compare-and-swap\nR/10 times, "
		   "checking nobody else holds it meanwhile. The counter must\n"
		   "end exactly N*R higher, with every returned old value "
		   "unique. PEER is a\n`tern atomic --listen`: its card or "
		   "HOST:PORT.\n\n");
	cli_opts_help(p, f);
	fprintf(f, "\nDefaults: --clients 4, --reps 1000.\n");
}

/* One worker process (tern atomic --worker-fd): its run (apps/atomic.c),
 * its old values to @fd for the client to check. */
static int atomic_worker(struct app_atomic_client *c, uint64_t reps, int fd)
{
	uint64_t *old = calloc(reps, sizeof(*old));
	int err;

	if (old == NULL)
		return 1;
	err = app_atomic_work(c, reps, stop_flag, old);
	if (err != 0 && err != -EINTR)
		cli_err("atomic", "%s",
			c->why[0] ? c->why : tern_strerror(err));
	if (err == 0 && write(fd, old, reps * sizeof(*old)) !=
				(ssize_t)(reps * sizeof(*old)))
		err = -EIO;
	free(old);
	return err == 0 ? 0 : 1;
}

/* One client run: the server's page, the worker processes and the old
 * values they sent back. */
struct atomic_run {
	struct app_atomic_client c;
	char cardhex[2 * TERN_CARD_MAX + 1]; /* the server's card */
	uint64_t n, reps;		     /* workers, fetch-adds each */
	uint64_t before;		     /* the counter before them */
	uint64_t *all;			     /* n * reps old values */
	pid_t *pids;
	int *fds;
};

/* The ctx, the server's card (by HOST:PORT, with the bootstrap socket in
 * *boot_fd, or by card) and its page. @return 0, or the exit status
 * (said why). */
static int atomic_connect(const struct net_opts *o, const char *peer,
			  struct atomic_run *r, int *boot_fd)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	size_t card_len;
	char why[256];

	if (peer != NULL && o->card_file == NULL && tern_boot_is_addr(peer)) {
		if (net_boot(o, peer, 0, &ctx, card, &card_len, boot_fd) != 0)
			return 1;
	} else {
		if (cli_card_read(o->cmd, o->card_file, peer, card,
				  &card_len) != 0)
			return 2;
		if (net_open_ctx(o, 0, &ctx) != 0)
			return 1;
	}
	tern_hex_encode(card, card_len, r->cardhex, sizeof(r->cardhex));
	if (app_atomic_hello(ctx, card, card_len, &r->c.peer, &r->c.desc, why,
			     sizeof(why)) != 0) {
		cli_err("atomic", "%s", why);
		tern_ctx_close(ctx);
		return 1;
	}
	r->c.ctx = ctx;
	return 0;
}

/* Start the workers: this binary again, each a process of its own,
 * exec'd before touching the fabric. @return 0, or -1 (said why). */
static int atomic_spawn(const struct net_opts *o, struct atomic_run *r)
{
	char reps_s[24];

	snprintf(reps_s, sizeof(reps_s), "%" PRIu64, r->reps);
	for (uint64_t i = 0; i < r->n; i++) {
		const char *args[] = { "tern",
				       "atomic",
				       r->cardhex,
				       "--provider",
				       o->provider ? o->provider : "auto",
				       "--rails",
				       o->rails_arg ? o->rails_arg : "1",
				       "--reps",
				       reps_s,
				       "--worker-fd",
				       "{fd}",
				       o->node ? "--node" : NULL,
				       o->node,
				       NULL };

		r->pids[i] = cli_spawn(args, 0, NULL, &r->fds[i]);
		if (r->pids[i] < 0) {
			cli_err("atomic", "could not start a worker: %s",
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Worker @i's old values into its part of r->all, and its exit. @return
 * 0, or 1 when it sent fewer or failed. */
static int atomic_collect_one(struct atomic_run *r, uint64_t i)
{
	size_t want = r->reps * sizeof(*r->all), got = 0;
	int st;

	while (got < want) {
		ssize_t n = read(r->fds[i], (char *)&r->all[i * r->reps] + got,
				 want - got);

		if (n < 0 && errno == EINTR && !*stop_flag)
			continue;
		if (n < 0 && errno == EINTR) {
			/* Ctrl-C: a terminal sends it to the workers too; a
			 * kill of this process alone does not. They stop and
			 * drain. */
			for (uint64_t j = 0; j < r->n; j++)
				kill(r->pids[j], SIGINT);
			continue;
		}
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(r->fds[i]);
	while (waitpid(r->pids[i], &st, 0) < 0 && errno == EINTR)
		;
	if (*stop_flag)
		return 1;
	if (got != want || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		cli_err("atomic", "process %" PRIu64 " failed", i);
		return 1;
	}
	return 0;
}

/* After the workers (@failed: one of them did): the counter now, every
 * old value once, and the verdict. @return 0 when all is right. */
static int atomic_report(struct atomic_run *r, int failed)
{
	struct app_atomic_client *c = &r->c;
	uint64_t total = r->n * r->reps, after;
	char why[256];

	after = app_atomic_op(c, 0, APP_ATOMIC_COUNTER, 0, 0);
	if (c->err != 0)
		cli_err("atomic", "%s", c->why);
	if (!failed && c->err == 0 &&
	    app_atomic_check(r->all, total, r->before, why, sizeof(why)) != 0) {
		cli_err("atomic", "%s", why);
		failed = 1;
	}
	printf("atomic: counter %" PRIu64 " -> %" PRIu64 " (+%" PRIu64
	       ", expected +%" PRIu64 " = %" PRIu64 ")\n",
	       r->before, after, after - r->before, total, total);
	if (failed || c->err != 0 || after - r->before != total)
		return 1;
	printf("atomic: OK: every old value unique, lock taken %" PRIu64
	       " times with never two holders\n",
	       r->n * (r->reps / 10 ? r->reps / 10 : 1));
	return 0;
}

/* The workers' run against the server's page: start them, collect them,
 * check what they did. @return 0, or 1 (said why). */
static int atomic_workers(const struct net_opts *o, struct atomic_run *r)
{
	int failed = 0;

	r->all = calloc(r->n * r->reps, sizeof(*r->all));
	r->pids = calloc(r->n, sizeof(*r->pids));
	r->fds = calloc(r->n, sizeof(*r->fds));
	if (r->all == NULL || r->pids == NULL || r->fds == NULL)
		return 1;
	printf("atomic: counter is %" PRIu64 "; starting %" PRIu64
	       " processes x %" PRIu64 " fetch-adds\n",
	       r->before, r->n, r->reps);
	fflush(stdout);
	if (atomic_spawn(o, r) != 0)
		return 1;
	for (uint64_t i = 0; i < r->n; i++)
		failed |= atomic_collect_one(r, i);
	if (*stop_flag) {
		cli_err("atomic", "interrupted: the workers stopped; nothing "
				  "was checked");
		return 1;
	}
	return atomic_report(r, failed);
}

/* tern atomic PEER: @n worker processes, @reps fetch-adds each. */
static int atomic_client(const struct net_opts *o, const char *peer, uint64_t n,
			 uint64_t reps)
{
	struct atomic_run r = { .n = n, .reps = reps };
	int ret, boot_fd = -1;

	ret = atomic_connect(o, peer, &r, &boot_fd);
	if (ret != 0)
		return ret;
	r.before = app_atomic_op(&r.c, 0, APP_ATOMIC_COUNTER, 0, 0);
	if (r.c.err != 0)
		cli_err("atomic", "%s", r.c.why);
	else
		ret = atomic_workers(o, &r);
	free(r.all);
	free(r.pids);
	free(r.fds);
	app_atomic_bye(r.c.ctx, r.c.peer);
	tern_peer_remove(r.c.peer);
	tern_ctx_close(r.c.ctx);
	if (boot_fd >= 0)
		close(boot_fd);
	return ret != 0 || r.c.err != 0 ? 1 : 0;
}

/* tern atomic --listen: serve the counter and the lock until Ctrl-C. */
static int atomic_serve(struct net_opts *o)
{
	struct tern_boot_server *boot = NULL;
	struct tern_ctx *ctx;
	uint64_t final = 0;
	char lhost[64];
	int ret;

	o->node = cli_listen_node(o->provider, o->node, o->listen, lhost,
				  sizeof(lhost));
	if (net_open_ctx(o, 0, &ctx) != 0)
		return 1;
	ret = net_announce(o, ctx);
	if (ret == 0 && o->listen != NULL)
		ret = cli_boot_serve("atomic", ctx, o->listen, o->token, &boot);
	if (ret == 0) {
		printf("serving atomics on a counter and a lock word; Ctrl-C "
		       "to stop\n");
		fflush(stdout);
		ret = app_atomic_server(ctx, stop_flag, stdout, &final);
	}
	tern_boot_server_close(boot);
	tern_ctx_close(ctx);
	return ret == 0 ? 0 : 1;
}

/* tern atomic --worker-fd FD (started by the client): one worker. */
static int atomic_worker_main(const struct net_opts *o, const char *peer,
			      uint64_t reps, int fd)
{
	struct tern_ctx_attr attr = { .provider = o->provider,
				      .node = o->node,
				      .rails = (unsigned int)o->rails,
				      .domains = o->domains };
	struct app_atomic_client ac = { 0 };
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	size_t card_len;
	char why[256];
	int ret;

	if (cli_card_read(o->cmd, o->card_file, peer, card, &card_len) != 0)
		return 2;
	if (tern_ctx_open(&attr, &ctx) != 0)
		return 1;
	ret = app_atomic_hello(ctx, card, card_len, &ac.peer, &ac.desc, why,
			       sizeof(why));
	if (ret == 0) {
		ac.ctx = ctx;
		ret = atomic_worker(&ac, reps, fd);
		app_atomic_bye(ctx, ac.peer);
		tern_peer_remove(ac.peer);
	} else {
		cli_err("atomic", "%s", why);
	}
	tern_ctx_close(ctx);
	return ret == 0 ? 0 : 1;
}

struct atomic_cli {
	struct net_opts o;
	uint64_t clients, reps, worker_fd;
	int worker; /* --worker-fd: be one */
};

static int atomic_option(void *data, int c, const char *arg)
{
	struct atomic_cli *s = data;
	int ret = net_option(&s->o, c, arg);

	if (ret != 0)
		return ret < 0 ? ret : 0;
	if (c == CLI_CLIENTS)
		ret = cli_uint("atomic", "--clients", arg, 1, 256, &s->clients);
	else if (c == 'r')
		ret = cli_uint("atomic", "--reps", arg, 1, 10000000, &s->reps);
	else if (c == CLI_WORKER_FD)
		ret = cli_uint("atomic", "--worker-fd", arg, 3, 1 << 20,
			       &s->worker_fd);
	s->worker |= c == CLI_WORKER_FD;
	return ret;
}

static const struct cli_cmd atomic_cmd = {
	.name = "atomic",
	.keys = atomic_keys,
	.usage = atomic_usage,
	.option = atomic_option,
	.args = CLI_ARG_LATER, /* net_args() */
};

int cmd_atomic(int argc, char **argv)
{
	struct atomic_cli s = {
		.o = { .cmd = "atomic", .rails = 1 },
		.clients = 4,
		.reps = 1000,
	};
	const char *peer;
	int ret;

	ret = cli_parse(&atomic_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	if (net_args(&s.o, argc, argv, &peer) != 0)
		return 2;
	s.o.provider = cli_atomic_provider(s.o.provider);
	stop_flag = cli_catch_signals();
	if (s.o.server)
		return atomic_serve(&s.o);
	if (peer == NULL && s.o.card_file == NULL) {
		cli_err("atomic",
			"no peer: give a `tern atomic --listen`'s card "
			"or HOST:PORT (or --card-file)");
		return 2;
	}
	if (s.worker)
		return atomic_worker_main(&s.o, peer, s.reps, (int)s.worker_fd);
	return atomic_client(&s.o, peer, s.clients, s.reps);
}
