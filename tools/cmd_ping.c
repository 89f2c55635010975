/* SPDX-License-Identifier: MIT */
/* tern ping: latency ping-pong (apps/ping.c) from the command line. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "apps/app.h"
#include "bench/bench_world.h"
#include "cli.h"
#include "net.h"
#include "opts.h"

/* Set by Ctrl-C (cli_catch_signals). */
static volatile sig_atomic_t *stop_flag;

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

struct ping_cli {
	struct net_opts o;
	struct app_ping_params p;
	const char *world; /* --world */
};

static int ping_cli_option(void *data, int c, const char *arg)
{
	struct ping_cli *s = data;
	int ret;

	if (c == CLI_WORLD) {
		s->world = arg;
		return 0;
	}
	ret = net_option(&s->o, c, arg);
	if (ret == 0)
		ret = ping_option(&s->p, c, arg);
	return ret < 0 ? ret : 0;
}

static const struct cli_cmd ping_cmd = {
	.name = "ping",
	.keys = ping_keys,
	.usage = ping_usage,
	.option = ping_cli_option,
	.args = CLI_ARG_LATER, /* net_args() */
};

/* tern ping --world: the latency matrix of every rank against every
 * other. */
static int ping_world(const struct ping_cli *s, const char *peer)
{
	struct bench_world_opts wo = { .iters = s->p.iters,
				       .warmup = s->p.warmup,
				       .window = 1 };

	if (s->o.server || peer != NULL || s->o.card_file != NULL ||
	    s->o.rails > 1) {
		cli_err("ping", "--world finds its peers in the world: no "
				"--listen, peer, --card-file or --rails");
		return 2;
	}
	return cli_world("ping", s->world, s->o.provider, s->o.node, &wo, NULL,
			 1);
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
	if (net_open_ctx(o, TERN_CTX_BUSY_POLL, &ctx) != 0)
		return 1;
	tern_ctx_set_busy_poll(ctx, 0);
	ret = net_announce(o, ctx);
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

/* The client's ctx and the server's card: by HOST:PORT (with the
 * bootstrap socket in *boot_fd), by card, or from a local peer started
 * here (its pid in *pid_p) when there is neither. @return 0, or the exit
 * status (said why). */
static int ping_connect(const struct net_opts *o, const char *peer,
			struct tern_ctx **ctx_p, uint8_t *card,
			size_t *card_len, int *boot_fd, pid_t *pid_p)
{
	char hex[2 * TERN_CARD_MAX + 2];

	if (peer == NULL && o->card_file == NULL) {
		*pid_p = ping_local_peer(o, hex, sizeof(hex));
		if (*pid_p < 0)
			return 1;
		peer = hex;
	}
	if (peer != NULL && o->card_file == NULL && tern_boot_is_addr(peer))
		return net_boot(o, peer, TERN_CTX_BUSY_POLL, ctx_p, card,
				card_len, boot_fd);
	if (cli_card_read(o->cmd, o->card_file, peer, card, card_len) != 0 ||
	    net_open_ctx(o, TERN_CTX_BUSY_POLL, ctx_p) != 0) {
		if (*pid_p > 0)
			cli_reap(*pid_p, 0);
		return *pid_p > 0 ? 1 : 2;
	}
	return 0;
}

/* The sizes measured, also when Ctrl-C or a failure cut the run short: a
 * size cut short says how many round trips it has. */
static void ping_print(const struct app_ping_params *p,
		       const struct app_ping_result *res)
{
	if (res[0].iters != 0) {
		printf("%s ping-pong, %u iterations (+%u warm-up); half round "
		       "trip in us\n",
		       p->mode == APP_PING_SEND ? "send/recv"
						: "write-with-immediate",
		       p->iters, p->warmup);
		printf("%10s %9s %9s %9s %9s %9s %12s\n", "size", "min", "p50",
		       "p99", "p99.9", "max", "rt/s");
	}
	for (uint32_t i = 0; i < p->nsizes && res[i].iters != 0; i++) {
		printf("%10u %9.2f %9.2f %9.2f %9.2f %9.2f %12.0f", res[i].size,
		       res[i].min_us, res[i].p50_us, res[i].p99_us,
		       res[i].p999_us, res[i].max_us, res[i].rate);
		if (res[i].iters < p->iters)
			printf("  (%u of %u round trips)", res[i].iters,
			       p->iters);
		putchar('\n');
	}
}

int cmd_ping(int argc, char **argv)
{
	struct ping_cli s = {
		.o = { .cmd = "ping", .rails = 1 },
		.p = {
			.mode = APP_PING_SEND,
			.iters = 1000,
			.warmup = 100,
			.nsizes = 5,
			.sizes = { 8, 64, 512, 4096, 65536 },
		},
	};
	struct app_ping_result res[APP_PING_MAX_SIZES];
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	const char *peer;
	pid_t peer_pid = 0;
	int boot_fd = -1;
	size_t card_len;
	char why[256];
	int ret;

	ret = cli_parse(&ping_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	if (net_args(&s.o, argc, argv, &peer) != 0)
		return 2;
	if (s.world != NULL)
		return ping_world(&s, peer);
	stop_flag = cli_catch_signals();
	if (s.o.server)
		return ping_serve(&s.o);
	ret = ping_connect(&s.o, peer, &ctx, card, &card_len, &boot_fd,
			   &peer_pid);
	if (ret != 0)
		return ret;
	ret = app_ping_client(ctx, card, card_len, &s.p, stop_flag, res, why,
			      sizeof(why));
	ping_print(&s.p, res);
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
