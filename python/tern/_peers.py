# SPDX-License-Identifier: MIT
"""Peer: a remote ctx, and every operation posted to it (writes, reads,
atomics, sends, batches)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ._ffi import ffi, lib, T as _T
from ._args import _imm, _u64, _word
from ._closes import _pending
from ._errors import ClosedError, _check, _error
from ._pieces import _batch, _u64p
from ._regions import Region, _desc, _local, _region
from ._requests import Request

_PIECES_IMM = 1

if TYPE_CHECKING:  # annotations only: _ctx imports this module
    from ._ctx import Context


class Peer:
    """A remote ctx, made by ctx.peer(card) (or by a world: World.peer())."""

    _owned = False  # a world's peer: the world removes it

    def __init__(self, ctx: "Context", card: bytes):
        if not isinstance(card, (bytes, bytearray, memoryview)):
            raise TypeError("tern: card must be bytes (ctx.card of the "
                            "other side), not %s" % type(card).__name__)
        card = bytes(card)
        p = ffi.new(_T.peer_pp)
        with ctx._lock:
            _check(lib.tern_peer_add(ctx._h(), card, len(card), p), "peer")
            self._p = p[0]
        self._ctx = ctx

    @classmethod
    def _of_world(cls, ctx: "Context", handle) -> "Peer":
        """The peer tern_world_peer() added: the world owns the handle and
        removes it when the world closes, so closing this only forgets
        it."""
        p = cls.__new__(cls)
        p._p = handle
        p._ctx = ctx
        p._owned = True
        return p

    def _h(self):
        if self._p is None:
            raise ClosedError("peer")
        self._ctx._h()
        return self._p

    @property
    def path(self) -> str:
        """"local" (same host: copies by the CPU, docs/local.md) or
        "fabric" (through the provider)."""
        return "local" if lib.tern_peer_path(self._h()) == 1 else "fabric"

    @property
    def rails(self) -> list:
        """Each rail's path to this peer (tern_peer_rails(), docs/api.md,
        "When a rail fails"): a dict per rail with "up" (bool),
        "down_ms" (how long down, 0 when up), "cooldown_ms", "downs",
        "rerouted" (operations and parts moved off it) and "probes"
        (tries while down)."""
        st = ffi.new(_T.peer_rail_a, 32)
        n = lib.tern_peer_rails(self._h(), st, 32)
        _check(n, "tern_peer_rails")
        return [{"up": bool(st[i].up), "down_ms": st[i].down_ms,
                 "cooldown_ms": st[i].cooldown_ms, "downs": st[i].downs,
                 "rerouted": st[i].rerouted, "probes": st[i].probes}
                for i in range(min(n, 32))]

    def close(self) -> None:
        """Remove the peer: its queued operations and expectations
        complete tern.Cancelled. Twice, or after the ctx's close(), is a
        no-op. A world's peer is only forgotten here: its world removes
        it when it closes."""
        ctx = self._ctx
        if self._p is None:
            return
        ctx._enter_open()
        with ctx._lock:
            self._close_dead()

    def _close_dead(self) -> bool:
        if self._p is not None and self._ctx._c is not None and \
                not self._owned:
            lib.tern_peer_remove(self._p)
        self._p = None
        self._ctx._peers.discard(self)
        return True

    def __del__(self):
        try:
            if self._p is not None and not self._owned:
                self._ctx._dead.append(self)
                _pending.append(self._ctx)
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def write(self, region: Region, remote, remote_offset: int = 0,
              offset: int = 0, length: Optional[int] = None,
              imm: Optional[int] = None) -> Request:
        """One-sided write of region[offset:offset+length] to the remote
        descriptor at remote_offset; with imm, the target counts it."""
        region, offset, n = _local(region, offset, length)
        roff = _u64("remote_offset", remote_offset)
        if imm is not None:
            imm = _imm(imm)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        what = "write" if imm is None else "write_imm(imm=%d)" % imm
        r = Request(ctx, what, (self, region, d))
        with ctx._lock:
            p, mr = self._h(), region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            if imm is None:
                ret = lib.tern_write(p, mr, buf, n, d, roff, r._req)
            else:
                ret = lib.tern_write_imm(p, mr, buf, n, d, roff, imm,
                                         r._req)
            return r._posted(ret)

    def write_imm(self, region: Region, remote, imm: int,
                  remote_offset: int = 0, offset: int = 0,
                  length: Optional[int] = None) -> Request:
        """write() with immediate imm (required): the target's
        ctx.expect(imm, n) counts it."""
        return self.write(region, remote, remote_offset, offset, length,
                          _imm(imm))

    def read(self, region: Region, remote, remote_offset: int = 0,
             offset: int = 0, length: Optional[int] = None) -> Request:
        """One-sided read from the remote descriptor at remote_offset
        into region[offset:offset+length] (the remote region needs
        REMOTE_READ)."""
        region, offset, n = _local(region, offset, length)
        roff = _u64("remote_offset", remote_offset)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        r = Request(ctx, "read", (self, region, d))
        with ctx._lock:
            p, mr = self._h(), region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            return r._posted(lib.tern_read(p, mr, buf, n, d, roff, r._req))

    def write_nbi(self, region: Region, remote, remote_offset: int = 0,
                  offset: int = 0, length: Optional[int] = None,
                  imm: Optional[int] = None) -> None:
        """write() without a request of its own (tern_write_nbi): checked
        as write() is (errors raise here), then counted; ctx.quiet()
        completes it with every other. The region's bytes must not
        change until that quiet is done. Returns None."""
        region, offset, n = _local(region, offset, length)
        roff = _u64("remote_offset", remote_offset)
        if imm is not None:
            imm = _imm(imm)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        with ctx._lock:
            p, mr = self._h(), region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            if imm is None:
                ret = lib.tern_write_nbi(p, mr, buf, n, d, roff)
            else:
                ret = lib.tern_write_imm_nbi(p, mr, buf, n, d, roff, imm)
        if ret < 0:
            raise _error(ret, "write_nbi" if imm is None
                         else "write_imm_nbi(imm=%d)" % imm)

    def read_nbi(self, region: Region, remote, remote_offset: int = 0,
                 offset: int = 0, length: Optional[int] = None) -> None:
        """read() without a request of its own (tern_read_nbi): the bytes
        are in region[offset:offset+length] once a ctx.quiet() that covers
        it is done without error. Returns None."""
        region, offset, n = _local(region, offset, length)
        roff = _u64("remote_offset", remote_offset)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        with ctx._lock:
            p, mr = self._h(), region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            ret = lib.tern_read_nbi(p, mr, buf, n, d, roff)
        if ret < 0:
            raise _error(ret, "read_nbi")

    def add_nbi(self, remote, remote_offset: int, add: int) -> None:
        """Atomic 64-bit add without fetching the old word, and without a
        request of its own (tern_atomic_add_nbi). Returns None."""
        roff = _u64("remote_offset", remote_offset)
        add = _word("add", add)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        with ctx._lock:
            ret = lib.tern_atomic_add_nbi(self._h(), d, roff, add)
        if ret < 0:
            raise _error(ret, "add_nbi")

    def send(self, region: Region, offset: int = 0,
             length: Optional[int] = None,
             imm: Optional[int] = None) -> Request:
        """Two-sided send of region[offset:offset+length] (with imm, the
        receive's request.imm carries it); the peer's ctx.recv() takes
        it."""
        region, offset, n = _local(region, offset, length)
        if imm is not None:
            imm = _imm(imm)
        ctx = self._ctx
        ctx._enter()
        r = Request(ctx, "send", (self, region))
        with ctx._lock:
            p, mr = self._h(), region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            if imm is None:
                ret = lib.tern_send(p, mr, buf, n, r._req)
            else:
                ret = lib.tern_send_imm(p, mr, buf, n, imm, r._req)
            return r._posted(ret)

    def fetch_add(self, remote, remote_offset: int, add: int) -> Request:
        """Atomic 64-bit fetch-and-add on the remote word at
        remote_offset (8-byte aligned, region with REMOTE_ATOMIC);
        request.value is the old word."""
        roff = _u64("remote_offset", remote_offset)
        add = _word("add", add)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        r = Request(ctx, "fetch_add", (self, d))
        with ctx._lock:
            return r._posted(lib.tern_atomic_fetch_add(
                self._h(), d, roff, add, r._req))

    def cswap(self, remote, remote_offset: int, compare: int,
              swap: int) -> Request:
        """Atomic 64-bit compare-and-swap: the remote word becomes swap
        if it equals compare; request.value is the old word."""
        roff = _u64("remote_offset", remote_offset)
        compare, swap = _word("compare", compare), _word("swap", swap)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        r = Request(ctx, "cswap", (self, d))
        with ctx._lock:
            return r._posted(lib.tern_atomic_cswap(
                self._h(), d, roff, compare, swap, r._req))

    def write_batch(self, region: Region, local_offsets, remote,
                    remote_offsets=None, lengths=None,
                    imm: Optional[int] = None) -> Request:
        """Write many pieces in ONE C call (tern_write_pieces_arrays):
        piece i copies lengths[i] bytes at local_offsets[i] of region to
        remote_offsets[i] of the remote descriptor. Offsets and lengths
        are integer numpy arrays or torch tensors (int64 ones are handed
        to C as they are, no copy), or sequences of ints; or pass a table
        from tern.pieces() as local_offsets (and no remote_offsets,
        lengths). With imm, every piece is a write with immediate (the
        target counts len(lengths)). One request completes when all
        pieces have, with the first error."""
        region = _region("region", region)
        t, a = _batch(local_offsets, remote_offsets, lengths)
        if imm is not None:
            imm = _imm(imm)
        d = _desc(remote)
        flags = _PIECES_IMM if imm is not None else 0
        ctx = self._ctx
        ctx._enter()
        if a is None:
            r = Request(ctx, "write_batch", (self, region, d, t))
            with ctx._lock:
                return r._posted(lib.tern_write_pieces(
                    self._h(), region._h(), ffi.from_buffer(_T.piece_a, t),
                    len(t), d, 1, flags, imm or 0, r._req))
        lo, ro, ln, n = a
        r = Request(ctx, "write_batch", (self, region, d, lo, ro, ln))
        with ctx._lock:
            return r._posted(lib.tern_write_pieces_arrays(
                self._h(), region._h(), _u64p(lo), _u64p(ro), _u64p(ln), n,
                d, flags, imm or 0, r._req))

    def read_batch(self, region: Region, local_offsets, remote,
                   remote_offsets=None, lengths=None) -> Request:
        """Read many pieces in ONE C call (tern_read_pieces_arrays): piece i
        copies lengths[i] bytes at remote_offsets[i] of the remote
        descriptor to local_offsets[i] of region. Arrays as for
        write_batch() (or one tern.pieces() table). Reads carry no
        immediate. One request completes when all pieces have."""
        region = _region("region", region)
        t, a = _batch(local_offsets, remote_offsets, lengths)
        d = _desc(remote)
        ctx = self._ctx
        ctx._enter()
        if a is None:
            r = Request(ctx, "read_batch", (self, region, d, t))
            with ctx._lock:
                return r._posted(lib.tern_read_pieces(
                    self._h(), region._h(), ffi.from_buffer(_T.piece_a, t),
                    len(t), d, 1, r._req))
        lo, ro, ln, n = a
        r = Request(ctx, "read_batch", (self, region, d, lo, ro, ln))
        with ctx._lock:
            return r._posted(lib.tern_read_pieces_arrays(
                self._h(), region._h(), _u64p(lo), _u64p(ro), _u64p(ln), n,
                d, r._req))
