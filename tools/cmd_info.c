/* SPDX-License-Identifier: MIT */
/* tern info: what fi_info shows, plus what matters for RDMA. */
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tern/tern.h>

#include "apps/json.h"
#include "cli.h"
#include "core/thp.h"
#include "opts.h"

static const int info_keys[] = { 'p', 'a', 'j', 'h', 0 };

static void usage(const struct cli_parser *p, FILE *f)
{
	fprintf(f,
		"usage: tern info [--provider NAME] [--all] [--json[=FILE]]\n"
		"\n"
		"List the RDM offerings of the libfabric providers on this "
		"host, one per\nprovider and domain, with what matters for "
		"RDMA: link speed, queue\ndepths, message and inject sizes, "
		"remote CQ data, MR modes, RMA,\natomics and device memory "
		"(HMEM). By default only providers tern can\nuse are shown "
		"(efa, verbs;ofi_rxm, tcp;ofi_rxm, shm, and on libfabric\n"
		"2.x tcp, its own RDM endpoint). It also says\n"
		"whether CUDA is there and how tern would move GPU buffers "
		"over each:\nzero-copy where efa or verbs offer FI_HMEM, else "
		"staged through pinned\nhost memory. --provider shows only "
		"that provider (verbs means verbs;ofi_rxm,\ntcp means "
		"tcp;ofi_rxm, and on libfabric 2.x tcp's own endpoint "
		"too).\nIt also names the mode of transparent huge pages and "
		"what tern does\nfor its own buffers under it.\n\n");
	cli_opts_help(p, f);
}

/*
 * How tern moves GPU buffers over @p. Only efa and verbs reach GPU memory
 * themselves (FI_HMEM with a NIC's DMA to the GPU): tern asks for FI_HMEM
 * on those alone (src/prov/rail.c). shm and tcp may offer FI_HMEM too, but
 * there it is the provider's own host copies (Debian's libfabric has no
 * CUDA at all), so tern stages.
 */
static const char *gpu_path(const struct tern_prov_info *p)
{
	int nic = strcmp(p->provider, "efa") == 0 ||
		  strncmp(p->provider, "verbs", 5) == 0;

	if (nic && p->hmem)
		return "zero-copy (FI_HMEM; open the ctx with TERN_CTX_HMEM)";
	if (nic)
		return "staged through pinned host memory (no FI_HMEM)";
	return "staged through pinned host memory (tern asks for FI_HMEM "
	       "only on efa and verbs)";
}

/* A provider tern opens (src/prov/rail.c): efa, verbs;ofi_rxm, shm, and
 * for tcp on libfabric 2.x its own RDM endpoint ("tcp": what --provider
 * tcp and the automatic choice open) besides tcp;ofi_rxm (atomics, and
 * "tcp" on 1.x). */
static int interesting(const struct tern_prov_info *p)
{
	static const char *const names[] = { "efa", "verbs;ofi_rxm",
					     "tcp;ofi_rxm", "shm" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(p->provider, names[i]) == 0)
			return 1;
	}
	return strcmp(p->provider, "tcp") == 0 &&
	       strncmp(tern_fabric_version(), "1.", 2) != 0;
}

static void json_str(const char *key, const char *v, int comma)
{
	printf("\"%s\": ", key);
	app_json_string(stdout, v, SIZE_MAX);
	printf("%s", comma ? ", " : "");
}

