/* SPDX-License-Identifier: MIT */
/*
 * local_hostile's attacks on the ways in: silent (connections to a
 * broker that never send, and another uid's asks) and serve (`tern fill
 * --listen` sent CONNECTs without a ticket, each naming another local
 * tern process's card).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tern/tern.h>

#include "local_hostile_fixture.h"

#include "../../apps/fill/fill.h"
#include "../../apps/fill/proto.h"
#include "../../src/engine/local_int.h"
#include "../../src/wire/local.h"

/* ---- silent: connections that never send ---------------------------- */

/* An ask for the inbox as @me: the answer's status, or the fd count. */
static int ask_inbox(uint64_t owner, uint64_t me, int timeout_ms)
{
	struct tern__lb_req req = { .what = TERN__LB_INBOX, .nonce = me };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	uint8_t buf[TERN__LB_REQ_MAX], ans[TERN__LB_ANS_LEN];
	struct iovec iov = { ans, sizeof(ans) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct tern__lb_ans an;
	struct pollfd pf;
	char why[128];
	ssize_t len, got;
	int s = broker_connect(owner), n = 0;

	if (s < 0)
		return -errno;
	len = tern__lb_req_pack(&req, buf, sizeof(buf));
	(void)send(s, buf, (size_t)len, MSG_NOSIGNAL);
	pf = (struct pollfd){ .fd = s, .events = POLLIN };
	if (poll(&pf, 1, timeout_ms) != 1) {
		close(s);
		return -ETIMEDOUT;
	}
	got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	if (got < 0)
		return errno == ECONNRESET ? -EPERM : -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		for (size_t k = 0;
		     k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int),
			       sizeof(int));
			close(fd);
			n++;
		}
	}
	CHECK(tern__lb_ans_parse(ans, (size_t)got, &an, why, sizeof(why)) == 0,
	      "%s", why);
	return an.status != 0 ? an.status : n;
}

static void other_uid_main(struct chan *c)
{
	uint64_t owner;
	int refused = 0;

	CHECK(setgid(65534) == 0 && setuid(65534) == 0, "setuid");
	get(c->in, &owner, sizeof(owner));
	for (int k = 0; k < 20; k++)
		refused += ask_inbox(owner, 1, 3000) == -EPERM;
	put(c->out, &refused, sizeof(refused));
}

int case_silent(void)
{
	struct tern_ctx *o, *g;
	uint64_t owner, me, t0, took;
	int silent[20], ret, refused = 0;
	struct chan c;
	char *log;
	pid_t pid;

	if (need_root("silent"))
		return 77;
	/* Another uid's process, forked before any ctx opens. */
	pid = fork_child(&c, other_uid_main);
	o = open_ctx();
	g = open_ctx();
	owner = tern__local_id(o)->nonce;
	me = tern__local_id(g)->nonce;
	CHECK(o->local->lsock >= 0,
	      "no fd broker (run with TERN_LOCAL_BROKER=1)");
	add(o, g); /* g's process (ours) may connect */
	for (int k = 0; k < 20; k++) {
		silent[k] = broker_connect(owner);
		CHECK(silent[k] >= 0, "silent connection %d: %s", k,
		      strerror(errno));
	}
	usleep(20000);
	t0 = now_ms();
	ret = ask_inbox(owner, me, 200);
	took = now_ms() - t0;
	CHECK(ret == 2,
	      "a good peer's ask behind 20 silent connections: %s "
	      "after %llu ms",
	      strerror(-ret), (unsigned long long)took);
	/* Another uid: refused before it is heard. */
	tern_log_set_level(TERN_LOG_DEBUG);
	cap_begin();
	put(c.out, &owner, sizeof(owner));
	get(c.in, &refused, sizeof(refused));
	reap(pid);
	log = cap_end();
	tern_log_set_level(TERN_LOG_WARN);
	CHECK(refused == 20, "%d of uid 65534's 20 asks refused", refused);
	CHECK(count(log, "of uid 65534 is not a peer of ours: refused") == 20,
	      "the broker named %d refusals of uid 65534 (want 20)",
	      count(log, "of uid 65534 is not a peer of ours: refused"));
	t0 = now_ms();
	ret = ask_inbox(owner, me, 200);
	CHECK(ret == 2, "a good peer's ask after: %s", strerror(-ret));
	for (int k = 0; k < 20; k++)
		close(silent[k]);
	good_peer(o, "silent");
	printf("silent: 20 silent connections, a good peer answered in %llu "
	       "ms; uid 65534 refused 20 times\n",
	       (unsigned long long)took);
	free(log);
	tern_ctx_close(g);
	tern_ctx_close(o);
	return 0;
}

