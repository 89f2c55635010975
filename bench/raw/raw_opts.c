/* SPDX-License-Identifier: MIT */
/* raw's command line (raw.h): the options, the sizes, the usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raw.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: raw --provider shm|tcp|efa|verbs [--node ADDR] "
		   "--op write|pingpong\n"
		   "           [--sizes 8,4K,64K,1M,16M] [--window 64] "
		   "[--iters N] [--warmup N]\n"
		   "           [--batch 16] [--tagged] [--target-pause N] "
		   "[--no-handshake]\n"
		   "  --target-pause N  the write target spins N pause "
		   "instructions after each\n"
		   "                    empty completion read (default 0: "
		   "a tight loop)\n"
		   "  --no-handshake    write: no message each way over the "
		   "fabric before the\n"
		   "                    writes (tern bench's control exchange "
		   "sends them)\n");
}

static int parse_size(const char *s, size_t *size_p)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0' || v == 0 || v > RAW_MAX_SIZE)
		return -1;
	*size_p = (size_t)v;
	return 0;
}

static int parse_sizes(const char *arg, struct raw_opts *o)
{
	char buf[512], *tok, *save = NULL;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	o->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == RAW_MAX_SIZES ||
		    parse_size(tok, &o->sizes[o->nsizes]) != 0)
			return -1;
		o->nsizes++;
	}
	return o->nsizes > 0 ? 0 : -1;
}

static int parse_long(const char *s, long min, long *v_p)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min)
		return -1;
	*v_p = v;
	return 0;
}

int raw_parse_opts(int argc, char **argv, struct raw_opts *o)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ "op", required_argument, NULL, 'o' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "iters", required_argument, NULL, 'i' },
		{ "warmup", required_argument, NULL, 'u' },
		{ "batch", required_argument, NULL, 'b' },
		{ "tagged", no_argument, NULL, 't' },
		{ "target-pause", required_argument, NULL, 'T' },
		{ "no-handshake", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = NULL, *op = NULL;
	long v;
	int c;

	*o = (struct raw_opts){
		.window = 64, .batch = 16, .iters = -1, .warmup = -1
	};
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			/* The names tern takes, mapped as tern maps them
			 * (efa and verbs: no device here, untested). */
			if (strcmp(optarg, "shm") == 0 ||
			    strcmp(optarg, "efa") == 0)
				o->prov = optarg;
			else if (strcmp(optarg, "tcp") == 0)
				o->prov = "tcp;ofi_rxm";
			else if (strcmp(optarg, "verbs") == 0)
				o->prov = "verbs;ofi_rxm";
			else
				goto bad;
			break;
		case 'n':
			o->node = optarg;
			break;
		case 'o':
			op = optarg;
			break;
		case 's':
			sizes = optarg;
			break;
		case 'w':
			if (parse_long(optarg, 1, &v) != 0 || v > 65536)
				goto bad;
			o->window = (size_t)v;
			break;
		case 't':
			o->tagged = 1;
			break;
		case 'N':
			o->no_handshake = 1;
			break;
		case 'T':
			if (parse_long(optarg, 0, &o->target_pause) != 0 ||
			    o->target_pause > 1000000)
				goto bad;
			break;
		case 'b':
			if (parse_long(optarg, 1, &v) != 0 || v > 65536)
				goto bad;
			o->batch = (size_t)v;
			break;
		case 'i':
			if (parse_long(optarg, 1, &o->iters) != 0)
				goto bad;
			break;
		case 'u':
			if (parse_long(optarg, 0, &o->warmup) != 0)
				goto bad;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			goto bad;
		}
	}
	if (optind != argc || o->prov == NULL || op == NULL)
		goto bad;
	if (strcmp(op, "write") == 0)
		o->op = RAW_OP_WRITE;
	else if (strcmp(op, "pingpong") == 0)
		o->op = RAW_OP_PINGPONG;
	else
		goto bad;
	if (sizes == NULL)
		sizes = o->op == RAW_OP_WRITE ? "8,4K,64K,1M,16M" : "8,64,4K";
	if (parse_sizes(sizes, o) != 0)
		goto bad;
	/* shm addresses by process, not by network node. */
	if (strcmp(o->prov, "shm") == 0)
		o->node = NULL;
	return 0;
bad:
	usage(stderr);
	return -1;
}
