# SPDX-License-Identifier: MIT
"""All ranks to all ranks through a torch.distributed Store.

    w = tern.world.from_store(store, rank, size, ctx, regions=[region])
    w.peers[r]      # Peer of rank r (None for this rank)
    w.descs[r]      # rank r's descriptors: a list, one per region, in order
    w.descs[r][i]   # rank r's i-th region: what peer.write() takes
    w.publish("kv", region); w.fence(); w.lookup(r, "kv")

Any object with set(key, bytes) and a get(key) works: TCPStore,
FileStore, HashStore. The world is libtern's store world
(tern_world_open_store(), docs/world.md): the store is reached through
cffi callbacks, and membership, values, fences and peers are the C
world's, as for every other world.
"""
import errno as _errno
from typing import Dict, List, Optional, Sequence

from ._ffi import ffi, lib, new_attr, T as _T
from ._args import _int, _ms
from ._closes import _pending
from ._errors import ClosedError, Error, _check, _error
from ._peers import Peer
from ._regions import _DESC_MAX, _desc, _region

_EPROTO = 258  # TERN_EPROTO
_VALUE_MAX = 4096  # TERN_WORLD_VALUE_MAX
_DESCS = "descs"  # how many regions a rank passed, in decimal
# What compare_set() answers for a key not there: longer than any value
# (TERN_WORLD_VALUE_MAX) or card (TERN_CARD_MAX), so never one of them.
_ABSENT = b"\0" * (_VALUE_MAX + 1)


class _Store:
    """What the C store's callbacks reach through their arg: the Python
    store, and the first exception it raised (for the error the failed
    world call then raises)."""

    def __init__(self, store):
        self.store = store
        self.check = getattr(store, "check", None)
        self.cas = getattr(store, "compare_set", None)
        self.exc: Optional[BaseException] = None

    def failed(self, e: BaseException) -> int:
        if self.exc is None:
            self.exc = e
        return -_errno.EIO

    def error(self, ret: int, what: str) -> Error:
        e, self.exc = self.exc, None
        if e is None:
            return _error(ret, what)
        err = _error(ret, what, text="the store raised %s: %s"
                     % (type(e).__name__, e))
        err.__cause__ = e
        return err


def _on_set(arg, key, val, n) -> int:
    s = ffi.from_handle(arg)
    try:
        s.store.set(ffi.string(key).decode(),
                    bytes(ffi.buffer(ffi.cast(_T.char_p, val), n)))
        return 0
    except BaseException as e:  # the world call fails, then raises it
        return s.failed(e)


def _on_get(arg, key, buf, n, timeout_ms) -> int:
    """A key not there yet is -ENOENT: libtern asks again (running the
    ctx's progress between asks) until the world's timeout. A store is
    never blocked in where it can say "not there": check(keys) (torch 2),
    else compare_set(key, _ABSENT, _ABSENT), which returns the value, or
    _ABSENT itself (longer than any value tern writes) for a key not
    there, and sets nothing (torch 1.x). A store with neither is asked
    with get()."""
    s = ffi.from_handle(arg)
    try:
        k = ffi.string(key).decode()
        if s.check is not None:
            if not s.check([k]):
                return -_errno.ENOENT
            v = bytes(s.store.get(k))
        elif s.cas is not None:
            v = bytes(s.cas(k, _ABSENT, _ABSENT))
            if v == _ABSENT:
                return -_errno.ENOENT
        else:
            v = bytes(s.store.get(k))
        if v and n:
            ffi.memmove(buf, v, min(len(v), n))
        return len(v)
    except BaseException as e:
        return s.failed(e)


# Made once: a callback per call would be parsed under cffi's lock.
_SET = ffi.callback(_T.store_set, _on_set)
_GET = ffi.callback(_T.store_get, _on_get)


def _name(name) -> bytes:
    if not isinstance(name, str):
        raise TypeError("tern: a world name must be a str, not %s"
                        % type(name).__name__)
    return name.encode()


