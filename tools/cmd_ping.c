/* SPDX-License-Identifier: MIT */
/* tern ping / tern atomic: latency ping-pong and a remote-atomics demo. */
#include <errno.h>
#include <fcntl.h>
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
#include "bench/bench_world.h"
#include "cli.h"
#include "opts.h"

/* Set by Ctrl-C (cli_catch_signals). */
static volatile sig_atomic_t *stop_flag;

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
static int net_option(struct net_opts *o, int c, const char *arg)
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

/* What is left after the options: at most one PEER (card hex or
 * HOST:PORT); "serve" is the old spelling of --listen. @return 0 or 2. */
static int net_args(struct net_opts *o, int argc, char **argv,
		    const char **peer_p)
{
	*peer_p = NULL;
	if (optind < argc && strcmp(argv[optind], "serve") == 0) {
		cli_err(o->cmd,
			"'tern %s serve' is now 'tern %s --listen "
			"[HOST:PORT]'",
			o->cmd, o->cmd);
		return 2;
	}
	if (argc - optind > 1) {
		cli_err(o->cmd, "unexpected argument '%s'", argv[optind + 1]);
		return 2;
	}
	if (optind < argc)
		*peer_p = argv[optind];
	if (o->server && *peer_p != NULL) {
		cli_err(o->cmd,
			"--listen (be the server) and a peer '%s' "
			"exclude each other",
			*peer_p);
		return 2;
	}
	if (o->token != NULL && !(o->server && o->listen != NULL) &&
	    !(*peer_p != NULL && tern_boot_is_addr(*peer_p))) {
		cli_err(o->cmd, "--token needs --listen HOST:PORT or a "
				"HOST:PORT peer (it is checked in the TCP "
				"handshake)");
		return 2;
	}
	if (cli_addr_check(o->cmd, "--listen", o->listen) != 0 ||
	    (*peer_p != NULL && o->card_file == NULL &&
	     tern_boot_is_addr(*peer_p) &&
	     cli_addr_check(o->cmd, "peer", *peer_p) != 0))
		return 2;
	return cli_token(o->cmd, o->token, &o->token) != 0 ? 2 : 0;
}

static int open_ctx(const struct net_opts *o, uint64_t flags,
		    struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr = {
		.provider = o->provider,
		.node = o->node,
		.rails = (unsigned int)o->rails,
		.domains = o->domains,
		.flags = flags,
	};

	return cli_open_ctx(o->cmd, &attr, ctx_p);
}

/* Print the card and, with --card-file, write it there too. */
static int announce(const struct net_opts *o, struct tern_ctx *ctx)
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

static int load_card(const struct net_opts *o, const char *arg, uint8_t *card,
		     size_t *len_p)
{
	return cli_card_read(o->cmd, o->card_file, arg, card, len_p);
}

/* --- ping ------------------------------------------------------------------
 */

static const int ping_keys[] = {
	'm',	  's',	     'n',	 CLI_WARMUP, 'p',
	CLI_NODE, CLI_RAILS, CLI_LISTEN, CLI_TOKEN,  CLI_CARD_FILE,
	CLI_LOG,  CLI_WORLD, 'h',	 0,
};

static void ping_usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f,
		"usage: tern ping [PEER] [--mode send|write] [--sizes LIST] "
		"[--iters N]\n"
		"                 [--warmup N] [--rails R] [--provider P] ...\n"
		"       tern ping --listen [HOST:PORT] [--token T] ...\n\n"
		"Latency ping-pong (like ibv_rc_pingpong / fi_rdm_pingpong). "
		"Modes: send\n(send/recv) and write (RDMA write with "
		"immediate, counted by the peer).\nPrints per size the "
		"half round trip in microseconds (min, p50, p99,\np99.9, "
		"max) and round trips per second. Both sides busy-poll "
		"while\nmeasuring. PEER is a `tern ping --listen`: its card "
		"or HOST:PORT; with no\npeer (and no --card-file) a local "
		"peer process is started.\n\n");
	cli_opts_help(p, f);
	fprintf(f, "\nDefaults: --mode send, --sizes 8,64,512,4K,64K, "
		   "--iters 1000, --warmup 100.\n");
}

