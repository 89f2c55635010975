/* SPDX-License-Identifier: MIT */
/* pipe_put(): one message down a pipe to another test process. */
#ifndef TERN_TEST_PIPE_H
#define TERN_TEST_PIPE_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Its 4-byte length and its bytes. Up to PIPE_BUF in all, in one
 * writev(), which a pipe takes whole: a reader that leaves on seeing the
 * length cannot make the write of the bytes fail (EPIPE) after it. A
 * longer one goes in pieces (its reader reads it all). Exits 1, saying
 * why, when a write fails. */
static inline void pipe_put(int fd, const void *p, size_t n)
{
	uint32_t len = (uint32_t)n;
	struct iovec iov[2] = { { &len, 4 }, { (void *)(uintptr_t)p, n } };
	ssize_t got;

	if (n + 4 <= PIPE_BUF) {
		got = writev(fd, iov, n != 0 ? 2 : 1);
		if (got == (ssize_t)(n + 4))
			return;
	} else {
		got = write(fd, &len, 4);
		for (size_t off = 0; got > 0 && off < n; off += (size_t)got)
			got = write(fd, (const char *)p + off, n - off);
		if (got > 0)
			return;
	}
	fprintf(stderr, "FAIL pipe write (fd %d, %zu bytes, pid %d): %s\n", fd,
		n, (int)getpid(), got < 0 ? strerror(errno) : "short");
	exit(1);
}

#endif /* TERN_TEST_PIPE_H */
