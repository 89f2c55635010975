# SPDX-License-Identifier: MIT
"""Story 2: weight broadcast. Rank 0 (the trainer) writes a 64 MiB state
dict to ranks 1..3 (inference), which verify it. Peers come from
tern.world.from_store over a torch.distributed Store.

    torchrun --nproc-per-node 4 examples/python/weight_broadcast.py
    # (Debian 13's torch lacks libuv, which its torchrun requires: start
    # the ranks with the variables set there too)
    # (Debian 12's torchrun, torch 1.13, is broken on Python 3.11: use
    # --spawn there, or start the ranks with RANK, WORLD_SIZE,
    # MASTER_ADDR, MASTER_PORT set as torchrun would)
    # or, without torchrun (FileStore, torch.multiprocessing):
    PYTHONPATH=python python3 examples/python/weight_broadcast.py --spawn
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import tern


def state_dict():
    g = torch.Generator().manual_seed(1234)
    return {"embed": torch.rand(4 << 20, generator=g),
            "attn": torch.rand(2048, 2048, generator=g),
            "mlp": torch.rand(1 << 20, generator=g),
            "norm": torch.rand(3, 1 << 20, generator=g)}


def run(rank, size, store, prov="shm"):
    node = "127.0.0.1" if prov == "tcp" else None
    want = state_dict()
    with tern.Context(prov, node=node) as ctx:
        sd = want if rank == 0 else {k: torch.zeros_like(v)
                                     for k, v in want.items()}
        regs = [ctx.register(t) for t in sd.values()]
        w = tern.world.from_store(store, rank, size, ctx, regs)
        if rank == 0:
            reqs = [w.peers[r].write(regs[i], w.descs[r][i], imm=1)
                    for r in range(1, size) for i in range(len(regs))]
            for q in reqs:
                q.result(timeout=60)
        else:
            ctx.expect(1, len(regs), timeout=60).result()
            assert all(torch.equal(sd[k], want[k]) for k in want)
            print("rank %d: state dict verified" % rank)
        store.add("done", 1)
        while store.add("done", 0) < size:
            ctx.progress()
            time.sleep(0.001)
        w.close()


def spawned(rank, size, path):
    run(rank, size, dist.FileStore(path, size))


if __name__ == "__main__":
    if "--spawn" in sys.argv:
        with tempfile.TemporaryDirectory() as d:
            torch.multiprocessing.spawn(spawned, args=(4, d + "/store"),
                                        nprocs=4)
    else:  # torchrun sets these
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        args = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                size, rank == 0)
        try:
            # The classic store server: Debian 13's torch 2.6 is built
            # without the libuv one it would pick by default.
            store = dist.TCPStore(*args, use_libuv=False)
        except TypeError:  # torch 1.13 (Debian 12) has no such argument
            store = dist.TCPStore(*args)
        run(rank, size, store)
