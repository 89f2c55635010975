/* SPDX-License-Identifier: MIT */
/* tern fill (client, or server with --listen) / demo: the random-fill
 * transfer from the command line. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "cli.h"
#include "opts.h"
#include "wire/boot.h"
#include "core/core.h"
#include "apps/fill/boot.h"
#include "apps/fill/fill.h"

/* Set by Ctrl-C (cli_catch_signals). */
static volatile sig_atomic_t *stop_flag;

/* Options of fill (both roles) and demo. */
struct fill_opts {
	const char *cmd;
	const char *provider;
	const char *node;
	const char *card_file;
	int server;	    /* --listen: be the server */
	const char *listen; /* --listen HOST:PORT: bootstrap address */
	const char *token;  /* shared secret */
	/* The first option of the other role given (fill: one of
	 * client_keys with --listen, one of server_keys without). */
	int client_opt, server_opt;
	uint64_t reconnect_s;
	uint64_t rails;
	const char *domains; /* --rails gpu=N or a domain list */
	const char *rails_arg;
	uint64_t page_size;
	uint64_t pages;
	uint64_t seed;
	int have_seed;
	uint64_t count;
	uint64_t timeout_ms;
	uint64_t fill_timeout_ms;
	uint64_t idle_timeout_ms;
	uint64_t max_clients;
	uint64_t max_per_client;
	uint64_t parallel;
	int once;
	int quiet;
};

/* tern fill takes the options of both roles: the client's, the server's
 * (--listen) and those of both (parse() joins them); an option of the
 * other role is refused once the role is known (check_role). */
static const int client_keys[] = {
	CLI_PAGE_SIZE, CLI_PAGES, 'S', 'c', CLI_TIMEOUT, CLI_RECONNECT, 0,
};
static const int server_keys[] = {
	CLI_LISTEN,   CLI_ONCE,		CLI_MAX_CLIENTS,  CLI_MAX_PER_CLIENT,
	CLI_PARALLEL, CLI_FILL_TIMEOUT, CLI_IDLE_TIMEOUT, 0,
};
static const int both_keys[] = {
	CLI_CARD_FILE, CLI_TOKEN, 'p', CLI_NODE, CLI_RAILS, CLI_LOG, 'h', 0,
};
static const int demo_keys[] = {
	CLI_PAGE_SIZE, CLI_PAGES, 'S',	   'c', 'p',
	CLI_NODE,      CLI_RAILS, CLI_LOG, 'h', 0,
};

static const char limits_help[] =
	"Limits a server enforces (refused with a reason otherwise): page "
	"size 1 B to\n16 MiB, 1 to 16384 pages, at most 32 MiB per fill, "
	"every page inside the\nclient's two 16 MiB regions, no page twice.\n";

static int has_key(const int *keys, int c)
{
	for (; *keys != 0; keys++) {
		if (*keys == c)
			return 1;
	}
	return 0;
}

/* The options part of tern fill --help: one list per role. */
static void fill_opts_help(FILE *f)
{
	static const struct {
		const char *title;
		const int *keys;
	} parts[] = {
		{ "client options:", client_keys },
		{ "server options (--listen):", server_keys },
		{ "options of both:", both_keys },
	};

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		struct cli_parser q;

		cli_opts_init(&q, "fill", parts[i].keys);
		fprintf(f, "%s%s\n", i ? "\n" : "", parts[i].title);
		cli_opts_help(&q, f);
	}
}

