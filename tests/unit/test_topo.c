/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the machine map (src/topo/). Each hwloc XML fixture in
 * tests/data/ comes with <name>.expect, written by tests/data/gen_topo.py
 * from the same machine description as the XML: every NUMA node (cores,
 * NICs for host memory), every NIC (bus id, NUMA node, kind, switch, link
 * and PCIe speeds) and every GPU (NICs, how they were found, sharing,
 * cores). The tests read both and compare everything, then check the
 * properties that hold on any machine. Also: files that are not hwloc XML,
 * hostile strings and speeds, the NIC-kind choice, the libfabric lookup,
 * the PU list format, and binding the thread (the one check that uses
 * this host, as binding needs a real system).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "topo/topo.h"

#ifndef TERN_TEST_DATA_DIR
#error "TERN_TEST_DATA_DIR must name tests/data"
#endif

#define MAX_TOK	 64
#define MAX_LIST 512

/* One line of a .expect file: the record type, then key/value pairs. */
struct rec {
	char *tok[MAX_TOK];
	int n;
};

static const char *val(const struct rec *r, const char *key)
{
	/* "counts" has no name; the others do ("nic rdmap79s0 busid ..."). */
	int first = strcmp(r->tok[0], "counts") == 0 ? 1 : 2;

	for (int i = first; i + 1 < r->n; i += 2) {
		if (strcmp(r->tok[i], key) == 0)
			return r->tok[i + 1];
	}
	fail_msg("expect line '%s %s': no key '%s'", r->tok[0], r->tok[1], key);
	return NULL;
}

static long num(const struct rec *r, const char *key)
{
	return strtol(val(r, key), NULL, 10);
}

