/* SPDX-License-Identifier: MIT */
/* Helpers every subcommand shares: errors, option values, signals, cards. */
#define _GNU_SOURCE /* prctl */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "wire/boot.h"
#include "cli.h"

/* The one piece of process state the tools keep: Ctrl-C was pressed. */
static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

volatile sig_atomic_t *cli_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return &stop_flag;
}

void cli_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tern %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_size(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (tern_parse_size(val, &v) != 0 || v < min || v > max) {
		cli_err(cmd,
			"%s '%s': expected a size from %" PRIu64 " to %" PRIu64
			" bytes (suffixes K, M, G)",
			opt, val, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cli_uint(const char *cmd, const char *opt, const char *val, uint64_t min,
	     uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(val, &end, 0);
	if (val[0] == '-' || val[0] == '\0' || *end != '\0' || errno != 0 ||
	    v < min || v > max) {
		cli_err(cmd,
			"%s '%s': expected an integer from %" PRIu64
			" to %" PRIu64,
			opt, val, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int cli_log(const char *cmd, const char *val)
{
	int l = tern_log_parse_level(val);

	if (l < 0) {
		cli_err(cmd, "--log '%s': expected none, warn, info or debug",
			val);
		return -EINVAL;
	}
	tern_log_set_level((enum tern_log_level)l);
	return 0;
}

int cli_card_write(const char *cmd, const char *path, const char *hex)
{
	FILE *f;

	if (path == NULL)
		return 0;
	f = fopen(path, "w");
	if (f == NULL || fprintf(f, "%s\n", hex) < 0 || fclose(f) != 0) {
		cli_err(cmd, "writing the card to %s: %s", path,
			strerror(errno));
		return -EIO;
	}
	return 0;
}

int cli_card_read(const char *cmd, const char *path, const char *arg,
		  uint8_t *card, size_t *len_p)
{
	char buf[2 * TERN_CARD_MAX + 2];
	const char *hex = arg;
	ssize_t n;

	if (path != NULL) {
		FILE *f = fopen(path, "r");

		if (f == NULL || fgets(buf, sizeof(buf), f) == NULL) {
			cli_err(cmd, "reading the card from %s: %s", path,
				f ? "empty file" : strerror(errno));
			if (f != NULL)
				fclose(f);
			return -EINVAL;
		}
		fclose(f);
		buf[strcspn(buf, "\r\n")] = '\0';
		hex = buf;
	}
	if (hex == NULL) {
		cli_err(cmd,
			"no server card: give it as an argument or with "
			"--card-file (see tern %s --help)",
			cmd);
		return -EINVAL;
	}
	n = tern_hex_decode(hex, card, TERN_CARD_MAX);
	if (n <= 0) {
		cli_err(cmd,
			"'%.40s%s' is neither the hex card the server printed "
			"(%s) nor a HOST:PORT",
			hex, strlen(hex) > 40 ? "..." : "",
			n == -ENOSPC ? "too long" : "not hex");
		return -EINVAL;
	}
	*len_p = (size_t)n;
	return 0;
}

int cli_open_ctx(const char *cmd, const struct tern_ctx_attr *attr,
		 struct tern_ctx **ctx_p)
{
	return cli_open_ctx_as(cmd, cmd, attr, ctx_p);
}

int cli_open_ctx_as(const char *cmd, const char *tag,
		    const struct tern_ctx_attr *attr, struct tern_ctx **ctx_p)
{
	struct tern_ctx_info ci;
	int ret = tern_ctx_open(attr, ctx_p);

	if (ret != 0) {
		cli_err(cmd, "cannot open a ctx on %s: %s%s",
			attr->provider ? attr->provider : "any provider",
			tern_strerror(ret),
			ret == -TERN_ENOPROV ? " (see `tern info`)" : "");
		return ret;
	}
	tern_ctx_query(*ctx_p, &ci);
	printf("%s: provider %s, fabric %s, domain %s, %u rail(s), "
	       "libfabric %s\n",
	       tag, ci.provider, ci.fabric, ci.domain, ci.rails,
	       tern_fabric_version());
	return 0;
}

int cli_rails(const char *cmd, const char *val, uint64_t *rails,
	      const char **domains)
{
	if (val[0] != '\0' && strspn(val, "0123456789") == strlen(val)) {
		*domains = NULL;
		return cli_uint(cmd, "--rails", val, 1, TERN_MAX_RAILS, rails);
	}
	if (strlen(val) >= 4 * TERN_MAX_RAILS * 16) {
		cli_err(cmd, "--rails: too long");
		return -EINVAL;
	}
	/* gpu=N or DOMAIN,DOMAIN...: checked when the ctx opens. */
	*rails = 0;
	*domains = val;
	return 0;
}

/* ---- bootstrap over TCP (tern/boot.h) ------------------------------ */

int cli_token(const char *cmd, const char *opt, const char **token_p)
{
	const char *t = opt != NULL ? opt : getenv("TERN_TOKEN");
	size_t len = t != NULL ? strlen(t) : 0;

	if (len > TERN_BOOT_TOKEN_MAX) {
		cli_err(cmd, "%s '%.16s...': %zu bytes, at most %d",
			opt != NULL ? "--token" : "$TERN_TOKEN", t, len,
			TERN_BOOT_TOKEN_MAX);
		return -EINVAL;
	}
	*token_p = len > 0 ? t : NULL;
	return 0;
}

int cli_addr_check(const char *cmd, const char *what, const char *addr)
{
	char host[256], port[8], why[384];

	if (addr == NULL ||
	    tern__boot_split(addr, host, sizeof(host), port, sizeof(port), why,
			     sizeof(why)) == 0)
		return 0;
	/* The reason names the address where it is about its syntax. */
	if (strstr(why, addr) != NULL)
		cli_err(cmd, "%s %s", what, why);
	else
		cli_err(cmd, "%s '%s': %s", what, addr, why);
	return -EINVAL;
}

/* Over tcp a card holds the address the ctx bound: unless the user chose
 * one (--node, $TERN_NODE), bind where the bootstrap traffic goes. */
static int tcp_like(const char *prov)
{
	if (prov == NULL)
		prov = getenv("TERN_PROVIDER");
	return prov != NULL && strncmp(prov, "tcp", 3) == 0 &&
	       getenv("TERN_NODE") == NULL;
}

const char *cli_listen_node(const char *provider, const char *node,
			    const char *listen, char *buf, size_t len)
{
	char port[8], why[128];

	if (node != NULL || listen == NULL || !tcp_like(provider) ||
	    tern__boot_split(listen, buf, len, port, sizeof(port), why,
			     sizeof(why)) != 0 ||
	    buf[0] == '\0' || strcmp(buf, "0.0.0.0") == 0 ||
	    strcmp(buf, "::") == 0)
		return node;
	return buf;
}

int cli_boot_client(const char *cmd, const char *addr, const char *token,
		    int timeout_ms, struct tern_ctx_attr *attr,
		    struct tern_ctx **ctx_p, struct tern_boot_info *theirs,
		    int *fd_p)
{
	struct tern_boot_info mine = { 0 };
	char why[256], lhost[64];
	ssize_t len;
	int fd, ret;

	ret = tern_boot_dial(addr, timeout_ms, &fd, why, sizeof(why));
	if (ret != 0) {
		cli_err(cmd, "%s", why);
		return ret;
	}
	if (attr->node == NULL && tcp_like(attr->provider) &&
	    tern_boot_local_host(fd, lhost, sizeof(lhost)) == 0)
		attr->node = lhost;
	ret = cli_open_ctx(cmd, attr, ctx_p);
	attr->node = attr->node == lhost ? NULL : attr->node;
	if (ret != 0) {
		close(fd);
		return CLI_BOOT_NOCTX;
	}
	len = tern_ctx_card(*ctx_p, mine.card, sizeof(mine.card));
	mine.card_len = len > 0 ? (size_t)len : 0;
	ret = tern_boot_hello(fd, token, &mine, theirs, timeout_ms, why,
			      sizeof(why));
	if (ret != 0) {
		cli_err(cmd, "%s: %s", addr, why);
		tern_ctx_close(*ctx_p);
		*ctx_p = NULL;
		close(fd);
		return ret;
	}
	*fd_p = fd;
	return 0;
}

static void boot_log(struct tern_boot_server *srv,
		     const struct tern_boot_info *info, const char *text,
		     void *data)
{
	(void)srv;
	(void)info;
	printf("%s: %s\n", (const char *)data, text);
	fflush(stdout);
}

int cli_boot_serve(const char *cmd, struct tern_ctx *ctx, const char *listen,
		   const char *token, struct tern_boot_server **srv_p)
{
	struct tern_boot_server_attr ba = {
		.listen = listen,
		.token = token,
		.on_hello = boot_log,
		.on_gone = boot_log,
		.on_refused = boot_log,
		.data = (void *)cmd,
	};
	struct tern_boot_info mine = { 0 };
	char why[256], addr[80];
	ssize_t len;
	int ret;

	len = tern_ctx_card(ctx, mine.card, sizeof(mine.card));
	mine.card_len = len > 0 ? (size_t)len : 0;
	ret = tern_boot_server_open(ctx, &ba, &mine, srv_p, why, sizeof(why));
	if (ret != 0) {
		cli_err(cmd, "--listen: %s", why);
		return ret;
	}
	tern_boot_server_addr(*srv_p, addr, sizeof(addr));
	printf("%s: listening on %s (TCP bootstrap%s)\n", cmd, addr,
	       token ? "; token required" : "");
	fflush(stdout);
	return 0;
}

int cli_sizes(const char *cmd, const char *list, uint64_t max, uint64_t *sizes,
	      size_t cap, size_t *n_p)
{
	char one[64];
	const char *p = list;
	size_t n = 0;

	/* Every element is a size: "8,,64" and "," are typos, not lists
	 * that skip the empty ones. */
	for (;;) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= sizeof(one)) {
			cli_err(cmd, "--sizes '%s': size %zu is %s", list,
				n + 1, len == 0 ? "empty" : "too long");
			return -EINVAL;
		}
		if (n == cap) {
			cli_err(cmd, "--sizes '%s': at most %zu sizes", list,
				cap);
			return -EINVAL;
		}
		memcpy(one, p, len);
		one[len] = '\0';
		if (cli_size(cmd, "--sizes", one, 1, max, &sizes[n]) != 0)
			return -EINVAL;
		n++;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	*n_p = n;
	return 0;
}

pid_t cli_spawn(const char *const *args, int quiet, void (*in_child)(void),
		int *fd_p)
{
	char path[32], num[16];
	const char *argv[32];
	pid_t pid, parent = getpid();
	int p[2];
	size_t i;

	if (pipe(p) != 0)
		return -1;
	snprintf(path, sizeof(path), "/dev/fd/%d", p[1]);
	snprintf(num, sizeof(num), "%d", p[1]);
	for (i = 0; args[i] != NULL && i + 1 < sizeof(argv) / sizeof(*argv);
	     i++) {
		if (strcmp(args[i], "{path}") == 0)
			argv[i] = path;
		else if (strcmp(args[i], "{fd}") == 0)
			argv[i] = num;
		else
			argv[i] = args[i];
	}
	argv[i] = NULL;
	pid = fork();
	if (pid == 0) {
		int devnull = quiet ? open("/dev/null", O_WRONLY) : -1;

		/* A child whose parent died (killed, crashed) must not stay
		 * behind polling forever. (Its parent may be pid 1 itself,
		 * as a container's first process is.) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(p[0]);
		if (devnull >= 0)
			dup2(devnull, 1);
		if (in_child != NULL)
			in_child();
		/* A bad $TERN_LOG is named by this process (the library
		 * reads it once): not again by each child. */
		if (getenv("TERN_LOG") != NULL &&
		    tern_log_parse_level(getenv("TERN_LOG")) < 0)
			unsetenv("TERN_LOG");
		/* A real second process: this binary, exec'd afresh. */
		execv("/proc/self/exe", (char *const *)argv);
		fprintf(stderr, "tern: exec /proc/self/exe: %s\n",
			strerror(errno));
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	*fd_p = p[0];
	return pid;
}

int cli_read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	struct timespec t0, now;
	size_t n = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n + 1 < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long left;
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 +
				     (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			return -ETIMEDOUT;
		r = read(fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return n > 0 ? 0 : -EPIPE;
}

int cli_reap(pid_t pid, int timeout_ms)
{
	int st = 0;

	for (int i = 0; i < timeout_ms / 100; i++) {
		if (waitpid(pid, &st, WNOHANG) != 0)
			return st;
		usleep(100000);
	}
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
	return st;
}

int cli_stdout_to(const char *cmd, const char *path)
{
	int fd, saved;

	if (path == NULL)
		return -2;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		cli_err(cmd, "%s: %s", path, strerror(errno));
		return -1;
	}
	fflush(stdout);
	saved = dup(1);
	if (saved < 0 || dup2(fd, 1) < 0) {
		cli_err(cmd, "%s: %s", path, strerror(errno));
		close(fd);
		if (saved >= 0)
			close(saved);
		return -1;
	}
	close(fd);
	return saved;
}

int cli_stdout_back(const char *cmd, int saved)
{
	int ret = 0;

	if (saved < 0)
		return 0;
	if (fflush(stdout) != 0 || fsync(1) != 0) {
		cli_err(cmd, "writing the JSON file: %s", strerror(errno));
		ret = -EIO;
	}
	dup2(saved, 1);
	close(saved);
	return ret;
}

const char *cli_atomic_provider(const char *prov)
{
	const char *p = prov != NULL ? prov : getenv("TERN_PROVIDER");

	if (p == NULL)
		return prov;
	/* efa-direct, the default fabric where offered, has no atomics;
	 * the efa fabric emulates them. An explicit --fabric stands. */
	if (strcmp(p, "efa") == 0 && getenv("TERN_FABRIC") == NULL)
		setenv("TERN_FABRIC", "efa", 1);
	/* "tcp" is tcp's own RDM endpoint on libfabric 2.x: no atomics;
	 * tcp;ofi_rxm emulates them. */
	if (strcmp(p, "tcp") == 0)
		return "tcp;ofi_rxm";
	return prov;
}