static void usage(const struct cli_parser *p, FILE *f)
{
	if (strcmp(p->cmd, "fill") == 0) {
		fprintf(f,
			"usage: tern fill PEER [--token T] [--reconnect S] "
			"[options]\n"
			"       tern fill --card-file FILE [options]\n"
			"       tern fill --listen [HOST:PORT] [--token T] "
			"[--once] [options]\n\n"
			"Client: register two 16 MiB regions (remote write "
			"only), connect to the\nserver (PEER: a `tern fill "
			"--listen`'s card, or HOST:PORT), ask for a random\n"
			"fill, count one immediate per page (EFA delivers out "
			"of order: completion\nis a count, never \"the last "
			"write\"), then verify every byte and that\nnothing "
			"outside the pages changed.\n\n"
			"Server (--listen): open a ctx, print its card and "
			"the client command, and\nserve random-fill requests "
			"of many clients at once until Ctrl-C. Each\n"
			"request's pages are filled from MT19937-64(seed) and "
			"written into the\nclient's memory with RDMA writes "
			"carrying the request id as immediate\ndata. A client "
			"has one fill outstanding; fills beyond --parallel "
			"wait in\none queue, first come first served. With "
			"--listen HOST:PORT ([IPV6]:PORT,\n:PORT) clients also "
			"get the card over TCP there, and their leaving ends\n"
			"their session; with --token only clients presenting "
			"it are admitted\n(clients by card are then "
			"refused).\n\n");
		fill_opts_help(f);
		fprintf(f,
			"\nDefaults: client: --page-size 1M, --pages 8, "
			"--count 1, --timeout 30000\n(per fill and for the "
			"handshake), --reconnect 0 (give up); server:\n"
			"--max-clients 256, --max-per-client 4, --parallel 4 "
			"(each with a 32 MiB\nsource buffer), --fill-timeout "
			"60000, --idle-timeout 120000.\n%s",
			limits_help);
	} else {
		fprintf(f, "usage: tern demo [options]\n\n"
			   "Run `tern fill --listen --once` and `tern fill` as "
			   "two processes on this\nhost and report both sides. "
			   "Default provider shm; with tcp the server binds\n"
			   "127.0.0.1.\n\n");
		cli_opts_help(p, f);
		fprintf(f, "\nDefaults: --page-size 1M, --pages 8, "
			   "--count 1.\n");
	}
}

/* One option of fill or demo into @data (a struct fill_opts).
 * @return 0, or -EINVAL (said why). */
static int fill_option(void *data, int c, const char *arg)
{
	struct fill_opts *o = data;
	int ret = 0;

	if (has_key(client_keys, c) && !o->client_opt)
		o->client_opt = c;
	if (has_key(server_keys, c) && !o->server_opt)
		o->server_opt = c;
	switch (c) {
	case 'p':
		o->provider = arg;
		break;
	case CLI_NODE:
		o->node = arg;
		break;
	case CLI_RAILS:
		ret = cli_rails(o->cmd, arg, &o->rails, &o->domains);
		o->rails_arg = arg;
		break;
	case CLI_CARD_FILE:
		o->card_file = arg;
		break;
	case CLI_PAGE_SIZE:
		ret = cli_size(o->cmd, "--page-size", arg, 1,
			       FILL_MAX_PAGE_SIZE, &o->page_size);
		break;
	case CLI_PAGES:
		ret = cli_uint(o->cmd, "--pages", arg, 1, FILL_MAX_PAGES,
			       &o->pages);
		break;
	case 'S':
		ret = cli_uint(o->cmd, "--seed", arg, 0, UINT64_MAX, &o->seed);
		o->have_seed = 1;
		break;
	case 'c':
		ret = cli_uint(o->cmd, "--count", arg, 1, 1000000, &o->count);
		break;
	case CLI_TIMEOUT:
		ret = cli_uint(o->cmd, "--timeout", arg, 1, 3600000,
			       &o->timeout_ms);
		break;
	case CLI_FILL_TIMEOUT:
		ret = cli_uint(o->cmd, "--fill-timeout", arg, 1, 3600000,
			       &o->fill_timeout_ms);
		break;
	case CLI_IDLE_TIMEOUT:
		ret = cli_uint(o->cmd, "--idle-timeout", arg, 1, 86400000,
			       &o->idle_timeout_ms);
		break;
	case CLI_MAX_CLIENTS:
		ret = cli_uint(o->cmd, "--max-clients", arg, 1, 65536,
			       &o->max_clients);
		break;
	case CLI_MAX_PER_CLIENT:
		ret = cli_uint(o->cmd, "--max-per-client", arg, 1, 65536,
			       &o->max_per_client);
		break;
	case CLI_PARALLEL:
		ret = cli_uint(o->cmd, "--parallel", arg, 1, 64, &o->parallel);
		break;
	case CLI_ONCE:
		o->once = 1;
		break;
	case CLI_LISTEN:
		o->server = 1;
		o->listen = arg;
		break;
	case CLI_TOKEN:
		o->token = arg;
		break;
	case CLI_RECONNECT:
		ret = cli_uint(o->cmd, "--reconnect", arg, 0, 86400,
			       &o->reconnect_s);
		break;
	case CLI_LOG:
		ret = cli_log(o->cmd, arg);
		break;
	}
	return ret;
}

