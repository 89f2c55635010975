# SPDX-License-Identifier: MIT
"""python -m tern.bench: what Python adds to tern.

1. Batches of N pieces (default 18,880 x 16 KiB, the descriptor count of
   one Llama-70B KV transfer), three ways in the same run, same ctxs, in
   rounds whose order alternates (C first, then Python first). Each round
   posts two batches back to back and times: the first call (cold: the
   previous round's 309 MB just went through the caches), the second call
   (warm), each from the call to its return with every piece checked and
   queued (posting then runs in progress, the same C code for all three),
   and both batches' completion:
   - C table: tern_write_pieces() on a prebuilt struct tern_piece array
     (the call through cffi, about a microsecond of which is cffi's);
   - C arrays: tern_write_pieces_arrays() on the three int64 arrays;
   - py arrays: peer.write_batch(region, lo, desc, ro, lengths) with the
     same int64 numpy arrays (which call tern_write_pieces_arrays());
   - py table: peer.write_batch(region, table, desc) with a prebuilt
     tern.pieces() table (which calls tern_write_pieces()).
   Reported: medians over the rounds with 10th-90th percentiles, and the
   ratio of each round's Python time to the same round's time of the C
   call it makes (median, 10th-90th percentile); py arrays also against C
   table. The pieces cycle over 64 MiB regions: posting
   cost does not depend on the addresses.
2. Bandwidth of 1 MiB writes from Python against `tern bench --sizes 1M`,
   same provider, same shape: the target in another process, window 64,
   the same timed writes and warm-up (iters/10, >= 16), rounds alternating.
"""
import argparse
import json
import multiprocessing as mp
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


def _pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def batch(a, b, n, piece, rounds):
    span = 64 << 20
    slots = span // piece
    src = np.zeros(span, np.uint8)
    dst = np.zeros(span, np.uint8)
    ra, rb = a.register(src), b.register(dst)
    peer = a.peer(b.card)
    keep = b.peer(a.card)  # dropping a Peer removes it
    desc = rb.descriptor()
    idx = np.arange(n, dtype=np.int64)
    lo = (idx % slots) * piece
    ro = ((idx * 7) % slots) * piece
    ln = np.full(n, piece, np.int64)
    ctab = tern.pieces(lo, ro, ln).copy()
    cp = ffi.from_buffer("struct tern_piece[]", ctab)
    cdesc = rb._desc
    pmr, amr = peer._h(), ra._h()
    creqs = [ffi.new("struct tern_req *"), ffi.new("struct tern_req *")]
    table = tern.pieces(lo, ro, ln)
    ah, bh = a._h(), b._h()

    def c_post(k):
        lib.tern_req_init(creqs[k], ffi.NULL, ffi.NULL)
        ret = lib.tern_write_pieces(pmr, amr, cp, n, cdesc, 1, 0, 0,
                                    creqs[k])
        assert ret == 0, ret
        return creqs[k]

    lo_p, ro_p, ln_p = (ffi.from_buffer("uint64_t[]", x)
                        for x in (lo, ro, ln))

    def c_arrays(k):
        lib.tern_req_init(creqs[k], ffi.NULL, ffi.NULL)
        ret = lib.tern_write_pieces_arrays(pmr, amr, lo_p, ro_p, ln_p, n,
                                           cdesc, 0, 0, creqs[k])
        assert ret == 0, ret
        return creqs[k]

    def py_arrays(k):
        return peer.write_batch(ra, lo, desc, ro, ln)._req

    def py_table(k):
        return peer.write_batch(ra, table, desc)._req

    variants = {"c": c_post, "c_arrays": c_arrays, "arrays": py_arrays,
                "table": py_table}
    t = {}
    for k in variants:
        t[k + "_cold"], t[k + "_warm"], t[k + "_done"] = [], [], []

    def one(k):
        """Two batches back to back: the first call comes cold, after the
        last round's 309 MB went through the caches; the second warm."""
        post = variants[k]
        t0 = time.perf_counter()
        r0 = post(0)
        t1 = time.perf_counter()
        r1 = post(1)
        t2 = time.perf_counter()
        while not (r0.done and r1.done):
            lib.tern_progress(ah)
            lib.tern_progress(bh)
        t3 = time.perf_counter()
        assert r0.status == 0 and r1.status == 0, (r0.status, r1.status)
        a.progress()  # Python's requests finish (their tables go back)
        t[k + "_cold"].append(t1 - t0)
        t[k + "_warm"].append(t2 - t1)
        t[k + "_done"].append(t3 - t0)

    for k in variants:  # warm-up
        one(k)
    for v in t.values():
        v.clear()
    for i in range(rounds):
        for k in (("c", "c_arrays", "arrays", "table") if i % 2 == 0
                  else ("arrays", "table", "c_arrays", "c")):
            one(k)
    med = statistics.median
    out = {"pieces": n, "piece": piece, "rounds": rounds}
    for k, v in t.items():
        out[k] = (med(v) * 1e3, _pct(v, 0.1) * 1e3, _pct(v, 0.9) * 1e3)
    for k, c in RATIOS:
        for m in ("cold", "warm", "done"):
            r = [p / q for p, q in zip(t[k + "_" + m], t[c + "_" + m])]
            out[k + "/" + c + "_" + m] = (med(r), _pct(r, 0.1),
                                          _pct(r, 0.9))
    return out


