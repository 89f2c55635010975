/* SPDX-License-Identifier: MIT */
/* The tern command's one option table, and getopt over it (tools/opts.h). */
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "cli.h"
#include "opts.h"

#define OPT(n, k, a, m, h)    \
	{                     \
		n, k, a, m, h \
	}

/* One row per option: its one meaning, whichever subcommand takes it.
 * Defaults that differ per subcommand are in that subcommand's usage. */
static const struct cli_opt table[] = {
	OPT("provider", 'p', required_argument, "NAME",
	    "efa, verbs, tcp, shm or auto (default: the best present)"),
	/* Taken wherever --provider is (cli_opts_init adds it); it sets
	 * $TERN_FABRIC, which every ctx of the command and the processes
	 * it starts read. */
	OPT("fabric", CLI_FABRIC, required_argument, "NAME",
	    "libfabric fabric: on efa, efa-direct (default where offered) or "
	    "efa (atomics, any message size); see tern info"),
	OPT("node", CLI_NODE, required_argument, "ADDR",
	    "local address to bind (tcp)"),
	OPT("rails", CLI_RAILS, required_argument, "N|gpu=N|DOMAIN,...",
	    "N endpoints on one domain (default 1), the NICs tern topo "
	    "maps to GPU N, or one rail per listed domain"),
	OPT("pin", CLI_PIN, no_argument, NULL,
	    "pin this thread near the NIC before opening domains"),
	OPT("listen", CLI_LISTEN, optional_argument, "[HOST:PORT]",
	    "be the server: print the card and serve; with HOST:PORT also "
	    "hand the card out over TCP there"),
	OPT("peer", CLI_PEER, required_argument, "PEER",
	    "the server: its card (hex) or HOST:PORT (may also be given "
	    "as the argument)"),
	OPT("token", CLI_TOKEN, required_argument, "T",
	    "bootstrap shared secret (default $TERN_TOKEN)"),
	OPT("card-file", CLI_CARD_FILE, required_argument, "FILE",
	    "write (server) or read (client) the card"),
	OPT("once", CLI_ONCE, no_argument, NULL,
	    "server: serve one client, then exit"),
	OPT("log", CLI_LOG, required_argument, "LEVEL",
	    "none, warn, info or debug (default $TERN_LOG, else warn)"),
	OPT("json", 'j', optional_argument, "[=FILE]",
	    "JSON: into FILE, or without one on stdout instead of the text"),
	OPT("csv", CLI_CSV, required_argument, "FILE", "one line per size"),
	OPT("plot", CLI_PLOT, required_argument, "FILE.svg",
	    "bandwidth and p99 latency against size"),
	OPT("op", 'o', required_argument, "OP",
	    "write, writedata (write with immediate), read, send, atomic "
	    "(64-bit fetch-add; size 8), register (what registering "
	    "costs)"),
	OPT("mode", 'm', required_argument, "MODE",
	    "send (send/recv) or write (write with immediate)"),
	OPT("sizes", 's', required_argument, "LIST",
	    "sizes, e.g. 8,64,4K,1M (bench: or all)"),
	OPT("window", 'w', required_argument, "N", "operations in flight"),
	OPT("iters", 'n', required_argument, "N", "timed operations per size"),
	OPT("duration", 'd', required_argument, "S",
	    "instead of --iters: seconds per size"),
	OPT("warmup", CLI_WARMUP, required_argument, "N",
	    "untimed operations first"),
	OPT("verify", CLI_VERIFY, no_argument, NULL,
	    "fill sources from MT19937-64 and check every destination byte"),
	OPT("mem", CLI_MEM, required_argument, "host|shared|cuda[:N]",
	    "this side's buffers (with --listen: the target region); GPU "
	    "memory zero-copy where the provider has FI_HMEM, else staged"),
	OPT("peer-mem", CLI_PEER_MEM, required_argument, "host|shared|cuda[:N]",
	    "the local peer's target region, as --mem"),
	OPT("implicit", CLI_IMPLICIT, no_argument, NULL,
	    "implicit operations: each window posted with the *_nbi calls "
	    "(no request each), completed by one tern_quiet()"),
	OPT("churn", CLI_CHURN, required_argument, "N",
	    "--op register: then N register/close cycles, 1 MiB to 1 GiB "
	    "in turn; a cycle's median at the start, middle and end"),
	OPT("batch", CLI_BATCH, no_argument, NULL,
	    "batches: each window posted as one tern_write_pieces() or "
	    "tern_read_pieces() (a piece per operation), one request"),
	OPT("wait-fd", CLI_WAIT_FD, no_argument, NULL,
	    "completion queues with wait fds (what being able to sleep "
	    "costs) instead of busy polling"),
	OPT("page-size", CLI_PAGE_SIZE, required_argument, "SIZE",
	    "bytes per page"),
	OPT("pages", CLI_PAGES, required_argument, "N", "pages per fill"),
	OPT("seed", 'S', required_argument, "N", "seed (default: random)"),
	OPT("count", 'c', required_argument, "N",
	    "how many: fills (fill, demo), intervals (counters)"),
	OPT("timeout", CLI_TIMEOUT, required_argument, "MS",
	    "give up a connect or a reply after MS"),
	OPT("fill-timeout", CLI_FILL_TIMEOUT, required_argument, "MS",
	    "server: a client's fill must complete within MS"),
	OPT("idle-timeout", CLI_IDLE_TIMEOUT, required_argument, "MS",
	    "server: drop a client idle for MS"),
	OPT("max-clients", CLI_MAX_CLIENTS, required_argument, "N",
	    "server: clients at once"),
	OPT("max-per-client", CLI_MAX_PER_CLIENT, required_argument, "N",
	    "server: sessions one client (card) may hold"),
	OPT("parallel", CLI_PARALLEL, required_argument, "N",
	    "fills in flight at once"),
	OPT("reconnect", CLI_RECONNECT, required_argument, "S",
	    "client: on a lost server, dial again for S seconds"),
	OPT("clients", CLI_CLIENTS, required_argument, "N",
	    "client processes started"),
	OPT("reps", 'r', required_argument, "N", "repetitions per client"),
	OPT("worker-fd", CLI_WORKER_FD, required_argument, "FD", NULL),
	OPT("all", 'a', no_argument, NULL,
	    "also the providers tern cannot use, and why"),
	OPT("xml", 'x', required_argument, "FILE",
	    "read the machine from an hwloc XML file"),
	OPT("nics", 'k', required_argument, "KIND",
	    "NICs to map GPUs to: auto (the kind with the most NICs), efa, "
	    "mlx, rdma (others), all"),
	OPT("interval", CLI_INTERVAL, required_argument, "S",
	    "seconds between two readings (default 1; 0: absolute values "
	    "once)"),
	OPT("root", CLI_ROOT, required_argument, "DIR",
	    "read DIR/sys instead of /sys, and for doctor DIR/proc and "
	    "DIR/dev too: fixtures (default $TERN_COUNTERS_ROOT, "
	    "$TERN_DOCTOR_ROOT)"),
	OPT("device", CLI_DEVICE, required_argument, "NAME,...",
	    "only these RDMA devices (default: all)"),
	OPT("world", CLI_WORLD, required_argument, "SPEC",
	    "every rank of a world against every other: pmix, "
	    "etcd://HOST:PORT/PREFIX or file:/DIR; "
	    "rank 0 prints the matrix"),
	OPT("region-size", CLI_REGION_SIZE, required_argument, "SIZE",
	    "the largest region you will register: the locked-memory "
	    "limit is checked against it (default 1G)"),
	OPT("help", 'h', no_argument, NULL, "this text"),
};