/* The options into @o; what follows them is the caller's (tern fill's
 * depends on its role). @return CLI_GO, or the exit status (cli_parse). */
static int parse(int argc, char **argv, struct fill_opts *o)
{
	const int *const roles[] = { client_keys, server_keys, both_keys };
	int fill_keys[CLI_MAX_OPTS + 1], n = 0;
	const int is_fill = strcmp(o->cmd, "fill") == 0;
	const struct cli_cmd cmd = {
		.name = o->cmd,
		.keys = is_fill ? fill_keys : demo_keys,
		.usage = usage,
		.option = fill_option,
		.args = is_fill ? CLI_ARG_LATER : 0,
	};

	/* tern fill: every role's options, in the order of its --help. */
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		for (const int *k = roles[i]; *k != 0; k++)
			fill_keys[n++] = *k;
	fill_keys[n] = 0;
	return cli_parse(&cmd, argc, argv, o, NULL);
}

/* tern fill: an option of the other role is a usage error, named with
 * the role it belongs to. @return 0, or -EINVAL (said why). */
static int check_role(const struct fill_opts *o)
{
	int c = o->server ? o->client_opt : o->server_opt;

	if (c == 0)
		return 0;
	if (o->server)
		cli_err(o->cmd,
			"--%s is a client option: tern fill --listen does not "
			"take it (see tern fill --help)",
			cli_opt_find(c)->name);
	else
		cli_err(o->cmd,
			"--%s is a server option: it needs --listen (see tern "
			"fill --help)",
			cli_opt_find(c)->name);
	return -EINVAL;
}

static void defaults(struct fill_opts *o, const char *cmd)
{
	*o = (struct fill_opts){
		.cmd = cmd,
		.rails = 1,
		.page_size = 1 << 20,
		.pages = 8,
		.count = 1,
		.timeout_ms = 30000,
	};
}

/* Open the ctx; the line saying what it runs on is tagged @tag. */
static int open_ctx(const struct fill_opts *o, const char *tag,
		    struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr = {
		.provider = o->provider,
		.node = o->node,
		.rails = (unsigned int)o->rails,
		.domains = o->domains,
	};

	return cli_open_ctx_as(o->cmd, tag, &attr, ctx_p);
}

/* The name a shell takes unquoted: "tcp" for "tcp;ofi_rxm" where "tcp"
 * means it (libfabric 1.x; on 2.x "tcp" is tcp's own RDM endpoint, which
 * does not talk to rxm's). */
static const char *short_provider(const char *prov)
{
	if (strcmp(prov, "tcp;ofi_rxm") == 0)
		return tern_fabric_version()[0] == '1' ? "tcp"
						       : "'tcp;ofi_rxm'";
	if (strcmp(prov, "verbs;ofi_rxm") == 0)
		return "verbs";
	return prov;
}

