/* SPDX-License-Identifier: MIT */
/*
 * Every operation between real processes over a real provider. The parent
 * only orchestrates (it never opens a fabric, so forking is safe); a target
 * process B owns the regions, one or more initiator processes A act on them.
 * Cards and descriptors travel through pipes. The tests live by topic:
 * ops_rma.c (read, sendimm), ops_atomic.c (fadd, cswap), ops_pieces.c
 * (pieces, pieces_arrays), ops_access.c (access, badaddr) and ops_small.c
 * (small); what they share is ops.h and ops_fixture.c.
 *
 * usage: ops --provider P [--node ADDR]
 *        read|fadd|cswap|sendimm|pieces|pieces_arrays|access|badaddr|small
 * Exit 0 pass, 1 fail, 77 skipped (the provider lacks the capability, as
 * fi_info shows it; the reason is printed).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tern/tern.h>

#include "ops.h"

/* --- main ---------------------------------------------------------------- */

static void two_party(struct chan *ch, void (*target)(struct chan *, void *),
		      void (*initiator)(struct chan *, void *))
{
	pid_t b = spawn(target, ch, NULL);
	pid_t a = spawn(initiator, ch, NULL);

	parent_ends(ch);
	CHECK(reap(a) == 0, "initiator failed");
	CHECK(reap(b) == 0, "target failed");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "node", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct chan ch;
	const char *test;
	int c;

	while ((c = getopt_long(argc, argv, "p:n:", lo, NULL)) != -1) {
		if (c == 'p')
			g_opts.provider = optarg;
		else if (c == 'n')
			g_opts.node = optarg;
		else
			return 2;
	}
	if (optind + 1 != argc || g_opts.provider == NULL) {
		fprintf(stderr, "usage: ops --provider P [--node A] "
				"read|fadd|cswap|sendimm|pieces|pieces_arrays|"
				"access|badaddr|small\n");
		return 2;
	}
	test = argv[optind];
	CHECK(pipe(ch.to_b) == 0 && pipe(ch.from_b) == 0, "pipe");
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(test, "read") == 0)
		two_party(&ch, read_target, read_initiator);
	else if (strcmp(test, "fadd") == 0)
		test_fadd(&ch);
	else if (strcmp(test, "cswap") == 0)
		test_cswap(&ch);
	else if (strcmp(test, "sendimm") == 0)
		two_party(&ch, sendimm_target, sendimm_initiator);
	else if (strcmp(test, "pieces") == 0)
		two_party(&ch, pieces_target, pieces_initiator);
	else if (strcmp(test, "pieces_arrays") == 0)
		two_party(&ch, pieces_target, pieces_initiator_arrays);
	else if (strcmp(test, "access") == 0)
		test_access(&ch);
	else if (strcmp(test, "badaddr") == 0)
		two_party(&ch, badaddr_target, badaddr_initiator);
	else if (strcmp(test, "small") == 0)
		two_party(&ch, small_target, small_initiator);
	else
		CHECK(0, "unknown test %s", test);
	printf("PASS: %s over %s\n", test, g_opts.provider);
	return 0;
}
