# SPDX-License-Identifier: MIT
"""tern.world on libtern's store world: the C world's values, descriptors,
fences and peers from Python, its keys in the store, a store that raises
or never answers, bad input, and closing in either order."""
import os
import sys
import threading
import time
from datetime import timedelta

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tern  # noqa: E402
import tern.world  # noqa: E402
from workers import all_to_all_landed  # noqa: E402


def hash_store():
    try:
        import torch.distributed as dist
    except ImportError as e:  # required: never a skip
        pytest.fail("tern.world's tests need python3-torch: %s" % e)
    return dist.HashStore()


class DictStore:
    """The least a store needs: set and a blocking get (no check())."""

    def __init__(self):
        self.d = {}
        self.cond = threading.Condition()

    def set(self, key, value):
        with self.cond:
            self.d[key] = bytes(value)
            self.cond.notify_all()

    def get(self, key):
        with self.cond:
            assert self.cond.wait_for(lambda: key in self.d, 30), key
            return self.d[key]


def close_all(worlds, ctxs):
    for w in worlds:
        if w is not None:
            w.close()
    for c in ctxs:
        c.close()


def in_threads(size, fn):
    """fn(rank) in size threads; the exceptions they raised."""
    errs = []

    def run(r):
        try:
            fn(r)
        except BaseException as e:  # reported by the caller
            errs.append((r, e))

    ts = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return errs


def test_world_calls_between_ranks():
    """3 ranks (threads, a ctx each): put/get, publish/lookup, fence,
    peer; the lookup is what descs holds, the peer is peers[r], and a
    write through them lands."""
    size = 3
    store = hash_store()
    ctxs = [tern.Context("shm") for _ in range(size)]
    bufs = [np.zeros(size * 8, np.uint8) for _ in range(size)]
    regs = [ctxs[r].register(bufs[r]) for r in range(size)]
    worlds = [None] * size

    def rank(r):
        w = tern.world.from_store(store, r, size, ctxs[r], [regs[r]],
                                  prefix="calls", timeout=30)
        worlds[r] = w
        assert w.kind == "store"
        w.put("hello", b"rank %d" % r)
        w.publish("kv", regs[r])
        w.fence()
        for o in range(size):
            if o == r:
                continue
            assert w.get(o, "hello") == b"rank %d" % o
            assert w.lookup(o, "kv") == w.descs[o][0]
            assert w.peer(o) is w.peers[o]
        w.fence()

    errs = in_threads(size, rank)
    assert not errs, errs
    try:
        # the keys docs/world.md names (wait raises if one is missing)
        store.wait(["calls/0/card", "calls/2/desc.0", "calls/1/descs",
                    "calls/fence/2/1"], timedelta(seconds=5))
        for r in range(size):
            src = ctxs[r].register(np.full(8, r + 1, np.uint8))
            for o in range(size):
                if o != r:
                    worlds[r].peer(o).write(
                        src, worlds[r].lookup(o, "kv"), r * 8)
        all_to_all_landed(ctxs, bufs)
    finally:
        close_all(worlds, ctxs)


def test_world_store_without_check():
    """A store with only set and get: two ranks meet through it."""
    store = DictStore()
    ctxs = [tern.Context("shm") for _ in range(2)]
    worlds = [None, None]

    def rank(r):
        worlds[r] = tern.world.from_store(store, r, 2, ctxs[r],
                                          timeout=30)

    try:
        errs = in_threads(2, rank)
        assert not errs, errs
        assert worlds[1].peers[0] is not None and worlds[1].descs[0] == []
    finally:
        close_all(worlds, ctxs)


def test_world_store_raises():
    """A store whose set raises: a tern.Error that names the store's
    exception, with it as the cause; nothing left open."""
    class Down:
        def set(self, key, value):
            raise RuntimeError("store is down")

        def get(self, key):
            raise AssertionError("not reached")

    with tern.Context("shm") as c:
        with pytest.raises(tern.Error) as e:
            tern.world.from_store(Down(), 0, 1, c)
        assert "store is down" in str(e.value)
        assert isinstance(e.value.__cause__, RuntimeError)
        assert not c._worlds


def test_world_rank_never_comes():
    """Rank 1 never comes: tern.Timeout after the timeout, not before,
    not much after."""
    with tern.Context("shm") as c:
        t0 = time.monotonic()
        with pytest.raises(tern.Timeout):
            tern.world.from_store(hash_store(), 0, 2, c, timeout=0.3)
        dt = time.monotonic() - t0
        assert 0.25 <= dt < 5, dt


def test_world_bad_input():
    store = hash_store()
    with tern.Context("shm") as c:
        with pytest.raises(tern.Error):
            tern.world.from_store(store, 1, 1, c)  # rank 1 of 1
        with pytest.raises(TypeError):
            tern.world.from_store(store, 0, 1, c, prefix=5)
        with pytest.raises(TypeError):
            tern.world.from_store(store, 0, 1, c, regions=[b"x"])
        w = tern.world.from_store(store, 0, 1, c, prefix="bad")
        try:
            for name in ("", "a/b", "x" * 64, "card"):
                with pytest.raises(tern.Error):
                    w.put(name, b"x")
            with pytest.raises(TypeError):
                w.put(5, b"x")
            with pytest.raises(TypeError):
                w.put("s", "a str")
            with pytest.raises(tern.Error):
                w.put("big", b"x" * 4097)
            w.put("max", b"x" * 4096)
            assert w.get(0, "max") == b"x" * 4096
            with pytest.raises(tern.Error):
                w.get(3, "max")  # rank 3 of 1
            with pytest.raises(tern.Error):
                w.peer(0)  # its own rank
            store.set("bad/0/junk", b"not a descriptor")
            with pytest.raises(tern.Error):
                w.lookup(0, "junk")
            w.fence()
        finally:
            w.close()


def test_world_close_orders():
    """ctx.close() with the world still open closes it first; the world's
    peers are closed with it; w.close() afterwards does nothing."""
    store = hash_store()
    ctxs = [tern.Context("shm") for _ in range(2)]
    worlds = [None, None]

    def rank(r):
        worlds[r] = tern.world.from_store(store, r, 2, ctxs[r], timeout=30)

    errs = in_threads(2, rank)
    assert not errs, errs
    p = worlds[0].peers[1]
    ctxs[0].close()
    with pytest.raises(tern.ClosedError):
        p.path
    with pytest.raises(tern.ClosedError):
        worlds[0].fence()
    worlds[0].close()
    worlds[1].peers[0].close()  # a world's peer: forgotten, not removed
    with pytest.raises(tern.ClosedError):
        worlds[1].peers[0].path
    worlds[1].close()
    worlds[1].close()
    ctxs[1].close()