/* One ping option into @p. @return 0, or -EINVAL (said why). */
static int ping_option(struct app_ping_params *p, int c, const char *arg)
{
	uint64_t v, sizes[APP_PING_MAX_SIZES];
	size_t n;
	int ret = 0;

	switch (c) {
	case 'm':
		if (strcmp(arg, "send") == 0) {
			p->mode = APP_PING_SEND;
		} else if (strcmp(arg, "write") == 0) {
			p->mode = APP_PING_WRITE;
		} else {
			cli_err("ping", "--mode %s: send or write", arg);
			ret = -EINVAL;
		}
		break;
	case 's':
		ret = cli_sizes("ping", arg, APP_PING_MAX_SIZE, sizes,
				APP_PING_MAX_SIZES, &n);
		if (ret == 0) {
			p->nsizes = (uint32_t)n;
			for (size_t i = 0; i < n; i++)
				p->sizes[i] = (uint32_t)sizes[i];
		}
		break;
	case 'n':
		ret = cli_uint("ping", "--iters", arg, 1, APP_PING_MAX_ITERS,
			       &v);
		p->iters = (uint32_t)v;
		break;
	case CLI_WARMUP:
		ret = cli_uint("ping", "--warmup", arg, 0, APP_PING_MAX_ITERS,
			       &v);
		p->warmup = (uint32_t)v;
		break;
	}
	return ret;
}

/* tern ping --listen: serve ping clients, one at a time, until Ctrl-C. */
static int ping_serve(struct net_opts *o)
{
	struct tern_boot_server *boot = NULL;
	struct tern_ctx *ctx;
	char lhost[64];
	int ret;

	o->node = cli_listen_node(o->provider, o->node, o->listen, lhost,
				  sizeof(lhost));
	/* Opened busy-polling, so its completion queues have no wait fd: on
	 * tcp a CQ with one makes the provider poll an epoll set and signal
	 * it on every completion, and the server's half of each round trip
	 * took about 0.5 us longer (docs/performance.md). Between clients it
	 * still sleeps, in growing steps up to 1 ms, instead of spinning. */
	if (open_ctx(o, TERN_CTX_BUSY_POLL, &ctx) != 0)
		return 1;
	tern_ctx_set_busy_poll(ctx, 0);
	ret = announce(o, ctx);
	if (ret == 0 && o->listen != NULL)
		ret = cli_boot_serve("ping", ctx, o->listen, o->token, &boot);
	if (ret == 0) {
		printf("serving ping clients, one at a time; Ctrl-C to stop\n");
		fflush(stdout);
		ret = app_ping_server(ctx, stop_flag, stdout);
	}
	tern_boot_server_close(boot);
	tern_ctx_close(ctx);
	return ret == 0 ? 0 : 1;
}

/* No peer: start `tern ping --listen` as a second process, its card in
 * @hex. @return its pid, or -1 (said why). */
static pid_t ping_local_peer(const struct net_opts *o, char *hex, size_t len)
{
	const char *args[] = { "tern",
			       "ping",
			       "--listen",
			       "--provider",
			       o->provider ? o->provider : "auto",
			       "--rails",
			       o->rails_arg ? o->rails_arg : "1",
			       "--card-file",
			       "{path}",
			       o->node ? "--node" : NULL,
			       o->node,
			       NULL };
	pid_t pid;
	int fd;

	pid = cli_spawn(args, 1, NULL, &fd);
	if (pid < 0) {
		cli_err("ping", "could not start the local peer: %s",
			strerror(errno));
		return -1;
	}
	if (cli_read_line(fd, hex, len, 20000) != 0) {
		cli_err("ping", "the local peer did not start (no card)");
		close(fd);
		cli_reap(pid, 0);
		return -1;
	}
	close(fd);
	return pid;
}