/* "0-47,96" or "0,2,4" or "-" into a list of numbers. */
static size_t parse_ranges(const char *s, unsigned *out)
{
	size_t n = 0;

	if (strcmp(s, "-") == 0)
		return 0;
	while (*s != '\0') {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;

		if (*end == '-')
			b = strtoul(end + 1, &end, 10);
		for (unsigned long v = a; v <= b; v++) {
			assert_true(n < MAX_LIST);
			out[n++] = (unsigned)v;
		}
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* "a,b,c" or "-" into names (pointers into a copy). */
static size_t parse_names(const char *s, char *copy, size_t len,
			  const char **out)
{
	size_t n = 0;
	char *save = NULL;

	if (strcmp(s, "-") == 0)
		return 0;
	snprintf(copy, len, "%s", s);
	for (char *t = strtok_r(copy, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return n;
}

#define TERN_MAX_NICS 32

struct fixture {
	char *text; /* the .expect file, cut into tokens in place */
	struct rec *recs;
	size_t nrecs;
	struct tern_topo *topo;
};

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 0);
	rewind(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void load_fixture(const char *name, int kind, struct fixture *fx)
{
	char path[512];
	struct tern_topo_attr attr = { .nic_kind = kind };
	char *save = NULL;

	memset(fx, 0, sizeof(*fx));
	snprintf(path, sizeof(path), "%s/%s.expect", TERN_TEST_DATA_DIR, name);
	fx->text = read_file(path);
	fx->recs = calloc(1024, sizeof(*fx->recs));
	assert_non_null(fx->recs);
	for (char *line = strtok_r(fx->text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		struct rec *r = &fx->recs[fx->nrecs];
		char *s2 = NULL;

		if (line[0] == '#')
			continue;
		assert_true(fx->nrecs < 1024);
		for (char *t = strtok_r(line, " ", &s2);
		     t != NULL && r->n < MAX_TOK; t = strtok_r(NULL, " ", &s2))
			r->tok[r->n++] = t;
		fx->nrecs++;
	}
	snprintf(path, sizeof(path), "%s/%s.xml", TERN_TEST_DATA_DIR, name);
	attr.xml_path = path;
	assert_int_equal(tern__topo_open(&attr, &fx->topo), 0);
}

static void free_fixture(struct fixture *fx)
{
	assert_int_equal(tern__topo_close(fx->topo), 0);
	free(fx->recs);
	free(fx->text);
}

static const struct rec *find_rec(const struct fixture *fx, const char *type)
{
	for (size_t i = 0; i < fx->nrecs; i++) {
		if (strcmp(fx->recs[i].tok[0], type) == 0)
			return &fx->recs[i];
	}
	fail_msg("no '%s' line", type);
	return NULL;
}

/* The NIC indexes of a list must name exactly the expected NICs, in PCI
 * (index) order. */
static void check_nic_set(const struct tern_topo *t, const size_t *nics,
			  size_t n, const char *expected, const char *what)
{
	const char *names[MAX_LIST];
	char copy[8192];
	size_t en = parse_names(expected, copy, sizeof(copy), names);

	if (n != en)
		fail_msg("%s: %zu NICs, expected %zu (%s)", what, n, en,
			 expected);
	for (size_t i = 0; i < n; i++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t, nics[i]);

		assert_non_null(c);
		if (strcmp(c->name, names[i]) != 0)
			fail_msg("%s: NIC %zu is %s, expected %s", what, i,
				 c->name, names[i]);
		if (i > 0)
			assert_true(nics[i] > nics[i - 1]);
	}
}

static void check_cores(const unsigned *got, size_t n, const char *expected,
			const char *what)
{
	unsigned want[MAX_LIST];
	size_t wn = parse_ranges(expected, want);

	if (n != wn)
		fail_msg("%s: %zu cores, expected %zu (%s)", what, n, wn,
			 expected);
	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i])
			fail_msg("%s: core %zu is PU %u, expected %u", what, i,
				 got[i], want[i]);
	}
}

/* Sum of the expected speeds of a NIC list, in bit/s; 0 if one is
 * unknown. */
static uint64_t expected_bps(const struct fixture *fx, const char *list)
{
	const char *names[MAX_LIST];
	char copy[8192];
	size_t n = parse_names(list, copy, sizeof(copy), names);
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < fx->nrecs; j++) {
			const struct rec *r = &fx->recs[j];

			if (strcmp(r->tok[0], "nic") != 0 ||
			    strcmp(r->tok[1], names[i]) != 0)
				continue;
			if (strcmp(val(r, "gbps"), "-") == 0)
				return 0;
			sum += (uint64_t)num(r, "gbps") * 1000000000ULL;
		}
	}
	return sum;
}

static void check_numa(const struct fixture *fx, const struct rec *r)
{
	const struct tern_topo *t = fx->topo;
	const struct tern_topo_numa *m;
	char what[64];

	snprintf(what, sizeof(what), "numa %s", r->tok[1]);
	m = tern__topo_numa_find(t, atoi(r->tok[1]));
	assert_non_null(m);
	check_cores(m->cores, m->ncores, val(r, "cores"), what);
	assert_int_equal(m->npus, num(r, "pus"));
	assert_string_equal(tern__topo_path_str(m->path), val(r, "path"));
	check_nic_set(t, m->nics, m->nnics, val(r, "nics"), what);
	assert_int_equal(tern__topo_nics_bps(t, m->nics, m->nnics),
			 expected_bps(fx, val(r, "nics")));
}