/* tern fill --listen: @peer (the first word after the options, the
 * client's argument) and the options that go with --listen, checked.
 * @return 0, or 2 (said why). */
static int listen_check(struct fill_opts *o, const char *peer)
{
	if (peer != NULL) {
		cli_err(o->cmd,
			"--listen (be the server) and a peer '%s' exclude "
			"each other",
			peer);
		return 2;
	}
	/* $TERN_TOKEN applies where there is a handshake to check it. */
	if (cli_addr_check(o->cmd, "--listen", o->listen) != 0)
		return 2;
	if ((o->token != NULL || o->listen != NULL) &&
	    cli_token(o->cmd, o->token, &o->token) != 0)
		return 2;
	if (o->token != NULL && o->listen == NULL) {
		cli_err(o->cmd, "--token needs --listen HOST:PORT (the token "
				"is checked in the TCP handshake)");
		return 2;
	}
	return 0;
}

/* Open the fill server on @ctx (and with --listen HOST:PORT its
 * bootstrap, handing out @card, its address in @baddr) as the options
 * say. @return 0, or 1 (said why). */
static int listen_open(const struct fill_opts *o, struct tern_ctx *ctx,
		       const uint8_t *card, size_t card_len,
		       struct fill_boot *fb, struct fill_server **srv_p,
		       char *baddr, size_t baddr_len)
{
	struct fill_server_opts so = {
		.log = stdout,
		.log_prefix = "serve: ",
		.once = o->once,
		.fill_timeout_ms = (int)o->fill_timeout_ms,
		.idle_timeout_ms = (int)o->idle_timeout_ms,
		.max_sessions = (int)o->max_clients,
		.max_per_client = (int)o->max_per_client,
		.parallel = (int)o->parallel,
	};
	char why[256];
	int ret;

	if (o->listen != NULL)
		fill_boot_admit(fb, &so, o->token != NULL);
	ret = fill_server_open(ctx, &so, srv_p);
	if (ret != 0) {
		cli_err(o->cmd, "%s", tern_strerror(ret));
		return 1;
	}
	if (o->listen == NULL)
		return 0;
	ret = fill_boot_open(fb, ctx, *srv_p, o->listen, o->token,
			     (int)o->max_clients, card, card_len, why,
			     sizeof(why));
	if (ret != 0) {
		cli_err(o->cmd, "--listen: %s", why);
		fill_server_close(*srv_p);
		return 1;
	}
	tern_boot_server_addr(fb->boot, baddr, baddr_len);
	return 0;
}

/* The card, and the commands that run clients against it. */
static void listen_announce(const struct fill_opts *o, const char *hex,
			    const char *provider, const char *baddr)
{
	const int local = o->node && strncmp(o->node, "127.", 4) == 0;

	printf("card: %s\n", hex);
	/* With a token, clients by card are refused: do not suggest it. */
	if (o->token == NULL)
		printf("run:  tern fill %s --provider %s%s%s\n", hex,
		       short_provider(provider), local ? " --node " : "",
		       local ? o->node : "");
	/* The address bound, with the port the kernel picked for :0; on
	 * every address (":PORT") the client names the host. */
	if (baddr != NULL)
		printf("listen: %s (TCP bootstrap%s)\n"
		       "run:  tern fill %s%s --provider %s%s\n",
		       baddr, o->token ? "; token required" : "",
		       o->listen[0] == ':' ? "HOST" : "",
		       o->listen[0] == ':' && strrchr(baddr, ':') != NULL
			       ? strrchr(baddr, ':')
			       : baddr,
		       short_provider(provider),
		       o->token ? " --token ..." : "");
	printf("serving random-fill requests%s; Ctrl-C to stop\n",
	       o->once ? " (one session)" : "");
	fflush(stdout);
}

