/* SPDX-License-Identifier: MIT */
/*
 * The same-host path under attack (docs/local.md, "Trust"), over a real
 * provider. Each case plays one hostile party and checks that tern
 * refuses it, says why in its log, leaves the victim's memory and fd
 * table as they were, and serves a good peer at once afterwards:
 *   spoof     a broker socket bound by another uid, or by another process
 *             of ours, for a process that never used tern: never asked,
 *             the path stays the fabric's;
 *   forged    a card carrying another process's same-host part: nothing
 *             lands on the same-host path until that process adds us;
 *             then wrong keys fail -TERN_EACCESS and right keys land;
 *   noregion  writes and reads to an address in no region of the peer
 *             (and an unmapped one) fail -TERN_EACCESS, nothing copied;
 *   unsealed  an inbox memfd that is not sealed is refused, and shrinking
 *             it afterwards cannot crash us;
 *   hol       a peer that never reads its ring holds up no other peer;
 *   scribble  a peer that scribbles its own ring is read no more (said
 *             once), counts nothing, and another peer is still served;
 *   silent    20 silent connections to a broker hold up no good peer's
 *             ask; another uid's are refused;
 *   resize    an owner that rewrites a region's length or base under the
 *             generation we mapped it at: copies past the mapping fail
 *             -TERN_EACCESS;
 *   serve     `tern fill --listen HOST:PORT --token` sent 200 CONNECTs
 *             without a ticket, each naming another local tern process's
 *             card: that process's memory and fds untouched, the server's
 *             fds and RSS flat, a good client served.
 * The cases live by topic: local_hostile_forge.c (spoof, forged,
 * unsealed), local_hostile_regions.c (noregion, resize),
 * local_hostile_rings.c (hol, scribble, stuck) and local_hostile_broker.c
 * (silent, serve); what they share is local_hostile_fixture.{h,c}.
 * usage: local_hostile --provider P [--node ADDR] CASE. Exit 0 pass,
 * 1 fail, 77 skip (the case needs root).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "local_hostile_fixture.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} cases[] = {
		{ "spoof", case_spoof },       { "forged", case_forged },
		{ "noregion", case_noregion }, { "unsealed", case_unsealed },
		{ "hol", case_hol },	       { "scribble", case_scribble },
		{ "silent", case_silent },     { "resize", case_resize },
		{ "stuck", case_stuck },       { "serve", case_serve },
	};
	const char *what = local_args(argc, argv, "local_hostile");

	signal(SIGPIPE, SIG_IGN);
	g_main = getpid();
	atexit(kill_kids);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(what, cases[i].name) == 0) {
			int ret = cases[i].fn();

			if (ret == 0)
				printf("PASS local_hostile %s over %s\n", what,
				       g_prov);
			return ret;
		}
	}
	FAIL("unknown case %s", what);
	return 1;
}
