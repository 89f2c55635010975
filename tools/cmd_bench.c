/* SPDX-License-Identifier: MIT */
/* tern bench: bandwidth, message rate and latency percentiles. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "bench/bench_world.h"
#include "cli.h"
#include "opts.h"
#include "common.h"
#include "engine.h"

static void usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f,
		"usage: tern bench [PEER] [--op OP] [--sizes LIST|all] "
		"[--window N]\n"
		"                  [--iters N | --duration S] [--rails R] "
		"[--verify]\n"
		"                  [--implicit | --batch] ...\n"
		"       tern bench [PEER] --op register [--sizes LIST|all] "
		"[--iters N] [--churn N] ...\n"
		"       tern bench --listen [HOST:PORT] [--once] ...\n\n"
		"Measure bandwidth (Gbit/s and GB/s, 10^9), %% of the link "
		"speed libfabric\nreports, message rate (Mpps) and "
		"post-to-completion latency (min, p50,\np99, p99.9, max, "
		"and the first, cold operation) per size, with a window\nof "
		"operations in flight. PEER is a `tern bench --listen`: its "
		"card, or\nHOST:PORT (its card over TCP; the socket then "
		"tells when it goes). With\nno peer, a local peer process is "
		"started (same provider).\n\n");
	cli_opts_help(p, f);
	fprintf(f,
		"\nDefaults: --op write, --sizes 8,64,4K,64K,1M,16M (all: 8 B "
		"to 16 MiB,\npowers of two), --window 64, --iters by size "
		"(100000 at 8 B down to\n200 at 16 MiB), --warmup iters/10 "
		"(>= 16). Writes and reads above 128 KiB\nare striped over "
		"the rails ($TERN_STRIPE_CHUNK).\n"
		"Models: by default every operation has a request of its "
		"own, posted again\nas it completes (explicit). --implicit "
		"posts each window with\ntern_write_nbi(), tern_write_imm_nbi()"
		", tern_read_nbi() (--op atomic:\ntern_atomic_add_nbi(), an "
		"add "
		"that fetches nothing) and completes it with\none tern_quiet()"
		"; each operation's latency is then its window's first\npost "
		"to the quiet's completion. --op send has no implicit form.\n"
		"--batch posts each window as one tern_write_pieces() "
		"(writedata: with\nTERN_PIECES_IMM) or tern_read_pieces(), a "
		"piece per operation and one\nrequest; latency as with "
		"--implicit, to the request's completion. --op\nsend and "
		"--op atomic have no batch form.\n"
		"Environment: TERN_BENCH_CPUS=A,B runs this process on CPU A "
		"and the local\npeer on CPU B; TERN_BENCH_TARGET_PAUSE=N makes "
		"the target spin N pause\ninstructions after each progress "
		"pass that completed nothing (as bench/raw\n--target-pause; "
		"on tcp the target's poll rate moves write bandwidth).\n"
		"--op register: what registering host memory costs, per size "
		"of region\n(default 4K,1M,1G,64G; all: 4 KiB to 64 GiB, "
		"powers of two), each iteration\n(--iters, default 200; "
		"--warmup iters/10, >= 16) on a fresh\nmmap(MAP_NORESERVE) "
		"whose pages are never touched: cold, tern_mr_reg() +\n"
		"tern_mr_close() of it; cached, the same while that region is "
		"open (the\nregistration cache); first-write and "
		"second-write, 4 KiB (or the size)\nfrom its offset 0 to "
		"the peer, post to completion. Min, p50, p99 and max\nin us "
		"per size and measure. --churn N then registers and closes "
		"N ranges,\n1 MiB to 1 GiB in turn, and reports a cycle's "
		"median over the first, middle\nand last tenth. It refuses "
		"--window, --verify, --duration, --mem,\n--implicit, --batch "
		"and "
		"--plot.\n");
}

/* --json=FILE, --csv FILE, --plot FILE: opened (made) before anything
 * runs, so that a path that cannot be written fails at once instead of
 * after the whole run. */
enum { OUT_JSON, OUT_CSV, OUT_PLOT, OUT_N };

/* As typed, up to the file name. */
static const char *const out_flag[OUT_N] = { "--json=", "--csv ", "--plot " };

/* Open every output in @paths into @f. @return 0 or -errno (said why;
 * none left open). */
