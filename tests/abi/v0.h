/* SPDX-License-Identifier: MIT */
/*
 * What a program built against tern 0.1's headers saw of the API that
 * tests/abi/old_caller.c uses: the attr structs without field_mask, and
 * the types they carry, copied from 0.1's include/tern/ and frozen (never
 * edit them to follow today's headers: they are what old binaries hold).
 * Every function is bound at version TERN_0, as the link against 0.1's
 * libtern.so recorded it in such a binary.
 */
#ifndef TERN_TEST_ABI_V0_H
#define TERN_TEST_ABI_V0_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define V0(name) __asm__(".symver " #name ", " #name "@TERN_0")

#define TERN_MAX_RAILS	     32
#define TERN_CARD_MAX	     2060
#define TERN_BOOT_DESCS_MAX  8
#define TERN_BOOT_TICKET_LEN 16
#define TERN_ACCESS_LOCAL    (1ULL << 0)
#define TERN_MR_F_NOCACHE    (1ULL << 1)

struct tern_ctx;
struct tern_mr;
struct tern_world;
struct tern_boot_server;

enum tern_log_level {
	TERN_LOG_NONE = 0,
	TERN_LOG_WARN = 1,
	TERN_LOG_INFO = 2,
	TERN_LOG_DEBUG = 3,
};

enum tern_mem_kind {
	TERN_MEM_HOST = 0,
	TERN_MEM_CUDA = 1,
	TERN_MEM_SHARED = 2,
};

/* The four attr structs of 0.1. */
struct tern_ctx_attr {
	const char *provider;
	const char *node;
	const char *domain;
	unsigned int rails;
	enum tern_log_level log_level;
	unsigned int post_batch;
	uint64_t flags;
	uint64_t stripe_chunk;
	const char *domains;
	const char *fabric;
};

struct tern_mr_attr {
	void *buf;
	size_t len;
	uint64_t access;
	enum tern_mem_kind kind;
	int device;
	uint64_t flags;
};

enum tern_world_event {
	TERN_WORLD_JOINED = 1,
	TERN_WORLD_GONE = 2,
};

typedef void (*tern_world_cb)(struct tern_world *world, int rank,
			      enum tern_world_event event, void *arg);

struct tern_world_attr {
	int rank;
	int size;
	int timeout_ms;
	int lease_s;
	tern_world_cb on_member;
	void *arg;
};

struct tern_mr_desc {
	uint64_t base;
	uint64_t len;
	uint32_t flags;
	uint32_t nkeys;
	uint64_t keys[TERN_MAX_RAILS];
};

struct tern_boot_info {
	uint8_t card[TERN_CARD_MAX];
	size_t card_len;
	struct tern_mr_desc descs[TERN_BOOT_DESCS_MAX];
	unsigned int ndesc;
	uint8_t ticket[TERN_BOOT_TICKET_LEN];
	size_t ticket_len;
};

typedef void (*tern_boot_cb)(struct tern_boot_server *srv,
			     const struct tern_boot_info *info,
			     const char *text, void *data);

struct tern_boot_server_attr {
	const char *listen;
	const char *token;
	int handshake_ms;
	int max_conns;
	tern_boot_cb on_hello;
	tern_boot_cb on_gone;
	tern_boot_cb on_refused;
	void *data;
	int claim_ms;
};

/* 0.1's struct tern_ctx_info (unchanged since). */
struct tern_ctx_info {
	const char *provider;
	const char *fabric;
	const char *domain;
	unsigned int rails;
	uint64_t mr_mode;
	size_t tx_size;
	size_t rx_size;
	size_t cq_data_size;
	size_t inject_size;
	uint64_t max_msg_size;
	size_t mr_key_size;
	int rx_cq_data;
	uint64_t link_speed;
	int atomic_fadd;
	int atomic_cswap;
	int wait_fd;
	const char *pinned;
	int hmem;
	uint64_t stage_copies;
	uint64_t stage_bytes;
	uint64_t max_rma_size;
	int tagged;
};

const char *tern_strerror(int ret);
int tern_ctx_open(const struct tern_ctx_attr *attr, struct tern_ctx **ctx_p);
int tern_ctx_close(struct tern_ctx *ctx);
int tern_ctx_query(const struct tern_ctx *ctx, struct tern_ctx_info *info);
ssize_t tern_ctx_card(const struct tern_ctx *ctx, void *buf, size_t len);
int tern_mr_regattr(struct tern_ctx *ctx, const struct tern_mr_attr *attr,
		    struct tern_mr **mr_p);
int tern_mr_close(struct tern_mr *mr);
size_t tern_mr_len(const struct tern_mr *mr);
void *tern_mr_addr(const struct tern_mr *mr);
void tern_world_attr_init(struct tern_world_attr *attr);
int tern_world_open(struct tern_ctx *ctx, const char *spec,
		    const struct tern_world_attr *attr,
		    struct tern_world **world_p);
void tern_world_close(struct tern_world *world);
int tern_world_rank(const struct tern_world *world);
int tern_world_size(const struct tern_world *world);
int tern_boot_server_open(struct tern_ctx *ctx,
			  const struct tern_boot_server_attr *attr,
			  const struct tern_boot_info *mine,
			  struct tern_boot_server **srv_p, char *why,
			  size_t whylen);
int tern_boot_server_addr(const struct tern_boot_server *srv, char *buf,
			  size_t len);
void tern_boot_server_close(struct tern_boot_server *srv);

V0(tern_strerror);
V0(tern_ctx_open);
V0(tern_ctx_close);
V0(tern_ctx_query);
V0(tern_ctx_card);
V0(tern_mr_regattr);
V0(tern_mr_close);
V0(tern_mr_len);
V0(tern_mr_addr);
V0(tern_world_attr_init);
V0(tern_world_open);
V0(tern_world_close);
V0(tern_world_rank);
V0(tern_world_size);
V0(tern_boot_server_open);
V0(tern_boot_server_addr);
V0(tern_boot_server_close);

#endif /* TERN_TEST_ABI_V0_H */