class World:
    """What from_store() returns: rank, size, peers (rank -> Peer, None
    for this rank), descs (rank -> list of packed descriptors, one per
    region that rank passed, in order), and the C world's values,
    descriptors, fences and peers."""

    def __init__(self, rank: int, size: int, peers: Dict, descs: Dict):
        self.rank = rank
        self.size = size
        self.peers: Dict[int, Optional[object]] = peers
        self.descs: Dict[int, List[bytes]] = descs
        self._w = None  # struct tern_world *, from from_store()
        self._ctx = None
        self._store: Optional[_Store] = None
        self._keep = None  # what C points at: the handle, the prefix

    def _h(self):
        if self._w is None:
            raise ClosedError("world")
        self._ctx._h()
        return self._w

    def _call(self, what: str, fn, *args) -> int:
        """fn(world, *args) under the ctx's lock: its return, or raise
        (with what the store raised, if it did)."""
        self._ctx._enter()
        with self._ctx._lock:
            ret = fn(self._h(), *args)
        if ret < 0:
            raise self._store.error(ret, what)
        return ret

    @property
    def kind(self) -> str:
        """"store": the C world this one runs on."""
        return ffi.string(lib.tern_world_kind(self._h())).decode()

    def put(self, name: str, value: bytes) -> None:
        """Publish up to 4096 bytes under name ([A-Za-z0-9_.-], at most
        63) for this rank; any rank reads them with get()."""
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError("tern: value must be bytes, not %s"
                            % type(value).__name__)
        value = bytes(value)
        self._call("world put %r" % name, lib.tern_world_put, _name(name),
                   value, len(value))

    def get(self, rank: int, name: str) -> bytes:
        """What rank published under name, waiting for it up to the
        world's timeout (tern.Timeout)."""
        rank = _int("rank", rank)
        buf = ffi.new(_T.char_a, _VALUE_MAX)
        n = self._call("world get %r of rank %d" % (name, rank),
                       lib.tern_world_get, rank, _name(name), buf,
                       _VALUE_MAX)
        return bytes(ffi.buffer(buf, n))

    def publish(self, name: str, region) -> None:
        """Publish a region's descriptor (a Region, or its packed bytes)
        under name."""
        d = _desc(region, "region")
        self._call("world publish %r" % name, lib.tern_world_publish,
                   _name(name), d)

    def lookup(self, rank: int, name: str) -> bytes:
        """The descriptor rank published under name, packed: what
        peer.write() takes. Waits as get() does."""
        rank = _int("rank", rank)
        d = ffi.new(_T.desc_p)
        self._call("world lookup %r of rank %d" % (name, rank),
                   lib.tern_world_lookup, rank, _name(name), d)
        buf = ffi.new(_T.char_a, _DESC_MAX)
        n = _check(lib.tern_mr_desc_pack(d, buf, _DESC_MAX), "descriptor")
        return bytes(ffi.buffer(buf, n))

    def fence(self) -> None:
        """Wait until every rank has called fence() as often as this one:
        what each published before is then visible to all. Runs the ctx's
        progress while it waits."""
        self._call("world fence", lib.tern_world_fence)

    def peer(self, rank: int) -> Peer:
        """Rank's Peer, added on first use; the same one afterwards. The
        world owns it: world.close() removes it."""
        rank = _int("rank", rank)
        p = self.peers.get(rank)
        if p is not None and p._p is not None:
            return p
        pp = ffi.new(_T.peer_pp)
        self._call("world peer %d" % rank, lib.tern_world_peer, rank, pp)
        p = Peer._of_world(self._ctx, pp[0])
        self.peers[rank] = p
        return p

    def _ndescs(self, rank: int) -> int:
        v = self.get(rank, _DESCS)
        if not v.isdigit() or int(v) > _VALUE_MAX:
            raise _error(-_EPROTO, "rank %d's %s" % (rank, _DESCS),
                         text="not a count of regions: %r" % v[:32])
        return int(v)

    def _close_dead(self) -> bool:
        """Close the C world (the ctx's lock held): its peers go."""
        w, self._w = self._w, None
        for p in self.peers.values():
            if p is not None and p._owned:
                p._p = None
                self._ctx._peers.discard(p)
        if w is not None and self._ctx._c is not None:
            lib.tern_world_close(w)
        self._ctx._worlds.discard(self)
        return True

    def close(self) -> None:
        """Close the world and every peer (the regions and the ctx stay
        the caller's). Twice, or after the ctx's close(), is a no-op."""
        if self._w is None:
            for p in self.peers.values():
                if p is not None:
                    p.close()
            return
        ctx = self._ctx
        ctx._enter_open()
        with ctx._lock:
            self._close_dead()

    def __del__(self):
        # Never a call into libtern here: queue it for the ctx.
        try:
            if self._w is not None:
                self._ctx._dead.append(self)
                _pending.append(self._ctx)
        except Exception:
            pass


def _open(store, rank: int, size: int, ctx, prefix: str,
          timeout: Optional[float]) -> World:
    """The C store world of this rank, its callbacks on @store."""
    if not isinstance(prefix, str):
        raise TypeError("tern: prefix must be a str, not %s"
                        % type(prefix).__name__)
    ms = 0 if timeout is None else max(1, _ms(timeout))
    ctx._enter()
    s = _Store(store)
    handle = ffi.new_handle(s)
    pfx = ffi.new(_T.char_a, prefix.encode())
    cs = ffi.new(_T.world_store_p)
    cs.set, cs.get, cs.arg, cs.prefix = _SET, _GET, handle, pfx
    attr = new_attr("world_attr_p")
    attr.rank, attr.size, attr.timeout_ms = rank, size, ms
    wp = ffi.new(_T.world_pp)
    with ctx._lock:
        ret = lib.tern_world_open_store(ctx._h(), cs, attr, wp)
    if ret < 0:
        raise s.error(ret, "world: rank %d of %d" % (rank, size))
    w = World(rank, size, {}, {})
    w._w, w._ctx, w._store, w._keep = wp[0], ctx, s, handle
    ctx._worlds.add(w)
    return w


def from_store(store, rank: int, size: int, ctx, regions: Sequence = (),
               prefix: str = "tern", timeout: Optional[float] = None
               ) -> World:
    """Publish this rank's card and descriptors, read every other rank's,
    and add each as a peer. descs[r][i] is rank r's i-th region. Keys go
    under prefix (one per world); timeout: how long to wait for a rank,
    in seconds (None: libtern's 60 s)."""
    rank, size = _int("rank", rank), _int("size", size)
    regions = [_region("regions[%d]" % i, r) for i, r in enumerate(regions)]
    w = _open(store, rank, size, ctx, prefix, timeout)
    try:
        mine = [r.descriptor() for r in regions]
        for i, r in enumerate(regions):
            w.publish("desc.%d" % i, r)
        w.put(_DESCS, b"%d" % len(regions))
        for r in range(size):
            if r == rank:
                w.peers[r], w.descs[r] = None, mine
                continue
            w.descs[r] = [w.lookup(r, "desc.%d" % i)
                          for i in range(w._ndescs(r))]
            w.peer(r)
    except BaseException:
        w.close()
        raise
    return w
