/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' fake provider: it implements src/prov/prov.h, the one
 * seam between the engine and libfabric, for an engine built with
 * TERN_PROV_FAKE (CMake target tern_engine_fake). Every provider call is
 * recorded; post results and completion queue contents are scripted per
 * test. Nothing here touches libfabric.
 */
#ifndef TERN_TEST_FAKE_PROV_H
#define TERN_TEST_FAKE_PROV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "prov/prov.h"

enum fake_op {
	FOP_SEND = 1,
	FOP_RECV,
	FOP_WRITE,
	FOP_CANCEL,
	FOP_SINK_RECV,
	FOP_READ,
	FOP_ATOMIC,
	FOP_BOUNCE_RECV,
	FOP_CTRL_SEND,
	FOP_CTRL_RECV,
};

/* One recorded provider call. */
struct fake_call {
	enum fake_op op;
	unsigned int rail; /* which fake rail was called */
	uint64_t flags;	   /* TERN__PF_* */
	uint64_t addr;
	void *buf;
	size_t len;
	void *desc;
	uint64_t raddr;
	size_t rlen;
	uint64_t rkey;
	uint64_t data;
	void *context;
	ssize_t ret;
	size_t cq_reads; /* CQ reads made before this call */
};

/* One scripted completion: a data entry, or an error entry. */
struct fake_cqe {
	int is_err;
	struct tern__prov_cqent ent;
	uint64_t src; /* its source, where the rail has FI_SOURCE */
	struct {
		void *context;
		int status; /* a tern error code */
		int prov_errno;
		size_t len;
		int tx_orphan; /* no context, a transmit's flags */
		int path;      /* says the path is gone (failover) */
	} err;
};

#define FAKE_MAX_CALLS	1024
#define FAKE_MAX_SCRIPT 64
#define FAKE_MAX_CQ	16384
#define FAKE_RAILS	3

/* The text of a provider errno (the fake's "cq strerror"). */
#define FAKE_PROV_TEXT "fake provider says no"

struct fake {
	struct fake_call calls[FAKE_MAX_CALLS];
	size_t ncalls;
	/* Results of the next posts, in order; 0 once used up. A failure
	 * is the tern status the post's error becomes; its negation is
	 * the provider errno; -EAGAIN means "try again". */
	ssize_t script[FAKE_MAX_SCRIPT];
	size_t nscript, script_pos;
	/* On a successful post, queue its successful completion. */
	int auto_complete;
	/* A write posted with TERN__PF_INJECT whose script says 0 is taken
	 * (TERN__PROV_TAKEN): no completion, as fi_inject_write(). */
	int inject_takes;
	int cancel_ret;
	/* A successful cancel queues the -ECANCELED completion. */
	int cancel_completes;
	/* The provider objects of each rail (set by the test). */
	struct tern__prov_rail *rails[FAKE_RAILS];
	/* Completion queue of each rail: entries cq[r][cq_pos..cq_len). */
	struct fake_cqe cq[FAKE_RAILS][FAKE_MAX_CQ];
	size_t cq_len[FAKE_RAILS], cq_pos[FAKE_RAILS];
	ssize_t cq_fail; /* when non-zero, a CQ read returns it */
	/* Once rail 0's queue is empty: gen_left immediates gen_next, +1... */
	size_t gen_left;
	uint32_t gen_next;
	size_t cq_reads;
	size_t cq_max_count;
};

extern struct fake fk;

/* Forget every call, script and completion. */
void fake_reset(void);
/* Queue a successful completion for a posted context, on its rail;
 * @flags are TERN__CQ_* bits. */
void cq_ok(void *context, size_t len, uint64_t flags, uint64_t data);
/* Queue a landed write with immediate @imm (no local context). */
void cq_imm_on(unsigned int rail, uint32_t imm);
void cq_imm(uint32_t imm);
/* ... from AV address @src (rail 0, which must have source set). */
void cq_imm_from(uint64_t src, uint32_t imm);
/* ... with all 64 bits of remote CQ data @data (a stamp in the high
 * word: what a write posted with @data delivers), on @rail from @src. */
void cq_imm_data(unsigned int rail, uint64_t src, uint64_t data);
/* A message landed in the receive of @context from AV address @src. */
void cq_msg_from(void *context, uint64_t src, size_t len);
/* Queue a raw entry on @rail. */
void fake_cq_push(unsigned int rail, const struct fake_cqe *c);
/* Queue an error completion (tern @status) for a posted context. */
void cq_err(void *context, int status, int prov_errno, size_t len);
/* ... an error that says its path is gone (a failed rail). */
void cq_err_path(void *context, int status);
/* Calls of kind @op so far. */
size_t fake_count(enum fake_op op);
/* Index of the last successful post, or -1. */
long fake_last_ok_post(void);
void fake_script(size_t n, const ssize_t *rets);

#endif /* TERN_TEST_FAKE_PROV_H */