#define NOPTS (sizeof(table) / sizeof(table[0]))

/* Spellings that changed (a subcommand, or NULL for any, and the word). */
static const struct {
	const char *cmd;
	const char *old;
	const char *now;
} moved[] = {
	{ "ping", "-w", "--warmup (-w is --window, a bench option)" },
	{ "ping", "-i", "--iters (-n)" },
	{ "fill", "-n", "--pages" },
	{ "fill", "-s", "--page-size" },
	{ "demo", "-n", "--pages" },
	{ "demo", "-s", "--page-size" },
	{ "atomic", "-n", "--clients" },
};

const struct cli_opt *cli_opt_find(int key)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (table[i].key == key)
			return &table[i];
	}
	return NULL;
}

void cli_opts_init(struct cli_parser *p, const char *cmd, const int *keys)
{
	size_t n = 0, s = 0;

	memset(p, 0, sizeof(*p));
	p->cmd = cmd;
	/* --fabric goes with --provider (tern info lists every fabric). */
	for (const int *k = keys; *k != 0 && n < CLI_MAX_OPTS; k++) {
		p->xkeys[n++] = *k;
		if (*k == 'p' && strcmp(cmd, "info") != 0)
			p->xkeys[n++] = CLI_FABRIC;
	}
	p->keys = p->xkeys;
	n = 0;
	p->shorts[s++] = ':'; /* a missing argument returns ':' */
	for (const int *k = p->keys; *k != 0 && n < CLI_MAX_OPTS; k++) {
		const struct cli_opt *o = cli_opt_find(*k);

		if (o == NULL)
			abort(); /* a key not in the table: a bug here */
		p->lo[n++] = (struct option){ o->name, o->has_arg, NULL,
					      o->key };
		if (o->key < 256) {
			p->shorts[s++] = (char)o->key;
			if (o->has_arg == required_argument)
				p->shorts[s++] = ':';
		}
	}
}

