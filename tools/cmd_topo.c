/* SPDX-License-Identifier: MIT */
/* tern topo: GPUs, RDMA NICs, NUMA nodes and cores, and which go together. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#include "apps/json.h"
#include "cli.h"
#include "opts.h"
#include "topo/topo.h"

struct topo_cli {
	int json;
	const char *json_file;
	const char *xml;
	int kind;
	/* libfabric's view of this host, read on the first lookup */
	int listed;
	struct tern_prov_info *prov;
	size_t nprov;
};

static const int topo_keys[] = { 'x', 'k', 'j', 'h', 0 };

static void usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f,
		"usage: tern topo [--json[=FILE]] [--xml FILE] [--nics KIND]\n"
		"\n"
		"Show the machine as tern places work on it: NUMA nodes and "
		"their cores\n(one per physical core), NVIDIA GPUs, RDMA NICs "
		"and the PCIe switches\nbetween them. Each GPU gets the NICs "
		"below its PCIe switch (else its\nhost bridge, else its NUMA "
		"node, else the nearest NUMA node); GPUs that\nfind the same "
		"NICs divide them evenly when they can. Host memory on a\n"
		"NUMA node uses that node's NICs. Link speeds come from "
		"libfabric on this\nhost, or from TernLinkSpeedGbps "
		"attributes in an XML file (made with\n`lstopo --of xml FILE` "
		"elsewhere).\n\n");
	cli_opts_help(p, f);
}

/* libfabric's domain and link speed for an RDMA device, on this host. */
static int fabric_lookup(void *arg, const char *name,
			 struct tern_topo_fabric *out)
{
	struct topo_cli *s = arg;
	size_t len = strlen(name);
	int found = -ENOENT;

	if (!s->listed) {
		s->listed = 1;
		if (tern_info_list(NULL, &s->prov, &s->nprov) != 0) {
			s->prov = NULL;
			s->nprov = 0;
		}
	}
	for (size_t i = 0; i < s->nprov; i++) {
		const char *d = s->prov[i].domain;

		if (len == 0 || strncmp(d, name, len) != 0 ||
		    (d[len] != '\0' && d[len] != '-'))
			continue;
		if (found != 0)
			snprintf(out->domain, sizeof(out->domain), "%.*s",
				 (int)sizeof(out->domain) - 1, d);
		found = 0;
		if (s->prov[i].link_speed > out->link_bps)
			out->link_bps = s->prov[i].link_speed;
	}
	return found;
}

static const char *gbps(double g, char *buf, size_t len)
{
	if (g <= 0.0)
		snprintf(buf, len, "n/a");
	else if (g >= 100.0)
		snprintf(buf, len, "%.0f Gbit/s", g);
	else
		snprintf(buf, len, "%.1f Gbit/s", g);
	return buf;
}

static const char *bps(uint64_t v, char *buf, size_t len)
{
	return gbps((double)v / 1e9, buf, len);
}

static const char *cpus(const unsigned *c, size_t n, char *buf, size_t len)
{
	if (n == 0)
		snprintf(buf, len, "none");
	else
		tern__topo_format_cpus(c, n, buf, len);
	return buf;
}

/* Where a GPU's (gpu) or a NUMA node's NICs were found. */
static const char *path_text(enum tern_topo_path p, int gpu)
{
	switch (p) {
	case TERN_TOPO_PATH_SWITCH:
		return "under its PCIe switch";
	case TERN_TOPO_PATH_HOSTBRIDGE:
		return "under its PCI host bridge";
	case TERN_TOPO_PATH_NUMA:
		return gpu ? "on its NUMA node (none under its PCIe switch)"
			   : "on this node";
	case TERN_TOPO_PATH_NEAR:
		return gpu ? "on the nearest NUMA node with NICs (none on its "
			     "own)"
			   : "on the nearest node with NICs (none on this one)";
	case TERN_TOPO_PATH_SYSTEM:
		return "anywhere (its NUMA node is not known)";
	case TERN_TOPO_PATH_NONE:
		break;
	}
	return "none";
}

