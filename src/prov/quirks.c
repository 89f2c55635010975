/* SPDX-License-Identifier: MIT */
/*
 * Workarounds for bugs of released libfabric versions. Each names the bug
 * and the releases that have it, and is switched on by the version of the
 * library running (fi_version()), never by the headers tern was built
 * with: a tern built against 1.17 runs on 2.x, and the other way round.
 */
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "../core/core.h"
#include "prov.h"
#include "prov_inline.h"

/*
 * shm in libfabric 2.0.0 to 2.3.1 reports a write with remote CQ data at
 * its target with the flags FI_REMOTE_CQ_DATA alone, without FI_RMA |
 * FI_REMOTE_WRITE, and with op_context set to the initiator's context (a
 * pointer of the other process). The cleanup of shm's op flags (libfabric
 * commit fc24cadcf, "prov/shm: cleanup op flags", first in 2.0.0) lost
 * them; "prov/shm: fix rx completion flags" (5f73ca0453, first released
 * in 2.4.0) restored them. tern would take such an entry for one of its
 * own requests and follow the foreign pointer.
 *
 * Every receive completion carries FI_RECV (shm's receives go through the
 * util srx, which sets FI_MSG | FI_RECV or FI_TAGGED | FI_RECV) and
 * transmit completions never carry FI_REMOTE_CQ_DATA, so an entry with
 * FI_REMOTE_CQ_DATA and neither FI_RECV nor FI_REMOTE_WRITE is such a
 * write: it gets the flags fi_cq(3) gives it and no context.
 */
int tern__prov_quirk_rx_flags(const struct fi_info *fi)
{
	uint32_t v = fi_version();

	if (fi == NULL || fi->fabric_attr == NULL ||
	    fi->fabric_attr->prov_name == NULL ||
	    strcmp(fi->fabric_attr->prov_name, "shm") != 0)
		return 0;
	return FI_MAJOR(v) == 2 && FI_MINOR(v) < 4;
}

void tern__prov_fix_rx_flags(struct tern__prov_cqent *ent, size_t n)
{
	const uint64_t mask = FI_REMOTE_CQ_DATA | FI_RECV | FI_REMOTE_WRITE;

	for (size_t i = 0; i < n; i++) {
		struct fi_cq_data_entry *e = &ent[i].e;

		if ((e->flags & mask) == FI_REMOTE_CQ_DATA) {
			e->flags |= FI_RMA | FI_REMOTE_WRITE;
			e->op_context = NULL;
		}
	}
}

/*
 * shm's "fast RMA" (a write or read of one iovec, without remote CQ data
 * or delivery complete, while process_vm_readv/writev reaches the peer)
 * copies inside fi_writemsg()/fi_readmsg() and writes its completion to
 * the CQ then and there. When the copy fails (an address the peer's
 * process has not mapped, a peer gone), libfabric 1.17 writes the error
 * to the receive CQ with no op_context and returns 0 from the post: the
 * operation's own context never comes back (smr_generic_rma() in
 * prov/shm/src/smr_rma.c). From 1.18 such a post returns -FI_EAGAIN
 * instead (2.5 and later, tested on 2.6, also write a context-less error
 * entry): the operation stays queued, is retried, and is cancellable.
 *
 * On 1.17 the engine attributes such an error to its operation by order
 * (tern__prov_rail.sync_rma; engine/reap.c). Injected writes
 * (fi_inject_write(), prov_inline.h) are outside that story: on the same
 * fast path shm returns their failure from the call and writes no entry,
 * success or error, so the engine never notes them.
 */
int tern__prov_quirk_sync_rma(const struct fi_info *fi)
{
	uint32_t v = fi_version();

	if (fi == NULL || fi->fabric_attr == NULL ||
	    fi->fabric_attr->prov_name == NULL ||
	    strcmp(fi->fabric_attr->prov_name, "shm") != 0)
		return 0;
	return FI_MAJOR(v) == 1 && FI_MINOR(v) < 18;
}

/*
 * shm from libfabric 2.5 ("New shm architecture" in its NEWS; seen on 2.6)
 * carries every fi_inject_write() through the peer's command queue, inline
 * or in an inject buffer (smr_generic_rma_inject() in
 * prov/shm/src/smr_rma.c): the target places the bytes when it next
 * progresses and checks the address only then, and a failure goes to the
 * target's own CQ alone. Up to 2.4 (tested: 1.17, 2.1) a small plain
 * write took shm's fast path inside the call (process_vm_writev): it had
 * landed when the call returned, and one to memory the peer has not
 * mapped failed there (1.17: -FI_EIO; 2.1: -FI_EAGAIN, re-posted until
 * cancelled). An injected write on 2.5 would complete as done though
 * nothing landed, and a completed one might not have landed yet.
 *
 * tern keeps what the earlier releases gave: on such a rail a plain write
 * is never injected but posted whole (fi_writemsg(): the fast path, with
 * its own completion), so a small write has landed when it completes, and
 * one to an unmapped address is refused at the post as a large one is.
 * Writes with immediate are injected as before: over shm they never take
 * the fast path on any release, and their failures were never seen by
 * the initiator (docs/api.md, "Small writes").
 */
int tern__prov_quirk_inject_plain_off(const struct fi_info *fi)
{
	uint32_t v = fi_version();

	if (fi == NULL || fi->fabric_attr == NULL ||
	    fi->fabric_attr->prov_name == NULL ||
	    strcmp(fi->fabric_attr->prov_name, "shm") != 0)
		return 0;
	return FI_MAJOR(v) > 2 || (FI_MAJOR(v) == 2 && FI_MINOR(v) >= 5);
}
