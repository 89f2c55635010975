# SPDX-License-Identifier: MIT
"""Context: a tern ctx, what it makes (regions, peers, receives,
expectations, quiets), its progress and waits, and its close."""
from __future__ import annotations

import collections
import errno as _errno
import os
import select
import threading
import time
import weakref
from typing import Any, Optional

from ._ffi import ffi, lib, new_attr, T as _T
from ._args import _imm, _int, _ms
from ._closes import _dead_ctxs, _drain, _pending
from ._errors import ClosedError, Timeout, _EABORTED, _EPEERGONE, _check, \
    _error
from ._peers import Peer
from ._regions import ALL, Region, _local
from ._requests import Request

def _expect_text(imm: int, count: int, peer: Optional[Peer],
                 timeout: Optional[float]):
    src = "from any peer" if peer is None else "from its peer"

    def text(st: int, arrived: int) -> Optional[str]:
        got = "%d of %d writes with imm %d had arrived" % (arrived, count,
                                                            imm)
        if st == -_errno.ETIMEDOUT:
            return "deadline of %g s passed (%s)" % (timeout, got)
        if st == -_EABORTED:
            return ("a sender (%s) aborted: its write with imm %d failed "
                    "or was cancelled (%s)" % (
                        "any peer" if peer is None else "the peer", imm,
                        got))
        if st == -_EPEERGONE:
            return "the peer went away (%s)" % got
        if st == -_errno.ECANCELED:
            return "cancelled (%s)" % got
        return None
    return src, text


# ---- the context -------------------------------------------------------

