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
#include "cli.h"

/* Set by Ctrl-C (cli_catch_signals). */
static volatile sig_atomic_t *stop_flag;

struct net_opts {
	const char *cmd;
	const char *provider;
	const char *node;
	const char *card_file;
};

static int open_ctx(const struct net_opts *o, uint64_t flags,
		    struct tern_ctx **ctx_p)
{
	struct tern_ctx_attr attr = {
		.provider = o->provider,
		.node = o->node,
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
	printf("card: %s\nrun:  tern %s %s --provider %s\n", hex, o->cmd, hex,
	       o->provider ? o->provider : "<same>");
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

static void ping_usage(FILE *f)
{
	fprintf(f,
		"usage: tern ping serve [--provider P] [--node ADDR] "
		"[--card-file FILE]\n"
		"                       [--listen HOST:PORT [--token T]]\n"
		"       tern ping <card-hex>|HOST:PORT [--mode send|write] "
		"[--sizes "
		"LIST | --size N]\n"
		"                 [--iters N] [--warmup N] [--provider P]\n\n"
		"Latency ping-pong (like ibv_rc_pingpong / fi_rdm_pingpong). "
		"Modes: send\n(send/recv) and write (RDMA write with "
		"immediate, counted by the peer).\nPrints per size the "
		"half round trip in microseconds (min, p50, p99,\np99.9, "
		"max) and round trips per second. Both sides busy-poll "
		"while\nmeasuring.\n\n"
		"  -m, --mode MODE      send (default) or write\n"
		"      --sizes LIST     e.g. 8,64,4K,64K,1M (default 8,64,"
		"512,4K,64K)\n"
		"  -s, --size N         one size\n"
		"  -i, --iters N        timed round trips per size (default "
		"1000)\n"
		"  -w, --warmup N       untimed round trips first (default "
		"100)\n"
		"  -p, --provider NAME  efa, verbs, tcp, shm\n"
		"      --node ADDR      local address to bind (tcp)\n"
		"      --card-file FILE write (serve) or read (client) the "
		"card\n"
		"      --listen ADDR    serve: also hand the card out over "
		"TCP at HOST:PORT\n"
		"      --token T        bootstrap shared secret (default "
		"$TERN_TOKEN)\n"
		"  -h, --help           this text\n");
}

static int parse_sizes(const char *list, struct app_ping_params *p)
{
	char *copy = strdup(list), *save = NULL, *tok;
	int ret = 0;

	if (copy == NULL)
		return -ENOMEM;
	p->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok != NULL && ret == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (p->nsizes == APP_PING_MAX_SIZES) {
			cli_err("ping", "at most %d sizes", APP_PING_MAX_SIZES);
			ret = -EINVAL;
			break;
		}
		ret = cli_size("ping", "--sizes", tok, 1, APP_PING_MAX_SIZE,
			       &v);
		p->sizes[p->nsizes++] = (uint32_t)v;
	}
	free(copy);
	if (ret == 0 && p->nsizes == 0) {
		cli_err("ping", "--sizes: empty list");
		ret = -EINVAL;
	}
	return ret;
}

int cmd_ping(int argc, char **argv)
{
	enum { OPT_NODE = 256, OPT_CARD, OPT_SIZES, OPT_LISTEN, OPT_TOKEN };
	static const struct option lo[] = {
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "mode", required_argument, NULL, 'm' },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'i' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, OPT_NODE },
		{ "card-file", required_argument, NULL, OPT_CARD },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct app_ping_params p = {
		.mode = APP_PING_SEND,
		.iters = 1000,
		.warmup = 100,
		.nsizes = 5,
		.sizes = { 8, 64, 512, 4096, 65536 },
	};
	struct net_opts o = { .cmd = "ping" };
	struct app_ping_result res[APP_PING_MAX_SIZES];
	const char *listen = NULL, *token = NULL;
	struct tern_boot_info theirs;
	int boot_fd = -1;
	char lhost[64];
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	size_t card_len;
	char why[256];
	uint64_t v;
	int c, ret = 0;