/* What the server did, and its bootstrap (NULL: none). */
static void listen_stats(struct fill_server *srv, struct tern_boot_server *boot)
{
	struct fill_server_stats st;
	struct tern_boot_server_stats bs;

	fill_server_stats(srv, &st);
	printf("serve: served %" PRIu64 " session(s), %" PRIu64
	       " fill(s), %" PRIu64 " bytes written; %" PRIu64
	       " request(s) refused, %" PRIu64 " message(s) dropped\n",
	       st.sessions, st.fills, st.bytes, st.refused, st.dropped);
	printf("serve: at most %" PRIu64 " client(s) at once; %" PRIu64
	       " fill(s) waited for a writer, %" PRIu64 " failed, %" PRIu64
	       " stalled\n",
	       st.peak_active, st.queued, st.failed, st.stalled);
	if (boot == NULL)
		return;
	tern_boot_server_stats(boot, &bs);
	printf("serve: bootstrap: %" PRIu64 " client(s) admitted, %" PRIu64
	       " refused, %" PRIu64 " left\n",
	       bs.accepted, bs.refused, bs.gone);
}

/*
 * tern fill --listen [HOST:PORT]: serve random-fill requests until Ctrl-C
 * (or one session, --once). Its lines on stdout say "serve:" as they did
 * when it was tern serve (the role: tern demo's output tells them from
 * the client's by it); its errors name the command, "tern fill:".
 */
static int fill_listen(struct fill_opts *o, const char *peer)
{
	struct fill_boot fb = { .log = stdout, .log_prefix = "serve: " };
	char lhost[256], baddr[80], hex[2 * TERN_CARD_MAX + 1];
	uint8_t card[TERN_CARD_MAX];
	struct fill_server *srv;
	struct tern_ctx_info ci;
	struct tern_ctx *ctx;
	ssize_t len;
	int ret;

	if (listen_check(o, peer) != 0)
		return 2;
	o->node = cli_listen_node(o->provider, o->node, o->listen, lhost,
				  sizeof(lhost));
	stop_flag = cli_catch_signals();
	if (open_ctx(o, "serve", &ctx) != 0)
		return 1;
	tern_ctx_query(ctx, &ci);
	len = tern_ctx_card(ctx, card, sizeof(card));
	tern_hex_encode(card, (size_t)len, hex, sizeof(hex));
	if (listen_open(o, ctx, card, (size_t)len, &fb, &srv, baddr,
			sizeof(baddr)) != 0) {
		tern_ctx_close(ctx);
		return 1;
	}
	listen_announce(o, hex, ci.provider, fb.boot ? baddr : NULL);
	ret = cli_card_write(o->cmd, o->card_file, hex);
	if (ret == 0)
		ret = fill_server_run(srv, stop_flag);
	listen_stats(srv, fb.boot);
	/* The fill server's close may still admit: none is left. */
	fill_boot_close(&fb);
	if (ret != 0)
		cli_err(o->cmd, "%s", tern_strerror(ret));
	fill_server_close(srv);
	tern_ctx_close(ctx);
	return ret == 0 ? 0 : 1;
}

/* Would --pages of --page-size fit one fill and our regions? Checked
 * before connecting; a server may still take less (its ACCEPT says). */
static int fill_shape_check(const struct fill_opts *o)
{
	uint64_t fit = 2 * fill_region_pages(FILL_REGION_SIZE,
					     (uint32_t)o->page_size);
	char s1[32], s2[32], s3[32];

	tern_format_size(o->page_size, s1, sizeof(s1));
	if (o->page_size * o->pages > FILL_MAX_BYTES) {
		cli_err(o->cmd,
			"--pages %" PRIu64 " of --page-size %s: %s in one "
			"fill; the protocol's limit is %s",
			o->pages, s1,
			tern_format_size(o->page_size * o->pages, s2,
					 sizeof(s2)),
			tern_format_size(FILL_MAX_BYTES, s3, sizeof(s3)));
		return -EINVAL;
	}
	if (o->pages > fit) {
		cli_err(o->cmd,
			"--pages %" PRIu64 " of --page-size %s: the client's "
			"two regions of %s hold %" PRIu64 " such pages",
			o->pages, s1,
			tern_format_size(FILL_REGION_SIZE, s2, sizeof(s2)),
			fit);
		return -EINVAL;
	}
	return 0;
}

