# SPDX-License-Identifier: MIT
"""Story 1: KV-cache handoff. A prefill process fills 64 pages of 16 KiB in
a torch tensor; the decode process pulls a scattered list of them with one
read_batch and checks every byte.

    PYTHONPATH=python python3 examples/python/kv_handoff.py [shm|tcp]
"""
import multiprocessing as mp
import sys
import time

import torch

import tern

PAGES, PAGE = 64, 16 * 1024


def node(prov):
    return "127.0.0.1" if prov == "tcp" else None


def pages():
    t = torch.arange(PAGES * PAGE) % 251
    return ((t + torch.arange(PAGES).repeat_interleave(PAGE) * 7) % 251).to(
        torch.uint8)


def prefill(prov, out, stop):
    with tern.Context(prov, node=node(prov)) as ctx:
        kv = pages()
        reg = ctx.register(kv)
        out.put((ctx.card, reg.descriptor()))  # both pickle
        while not stop.is_set():
            ctx.progress()  # tcp: the target side makes progress too
            time.sleep(0.0005)


def main(prov="shm"):
    m = mp.get_context("spawn")
    out, stop = m.Queue(), m.Event()
    p = m.Process(target=prefill, args=(prov, out, stop))
    p.start()
    card, desc = out.get(timeout=30)
    want = [3, 60, 17, 0, 42, 9, 33, 63]
    n = len(want)
    with tern.Context(prov, node=node(prov)) as ctx:
        dst = torch.zeros(n * PAGE, dtype=torch.uint8)
        reg = ctx.register(dst)
        peer = ctx.peer(card)
        req = peer.read_batch(reg, torch.arange(n) * PAGE, desc,
                              torch.tensor(want) * PAGE,
                              torch.full((n,), PAGE))
        print("read", req.result(timeout=20), "bytes")
        ref = pages()
        for i, pg in enumerate(want):
            assert torch.equal(dst[i * PAGE:(i + 1) * PAGE],
                               ref[pg * PAGE:(pg + 1) * PAGE])
    stop.set()
    p.join()
    print("kv handoff over %s: %d pages verified" % (prov, n))


if __name__ == "__main__":
    main(*sys.argv[1:])