static void print_json(const struct tern_prov_info *l, size_t n,
		       const struct tern_mem_info *cuda, enum tern__thp thp,
		       int thp_on)
{
	printf("{\"tern\": \"%s\", \"libfabric\": \"%s\", "
	       "\"libfabric_build\": \"%s\", \"libfabric_api\": \"%s\", ",
	       tern_version(), tern_fabric_version(),
	       tern_fabric_build_version(), tern_fabric_api_version());
	printf("\"cuda\": {\"available\": %s, \"devices\": %d, "
	       "\"driver_version\": %d, \"fake\": %s, ",
	       cuda->available ? "true" : "false", cuda->devices,
	       cuda->driver_version, cuda->fake ? "true" : "false");
	json_str("why", cuda->why, 0);
	printf("}, \"thp\": {");
	json_str("mode", tern__thp_name(thp), 1);
	printf("\"tern_aligns\": %s, \"tern_advises\": %s, ",
	       thp_on ? "true" : "false",
	       thp_on && thp == TERN__THP_MADVISE ? "true" : "false");
	json_str("tern", tern__thp_policy(thp, thp_on), 0);
	printf("}, \"providers\": [");
	for (size_t i = 0; i < n; i++) {
		const struct tern_prov_info *p = &l[i];

		printf("%s\n  {", i ? "," : "");
		json_str("provider", p->provider, 1);
		json_str("fabric", p->fabric, 1);
		json_str("domain", p->domain, 1);
		json_str("ep_type", p->ep_type, 1);
		json_str("addr_format", p->addr_format, 1);
		json_str("data_progress", p->progress, 1);
		printf("\"link_speed_bps\": %" PRIu64 ", ", p->link_speed);
		json_str("link_state", p->link_state, 1);
		printf("\"tx_size\": %zu, \"rx_size\": %zu, "
		       "\"max_msg_size\": %" PRIu64 ", \"inject_size\": %zu, "
		       "\"cq_data_size\": %zu, \"mr_key_size\": %zu, "
		       "\"mr_mode\": %" PRIu64 ", ",
		       p->tx_size, p->rx_size, p->max_msg_size, p->inject_size,
		       p->cq_data_size, p->mr_key_size, p->mr_mode);
		json_str("mr_mode_str", p->mr_mode_str, 1);
		printf("\"rma\": %s, \"atomic\": %s, \"remote_cq_data\": %s, "
		       "\"hmem\": %s, \"tagged\": %s, \"rx_cq_data\": %s, "
		       "\"usable\": %s, \"wait_fd\": %s, ",
		       p->rma ? "true" : "false", p->atomic ? "true" : "false",
		       p->remote_cq_data ? "true" : "false",
		       p->hmem ? "true" : "false", p->tagged ? "true" : "false",
		       p->rx_cq_data ? "true" : "false",
		       p->usable ? "true" : "false",
		       p->wait_fd ? "true" : "false");
		json_str("gpu_path", p->hmem ? "zero-copy" : "staged", 1);
		json_str("why_not", p->why_not, 0);
		printf("}");
	}
	printf("\n]}\n");
}

static const char *speed(uint64_t bps, char *buf, size_t len)
{
	if (bps == 0)
		snprintf(buf, len, "n/a");
	else if (bps >= 1000000000ULL)
		snprintf(buf, len, "%.0f Gb/s", (double)bps / 1e9);
	else
		snprintf(buf, len, "%.0f Mb/s", (double)bps / 1e6);
	return buf;
}

static const char *big(uint64_t v, char *buf, size_t len)
{
	if (v == UINT64_MAX)
		return "unlimited";
	return tern_format_size(v, buf, len);
}

