# SPDX-License-Identifier: MIT
"""Story 4: failures raise, the interpreter survives.

    PYTHONPATH=python python3 examples/python/failure.py [shm|tcp]
"""
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time

import numpy as np

import tern


def node(prov):
    return "127.0.0.1" if prov == "tcp" else None


def victim(prov, out):
    ctx = tern.Context(prov, node=node(prov))
    reg = ctx.register(np.zeros(64 << 20, np.uint8))
    out.put((ctx.card, reg.descriptor()))
    while True:
        ctx.progress()
        if prov == "shm":
            # libfabric 1.17's shm spins forever on the lock of a peer
            # killed inside its progress: stop progressing before the kill
            break
    while True:
        time.sleep(1)


def main(prov="shm"):
    m = mp.get_context("spawn")
    out = m.Queue()
    p = m.Process(target=victim, args=(prov, out))
    p.start()
    card, desc = out.get(timeout=30)
    desc = pickle.loads(pickle.dumps(desc))  # descriptors pickle
    with tern.Context(prov, node=node(prov)) as ctx:
        reg = ctx.register(np.ones(64 << 20, np.uint8))
        peer = ctx.peer(card)
        off = np.arange(4096, dtype=np.int64) * (16 << 10)
        req = peer.write_batch(reg, off, desc, off,
                               np.full(4096, 16 << 10, np.int64))
        ctx.progress()
        os.kill(p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        try:
            req.result(timeout=3)
            print("the batch finished before the kill")
        except tern.Error as e:
            print("peer killed: %s after %.1f s" % (e, time.monotonic() - t0))
        try:
            peer.write(reg, b"\0" * 10)
        except tern.Error as e:
            print("bad descriptor:", e)
        try:
            peer.write(reg, desc, 1)  # 64 MiB at offset 1: too small
        except tern.BoundsError as e:
            print("region too small:", e)
    try:
        reg.descriptor()
    except tern.ClosedError as e:
        print("use after close:", e)
    p.join()


if __name__ == "__main__":
    main(*sys.argv[1:])