static int open_outputs(const char *const *paths, FILE **f)
{
	for (int i = 0; i < OUT_N; i++) {
		f[i] = paths[i] != NULL ? fopen(paths[i], "w") : NULL;
		if (paths[i] != NULL && f[i] == NULL) {
			int ret = -errno;

			cli_err("bench", "%s%s: %s", out_flag[i], paths[i],
				strerror(errno));
			while (i-- > 0) {
				if (f[i] != NULL)
					fclose(f[i]);
				f[i] = NULL;
			}
			return ret;
		}
	}
	return 0;
}

/* Write @r with @fn into *@f (when open) and close it. @return 0 or a
 * negative errno (said, with the file's name). */
static int write_output(FILE **f, const char *path, const char *flag,
			const struct bench_report *r,
			int (*fn)(FILE *, const struct bench_report *))
{
	int ret;

	if (*f == NULL)
		return 0;
	ret = fn(*f, r);
	errno = 0;
	if (fclose(*f) != 0 && ret == 0)
		ret = errno > 0 ? -errno : -EIO;
	*f = NULL;
	if (ret != 0)
		cli_err("bench", "%s%s: writing it: %s", flag, path,
			strerror(-ret));
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

static void peer_cpu(void)
{
	bench_split_cpus("tern bench", 1);
}

/* Start `tern bench --listen --once` as a second process; its card. Its
 * log would mix into our table: it keeps errors only. */
static pid_t spawn_peer(const char *prov, const char *node, const char *rails,
			const char *mem, int wait_fd, char *hex, size_t hexlen)
{
	const char *args[] = { "tern",	  "bench",	 "--listen",
			       "--once",  "--provider",	 prov ? prov : "auto",
			       "--rails", rails,	 "--mem",
			       mem,	  "--card-file", "{path}",
			       NULL,	  NULL,		 NULL,
			       NULL };
	size_t n = 12; /* the first NULL: the optional ones from there */
	pid_t pid;
	int fd;

	if (node != NULL) {
		args[n++] = "--node";
		args[n++] = node;
	}
	if (wait_fd)
		args[n++] = "--wait-fd";
	pid = cli_spawn(args, 1, peer_cpu, &fd);
	if (pid < 0)
		return -1;
	bench_split_cpus("tern bench", 0);
	if (cli_read_line(fd, hex, hexlen, 20000) != 0) {
		close(fd);
		cli_reap(pid, 0);
		return -1;
	}
	close(fd);
	return pid;
}

/* --mem/--peer-mem @val: parse it, and where it is CUDA, check that CUDA
 * is there with the device. @return 0 or -1 (said why). */
static int parse_mem(const char *opt, const char *val, struct bench_mem *m)
{
	struct tern_mem_info mi;

	if (bench_mem_parse(val, m) != 0) {
		cli_err("bench",
			"%s '%s': expected host, shared, cuda or cuda:N (N a "
			"CUDA device number)",
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

/* Everything the command line said. */
struct bench_cli {
	struct bench_opts o;
	const char *prov, *node, *peer, *json, *csv, *plot, *card_file;
	const char *listen_addr, *token, *domains, *peer_mem_s, *world;
	const char *sizes_s; /* --sizes as given, NULL: the default */
	struct bench_mem peer_mem;
	FILE *out[OUT_N];
	char rails_s[TERN_MAX_RAILS * 64];
	uint64_t rails;
	int listen, once, have_warm, pin, wait_fd, json_stdout;
	int sizes_all; /* --sizes all: by operation (bench_sizes()) */
	int have_window;
	int implicit, batch; /* --implicit, --batch: o.model once checked */
};

static const int bench_keys[] = {
	'o',
	's',
	'w',
	'n',
	'd',
	CLI_WARMUP,
	CLI_VERIFY,
	CLI_IMPLICIT,
	CLI_BATCH,
	'j',
	CLI_CSV,
	CLI_PLOT,
	CLI_PEER,
	CLI_LISTEN,
	CLI_TOKEN,
	CLI_ONCE,
	CLI_CARD_FILE,
	CLI_RAILS,
	CLI_PIN,
	'p',
	CLI_NODE,
	CLI_LOG,
	CLI_MEM,
	CLI_PEER_MEM,
	CLI_WAIT_FD,
	CLI_WORLD,
	CLI_CHURN,
	'h',
	0,
};

/* One option of what is measured into @b. @return 0, or -EINVAL (said
 * why). */
static int bench_run_option(struct bench_cli *b, int c, const char *arg)
{
	struct bench_opts *o = &b->o;
	uint64_t v;
	int ret = 0;

	switch (c) {
	case 'o':
		o->op = bench_op_parse(arg);
		if (o->op < 0) {
			cli_err("bench",
				"--op %s: write, writedata, read, "
				"send, atomic or register",
				arg);
			ret = -EINVAL;
		}
		break;
	case 's':
		/* Up to --op register's largest: bench_check() holds the
		 * other operations to theirs once --op is known. */
		b->sizes_s = arg;
		b->sizes_all = strcmp(arg, "all") == 0;
		if (!b->sizes_all)
			ret = cli_sizes("bench", arg, BENCH_REG_MAX_SIZE,
					o->sizes, BENCH_MAX_SIZES, &o->nsizes);
		break;
	case CLI_CHURN:
		ret = cli_uint("bench", "--churn", arg, 1, BENCH_REG_MAX_CHURN,
			       &o->churn);
		break;
	case 'w':
		ret = cli_uint("bench", "--window", arg, 1, BENCH_MAX_WINDOW,
			       &v);
		o->window = (unsigned int)v;
		b->have_window = 1;
		break;
	case 'n':
		ret = cli_uint("bench", "--iters", arg, 1, 1000000000,
			       &o->iters);
		break;
	case 'd':
		o->duration_s = strtod(arg, NULL);
		if (!(o->duration_s > 0 && o->duration_s <= 3600)) {
			cli_err("bench", "--duration %s: seconds, 0 to 3600",
				arg);
			ret = -EINVAL;
		}
		break;
	case CLI_WARMUP:
		ret = cli_uint("bench", "--warmup", arg, 0, 1000000000,
			       &o->warmup);
		b->have_warm = 1;
		break;
	case CLI_VERIFY:
		o->verify = 1;
		break;
	case CLI_IMPLICIT:
		b->implicit = 1;
		break;
	case CLI_BATCH:
		b->batch = 1;
		break;
	case CLI_MEM:
		ret = parse_mem("--mem", arg, &o->mem);
		break;
	}
	return ret;
}

/* One option into @data (a struct bench_cli): where, how and what comes
 * out here, the rest in bench_run_option(). @return 0, or -EINVAL (said
 * why). */
static int bench_option(void *data, int c, const char *arg)
{
	struct bench_cli *b = data;
	int ret = 0;

	switch (c) {
	case 'j':
		b->json = arg;
		b->json_stdout = arg == NULL;
		break;
	case CLI_CSV:
		b->csv = arg;
		break;
	case CLI_PLOT:
		b->plot = arg;
		break;
	case CLI_PEER:
		b->peer = arg;
		break;
	case CLI_LISTEN:
		b->listen = 1;
		b->listen_addr = arg;
		break;
	case CLI_TOKEN:
		b->token = arg;
		break;
	case CLI_ONCE:
		b->once = 1;
		break;
	case CLI_CARD_FILE:
		b->card_file = arg;
		break;
	case CLI_WAIT_FD:
		b->wait_fd = 1;
		break;
	case CLI_PIN:
		b->pin = 1;
		break;
	case CLI_RAILS:
		ret = cli_rails("bench", arg, &b->rails, &b->domains);
		snprintf(b->rails_s, sizeof(b->rails_s), "%s", arg);
		break;
	case 'p':
		b->prov = strcmp(arg, "auto") ? arg : NULL;
		break;
	case CLI_NODE:
		b->node = arg;
		break;
	case CLI_LOG:
		ret = cli_log("bench", arg);
		break;
	case CLI_WORLD:
		b->world = arg;
		break;
	case CLI_PEER_MEM:
		b->peer_mem_s = arg;
		ret = parse_mem("--peer-mem", arg, &b->peer_mem);
		break;
	default:
		ret = bench_run_option(b, c, arg);
	}
	return ret;
}

/* --sizes all, or no --sizes, by operation: --op register's are regions
 * of address space (4 KiB to 64 GiB); the others' are transfers. */
static void bench_sizes(struct bench_cli *b)
{
	struct bench_opts *o = &b->o;
	int reg = o->op == BENCH_REGISTER;
	uint64_t max = reg ? BENCH_REG_MAX_SIZE : 16u << 20;

	if (b->sizes_all) {
		o->nsizes = 0;
		for (uint64_t s = reg ? 4096 : 8; s <= max; s *= 2)
			o->sizes[o->nsizes++] = s;
	} else if (b->sizes_s == NULL && reg) {
		static const uint64_t def[] = { 4096, 1 << 20, 1ULL << 30,
						64ULL << 30 };

		o->nsizes = sizeof(def) / sizeof(def[0]);
		memcpy(o->sizes, def, sizeof(def));
	}
}

static const struct cli_cmd bench_cmd = {
	.name = "bench",
	.keys = bench_keys,
	.usage = usage,
	.option = bench_option,
	.args = CLI_ARG_LATER, /* a peer unless --peer gave it */
};

/* The command line into @b. @return 0, 1 for --help (printed), or 2. */
static int bench_parse(int argc, char **argv, struct bench_cli *b)
{
	const char *peer = NULL;
	int ret;

	*b = (struct bench_cli){
		.o = {
			.op = BENCH_WRITE,
			.nsizes = 6,
			.sizes = { 8, 64, 4096, 65536, 1 << 20, 16 << 20 },
			.window = 64,
			.seed = 5489,
		},
		.peer_mem = { .kind = TERN_MEM_HOST },
		.rails_s = "1",
		.rails = 1,
	};
	ret = cli_parse(&bench_cmd, argc, argv, b, NULL);
	if (ret != CLI_GO)
		return ret == 0 ? 1 : 2;
	bench_sizes(b);
	/* The peer may be the argument, as in tern ping and tern fill. */
	if (cli_args("bench", argc, argv, b->peer == NULL ? CLI_ARG_PEER : 0,
		     &peer) != 0)
		return 2;
	if (peer != NULL)
		b->peer = peer;
	b->o.model = b->batch	   ? BENCH_BATCH
		     : b->implicit ? BENCH_IMPLICIT
				   : BENCH_EXPLICIT;
	return 0;
}

/* What --op register takes, and sizes only it takes. @return 0 or 2
 * (said why). */
static int bench_check_register(const struct bench_cli *b)
{
	const struct bench_opts *o = &b->o;
	const char *no = NULL;

	if (o->op != BENCH_REGISTER) {
		for (size_t i = 0; i < o->nsizes; i++) {
			if (o->sizes[i] > BENCH_MAX_SIZE) {
				cli_err("bench",
					"--sizes '%s': expected a size from 1 "
					"to %llu bytes (suffixes K, M, G); "
					"up to 64 GiB with --op register",
					b->sizes_s, BENCH_MAX_SIZE);
				return 2;
			}
		}
		if (o->churn != 0) {
			cli_err("bench", "--churn is a part of --op register");
			return 2;
		}
		return 0;
	}
	if (b->have_window)
		no = "--window (its writes go one at a time)";
	else if (o->verify)
		no = "--verify (its writes are timed, not checked)";
	else if (o->duration_s > 0)
		no = "--duration (it counts --iters per size)";
	else if (o->mem.kind != TERN_MEM_HOST || o->mem.shared)
		no = "--mem (it maps its own regions, untouched)";
	else if (b->plot != NULL)
		no = "--plot (it has no bandwidth to draw; --json and --csv "
		     "have every figure)";
	if (no != NULL) {
		cli_err("bench", "--op register takes no %s", no);
		return 2;
	}
	return 0;
}

/* Options that exclude each other. @return 0 or 2 (said why). */
static int bench_check(const struct bench_cli *b)
{
	if (bench_check_register(b) != 0)
		return 2;
	if (b->o.iters && b->o.duration_s > 0) {
		cli_err("bench", "--iters and --duration exclude each other");
		return 2;
	}
	if (b->implicit && b->batch) {
		cli_err("bench", "--implicit and --batch exclude each other "
				 "(one model per run)");
		return 2;
	}
	if (b->implicit && bench_implicit_why(b->o.op) != NULL) {
		cli_err("bench", "%s", bench_implicit_why(b->o.op));
		return 2;
	}
	if (b->batch && bench_batch_why(b->o.op) != NULL) {
		cli_err("bench", "%s", bench_batch_why(b->o.op));
		return 2;
	}
	if ((b->implicit || b->batch) && b->listen) {
		cli_err("bench",
			"%s is how the initiator posts: a --listen "
			"peer serves every model",
			b->implicit ? "--implicit" : "--batch");
		return 2;
	}
	if (b->listen && b->peer != NULL) {
		cli_err("bench", "--listen (be the server) and a peer "
				 "exclude each other");
		return 2;
	}
	if (b->token != NULL && b->listen && b->listen_addr == NULL) {
		cli_err("bench", "--token needs --listen HOST:PORT (it is "
				 "checked in the TCP handshake)");
		return 2;
	}
	if (cli_addr_check("bench", "--listen", b->listen_addr) != 0 ||
	    (b->peer != NULL && tern_boot_is_addr(b->peer) &&
	     cli_addr_check("bench", "peer", b->peer) != 0))
		return 2;
	if (b->peer_mem_s != NULL && (b->listen || b->peer != NULL)) {
		cli_err("bench", "--peer-mem sets the local peer's memory: a "
				 "--listen peer takes its own --mem");
		return 2;
	}
	if (b->json_stdout && b->listen) {
		cli_err("bench", "--json without a file prints the results: "
				 "a --listen peer has none");
		return 2;
	}
	if (b->listen && (b->json != NULL || b->csv != NULL || b->plot)) {
		cli_err("bench",
			"%s %s: a --listen peer has no results to write",
			b->json	 ? "--json"
			: b->csv ? "--csv"
				 : "--plot",
			b->json	 ? b->json
			: b->csv ? b->csv
				 : b->plot);
		return 2;
	}
	return 0;
}

/* Open the ctx: dialled over TCP for a HOST:PORT peer (the socket, kept
 * as a liveness channel, in *boot_fd), else directly. */
static int bench_open(struct bench_cli *b, struct tern_ctx **ctx_p,
		      struct tern_boot_info *theirs, int *boot_fd)
{
	uint64_t flags = b->pin ? TERN_CTX_PIN : 0;
	struct tern_ctx_attr attr;
	char lhost[64];
	int ret;

	/* Busy polling, as ib_write_bw and fi_rma_bw do: the completion
	 * queues get no wait fd. With one, the tcp provider keeps its
	 * sockets in an epoll set, and every packet then runs the epoll
	 * callback in the kernel: 4-10% of the 8 B message rate on loopback
	 * (docs/performance.md). --wait-fd measures that mode. Between
	 * runs the loop still sleeps, in short steps. */
	if (!b->wait_fd)
		flags |= TERN_CTX_BUSY_POLL;
	/* GPU memory: ask the provider to reach it (FI_HMEM); without, tern
	 * stages it. Atomics on a GPU target need FI_HMEM: asked here to
	 * learn whether the provider has it. */
	if (b->o.mem.kind == TERN_MEM_CUDA ||
	    (b->o.op == BENCH_ATOMIC && b->peer_mem.kind == TERN_MEM_CUDA))
		flags |= TERN_CTX_HMEM;
	attr = (struct tern_ctx_attr){
		.provider = b->prov,
		.node = b->node,
		.rails = (unsigned)b->rails,
		.domains = b->domains,
		.flags = flags,
	};
	if (b->peer != NULL && tern_boot_is_addr(b->peer))
		return cli_boot_client("bench", b->peer, b->token, 10000, &attr,
				       ctx_p, theirs, boot_fd) != 0
			       ? -1
			       : 0;
	if (b->listen)
		attr.node = cli_listen_node(b->prov, b->node, b->listen_addr,
					    lhost, sizeof(lhost));
	ret = tern_ctx_open(&attr, ctx_p);
	if (ret != 0) {
		cli_err("bench", "cannot open a ctx: %s", tern_strerror(ret));
		return -1;
	}
	return 0;
}

/* --listen: print the card, serve runs until Ctrl-C (or one, --once). */
static int bench_listen(struct bench_cli *b, struct tern_ctx *ctx,
			volatile sig_atomic_t *stop)
{
	struct tern_boot_server *boot = NULL;
	char hex[2 * TERN_CARD_MAX + 1];
	uint8_t card[TERN_CARD_MAX];
	ssize_t card_len;
	int ret;

	card_len = tern_ctx_card(ctx, card, sizeof(card));
	tern_hex_encode(card, (size_t)card_len, hex, sizeof(hex));
	printf("bench: listening; card: %s\nrun:  tern bench %s\n", hex, hex);
	fflush(stdout);
	if (cli_card_write("bench", b->card_file, hex) != 0 ||
	    (b->listen_addr != NULL &&
	     cli_boot_serve("bench", ctx, b->listen_addr, b->token, &boot)))
		return 1;
	ret = bench_serve(ctx, stop, b->once, &b->o.mem, stdout);
	tern_boot_server_close(boot);
	return ret == 0 ? 0 : 1;
}

/* Run every size against the peer's @card; print and write the report. */
static int bench_measure(struct bench_cli *b, struct tern_ctx *ctx,
			 const uint8_t *card, size_t card_len,
			 volatile sig_atomic_t *stop, int argc, char **argv)
{
	struct bench_report *rep = calloc(1, sizeof(*rep));
	char why[256] = "";
	int ret, out_ret = 0;

	if (rep == NULL)
		return -ENOMEM;
	b->o.progress = isatty(2);
	b->o.stop = stop;
	if (!b->have_warm)
		b->o.warmup = BENCH_AUTO;
	ret = bench_run(ctx, card, card_len, &b->o, rep, why, sizeof(why));
	if (rep->npoints > 0) {
		/* After the run, which starts the report afresh. */
		snprintf(rep->ctx.command, sizeof(rep->ctx.command),
			 "tern bench");
		for (int i = 1; i < argc; i++) {
			size_t l = strlen(rep->ctx.command);

			snprintf(rep->ctx.command + l,
				 sizeof(rep->ctx.command) - l, " %s", argv[i]);
		}
		if (b->json_stdout)
			bench_write_json(stdout, rep);
		else
			bench_print_table(stdout, rep);
	}
	/* Nothing measured: the files are closed empty (close_outputs). */
	if (rep->npoints > 0) {
		static int (*const fn[OUT_N])(FILE *,
					      const struct bench_report *) = {
			bench_write_json, bench_write_csv, bench_write_svg
		};
		const char *path[OUT_N] = { b->json, b->csv, b->plot };

		for (int i = 0; i < OUT_N; i++) {
			if (write_output(&b->out[i], path[i], out_flag[i], rep,
					 fn[i]) != 0)
				out_ret = -EIO;
		}
	}
	if (peer_gone) {
		cli_err("bench", "peer gone: it closed its bootstrap "
				 "connection");
		ret = -TERN_EPEERGONE;
	} else if (ret != 0) {
		cli_err("bench", "%s", why[0] ? why : tern_strerror(ret));
	}
	free(rep);
	return ret != 0 ? ret : out_ret != 0 ? -EIO : 0;
}

/* Start `tern bench --listen --once` as a second process; its card hex
 * in @hex. @return its pid, or -1 (said why). */
static pid_t bench_local_peer(const struct bench_cli *b, struct tern_ctx *ctx,
			      char *hex, size_t hexlen)
{
	struct tern_ctx_info ci;
	pid_t pid;

	tern_ctx_query(ctx, &ci);
	if (b->o.op == BENCH_ATOMIC && b->peer_mem.kind == TERN_MEM_CUDA &&
	    !ci.hmem) {
		cli_err("bench",
			"--peer-mem %s: --op atomic needs host memory on the "
			"target, or a provider with FI_HMEM (%s has none here)",
			b->peer_mem_s, ci.provider);
		return -1;
	}
	pid = spawn_peer(b->prov, b->node, b->rails_s,
			 b->peer_mem_s ? b->peer_mem_s : "host", b->wait_fd,
			 hex, hexlen);
	if (pid < 0)
		cli_err("bench", "could not start the local peer");
	return pid;
}

/* Close what bench_measure did not write (a run that stopped early). */
static void close_outputs(struct bench_cli *b)
{
	for (int i = 0; i < OUT_N; i++) {
		if (b->out[i] != NULL)
			fclose(b->out[i]);
		b->out[i] = NULL;
	}
}

/* --world: the all-to-all, one process per rank. */
static int bench_world(const struct bench_cli *b)
{
	uint64_t iters = b->o.iters ? b->o.iters : 200;
	struct bench_world_opts wo = {
		.nsizes = b->o.nsizes,
		.sizes = b->o.sizes,
		.iters = iters,
		.warmup = b->have_warm ? b->o.warmup : iters / 10,
		.window = b->o.window,
		.verify = b->o.verify,
	};

	if (b->listen || b->peer != NULL) {
		cli_err("bench", "--world finds its peers in the world: no "
				 "--listen or peer");
		return 2;
	}
	if (b->implicit || b->batch) {
		cli_err("bench",
			"%s measures two processes: --world runs "
			"explicit writes",
			b->implicit ? "--implicit" : "--batch");
		return 2;
	}
	if (b->o.op != BENCH_WRITE || b->o.duration_s > 0 ||
	    b->o.mem.kind != TERN_MEM_HOST || b->csv || b->plot ||
	    b->rails > 1) {
		cli_err("bench", "--world runs writes (--op write; --verify "
				 "makes them writes with immediate) of host "
				 "memory on one rail, counted by --iters; "
				 "--op, --duration, --mem, --csv, --plot and "
				 "--rails are for two processes");
		return 2;
	}
	if (b->json_stdout) {
		cli_err("bench", "--world --json needs a file (--json=FILE): "
				 "rank 0 prints the matrix on stdout");
		return 2;
	}
	return cli_world("bench", b->world, b->prov, b->node, &wo, b->json, 0);
}

int cmd_bench(int argc, char **argv)
{
	struct bench_cli b;
	struct tern_boot_info theirs;
	char hex[2 * TERN_CARD_MAX + 2];
	uint8_t card[TERN_CARD_MAX];
	volatile sig_atomic_t *stop;
	struct tern_ctx *ctx;
	ssize_t card_len = 0;
	pid_t peer_pid = 0;
	int ret, boot_fd = -1;

	ret = bench_parse(argc, argv, &b);
	if (ret == 0)
		ret = bench_check(&b);
	if (ret == 0 && cli_token("bench", b.token, &b.token) != 0)
		ret = 2;
	if (ret != 0)
		return ret == 1 ? 0 : 2;
	if (b.world != NULL)
		return bench_world(&b);
	if (open_outputs((const char *const[]){ b.json, b.csv, b.plot },
			 b.out) != 0)
		return 1;
	if (b.o.op == BENCH_ATOMIC)
		b.prov = cli_atomic_provider(b.prov);
	stop = cli_catch_signals();
	bench_stop = stop;
	if (bench_open(&b, &ctx, &theirs, &boot_fd) != 0) {
		close_outputs(&b);
		return 1;
	}
	/* It spins while it measures (the engine switches busy polling on
	 * around runs), and sleeps between them. */
	tern_ctx_set_busy_poll(ctx, 0);
	if (b.pin) {
		struct tern_ctx_info ci;

		tern_ctx_query(ctx, &ci);
		printf("bench: pinned: %s\n",
		       ci.pinned[0] ? ci.pinned : "no (see the warning)");
	}
	if (b.listen) {
		ret = bench_listen(&b, ctx, stop);
		tern_ctx_close(ctx);
		return ret;
	}
	if (boot_fd >= 0) {
		memcpy(card, theirs.card, theirs.card_len);
		card_len = (ssize_t)theirs.card_len;
		tern_io_start(ctx, &live, boot_fd, TERN_IO_READ, peer_left,
			      NULL);
	} else {
		if (b.peer == NULL) {
			peer_pid = bench_local_peer(&b, ctx, hex, sizeof(hex));
			if (peer_pid < 0) {
				tern_ctx_close(ctx);
				close_outputs(&b);
				return 1;
			}
			b.peer = hex;
		}
		card_len = tern_hex_decode(b.peer, card, sizeof(card));
	}
	if (card_len <= 0) {
		cli_err("bench",
			"peer '%s': the hex card `tern bench --listen` "
			"printed, or HOST:PORT",
			b.peer);
		ret = -EINVAL;
	} else {
		ret = bench_measure(&b, ctx, card, (size_t)card_len, stop, argc,
				    argv);
	}
	if (boot_fd >= 0)
		tern_io_stop(&live);
	if (peer_gone)
		tern_ctx_settle(ctx, 300);
	tern_ctx_close(ctx);
	if (boot_fd >= 0)
		close(boot_fd);
	if (peer_pid > 0)
		cli_reap(peer_pid, 5000);
	close_outputs(&b);
	return ret == 0 ? 0 : 1;
}
