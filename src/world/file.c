/* SPDX-License-Identifier: MIT */
/*
 * The file world: a directory every rank shares (a local one, or NFS).
 * Rank r's value NAME is the file "r<r>.<NAME>", written
 * under a temporary name and renamed into place, so a reader sees all of
 * it or nothing. A fence is one empty file per rank and generation,
 * "fence.<gen>.r<r>". Readers poll. The files are untrusted: a value is
 * read only up to TERN_WORLD_VALUE_MAX (a card up to TERN_CARD_MAX).
 *
 * One directory per job: a rank whose card file is already there refuses
 * to start (another run's files would be taken for this one's).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/core.h"
#include "world.h"

struct file_world {
	char dir[PATH_MAX];
};

static struct file_world *fw(struct tern_world *w)
{
	return w->be;
}

/* dir/r<rank>.<name> into @path. */
static int value_path(struct tern_world *w, int rank, const char *name,
		      char *path, size_t len)
{
	int n = snprintf(path, len, "%s/r%d.%s", fw(w)->dir, rank, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Sleep a little (1 ms, growing to 20 ms), letting the ctx progress. */
static void nap(struct tern_world *w, unsigned int *us)
{
	struct timespec ts;

	tern__world_idle(w);
	ts.tv_sec = 0;
	ts.tv_nsec = (long)*us * 1000;
	nanosleep(&ts, NULL);
	if (*us < 20000)
		*us *= 2;
}

static int file_open(struct tern_world *w, const char *arg)
{
	struct file_world *f;
	char path[PATH_MAX + 64];
	struct stat st;

	if (arg == NULL || *arg == '\0' || strlen(arg) >= PATH_MAX - 64) {
		tern__warn("world file:%s: name a directory (file:/DIR)",
			   arg ? arg : "");
		return -EINVAL;
	}
	if (w->rank < 0 || w->size <= 0) {
		tern__warn("world file:%s: a file world needs each rank's rank "
			   "and the world's size: set $TERN_WORLD_RANK and "
			   "$TERN_WORLD_SIZE (or the attr's rank and size)",
			   arg);
		return -EINVAL;
	}
	if (mkdir(arg, 0700) != 0 && errno != EEXIST) {
		tern__warn("world file:%s: %s", arg, strerror(errno));
		return -errno;
	}
	if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)) {
		tern__warn("world file:%s: not a directory", arg);
		return -ENOTDIR;
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	snprintf(f->dir, sizeof(f->dir), "%s", arg);
	w->be = f;
	snprintf(path, sizeof(path), "%s/r%d.card", arg, w->rank);
	if (access(path, F_OK) == 0) {
		tern__warn("world file:%s: rank %d's card is there already: "
			   "another run used this directory (give each job a "
			   "fresh one), or two processes have rank %d",
			   arg, w->rank, w->rank);
		free(f);
		w->be = NULL;
		return -EEXIST;
	}
	return 0;
}

static int file_put(struct tern_world *w, const char *name, const void *val,
		    size_t len)
{
	char path[PATH_MAX + 96], tmp[PATH_MAX + 128];
	const uint8_t *p = val;
	int fd, ret;

	ret = value_path(w, w->rank, name, path, sizeof(path));
	if (ret != 0)
		return ret;
	snprintf(tmp, sizeof(tmp), "%s/.tmp.%d.%ld", fw(w)->dir, w->rank,
		 (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		tern__warn("world file: %s: %s", tmp, strerror(errno));
		return ret;
	}
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			tern__warn("world file: writing %s: %s", tmp,
				   tern_strerror(ret));
			close(fd);
			unlink(tmp);
			return ret;
		}
		p += n;
		len -= (size_t)n;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		ret = -errno;
		tern__warn("world file: publishing %s: %s", path,
			   strerror(errno));
		unlink(tmp);
		return ret;
	}
	return 0;
}

/* Read the whole file at @path (at most @max bytes) into @buf. */
static ssize_t read_value(const char *path, void *buf, size_t len, size_t max)
{
	uint8_t *p = buf;
	struct stat st;
	size_t got = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > max) {
		close(fd);
		tern__warn("world file: %s: not a value tern wrote (%lld "
			   "bytes, at most %zu)",
			   path, (long long)st.st_size, max);
		return -TERN_EPROTO;
	}
	if ((size_t)st.st_size > len) {
		close(fd);
		return -ENOSPC;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, p + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return got == (size_t)st.st_size ? (ssize_t)got : -TERN_EPROTO;
}

static ssize_t file_get(struct tern_world *w, int rank, const char *name,
			void *buf, size_t len, uint64_t deadline_ns)
{
	size_t max = strcmp(name, "card") == 0 ? TERN_CARD_MAX
					       : TERN_WORLD_VALUE_MAX;
	char path[PATH_MAX + 96];
	unsigned int us = 1000;
	ssize_t n;

	n = value_path(w, rank, name, path, sizeof(path));
	if (n != 0)
		return n;
	for (;;) {
		n = read_value(path, buf, len, max);
		if (n != -ENOENT)
			return n;
		if (tern__now_ns() >= deadline_ns) {
			tern__warn("world file: rank %d has not published '%s' "
				   "(%s)",
				   rank, name, path);
			return -ETIMEDOUT;
		}
		nap(w, &us);
	}
}

static int file_fence(struct tern_world *w, uint64_t gen, uint64_t deadline_ns)
{
	char path[PATH_MAX + 96];
	unsigned int us = 1000;
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/fence.%llu.r%d", fw(w)->dir,
		 (unsigned long long)gen, w->rank);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		tern__warn("world file: %s: %s", path, strerror(errno));
		return -errno;
	}
	close(fd);
	/* Wait for each rank in turn: one found stays found. */
	while (r < w->size) {
		snprintf(path, sizeof(path), "%s/fence.%llu.r%d", fw(w)->dir,
			 (unsigned long long)gen, r);
		if (r == w->rank || !tern_world_alive(w, r) ||
		    access(path, F_OK) == 0) {
			r++;
			continue;
		}
		if (tern__now_ns() >= deadline_ns) {
			tern__warn("world file: fence %llu: rank %d never came",
				   (unsigned long long)gen, r);
			return -ETIMEDOUT;
		}
		nap(w, &us);
	}
	return 0;
}

static void file_close(struct tern_world *w)
{
	free(w->be);
	w->be = NULL;
}

const struct tern__world_ops tern__world_file = {
	.kind = "file",
	.open = file_open,
	.put = file_put,
	.get = file_get,
	.fence = file_fence,
	.close = file_close,
};
