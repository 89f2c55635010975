/* SPDX-License-Identifier: MIT */
/*
 * The fence of a silent rail over libfabric's tcp provider (tcp, and
 * tcp;ofi_rxm over it): its connections are this process's own kernel TCP
 * sockets. A rail whose link went silent still holds, in its socket's
 * send queue, the bytes of the operations posted on it; should the link
 * come back, TCP would send them, and a write would land after its repeat
 * on another rail, maybe over memory the caller has reused since.
 *
 * So tern disconnects those sockets itself: connect(AF_UNSPEC) on a TCP
 * socket is tcp_disconnect(): it purges the send and receive queues and
 * resets the connection, the descriptor staying libfabric's. Nothing the
 * send queue held can be sent any more; libfabric sees the connection
 * end (a read of end-of-file, after shutdown()) and fails what was posted
 * on it, which tern then posts again.
 *
 * Which sockets: those of this process between the rail's own address
 * and the peer's rail address, in either direction: connected by us (the
 * peer's listening port at the far end) or accepted (our listening port
 * here, the peer's host at the far end). A silent link is silent for
 * every process of that host, so an accepted connection from another
 * process of the peer's host goes too when @any_port is set (the silence
 * was seen here); a peer's own request (its FENCE) drops only what names
 * its listening port.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "../core/core.h"
#include "prov.h"

static int same_host(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)
			       ->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)(const void *)b)
			       ->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)(const void *)a)
			       ->sin6_addr,
		      &((const struct sockaddr_in6 *)(const void *)b)
			       ->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

static uint16_t port_of(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_port;
	return ((const struct sockaddr_in6 *)(const void *)a)->sin6_port;
}

/* An address of a tcp rail (what fi_getname() gave, or a card's), as a
 * socket address, or NULL. */
static const struct sockaddr *sock_addr(const void *addr, size_t len)
{
	const struct sockaddr *sa = addr;

	if (len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET)
		return sa;
	if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6)
		return sa;
	return NULL;
}

/* Is @fd a connection of the rail @mine to @theirs? */
static int rail_conn(int fd, const struct sockaddr *mine,
		     const struct sockaddr *theirs, int any_port)
{
	struct sockaddr_storage here, there;
	socklen_t hl = sizeof(here), tl = sizeof(there);
	int type = 0;
	socklen_t olen = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) != 0 ||
	    type != SOCK_STREAM ||
	    getsockname(fd, (struct sockaddr *)&here, &hl) != 0 ||
	    getpeername(fd, (struct sockaddr *)&there, &tl) != 0)
		return 0;
	if (!same_host((struct sockaddr *)&here, mine) ||
	    !same_host((struct sockaddr *)&there, theirs))
		return 0;
	if (port_of((struct sockaddr *)&there) == port_of(theirs))
		return 1; /* ours to its listener */
	return any_port && port_of((struct sockaddr *)&here) == port_of(mine);
}

int tern__prov_fence(const void *mine, size_t mlen, const void *theirs,
		     size_t tlen, int any_port)
{
	const struct sockaddr *m = sock_addr(mine, mlen);
	const struct sockaddr *t = sock_addr(theirs, tlen);
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (m == NULL || t == NULL)
		return -EAFNOSUPPORT;
	d = opendir("/proc/self/fd");
	if (d == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		struct stat st;

		if (*end != '\0' || end == de->d_name || fd == dirfd(d) ||
		    fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
		    !rail_conn((int)fd, m, t, any_port))
			continue;
		if (connect((int)fd, &unspec, sizeof(unspec)) != 0) {
			tern__debug("fence: disconnecting socket %ld: %s", fd,
				    strerror(errno));
			continue;
		}
		/* Disconnected, the socket polls as hung up alone, which
		 * libfabric 1.17 does not read. Shut down (refused as not
		 * connected, but marked all the same), it reads as ended:
		 * libfabric sees the connection end and lets it go. */
		(void)shutdown((int)fd, SHUT_RDWR);
		n++;
	}
	closedir(d);
	return n;
}