/* ---- serve: tern fill --listen answers CONNECTs naming a local victim */

#define SERVE_CONNECTS 200

/* A number from /proc/@pid/status's line @key (VmRSS: kB). */
static long proc_status(pid_t pid, const char *key)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	CHECK(f != NULL, "%s", path);
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			v = atol(line + strlen(key));
	fclose(f);
	return v;
}

static int nfds(pid_t pid)
{
	char *t = fd_table(pid);
	int n = 0;

	for (char *p = t; *p != '\0'; p++)
		n += *p == '\n';
	free(t);
	return n;
}

/* Start `tern fill --listen` (binary @tern), its output into @lfd (the
 * file @log): its pid, and the address it listens at into @addr. */
static pid_t serve_start(const char *tern, int lfd, const char *log, char *addr,
			 size_t cap)
{
	pid_t spid = fork();

	CHECK(spid >= 0, "fork");
	kid(spid);
	if (spid == 0) {
		dup2(lfd, 1);
		dup2(lfd, 2);
		const char *av[] = {
			tern,	       "fill",	     "--listen",
			"127.0.0.1:0", "--provider", g_prov,
			"--token",     "t0k",	     "--fill-timeout",
			"2000",	       "--node",     g_node,
			NULL
		};

		if (g_node == NULL)
			av[10] = NULL;
		execv(tern, (char **)av);
		_exit(127);
	}
	for (int i = 0; i < 200 && addr[0] == '\0'; i++) {
		char buf[4096], *p;
		ssize_t n = pread(lfd, buf, sizeof(buf) - 1, 0);

		buf[n > 0 ? n : 0] = '\0';
		p = strstr(buf, " (TCP bootstrap");
		if (p != NULL) {
			char *q = p;

			while (q > buf && q[-1] != ' ')
				q--;
			snprintf(addr, cap, "%.*s", (int)(p - q), q);
		} else {
			usleep(50000);
		}
	}
	CHECK(addr[0] != '\0', "tern fill --listen did not start (log %s)",
	      log);
	return spid;
}

/* A good client of the server at @addr, from @a: the handshake (its
 * socket into @bfd_p), its ticket, a session, a first fill. */
static struct fill_conn *serve_client(struct tern_ctx *a, const char *addr,
				      const struct fill_params *good,
				      int *bfd_p)
{
	struct tern_boot_info mine = { 0 }, theirs;
	struct fill_report rep;
	struct fill_conn *conn;
	char why[256];
	int ret;

	mine.card_len = card_of(a, mine.card);
	ret = tern_boot_dial(addr, 5000, bfd_p, why, sizeof(why));
	if (ret == 0)
		ret = tern_boot_hello(*bfd_p, "t0k", &mine, &theirs, 5000, why,
				      sizeof(why));
	CHECK(ret == 0, "handshake: %s", why);
	ret = fill_conn_open_ticket(a, theirs.card, theirs.card_len,
				    theirs.ticket, theirs.ticket_len, 10000,
				    &conn, why, sizeof(why));
	CHECK(ret == 0, "a good client's CONNECT: %s", why);
	CHECK(fill_conn_fill(conn, good, &rep) == 0, "a first fill: %s",
	      rep.error);
	return conn;
}

/* CONNECTs with no ticket down @conn, each naming the victim's card
 * @vcard: the server answers the card it names (over the fabric only). */
static void serve_flood(struct tern_ctx *a, struct fill_conn *conn,
			const uint8_t *vcard, size_t vn)
{
	uint8_t *msg = malloc(FILL_MSG_MAX);

	CHECK(msg != NULL, "alloc");
	for (int k = 0; k < SERVE_CONNECTS; k++) {
		ssize_t n = fill_connect_encode(msg, FILL_MSG_MAX,
						(uint64_t)k + 100, vcard, vn,
						fill_conn_regions(conn));

		CHECK(n > 0 && fill_conn_send_raw(conn, msg, (size_t)n) == 0,
		      "CONNECT %d", k);
		if (k % 20 == 19)
			for (int i = 0; i < 20; i++)
				tern_wait(a, NULL, 1);
	}
	for (int i = 0; i < 300; i++)
		tern_wait(a, NULL, 1);
	free(msg);
}

