/* SPDX-License-Identifier: MIT */
/* tern bench: bandwidth, message rate and latency percentiles. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "cli.h"
#include "common.h"
#include "engine.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tern bench [--peer CARD|HOST:PORT | --listen "
		"[HOST:PORT]] "
		"[--op OP] "
		"[--sizes LIST|all]\n"
		"                  [--window N] [--iters N | --duration S] "
		"[--warmup N]\n"
		"                  [--rails N|gpu=N|LIST] [--pin] [--provider "
		"P] [--node "
		"ADDR] "
		"[--verify]\n"
		"                  [--mem host|cuda[:N]] [--peer-mem "
		"host|cuda[:N]]\n"
		"                  [--json FILE] [--csv FILE] [--plot "
		"FILE.svg]\n\n"
		"Measure bandwidth (Gbit/s and GB/s, 10^9), %% of the link "
		"speed libfabric\nreports, message rate (Mpps) and "
		"post-to-completion latency (min, p50,\np99, p99.9, max, "
		"and the first, cold operation) per size, with a window\nof "
		"operations in flight. With neither --peer nor --listen, a "
		"local peer\nprocess is started (same provider).\n\n"
		"  -o, --op OP          write (default), writedata (write "
		"with immediate),\n"
		"                       read, send, atomic (64-bit "
		"fetch-add; size 8)\n"
		"  -s, --sizes LIST     e.g. 8,64,4K,64K,1M,16M (the "
		"default), or all\n"
		"                       (8 B to 16 MiB, powers of two)\n"
		"  -w, --window N       operations in flight (default 64)\n"
		"  -n, --iters N        timed operations per size (default: "
		"by size,\n"
		"                       100000 at 8 B down to 200 at 16 MiB)\n"
		"  -d, --duration S     instead of --iters: seconds per size\n"
		"      --warmup N       untimed operations first (default "
		"iters/10, >= 16)\n"
		"      --verify         fill sources from MT19937-64 and "
		"check the\n"
		"                       destination after each size\n"
		"      --mem M          this side's buffers: host (default), "
		"cuda (GPU 0)\n"
		"                       or cuda:N; with --listen, the target "
		"region. GPU\n"
		"                       memory goes zero-copy where the "
		"provider has\n"
		"                       FI_HMEM, else staged through host "
		"memory (the\n"
		"                       table says which)\n"
		"      --peer-mem M     the local peer's target region, as "
		"--mem (a\n"
		"                       --listen peer takes its own --mem)\n"
		"      --json FILE      every figure and the run's context\n"
		"      --csv FILE       one line per size\n"
		"      --plot FILE.svg  bandwidth and p99 latency against "
		"size\n"
		"      --peer CARD      run against `tern bench --listen` "
		"elsewhere; a\n"
		"                       HOST:PORT gets its card over TCP "
		"(the socket\n"
		"                       then tells when the peer goes)\n"
		"      --listen [ADDR]  be the peer: print the card, serve "
		"runs; with\n"
		"                       HOST:PORT also hand the card out over "
		"TCP there\n"
		"      --token T        bootstrap shared secret (default "
		"$TERN_TOKEN)\n"
		"      --card-file FILE write (--listen) or read (--peer -) "
		"the card\n"
		"  -p, --provider NAME  efa, verbs, tcp, shm (default: the "
		"best present)\n"
		"      --node ADDR      local address to bind (tcp)\n"
		"      --rails N|gpu=N|DOMAIN,DOMAIN...\n"
		"                       N endpoints on one domain (default "
		"1), the NICs\n"
		"                       tern topo maps to GPU N, or one rail "
		"per listed\n"
		"                       domain; writes and reads above 128 KiB "
		"are\n"
		"                       striped over them\n"
		"                       ($TERN_STRIPE_CHUNK)\n"
		"      --pin            pin this thread near the NIC "
		"(shm/tcp:\n"
		"                       its NUMA node) before opening domains\n"
		"      --wait-fd        open the completion queues with wait "
		"fds, as a\n"
		"                       default tern ctx does, instead of "
		"busy polling\n"
		"                       without them (like ib_write_bw "
		"--use_event: what\n"
		"                       being able to sleep costs; on tcp "
		"an epoll set)\n"
		"  -h, --help           this text\n\n"
		"Environment: TERN_BENCH_CPUS=A,B runs this process on CPU A "
		"and the local\npeer on CPU B; TERN_BENCH_TARGET_PAUSE=N makes "
		"the target spin N pause\ninstructions after each progress "
		"pass that completed nothing (as bench/raw\n--target-pause; "
		"on tcp the target's poll rate moves write bandwidth).\n");
}

static int parse_sizes(const char *list, struct bench_opts *o)
{
	char *copy, *save = NULL, *tok;
	int ret = 0;

	if (strcmp(list, "all") == 0) {
		o->nsizes = 0;
		for (uint64_t s = 8; s <= (16u << 20); s *= 2)
			o->sizes[o->nsizes++] = s;
		return 0;
	}
	copy = strdup(list);
	if (copy == NULL)
		return -ENOMEM;
	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok && ret == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == BENCH_MAX_SIZES) {
			cli_err("bench", "at most %d sizes", BENCH_MAX_SIZES);
			ret = -EINVAL;
			break;
		}
		ret = cli_size("bench", "--sizes", tok, 1, BENCH_MAX_SIZE,
			       &o->sizes[o->nsizes++]);
	}
	free(copy);
	if (ret == 0 && o->nsizes == 0)
		ret = -EINVAL;
	return ret;
}

static int write_file(const char *path, const struct bench_report *r,
		      int (*fn)(FILE *, const struct bench_report *))
{
	FILE *f = fopen(path, "w");
	int ret;

	if (f == NULL) {
		cli_err("bench", "%s: %s", path, strerror(errno));
		return -errno;
	}
	ret = fn(f, r);
	if (fclose(f) != 0 && ret == 0)
		ret = -EIO;
	if (ret != 0)
		cli_err("bench", "writing %s: %s", path, strerror(-ret));
	return ret;
}

/* --peer HOST:PORT: the bootstrap socket closing means the peer is gone;
 * the run stops (and says so) instead of waiting out its timeout. */