static const char *memory(uint64_t bytes, char *buf, size_t len)
{
	double gib = (double)bytes / (1024.0 * 1024.0 * 1024.0);

	if (gib >= 100.0)
		snprintf(buf, len, "%.0f GiB", gib);
	else
		snprintf(buf, len, "%.1f GiB", gib);
	return buf;
}

static size_t total_pus(const struct tern_topo *t, size_t *cores_p)
{
	size_t pus = 0, cores = 0;

	for (size_t i = 0; i < tern__topo_numa_count(t); i++) {
		pus += tern__topo_numa_get(t, i)->npus;
		cores += tern__topo_numa_get(t, i)->ncores;
	}
	*cores_p = cores;
	return pus;
}

static size_t mapped_nics(const struct tern_topo *t, size_t *idx)
{
	size_t n = 0;

	for (size_t i = 0; i < tern__topo_nic_count(t); i++) {
		if (tern__topo_nic_get(t, i)->mapped)
			idx[n++] = i;
	}
	return n;
}

static void print_nic_list(const struct tern_topo *t, const size_t *nics,
			   size_t n)
{
	for (size_t j = 0; j < n; j++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t, nics[j]);

		printf("    %-12s %s%s%s\n", c->name, c->busid,
		       c->domain[0] ? "  domain " : "", c->domain);
	}
}

/* tern topo: each NUMA node, its cores and the NICs its memory uses. */
static void print_numa(const struct tern_topo *t)
{
	char b1[32], mem[32], list[4096];

	for (size_t i = 0; i < tern__topo_numa_count(t); i++) {
		const struct tern_topo_numa *m = tern__topo_numa_get(t, i);

		printf("\nNUMA node %d: %zu cores %s (%zu PUs)", m->os_index,
		       m->ncores, cpus(m->cores, m->ncores, list, sizeof(list)),
		       m->npus);
		if (m->memory > 0)
			printf(", %s memory",
			       memory(m->memory, mem, sizeof(mem)));
		printf("\n");
		if (m->nnics == 0) {
			printf("  NICs for host memory: none\n");
			continue;
		}
		printf("  NICs for host memory: %zu, %s, %s\n", m->nnics,
		       bps(tern__topo_nics_bps(t, m->nics, m->nnics), b1,
			   sizeof(b1)),
		       path_text(m->path, 0));
		print_nic_list(t, m->nics, m->nnics);
	}
}

/* Each GPU, where it sits and the NICs it gets. */
static void print_gpus(const struct tern_topo *t)
{
	size_t ng = tern__topo_gpu_count(t);
	char b1[32], list[4096];

	printf("\n");
	if (ng == 0)
		printf("GPUs: none (no NVIDIA GPU found)\n");
	for (size_t i = 0; i < ng; i++) {
		const struct tern_topo_gpu *g = tern__topo_gpu_get(t, i);

		printf("GPU %zu  %s  %s", i, g->busid[0] ? g->busid : "-",
		       g->model[0] ? g->model : "NVIDIA GPU");
		if (g->cuda[0] || g->nvml[0])
			printf(" (%s)", g->cuda[0] ? g->cuda : g->nvml);
		printf("\n  NUMA node ");
		if (g->numa >= 0)
			printf("%d", g->numa);
		else
			printf("n/a");
		printf(", %zu cores %s\n", g->ncores,
		       cpus(g->cores, g->ncores, list, sizeof(list)));
		if (g->nnics == 0) {
			printf("  NICs: none\n");
			continue;
		}
		printf("  NICs: %zu, %s, %s%s%s", g->nnics,
		       bps(tern__topo_nics_bps(t, g->nics, g->nnics), b1,
			   sizeof(b1)),
		       path_text(g->path, 1), g->via[0] ? " " : "", g->via);
		if (g->share > 1)
			printf("; shared with %u other GPU(s)", g->share - 1);
		printf("\n");
		print_nic_list(t, g->nics, g->nnics);
	}
}

