# SPDX-License-Identifier: MIT
"""Child-process bodies for the pytest stories (spawned, not forked: a
libfabric ctx must not cross a fork)."""
import os
import time

PAGES, PAGE = 64, 16 * 1024


def node(prov):
    return "127.0.0.1" if prov == "tcp" else None


def all_to_all_landed(ctxs, bufs):
    """Every rank r wrote r + 1 into slot r (8 bytes) of every other
    rank's buffer: progress every ctx until each buffer holds that (a
    write completes at its initiator when the data is on its way; on shm,
    libfabric 2.x, the target's progress copies it in), then check it."""
    import numpy as np
    size = len(ctxs)
    deadline = time.time() + 10
    for o in range(size):
        want = np.repeat(np.arange(1, size + 1, dtype=np.uint8), 8)
        want[o * 8:(o + 1) * 8] = 0
        while not np.array_equal(bufs[o], want) and \
                time.time() < deadline:
            for c in ctxs:
                c.progress()
        assert np.array_equal(bufs[o], want), (o, bufs[o])


def page_fill(torch):
    """64 pages of 16 KiB, page i's bytes all (i * 7 + offset) % 251."""
    t = torch.arange(PAGES * PAGE, dtype=torch.int64) % 251
    t = (t + torch.arange(PAGES).repeat_interleave(PAGE) * 7) % 251
    return t.to(torch.uint8)


def prefill(prov, q_out, q_in):
    """Story 1, the prefill side: fill the pages, publish card and
    descriptor, keep progressing until told to stop."""
    import torch
    import tern
    with tern.Context(prov, node=node(prov)) as ctx:
        kv = page_fill(torch)
        reg = ctx.register(kv)
        q_out.put((ctx.card, reg.descriptor(), os.getpid()))
        while q_in.empty():
            ctx.progress()
            time.sleep(0.0005)
        cmd = q_in.get()
        if cmd[0] == "push":
            # the decode side handed its card and descriptor: push pages
            _, card, desc, lo, ro = cmd
            peer = ctx.peer(card)
            n = len(lo)
            req = peer.write_batch(reg, lo, desc, ro,
                                   torch.full((n,), PAGE, dtype=torch.int64),
                                   imm=42)
            req.result(timeout=20)
            q_out.put(("pushed", req.nbytes))
            while q_in.empty():
                ctx.progress()
                time.sleep(0.0005)


def rank_main(rank, size, path, prov, q):
    """Story 2: rank 0 writes a state dict to ranks 1..size-1."""
    import torch
    import torch.distributed as dist
    import tern
    store = dist.FileStore(path, size)
    g = torch.Generator().manual_seed(1234)
    shapes = [(4 << 20,), (2048, 2048), (1 << 20,), (3, 1 << 20)]
    want = [torch.rand(s, generator=g) for s in shapes]  # 64 MiB float32
    with tern.Context(prov, node=node(prov)) as ctx:
        if rank == 0:
            sd = want
        else:
            sd = [torch.zeros_like(t) for t in want]
        regs = [ctx.register(t) for t in sd]
        w = tern.world.from_store(store, rank, size, ctx, regs)
        ok = True
        if rank == 0:
            reqs = [w.peers[r].write(regs[i], w.descs[r][i], imm=5)
                    for r in range(1, size) for i in range(len(regs))]
            for req in reqs:
                req.result(timeout=60)
        else:
            ctx.expect(5, len(regs), timeout=60).result()
            ok = all(torch.equal(a, b) for a, b in zip(sd, want))
        store.add("done", 1)
        # stay reachable until everyone is done (tcp needs both sides)
        while store.add("done", 0) < size:
            ctx.progress()
            time.sleep(0.001)
        w.close()
    q.put((rank, ok))


def aio_clients(prov, card, descs, nclients, nwrites):
    """Story 3, the client side: nclients tasks, each nwrites writes with
    immediate (its id)."""
    import asyncio
    import numpy as np
    import tern

    async def main():
        with tern.Context(prov, node=node(prov)) as ctx:
            src = np.arange(4096, dtype=np.uint8)
            reg = ctx.register(src)
            peer = ctx.peer(card)

            async def client(i):
                for k in range(nwrites):
                    await peer.write(reg, descs, (i * nwrites + k) % 64 * 64,
                                     0, 64, imm=100 + i)
            await asyncio.gather(*(client(i) for i in range(nclients)))
            # let the last writes' completions reach the server
            await asyncio.sleep(0.5)
    asyncio.run(main())


def victim(prov, q_out, pause):
    """Story 4: a target that will be killed. With pause set it stops
    progressing before the kill: libfabric 1.17's shm provider spins
    forever on a peer's shared-memory lock when that peer was killed in
    the middle of its progress (reported in the python branch's notes)."""
    import numpy as np
    import tern
    ctx = tern.Context(prov, node=node(prov))
    buf = np.zeros(64 << 20, np.uint8)
    reg = ctx.register(buf)
    q_out.put((ctx.card, reg.descriptor()))
    while not pause.is_set():
        ctx.progress()
        time.sleep(0.0001)
    q_out.put("paused")
    while True:
        time.sleep(1)


