# SPDX-License-Identifier: MIT
"""Child-process bodies for the pytest stories (spawned, not forked: a
libfabric ctx must not cross a fork)."""
import os
import time

PAGES, PAGE = 64, 16 * 1024


def node(prov):
    return "127.0.0.1" if prov == "tcp" else None


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
