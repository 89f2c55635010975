/* SPDX-License-Identifier: MIT */
/*
 * The same-host path (docs/local.md), over a real provider:
 *   shared  ctxs of one process: a TERN_MEM_SHARED region written, read
 *           and updated (atomics) byte-exact at odd sizes and offsets;
 *           immediates counted per peer (a third ctx's writes of the same
 *           imm do not count); batches; a write past the end refused
 *           before any copy; a closed region no longer written;
 *   cma     a forked initiator writes and reads the parent's malloc()
 *           memory (cross-memory attach), byte-exact;
 *   uid     a forked process under another uid is never given the path;
 *   kill    a forked writer killed mid-copy: the survivor closes its
 *           region at once and serves another peer;
 *   mixed   one ctx, a local peer and a peer over the provider (a child
 *           with TERN_LOCAL=0), both written and verified;
 *   scm     a child that the kernel refuses pidfd_getfd() and
 *           cross-memory attach (a seccomp filter, as Yama ptrace_scope
 *           1 or a container would) gets the inbox and a shared region's
 *           memfd from the parent's fd broker (SCM_RIGHTS), and writes
 *           and reads it byte-exact on the same-host path;
 *   scmuid  the broker refuses a process of another uid, a bad request
 *           and a region that is not shared memory;
 *   cuda    GPU memory across processes (CUDA IPC; the fake driver with
 *           $TERN_FAKE_CUDA_HMEM, or a GPU): a child reads and writes
 *           the parent's zero-copy GPU region from host memory and from
 *           its own GPU memory (device to device), writes GPU memory into
 *           the parent's shared host region, and a staged region's GPU
 *           buffer into the GPU region; a write with immediate counts
 *           after its bytes are in GPU memory; the region closed, the
 *           child's write fails -TERN_EACCESS.
 * The cases live by topic: local_shared.c (shared), local_child.c (cma,
 * uid, kill, mixed, scm), local_broker.c (scmuid) and local_cuda.c
 * (cuda); what they share is local_cases.h and local_fixture.{h,c}.
 * usage: local --provider P [--node ADDR] CASE. Exit 0 pass, 1 fail.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "local_cases.h"

int main(int argc, char **argv)
{
	const char *what = local_args(argc, argv, "local");
	int ret;

	signal(SIGPIPE, SIG_IGN);
	if (strcmp(what, "shared") == 0)
		ret = case_shared();
	else if (strcmp(what, "mixed") == 0)
		ret = case_mixed();
	else if (strcmp(what, "cuda") == 0)
		ret = case_cuda();
	else
		ret = case_child(what);
	if (ret == 0)
		printf("PASS local %s over %s\n", what, g_prov);
	return ret;
}
