# SPDX-License-Identifier: MIT
"""Registered memory: Region, the access rights, and descriptors (a
Region's, or packed bytes from a peer) as libtern takes them."""
from __future__ import annotations

import errno as _errno
from typing import TYPE_CHECKING, Any, Optional

from ._ffi import ffi, lib, new_attr, T as _T
from ._args import _buffer, _int, _unpin
from ._closes import _pending
from ._errors import BoundsError, ClosedError, _EBOUNDS, _check, _error
from ._requests import Request

LOCAL = 1 << 0
REMOTE_READ = 1 << 1
REMOTE_WRITE = 1 << 2
REMOTE_ATOMIC = 1 << 3
ALL = LOCAL | REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC

_MR_F_NOCACHE = 1 << 1  # tern/hmem.h TERN_MR_F_NOCACHE
_DESC_MAX = 24 + 8 * 32

if TYPE_CHECKING:  # annotations only: _ctx imports this module
    from ._ctx import Context


def _region(name: str, r: Any) -> "Region":
    if not isinstance(r, Region):
        raise TypeError("tern: %s must be a tern.Region (from "
                        "ctx.register()), not %s" % (name, type(r).__name__))
    return r


class Region:
    """Registered memory, made by ctx.register(); pins the registered
    object (and, for a buffer, its export: a bytearray cannot be resized
    while registered) until close()."""

    def __init__(self, ctx: "Context", obj: Any, access: int,
                 cache: bool = True):
        access = _int("access", access)
        if not isinstance(cache, bool):
            raise TypeError("tern: cache must be True or False, got %r"
                            % (cache,))
        if access <= 0 or access & ~ALL:
            raise ValueError("tern: access must be a non-empty "
                             "combination of tern.LOCAL, REMOTE_READ, "
                             "REMOTE_WRITE, REMOTE_ATOMIC")
        ctx._h()  # a closed ctx raises before anything is exported
        addr, n, keep, cuda = _buffer(obj)
        p = ffi.new(_T.mr_pp)
        try:
            with ctx._lock:
                h = ctx._h()
                if cuda:
                    # device memory: tern's CUDA support registers it
                    # zero-copy or staged (tern/hmem.h); -TERN_ENOCUDA
                    # where CUDA is absent
                    attr = new_attr("mr_attr_p")
                    attr.buf = ffi.cast(_T.void_p, addr)
                    attr.len = n
                    attr.access = access
                    attr.kind = 1  # TERN_MEM_CUDA
                    idx = obj.device.index
                    attr.device = -1 if idx is None else idx
                    ret = lib.tern_mr_regattr(h, attr, p)
                elif cache:
                    ret = lib.tern_mr_reg(h, ffi.cast(_T.void_p, addr), n,
                                          access, p)
                else:
                    attr = new_attr("mr_attr_p")
                    attr.buf = ffi.cast(_T.void_p, addr)
                    attr.len = n
                    attr.access = access
                    attr.kind = 0  # TERN_MEM_HOST
                    attr.device = -1
                    attr.flags = _MR_F_NOCACHE
                    ret = lib.tern_mr_regattr(h, attr, p)
                if ret < 0:
                    raise _error(ret, "register %d bytes" % n)
                mr = p[0]
                self._desc = ffi.new(_T.desc_p)
                ret = lib.tern_mr_desc(mr, self._desc)
                if ret < 0:
                    lib.tern_mr_close(mr)
                    raise _error(ret, "descriptor")
        except BaseException:
            _unpin(keep)
            keep = None
            raise
        self._ctx = ctx
        self._mr = mr
        self._closing = False
        self.obj = obj
        self._keep = keep
        self.addr = addr
        self.nbytes = n
        self.cuda = cuda
        self.access = access

    def _h(self):
        if self._mr is None or self._closing:
            raise ClosedError("region")
        self._ctx._h()
        return self._mr

    def descriptor(self) -> bytes:
        """Packed descriptor: bytes that pickle, for a peer's write/read."""
        self._h()
        buf = ffi.new(_T.char_a, _DESC_MAX)
        n = _check(lib.tern_mr_desc_pack(self._desc, buf, _DESC_MAX),
                   "descriptor")
        return bytes(ffi.buffer(buf, n))

    @property
    def path(self) -> str:
        """"host", "cuda zero-copy" or "cuda staged"."""
        return ffi.string(lib.tern_mr_path_str(
            lib.tern_mr_path(self._h()))).decode()

    def sync(self, direction: str, offset: int = 0,
             length: Optional[int] = None) -> Request:
        """Staged CUDA regions: "in" (what peers wrote -> the GPU) or "out"
        (the GPU's bytes -> what peers read). Completes at once elsewhere."""
        d = {"in": 1, "out": 2}.get(direction)
        if d is None:
            raise ValueError('tern: direction must be "in" or "out"')
        offset = _int("offset", offset)
        length = self.nbytes - offset if length is None else \
            _int("length", length)
        ctx = self._ctx
        ctx._enter()
        r = Request(ctx, "sync", self)
        with ctx._lock:
            return r._posted(lib.tern_mr_sync(self._h(), offset, length,
                                              d, r._req))

    def close(self) -> None:
        """Deregister. With operations still using it, it is closed for
        new ones at once and deregistered from the ctx's progress once
        they complete (the object stays pinned until then): close()
        never waits. Twice, or after the ctx's close(), is a no-op."""
        ctx = self._ctx
        if self._mr is None or self._closing:
            return
        ctx._enter_open()
        with ctx._lock:
            if self._mr is None or self._closing:
                return
            if ctx._c is not None and \
                    lib.tern_mr_close(self._mr) == -_errno.EBUSY:
                self._closing = True
                ctx._busy.append(self)
                return
            self._forget()

    def _forget(self) -> None:
        self._mr = None
        self._closing = False
        keep, self._keep = self._keep, None
        _unpin(keep)
        self._ctx._regions.discard(self)

    def _close_dead(self) -> bool:
        """From _drain (ctx lock held): True once closed."""
        if self._mr is None:
            return True
        if self._ctx._c is not None and \
                lib.tern_mr_close(self._mr) == -_errno.EBUSY:
            return False
        self._forget()
        return True

    def __len__(self) -> int:
        return self.nbytes

    def __del__(self):
        # Never a call into libtern here: queue it for the ctx (the
        # region, its object and its export stay alive until then).
        try:
            if self._mr is not None and not self._closing:
                self._ctx._dead.append(self)
                _pending.append(self._ctx)
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<tern.Region %d bytes%s>" % (
            self.nbytes, "" if self._mr is not None and not self._closing
            else " closed")