/* Each RDMA NIC: where it sits, its link, and whether it is used. */
static void print_nics(const struct tern_topo *t, const char *kind)
{
	size_t nc = tern__topo_nic_count(t);
	char b1[32], b2[32];

	printf("\n");
	if (nc == 0)
		printf("RDMA NICs: none (no EFA, ConnectX or other PCI device "
		       "with an RDMA driver;\non EFA instances check the efa "
		       "driver and /dev/infiniband)\n");
	else
		printf("RDMA NICs (GPUs and host memory use the %s ones):\n",
		       kind);
	for (size_t i = 0; i < nc; i++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t, i);
		const char *src = c->link_src == TERN_TOPO_SPEED_FABRIC
					  ? " (libfabric)"
				  : c->link_src == TERN_TOPO_SPEED_XML
					  ? " (xml)"
					  : "";

		printf("  %-12s %s  %-4s node ", c->name[0] ? c->name : "-",
		       c->busid, tern__topo_kind_str((int)c->kind));
		if (c->numa >= 0)
			printf("%-3d", c->numa);
		else
			printf("n/a");
		printf(" switch %-13s link %s%s  PCIe %s", c->sw,
		       bps(c->link_bps, b1, sizeof(b1)), src,
		       gbps(c->pcie_gbps, b2, sizeof(b2)));
		if (c->domain[0])
			printf("  domain %s", c->domain);
		if (!c->usable)
			printf("  (no RDMA driver)");
		else if (!c->mapped)
			printf("  (not used: another kind, see --nics)");
		printf("\n");
	}
}

/* The bandwidth of the NICs in use, and per GPU when every GPU gets the
 * same. */
static void print_bandwidth(const struct tern_topo *t, const char *kind,
			    size_t *scratch)
{
	size_t ng = tern__topo_gpu_count(t), nm = mapped_nics(t, scratch);
	char b1[32], b2[32];

	if (nm == 0) {
		printf("\nNIC bandwidth: n/a (no RDMA NIC to use)\n");
		return;
	}
	printf("\nNIC bandwidth: %s over %zu %s NIC(s)",
	       bps(tern__topo_nics_bps(t, scratch, nm), b1, sizeof(b1)), nm,
	       kind);
	if (ng > 0) {
		const struct tern_topo_gpu *g0 = tern__topo_gpu_get(t, 0);
		uint64_t v = tern__topo_nics_bps(t, g0->nics, g0->nnics);
		int same = 1;

		for (size_t i = 1; i < ng; i++) {
			const struct tern_topo_gpu *g = tern__topo_gpu_get(t,
									   i);

			same &= tern__topo_nics_bps(t, g->nics, g->nnics) ==
					v &&
				g->share == g0->share;
		}
		if (same && g0->share > 1)
			printf("; per GPU %s, each NIC shared by %u GPUs",
			       bps(v, b2, sizeof(b2)), g0->share);
		else if (same)
			printf("; per GPU %s", bps(v, b2, sizeof(b2)));
	}
	printf("\n");
}

static void print_text(const struct tern_topo *t, size_t *scratch)
{
	const char *kind = tern__topo_kind_str(tern__topo_mapped_kind(t));
	size_t cores, pus = total_pus(t, &cores);

	printf("topology: %s%s%s\n",
	       tern__topo_machine(t)[0] ? tern__topo_machine(t) : "",
	       tern__topo_machine(t)[0] ? ", from " : "", tern__topo_source(t));
	printf("%zu NUMA node(s), %zu cores (%zu PUs), %zu GPU(s), %zu RDMA "
	       "NIC(s)\n",
	       tern__topo_numa_count(t), cores, pus, tern__topo_gpu_count(t),
	       tern__topo_nic_count(t));
	print_numa(t);
	print_gpus(t);
	print_nics(t, kind);
	print_bandwidth(t, kind, scratch);
}

static void json_str(const char *v)
{
	app_json_string(stdout, v, SIZE_MAX);
}

static void json_str_or_null(const char *v)
{
	if (v == NULL || v[0] == '\0')
		printf("null");
	else
		json_str(v);
}