static void print_table(const struct tern_prov_info *l, size_t n,
			const struct tern_mem_info *cuda, enum tern__thp thp,
			int thp_on)
{
	printf("libfabric %s, API %s (tern %s built with %s)\n",
	       tern_fabric_version(), tern_fabric_api_version(), tern_version(),
	       tern_fabric_build_version());
	if (cuda->available)
		printf("CUDA %s driver %d.%d, %d device(s)\n",
		       cuda->fake ? "FAKE ($TERN_FAKE_CUDA)" : "",
		       cuda->driver_version / 1000,
		       cuda->driver_version % 1000 / 10, cuda->devices);
	else
		printf("CUDA not available: %s\n", cuda->why);
	printf("transparent huge pages: %s (%s)\n\n", tern__thp_name(thp),
	       tern__thp_policy(thp, thp_on));
	for (size_t i = 0; i < n; i++) {
		const struct tern_prov_info *p = &l[i];
		char s1[32], s2[32], s3[32];

		printf("%s  fabric %s  domain %s\n", p->provider, p->fabric,
		       p->domain);
		printf("  endpoint       %s, %s, data progress %s\n",
		       p->ep_type, p->addr_format, p->progress);
		printf("  link           %s (%s)\n",
		       speed(p->link_speed, s1, sizeof(s1)), p->link_state);
		printf("  queues         tx %zu, rx %zu\n", p->tx_size,
		       p->rx_size);
		printf("  sizes          max message %s, inject %s, "
		       "cq data %zu B, mr key %zu B\n",
		       big(p->max_msg_size, s2, sizeof(s2)),
		       tern_format_size(p->inject_size, s3, sizeof(s3)),
		       p->cq_data_size, p->mr_key_size);
		printf("  mr mode        %s\n", p->mr_mode_str);
		printf("  offers         RMA %s, atomics %s, remote CQ data "
		       "%s, "
		       "HMEM %s, tagged %s%s\n",
		       p->rma ? "yes" : "no", p->atomic ? "yes" : "no",
		       p->remote_cq_data ? "yes" : "no", p->hmem ? "yes" : "no",
		       p->tagged ? "yes" : "no",
		       p->rx_cq_data ? ", needs receives for CQ data" : "");
		if (p->usable)
			printf("  messages       %s\n",
			       p->tagged ? "tagged: the provider matches them "
					   "to receives"
					 : "untagged: tern matches them to "
					   "receives, one copy each, at most "
					   "the endpoint's message size (the "
					   "MTU on efa-direct)");
		if (p->usable && !p->atomic)
			printf("  atomics        none: tern_atomic_* answer "
			       "-TERN_ENOTSUP%s\n",
			       strcmp(p->fabric, "efa-direct") == 0
				       ? " (the efa fabric emulates them: "
					 "--fabric efa)"
				       : "");
		if (p->usable)
			printf("  GPU buffers    %s\n", gpu_path(p));
		if (p->usable)
			printf("  idle wait      %s\n",
			       p->wait_fd ? "sleeps on completion-queue fds"
					  : "no wait fd: polls, sleeping up to "
					    "20 ms once idle");
		printf("  tern           %s%s\n\n",
		       p->usable ? "usable" : "not usable: ", p->why_not);
	}
}

struct info_cli {
	const char *provider;
	const char *json_file;
	int json;
	int all;
};

static int info_option(void *data, int c, const char *arg)
{
	struct info_cli *s = data;

	switch (c) {
	case 'p':
		s->provider = arg;
		break;
	case 'a':
		s->all = 1;
		break;
	case 'j':
		s->json = 1;
		s->json_file = arg;
		break;
	}
	return 0;
}

static const struct cli_cmd info_cmd = {
	.name = "info",
	.keys = info_keys,
	.usage = usage,
	.option = info_option,
};

int cmd_info(int argc, char **argv)
{
	struct info_cli s = { 0 };
	struct tern_prov_info *list;
	struct tern_mem_info cuda;
	int ret, saved, thp_on;
	enum tern__thp thp;
	size_t n, kept = 0;

	ret = cli_parse(&info_cmd, argc, argv, &s, NULL);
	if (ret != CLI_GO)
		return ret;
	ret = tern_info_list(s.provider, &list, &n);
	if (ret != 0) {
		cli_err("info", "%s", tern_strerror(ret));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (s.all || s.provider != NULL || interesting(&list[i]))
			list[kept++] = list[i];
	}
	tern_mem_probe(TERN_MEM_CUDA, &cuda);
	thp = tern__thp_mode(NULL);
	thp_on = tern__thp_on();
	saved = cli_stdout_to("info", s.json_file);
	if (saved == -1) {
		tern_info_free(list);
		return 1;
	}
	if (s.json)
		print_json(list, kept, &cuda, thp, thp_on);
	else
		print_table(list, kept, &cuda, thp, thp_on);
	if (kept == 0 && !s.json)
		printf("no %s%soffering found: is the provider built into "
		       "libfabric and its device present\n(for efa and "
		       "verbs: /dev/infiniband)?\n",
		       s.provider ? s.provider : "", s.provider ? " " : "");
	tern_info_free(list);
	if (cli_stdout_back("info", saved) != 0)
		return 1;
	return kept == 0 && s.provider != NULL ? 1 : 0;
}