class Context:
    """A tern ctx: Context(provider=None, rails=0, node=None, ...).

    A context manager; close() removes peers, closes regions and the ctx,
    and completes every request still in flight. Its methods may be
    called from several threads (a lock per ctx serialises calls into
    libtern; waiters sleep without it)."""

    def __init__(self, provider: Optional[str] = None, rails: int = 0,
                 node: Optional[str] = None, domain: Optional[str] = None,
                 domains: Optional[str] = None, flags: int = 0,
                 fabric: Optional[str] = None):
        self._c = None
        self._lock = threading.RLock()
        _drain()
        attr = new_attr("ctx_attr_p")
        keep = []
        # fabric: libfabric's fabric name; on efa "efa-direct" (the
        # default where offered) or "efa" (atomics, large messages).
        for k, v in (("provider", provider), ("node", node),
                     ("domain", domain), ("domains", domains),
                     ("fabric", fabric)):
            if v is not None:
                if not isinstance(v, str):
                    raise TypeError("tern: %s must be a str, not %s"
                                    % (k, type(v).__name__))
                s = ffi.new(_T.char_a, v.encode())
                keep.append(s)
                setattr(attr, k, s)
        attr.rails = _int("rails", rails)
        attr.flags = _int("flags", flags)
        self._inflight: set = set()
        self._regions: "weakref.WeakSet[Region]" = weakref.WeakSet()
        self._peers: "weakref.WeakSet[Peer]" = weakref.WeakSet()
        self._dead: collections.deque = collections.deque()
        self._busy: list = []  # dropped regions still in use
        self._aio = None
        self._boot: set = set()
        self._worlds: "weakref.WeakSet" = weakref.WeakSet()
        self._waiters = 0
        self._wake = None
        p = ffi.new(_T.ctx_pp)
        _check(lib.tern_ctx_open(attr, p), "open")
        self._c = p[0]
        try:
            info = ffi.new(_T.ctx_info_p)
            _check(lib.tern_ctx_query(self._c, info), "query")
            self.provider = ffi.string(info.provider).decode()
            self.fabric = ffi.string(info.fabric).decode()
            self.rails = info.rails
            self.has_wait_fd = bool(info.wait_fd)
            self.atomics = bool(info.atomic_fadd)
            self._fd = lib.tern_ctx_fd(self._c)
            self._wake = os.pipe()
            for fd in self._wake:
                os.set_blocking(fd, False)
        except BaseException:
            self.close()
            raise

    # Entry points. _h() is the handle or ClosedError; _enter() also
    # closes what finalizers queued (a safe place: not a finalizer).
    def _h(self):
        c = self._c
        if c is None:
            raise ClosedError("context")
        return c

    def _enter(self):
        if _dead_ctxs or _pending:
            _drain()
        if self._c is None:
            raise ClosedError("context")

    def _enter_open(self):
        if _dead_ctxs or _pending:
            _drain()

    def _drain_dead(self) -> None:
        """Close regions and peers dropped without close() (lock held)."""
        busy, self._busy = self._busy, []
        for o in busy:
            if not o._close_dead():
                self._busy.append(o)
        while self._dead:
            o = self._dead.popleft()
            if not o._close_dead():
                self._busy.append(o)

    @property
    def card(self) -> bytes:
        """This ctx's card: pass it to a peer's Context.peer()."""
        self._enter()
        buf = ffi.new(_T.char_a, 2060)
        with self._lock:
            n = _check(lib.tern_ctx_card(self._h(), buf, 2060), "card")
        return bytes(ffi.buffer(buf, n))

    def register(self, obj: Any, access: int = ALL,
                 cache: bool = True) -> Region:
        """Register a buffer-protocol object or a torch tensor. Host
        memory already registered with the same rights (or, for
        access=LOCAL, inside such a region) shares that registration: a
        lookup, no provider call. cache=False registers it on its own
        (TERN_MR_F_NOCACHE)."""
        self._enter()
        r = Region(self, obj, access, cache)
        self._regions.add(r)
        return r

    def peer(self, card: bytes) -> Peer:
        """Add a peer from its card bytes. Keep the Peer while the other
        side may write to us: dropping it removes the peer, and on the
        same host takes back its permission to write here."""
        self._enter()
        p = Peer(self, card)
        self._peers.add(p)
        return p

    def recv(self, region: Region, offset: int = 0,
             length: Optional[int] = None) -> Request:
        """Receive one message from any peer into
        region[offset:offset+length]; result() is its length, .imm its
        immediate."""
        region, offset, n = _local(region, offset, length)
        self._enter()
        r = Request(self, "recv", region)
        with self._lock:
            mr = region._h()
            buf = ffi.cast(_T.char_p, region.addr) + offset
            return r._posted(lib.tern_recv(self._h(), mr, buf, n, r._req))

    def expect(self, imm: int, count: int, timeout: Optional[float] = None,
               peer: Optional[Peer] = None) -> Request:
        """A request that completes once @count writes with @imm landed
        (from @peer only, or any peer). Returns at once; with timeout,
        the request fails tern.Timeout @timeout seconds from now (tern's
        own deadline: it holds whether the request is waited, awaited or
        polled)."""
        imm = _imm(imm)
        count = _int("count", count)
        if count < 1:
            raise ValueError("tern: count must be >= 1, got %d" % count)
        ms = _ms(timeout)
        if peer is not None and not isinstance(peer, Peer):
            raise TypeError("tern: peer must be a tern.Peer, not %s"
                            % type(peer).__name__)
        self._enter()
        src, text = _expect_text(imm, count, peer, timeout)
        r = Request(self, "expect(imm=%d, count=%d) %s" % (imm, count, src),
                    peer)
        r._err = text
        with self._lock:
            p = ffi.NULL if peer is None else peer._h()
            return r._posted(lib.tern_imm_expect_from(self._h(), p, imm,
                                                      count, ms, r._req))

    def quiet(self, peer: Optional[Peer] = None) -> Request:
        """A request that completes once every implicit operation
        (write_nbi, read_nbi, add_nbi) posted before this call to @peer,
        or to any peer of this ctx, is done at the target (tern_quiet).
        result() is how many operations it covers, or raises the first
        error among them (its text names the operation: "write #17 ...");
        request.value is then how many failed."""
        if peer is not None and not isinstance(peer, Peer):
            raise TypeError("tern: peer must be a tern.Peer, not %s"
                            % type(peer).__name__)
        self._enter()
        r = Request(self, "quiet" if peer is None else "quiet(peer)", peer)
        with self._lock:
            p = ffi.NULL if peer is None else peer._h()
            return r._posted(lib.tern_quiet(self._h(), p, r._req))

    def imm_count(self, imm: int) -> int:
        """Writes with @imm that landed and no expectation claimed yet."""
        imm = _imm(imm)
        self._enter()
        with self._lock:
            return int(lib.tern_imm_count(self._h(), imm))

    def progress(self) -> int:
        """One progress pass; runs done callbacks. Returns completions."""
        self._enter()
        with self._lock:
            n = _check(lib.tern_progress(self._h()), "progress")
            if self._busy:
                self._drain_dead()
        if n or self._inflight:
            self._reap()
        return n

    def _reap(self) -> None:
        with self._lock:
            done = [r for r in self._inflight if r._req.done]
        for r in done:
            r._finish()

    def _kick(self) -> None:
        """Wake threads sleeping in _wait (a post from another thread
        needs a progress pass to go out)."""
        if self._waiters and self._wake is not None:
            try:
                os.write(self._wake[1], b"\0")
            except OSError:
                pass

    def _wait(self, req: Request, timeout: Optional[float]) -> None:
        """Drive progress until req is done. The lock is held for one
        short tern_wait() at a time (at most ~64 passes); sleeping on the
        ctx's fd happens without it, so other threads may post, wait or
        close meanwhile."""
        self._enter_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                c = self._c
                if req._finished or c is None or req._req.done:
                    break  # a closed ctx completed every request
                ret = lib.tern_wait(c, req._req, 0)
                if ret < 0 and ret != -_errno.ETIMEDOUT:
                    raise _error(ret, "wait")
                if self._busy:
                    self._drain_dead()
                ms = 0
                if not req._req.done:
                    ms = lib.tern_ctx_timeout(c) \
                        if lib.tern_ctx_arm(c) == 0 else 0
                fd, wake = self._fd, self._wake[0]
                self._waiters += 1
            try:
                self._reap()
                if req._req.done:
                    break
                left = None if deadline is None else \
                    deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(-_errno.ETIMEDOUT, req._what, text=(
                        "not done after %g s (still in flight: wait "
                        "again, or cancel())" % timeout))
                if ms != 0:
                    sl = 0.25 if ms < 0 else min(0.25, ms / 1000.0)
                    if left is not None:
                        sl = min(sl, left)
                    try:
                        rd, _, _ = select.select([fd, wake], [], [], sl)
                    except (OSError, ValueError):  # closed under us
                        rd = []
                    if wake in rd:
                        try:
                            os.read(wake, 512)
                        except OSError:
                            pass
            finally:
                with self._lock:
                    self._waiters -= 1
        if req._req.done:
            req._finish()
        elif not req._finished:
            raise ClosedError("context")

    def close(self) -> None:
        """Close listeners, worlds, peers, regions, then the ctx; requests in
        flight complete (tern.Cancelled or their own status) and their
        callbacks run. Twice is a no-op; every object of the ctx raises
        tern.ClosedError afterwards."""
        with self._lock:
            c = self._c
            if c is None:
                return
            if self._aio is not None:
                self._aio.close()
            for b in list(self._boot):
                b.close()
            # a world's peers are its own: it removes them (and leaves
            # the ctx's loop) before the ctx closes
            for w in list(self._worlds):
                w._close_dead()
            for p in list(self._peers):
                p._close_dead()
            self._dead.clear()
            busy, self._busy = self._busy, []
            self._c = None
            # tern_ctx_close completes every request, then closes the
            # regions.
            lib.tern_ctx_close(c)
            for r in list(self._regions) + busy:
                if isinstance(r, Region):
                    r._forget()
            inflight = list(self._inflight)
            wake, self._wake = self._wake, None
        if wake is not None:
            try:
                os.write(wake[1], b"\0")  # wake waiters: they see closed
            except OSError:
                pass
        for r in inflight:
            r._finish()
        if wake is not None:
            os.close(wake[0])
            os.close(wake[1])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # Never a call into libtern here: queue the ctx for _drain()
        # (the next call into the package, or exit).
        try:
            if self._c is not None:
                _dead_ctxs.append(self)
        except Exception:
            pass

    def __repr__(self):
        return "<tern.Context %s%s>" % (
            getattr(self, "provider", "?"),
            "" if self._c is not None else " closed")