int cmd_ping(int argc, char **argv)
{
	struct app_ping_params p = {
		.mode = APP_PING_SEND,
		.iters = 1000,
		.warmup = 100,
		.nsizes = 5,
		.sizes = { 8, 64, 512, 4096, 65536 },
	};
	struct net_opts o = { .cmd = "ping", .rails = 1 };
	struct app_ping_result res[APP_PING_MAX_SIZES];
	struct tern_boot_info theirs;
	char hex[2 * TERN_CARD_MAX + 2];
	uint8_t card[TERN_CARD_MAX];
	struct cli_parser cp;
	const char *peer, *world = NULL;
	struct tern_ctx *ctx;
	pid_t peer_pid = 0;
	int boot_fd = -1;
	size_t card_len;
	char why[256];
	int c, ret = 0;

	cli_opts_init(&cp, "ping", ping_keys);
	while ((c = cli_getopt(&cp, argc, argv)) != -1) {
		if (c == 'h') {
			ping_usage(&cp, stdout);
			return 0;
		}
		if (c == '?')
			return 2;
		if (c == CLI_WORLD) {
			world = optarg;
			continue;
		}
		ret = net_option(&o, c, optarg);
		if (ret == 0)
			ret = ping_option(&p, c, optarg);
		if (ret < 0)
			return 2;
	}
	if (net_args(&o, argc, argv, &peer) != 0)
		return 2;
	if (world != NULL) {
		struct bench_world_opts wo = { .iters = p.iters,
					       .warmup = p.warmup,
					       .window = 1 };

		if (o.server || peer != NULL || o.card_file != NULL ||
		    o.rails > 1) {
			cli_err("ping", "--world finds its peers in the "
					"world: no --listen, peer, --card-file "
					"or --rails");
			return 2;
		}
		return cli_world("ping", world, o.provider, o.node, &wo, NULL,
				 1);
	}
	stop_flag = cli_catch_signals();
	if (o.server)
		return ping_serve(&o);
	if (peer == NULL && o.card_file == NULL) {
		peer_pid = ping_local_peer(&o, hex, sizeof(hex));
		if (peer_pid < 0)
			return 1;
		peer = hex;
	}
	if (peer != NULL && o.card_file == NULL && tern_boot_is_addr(peer)) {
		struct tern_ctx_attr attr = {
			.provider = o.provider,
			.node = o.node,
			.rails = (unsigned int)o.rails,
			.domains = o.domains,
			.flags = TERN_CTX_BUSY_POLL,
		};

		if (cli_boot_client("ping", peer, o.token, 10000, &attr, &ctx,
				    &theirs, &boot_fd) != 0)
			return 1;
		memcpy(card, theirs.card, theirs.card_len);
		card_len = theirs.card_len;
	} else {
		if (load_card(&o, peer, card, &card_len) != 0 ||
		    open_ctx(&o, TERN_CTX_BUSY_POLL, &ctx) != 0) {
			if (peer_pid > 0)
				cli_reap(peer_pid, 0);
			return peer_pid > 0 ? 1 : 2;
		}
	}
	ret = app_ping_client(ctx, card, card_len, &p, stop_flag, res, why,
			      sizeof(why));
	/* The sizes measured, also when Ctrl-C or a failure cut the run
	 * short: a size cut short says how many round trips it has. */
	if (res[0].iters != 0) {
		printf("%s ping-pong, %u iterations (+%u warm-up); half round "
		       "trip in us\n",
		       p.mode == APP_PING_SEND ? "send/recv"
					       : "write-with-immediate",
		       p.iters, p.warmup);
		printf("%10s %9s %9s %9s %9s %9s %12s\n", "size", "min", "p50",
		       "p99", "p99.9", "max", "rt/s");
	}
	for (uint32_t i = 0; i < p.nsizes && res[i].iters != 0; i++) {
		printf("%10u %9.2f %9.2f %9.2f %9.2f %9.2f %12.0f", res[i].size,
		       res[i].min_us, res[i].p50_us, res[i].p99_us,
		       res[i].p999_us, res[i].max_us, res[i].rate);
		if (res[i].iters < p.iters)
			printf("  (%u of %u round trips)", res[i].iters,
			       p.iters);
		putchar('\n');
	}
	if (ret != 0) {
		cli_err("ping", "%s", why);
		/* A server that died mid-run: let progress see the broken
		 * connection before the endpoint closes (README,
		 * Limitations: libfabric 1.17's tcp;ofi_rxm). */
		tern_ctx_settle(ctx, 300);
	}
	tern_ctx_close(ctx);
	if (boot_fd >= 0)
		close(boot_fd);
	if (peer_pid > 0)
		cli_reap(peer_pid, 0);
	return ret == 0 ? 0 : 1;
}