/* run_fills/boot_round: a count of fills that failed their check, ORed
 * with why they stopped early. */
#define FILLS_COUNT ((1 << 20) - 1)
#define FILLS_LOST  (1 << 20) /* the connection broke: worth redialling */
#define FILLS_FATAL (1 << 21) /* anything else: give up */

/*
 * Fills *next .. count-1 on a new connection. @return the number that
 * failed their check, ORed with FILLS_LOST when the connection (or the
 * server) broke, leaving *next at the fill to redo.
 */
static int run_fills(struct tern_ctx *ctx, const struct fill_opts *o,
		     const uint8_t *card, size_t card_len,
		     const uint8_t *ticket, size_t ticket_len, int live_fd,
		     uint64_t seed, uint64_t *next)
{
	struct fill_conn *conn;
	char why[256], s1[32];
	int ret, failed = 0;

	ret = fill_conn_open_ticket(ctx, card, card_len, ticket, ticket_len,
				    (int)o->timeout_ms, &conn, why,
				    sizeof(why));
	if (ret != 0) {
		cli_err(o->cmd, "%s", why);
		return ret == -TERN_EREFUSED ? FILLS_FATAL : FILLS_LOST;
	}
	if (live_fd >= 0)
		fill_conn_watch(conn, live_fd);
	printf("%s: connected, session %016" PRIx64 ", two regions of %s "
	       "(remote write only)\n",
	       o->cmd, fill_conn_session(conn),
	       tern_format_size(FILL_REGION_SIZE, s1, sizeof(s1)));
	for (; *next < o->count; ++*next) {
		uint64_t i = *next;
		struct fill_params p = {
			.page_size = (uint32_t)o->page_size,
			.pages = (uint32_t)o->pages,
			.seed = seed + i,
			.timeout_ms = (int)o->timeout_ms,
		};
		struct fill_report r;
		double us;

		ret = fill_conn_fill(conn, &p, &r);
		if (ret != 0) {
			cli_err(o->cmd,
				"fill %" PRIu64 " (seed %" PRIu64 "): %s",
				i + 1, p.seed, r.error);
			if (ret != -TERN_EVERIFY && ret != -TERN_EREFUSED &&
			    ret != -EINVAL) {
				failed |= FILLS_LOST;
				break;
			}
			failed++;
			continue;
		}
		/* Bandwidth is the servers's writes: first post to last
		 * completion. End to end adds its generating the data. */
		us = (double)r.server_write_ns / 1e3;
		printf("fill %u: %u page(s) x %s = %" PRIu64
		       " bytes, seed %" PRIu64 "\n"
		       "  writes %.1f us = %.2f Gbit/s (%.3f GB/s); end to end "
		       "%.1f us (request to last immediate)\n"
		       "  verified %" PRIu64 " bytes; %" PRIu64
		       " bytes outside the pages untouched\n",
		       r.id, p.pages,
		       tern_format_size(p.page_size, s1, sizeof(s1)), r.bytes,
		       p.seed, us, (double)r.bytes * 8 / (us * 1e3),
		       (double)r.bytes / (us * 1e3), (double)r.elapsed_ns / 1e3,
		       r.verified, r.untouched);
		fflush(stdout);
		if (*stop_flag) {
			++*next;
			break;
		}
	}
	fill_conn_close(conn);
	return failed;
}

static uint64_t fill_seed(const struct fill_opts *o)
{
	uint64_t seed = o->seed;

	if (!o->have_seed && getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL);
	return seed;
}

/* One connection by bootstrap address: dial, open a ctx, swap cards,
 * fill. */