static void check_nic(const struct fixture *fx, const struct rec *r)
{
	const struct tern_topo *t = fx->topo;
	const char *name = r->tok[1], *gbps = val(r, "gbps");
	const struct tern_topo_nic *c;
	char key[128];
	int i = tern__topo_nic_find(t, name);

	if (i < 0)
		fail_msg("NIC %s not found", name);
	c = tern__topo_nic_get(t, (size_t)i);
	assert_string_equal(c->name, name);
	assert_string_equal(c->busid, val(r, "busid"));
	assert_int_equal(c->numa, num(r, "numa"));
	assert_string_equal(tern__topo_kind_str((int)c->kind), val(r, "kind"));
	assert_string_equal(c->sw, val(r, "switch"));
	assert_int_equal(c->mapped, num(r, "mapped"));
	assert_true(c->usable);
	if (strcmp(gbps, "-") == 0) {
		assert_int_equal(c->link_bps, 0);
		assert_int_equal(c->link_src, TERN_TOPO_SPEED_NONE);
	} else {
		assert_int_equal(c->link_bps,
				 (uint64_t)atol(gbps) * 1000000000ULL);
		assert_int_equal(c->link_src, TERN_TOPO_SPEED_XML);
	}
	assert_true(fabs(c->pcie_gbps - strtod(val(r, "pcie"), NULL)) < 0.06);
	assert_string_equal(c->domain, "");

	/* The same NIC by libfabric domain name and by PCI bus id. */
	snprintf(key, sizeof(key), "%s-rdm", name);
	assert_int_equal(tern__topo_nic_find(t, key), i);
	snprintf(key, sizeof(key), "%s-dgrm", name);
	assert_int_equal(tern__topo_nic_find(t, key), i);
	assert_int_equal(tern__topo_nic_find(t, c->busid), i);
	assert_int_equal(tern__topo_nic_find(t, c->busid + 5), i);
	snprintf(key, sizeof(key), "%sx", name);
	assert_int_equal(tern__topo_nic_find(t, key), -ENOENT);
}

static void check_gpu(const struct fixture *fx, const struct rec *r)
{
	const struct tern_topo *t = fx->topo;
	const struct tern_topo_gpu *g;
	const struct tern_topo_numa *m;
	char what[64];

	snprintf(what, sizeof(what), "GPU %s", r->tok[1]);
	g = tern__topo_gpu_get(t, (size_t)atoi(r->tok[1]));
	assert_non_null(g);
	assert_string_equal(g->busid, val(r, "busid"));
	assert_int_equal(g->numa, num(r, "numa"));
	assert_string_equal(tern__topo_path_str(g->path), val(r, "path"));
	assert_string_equal(g->via[0] ? g->via : "-", val(r, "via"));
	assert_int_equal(g->share, num(r, "share"));
	check_nic_set(t, g->nics, g->nnics, val(r, "nics"), what);
	check_cores(g->cores, g->ncores, val(r, "cores"), what);
	assert_int_equal(tern__topo_nics_bps(t, g->nics, g->nnics),
			 expected_bps(fx, val(r, "nics")));
	assert_int_equal(g->vendor_id, 0x10de);
	assert_true(g->model[0] != '\0');

	/* Properties of any map: the NICs are usable and of the mapped
	 * kind; the cores are the GPU's NUMA node's. */
	for (size_t i = 0; i < g->nnics; i++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t,
								   g->nics[i]);

		assert_true(c->usable && c->mapped);
		assert_int_equal((int)c->kind, tern__topo_mapped_kind(t));
	}
	m = tern__topo_numa_find(t, g->numa);
	assert_non_null(m);
	assert_int_equal(g->ncores, m->ncores);
	assert_memory_equal(g->cores, m->cores, g->ncores * sizeof(unsigned));
}