/* Say why @word (as typed) is not an option of this subcommand. */
static void refuse(const struct cli_parser *p, const char *word)
{
	const struct cli_opt *o = NULL;
	char name[64];

	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		if (strcmp(moved[i].cmd, p->cmd) == 0 &&
		    strcmp(moved[i].old, word) == 0) {
			cli_err(p->cmd, "%s is now %s", word, moved[i].now);
			return;
		}
	}
	snprintf(name, sizeof(name), "%s", word);
	name[strcspn(name, "=")] = '\0';
	for (size_t i = 0; i < NOPTS; i++) {
		if ((name[1] != '-' && name[1] == table[i].key &&
		     name[2] == '\0') ||
		    (name[1] == '-' && strcmp(name + 2, table[i].name) == 0))
			o = &table[i];
	}
	if (o != NULL)
		cli_err(p->cmd,
			"%s (--%s) is not an option of tern %s (see tern "
			"%s --help)",
			name, o->name, p->cmd, p->cmd);
	else
		cli_err(p->cmd, "unknown option %s (see tern %s --help)", name,
			p->cmd);
}

int cli_getopt(struct cli_parser *p, int argc, char **argv)
{
	int c;

	opterr = 0;
	c = getopt_long(argc, argv, p->shorts, p->lo, NULL);
	while (c == CLI_FABRIC) {
		if (optarg[0] == '\0') {
			cli_err(p->cmd, "--fabric needs a name (e.g. efa or "
					"efa-direct)");
			return '?';
		}
		setenv("TERN_FABRIC", optarg, 1);
		c = getopt_long(argc, argv, p->shorts, p->lo, NULL);
	}
	if (c == '?') {
		/* An unknown long option is at optind - 1; an unknown letter
		 * is optopt (it may sit inside a group such as -xv). */
		if (optopt != 0) {
			char w[3] = { '-', (char)optopt, '\0' };

			refuse(p, w);
		} else {
			refuse(p, argv[optind - 1]);
		}
		return '?';
	}
	if (c == ':') {
		const struct cli_opt *o = cli_opt_find(optopt);

		cli_err(p->cmd, "--%s needs %s", o ? o->name : "?",
			o && o->arg ? o->arg : "an argument");
		return '?';
	}
	/* No option takes an empty value: --token '' would serve without a
	 * token, --rails '' mean one rail, --provider '' any provider. */
	if (c != 'h' && optarg != NULL && optarg[0] == '\0') {
		const struct cli_opt *o = cli_opt_find(c);
		const char *what = o && o->arg ? o->arg : "a value";
		size_t len;

		what += strspn(what, "[=");
		len = strcspn(what, "]");
		if (c == CLI_TOKEN)
			cli_err(p->cmd,
				"--token '': an empty token; give the "
				"shared secret, or no --token for none");
		else
			cli_err(p->cmd, "--%s '': empty, expected %.*s",
				o ? o->name : "?", (int)len, what);
		return '?';
	}
	if (c == CLI_LISTEN && optarg == NULL && optind < argc &&
	    argv[optind][0] != '-' && tern_boot_is_addr(argv[optind]))
		optarg = argv[optind++]; /* "--listen HOST:PORT" */
	/* "--json FILE" would make FILE the peer: refused. A peer is a
	 * HOST:PORT or a card's hex, which has neither '.' nor '/'. */
	if (c == 'j' && optarg == NULL && optind < argc &&
	    argv[optind][0] != '-' && strchr(argv[optind], ':') == NULL &&
	    strpbrk(argv[optind], "./") != NULL) {
		cli_err(p->cmd,
			"--json %s: write --json=%s (--json alone prints JSON "
			"on stdout)",
			argv[optind], argv[optind]);
		return '?';
	}
	return c;
}