	while ((c = getopt_long(argc, argv, "m:s:i:w:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "send") == 0) {
				p.mode = APP_PING_SEND;
			} else if (strcmp(optarg, "write") == 0) {
				p.mode = APP_PING_WRITE;
			} else {
				cli_err("ping", "--mode: send or write");
				ret = -EINVAL;
			}
			break;
		case OPT_SIZES:
			ret = parse_sizes(optarg, &p);
			break;
		case 's':
			ret = cli_size("ping", "--size", optarg, 1,
				       APP_PING_MAX_SIZE, &v);
			p.nsizes = 1;
			p.sizes[0] = (uint32_t)v;
			break;
		case 'i':
			ret = cli_uint("ping", "--iters", optarg, 1,
				       APP_PING_MAX_ITERS, &v);
			p.iters = (uint32_t)v;
			break;
		case 'w':
			ret = cli_uint("ping", "--warmup", optarg, 0,
				       APP_PING_MAX_ITERS, &v);
			p.warmup = (uint32_t)v;
			break;
		case 'p':
			o.provider = optarg;
			break;
		case OPT_NODE:
			o.node = optarg;
			break;
		case OPT_CARD:
			o.card_file = optarg;
			break;
		case OPT_LISTEN:
			listen = optarg;
			break;
		case OPT_TOKEN:
			token = optarg;
			break;
		case 'h':
			ping_usage(stdout);
			return 0;
		default:
			ping_usage(stderr);
			return 2;
		}
		if (ret != 0)
			return 2;
	}
	if (argc - optind > 1) {
		cli_err("ping", "unexpected argument '%s'", argv[optind + 1]);
		return 2;
	}
	if (token != NULL && listen == NULL && optind < argc &&
	    strcmp(argv[optind], "serve") == 0) {
		cli_err("ping", "--token needs --listen (it is checked in the "
				"TCP handshake)");
		return 2;
	}
	token = cli_token(token);
	stop_flag = cli_catch_signals();
	if (optind < argc && strcmp(argv[optind], "serve") == 0) {
		struct tern_boot_server *boot = NULL;

		o.node = cli_listen_node(o.provider, o.node, listen, lhost,
					 sizeof(lhost));
		/* Opened busy-polling, so its completion queues have no wait
		 * fd: on tcp a CQ with one makes the provider poll an epoll
		 * set and signal it on every completion, and the server's
		 * half of each round trip took about 0.5 us longer
		 * (docs/performance.md). Between clients it still sleeps,
		 * in growing steps up to 1 ms, instead of spinning. */
		if (open_ctx(&o, TERN_CTX_BUSY_POLL, &ctx) != 0)
			return 1;
		tern_ctx_set_busy_poll(ctx, 0);
		ret = announce(&o, ctx);
		if (ret == 0 && listen != NULL)
			ret = cli_boot_serve("ping", ctx, listen, token, &boot);
		if (ret == 0) {
			printf("serving ping clients, one at a time; Ctrl-C to "
			       "stop\n");
			fflush(stdout);
			ret = app_ping_server(ctx, stop_flag, stdout);
		}
		tern_boot_server_close(boot);
		tern_ctx_close(ctx);
		return ret == 0 ? 0 : 1;
	}
	if (listen != NULL) {
		cli_err("ping", "--listen is for `tern ping serve`");
		return 2;
	}
	if (optind < argc && o.card_file == NULL &&
	    tern_boot_is_addr(argv[optind])) {
		struct tern_ctx_attr attr = {
			.provider = o.provider,
			.node = o.node,
			.flags = TERN_CTX_BUSY_POLL,
		};

		if (cli_boot_client("ping", argv[optind], token, 10000, &attr,
				    &ctx, &theirs, &boot_fd) != 0)
			return 1;
		memcpy(card, theirs.card, theirs.card_len);
		card_len = theirs.card_len;
	} else {
		if (load_card(&o, optind < argc ? argv[optind] : NULL, card,
			      &card_len) != 0)
			return 2;
		if (open_ctx(&o, TERN_CTX_BUSY_POLL, &ctx) != 0)
			return 1;
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
	return ret == 0 ? 0 : 1;
}

/* --- atomic ----------------------------------------------------------------
 */

static void atomic_usage(FILE *f)
{
	fprintf(f, "usage: tern atomic serve [--provider P] [--node ADDR] "
		   "[--card-file FILE]\n"
		   "       tern atomic <card-hex> [--clients N] [--reps R] "
		   "[--provider P]\n\n"
		   "Remote 64-bit atomics. The server exposes a counter and a "
		   "lock word.\nThe client starts N processes; each "
		   "fetch-adds the counter R times\n(16 in flight) and takes "
		   "and releases the lock with compare-and-swap\nR/10 times, "
		   "checking nobody else holds it meanwhile. The counter must\n"
		   "end exactly N*R higher, with every returned old value "
		   "unique.\n\n"
		   "  -n, --clients N      processes (default 4)\n"
		   "  -r, --reps R         fetch-adds per process (default "
		   "1000)\n"
		   "  -p, --provider NAME  efa, verbs, tcp, shm\n"
		   "      --node ADDR      local address to bind (tcp)\n"
		   "      --card-file FILE write (serve) or read (client) the "
		   "card\n"
		   "  -h, --help           this text\n");
}

static uint64_t one_atomic(struct tern_ctx *ctx, struct tern_peer *peer,
			   const struct tern_mr_desc *d, int cas, uint64_t off,
			   uint64_t a, uint64_t b, int *err)
{
	/* Static: one in flight at a time per process, and one that timed
	 * out still belongs to the provider, so no later call reuses it. */
	static struct tern_req req;
	static int lost;
	int ret;

	if (lost) {
		if (*err == 0)
			*err = -ETIMEDOUT;
		return 0;
	}
	tern_req_init(&req, NULL, NULL);
	ret = cas ? tern_atomic_cswap(peer, d, off, a, b, &req)
		  : tern_atomic_fetch_add(peer, d, off, a, &req);
	if (ret == 0)
		ret = tern_wait(ctx, &req, 10000);
	if (ret == -ETIMEDOUT)
		lost = 1;
	if (ret == 0)
		ret = req.status;
	if (ret != 0 && *err == 0) {
		*err = ret;
		cli_err("atomic", "%s: %s%s%s",
			cas ? "compare-swap" : "fetch-add", tern_strerror(ret),
			req.errmsg[0] ? ": " : "", req.errmsg);
	}
	return req.value;
}

/* One worker process: R fetch-adds (old values to @fd), R/10 lock rounds. */
static int atomic_worker(struct tern_ctx *ctx, struct tern_peer *peer,
			 const struct tern_mr_desc *d, uint64_t reps, int fd)
{
	/* Static: one that never completes stays the provider's after we
	 * return (one worker per process). */
	static struct tern_req req[16];
	uint64_t *old = calloc(reps, sizeof(*old)), id = (uint64_t)getpid();
	uint64_t posted = 0, done = 0, rounds = reps / 10 ? reps / 10 : 1;
	int err = 0;

	if (old == NULL)
		return 1;
	while (done < reps && err == 0) {
		/* Ctrl-C: post no more; what is in flight completes below. */
		if (*stop_flag) {
			err = -EINTR;
			break;
		}
		while (posted < reps && posted - done < 16) {
			tern_req_init(&req[posted % 16], NULL, NULL);
			err = tern_atomic_fetch_add(peer, d, APP_ATOMIC_COUNTER,
						    1, &req[posted % 16]);
			if (err != 0)
				break;
			posted++;
		}
		if (err == 0)
			err = tern_wait(ctx, &req[done % 16], 10000);
		if (err == 0)
			err = req[done % 16].status;
		if (err != 0) {
			cli_err("atomic", "fetch-add: %s %s",
				tern_strerror(err), req[done % 16].errmsg);
			break;
		}
		old[done] = req[done % 16].value;
		done++;
	}
	/* Nothing stays in flight on these requests when we leave. */
	for (; done < posted; done++) {
		if (tern_wait(ctx, &req[done % 16], 10000) != 0) {
			err = -ETIMEDOUT;
			goto out;
		}
	}
	if (err == -EINTR)
		goto out;
	for (uint64_t r = 0; r < rounds && err == 0 && !*stop_flag; r++) {
		/* Take the lock, prove we are alone, give it back. */
		while (one_atomic(ctx, peer, d, 1, APP_ATOMIC_LOCK, 0, id,
				  &err) != 0 &&
		       err == 0) {
			if (*stop_flag) { /* no lock taken: nothing to undo */
				err = -EINTR;
				goto out;
			}
		}
		if (err == 0 && one_atomic(ctx, peer, d, 0, APP_ATOMIC_HOLDERS,
					   1, 0, &err) != 0) {
			cli_err("atomic", "two holders of the lock");
			err = -TERN_EVERIFY;
		}
		one_atomic(ctx, peer, d, 0, APP_ATOMIC_HOLDERS, UINT64_MAX, 0,
			   &err);
		if (err == 0 && one_atomic(ctx, peer, d, 1, APP_ATOMIC_LOCK, id,
					   0, &err) != id) {
			cli_err("atomic", "lock stolen");
			err = -TERN_EVERIFY;
		}
	}
	if (*stop_flag)
		err = -EINTR;
	if (err == 0 && write(fd, old, reps * sizeof(*old)) !=
				(ssize_t)(reps * sizeof(*old)))
		err = -EIO;
out:
	free(old);
	return err == 0 ? 0 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int atomic_client(struct net_opts *o, const char *hex, uint64_t n,
			 uint64_t reps)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_mr_desc d;
	struct tern_peer *peer;
	struct tern_ctx *ctx;
	uint64_t *all, before, after;
	size_t card_len;
	char why[256];
	int err = 0, failed = 0;
	pid_t *pids;
	int *fds;

	char cardhex[2 * TERN_CARD_MAX + 1];

	if (load_card(o, hex, card, &card_len) != 0)
		return 2;
	tern_hex_encode(card, card_len, cardhex, sizeof(cardhex));
	if (open_ctx(o, 0, &ctx) != 0)
		return 1;
	if (app_atomic_hello(ctx, card, card_len, &peer, &d, why,
			     sizeof(why)) != 0) {
		cli_err("atomic", "%s", why);
		tern_ctx_close(ctx);
		return 1;
	}
	before = one_atomic(ctx, peer, &d, 0, APP_ATOMIC_COUNTER, 0, 0, &err);
	if (err != 0)
		goto out;
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
		char reps_s[24], fd_s[16];
		int pfd[2];

		if (pipe(pfd) != 0)
			return 1;
		snprintf(reps_s, sizeof(reps_s), "%" PRIu64, reps);
		snprintf(fd_s, sizeof(fd_s), "%d", pfd[1]);
		pids[i] = fork();
		if (pids[i] == 0) {
			/* A process of its own: exec before touching the
			 * fabric. */
			close(pfd[0]);
			execl("/proc/self/exe", "tern", "atomic", cardhex,
			      "--provider", o->provider ? o->provider : "auto",
			      "--node", o->node ? o->node : "", "--reps",
			      reps_s, "--worker-fd", fd_s, (char *)NULL);
			_exit(127);
		}
		close(pfd[1]);
		fds[i] = pfd[0];
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
	after = one_atomic(ctx, peer, &d, 0, APP_ATOMIC_COUNTER, 0, 0, &err);
	if (!failed && err == 0) {
		qsort(all, n * reps, sizeof(*all), cmp_u64);
		for (uint64_t i = 0; i < n * reps; i++) {
			if (all[i] != before + i) {
				cli_err("atomic",
					"old values are not each of "
					"%" PRIu64 "..%" PRIu64 " once",
					before, before + n * reps - 1);
				failed = 1;
				break;
			}
		}
	}
	printf("atomic: counter %" PRIu64 " -> %" PRIu64 " (+%" PRIu64
	       ", expected +%" PRIu64 " = %" PRIu64 ")\n",
	       before, after, after - before, n * reps, n * reps);
	if (!failed && err == 0 && after - before == n * reps)
		printf("atomic: OK: every old value unique, lock taken %" PRIu64
		       " times with never two holders\n",
		       n * (reps / 10 ? reps / 10 : 1));
	else
		failed = 1;
	free(all);
	free(pids);
	free(fds);
out:
	app_atomic_bye(ctx, peer);
	tern_peer_remove(peer);
	tern_ctx_close(ctx);
	return failed || err ? 1 : 0;
}

int cmd_atomic(int argc, char **argv)
{
	enum { OPT_NODE = 256, OPT_CARD, OPT_WORKER };
	static const struct option lo[] = {
		{ "clients", required_argument, NULL, 'n' },
		{ "reps", required_argument, NULL, 'r' },
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, OPT_NODE },
		{ "card-file", required_argument, NULL, OPT_CARD },
		{ "worker-fd", required_argument, NULL, OPT_WORKER },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct net_opts o = { .cmd = "atomic" };
	uint64_t clients = 4, reps = 1000, worker_fd = 0;
	int c, ret = 0, worker = 0;

	while ((c = getopt_long(argc, argv, "n:r:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			ret = cli_uint("atomic", "--clients", optarg, 1, 256,
				       &clients);
			break;
		case 'r':
			ret = cli_uint("atomic", "--reps", optarg, 1, 10000000,
				       &reps);
			break;
		case 'p':
			o.provider = strcmp(optarg, "auto") ? optarg : NULL;
			break;
		case OPT_NODE:
			o.node = optarg[0] ? optarg : NULL;
			break;
		case OPT_CARD:
			o.card_file = optarg;
			break;
		case OPT_WORKER:
			ret = cli_uint("atomic", "--worker-fd", optarg, 3,
				       1 << 20, &worker_fd);
			worker = 1;
			break;
		case 'h':
			atomic_usage(stdout);
			return 0;
		default:
			atomic_usage(stderr);
			return 2;
		}
		if (ret != 0)
			return 2;
	}
	if (argc - optind > 1) {
		cli_err("atomic", "unexpected argument '%s'", argv[optind + 1]);
		return 2;
	}
	stop_flag = cli_catch_signals();
	if (optind < argc && strcmp(argv[optind], "serve") == 0) {
		struct tern_ctx *ctx;
		uint64_t final = 0;

		if (open_ctx(&o, 0, &ctx) != 0)
			return 1;
		ret = announce(&o, ctx);
		if (ret == 0) {
			printf("serving atomics on a counter and a lock word; "
			       "Ctrl-C to stop\n");
			fflush(stdout);
			ret = app_atomic_server(ctx, stop_flag, stdout, &final);
		}
		tern_ctx_close(ctx);
		return ret == 0 ? 0 : 1;
	}
	if (worker) {
		uint8_t card[TERN_CARD_MAX];
		struct tern_mr_desc d;
		struct tern_peer *peer;
		struct tern_ctx *ctx;
		size_t card_len;
		char why[256];

		if (load_card(&o, optind < argc ? argv[optind] : NULL, card,
			      &card_len) != 0)
			return 2;
		ret = tern_ctx_open(
			&(struct tern_ctx_attr){ .provider = o.provider,
						 .node = o.node },
			&ctx);
		if (ret != 0)
			return 1;
		ret = app_atomic_hello(ctx, card, card_len, &peer, &d, why,
				       sizeof(why));
		if (ret == 0) {
			ret = atomic_worker(ctx, peer, &d, reps,
					    (int)worker_fd);
			app_atomic_bye(ctx, peer);
			tern_peer_remove(peer);
		} else {
			cli_err("atomic", "%s", why);
		}
		tern_ctx_close(ctx);
		return ret == 0 ? 0 : 1;
	}
	return atomic_client(&o, optind < argc ? argv[optind] : NULL, clients,
			     reps);
}