static void check_machine(const char *name)
{
	struct fixture fx;
	const struct rec *c;
	size_t gpus = 0, nics = 0, numas = 0;

	load_fixture(name, 0, &fx);
	c = find_rec(&fx, "counts");
	assert_int_equal(tern__topo_numa_count(fx.topo), num(c, "numa"));
	assert_int_equal(tern__topo_gpu_count(fx.topo), num(c, "gpus"));
	assert_int_equal(tern__topo_nic_count(fx.topo), num(c, "nics"));
	assert_string_equal(
		tern__topo_kind_str(tern__topo_mapped_kind(fx.topo)),
		val(c, "kind"));
	{
		size_t mapped = 0;

		for (size_t i = 0; i < tern__topo_nic_count(fx.topo); i++)
			mapped += tern__topo_nic_get(fx.topo, i)->mapped;
		assert_int_equal(mapped, num(c, "mapped"));
	}
	/* The machine line is the rest of the line after "machine". */
	assert_true(strncmp(tern__topo_machine(fx.topo),
			    find_rec(&fx, "machine")->tok[1],
			    strlen(find_rec(&fx, "machine")->tok[1])) == 0);

	for (size_t i = 0; i < fx.nrecs; i++) {
		const struct rec *r = &fx.recs[i];

		if (strcmp(r->tok[0], "numa") == 0) {
			check_numa(&fx, r);
			numas++;
		} else if (strcmp(r->tok[0], "nic") == 0) {
			check_nic(&fx, r);
			nics++;
		} else if (strcmp(r->tok[0], "gpu") == 0) {
			check_gpu(&fx, r);
			gpus++;
		}
	}
	/* Every GPU, NIC and node was checked. */
	assert_int_equal(gpus, tern__topo_gpu_count(fx.topo));
	assert_int_equal(nics, tern__topo_nic_count(fx.topo));
	assert_int_equal(numas, tern__topo_numa_count(fx.topo));
	free_fixture(&fx);
}

static void test_p4d(void **state)
{
	(void)state;
	check_machine("p4d.24xlarge");
}

static void test_p5(void **state)
{
	(void)state;
	check_machine("p5.48xlarge");
}

static void test_p5en(void **state)
{
	(void)state;
	check_machine("p5en.48xlarge");
}

static void test_p6_b200(void **state)
{
	(void)state;
	check_machine("p6-b200.48xlarge");
}

static void test_server(void **state)
{
	(void)state;
	check_machine("server-2s");
}

static void test_fallback(void **state)
{
	(void)state;
	check_machine("fallback");
}

/* The properties of each instance shape, computed from the fixtures:
 * on the EC2 shapes the NICs per GPU are NICs / GPUs (p4d: 1 shared by
 * 2), the GPU sets do not overlap unless shared, and every NIC serves a
 * GPU, so the per-GPU bandwidths add up to the machine's. */
static void test_instance_shapes(void **state)
{
	static const char *const names[] = { "p4d.24xlarge", "p5.48xlarge",
					     "p5en.48xlarge",
					     "p6-b200.48xlarge" };

	(void)state;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		struct fixture fx;
		const struct tern_topo *t;
		size_t ng, nm = 0, *all;
		unsigned *users;
		uint64_t total, sum = 0;

		load_fixture(names[k], 0, &fx);
		t = fx.topo;
		ng = tern__topo_gpu_count(t);
		assert_int_equal(ng, 8);
		all = calloc(tern__topo_nic_count(t), sizeof(*all));
		users = calloc(tern__topo_nic_count(t), sizeof(*users));
		assert_non_null(all);
		assert_non_null(users);
		for (size_t i = 0; i < tern__topo_nic_count(t); i++) {
			if (tern__topo_nic_get(t, i)->mapped)
				all[nm++] = i;
		}
		total = tern__topo_nics_bps(t, all, nm);
		assert_true(total > 0);
		for (size_t i = 0; i < ng; i++) {
			const struct tern_topo_gpu *g = tern__topo_gpu_get(t,
									   i);
			uint64_t b = tern__topo_nics_bps(t, g->nics, g->nnics);

			assert_true(g->path == TERN_TOPO_PATH_SWITCH ||
				    g->path == TERN_TOPO_PATH_HOSTBRIDGE);
			if (nm >= ng) {
				assert_int_equal(g->nnics, nm / ng);
				assert_int_equal(g->share, 1);
			} else {
				assert_int_equal(g->nnics, 1);
				assert_int_equal(g->share, ng / nm);
			}
			for (size_t j = 0; j < g->nnics; j++)
				users[g->nics[j]]++;
			sum += b / g->share;
		}
		for (size_t i = 0; i < nm; i++)
			assert_int_equal(users[all[i]], ng > nm ? ng / nm : 1);
		assert_int_equal(sum, total);
		free(users);
		free(all);
		free_fixture(&fx);
	}
}

