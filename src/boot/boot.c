/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap over TCP (tern/boot.h): dialling, the client's handshake, and
 * a server whose handshakes run as small state machines in a ctx's loop.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tern/boot.h>
#include <tern/tern.h>

#include "../wire/boot.h"
#include "../core/attr.h"
#include "../core/core.h"
#include "../wire/card.h"
#include "../wire/wire.h"

#define ADDR_STR 72 /* "[v6%scope]:port" */

int tern_boot_is_addr(const char *arg)
{
	return arg != NULL && strpbrk(arg, ":.[") != NULL;
}

static void sa_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
}

/* A peer host that vanishes without a reset (power, cable, link gone for
 * good) would leave a liveness channel open forever: keepalive probes
 * after 10 s of silence, 4 probes 2 s apart, end it about 18 s later. A
 * link down for a few seconds survives. */
static void keepalive(int fd)
{
	int on = 1, idle = 10, intvl = 2, cnt = 4;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

static int ms_left(uint64_t deadline)
{
	uint64_t now = tern__now_ns();

	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Wait for @events on @fd until @deadline. @return 0, -ETIMEDOUT. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int left = ms_left(deadline), n;

		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* ---- client ------------------------------------------------------- */

static int dial_one(const struct addrinfo *ai, uint64_t deadline, int *fd_p)
{
	socklen_t sl = sizeof(int);
	int fd, ret, err = 0, one = 1;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	ret = set_nonblock(fd);
	if (ret == 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		ret = errno == EINPROGRESS ? 0 : -errno;
		if (ret == 0)
			ret = wait_fd(fd, POLLOUT, deadline);
		if (ret == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0)
			ret = -err;
	}
	if (ret != 0) {
		close(fd);
		return ret;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	keepalive(fd);
	*fd_p = fd;
	return 0;
}

int tern_boot_dial(const char *addr, int timeout_ms, int *fd_p, char *why,
		   size_t whylen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char host[256], port[8], where[ADDR_STR];
	uint64_t deadline;
	int ret, gai;

	if (fd_p == NULL)
		return -EINVAL;
	ret = tern__boot_split(addr, host, sizeof(host), port, sizeof(port),
			       why, whylen);
	if (ret != 0)
		return ret;
	if (host[0] == '\0') {
		snprintf(why, whylen, "'%s': which host? (HOST:PORT)", addr);
		return -EINVAL;
	}
	gai = getaddrinfo(host, port, &hints, &res);
	if (gai != 0) {
		snprintf(why, whylen, "cannot resolve '%s': %s", host,
			 gai_strerror(gai));
		return gai == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	}
	deadline = tern__now_ns() +
		   (uint64_t)(timeout_ms > 0 ? timeout_ms : 10000) * 1000000ULL;
	ret = -EHOSTUNREACH;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		ret = dial_one(ai, deadline, fd_p);
		sa_str(ai->ai_addr, where, sizeof(where));
		if (ret == 0)
			break;
		snprintf(why, whylen, "connecting to %s: %s", where,
			 ret == -ETIMEDOUT ? "timed out" : strerror(-ret));
		if (ret == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return ret;
}

int tern_boot_local_host(int fd, char *host, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a;

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	else if (ss.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	else
		return -EAFNOSUPPORT;
	return inet_ntop(ss.ss_family, a, host, (socklen_t)len) ? 0 : -errno;
}

static int send_all(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		k = wait_fd(fd, POLLOUT, deadline);
		if (k != 0)
			return (int)k;
	}
	return 0;
}

/* Read one whole message into @buf. @return its length or an error. */
static ssize_t recv_msg(int fd, uint8_t *buf, uint64_t deadline, char *why,
			size_t whylen)
{
	size_t have = 0, want = TERN_BOOT_HDR;

	while (have < want) {
		ssize_t k = recv(fd, buf + have, want - have, MSG_DONTWAIT);

		if (k == 0) {
			snprintf(why, whylen,
				 "the server closed the connection without "
				 "answering");
			return -TERN_EPEERGONE;
		}
		if (k < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				int e = errno;

				snprintf(why, whylen, "reading the answer: %s",
					 strerror(e));
				return e == ECONNRESET ? -TERN_EPEERGONE : -e;
			}
			k = wait_fd(fd, POLLIN, deadline);
			if (k != 0) {
				snprintf(why, whylen,
					 "no answer from the server in time");
				return k;
			}
			continue;
		}
		have += (size_t)k;
		if (want == TERN_BOOT_HDR && have == TERN_BOOT_HDR) {
			ssize_t need = tern__boot_need(buf, have, why, whylen);

			if (need < 0)
				return need;
			want = (size_t)need;
		}
	}
	return (ssize_t)have;
}

int tern_boot_hello(int fd, const char *token,
		    const struct tern_boot_info *mine,
		    struct tern_boot_info *theirs, int timeout_ms, char *why,
		    size_t whylen)
{
	struct tern__boot_msg *m;
	uint64_t deadline;
	uint8_t *buf;
	ssize_t n;
	int ret;

	if (mine == NULL || theirs == NULL ||
	    (token != NULL && strlen(token) > TERN_BOOT_TOKEN_MAX))
		return -EINVAL;
	buf = malloc(TERN_BOOT_MSG_MAX);
	m = malloc(sizeof(*m));
	if (buf == NULL || m == NULL) {
		free(buf);
		free(m);
		return -ENOMEM;
	}
	deadline = tern__now_ns() +
		   (uint64_t)(timeout_ms > 0 ? timeout_ms : 10000) * 1000000ULL;
	n = tern__boot_encode(buf, TERN_BOOT_MSG_MAX, TERN_BOOT_HELLO, mine,
			      token);
	ret = n < 0 ? (int)n : send_all(fd, buf, (size_t)n, deadline);
	if (ret != 0) {
		snprintf(why, whylen, "sending the hello: %s",
			 tern_strerror(ret));
		goto out;
	}
	n = recv_msg(fd, buf, deadline, why, whylen);
	if (n < 0) {
		ret = (int)n;
		goto out;
	}
	ret = tern__boot_decode(buf, (size_t)n, m, why, whylen);
	if (ret != 0)
		goto out;
	if (m->type == TERN_BOOT_REFUSE) {
		snprintf(why, whylen, "the server refused: %s", m->text);
		ret = -TERN_EREFUSED;
	} else if (m->type != TERN_BOOT_WELCOME) {
		snprintf(why, whylen,
			 "the server answered with a message of "
			 "type %u, not a welcome",
			 m->type);
		ret = -TERN_EPROTO;
	} else {
		*theirs = m->info;
	}
out:
	free(buf);
	free(m);
	return ret;
}

/* ---- server ------------------------------------------------------- */

struct bconn {
	struct tern_boot_server *srv;
	struct bconn *prev, *next;
	struct tern_io io;
	struct tern_timer timer;
	int fd;
	int live;
	int claimed; /* tern_boot_server_claim() found it */
	size_t have, want;
	char peer[ADDR_STR];
	struct tern_boot_info info;
	uint8_t buf[TERN_BOOT_MSG_MAX];
};

struct tern_boot_server {
	struct tern_ctx *ctx;
	struct tern_boot_server_attr attr;
	struct tern_boot_info mine;
	char *token;
	int lfd;
	struct tern_io lio;
	struct tern_timer pause; /* accept paused: out of fds or memory */
	uint64_t accept_errs;
	struct bconn *conns;
	int nconns;
	char addr[ADDR_STR];
	struct tern_boot_server_stats st;
};

static void conn_free(struct bconn *c)
{
	struct tern_boot_server *srv = c->srv;

	tern_io_stop(&c->io);
	tern_timer_stop(&c->timer);
	if (c->fd >= 0)
		close(c->fd);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	srv->nconns--;
	if (c->live)
		srv->st.live--;
	free(c);
}

/*
 * Close without a reset: a close with unread bytes in the socket sends a
 * TCP reset, and the client may then lose the REFUSE just sent. Say we
 * are done (FIN after the refusal), read what the client already sent
 * (bounded: a client streaming bytes at us must not hold us), close.
 */
static void linger_close(int fd)
{
	uint8_t junk[4096];

	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 16; i++) {
		if (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) <= 0)
			break;
	}
	close(fd);
}

static void refuse(struct bconn *c, int code, const char *fmt, ...)
	TERN_PRINTF(3, 4);

/* Tell the client why (best effort: its socket may be full or gone), log,
 * and close. */
static void refuse(struct bconn *c, int code, const char *fmt, ...)
{
	struct tern_boot_server *srv = c->srv;
	char text[TERN_BOOT_TEXT_MAX + 1], line[TERN_BOOT_TEXT_MAX + 96];
	uint8_t out[TERN_BOOT_HDR + 8 + TERN_BOOT_TEXT_MAX];
	va_list ap;
	ssize_t n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (code != 0) {
		n = tern__boot_encode_refuse(
			out, sizeof(out), (uint32_t)(code < 0 ? -code : code),
			text);
		/* Best effort: nothing more to do for a client that is
		 * not reading or already gone. */
		if (n > 0)
			(void)!send(c->fd, out, (size_t)n,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	linger_close(c->fd);
	c->fd = -1;
	snprintf(line, sizeof(line), "refused %s: %s", c->peer, text);
	srv->st.refused++;
	if (srv->attr.on_refused != NULL)
		srv->attr.on_refused(srv, NULL, line, srv->attr.data);
	else
		tern__info("boot: %s", line);
	conn_free(c);
}

static void welcome(struct bconn *c)
{
	struct tern_boot_server *srv = c->srv;
	char line[ADDR_STR + 64];
	ssize_t n;

	/* This connection's ticket: what the client must hand back over the
	 * fabric for tern_boot_server_claim() (a copied card is not
	 * enough). Kept in the hello's info, which has no ticket of its
	 * own. */
	if (getrandom(c->info.ticket, TERN_BOOT_TICKET_LEN, 0) !=
	    TERN_BOOT_TICKET_LEN) {
		refuse(c, EAGAIN, "no random bytes for a ticket: %s",
		       strerror(errno));
		return;
	}
	c->info.ticket_len = TERN_BOOT_TICKET_LEN;
	memcpy(srv->mine.ticket, c->info.ticket, TERN_BOOT_TICKET_LEN);
	srv->mine.ticket_len = TERN_BOOT_TICKET_LEN;
	n = tern__boot_encode(c->buf, sizeof(c->buf), TERN_BOOT_WELCOME,
			      &srv->mine, NULL);
	memset(srv->mine.ticket, 0, TERN_BOOT_TICKET_LEN);
	srv->mine.ticket_len = 0;
	/* The welcome is a few KiB on a new connection: it fits the
	 * socket's buffer, so a client that reads nothing cannot hold us. */
	if (n < 0 ||
	    send(c->fd, c->buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
		refuse(c, 0, "could not send the welcome: %s",
		       n < 0 ? tern_strerror((int)n) : strerror(errno));
		return;
	}
	c->live = 1;
	srv->st.live++;
	srv->st.accepted++;
	tern_timer_stop(&c->timer);
	/* A welcomed client that never opens its session must not hold a
	 * slot: conn_timeout() closes it unless claimed first. */
	if (srv->attr.claim_ms > 0)
		tern_timer_start(srv->ctx, &c->timer,
				 (uint64_t)srv->attr.claim_ms, 0);
	snprintf(line, sizeof(line), "client %s connected", c->peer);
	if (srv->attr.on_hello != NULL)
		srv->attr.on_hello(srv, &c->info, line, srv->attr.data);
}

/* Every name of a card ends in a NUL within it (a string format). */
static int names(const struct tern__card *k)
{
	for (unsigned int i = 0; i < k->nrails; i++) {
		if (memchr(k->addrs + i * k->addrlen, 0, k->addrlen) == NULL)
			return 0;
	}
	return 1;
}

/*
 * Can this server's fabric ever reach the client's card? Same address
 * format, and the same address length, except for formats of names
 * (shm's "fi_shm://PID:0:N"), where a card may be of any length if every
 * name ends in a NUL. (tern_peer_add() applies the same rule; refusing
 * here names the reason, where a later CONNECT could only be dropped.)
 */
static int card_usable(const struct tern_boot_server *srv,
		       const struct tern_boot_info *info, char *why,
		       size_t whylen)
{
	struct tern__card mine, theirs;
	char cwhy[128];

	if (tern__card_parse(srv->mine.card, srv->mine.card_len, &mine, cwhy,
			     sizeof(cwhy)) != 0 ||
	    tern__card_parse(info->card, info->card_len, &theirs, cwhy,
			     sizeof(cwhy)) != 0) {
		snprintf(why, whylen, "bad card: %s", cwhy);
		return -TERN_ECARD;
	}
	if (theirs.addr_format != mine.addr_format ||
	    (theirs.addrlen != mine.addrlen &&
	     !(names(&mine) && names(&theirs)))) {
		snprintf(why, whylen,
			 "card of address format %u with %zu-byte addresses: "
			 "this server's fabric (format %u, %zu bytes) cannot "
			 "reach it",
			 theirs.addr_format, theirs.addrlen, mine.addr_format,
			 mine.addrlen);
		return -TERN_ECARD;
	}
	return 0;
}

static void on_hello_bytes(struct bconn *c)
{
	struct tern_boot_server *srv = c->srv;
	struct tern__boot_msg *m;
	char why[160];
	int ret;

	/* The type first: a welcome or a refusal sent to a server is
	 * answered as what it is, not by what its body breaks. */
	if (tern__wire_get_u16(c->buf + 6) != TERN_BOOT_HELLO &&
	    tern__wire_get_u16(c->buf + 4) == TERN_BOOT_VERSION) {
		refuse(c, -TERN_EPROTO,
		       "expected a hello (type %d), got type %u",
		       TERN_BOOT_HELLO, tern__wire_get_u16(c->buf + 6));
		return;
	}
	m = malloc(sizeof(*m));
	if (m == NULL) {
		refuse(c, ENOMEM, "out of memory");
		return;
	}
	ret = tern__boot_decode(c->buf, c->have, m, why, sizeof(why));
	if (ret == 0 && m->type != TERN_BOOT_HELLO) {
		snprintf(why, sizeof(why), "expected a hello, got type %u",
			 m->type);
		ret = -TERN_EPROTO;
	}
	if (ret == 0)
		ret = card_usable(srv, &m->info, why, sizeof(why));
	/* A server without a token admits everyone, token or not. */
	if (ret == 0 && srv->token != NULL &&
	    !tern__boot_token_eq(m->token, m->token_len, srv->token)) {
		snprintf(why, sizeof(why), "%s",
			 m->token_len ? "wrong token"
				      : "this server requires a token");
		ret = -TERN_EREFUSED;
	}
	if (ret == 0)
		c->info = m->info;
	free(m);
	if (ret != 0)
		refuse(c, ret, "%s", why);
	else
		welcome(c);
}

static void conn_io(struct tern_io *io, unsigned int events)
{
	struct bconn *c = io->data;
	struct tern_boot_server *srv = c->srv;
	uint8_t junk[256];
	ssize_t k;
	char why[160];

	(void)events;
	if (c->live) {
		/* Nothing more is expected from a client: its leaving (or
		 * bytes it should not send) ends the liveness channel. */
		k = recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		srv->st.gone++;
		snprintf(why, sizeof(why), "client %s %s", c->peer,
			 k == 0	 ? "closed its connection"
			 : k > 0 ? "sent unexpected bytes; connection closed"
				 : "connection lost");
		if (srv->attr.on_gone != NULL)
			srv->attr.on_gone(srv, &c->info, why, srv->attr.data);
		conn_free(c);
		return;
	}
	k = recv(c->fd, c->buf + c->have, c->want - c->have, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		/* A client that half-closed can still read why. */
		refuse(c, k == 0 ? -TERN_EPROTO : 0,
		       "%s after %zu byte(s), before a whole hello",
		       k == 0 ? "closed" : strerror(errno), c->have);
		return;
	}
	c->have += (size_t)k;
	if (c->want == TERN_BOOT_HDR && c->have == TERN_BOOT_HDR) {
		ssize_t need = tern__boot_need(c->buf, c->have, why,
					       sizeof(why));

		if (need < 0) {
			refuse(c, (int)need, "%s", why);
			return;
		}
		c->want = (size_t)need;
	}
	if (c->have == c->want)
		on_hello_bytes(c);
}

static void conn_timeout(struct tern_timer *t)
{
	struct bconn *c = t->data;
	struct tern_boot_server *srv = c->srv;
	char why[ADDR_STR + 96];

	if (c->live) {
		/* Welcomed, never claimed: its slot goes back. */
		srv->st.gone++;
		snprintf(why, sizeof(why),
			 "client %s opened no session within %d ms of its "
			 "welcome; connection closed",
			 c->peer, srv->attr.claim_ms);
		if (srv->attr.on_gone != NULL)
			srv->attr.on_gone(srv, &c->info, why, srv->attr.data);
		conn_free(c);
		return;
	}
	refuse(c, ETIMEDOUT, "no hello within %d ms (%zu byte(s) received)",
	       srv->attr.handshake_ms, c->have);
}

static void listen_io(struct tern_io *io, unsigned int events)
{
	struct tern_boot_server *srv = io->data;

	(void)events;
	/* A bounded batch per wake-up, so a flood of connections does not
	 * starve the data path sharing this loop. */
	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct bconn *c;
		int fd, one = 1;

		fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ECONNABORTED)
				return;
			/* Out of fds or memory: the pending connection stays
			 * readable, so stop watching for 100 ms instead of
			 * spinning on it (and say so once per spell). */
			if (srv->accept_errs++ == 0)
				tern__warn("boot: accept: %s; pausing new "
					   "connections",
					   strerror(errno));
			tern_io_stop(&srv->lio);
			tern_timer_start(srv->ctx, &srv->pause, 100, 0);
			return;
		}
		srv->accept_errs = 0;
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->srv = srv;
		c->fd = fd;
		c->want = TERN_BOOT_HDR;
		sa_str((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		keepalive(fd);
		c->next = srv->conns;
		if (srv->conns != NULL)
			srv->conns->prev = c;
		srv->conns = c;
		srv->nconns++;
		tern_timer_init(&c->timer, conn_timeout, c);
		if (srv->nconns > srv->attr.max_conns) {
			/* Full: the oldest connection still without a
			 * hello makes room (a client says hello at once;
			 * silent ones must not lock others out). Only
			 * welcomed ones full: the newcomer is refused. */
			struct bconn *old = NULL;

			for (struct bconn *o = c->next; o != NULL;
			     o = o->next) {
				if (!o->live)
					old = o;
			}
			if (old == NULL) {
				refuse(c, EBUSY,
				       "server busy: %d connections (the "
				       "limit)",
				       srv->attr.max_conns);
				continue;
			}
			refuse(old, EBUSY,
			       "server busy: %d connections; the oldest "
			       "without a hello (this one) makes room",
			       srv->attr.max_conns);
		}
		if (tern_io_start(srv->ctx, &c->io, fd, TERN_IO_READ, conn_io,
				  c) != 0 ||
		    tern_timer_start(srv->ctx, &c->timer,
				     (uint64_t)srv->attr.handshake_ms, 0) != 0)
			refuse(c, ENOMEM, "cannot watch the connection");
	}
}

static void accept_resume(struct tern_timer *t)
{
	struct tern_boot_server *srv = t->data;

	if (tern_io_start(srv->ctx, &srv->lio, srv->lfd, TERN_IO_READ,
			  listen_io, srv) != 0)
		tern_timer_start(srv->ctx, &srv->pause, 1000, 0);
}

static int bind_listen(struct tern_boot_server *srv, const char *addr,
		       char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE },
			*res;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[256], port[8];
	int ret, gai, one = 1, zero = 0;

	ret = tern__boot_split(addr, host, sizeof(host), port, sizeof(port),
			       why, whylen);
	if (ret != 0)
		return ret;
	/* No host: every address, IPv6 and IPv4 on one socket. */
	if (host[0] == '\0')
		hints.ai_family = AF_INET6;
	gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (gai != 0 && host[0] == '\0') {
		hints.ai_family = AF_INET; /* a host without IPv6 */
		gai = getaddrinfo(NULL, port, &hints, &res);
	}
	if (gai != 0) {
		snprintf(why, whylen, "cannot resolve '%s': %s", host,
			 gai_strerror(gai));
		return -EINVAL;
	}
	srv->lfd = socket(res->ai_family,
			  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ret = srv->lfd < 0 ? -errno : 0;
	if (ret == 0) {
		setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one,
			   sizeof(one));
		if (res->ai_family == AF_INET6 && host[0] == '\0')
			setsockopt(srv->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
				   sizeof(zero));
		if (bind(srv->lfd, res->ai_addr, res->ai_addrlen) != 0 ||
		    listen(srv->lfd, 128) != 0)
			ret = -errno;
	}
	if (ret == 0 && getsockname(srv->lfd, (struct sockaddr *)&ss, &sl) == 0)
		sa_str((struct sockaddr *)&ss, srv->addr, sizeof(srv->addr));
	else if (ret != 0)
		snprintf(why, whylen, "cannot listen on %s: %s", addr,
			 strerror(-ret));
	freeaddrinfo(res);
	return ret;
}

/* tern_boot_server_attr's fields (its field_mask): every default is 0 or
 * NULL, whose meaning tern_boot_server_open() gives. */
static const struct tern_boot_server_attr server_attr_default;
#define F(bit, m)                                      \
	TERN__ATTR_FIELD(struct tern_boot_server_attr, \
			 TERN_BOOT_SERVER_ATTR_FIELD_##bit, m)
static const struct tern__attr_field server_attr_fields[] = {
	F(LISTEN, listen),
	F(TOKEN, token),
	F(HANDSHAKE_MS, handshake_ms),
	F(MAX_CONNS, max_conns),
	F(ON_HELLO, on_hello),
	F(ON_GONE, on_gone),
	F(ON_REFUSED, on_refused),
	F(DATA, data),
	F(CLAIM_MS, claim_ms),
};
#undef F
/* field_mask 0: 0.1's nine fields, all of them. */
static const struct tern__attr_kind server_attr_kind = TERN__ATTR_KIND(
	tern_boot_server_attr, server_attr_default, server_attr_fields,
	TERN_BOOT_SERVER_ATTR_FIELDS_ALL);

int tern_boot_server_attr_defaults(struct tern_boot_server_attr *attr,
				   uint64_t fields)
{
	return tern__attr_defaults(&server_attr_kind, attr, fields);
}

int tern_boot_server_open(struct tern_ctx *ctx,
			  const struct tern_boot_server_attr *uattr,
			  const struct tern_boot_info *mine,
			  struct tern_boot_server **srv_p, char *why,
			  size_t whylen)
{
	struct tern_boot_server_attr attr_buf, *attr = &attr_buf;
	struct tern_boot_server *srv;
	int ret;

	if (uattr != NULL &&
	    tern__attr_resolve(&server_attr_kind, "tern_boot_server_open",
			       uattr, attr) != 0) {
		snprintf(why, whylen, "unknown bit in attr.field_mask");
		return -EINVAL;
	}
	if (ctx == NULL || uattr == NULL || attr->listen == NULL ||
	    mine == NULL || srv_p == NULL || mine->card_len == 0 ||
	    mine->card_len > TERN_CARD_MAX ||
	    mine->ndesc > TERN_BOOT_DESCS_MAX ||
	    (attr->token != NULL &&
	     strlen(attr->token) > TERN_BOOT_TOKEN_MAX)) {
		snprintf(why, whylen, "invalid bootstrap server arguments");
		return -EINVAL;
	}
	srv = calloc(1, sizeof(*srv));
	if (srv == NULL)
		return -ENOMEM;
	srv->ctx = ctx;
	srv->attr = *attr;
	srv->mine = *mine;
	srv->lfd = -1;
	tern_timer_init(&srv->pause, accept_resume, srv);
	if (srv->attr.handshake_ms <= 0)
		srv->attr.handshake_ms = 5000;
	if (srv->attr.max_conns <= 0)
		srv->attr.max_conns = 1024;
	{
		/* Keep half the fds for everything else (the tcp provider
		 * needs one per peer). */
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY &&
		    (rlim_t)srv->attr.max_conns > rl.rlim_cur / 2)
			srv->attr.max_conns = (int)TERN_MAX(rl.rlim_cur / 2, 8);
	}
	if (attr->token != NULL && attr->token[0] != '\0') {
		srv->token = strdup(attr->token);
		if (srv->token == NULL) {
			free(srv);
			return -ENOMEM;
		}
	}
	srv->attr.token = srv->token;
	ret = bind_listen(srv, attr->listen, why, whylen);
	if (ret == 0) {
		ret = tern_io_start(ctx, &srv->lio, srv->lfd, TERN_IO_READ,
				    listen_io, srv);
		if (ret != 0)
			snprintf(why, whylen, "cannot watch the listener: %s",
				 tern_strerror(ret));
	}
	if (ret != 0) {
		if (srv->lfd >= 0)
			close(srv->lfd);
		free(srv->token);
		free(srv);
		return ret;
	}
	*srv_p = srv;
	return 0;
}

int tern_boot_server_addr(const struct tern_boot_server *srv, char *buf,
			  size_t len)
{
	if (srv == NULL || buf == NULL || len == 0)
		return -EINVAL;
	snprintf(buf, len, "%s", srv->addr);
	return 0;
}

void tern_boot_server_stats(const struct tern_boot_server *srv,
			    struct tern_boot_server_stats *st)
{
	*st = srv->st;
}

int tern_boot_server_has_card(const struct tern_boot_server *srv,
			      const void *card, size_t len)
{
	for (const struct bconn *c = srv->conns; c != NULL; c = c->next) {
		if (c->live && c->info.card_len == len &&
		    memcmp(c->info.card, card, len) == 0)
			return 1;
	}
	return 0;
}

int tern_boot_server_claim(struct tern_boot_server *srv, const void *card,
			   size_t len, const void *ticket, size_t ticket_len)
{
	if (srv == NULL || card == NULL || ticket == NULL ||
	    ticket_len != TERN_BOOT_TICKET_LEN)
		return 0;
	for (struct bconn *c = srv->conns; c != NULL; c = c->next) {
		unsigned int diff = 0;

		if (!c->live || c->info.card_len != len ||
		    memcmp(c->info.card, card, len) != 0)
			continue;
		/* Constant time over the ticket: a guess learns nothing. */
		for (size_t i = 0; i < TERN_BOOT_TICKET_LEN; i++)
			diff |= (unsigned int)(c->info.ticket[i] ^
					       ((const uint8_t *)ticket)[i]);
		if (diff != 0)
			continue;
		if (!c->claimed) {
			c->claimed = 1;
			tern_timer_stop(&c->timer);
		}
		return 1;
	}
	return 0;
}

void tern_boot_server_close(struct tern_boot_server *srv)
{
	if (srv == NULL)
		return;
	while (srv->conns != NULL)
		conn_free(srv->conns);
	tern_timer_stop(&srv->pause);
	tern_io_stop(&srv->lio);
	close(srv->lfd);
	free(srv->token);
	free(srv);
}
