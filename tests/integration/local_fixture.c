/* SPDX-License-Identifier: MIT */
/* The same-host tests' shared helpers (local_fixture.h). */
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "local_fixture.h"
#include "pipe.h"

const char *g_prov = "shm";
const char *g_node;

const char *local_args(int argc, char **argv, const char *prog)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'p')
			g_prov = optarg;
		else if (c == 'n')
			g_node = optarg;
		else
			exit(2);
	}
	CHECK(optind < argc, "usage: %s --provider P [--node A] CASE", prog);
	return argv[optind];
}

struct tern_ctx *open_ctx(void)
{
	struct tern_ctx_attr a = { .provider = g_prov,
				   .node = g_node,
				   .rails = 1 };
	struct tern_ctx *ctx;
	int ret = tern_ctx_open(&a, &ctx);

	CHECK(ret == 0, "ctx open over %s: %s", g_prov, tern_strerror(ret));
	return ctx;
}

size_t card_of(struct tern_ctx *ctx, uint8_t *card)
{
	ssize_t n = tern_ctx_card(ctx, card, TERN_CARD_MAX);

	CHECK(n > 0, "card");
	return (size_t)n;
}

struct tern_peer *add(struct tern_ctx *ctx, struct tern_ctx *to)
{
	uint8_t card[TERN_CARD_MAX];
	struct tern_peer *p;
	size_t n = card_of(to, card);
	int ret = tern_peer_add(ctx, card, n, &p);

	CHECK(ret == 0, "peer add: %s", tern_strerror(ret));
	return p;
}

void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

void put(int fd, const void *p, size_t n)
{
	pipe_put(fd, p, n);
}

size_t get(int fd, void *p, size_t cap)
{
	uint32_t len;

	CHECK(read(fd, &len, 4) == 4 && len <= cap, "pipe read");
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)p + got, len - got);

		CHECK(n > 0, "pipe read");
		got += (size_t)n;
	}
	return len;
}

socklen_t broker_addr(struct sockaddr_un *a, uint64_t nonce)
{
	*a = (struct sockaddr_un){ .sun_family = AF_UNIX };
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)snprintf(a->sun_path + 1,
					    sizeof(a->sun_path) - 1,
					    "tern-local-%016llx",
					    (unsigned long long)nonce));
}

int broker_connect(uint64_t owner)
{
	struct sockaddr_un a;
	socklen_t alen = broker_addr(&a, owner);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	CHECK(s >= 0, "socket");
	if (connect(s, (struct sockaddr *)&a, alen) != 0) {
		close(s);
		return -1;
	}
	return s;
}