static int boot_round(struct fill_opts *o, const char *addr, uint64_t seed,
		      uint64_t *next)
{
	struct tern_ctx_attr attr = {
		.provider = o->provider,
		.node = o->node,
		.rails = (unsigned int)o->rails,
		.domains = o->domains,
	};
	struct tern_boot_info theirs;
	struct tern_ctx *ctx;
	int fd, ret;

	ret = cli_boot_client(o->cmd, addr, o->token,
			      (int)TERN_MIN(o->timeout_ms, 10000), &attr, &ctx,
			      &theirs, &fd);
	/* A server that refuses, speaks another protocol or version, or an
	 * address that cannot work: redialling cannot help. */
	if (ret != 0)
		return ret == CLI_BOOT_NOCTX || ret == -TERN_EREFUSED ||
				       ret == -EINVAL || ret == -TERN_EPROTO ||
				       ret == -TERN_EVERSION
			       ? FILLS_FATAL
			       : FILLS_LOST;
	/* The welcome's ticket goes back in the CONNECT: a --token server
	 * admits only the connection that passed the handshake. */
	ret = run_fills(ctx, o, theirs.card, theirs.card_len, theirs.ticket,
			theirs.ticket_len, fd, seed, next);
	tern_ctx_close(ctx);
	close(fd);
	return ret;
}

/* tern fill HOST:PORT [--reconnect S] */
static int fill_by_addr(struct fill_opts *o, const char *addr)
{
	uint64_t seed = fill_seed(o), next = 0, redials = 0, bad = 0;
	uint64_t lost_at = 0, deadline = 0;
	int ret;

	for (;;) {
		uint64_t t0, before = next;

		ret = boot_round(o, addr, seed, &next);
		bad += (uint64_t)(ret & FILLS_COUNT);
		if (!(ret & FILLS_LOST) || *stop_flag || o->reconnect_s == 0)
			break;
		/* --reconnect S bounds the time without a finished fill, not
		 * each wait: a server that takes TCP but never completes a
		 * fill must not keep us here forever. */
		t0 = tern__now_ns();
		if (next != before || lost_at == 0) {
			lost_at = t0;
			deadline = t0 + o->reconnect_s * 1000000000ULL;
		}
		printf("%s: connection lost before fill %" PRIu64
		       " was done; trying %s again for up to %.0f s\n",
		       o->cmd, next + 1, addr,
		       (double)(deadline > t0 ? deadline - t0 : 0) / 1e9);
		fflush(stdout);
		/* At least a breath between rounds, then wait for a server. */
		nanosleep(&(struct timespec){ 0, 300000000 }, NULL);
		if (fill_boot_wait(addr, deadline, stop_flag) != 0) {
			cli_err(o->cmd,
				"no fill done at %s within %" PRIu64 " s of "
				"losing the connection; giving up",
				addr, o->reconnect_s);
			break;
		}
		redials++;
		printf("%s: %s takes clients again after %.1f s; reconnecting "
		       "(fill %" PRIu64 " is redone)\n",
		       o->cmd, addr, (double)(tern__now_ns() - t0) / 1e9,
		       next + 1);
		fflush(stdout);
	}
	printf("%s: %" PRIu64 " of %" PRIu64 " fill(s) verified; %" PRIu64
	       " failed (refused, or their check); %" PRIu64
	       " not done; %" PRIu64 " reconnect(s)\n",
	       o->cmd, next - bad, o->count, bad, o->count - next, redials);
	return bad == 0 && next == o->count ? 0 : 1;
}