def gc_stress(prov, me, q_out, q_in, iters, seed):
    """Issue 37's garbage-collector stress, one of two processes: every
    iteration sets gc thresholds of 1..15, registers fresh regions, adds
    peers now and then, posts writes (with and without immediate), reads
    and a batch to the other process, and drops regions, peers and
    requests in an order picked from the iteration, some in reference
    cycles, some while their transfers run; some are closed explicitly.
    The other process writes into this one's inbox meanwhile. Every wait
    is bounded: a request that does not complete in 20 s fails the run.
    Exits 0 after iters iterations, having checked what it read."""
    import faulthandler
    import gc
    import queue
    import itertools
    import random
    import sys
    import numpy as np
    import tern

    # a hang shows where, and ends the run
    faulthandler.dump_traceback_later(100, exit=True)
    rng = random.Random(seed)

    ctx = tern.Context(prov, node=node(prov))
    inbox = np.zeros(1 << 16, np.uint8)
    inbox[:4096] = (np.arange(4096) * 13 + me) % 251  # read by the other
    rin = ctx.register(inbox)
    q_out.put((ctx.card, rin.descriptor()))
    card, far = q_in.get(timeout=60)
    want = ((np.arange(4096) * 13 + (1 - me)) % 251).astype(np.uint8)
    orders = list(itertools.permutations(range(4)))
    peer = ctx.peer(card)  # writes with imm
    peer2 = ctx.peer(card)  # the rest: dropped, and closed, with requests out
    keep = []  # requests whose results are checked later
    imm = 1000 + me
    try:
        for i in range(iters):
            t = rng.randint(1, 15)
            gc.set_threshold(t, rng.randint(1, 15), rng.randint(1, 15))
            if i % 25 == 0:
                # a new peer; the old ones are dropped with requests out,
                # the one of the writes with imm too: their counts at the
                # target must all arrive (the same-host path reads a
                # removed peer's ring one last time)
                peer = ctx.peer(card)
                peer2 = ctx.peer(card)
            src = np.full(4096 + 64 * (i % 7), i % 251, np.uint8)
            rs = ctx.register(src)
            dst = bytearray(4096)
            rd = ctx.register(dst)
            w = peer.write(rs, far, 8192 + (i % 8) * 4096, 0, 4096)
            wi = peer.write(rs, far, 8192, 0, 64, imm=imm)
            r = peer2.read(rd, far, 0, 0, 4096)
            b = peer2.write_batch(rs, np.arange(4, dtype=np.int64) * 64,
                                 far, 4096 + np.arange(4) * 1024,
                                 np.full(4, 64))
            objs = [rs, rd, peer if i % 2 else peer2, [w, wi, b]]
            cyc = None
            if i % 3 == 0:  # some in a reference cycle, the collector
                cyc = [rs, rd, w, r]  # picks the order
                cyc.append(cyc)
            order = orders[i % len(orders)]
            mode = i % 4
            r.result(timeout=20)
            got = bytes(dst)
            if got != want.tobytes():
                print("iteration %d: read wrong bytes" % i, file=sys.stderr)
                sys.exit(1)
            for k in order:
                o = objs[k]
                if mode == 1 and isinstance(o, tern.Region):
                    o.close()  # explicit, with transfers maybe running
                if mode == 2 and k == 3:
                    keep.extend(o)
                objs[k] = None
            if mode == 3 and i % 25 == 23:
                peer2.close()  # its requests complete, or Cancelled
                peer2 = ctx.peer(card)
            del rs, rd, w, wi, r, b, objs, o, src, dst, cyc
            if i % 50 == 49:
                for q in keep:
                    try:
                        q.result(timeout=20)
                    except tern.Cancelled:
                        pass
                keep = []
                ctx.progress()
        gc.set_threshold(700, 10, 10)
        for q in keep:
            try:
                q.result(timeout=20)
            except tern.Cancelled:
                pass
        # the requests dropped in flight still go out, but only while
        # this process makes progress (tcp): until every one completed
        # (the package's own bookkeeping), or 60 s
        t0 = time.monotonic()
        while ctx._inflight and time.monotonic() - t0 < 60:
            ctx.progress()
        # the other side's writes with imm: all of them land
        n = ctx.expect(1000 + (1 - me), iters, timeout=60)
        q_out.put(("done", n.result()))
        # stay reachable until the other one has checked its counts
        while True:
            ctx.progress()
            try:
                q_in.get(timeout=0.001)
                break
            except queue.Empty:
                pass
    except tern.Timeout as e:
        print("iteration %d: %s" % (i, e), file=sys.stderr)
        sys.exit(1)
    print("gc_stress %d: %d iterations, %d counted" % (me, i + 1, n.result()), file=sys.stderr)
    ctx.close()
