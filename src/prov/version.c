/* SPDX-License-Identifier: MIT */
/*
 * Which libfabric API version tern asks for.
 *
 * The version an application passes to fi_getinfo() is not a formality:
 * providers change their defaults by it. The efa provider of libfabric 2.x
 * turns device RDMA off for applications below API 1.18 (every write is
 * then emulated in software) and refuses FI_HMEM with FI_ATOMIC there
 * (prov/efa/src/rdm/efa_rdm_util.c, efa_user_info.c). Asking for the
 * version of the headers tern was built with would tie a tern built on
 * Debian 12 (1.17) to that slow path forever. tern asks instead for the
 * highest version that both the running library has (fi_version()) and
 * tern has been validated against (TERN__FI_API_MAX): the structures are
 * versioned by symbol, so a tern built with older headers still reads
 * them as it knows them.
 */
#include <stdio.h>
#include <stdlib.h>

#include <rdma/fabric.h>

#include "../core/core.h"
#include "prov.h"

/* The newest libfabric API whose semantics tern is validated against (CI
 * runs the suite on 1.17, 2.1 and 2.6: docs/testing.md). Raise it only
 * with a run on the newer release: a provider may change its defaults at
 * any version. What 2.2 to 2.6 change by API version: from 2.5 hints'
 * domain_attr max_cntr_value / max_err_cntr_value are checked against the
 * provider's (util_attr.c; efa then offers its hardware counters), which
 * tern leaves 0 (fi_allocinfo()). */
#define TERN__FI_API_MAX FI_VERSION(2, 6)
/* The oldest tern can ask for: FI_CONTEXT2 and FI_MR_* mode bits. */
#define TERN__FI_API_MIN FI_VERSION(1, 5)

static uint32_t api_version;

/* "MAJOR.MINOR" into a version, or 0. */
static uint32_t parse(const char *s)
{
	unsigned int major, minor;
	char extra;

	if (sscanf(s, "%u.%u%c", &major, &minor, &extra) != 2 ||
	    major > 0xffff || minor > 0xffff)
		return 0;
	return FI_VERSION(major, minor);
}

uint32_t tern__prov_api(void)
{
	uint32_t run, want;
	const char *env;

	if (api_version != 0)
		return api_version;
	run = fi_version();
	want = run < TERN__FI_API_MAX ? run : TERN__FI_API_MAX;
	env = tern__env_str("TERN_FI_API");
	if (env != NULL) {
		uint32_t v = parse(env);

		if (v == 0 || v < TERN__FI_API_MIN || v > run)
			tern__warn(
				"ignoring TERN_FI_API=%s (expected MAJOR.MINOR "
				"from 1.5 to the running libfabric's %u.%u); "
				"asking for %u.%u",
				env, FI_MAJOR(run), FI_MINOR(run),
				FI_MAJOR(want), FI_MINOR(want));
		else
			want = v;
	}
	api_version = want;
	tern__info("libfabric %u.%u, built with %s; asking for API %u.%u",
		   FI_MAJOR(run), FI_MINOR(run), tern_fabric_build_version(),
		   FI_MAJOR(want), FI_MINOR(want));
	return api_version;
}

const char *tern_fabric_api_version(void)
{
	static char buf[32];
	uint32_t v = tern__prov_api();

	snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(v), FI_MINOR(v));
	return buf;
}

const char *tern_fabric_version(void)
{
	static char buf[32];
	uint32_t v = fi_version();

	snprintf(buf, sizeof(buf), "%u.%u", FI_MAJOR(v), FI_MINOR(v));
	return buf;
}

const char *tern_fabric_build_version(void)
{
	return TERN_STR(FI_MAJOR_VERSION) "." TERN_STR(FI_MINOR_VERSION);
}