int cmd_fill(int argc, char **argv)
{
	uint8_t card[TERN_CARD_MAX];
	const char *peer;
	struct tern_ctx *ctx;
	struct fill_opts o;
	size_t card_len;
	int ret;

	defaults(&o, "fill");
	ret = parse(argc, argv, &o);
	if (ret != CLI_GO)
		return ret;
	if (check_role(&o) != 0)
		return 2;
	if (o.server)
		return fill_listen(&o, optind < argc ? argv[optind] : NULL);
	if (cli_args("fill", argc, argv, CLI_ARG_PEER, &peer) != 0)
		return 2;
	if (cli_token("fill", o.token, &o.token) != 0 ||
	    fill_shape_check(&o) != 0)
		return 2;
	if (peer != NULL && o.card_file == NULL && tern_boot_is_addr(peer)) {
		if (cli_addr_check("fill", "peer", peer) != 0)
			return 2;
		stop_flag = cli_catch_signals();
		return fill_by_addr(&o, peer);
	}
	if (o.reconnect_s != 0) {
		cli_err("fill", "--reconnect needs a HOST:PORT server address");
		return 2;
	}
	if (cli_card_read("fill", o.card_file, peer, card, &card_len) != 0)
		return 2;
	stop_flag = cli_catch_signals();
	if (open_ctx(&o, o.cmd, &ctx) != 0)
		return 1;
	{
		uint64_t next = 0;

		ret = run_fills(ctx, &o, card, card_len, NULL, 0, -1,
				fill_seed(&o), &next);
	}
	tern_ctx_close(ctx);
	return ret != 0 ? 1 : 0;
}

int cmd_demo(int argc, char **argv)
{
	char hex[2 * TERN_CARD_MAX + 2], rails[24];
	uint8_t card[TERN_CARD_MAX];
	int cardfd, status, ret;
	struct tern_ctx *ctx;
	struct fill_opts o;
	ssize_t card_len;
	pid_t pid;

	defaults(&o, "demo");
	o.provider = "shm";
	ret = parse(argc, argv, &o);
	if (ret != CLI_GO)
		return ret;
	if (fill_shape_check(&o) != 0)
		return 2;
	if (o.node == NULL && strncmp(o.provider, "tcp", 3) == 0)
		o.node = "127.0.0.1";
	stop_flag = cli_catch_signals();
	snprintf(rails, sizeof(rails), "%" PRIu64, o.rails);
	printf("demo: starting `tern fill --listen --once` and a client over "
	       "%s\n",
	       o.provider);
	fflush(stdout);
	{
		/* The server is a real second process: this binary again. */
		const char *args[] = { "tern",
				       "fill",
				       "--listen",
				       "--once",
				       "--provider",
				       o.provider,
				       "--rails",
				       o.rails_arg ? o.rails_arg : rails,
				       "--card-file",
				       "{path}",
				       o.node ? "--node" : NULL,
				       o.node,
				       NULL };

		pid = cli_spawn(args, 0, NULL, &cardfd);
	}
	if (pid < 0) {
		cli_err("demo", "could not start the server: %s",
			strerror(errno));
		return 1;
	}
	ret = cli_read_line(cardfd, hex, sizeof(hex), 20000);
	close(cardfd);
	if (ret != 0) {
		cli_err("demo", "the server did not start (no card): see its "
				"messages above");
		kill(pid, SIGTERM);
		waitpid(pid, &status, 0);
		return 1;
	}
	card_len = tern_hex_decode(hex, card, sizeof(card));
	ret = 1;
	if (card_len > 0 && open_ctx(&o, o.cmd, &ctx) == 0) {
		uint64_t next = 0;

		ret = run_fills(ctx, &o, card, (size_t)card_len, NULL, 0, -1,
				fill_seed(&o), &next) != 0;
		tern_ctx_close(ctx);
	}
	/* The server exits after our goodbye; do not wait forever. */
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			goto reaped;
		usleep(100000);
	}
	cli_err("demo", "server did not exit; stopping it");
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	return 1;
reaped:
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		cli_err("demo", "server failed (status %d)", status);
		return 1;
	}
	printf("demo: %s\n", ret == 0 ? "OK: both sides done, every byte "
					"verified"
				      : "FAILED");
	return ret;
}