int cli_parse(const struct cli_cmd *cmd, int argc, char **argv, void *data,
	      const char **peer_p)
{
	struct cli_parser p;
	int c;

	cli_opts_init(&p, cmd->name, cmd->keys);
	while ((c = cli_getopt(&p, argc, argv)) != -1) {
		if (c == 'h') {
			cmd->usage(&p, stdout);
			return 0;
		}
		if (c == '?' || cmd->option(data, c, optarg) != 0)
			return 2;
	}
	if ((cmd->args & CLI_ARG_LATER) != 0)
		return CLI_GO;
	return cli_args(cmd->name, argc, argv, cmd->args, peer_p) != 0 ? 2
								       : CLI_GO;
}

int cli_args(const char *cmd, int argc, char **argv, unsigned int args,
	     const char **peer_p)
{
	int i = optind;

	if ((args & CLI_ARG_PEER) != 0) {
		*peer_p = i < argc ? argv[i] : NULL;
		i += i < argc;
	}
	if (i == argc)
		return 0;
	if ((args & CLI_ARG_SEE_HELP) != 0)
		cli_err(cmd, "unexpected argument '%s' (see tern %s --help)",
			argv[i], cmd);
	else
		cli_err(cmd, "unexpected argument '%s'", argv[i]);
	return 2;
}

/* @text from column 27, wrapped before column 80; the first line after
 * @col columns already printed. */
static void wrap(FILE *f, const char *text, int col)
{
	const int indent = 27, width = 79;

	while (*text != '\0') {
		int n = (int)strlen(text), room = width - indent;

		if (col >= indent) {
			fprintf(f, "\n");
			col = 0;
		}
		fprintf(f, "%*s", indent - col, "");
		if (n > room) {
			n = room;
			while (n > 0 && text[n] != ' ')
				n--;
			if (n == 0)
				n = room;
		}
		fprintf(f, "%.*s\n", n, text);
		text += n;
		while (*text == ' ')
			text++;
		col = 0;
	}
}

void cli_opts_help(const struct cli_parser *p, FILE *f)
{
	for (const int *k = p->keys; *k != 0; k++) {
		const struct cli_opt *o = cli_opt_find(*k);
		int col;

		if (o->help == NULL)
			continue;
		if (o->key < 256)
			col = fprintf(f, "  -%c, --%s", o->key, o->name);
		else
			col = fprintf(f, "      --%s", o->name);
		if (o->arg != NULL)
			col += fprintf(f, "%s%s", o->arg[1] == '=' ? "" : " ",
				       o->arg);
		wrap(f, o->help, col);
	}
}

/* Every TERN_* variable the library and the tools read. The test
 * tests/integration/cli.sh greps the sources for any missing here. */
