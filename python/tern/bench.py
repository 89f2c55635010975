# SPDX-License-Identifier: MIT
"""python -m tern.bench: what Python adds to tern.

1. One write_batch of N pieces (default 18,880 x 16 KiB, the descriptor
   count of one Llama-70B KV transfer) against the same batch handed to
   tern_write_pieces() directly (a prebuilt struct tern_piece array, the
   C call alone), in the same run, same ctxs. Reported: the call (Python:
   from the write_batch() call, arrays in, to its return with every piece
   queued; C: the tern_write_pieces() call) and the time to completion.
   The pieces cycle over 64 MiB regions: posting cost does not depend on
   the addresses.
2. Bandwidth of 1 MiB writes from Python (window 64, one 1 MiB region, as
   `tern bench` does) against `tern bench --sizes 1M`, same provider.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import time

import numpy as np

import tern
from tern._ffi import ffi, lib


def _drive(a, b, req):
    while not req.done():
        a.progress()
        b.progress()
    return req.result()


def batch(a, b, n, piece, reps):
    span = 64 << 20
    slots = span // piece
    src = np.zeros(span, np.uint8)
    dst = np.zeros(span, np.uint8)
    ra, rb = a.register(src), b.register(dst)
    peer = a.peer(b.card)
    b.peer(a.card)
    desc = rb.descriptor()
    idx = np.arange(n, dtype=np.int64)
    lo = (idx % slots) * piece
    ro = ((idx * 7) % slots) * piece
    ln = np.full(n, piece, np.int64)
    pieces = np.zeros(n, dtype=[("loff", "<u8"), ("roff", "<u8"),
                                ("len", "<u8"), ("region", "<u4"),
                                ("pad", "<u4")])
    pieces["loff"], pieces["roff"], pieces["len"] = lo, ro, ln
    cp = ffi.cast("struct tern_piece *", ffi.from_buffer(pieces))
    cdesc = rb._desc
    py_call, py_done, c_call, c_done = [], [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        req = peer.write_batch(ra, lo, desc, ro, ln)
        t1 = time.perf_counter()
        _drive(a, b, req)
        t2 = time.perf_counter()
        py_call.append(t1 - t0)
        py_done.append(t2 - t0)

        creq = ffi.new("struct tern_req *")
        lib.tern_req_init(creq, ffi.NULL, ffi.NULL)
        t0 = time.perf_counter()
        ret = lib.tern_write_pieces(peer._h(), ra._h(), cp, n, cdesc, 1, 0,
                                    0, creq)
        t1 = time.perf_counter()
        assert ret == 0, ret
        while not creq.done:
            lib.tern_progress(a._h())
            lib.tern_progress(b._h())
        t2 = time.perf_counter()
        assert creq.status == 0, creq.status
        c_call.append(t1 - t0)
        c_done.append(t2 - t0)
    med = statistics.median
    return {"pieces": n, "piece": piece, "reps": reps,
            "py_call_ms": med(py_call) * 1e3,
            "c_call_ms": med(c_call) * 1e3,
            "py_done_ms": med(py_done) * 1e3,
            "c_done_ms": med(c_done) * 1e3}


def bandwidth(a, b, size, iters, window):
    src = np.zeros(size, np.uint8)
    dst = np.zeros(size, np.uint8)
    ra, rb = a.register(src), b.register(dst)
    peer = a.peer(b.card)
    desc = rb.descriptor()
    inflight = []
    posted = 0
    t0 = time.perf_counter()
    while posted < iters or inflight:
        while posted < iters and len(inflight) < window:
            inflight.append(peer.write(ra, desc))
            posted += 1
        a.progress()
        b.progress()
        inflight = [r for r in inflight if not r.done()]
    dt = time.perf_counter() - t0
    return size * iters / dt / 1e9


def c_bench(provider, node, size, iters):
    exe = os.environ.get("TERN_BIN") or shutil.which("tern")
    if exe is None:
        here = os.path.dirname(os.path.abspath(__file__))
        cand = os.path.join(here, "..", "..", "build", "tern")
        exe = cand if os.path.exists(cand) else None
    if exe is None:
        return None
    cmd = [exe, "bench", "-p", provider, "--sizes", str(size), "-n",
           str(iters), "-j"]
    if node:
        cmd += ["--node", node]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode:
        return None
    return json.loads(out.stdout)["results"][0]["gBps"]


def main():
    ap = argparse.ArgumentParser(prog="python -m tern.bench")
    ap.add_argument("-p", "--provider", default="shm")
    ap.add_argument("--node", default=None)
    ap.add_argument("--pieces", type=int, default=18880)
    ap.add_argument("--piece-size", type=int, default=16 << 10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000)
    args = ap.parse_args()
    if args.provider.startswith("tcp") and not args.node:
        args.node = "127.0.0.1"
    with tern.Context(args.provider, node=args.node) as a, \
            tern.Context(args.provider, node=args.node) as b:
        r = batch(a, b, args.pieces, args.piece_size, args.reps)
        print("provider %s: write_batch of %d x %d B (median of %d)" %
              (a.provider, r["pieces"], r["piece"], r["reps"]))
        print("  call:       python %.3f ms   C tern_write_pieces %.3f ms"
              "   (+%.0f%%)" % (r["py_call_ms"], r["c_call_ms"],
                                (r["py_call_ms"] / r["c_call_ms"] - 1) * 100))
        print("  completion: python %.3f ms   C %.3f ms" %
              (r["py_done_ms"], r["c_done_ms"]))
    with tern.Context(args.provider, node=args.node) as a, \
            tern.Context(args.provider, node=args.node) as b:
        gbs = bandwidth(a, b, 1 << 20, args.iters, 64)
    cg = c_bench(args.provider, args.node, 1 << 20, args.iters)
    print("1 MiB writes: python %.2f GB/s   tern bench %s" %
          (gbs, "%.2f GB/s" % cg if cg else "(tern binary not found)"))


if __name__ == "__main__":
    main()