/* p6-b200's third switch also holds two ConnectX-7: the automatic choice
 * keeps them out of the GPU sets; asking for them, or for every kind,
 * maps them. */
static void test_nic_kinds(void **state)
{
	struct fixture fx;
	const struct tern_topo *t;
	int mlx_in_gpu_sets = 0;

	(void)state;
	load_fixture("p6-b200.48xlarge", TERN_TOPO_NIC_ALL, &fx);
	t = fx.topo;
	assert_int_equal(tern__topo_mapped_kind(t), TERN_TOPO_NIC_ALL);
	/* Every NIC below a GPU's switch is in that switch's GPU sets. */
	for (size_t i = 0; i < tern__topo_nic_count(t); i++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t, i);
		int found = 0;

		assert_true(c->mapped);
		for (size_t j = 0; j < tern__topo_gpu_count(t); j++) {
			const struct tern_topo_gpu *g = tern__topo_gpu_get(t,
									   j);

			for (size_t k = 0; k < g->nnics; k++) {
				found |= g->nics[k] == i;
				mlx_in_gpu_sets |= g->nics[k] == i &&
						   c->kind == TERN_TOPO_NIC_MLX;
			}
		}
		assert_true(found);
	}
	assert_true(mlx_in_gpu_sets);
	free_fixture(&fx);

	load_fixture("p6-b200.48xlarge", TERN_TOPO_NIC_MLX, &fx);
	t = fx.topo;
	assert_int_equal(tern__topo_mapped_kind(t), TERN_TOPO_NIC_MLX);
	for (size_t j = 0; j < tern__topo_gpu_count(t); j++) {
		const struct tern_topo_gpu *g = tern__topo_gpu_get(t, j);

		assert_true(g->nnics > 0);
		for (size_t k = 0; k < g->nnics; k++)
			assert_int_equal(
				tern__topo_nic_get(t, g->nics[k])->kind,
				TERN_TOPO_NIC_MLX);
	}
	free_fixture(&fx);

	/* A kind that is not there: no NIC is mapped, no GPU gets any. */
	load_fixture("server-2s", TERN_TOPO_NIC_EFA, &fx);
	for (size_t i = 0; i < tern__topo_numa_count(fx.topo); i++) {
		const struct tern_topo_numa *m = tern__topo_numa_get(fx.topo,
								     i);

		assert_int_equal(m->nnics, 0);
		assert_int_equal(m->path, TERN_TOPO_PATH_NONE);
	}
	free_fixture(&fx);
}

struct lookup_state {
	int calls;
};

static int lookup(void *arg, const char *name, struct tern_topo_fabric *out)
{
	struct lookup_state *s = arg;

	s->calls++;
	if (strcmp(name, "mlx5_0") == 0) {
		snprintf(out->domain, sizeof(out->domain), "mlx5_0");
		out->link_bps = 400000000000ULL;
		return 0;
	}
	if (strcmp(name, "mlx5_1") == 0) {
		/* Known to libfabric, but no speed: the XML's stands, and a
		 * domain that fills the whole field is cut, not overrun. */
		memset(out->domain, 'x', sizeof(out->domain));
		return 0;
	}
	return -ENOENT;
}

static void test_fabric_lookup(void **state)
{
	char path[512];
	struct lookup_state s = { 0 };
	struct tern_topo_attr attr = { .xml_path = path,
				       .fabric_lookup = lookup,
				       .fabric_arg = &s };
	const struct tern_topo_nic *c;
	struct tern_topo *t;

	(void)state;
	snprintf(path, sizeof(path), "%s/server-2s.xml", TERN_TEST_DATA_DIR);
	assert_int_equal(tern__topo_open(&attr, &t), 0);
	assert_int_equal(s.calls, 3);
	c = tern__topo_nic_get(t, (size_t)tern__topo_nic_find(t, "mlx5_0"));
	assert_string_equal(c->domain, "mlx5_0");
	assert_int_equal(c->link_bps, 400000000000ULL);
	assert_int_equal(c->link_src, TERN_TOPO_SPEED_FABRIC);
	c = tern__topo_nic_get(t, (size_t)tern__topo_nic_find(t, "mlx5_1"));
	assert_int_equal(strlen(c->domain), sizeof(c->domain) - 1);
	assert_int_equal(c->link_src, TERN_TOPO_SPEED_XML);
	c = tern__topo_nic_get(t, (size_t)tern__topo_nic_find(t, "mlx5_2"));
	assert_string_equal(c->domain, "");
	assert_int_equal(c->link_src, TERN_TOPO_SPEED_XML);
	tern__topo_close(t);
}