/* All of the file @fd as text (the caller frees it). */
static char *file_text(int fd)
{
	struct stat st;
	char *text;

	CHECK(fstat(fd, &st) == 0, "fstat");
	text = calloc(1, (size_t)st.st_size + 1);
	CHECK(text != NULL && pread(fd, text, (size_t)st.st_size, 0) ==
				      (ssize_t)st.st_size,
	      "read the server's log");
	return text;
}

int case_serve(void)
{
	const char *tern = getenv("TERN");
	char log[] = "/tmp/tern-fill-listen-XXXXXX", addr[128] = "";
	uint8_t vcard[TERN_CARD_MAX], *want = malloc(MEM);
	struct fill_params good = { .page_size = 4096, .pages = 8, .seed = 9 };
	struct fill_report rep;
	struct fill_conn *conn;
	struct tern_mr_desc vd;
	struct tern_ctx *a;
	char *vfds_before, *vfds_after, *text;
	long rss0, rss1;
	int lfd, bfd, fd0, fd1, ret, good_pidfd, vn0, vn1;
	size_t vn;
	pid_t spid, victim;
	struct chan vc;

	CHECK(tern != NULL, "$TERN names no tern binary");
	CHECK(want != NULL, "alloc");
	lfd = mkstemp(log);
	CHECK(lfd >= 0, "mkstemp");
	/* The victim: a tern process of our uid on this host. */
	victim = fork_child(&vc, owner_main);
	vn = get(vc.in, vcard, sizeof(vcard));
	get(vc.in, &vd, sizeof(vd));
	fill(want, MEM, 11);
	spid = serve_start(tern, lfd, log, addr, sizeof(addr));
	a = open_ctx();
	conn = serve_client(a, addr, &good, &bfd);
	vfds_before = fd_table_of(victim, 1);
	vn0 = nfds(victim);
	fd0 = nfds(spid);
	rss0 = proc_status(spid, "VmRSS:");
	serve_flood(a, conn, vcard, vn);
	/* The good client is still served. */
	CHECK(fill_conn_fill(conn, &good, &rep) == 0 &&
		      rep.verified == 4096ull * 8,
	      "a fill after %d hostile CONNECTs: %s", SERVE_CONNECTS,
	      rep.error);
	fd1 = nfds(spid);
	rss1 = proc_status(spid, "VmRSS:");
	vfds_after = fd_table_of(victim, 1);
	vn1 = nfds(victim);
	/* Its sockets may change: over tcp the server's ERROR to the card's
	 * address is a connection to it (the fabric's, as any client's). */
	CHECK(strcmp(vfds_before, vfds_after) == 0,
	      "the victim's fd table changed:\n%s\nthen\n%s", vfds_before,
	      vfds_after);
	CHECK(!holds_pidfd(spid, victim),
	      "the server holds a pidfd of the victim");
	good_pidfd = holds_pidfd(spid, getpid());
	CHECK(owner_has(&vc, want), "the victim's memory changed");
	CHECK(fd1 <= fd0 + 2, "the server's fds went from %d to %d", fd0, fd1);
	CHECK(rss1 <= rss0 + 16384, "the server's RSS went from %ld to %ld kB",
	      rss0, rss1);
	fill_conn_close(conn);
	close(bfd);
	put(vc.out, "bye", 3);
	reap(victim);
	kill(spid, SIGINT);
	CHECK(waitpid(spid, &ret, 0) == spid && WIFEXITED(ret) &&
		      WEXITSTATUS(ret) == 0,
	      "tern fill --listen exited %#x", ret);
	text = file_text(lfd);
	printf("--- server log\n%s---\n", text);
	CHECK(count(text, "ticket") >= 1,
	      "the server's log names no refusal for want of a ticket");
	CHECK(count(text, "same-host path") == 0,
	      "the server looked at the victim's same-host identity");
	printf("serve: %d CONNECTs without a ticket naming pid %d's card: "
	       "its memory and fds untouched, no pidfd of it in the server "
	       "(which holds one of its good client: %s); its fds %d -> %d "
	       "(sockets included); server fds %d -> %d, RSS %ld -> %ld kB; "
	       "a good client served\n",
	       SERVE_CONNECTS, (int)victim, good_pidfd ? "yes" : "no", vn0, vn1,
	       fd0, fd1, rss0, rss1);
	tern_ctx_close(a);
	close(lfd);
	unlink(log);
	free(text);
	free(want);
	free(vfds_before);
	free(vfds_after);
	return 0;
}
