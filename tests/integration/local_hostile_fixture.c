/* SPDX-License-Identifier: MIT */
/* local_hostile's shared helpers (local_hostile_fixture.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_hostile_fixture.h"

uint8_t g_mem[MEM] __attribute__((aligned(4096)));

/* @card (a real one, for its fabric address) with the same-host part
 * @loc: what a forger sends. @return its length. */
size_t card_splice(const uint8_t *card, size_t len,
		   const struct tern__card_local *loc, uint8_t *out)
{
	struct tern__card c;
	char why[128];
	ssize_t n;

	CHECK(tern__card_parse(card, len, &c, why, sizeof(why)) == 0, "%s",
	      why);
	c.local = loc;
	n = tern__card_pack(&c, out, TERN_CARD_MAX);
	CHECK(n > 0, "card pack: %zd", n);
	return (size_t)n;
}

/* The same-host part of @card. */
struct tern__card_local local_of(const uint8_t *card, size_t len)
{
	struct tern__card c;
	char why[128];

	CHECK(tern__card_parse(card, len, &c, why, sizeof(why)) == 0 &&
		      c.local != NULL,
	      "a card without a same-host part: %s", why);
	return *c.local;
}

int pump(struct tern_req *req, struct tern_ctx *a, struct tern_ctx *b)
{
	for (int i = 0; i < 2000000 && !req->done; i++) {
		tern_progress(a);
		if (b != NULL)
			tern_progress(b);
		if (i > 1000)
			usleep(10);
	}
	CHECK(req->done, "request never completed");
	return req->status;
}

void spin(struct tern_ctx *a, struct tern_ctx *b, int ms)
{
	for (int i = 0; i < ms; i++) {
		tern_progress(a);
		if (b != NULL)
			tern_progress(b);
		usleep(1000);
	}
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- what a case looks at ------------------------------------------ */

/* /proc/@pid/fd as text: "fd -> target" lines, sorted by fd; sockets
 * left out when @no_sockets (a provider's connections: the fabric's). */
char *fd_table_of(pid_t pid, int no_sockets)
{
	char path[64], *out = NULL;
	struct dirent **ents;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int n;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	n = scandir(path, &ents, NULL, versionsort);
	CHECK(f != NULL && n >= 0, "%s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++) {
		char p[600], t[256];
		ssize_t k;

		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			k = readlink(p, t, sizeof(t) - 1);
			t[k > 0 ? k : 0] = '\0';
			if (!no_sockets || strncmp(t, "socket:", 7) != 0)
				fprintf(f, "%s -> %s\n", ents[i]->d_name, t);
		}
		free(ents[i]);
	}
	free(ents);
	fclose(f);
	return out;
}

char *fd_table(pid_t pid)
{
	return fd_table_of(pid, 0);
}

/* Does @pid hold a pidfd of @target (/proc/PID/fdinfo's "Pid:")? */
int holds_pidfd(pid_t pid, pid_t target)
{
	char path[64], line[128], want[32];
	struct dirent *e;
	int found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	snprintf(want, sizeof(want), "Pid:\t%d\n", (int)target);
	d = opendir(path);
	CHECK(d != NULL, "%s", path);
	while ((e = readdir(d)) != NULL && !found) {
		char p[600];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		f = fopen(p, "r");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL)
			found |= strcmp(line, want) == 0;
		fclose(f);
	}
	closedir(d);
	return found;
}

/* Children to end if a check fails (exit with them alive would keep
 * the test's output open). */
static pid_t g_kids[16];
static int g_nkids;
pid_t g_main;

void kill_kids(void)
{
	if (getpid() != g_main)
		return;
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0)
			kill(g_kids[i], SIGKILL);
}

void kid(pid_t pid)
{
	if (g_nkids < 16)
		g_kids[g_nkids++] = pid;
}

/* Capturing our own stderr (tern logs there): begin, then end, which
 * hands back what was written and echoes it to the real stderr. */
static int g_saved_err = -1, g_cap = -1;

void cap_begin(void)
{
	fflush(stderr);
	g_cap = memfd_create("log", MFD_CLOEXEC);
	g_saved_err = dup(2);
	CHECK(g_cap >= 0 && g_saved_err >= 0 && dup2(g_cap, 2) == 2,
	      "capture stderr");
}

char *cap_end(void)
{
	struct stat st;
	char *t;

	fflush(stderr);
	dup2(g_saved_err, 2);
	close(g_saved_err);
	CHECK(fstat(g_cap, &st) == 0, "fstat");
	t = calloc(1, (size_t)st.st_size + 1);
	CHECK(t != NULL && pread(g_cap, t, (size_t)st.st_size, 0) ==
				   (ssize_t)st.st_size,
	      "read the log");
	close(g_cap);
	fprintf(stderr, "%s", t);
	return t;
}