/* Write @text to a new temporary file; its name into @path. */
static void temp_file(char *path, size_t len, const void *text, size_t n)
{
	int fd;

	snprintf(path, len, "/tmp/tern-topo-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
}

static int open_xml(const char *path, struct tern_topo **t)
{
	struct tern_topo_attr attr = { .xml_path = path };

	return tern__topo_open(&attr, t);
}

/* The p4d fixture with every occurrence of @from replaced by @to. */
static char *p4d_with(const char *from, const char *to, size_t *len_p)
{
	char path[512];
	char *src, *out, *o;
	const char *p;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/p4d.24xlarge.xml", TERN_TEST_DATA_DIR);
	src = read_file(path);
	for (p = src; (p = strstr(p, from)) != NULL; p += strlen(from))
		n++;
	assert_true(n > 0);
	out = malloc(strlen(src) + n * (strlen(to) + 1) + 1);
	assert_non_null(out);
	o = out;
	for (p = src;;) {
		const char *q = strstr(p, from);

		if (q == NULL) {
			strcpy(o, p);
			break;
		}
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		strcpy(o, to);
		o += strlen(to);
		p = q + strlen(from);
	}
	free(src);
	*len_p = strlen(out);
	return out;
}

static void test_bad_files(void **state)
{
	static const char *const texts[] = {
		"garbage",
		"<foo/>",
		"<?xml version=\"1.0\"?><topology version=\"2.0\"></topology>",
		"<?xml version=\"1.0\"?><topology version=\"2.0\"><object "
		"type=\"Machine\" os_index=\"0\"/></topology>",
		"\x00\x01\x02\xff",
	};
	struct tern_topo *t = (struct tern_topo *)(uintptr_t)1;
	struct tern_topo_attr attr = { 0 };
	char path[64], dir[] = "/tmp/tern-topo-dir-XXXXXX";
	char *whole;
	size_t len;
	int fd;

	(void)state;
	assert_int_equal(open_xml("/nonexistent/tern/topo.xml", &t), -ENOENT);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(open_xml(dir, &t), -EISDIR);
	/* A FIFO is refused without waiting for a writer. */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(open_xml(path, &t), -EINVAL);
	unlink(path);
	rmdir(dir);
	assert_int_equal(t, (struct tern_topo *)(uintptr_t)1);

	temp_file(path, sizeof(path), "", 0);
	assert_int_equal(open_xml(path, &t), -EINVAL);
	unlink(path);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		temp_file(path, sizeof(path), texts[i],
			  i == 4 ? 4 : strlen(texts[i]));
		assert_int_equal(open_xml(path, &t), -EINVAL);
		unlink(path);
	}
	/* A real fixture cut short. */
	whole = p4d_with("<topology", "<topology", &len);
	for (size_t cut = 100; cut < len; cut += len / 7) {
		temp_file(path, sizeof(path), whole, cut);
		assert_int_equal(open_xml(path, &t), -EINVAL);
		unlink(path);
	}
	free(whole);
	/* Too big: refused before hwloc reads it. */
	snprintf(path, sizeof(path), "/tmp/tern-topo-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)TERN_TOPO_XML_MAX + 1), 0);
	close(fd);
	assert_int_equal(open_xml(path, &t), -EFBIG);
	unlink(path);
	assert_int_equal(t, (struct tern_topo *)(uintptr_t)1);

	/* Bad attributes. */
	assert_int_equal(tern__topo_open(NULL, NULL), -EINVAL);
	attr.nic_kind = 5;
	assert_int_equal(tern__topo_open(&attr, &t), -EINVAL);
	attr.nic_kind = -1;
	assert_int_equal(tern__topo_open(&attr, &t), -EINVAL);
	assert_int_equal(tern__topo_close(NULL), 0);
}

/* Text and speeds from the file are untrusted: control characters never
 * reach the caller, and speeds that are not numbers in range are
 * ignored. */
static void test_hostile_values(void **state)
{
	static const char *const speeds[] = {
		"nan", "inf", "-100", "0", "1e300", "100Gbit", "", "0x64"
	};
	char path[64], repl[128];
	struct tern_topo *t;
	char *xml;
	size_t len;

	(void)state;
	/* A tab, a quote, a backslash and UTF-8 in a device name. */
	xml = p4d_with("name=\"rdmap16s27\"",
		       "name=\"rdmap16s27&#9;&quot;\\\xc3\xa9x\"", &len);
	temp_file(path, sizeof(path), xml, len);
	free(xml);
	assert_int_equal(open_xml(path, &t), 0);
	unlink(path);
	assert_string_equal(tern__topo_nic_get(t, 0)->name,
			    "rdmap16s27?\"\\??x");
	assert_int_equal(tern__topo_nic_find(t, "rdmap16s27?\"\\??x"), 0);
	tern__topo_close(t);

	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++) {
		snprintf(repl, sizeof(repl),
			 "\"TernLinkSpeedGbps\" value=\"%s\"", speeds[i]);
		xml = p4d_with("\"TernLinkSpeedGbps\" value=\"100\"", repl,
			       &len);
		temp_file(path, sizeof(path), xml, len);
		free(xml);
		assert_int_equal(open_xml(path, &t), 0);
		unlink(path);
		for (size_t j = 0; j < tern__topo_nic_count(t); j++) {
			assert_int_equal(tern__topo_nic_get(t, j)->link_bps, 0);
			assert_int_equal(tern__topo_nic_get(t, j)->link_src,
					 TERN_TOPO_SPEED_NONE);
		}
		for (size_t j = 0; j < tern__topo_gpu_count(t); j++) {
			const struct tern_topo_gpu *g = tern__topo_gpu_get(t,
									   j);

			assert_int_equal(
				tern__topo_nics_bps(t, g->nics, g->nnics), 0);
		}
		tern__topo_close(t);
	}
}