static const char *const env_help[][2] = {
	{ "TERN_PROVIDER",
	  "provider when none is given (efa, verbs, tcp, shm)" },
	{ "TERN_FABRIC", "libfabric fabric (efa: efa-direct or efa)" },
	{ "TERN_NODE", "address or interface to bind when none is given" },
	{ "TERN_DOMAINS", "rails on these domains (comma-separated) or gpu=N" },
	{ "TERN_TOPO_XML", "machine map for gpu=N from this hwloc XML file" },
	{ "TERN_TOKEN", "bootstrap secret if no --token (empty: none)" },
	{ "TERN_WORLD", "world tern_world_open() joins when given none" },
	{ "TERN_WORLD_RANK", "this process's rank (file, etcd worlds)" },
	{ "TERN_WORLD_SIZE", "ranks at start (file, etcd worlds)" },
	{ "TERN_LOCAL",
	  "0: same-host peers over the provider too (default 1: memcpy)" },
	{ "TERN_LOCAL_BROKER",
	  "1: hand same-host peers our fds (SCM_RIGHTS); default: if Yama" },
	{ "TERN_IMM_SOURCE",
	  "whose arrival sources to trust: 0 none, 1 shm (default), 2 any" },
	{ "TERN_FI_API",
	  "libfabric API version to ask for (default: negotiated)" },
	{ "TERN_LOG", "none, warn (default), info, debug (else warned)" },
	{ "TERN_POST_BATCH", "operations posted per rail per pass (32)" },
	{ "TERN_NBI_MAX",
	  "implicit operations in flight per ctx (65536; then -ENOBUFS)" },
	{ "TERN_MR_CACHE",
	  "0: every region registered on its own (default 1: shared)" },
	{ "TERN_MR_CHUNK",
	  "largest one registration: longer regions in chunks (64G on efa, "
	  "verbs)" },
	{ "TERN_INJECT",
	  "small writes as provider copies: 0 off, 1 (default), 2 +shm queue" },
	{ "TERN_BUSY_POLL", "1: never sleep while waiting" },
	{ "TERN_POLL_MAX_US", "longest idle sleep without a wait fd" },
	{ "TERN_STRIPE_CHUNK",
	  "writes and reads longer are striped over rails" },
	{ "TERN_FAILOVER",
	  "0: a failed rail fails its operations (default 1: routed around)" },
	{ "TERN_RAIL_COOLDOWN_MS",
	  "wait before a failed rail is tried again (1000)" },
	{ "TERN_RAIL_STALL_MS",
	  "a busy rail completing nothing this long is down (1000; 0 off)" },
	{ "TERN_HMEM", "1: ask efa/verbs for FI_HMEM (GPU zero-copy)" },
	{ "TERN_THP", "0: host buffers on plain pages (no 2 MiB placement)" },
	{ "TERN_STAGE_CHUNK", "bytes per GPU staging chunk (1M)" },
	{ "TERN_STAGE_DEPTH", "GPU staging chunks active per ctx (8)" },
	{ "TERN_VERBS_LINGER_MS",
	  "verbs: progress before endpoints close (20)" },
	{ "TERN_BENCH_CPUS",
	  "bench: A,B runs this process on A, the peer on B" },
	{ "TERN_BENCH_TARGET_PAUSE",
	  "bench: target pauses after empty passes" },
	{ "TERN_COUNTERS_ROOT", "tern counters: read DIR/sys instead of /sys" },
	{ "TERN_DOCTOR_ROOT",
	  "tern doctor: read DIR/sys, DIR/proc, DIR/dev instead" },
	{ "TERN_FAKE_CUDA", "tests: N fake CUDA devices instead of libcuda" },
	{ "TERN_FAKE_CUDA_FAIL", "tests: the K-th fake copy fails" },
	{ "TERN_FAKE_CUDA_HMEM",
	  "tests: 1: the fake GPU memory registers zero-copy" },
};

void cli_env_help(FILE *f)
{
	fprintf(f, "\nenvironment:\n");
	for (size_t i = 0; i < sizeof(env_help) / sizeof(env_help[0]); i++)
		fprintf(f, "  %-24s %s\n", env_help[i][0], env_help[i][1]);
}