def _desc(d, name: str = "remote") -> Any:
    """A struct tern_mr_desc * from packed bytes or a Region."""
    if isinstance(d, Region):
        d._h()
        return d._desc
    if isinstance(d, ffi.CData):
        return d
    if isinstance(d, (list, tuple)):
        raise TypeError(
            "tern: %s must be one descriptor (bytes from "
            "Region.descriptor()), not a %s: world.descs[r] and the "
            "descriptors from connect()/accept() are lists, one per "
            "region: pass descs[r][i]" % (name, type(d).__name__))
    if not isinstance(d, (bytes, bytearray, memoryview)):
        raise TypeError("tern: %s must be a descriptor (bytes from "
                        "Region.descriptor()) or a Region, not %s"
                        % (name, type(d).__name__))
    b = d if type(d) is bytes else bytes(d)
    c = _DESC_CACHE.get(b)
    if c is not None:
        return c
    c = ffi.new(_T.desc_p)
    _check(lib.tern_mr_desc_unpack(b, len(b), c), name)
    if len(_DESC_CACHE) >= 256:
        _DESC_CACHE.clear()
    _DESC_CACHE[b] = c
    return c


# Unpacked descriptors by their bytes: a batch to the same remote region
# unpacks it once. Entries are never written to; a request keeps the one
# it uses alive, so clearing the cache is always safe.
_DESC_CACHE: dict = {}


def _local(region: Region, offset: Any, length: Any):
    """(region, its offset, length), checked against the region."""
    region = _region("region", region)
    offset = _int("offset", offset)
    if length is None:
        length = region.nbytes - offset
    else:
        length = _int("length", length)
    if offset < 0 or length < 0 or offset + length > region.nbytes:
        raise BoundsError(-_EBOUNDS, "local range", text=(
            "offset %d + length %d is outside the region's %d bytes"
            % (offset, length, region.nbytes)))
    return region, offset, length