/* gpu=N rails: the names a ctx opens are the GPU's NICs, in map order. */
static void test_gpu_nics(void **state)
{
	static const char *const names[] = { "p4d.24xlarge", "p5.48xlarge",
					     "p5en.48xlarge",
					     "p6-b200.48xlarge" };
	char got[TERN_MAX_NICS][TERN_TOPO_NAME_LEN], why[192], path[512];
	int n;

	(void)state;
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		struct fixture fx;

		load_fixture(names[k], 0, &fx);
		snprintf(path, sizeof(path), "%s/%s.xml", TERN_TEST_DATA_DIR,
			 names[k]);
		assert_true(tern__topo_gpu_count(fx.topo) > 0);
		for (size_t g = 0; g < tern__topo_gpu_count(fx.topo); g++) {
			const struct tern_topo_gpu *gpu = tern__topo_gpu_get(
				fx.topo, g);

			n = tern__topo_gpu_nics(path, (unsigned)g, got,
						TERN_MAX_NICS, why,
						sizeof(why));
			assert_int_equal(n, (int)gpu->nnics);
			for (int i = 0; i < n; i++)
				assert_string_equal(
					got[i], tern__topo_nic_get(fx.topo,
								   gpu->nics[i])
							->name);
		}
		n = tern__topo_gpu_nics(path,
					(unsigned)tern__topo_gpu_count(fx.topo),
					got, TERN_MAX_NICS, why, sizeof(why));
		assert_int_equal(n, -ENOENT);
		assert_non_null(strstr(why, "GPU(s)"));
		free_fixture(&fx);
	}
	/* The published p5.48xlarge shape: GPU 0 has 4 EFA under its
	 * switch; a caller asking for fewer gets the first ones. */
	snprintf(path, sizeof(path), "%s/p5.48xlarge.xml", TERN_TEST_DATA_DIR);
	assert_int_equal(tern__topo_gpu_nics(path, 0, got, TERN_MAX_NICS, why,
					     sizeof(why)),
			 4);
	assert_string_equal(got[0], "rdmap79s0");
	assert_string_equal(got[3], "rdmap82s0");
	assert_int_equal(tern__topo_gpu_nics(path, 0, got, 2, why, sizeof(why)),
			 2);
	/* No GPU at all. */
	snprintf(path, sizeof(path), "%s/server-2s.xml", TERN_TEST_DATA_DIR);
	assert_int_equal(tern__topo_gpu_nics(path, 0, got, TERN_MAX_NICS, why,
					     sizeof(why)),
			 -ENOENT);
}

