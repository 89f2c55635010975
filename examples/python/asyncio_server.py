# SPDX-License-Identifier: MIT
"""Story 3: an asyncio server awaiting 32 clients x 50 writes with
immediates; idle, it sleeps on the ctx's wait fd.

    PYTHONPATH=python python3 examples/python/asyncio_server.py [shm|tcp]
"""
import asyncio
import multiprocessing as mp
import sys
import time

import numpy as np

import tern

CLIENTS, WRITES = 32, 50


def node(prov):
    return "127.0.0.1" if prov == "tcp" else None


def clients(prov, card, desc):
    async def main():
        with tern.Context(prov, node=node(prov)) as ctx:
            reg = ctx.register(np.arange(4096, dtype=np.uint8))
            peer = ctx.peer(card)

            async def client(i):
                for k in range(WRITES):
                    await peer.write(reg, desc, (k % 64) * 64, 0, 64,
                                     imm=100 + i)
            await asyncio.gather(*(client(i) for i in range(CLIENTS)))
            await asyncio.sleep(0.5)
    asyncio.run(main())


async def serve(prov):
    with tern.Context(prov, node=node(prov)) as ctx:
        reg = ctx.register(np.zeros(4096, np.uint8))
        exps = [ctx.expect(100 + i, WRITES) for i in range(CLIENTS)]
        c0, t0 = time.process_time(), time.monotonic()
        await asyncio.sleep(1)
        print("idle: %.2f%% of a core" % (100 * (time.process_time() - c0) /
                                          (time.monotonic() - t0)))
        p = mp.get_context("spawn").Process(
            target=clients, args=(prov, ctx.card, reg.descriptor()))
        p.start()
        counts = await asyncio.gather(*exps)
        while p.is_alive():
            ctx.progress()
            await asyncio.sleep(0.001)
        print("counts:", set(counts), "from", len(counts), "clients")


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:] or ["shm"]))