static void json_bps(uint64_t v)
{
	if (v == 0)
		printf("null");
	else
		printf("%" PRIu64, v);
}

static void json_numa(int n)
{
	if (n < 0)
		printf("null");
	else
		printf("%d", n);
}

static void json_cores(const unsigned *c, size_t n)
{
	char list[4096];

	printf("\"cores\": [");
	for (size_t i = 0; i < n; i++)
		printf("%s%u", i ? ", " : "", c[i]);
	printf("], \"cpus\": ");
	json_str(n ? cpus(c, n, list, sizeof(list)) : "");
}

static void json_nics(const struct tern_topo *t, const size_t *nics, size_t n)
{
	printf("\"nics\": [");
	for (size_t j = 0; j < n; j++) {
		printf("%s", j ? ", " : "");
		json_str(tern__topo_nic_get(t, nics[j])->name);
	}
	printf("], \"nic_busids\": [");
	for (size_t j = 0; j < n; j++) {
		printf("%s", j ? ", " : "");
		json_str(tern__topo_nic_get(t, nics[j])->busid);
	}
	printf("], \"nic_bps\": ");
	json_bps(tern__topo_nics_bps(t, nics, n));
}

static void print_json(const struct tern_topo *t, size_t *scratch)
{
	size_t nm;

	printf("{\"source\": ");
	json_str(tern__topo_source(t));
	printf(", \"machine\": ");
	json_str_or_null(tern__topo_machine(t));
	printf(", \"nic_kind\": ");
	json_str(tern__topo_kind_str(tern__topo_mapped_kind(t)));
	printf(",\n \"numa\": [");
	for (size_t i = 0; i < tern__topo_numa_count(t); i++) {
		const struct tern_topo_numa *m = tern__topo_numa_get(t, i);

		printf("%s\n  {\"node\": %d, \"memory_bytes\": %" PRIu64
		       ", \"pus\": %zu, ",
		       i ? "," : "", m->os_index, m->memory, m->npus);
		json_cores(m->cores, m->ncores);
		printf(", \"nic_path\": \"%s\", ",
		       tern__topo_path_str(m->path));
		json_nics(t, m->nics, m->nnics);
		printf("}");
	}
	printf("],\n \"gpus\": [");
	for (size_t i = 0; i < tern__topo_gpu_count(t); i++) {
		const struct tern_topo_gpu *g = tern__topo_gpu_get(t, i);

		printf("%s\n  {\"index\": %zu, \"busid\": ", i ? "," : "", i);
		json_str_or_null(g->busid);
		printf(", \"model\": ");
		json_str_or_null(g->model);
		printf(", \"cuda\": ");
		json_str_or_null(g->cuda);
		printf(", \"nvml\": ");
		json_str_or_null(g->nvml);
		printf(", \"numa\": ");
		json_numa(g->numa);
		printf(", \"switch\": ");
		json_str_or_null(g->sw);
		printf(", \"nic_path\": \"%s\", \"via\": ",
		       tern__topo_path_str(g->path));
		json_str_or_null(g->via);
		printf(", \"share\": %u, ", g->share);
		json_nics(t, g->nics, g->nnics);
		printf(", ");
		json_cores(g->cores, g->ncores);
		printf("}");
	}
	printf("],\n \"nics\": [");
	for (size_t i = 0; i < tern__topo_nic_count(t); i++) {
		const struct tern_topo_nic *c = tern__topo_nic_get(t, i);

		printf("%s\n  {\"name\": ", i ? "," : "");
		json_str_or_null(c->name);
		printf(", \"domain\": ");
		json_str_or_null(c->domain);
		printf(", \"busid\": ");
		json_str(c->busid);
		printf(", \"kind\": \"%s\", \"vendor_id\": \"0x%04x\", "
		       "\"device_id\": \"0x%04x\", \"numa\": ",
		       tern__topo_kind_str((int)c->kind), c->vendor_id,
		       c->device_id);
		json_numa(c->numa);
		printf(", \"switch\": ");
		json_str_or_null(c->sw);
		printf(", \"netdev\": ");
		json_str_or_null(c->netdev);
		printf(", \"link_bps\": ");
		json_bps(c->link_bps);
		printf(", \"link_source\": %s, \"pcie_gbps\": ",
		       c->link_src == TERN_TOPO_SPEED_FABRIC ? "\"libfabric\""
		       : c->link_src == TERN_TOPO_SPEED_XML  ? "\"xml\""
							     : "null");
		if (c->pcie_gbps > 0.0)
			printf("%.3f", c->pcie_gbps);
		else
			printf("null");
		printf(", \"usable\": %s, \"mapped\": %s}",
		       c->usable ? "true" : "false",
		       c->mapped ? "true" : "false");
	}
	nm = mapped_nics(t, scratch);
	printf("],\n \"total_nic_bps\": ");
	json_bps(tern__topo_nics_bps(t, scratch, nm));
	printf("}\n");
}