static void test_format_cpus(void **state)
{
	static const unsigned a[] = { 0, 1, 2, 3, 8, 10, 11, 96 };
	char buf[64];

	(void)state;
	assert_int_equal(tern__topo_format_cpus(a, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(tern__topo_format_cpus(a, 1, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "0");
	assert_int_equal(tern__topo_format_cpus(a, 8, buf, sizeof(buf)), 14);
	assert_string_equal(buf, "0-3,8,10-11,96");
	/* Too small: whole ranges only, always terminated, full length. */
	assert_int_equal(tern__topo_format_cpus(a, 8, buf, 6), 14);
	assert_string_equal(buf, "0-3,8");
	assert_int_equal(tern__topo_format_cpus(a, 8, buf, 2), 14);
	assert_string_equal(buf, "");
	assert_int_equal(tern__topo_format_cpus(a, 8, NULL, 0), 14);
}

/* Binding needs the real system: pin to the PU this thread runs on, read
 * the affinity back, restore it. From XML it is refused. */
static void test_bind_thread(void **state)
{
	struct fixture fx;
	struct tern_topo *t;
	cpu_set_t before, after;
	unsigned cpu, bad = 1u << 30;
	int c;

	(void)state;
	load_fixture("p5.48xlarge", 0, &fx);
	cpu = 0;
	assert_int_equal(tern__topo_bind_thread(fx.topo, &cpu, 1), -ENOTSUP);
	assert_int_equal(tern__topo_bind_thread(fx.topo, NULL, 1), -EINVAL);
	assert_int_equal(tern__topo_bind_thread(fx.topo, &cpu, 0), -EINVAL);
	free_fixture(&fx);

	assert_int_equal(tern__topo_open(NULL, &t), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(before), &before), 0);
	c = sched_getcpu();
	assert_true(c >= 0);
	cpu = (unsigned)c;
	assert_int_equal(tern__topo_bind_thread(t, &cpu, 1), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
	assert_int_equal(CPU_COUNT(&after), 1);
	assert_true(CPU_ISSET(cpu, &after));
	assert_int_equal(tern__topo_bind_thread(t, &bad, 1), -EINVAL);
	assert_int_equal(sched_setaffinity(0, sizeof(before), &before), 0);
	tern__topo_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_p4d),
		cmocka_unit_test(test_p5),
		cmocka_unit_test(test_p5en),
		cmocka_unit_test(test_p6_b200),
		cmocka_unit_test(test_server),
		cmocka_unit_test(test_fallback),
		cmocka_unit_test(test_instance_shapes),
		cmocka_unit_test(test_nic_kinds),
		cmocka_unit_test(test_fabric_lookup),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_hostile_values),
		cmocka_unit_test(test_gpu_nics),
		cmocka_unit_test(test_format_cpus),
		cmocka_unit_test(test_bind_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
