/* SPDX-License-Identifier: MIT */
/*
 * The internals of the harness fuzz_fill_session, one program of three
 * sources: fuzz_fill_session.c drives the clients and the server, and
 * checks each input's end; fuzz_fill_session_model.c is the model of what
 * the server must do, which judges every reply; fuzz_fill_session_ops.c
 * turns an input's bytes into operations (fuzz_fill_session.h). Here: the
 * harness's state F, which the three share, and what each gives the others.
 */
#ifndef FUZZ_FILL_SESSION_INT_H
#define FUZZ_FILL_SESSION_INT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tern/tern.h>

#include "wire/card.h"
#include "apps/fill/fill.h"
#include "fuzz_fill_session.h"

#define MAX_SESSIONS   4
#define MAX_PER_CLIENT 2
#define PARALLEL       2
#define IDLE_MS	       50   /* the server's idle timeout */
#define NTX	       32   /* sends in flight per client */
#define NRX	       16   /* receives posted per client */
#define TX_MAX	       2048 /* largest message the harness sends */
#define RX_MAX	       1024 /* largest the server sends: REPLY_MAX 512 */
#define GUARD	       4096 /* unregistered bytes around each client's */
#define CANARY	       0xa5
#define QUIET_ROUNDS   8
#define PUMP_LIMIT_NS  5000000000ULL
#define MAX_SESS_REC   64
#define MAX_CONN_REC   64
#define MAX_FILL_REC   64
#define MAX_IDX	       (TX_MAX / 4) /* indices in a FILL it sends */

enum { M_LIVE, M_BYE, M_ENDED };
enum { V_ANY, V_ACCEPT, V_REFUSE, V_SILENT };
enum { A_NONE, A_ERROR, A_RESULT };

struct client {
	int index;
	struct tern_ctx *ctx;
	struct tern_peer *srv;
	uint8_t *mem; /* FS_ARENA bytes, registered for remote write */
	struct tern_mr *mr;
	struct tern_mr_desc desc;
	uint8_t *msg; /* NTX send buffers, then NRX receive buffers */
	struct tern_mr *msgmr;
	struct tern_req tx[NTX];
	struct tern_req rx[NRX];
	uint8_t card[TERN_CARD_MAX];
	size_t card_len;
	uint64_t anon_errors; /* ERRORs of session 0 received */
};

/* A session the server ACCEPTed in this input. */
struct msess {
	uint64_t id;
	int owner; /* the client whose card it was opened with */
	int state;
	int unmapped; /* its regions: writes fail */
	struct tern_mr_desc regions[FILL_REGIONS];
};

struct mconn {
	uint64_t nonce;
	int to; /* the client whose card it carries, or -1 */
	int verdict;
	int strict; /* sent with nothing else in flight */
	int accepted;
	uint64_t anon_before;
	int unmapped; /* its regions lie in the hole */
	struct tern_mr_desc regions[FILL_REGIONS];
};

struct mfill {
	int sess; /* index in sessions */
	uint32_t id;
	uint32_t page_size;
	uint32_t count;
	uint64_t seed;
	int ok; /* fill_request_check() passes: the server must write it */
	int live_at_send;
	int strict;
	int answer;
	int32_t status;
	uint64_t dropped_at_send;
	uint32_t idx[MAX_IDX];
};

struct fz {
	int ready;
	int trace;
	struct tern_ctx *sctx;
	struct fill_server *srv;
	uint8_t scard[TERN_CARD_MAX];
	size_t scard_len;
	struct client cl[FS_CLIENTS];
	uint8_t *arena; /* GUARD, then per client FS_ARENA + GUARD */
	size_t arena_len;
	uint8_t *cover; /* per arena byte: FILLs that may write it */
	void *hole;	/* 2 * FS_ARENA mapped PROT_NONE */
	uint32_t scratch[FILL_MAX_PAGES];
	uint8_t out[TX_MAX + 64];
	uint8_t tx[TX_MAX];
	uint8_t last[TX_MAX + 64];
	size_t last_len;

	/* The model, per input. */
	struct msess sess[MAX_SESS_REC];
	int nsess;
	struct mconn conn[MAX_CONN_REC];
	int nconn;
	struct mfill fill[MAX_FILL_REC];
	int nfill;
	int quiet;	       /* nothing in flight since the last pump */
	int idled;	       /* FS_IDLE ran in this input */
	uint64_t expired_base; /* the server's idle ends the model knows */
	uint64_t nonce;	       /* of the harness's own CONNECTs */
	uint64_t fill_id;      /* the last id unique_fill_id() gave */
	uint64_t inputs;       /* inputs run */
	int op;
};

/* An input, read a byte at a time (get8()). */
struct input {
	const uint8_t *p;
	size_t left;
};

extern struct fz F;

/* The ticket the last client's CONNECTs must carry (FS_REG_TICKET), and
 * one that is not it. */
extern const uint8_t ticket[FILL_TICKET_LEN];
extern const uint8_t ticket_bad[FILL_TICKET_LEN];

#define trace(...)                                    \
	do {                                          \
		if (F.trace)                          \
			fprintf(stderr, __VA_ARGS__); \
	} while (0)

static inline void fail(const char *what)
{
	fprintf(stderr, "fuzz_fill_session: op %d: %s\n", F.op, what);
	abort();
}

static inline void want(int ok, const char *what)
{
	if (!ok)
		fail(what);
}

static inline void server_stats(struct fill_server_stats *st)
{
	fill_server_stats(F.srv, st);
}

/* fuzz_fill_session_model.c: the model, and the replies it judges. */
int fs_lost(void);
int fs_model_uncertain(void);
int fs_live_count(int owner);
int fs_card_owner(const uint8_t *card, size_t len);
int fs_connect_target(const uint8_t *msg, size_t len, int *unmapped_p);
void fs_model_sent(const uint8_t *msg, size_t len, int strict);
ssize_t fs_first_stray(void);
int fs_admit(void *data, const void *card, size_t len, const void *t,
	     size_t t_len);
void fs_on_reply(int c, const uint8_t *msg, size_t len);

/* fuzz_fill_session.c: driving, and the checks at quiet points. */
void fs_pump(void);
int fs_send_msg(int c, const uint8_t *msg, size_t len, int batch);
void fs_check_quiet(void);
void fs_check_connect(struct mconn *m);
void fs_check_fill(struct mfill *m);

/* fuzz_fill_session_ops.c: one operation of @in. */
void fs_run_op(struct input *in);

#endif /* FUZZ_FILL_SESSION_INT_H */