static volatile sig_atomic_t *bench_stop;
static int peer_gone;
static struct tern_io live;

static void peer_left(struct tern_io *io, unsigned int events)
{
	char junk[64];
	ssize_t k = recv(io->fd, junk, sizeof(junk), MSG_DONTWAIT);

	(void)events;
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	peer_gone = 1;
	*bench_stop = 1;
	tern_io_stop(io);
}

/* Start `tern bench --listen --once` as a second process; its card. */
static pid_t spawn_peer(const char *prov, const char *node, const char *rails,
			const char *mem, int wait_fd, char *hex, size_t hexlen)
{
	char path[32];
	int p[2];
	pid_t pid, parent;
	FILE *f;

	if (pipe(p) != 0)
		return -1;
	parent = getpid();
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		/* A peer whose measuring process died (killed, crashed)
		 * must not stay behind polling forever. (Its parent may be
		 * pid 1 itself, as a container's first process is.) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		bench_split_cpus("tern bench", 1);
		close(p[0]);
		snprintf(path, sizeof(path), "/dev/fd/%d", p[1]);
		/* Its log would mix into our table: keep errors only. */
		if (devnull >= 0)
			dup2(devnull, 1);
		execl("/proc/self/exe", "tern", "bench", "--listen", "--once",
		      "--provider", prov ? prov : "auto", "--node",
		      node ? node : "", "--rails", rails, "--mem", mem,
		      "--card-file", path, wait_fd ? "--wait-fd" : (char *)NULL,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	bench_split_cpus("tern bench", 0);
	f = fdopen(p[0], "r");
	if (pid < 0 || f == NULL || fgets(hex, (int)hexlen, f) == NULL) {
		if (f != NULL)
			fclose(f);
		return -1;
	}
	fclose(f);
	hex[strcspn(hex, "\r\n")] = '\0';
	return pid;
}

/* --mem/--peer-mem @val: parse it, and where it is CUDA, check that CUDA
 * is there with the device. @return 0 or -1 (said why). */
static int parse_mem(const char *opt, const char *val, struct bench_mem *m)
{
	struct tern_mem_info mi;

	if (bench_mem_parse(val, m) != 0) {
		cli_err("bench",
			"%s '%s': expected host, cuda or cuda:N (N a CUDA "
			"device number)",
			opt, val);
		return -1;
	}
	if (m->kind != TERN_MEM_CUDA)
		return 0;
	if (tern_mem_probe(TERN_MEM_CUDA, &mi) != 0 || !mi.available) {
		cli_err("bench", "%s %s: CUDA not available: %s", opt, val,
			mi.why[0] ? mi.why : "unknown reason");
		return -1;
	}
	if (m->device >= mi.devices) {
		cli_err("bench", "%s %s: no such device (%d CUDA device%s)",
			opt, val, mi.devices, mi.devices == 1 ? "" : "s");
		return -1;
	}
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	enum {
		OPT_NODE = 256,
		OPT_WARM,
		OPT_VERIFY,
		OPT_JSON,
		OPT_CSV,
		OPT_PLOT,
		OPT_PEER,
		OPT_LISTEN,
		OPT_TOKEN,
		OPT_ONCE,
		OPT_CARD,
		OPT_RAILS,
		OPT_PIN,
		OPT_LOG,
		OPT_MEM,
		OPT_PEER_MEM,
		OPT_WAIT_FD
	};
	static const struct option lo[] = {
		{ "op", required_argument, NULL, 'o' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, OPT_WARM },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "json", required_argument, NULL, OPT_JSON },
		{ "csv", required_argument, NULL, OPT_CSV },
		{ "plot", required_argument, NULL, OPT_PLOT },
		{ "peer", required_argument, NULL, OPT_PEER },
		{ "listen", optional_argument, NULL, OPT_LISTEN },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "card-file", required_argument, NULL, OPT_CARD },
		{ "rails", required_argument, NULL, OPT_RAILS },
		{ "pin", no_argument, NULL, OPT_PIN },
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, OPT_NODE },
		{ "log", required_argument, NULL, OPT_LOG },
		{ "mem", required_argument, NULL, OPT_MEM },
		{ "peer-mem", required_argument, NULL, OPT_PEER_MEM },
		{ "wait-fd", no_argument, NULL, OPT_WAIT_FD },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_opts o = {
		.op = BENCH_WRITE,
		.nsizes = 6,
		.sizes = { 8, 64, 4096, 65536, 1 << 20, 16 << 20 },
		.window = 64,
		.seed = 5489,
	};
	const char *prov = NULL, *node = NULL, *peer_hex = NULL;
	const char *json = NULL, *csv = NULL, *plot = NULL, *card_file = NULL;
	const char *listen_addr = NULL, *token = NULL, *domains = NULL;
	const char *peer_mem_s = NULL;
	struct bench_mem peer_mem = { .kind = TERN_MEM_HOST };
	uint64_t ctx_flags;
	struct tern_boot_server *boot = NULL;
	struct tern_boot_info theirs;
	int boot_fd = -1;
	char lhost[64];
	char rails_s[TERN_MAX_RAILS * 64] = "1", hex[2 * TERN_CARD_MAX + 2],
				      why[256] = "";
	int c, ret = 0, listen = 0, once = 0, have_warm = 0;

	struct bench_report *rep;
	uint64_t v, rails = 1;
	int pin = 0, wait_fd = 0;
	uint8_t card[TERN_CARD_MAX];
	struct tern_ctx *ctx;
	volatile sig_atomic_t *stop;
	pid_t peer_pid = 0;
	ssize_t card_len = 0;

	while ((c = getopt_long(argc, argv, "o:s:w:n:d:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.op = bench_op_parse(optarg);
			if (o.op < 0) {
				cli_err("bench", "--op: write, writedata, "
						 "read, send or atomic");
				ret = -EINVAL;
			}
			break;
		case 's':
			ret = parse_sizes(optarg, &o);
			break;
		case 'w':
			ret = cli_uint("bench", "--window", optarg, 1,
				       BENCH_MAX_WINDOW, &v);
			o.window = (unsigned int)v;
			break;
		case 'n':
			ret = cli_uint("bench", "--iters", optarg, 1,
				       1000000000, &o.iters);
			break;
		case 'd':
			o.duration_s = strtod(optarg, NULL);
			if (!(o.duration_s > 0 && o.duration_s <= 3600)) {
				cli_err("bench", "--duration: seconds, 0 to "
						 "3600");
				ret = -EINVAL;
			}
			break;
		case OPT_WARM:
			ret = cli_uint("bench", "--warmup", optarg, 0,
				       1000000000, &o.warmup);
			have_warm = 1;
			break;
		case OPT_VERIFY:
			o.verify = 1;
			break;
		case OPT_JSON:
			json = optarg;
			break;
		case OPT_CSV:
			csv = optarg;
			break;
		case OPT_PLOT:
			plot = optarg;
			break;
		case OPT_PEER:
			peer_hex = optarg;
			break;
		case OPT_LISTEN:
			listen = 1;
			/* "--listen HOST:PORT" as well as "--listen=..." */
			if (optarg == NULL && optind < argc &&
			    argv[optind][0] != '-' &&
			    tern_boot_is_addr(argv[optind]))
				optarg = argv[optind++];
			listen_addr = optarg;
			break;
		case OPT_TOKEN:
			token = optarg;
			break;
		case OPT_ONCE:
			once = 1;
			break;
		case OPT_CARD:
			card_file = optarg;
			break;
		case OPT_WAIT_FD:
			wait_fd = 1;
			break;
		case OPT_PIN:
			pin = 1;
			break;
		case OPT_RAILS:
			ret = cli_rails("bench", optarg, &rails, &domains);
			snprintf(rails_s, sizeof(rails_s), "%s", optarg);
			break;
		case 'p':
			prov = strcmp(optarg, "auto") ? optarg : NULL;
			break;
		case OPT_NODE:
			node = optarg[0] ? optarg : NULL;
			break;
		case OPT_LOG:
			ret = cli_log("bench", optarg);
			break;
		case OPT_MEM:
			ret = parse_mem("--mem", optarg, &o.mem);
			break;
		case OPT_PEER_MEM:
			peer_mem_s = optarg;
			ret = parse_mem("--peer-mem", optarg, &peer_mem);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (ret != 0)
			return 2;
	}
	if (optind != argc) {
		cli_err("bench", "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (o.iters && o.duration_s > 0) {
		cli_err("bench", "--iters and --duration exclude each other");
		return 2;
	}
	if (token != NULL && listen && listen_addr == NULL) {
		cli_err("bench", "--token needs --listen HOST:PORT (it is "
				 "checked in the TCP handshake)");
		return 2;
	}
	if (peer_mem_s != NULL && (listen || peer_hex != NULL)) {
		cli_err("bench", "--peer-mem sets the local peer's memory: a "
				 "--listen peer takes its own --mem");
		return 2;
	}
	ctx_flags = pin ? TERN_CTX_PIN : 0;
	/* Busy polling, as ib_write_bw and fi_rma_bw do: the completion
	 * queues get no wait fd. With one, the tcp provider keeps its
	 * sockets in an epoll set, and every packet then runs the epoll
	 * callback in the kernel: 4-10% of the 8 B message rate on loopback
	 * (docs/performance.md). --wait-fd measures that mode. Between
	 * runs the loop still sleeps, in short steps. */
	if (!wait_fd)
		ctx_flags |= TERN_CTX_BUSY_POLL;
	/* GPU memory: ask the provider to reach it (FI_HMEM); without, tern
	 * stages it. Atomics on a GPU target need FI_HMEM: asked here to
	 * learn whether the provider has it. */
	if (o.mem.kind == TERN_MEM_CUDA ||
	    (o.op == BENCH_ATOMIC && peer_mem.kind == TERN_MEM_CUDA))
		ctx_flags |= TERN_CTX_HMEM;
	token = cli_token(token);
	stop = cli_catch_signals();
	bench_stop = stop;
	if (peer_hex != NULL && tern_boot_is_addr(peer_hex)) {
		struct tern_ctx_attr attr = {
			.provider = prov,
			.node = node,
			.rails = (unsigned)rails,
			.domains = domains,
			.flags = ctx_flags,
		};

		ret = cli_boot_client("bench", peer_hex, token, 10000, &attr,
				      &ctx, &theirs, &boot_fd);
		if (ret != 0)
			return 1;
	} else {
		if (listen)
			node = cli_listen_node(prov, node, listen_addr, lhost,
					       sizeof(lhost));
		ret = tern_ctx_open(
			&(struct tern_ctx_attr){ .provider = prov,
						 .node = node,
						 .rails = (unsigned)rails,
						 .domains = domains,
						 .flags = ctx_flags },
			&ctx);
		if (ret != 0) {
			cli_err("bench", "cannot open a ctx: %s",
				tern_strerror(ret));
			return 1;
		}
	}
	/* It spins while it measures (the engine switches busy polling on
	 * around runs), and sleeps between them. */
	tern_ctx_set_busy_poll(ctx, 0);
	if (pin) {
		struct tern_ctx_info ci;

		tern_ctx_query(ctx, &ci);
		printf("bench: pinned: %s\n",
		       ci.pinned[0] ? ci.pinned : "no (see the warning)");
	}
	if (listen) {
		char h2[2 * TERN_CARD_MAX + 1];

		card_len = tern_ctx_card(ctx, card, sizeof(card));
		tern_hex_encode(card, (size_t)card_len, h2, sizeof(h2));
		printf("bench: listening; card: %s\nrun:  tern bench --peer "
		       "%s\n",
		       h2, h2);
		fflush(stdout);
		if (cli_card_write("bench", card_file, h2) != 0 ||
		    (listen_addr != NULL &&
		     cli_boot_serve("bench", ctx, listen_addr, token, &boot))) {
			tern_ctx_close(ctx);
			return 1;
		}
		ret = bench_serve(ctx, stop, once, &o.mem, stdout);
		tern_boot_server_close(boot);
		tern_ctx_close(ctx);
		return ret == 0 ? 0 : 1;
	}
	if (boot_fd >= 0) {
		memcpy(card, theirs.card, theirs.card_len);
		card_len = (ssize_t)theirs.card_len;
		tern_io_start(ctx, &live, boot_fd, TERN_IO_READ, peer_left,
			      NULL);
	} else if (peer_hex == NULL) {
		struct tern_ctx_info ci;

		tern_ctx_query(ctx, &ci);
		if (o.op == BENCH_ATOMIC && peer_mem.kind == TERN_MEM_CUDA &&
		    !ci.hmem) {
			cli_err("bench",
				"--peer-mem %s: --op atomic needs host memory "
				"on the target, or a provider with FI_HMEM "
				"(%s has none here)",
				peer_mem_s, ci.provider);
			tern_ctx_close(ctx);
			return 2;
		}
		peer_pid = spawn_peer(prov, node, rails_s,
				      peer_mem_s ? peer_mem_s : "host", wait_fd,
				      hex, sizeof(hex));
		if (peer_pid < 0) {
			cli_err("bench", "could not start the local peer");
			tern_ctx_close(ctx);
			return 1;
		}
		peer_hex = hex;
	}
	if (boot_fd < 0)
		card_len = tern_hex_decode(peer_hex, card, sizeof(card));
	if (card_len <= 0) {
		cli_err("bench", "--peer: the hex card `tern bench --listen` "
				 "printed");
		ret = -EINVAL;
	}
	rep = calloc(1, sizeof(*rep));
	if (ret == 0 && rep != NULL) {
		o.progress = isatty(2);
		o.stop = stop;
		if (!have_warm)
			o.warmup = BENCH_AUTO;
		snprintf(rep->ctx.command, sizeof(rep->ctx.command),
			 "tern bench");
		ret = bench_run(ctx, card, (size_t)card_len, &o, rep, why,
				sizeof(why));
		if (rep->npoints > 0) {
			for (int i = 0; i < argc; i++) {
				size_t l = strlen(rep->ctx.command);

				snprintf(rep->ctx.command + l,
					 sizeof(rep->ctx.command) - l, "%s%s",
					 i ? " " : "", i ? argv[i] : "");
			}
			bench_print_table(stdout, rep);
			if (json != NULL)
				write_file(json, rep, bench_write_json);
			if (csv != NULL)
				write_file(csv, rep, bench_write_csv);
			if (plot != NULL)
				write_file(plot, rep, bench_write_svg);
		}
		if (peer_gone) {
			cli_err("bench", "peer gone: it closed its bootstrap "
					 "connection");
			ret = -TERN_EPEERGONE;
		} else if (ret != 0) {
			cli_err("bench", "%s",
				why[0] ? why : tern_strerror(ret));
		}
	}
	free(rep);
	if (boot_fd >= 0)
		tern_io_stop(&live);
	if (peer_gone)
		tern_ctx_settle(ctx, 300);
	tern_ctx_close(ctx);
	if (boot_fd >= 0)
		close(boot_fd);
	if (peer_pid > 0) {
		int st;

		for (int i = 0; i < 50 && waitpid(peer_pid, &st, WNOHANG) == 0;
		     i++)
			usleep(100000);
		if (waitpid(peer_pid, &st, WNOHANG) == 0) {
			kill(peer_pid, SIGTERM);
			waitpid(peer_pid, &st, 0);
		}
	}
	return ret == 0 ? 0 : 1;
}