# Each Python call against the C call it makes, and arrays against table.
RATIOS = (("arrays", "c_arrays"), ("table", "c"), ("arrays", "c"))


def _target(provider, node, size, q_out, q_in):
    """The writes' target, in its own process as tern bench's local peer:
    one region, progress until told to stop."""
    with tern.Context(provider, node=node) as ctx:
        buf = np.zeros(size, np.uint8)
        reg = ctx.register(buf)
        q_out.put((ctx.card, reg.descriptor()))
        card = q_in.get()
        keep = ctx.peer(card)  # dropping a Peer removes it
        h = ctx._h()
        while q_in.empty():
            for _ in range(1000):
                lib.tern_progress(h)


def bandwidth(provider, node, size, iters, window, rounds):
    """GB/s (10^9) of each round's timed writes."""
    sp = mp.get_context("spawn")
    q_out, q_in = sp.Queue(), sp.Queue()
    p = sp.Process(target=_target, args=(provider, node, size, q_out, q_in))
    p.start()
    res = []
    try:
        card, desc = q_out.get(timeout=60)
        with tern.Context(provider, node=node) as a:
            src = np.zeros(size, np.uint8)
            ra = a.register(src)
            peer = a.peer(card)
            q_in.put(a.card)
            warm = max(iters // 10, 16)
            for _ in range(rounds):
                res.append(size * iters / _writes(a, peer, ra, desc, warm,
                                                  iters, window) / 1e9)
            q_in.put("stop")
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
    return res


def _writes(a, peer, ra, desc, warm, iters, window):
    """Seconds for @iters writes after @warm untimed ones, @window out."""
    d = tern._desc(desc)

    def run(count):
        inflight = []
        posted = 0
        while posted < count or inflight:
            while posted < count and len(inflight) < window:
                inflight.append(peer.write(ra, d))
                posted += 1
            a.progress()
            inflight = [r for r in inflight if not r.done()]

    run(warm)
    t0 = time.perf_counter()
    run(iters)
    return time.perf_counter() - t0


def c_bench(provider, node, size, iters, window):
    exe = os.environ.get("TERN_BIN") or shutil.which("tern")
    if exe is None:
        here = os.path.dirname(os.path.abspath(__file__))
        cand = os.path.join(here, "..", "..", "build", "tern")
        exe = cand if os.path.exists(cand) else None
    if exe is None:
        return None
    cmd = [exe, "bench", "-p", provider, "--sizes", str(size), "-n",
           str(iters), "-w", str(window), "-j"]
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
    ap.add_argument("--rounds", type=int, default=41,
                    help="batch rounds (C and Python alternating)")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--bw-rounds", type=int, default=3)
    args = ap.parse_args()
    if args.provider.startswith("tcp") and not args.node:
        args.node = "127.0.0.1"
    with tern.Context(args.provider, node=args.node) as a, \
            tern.Context(args.provider, node=args.node) as b:
        r = batch(a, b, args.pieces, args.piece_size, args.rounds)
        print("provider %s: batches of %d x %d B, %d rounds alternating; "
              "ms median [p10, p90]; py/C: per-round ratio median "
              "[p10, p90]" % (a.provider, r["pieces"], r["piece"],
                              r["rounds"]))
        for m, what in (("cold", "call, first of two (cold)"),
                        ("warm", "call, second of two (warm)"),
                        ("done", "both batches completed")):
            print("  %s:" % what)
            for k, name in (("c", "C tern_write_pieces"),
                            ("c_arrays", "C tern_write_pieces_arrays"),
                            ("arrays", "py write_batch(arrays)"),
                            ("table", "py write_batch(table)")):
                v = r[k + "_" + m]
                print("    %-27s %8.4f [%.4f, %.4f]" % ((name,) + v))
            for k, c in RATIOS:
                q = r[k + "/" + c + "_" + m]
                print("    ratio %-6s / %-8s %.3f [%.3f, %.3f] (%+.1f%%)" %
                      ((k, c) + q + ((q[0] - 1) * 100,)))
    py, cg = [], []
    for _ in range(args.bw_rounds):  # alternating, same provider
        py += bandwidth(args.provider, args.node, 1 << 20, args.iters, 64, 1)
        g = c_bench(args.provider, args.node, 1 << 20, args.iters, 64)
        if g is not None:
            cg.append(g)
    med = statistics.median
    print("1 MiB writes, window 64, %d timed (target in another process), "
          "%d rounds: python %.2f GB/s %s   tern bench %s" %
          (args.iters, args.bw_rounds, med(py),
           [round(x, 2) for x in py],
           ("%.2f GB/s %s" % (med(cg), [round(x, 2) for x in cg]))
           if cg else "(tern binary not found)"))


if __name__ == "__main__":
    main()
