/* SPDX-License-Identifier: MIT */
/*
 * raw's options (one program of two sources): raw_opts.c reads the
 * command line into them; raw.c does the work they ask for.
 */
#ifndef RAW_H
#define RAW_H

#include <stddef.h>

#define RAW_MAX_SIZES 32
#define RAW_MAX_SIZE  (1ull << 30)

enum raw_op {
	RAW_OP_WRITE,
	RAW_OP_PINGPONG,
};

struct raw_opts {
	const char *prov; /* libfabric's name: "shm" or "tcp;ofi_rxm" */
	const char *node; /* NULL for shm */
	enum raw_op op;
	size_t sizes[RAW_MAX_SIZES];
	unsigned int nsizes;
	size_t window;
	size_t batch;
	long iters;  /* < 0: by size and op */
	long warmup; /* < 0: 10% of iters, at least 10 */
	int tagged;  /* pingpong with tagged messages, as tern sends them */
	long target_pause; /* write target: pauses after each empty read */
	int no_handshake;  /* write: no message each way before the writes */
};

/* Read the command line into @o: 0, or -1 with the usage printed. --help
 * prints it and exits. */
int raw_parse_opts(int argc, char **argv, struct raw_opts *o);

#endif /* RAW_H */