static int parse_kind(const char *v, int *kind_p)
{
	static const char *const names[] = { "auto", "efa", "mlx", "rdma",
					     "all" };

	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		if (strcmp(v, names[i]) == 0) {
			*kind_p = i; /* 0 auto, then TERN_TOPO_NIC_* */
			return 0;
		}
	}
	cli_err("topo", "--nics '%s': expected auto, efa, mlx, rdma or all", v);
	return -EINVAL;
}

static void load_error(const char *path, int ret)
{
	switch (ret) {
	case -EINVAL:
		cli_err("topo",
			"%s is not an hwloc XML topology (export one with "
			"`lstopo --of xml FILE`; TERN_LOG=info says more)",
			path);
		break;
	case -EFBIG:
		cli_err("topo",
			"%s is larger than %u MiB: not an hwloc XML "
			"topology",
			path, TERN_TOPO_XML_MAX >> 20);
		break;
	case -E2BIG:
		cli_err("topo", "%s describes more than %u PCI devices", path,
			TERN_TOPO_PCI_MAX);
		break;
	default:
		cli_err("topo", "cannot read %s: %s", path, tern_strerror(ret));
	}
}

static int topo_option(void *data, int c, const char *arg)
{
	struct topo_cli *s = data;

	switch (c) {
	case 'x':
		s->xml = arg;
		break;
	case 'k':
		return parse_kind(arg, &s->kind);
	case 'j':
		s->json = 1;
		s->json_file = arg;
		break;
	}
	return 0;
}

static const struct cli_cmd topo_cmd = {
	.name = "topo",
	.keys = topo_keys,
	.usage = usage,
	.option = topo_option,
};

int cmd_topo(int argc, char **argv)
{
	struct topo_cli s = { 0 };
	struct tern_topo_attr attr = { 0 };
	struct tern_topo *t = NULL;
	size_t *scratch;
	int ret, saved;

	ret = cli_parse(&topo_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	attr.xml_path = s.xml;
	attr.nic_kind = s.kind;
	if (s.xml == NULL) {
		/* Only this host's libfabric knows this host's NICs. */
		attr.fabric_lookup = fabric_lookup;
		attr.fabric_arg = &s;
	}
	ret = tern__topo_open(&attr, &t);
	tern_info_free(s.prov);
	if (ret != 0) {
		if (s.xml != NULL)
			load_error(s.xml, ret);
		else
			cli_err("topo", "cannot discover this host: %s",
				tern_strerror(ret));
		return 1;
	}
	scratch = calloc(tern__topo_nic_count(t) + 1, sizeof(*scratch));
	if (scratch == NULL) {
		cli_err("topo", "%s", tern_strerror(-ENOMEM));
		tern__topo_close(t);
		return 1;
	}
	saved = cli_stdout_to("topo", s.json_file);
	if (saved != -1) {
		if (s.json)
			print_json(t, scratch);
		else
			print_text(t, scratch);
	}
	free(scratch);
	tern__topo_close(t);
	return saved == -1 || cli_stdout_back("topo", saved) != 0 ? 1 : 0;
}