int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

/* Fork; the child runs @fn with its end of two pipes and exits. */
pid_t fork_child(struct chan *parent_end, void (*fn)(struct chan *))
{
	int a[2], b[2];
	pid_t pid;

	CHECK(pipe(a) == 0 && pipe(b) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct chan c = { .in = a[0], .out = b[1] };

		close(a[1]);
		close(b[0]);
		fn(&c);
		exit(0);
	}
	kid(pid);
	close(a[0]);
	close(b[1]);
	parent_end->in = b[0];
	parent_end->out = a[1];
	return pid;
}

void reap(pid_t pid)
{
	int st;

	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed (%#x)",
	      (int)pid, st);
}

/* A good peer pair after an attack: @owner adds a fresh ctx and the ctx
 * adds it; a write lands at once on the same-host path. */
void good_peer(struct tern_ctx *owner, const char *after)
{
	struct tern_ctx *w = open_ctx();
	uint8_t *buf, src[4096];
	struct tern_mr *omr, *wmr;
	struct tern_mr_desc d;
	struct tern_peer *p;
	struct tern_req r;
	uint64_t t0;

	CHECK(tern_mem_alloc(TERN_MEM_SHARED, 0, 8192, (void **)&buf) == 0,
	      "shared alloc");
	memset(buf, 0, 8192);
	CHECK(tern_mr_reg(owner, buf, 8192, RW, &omr) == 0 &&
		      tern_mr_reg(w, src, sizeof(src), RW, &wmr) == 0,
	      "reg");
	tern_mr_desc(omr, &d);
	add(owner, w);
	p = add(w, owner);
	CHECK(tern_peer_path(p) == TERN_PATH_LOCAL,
	      "%s: a good peer is not given the same-host path", after);
	fill(src, sizeof(src), 5);
	t0 = now_ms();
	tern_req_init(&r, NULL, NULL);
	CHECK(tern_write(p, wmr, src, sizeof(src), &d, 100, &r) == 0 &&
		      pump(&r, w, owner) == 0,
	      "%s: a good peer's write", after);
	CHECK(memcmp(buf + 100, src, sizeof(src)) == 0,
	      "%s: a good peer's bytes", after);
	CHECK(now_ms() - t0 < 1000, "%s: a good peer waited %llu ms", after,
	      (unsigned long long)(now_ms() - t0));
	tern_mr_close(omr);
	tern_mr_close(wmr);
	CHECK(tern_ctx_close(w) == 0, "close");
	tern_mem_free(TERN_MEM_SHARED, buf);
}

int need_root(const char *what)
{
	if (geteuid() == 0)
		return 0;
	printf("SKIP: %s needs root (a process under another uid)\n", what);
	return 1;
}

/* B: a ctx with a region on g_mem; sends its card and descriptor, then
 * on "add" adds the card it is given; "check" compares g_mem with the
 * pattern it is sent; progresses while it waits. */
void owner_main(struct chan *c)
{
	uint8_t card[TERN_CARD_MAX], *want = malloc(MEM);
	struct tern_ctx *ctx = open_ctx();
	struct tern_mr_desc d;
	struct tern_mr *mr;
	struct tern_peer *p;
	size_t n;

	CHECK(want != NULL, "alloc");
	fill(g_mem, MEM, 11);
	CHECK(tern_mr_reg(ctx, g_mem, MEM, RW, &mr) == 0, "B: reg");
	tern_mr_desc(mr, &d);
	n = card_of(ctx, card);
	put(c->out, card, n);
	put(c->out, &d, sizeof(d));
	for (;;) {
		char cmd[8];
		struct pollfd pf = { .fd = c->in, .events = POLLIN };

		tern_progress(ctx);
		if (poll(&pf, 1, 1) != 1)
			continue;
		n = get(c->in, cmd, sizeof(cmd));
		if (n == 3 && memcmp(cmd, "bye", 3) == 0)
			break;
		if (n == 3 && memcmp(cmd, "add", 3) == 0) {
			n = get(c->in, card, sizeof(card));
			CHECK(tern_peer_add(ctx, card, n, &p) == 0, "B: add A");
			put(c->out, "ok", 2);
		} else {
			int same;

			get(c->in, want, MEM);
			same = memcmp(g_mem, want, MEM) == 0;
			put(c->out, &same, sizeof(same));
		}
	}
	tern_ctx_close(ctx);
	free(want);
}

int owner_has(struct chan *c, const uint8_t *want)
{
	int same = 0;

	put(c->out, "check", 5);
	put(c->out, want, MEM);
	get(c->in, &same, sizeof(same));
	return same;
}