/* --- atomic ----------------------------------------------------------------
 */

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

static int atomic_client(struct net_opts *o, const char *hex, uint64_t n,
			 uint64_t reps)
{
	struct app_atomic_client c = { 0 };
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	uint64_t *all, before, after;
	size_t card_len;
	char why[256];
	int failed = 0, boot_fd = -1;
	pid_t *pids;
	int *fds;

	char cardhex[2 * TERN_CARD_MAX + 1];

	if (hex != NULL && o->card_file == NULL && tern_boot_is_addr(hex)) {
		struct tern_ctx_attr attr = {
			.provider = o->provider,
			.node = o->node,
			.rails = (unsigned int)o->rails,
			.domains = o->domains,
		};
		struct tern_boot_info theirs;

		if (cli_boot_client("atomic", hex, o->token, 10000, &attr, &ctx,
				    &theirs, &boot_fd) != 0)
			return 1;
		memcpy(card, theirs.card, theirs.card_len);
		card_len = theirs.card_len;
	} else {
		if (load_card(o, hex, card, &card_len) != 0)
			return 2;
		if (open_ctx(o, 0, &ctx) != 0)
			return 1;
	}
	tern_hex_encode(card, card_len, cardhex, sizeof(cardhex));
	if (app_atomic_hello(ctx, card, card_len, &c.peer, &c.desc, why,
			     sizeof(why)) != 0) {
		cli_err("atomic", "%s", why);
		tern_ctx_close(ctx);
		return 1;
	}
	c.ctx = ctx;
	before = app_atomic_op(&c, 0, APP_ATOMIC_COUNTER, 0, 0);
	if (c.err != 0) {
		cli_err("atomic", "%s", c.why);
		goto out;
	}
	all = calloc(n * reps, sizeof(*all));
	pids = calloc(n, sizeof(*pids));
	fds = calloc(n, sizeof(*fds));
	if (all == NULL || pids == NULL || fds == NULL)
		return 1;
	printf("atomic: counter is %" PRIu64 "; starting %" PRIu64
	       " processes x %" PRIu64 " fetch-adds\n",
	       before, n, reps);
	fflush(stdout);
	for (uint64_t i = 0; i < n; i++) {
		char reps_s[24];
		const char *args[] = { "tern",
				       "atomic",
				       cardhex,
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

		/* A process of its own: exec'd before touching the fabric. */
		snprintf(reps_s, sizeof(reps_s), "%" PRIu64, reps);
		pids[i] = cli_spawn(args, 0, NULL, &fds[i]);
		if (pids[i] < 0) {
			cli_err("atomic", "could not start a worker: %s",
				strerror(errno));
			return 1;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		size_t want = reps * sizeof(*all), got = 0;
		int st;

		while (got < want) {
			ssize_t r = read(fds[i], (char *)&all[i * reps] + got,
					 want - got);

			if (r < 0 && errno == EINTR && !*stop_flag)
				continue;
			if (r < 0 && errno == EINTR) {
				/* Ctrl-C: a terminal sends it to the workers
				 * too; a kill of this process alone does
				 * not. They stop and drain. */
				for (uint64_t j = 0; j < n; j++)
					kill(pids[j], SIGINT);
				continue;
			}
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		close(fds[i]);
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		if (*stop_flag) {
			failed = 1;
			continue;
		}
		if (got != want || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			cli_err("atomic", "process %" PRIu64 " failed", i);
			failed = 1;
		}
	}
	if (*stop_flag) {
		cli_err("atomic", "interrupted: the workers stopped; nothing "
				  "was checked");
		free(all);
		free(pids);
		free(fds);
		goto out;
	}
	after = app_atomic_op(&c, 0, APP_ATOMIC_COUNTER, 0, 0);
	if (c.err != 0)
		cli_err("atomic", "%s", c.why);
	if (!failed && c.err == 0 &&
	    app_atomic_check(all, n * reps, before, why, sizeof(why)) != 0) {
		cli_err("atomic", "%s", why);
		failed = 1;
	}
	printf("atomic: counter %" PRIu64 " -> %" PRIu64 " (+%" PRIu64
	       ", expected +%" PRIu64 " = %" PRIu64 ")\n",
	       before, after, after - before, n * reps, n * reps);
	if (!failed && c.err == 0 && after - before == n * reps)
		printf("atomic: OK: every old value unique, lock taken %" PRIu64
		       " times with never two holders\n",
		       n * (reps / 10 ? reps / 10 : 1));
	else
		failed = 1;
	free(all);
	free(pids);
	free(fds);
out:
	app_atomic_bye(ctx, c.peer);
	tern_peer_remove(c.peer);
	tern_ctx_close(ctx);
	if (boot_fd >= 0)
		close(boot_fd);
	return failed || c.err ? 1 : 0;
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
	if (open_ctx(o, 0, &ctx) != 0)
		return 1;
	ret = announce(o, ctx);
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

int cmd_atomic(int argc, char **argv)
{
	struct net_opts o = { .cmd = "atomic", .rails = 1 };
	uint64_t clients = 4, reps = 1000, worker_fd = 0;
	struct cli_parser cp;
	const char *peer_arg;
	int c, ret = 0, worker = 0;

	cli_opts_init(&cp, "atomic", atomic_keys);
	while ((c = cli_getopt(&cp, argc, argv)) != -1) {
		if (c == 'h') {
			atomic_usage(&cp, stdout);
			return 0;
		}
		if (c == '?')
			return 2;
		ret = net_option(&o, c, optarg);
		if (ret < 0)
			return 2;
		if (ret == 1)
			continue;
		if (c == CLI_CLIENTS)
			ret = cli_uint("atomic", "--clients", optarg, 1, 256,
				       &clients);
		else if (c == 'r')
			ret = cli_uint("atomic", "--reps", optarg, 1, 10000000,
				       &reps);
		else if (c == CLI_WORKER_FD)
			ret = cli_uint("atomic", "--worker-fd", optarg, 3,
				       1 << 20, &worker_fd);
		worker |= c == CLI_WORKER_FD;
		if (ret != 0)
			return 2;
	}
	if (net_args(&o, argc, argv, &peer_arg) != 0)
		return 2;
	o.provider = cli_atomic_provider(o.provider);
	stop_flag = cli_catch_signals();
	if (o.server)
		return atomic_serve(&o);
	if (peer_arg == NULL && o.card_file == NULL) {
		cli_err("atomic",
			"no peer: give a `tern atomic --listen`'s card "
			"or HOST:PORT (or --card-file)");
		return 2;
	}
	if (worker) {
		struct app_atomic_client ac = { 0 };
		uint8_t card[TERN_CARD_MAX];
		struct tern_ctx *ctx;
		size_t card_len;
		char why[256];

		if (load_card(&o, peer_arg, card, &card_len) != 0)
			return 2;
		ret = tern_ctx_open(
			&(struct tern_ctx_attr){ .provider = o.provider,
						 .node = o.node,
						 .rails = (unsigned int)o.rails,
						 .domains = o.domains },
			&ctx);
		if (ret != 0)
			return 1;
		ret = app_atomic_hello(ctx, card, card_len, &ac.peer, &ac.desc,
				       why, sizeof(why));
		if (ret == 0) {
			ac.ctx = ctx;
			ret = atomic_worker(&ac, reps, (int)worker_fd);
			app_atomic_bye(ctx, ac.peer);
			tern_peer_remove(ac.peer);
		} else {
			cli_err("atomic", "%s", why);
		}
		tern_ctx_close(ctx);
		return ret == 0 ? 0 : 1;
	}
	return atomic_client(&o, peer_arg, clients, reps);
}
