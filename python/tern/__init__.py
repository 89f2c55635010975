# SPDX-License-Identifier: MIT
"""tern from Python: register memory, pass descriptors, move bytes.

Binds the installed libtern through cffi in ABI mode (no compiler needed).
libtern is found through $TERN_LIB, the source tree's build/ directory,
or the system's library path. See docs/python.md.
"""
from __future__ import annotations

import errno as _errno
import os
import threading
import time
import weakref
from typing import Any, Callable, Optional

from ._ffi import ffi, lib, LIB_PATH, PRIV_SIZE

__all__ = [
    "Context", "Region", "Peer", "Request", "Error", "Timeout", "Cancelled",
    "AccessError", "BoundsError", "ClosedError", "LOCAL", "REMOTE_READ",
    "REMOTE_WRITE", "REMOTE_ATOMIC", "ALL", "version", "LIB_PATH",
    "connect", "listen", "Listener", "world", "pieces",
]

LOCAL = 1 << 0
REMOTE_READ = 1 << 1
REMOTE_WRITE = 1 << 2
REMOTE_ATOMIC = 1 << 3
ALL = LOCAL | REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC

_EACCESS = 262
_EBOUNDS = 263
_PIECES_IMM = 1
_DESC_MAX = 24 + 8 * 32


def version() -> str:
    """libtern's version string."""
    return ffi.string(lib.tern_version()).decode()


class Error(Exception):
    """A tern error: .code is the negative error, .prov the provider's text."""

    def __init__(self, code: int, what: str = "", prov: str = ""):
        self.code = code
        self.prov = prov
        text = ffi.string(lib.tern_strerror(code)).decode()
        msg = "%s: %s" % (what, text) if what else text
        if prov:
            msg += " (%s)" % prov
        super().__init__(msg)


class Timeout(Error, TimeoutError):
    """The operation did not complete in time."""


class Cancelled(Error):
    """The request was cancelled (its peer or ctx went away first)."""


class AccessError(Error):
    """The region lacks the access right the operation needs."""


class BoundsError(Error):
    """The operation falls outside a region."""


class ClosedError(Error):
    """The object was used after close()."""

    def __init__(self, what: str):
        Exception.__init__(self, "%s is closed" % what)
        self.code = -_errno.EBADF
        self.prov = ""


def _error(code: int, what: str = "", prov: str = "") -> Error:
    cls = {-_errno.ETIMEDOUT: Timeout, -_errno.ECANCELED: Cancelled,
           -_EACCESS: AccessError, -_EBOUNDS: BoundsError}.get(code, Error)
    return cls(code, what, prov)


def _check(ret: int, what: str) -> int:
    if ret < 0:
        raise _error(ret, what)
    return ret


def _buffer(obj: Any):
    """(address, nbytes, keepalive, is_cuda) of a buffer or tensor."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
        if not obj.is_contiguous():
            raise ValueError("tern: tensor must be contiguous")
        n = obj.numel() * obj.element_size()
        return obj.data_ptr(), n, obj, obj.device.type == "cuda"
    mv = memoryview(obj)
    if not mv.contiguous:
        raise ValueError("tern: buffer must be contiguous")
    if mv.readonly:
        raise ValueError("tern: buffer must be writable")
    cbuf = ffi.from_buffer(mv)
    return int(ffi.cast("uintptr_t", cbuf)), mv.nbytes, (obj, mv, cbuf), False


_REQ_T = ffi.typeof("struct tern_req *")


class Request:
    """One operation in flight: wait(), done(), result(), callbacks, await."""

    __slots__ = ("_ctx", "_req", "_keep", "_cbs", "_what", "_finished",
                 "__weakref__")

    def __init__(self, ctx: "Context", what: str, keep: Any = None):
        self._ctx = ctx
        # ffi.new zero-fills: that is what tern_req_init(req, NULL, NULL)
        # sets (no callback, nothing done, no links), without a second
        # C call on every operation.
        self._req = ffi.new(_REQ_T)
        self._keep = keep
        self._cbs: list = []
        self._what = what
        self._finished = False

    def _posted(self, ret: int) -> "Request":
        _check(ret, self._what)
        self._ctx._inflight.add(self)
        return self

    def _finish(self) -> None:
        """Called once tern set req->done: release and run callbacks."""
        if self._finished:
            return
        self._finished = True
        self._ctx._inflight.discard(self)
        self._keep = None
        cbs, self._cbs = self._cbs, []
        for cb in cbs:
            cb(self)

    def done(self) -> bool:
        """True once the operation completed (success or error)."""
        if not self._finished and self._req.done:
            self._finish()
        return self._finished

    def wait(self, timeout: Optional[float] = None) -> "Request":
        """Drive progress until done; raise Timeout after @timeout seconds."""
        if not self.done():
            self._ctx._wait(self, timeout)
        return self

    def result(self, timeout: Optional[float] = None) -> int:
        """Wait, then return the length (bytes, or count for expect())
        or raise the operation's error."""
        self.wait(timeout)
        st = self._req.status
        if st:
            raise _error(st, self._what,
                         ffi.string(self._req.errmsg).decode(errors="replace"))
        return int(self._req.len)

    def exception(self, timeout: Optional[float] = None):
        try:
            self.result(timeout)
        except Timeout:
            raise
        except Error as e:
            return e
        return None

    @property
    def value(self) -> int:
        """Atomics: the remote word's old value."""
        return int(self._req.value)

    @property
    def imm(self) -> Optional[int]:
        """Receives: the immediate carried, or None."""
        return int(self._req.imm) if self._req.flags & 1 else None

    @property
    def nbytes(self) -> int:
        return int(self._req.len)

    def add_done_callback(self, fn: Callable[["Request"], Any]) -> None:
        """Call fn(request) when done, from the ctx's progress."""
        if self.done():
            fn(self)
        else:
            self._cbs.append(fn)

    def cancel(self) -> bool:
        """Ask tern to cancel; it completes with Cancelled from progress."""
        if self.done():
            return False
        return lib.tern_req_cancel(self._ctx._h(), self._req) == 0

    def __await__(self):
        import asyncio
        from . import aio
        if not self.done():
            fut = asyncio.get_running_loop().create_future()
            aio._watch(self._ctx)

            def _done(_r):
                if not fut.done():
                    fut.set_result(None)
            self.add_done_callback(_done)
            yield from fut.__await__()
        return self.result(0)


class Region:
    """Registered memory; keeps the registered object alive."""

    def __init__(self, ctx: "Context", obj: Any, access: int):
        addr, n, keep, cuda = _buffer(obj)
        if n == 0:
            raise ValueError("tern: cannot register an empty buffer")
        p = ffi.new("struct tern_mr **")
        if cuda:
            # device memory: tern's CUDA support registers it zero-copy
            # or staged (tern/hmem.h); -TERN_ENOCUDA where CUDA is absent
            attr = ffi.new("struct tern_mr_attr *")
            attr.buf = ffi.cast("void *", addr)
            attr.len = n
            attr.access = access
            attr.kind = 1  # TERN_MEM_CUDA
            idx = obj.device.index
            attr.device = -1 if idx is None else idx
            _check(lib.tern_mr_regattr(ctx._h(), attr, p), "register")
        else:
            _check(lib.tern_mr_reg(ctx._h(), ffi.cast("void *", addr), n,
                                   access, p), "register")
        self._ctx = ctx
        self._mr = p[0]
        self.obj = obj
        self._keep = keep
        self.addr = addr
        self.nbytes = n
        self.cuda = cuda
        self._desc = ffi.new("struct tern_mr_desc *")
        _check(lib.tern_mr_desc(self._mr, self._desc), "descriptor")

    def _h(self):
        if self._mr is None:
            raise ClosedError("region")
        self._ctx._h()
        return self._mr

    def descriptor(self) -> bytes:
        """Packed descriptor: bytes that pickle, for a peer's write/read."""
        self._h()
        buf = ffi.new("char[]", _DESC_MAX)
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
        d = {"in": 1, "out": 2}[direction]
        mr = self._h()
        if length is None:
            length = self.nbytes - offset
        r = Request(self._ctx, "sync", self)
        return r._posted(lib.tern_mr_sync(mr, offset, length, d, r._req))

    def close(self) -> None:
        """Deregister (waits for operations still using it)."""
        if self._mr is None:
            return
        if self._ctx._ctx is not None:
            while lib.tern_mr_close(self._mr) == -_errno.EBUSY:
                self._ctx.progress()
        self._ctx._regions.discard(self)
        self._mr = None
        self._keep = None

    def __len__(self) -> int:
        return self.nbytes

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _desc(d) -> Any:
    """A struct tern_mr_desc * from packed bytes or a Region."""
    if isinstance(d, Region):
        d._h()
        return d._desc
    if isinstance(d, ffi.CData):
        return d
    b = d if type(d) is bytes else bytes(d)
    c = _DESC_CACHE.get(b)
    if c is not None:
        return c
    c = ffi.new("struct tern_mr_desc *")
    _check(lib.tern_mr_desc_unpack(b, len(b), c), "descriptor")
    if len(_DESC_CACHE) >= 256:
        _DESC_CACHE.clear()
    _DESC_CACHE[b] = c
    return c


# Unpacked descriptors by their bytes: a batch to the same remote region
# unpacks it once. Entries are never written to; a request keeps the one
# it uses alive, so clearing the cache is always safe.
_DESC_CACHE: dict = {}


def _local(region: Region, offset: int, length: Optional[int]):
    mr = region._h()
    if length is None:
        length = region.nbytes - offset
    if offset < 0 or length < 0 or offset + length > region.nbytes:
        raise BoundsError(-_EBOUNDS, "local range")
    return mr, ffi.cast("char *", region.addr) + offset, length


_NP = None  # numpy, imported on first use (only batches need it)
_I64 = None  # its int64 dtype


def _i64(a) -> Any:
    """A contiguous int64 numpy view of a numpy array, torch tensor or list:
    the array itself when it already is one (no call, no copy)."""
    global _NP, _I64
    if _NP is None:
        import numpy
        _NP, _I64 = numpy, numpy.dtype(numpy.int64)
    if (type(a) is _NP.ndarray and a.dtype is _I64 and
            a.flags.c_contiguous):
        return a
    if hasattr(a, "detach") and hasattr(a, "numpy"):
        a = a.detach().cpu().numpy()
    return _NP.ascontiguousarray(a, dtype=_NP.int64)


def _piece_dtype():
    import numpy as np
    return np.dtype([("loff", "<u8"), ("roff", "<u8"), ("len", "<u8"),
                     ("region", "<u4"), ("pad", "<u4")])


_PIECE_DTYPE = None


def _arrays(local_offsets, remote_offsets, lengths):
    lo, ro, ln = _i64(local_offsets), _i64(remote_offsets), _i64(lengths)
    n = ln.shape[0] if ln.ndim == 1 else -1
    if n <= 0 or lo.shape != ln.shape or ro.shape != ln.shape:
        raise ValueError("tern: batch arrays are not 1-D, differ in "
                         "length or are empty")
    return lo, ro, ln, n


def _fill(t, lo, ro, ln) -> None:
    t[:, 0] = lo
    t[:, 1] = ro
    t[:, 2] = ln
    t[:, 3] = 0  # region 0, pad 0


def pieces(local_offsets, remote_offsets, lengths) -> Any:
    """A piece table: a numpy structured array laid out as struct
    tern_piece (loff, roff, len, region 0, pad 0), built with four
    vectorised column copies, which write_batch() and read_batch() hand to
    tern_write_pieces()/tern_read_pieces(). Three arrays cost the same
    (C takes them as they are); a table is one object to keep."""
    import numpy as np
    global _PIECE_DTYPE
    if _PIECE_DTYPE is None:
        _PIECE_DTYPE = _piece_dtype()
    lo, ro, ln, n = _arrays(local_offsets, remote_offsets, lengths)
    t = np.empty((n, 4), np.int64)
    _fill(t, lo, ro, ln)
    return t.view(_PIECE_DTYPE).reshape(n)


def _batch(local_offsets, remote_offsets, lengths):
    """(table, None) for a tern.pieces() table; (None, arrays) for three
    offset/length arrays, which C takes as they are
    (tern_write_pieces_arrays(): nothing is packed)."""
    if remote_offsets is None and lengths is None:
        t = local_offsets
        if (_PIECE_DTYPE is None or getattr(t, "dtype", None) !=
                _PIECE_DTYPE or t.ndim != 1 or len(t) == 0 or
                not t.flags.c_contiguous):
            raise ValueError("tern: pass offsets and lengths, or one "
                             "non-empty table from tern.pieces()")
        return t, None
    if remote_offsets is None or lengths is None:
        raise ValueError("tern: pass local_offsets, remote_offsets and "
                         "lengths together")
    return None, _arrays(local_offsets, remote_offsets, lengths)


_U64A = ffi.typeof("uint64_t[]")
# cffi's own from_buffer under ffi.from_buffer(), which only adds an
# argument shuffle: a third of a microsecond per array.
_from_buffer = getattr(getattr(ffi, "_backend", None), "from_buffer", None)


def _u64p(a):
    if _from_buffer is not None:
        return _from_buffer(_U64A, a, False)
    return ffi.from_buffer(_U64A, a)


class Peer:
    """A remote ctx, added from its card bytes."""

    def __init__(self, ctx: "Context", card: bytes):
        card = bytes(card)
        p = ffi.new("struct tern_peer **")
        _check(lib.tern_peer_add(ctx._h(), card, len(card), p), "peer")
        self._ctx = ctx
        self._p = p[0]

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

    def close(self) -> None:
        """Remove the peer: its queued operations complete Cancelled."""
        if self._p is None:
            return
        if self._ctx._ctx is not None:
            lib.tern_peer_remove(self._p)
        self._ctx._peers.discard(self)
        self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def write(self, region: Region, remote, remote_offset: int = 0,
              offset: int = 0, length: Optional[int] = None,
              imm: Optional[int] = None) -> Request:
        """One-sided write of region[offset:offset+length] to the remote
        descriptor at remote_offset; with imm, the target counts it."""
        p = self._h()
        mr, buf, n = _local(region, offset, length)
        d = _desc(remote)
        r = Request(self._ctx, "write", (region, d))
        if imm is None:
            ret = lib.tern_write(p, mr, buf, n, d, remote_offset, r._req)
        else:
            ret = lib.tern_write_imm(p, mr, buf, n, d, remote_offset, imm,
                                     r._req)
        return r._posted(ret)

    def write_imm(self, region: Region, remote, imm: int,
                  remote_offset: int = 0, offset: int = 0,
                  length: Optional[int] = None) -> Request:
        return self.write(region, remote, remote_offset, offset, length, imm)

    def read(self, region: Region, remote, remote_offset: int = 0,
             offset: int = 0, length: Optional[int] = None) -> Request:
        """One-sided read from the remote descriptor into region."""
        p = self._h()
        mr, buf, n = _local(region, offset, length)
        d = _desc(remote)
        r = Request(self._ctx, "read", (region, d))
        return r._posted(lib.tern_read(p, mr, buf, n, d, remote_offset,
                                       r._req))

    def send(self, region: Region, offset: int = 0,
             length: Optional[int] = None,
             imm: Optional[int] = None) -> Request:
        p = self._h()
        mr, buf, n = _local(region, offset, length)
        r = Request(self._ctx, "send", region)
        if imm is None:
            ret = lib.tern_send(p, mr, buf, n, r._req)
        else:
            ret = lib.tern_send_imm(p, mr, buf, n, imm, r._req)
        return r._posted(ret)

    def fetch_add(self, remote, remote_offset: int, add: int) -> Request:
        """Atomic 64-bit fetch-and-add; request.value is the old word."""
        p = self._h()
        d = _desc(remote)
        r = Request(self._ctx, "fetch_add", d)
        return r._posted(lib.tern_atomic_fetch_add(p, d, remote_offset,
                                                   add, r._req))

    def cswap(self, remote, remote_offset: int, compare: int,
              swap: int) -> Request:
        """Atomic 64-bit compare-and-swap; request.value is the old word."""
        p = self._h()
        d = _desc(remote)
        r = Request(self._ctx, "cswap", d)
        return r._posted(lib.tern_atomic_cswap(p, d, remote_offset, compare,
                                               swap, r._req))

    def write_batch(self, region: Region, local_offsets, remote,
                    remote_offsets=None, lengths=None,
                    imm: Optional[int] = None) -> Request:
        """Write many pieces in ONE C call (tern_write_pieces_arrays):
        piece i copies lengths[i] bytes at local_offsets[i] of region to
        remote_offsets[i] of the remote descriptor. Offsets and lengths
        are int64 numpy arrays or torch CPU tensors (handed to C as they
        are, no copy), or sequences; or pass a table from tern.pieces() as
        local_offsets (and no remote_offsets, lengths). With imm, every piece is a
        write with immediate (the target counts len(lengths)). One
        request completes when all pieces have, with the first error."""
        t, a = _batch(local_offsets, remote_offsets, lengths)
        p = self._h()
        mr = region._h()
        d = _desc(remote)
        flags = _PIECES_IMM if imm is not None else 0
        if a is None:
            r = Request(self._ctx, "write_batch", (region, d, t))
            return r._posted(lib.tern_write_pieces(
                p, mr, ffi.from_buffer("struct tern_piece[]", t), len(t),
                d, 1, flags, imm or 0, r._req))
        lo, ro, ln, n = a
        r = Request(self._ctx, "write_batch", (region, d, lo, ro, ln))
        return r._posted(lib.tern_write_pieces_arrays(
            p, mr, _u64p(lo), _u64p(ro), _u64p(ln), n, d, flags, imm or 0,
            r._req))

    def read_batch(self, region: Region, local_offsets, remote,
                   remote_offsets=None, lengths=None) -> Request:
        """Read many pieces in ONE C call (tern_read_pieces_arrays): piece i
        copies lengths[i] bytes at remote_offsets[i] of the remote
        descriptor to local_offsets[i] of region. Arrays as for
        write_batch() (or one tern.pieces() table). Reads carry no
        immediate. One request completes when all pieces have."""
        t, a = _batch(local_offsets, remote_offsets, lengths)
        p = self._h()
        mr = region._h()
        d = _desc(remote)
        if a is None:
            r = Request(self._ctx, "read_batch", (region, d, t))
            return r._posted(lib.tern_read_pieces(
                p, mr, ffi.from_buffer("struct tern_piece[]", t), len(t),
                d, 1, r._req))
        lo, ro, ln, n = a
        r = Request(self._ctx, "read_batch", (region, d, lo, ro, ln))
        return r._posted(lib.tern_read_pieces_arrays(
            p, mr, _u64p(lo), _u64p(ro), _u64p(ln), n, d, r._req))


class Context:
    """A tern ctx: Context(provider=None, rails=1, node=None, ...).

    A context manager; close() removes peers, closes regions and the ctx,
    and completes every request still in flight."""

    def __init__(self, provider: Optional[str] = None, rails: int = 0,
                 node: Optional[str] = None, domain: Optional[str] = None,
                 domains: Optional[str] = None, flags: int = 0,
                 fabric: Optional[str] = None):
        attr = ffi.new("struct tern_ctx_attr *")
        keep = []
        # fabric: libfabric's fabric name; on efa "efa-direct" (the
        # default where offered) or "efa" (atomics, large messages).
        for k, v in (("provider", provider), ("node", node),
                     ("domain", domain), ("domains", domains),
                     ("fabric", fabric)):
            if v is not None:
                s = ffi.new("char[]", v.encode())
                keep.append(s)
                setattr(attr, k, s)
        attr.rails = rails
        attr.flags = flags
        p = ffi.new("struct tern_ctx **")
        _check(lib.tern_ctx_open(attr, p), "open")
        self._ctx = p[0]
        self._inflight: set = set()
        self._regions: "weakref.WeakSet[Region]" = weakref.WeakSet()
        self._peers: "weakref.WeakSet[Peer]" = weakref.WeakSet()
        self._lock = threading.RLock()
        self._aio = None
        self._boot: set = set()
        info = ffi.new("struct tern_ctx_info *")
        _check(lib.tern_ctx_query(self._ctx, info), "query")
        self.provider = ffi.string(info.provider).decode()
        self.fabric = ffi.string(info.fabric).decode()
        self.rails = info.rails
        self.has_wait_fd = bool(info.wait_fd)
        self.atomics = bool(info.atomic_fadd)

    def _h(self):
        if self._ctx is None:
            raise ClosedError("context")
        return self._ctx

    @property
    def card(self) -> bytes:
        """This ctx's card: pass it to a peer's Context.peer()."""
        buf = ffi.new("char[]", 2060)
        n = _check(lib.tern_ctx_card(self._h(), buf, 2060), "card")
        return bytes(ffi.buffer(buf, n))

    def register(self, obj: Any, access: int = ALL) -> Region:
        """Register a buffer-protocol object or a torch tensor."""
        r = Region(self, obj, access)
        self._regions.add(r)
        return r

    def peer(self, card: bytes) -> Peer:
        """Add a peer from its card bytes."""
        p = Peer(self, card)
        self._peers.add(p)
        return p

    def recv(self, region: Region, offset: int = 0,
             length: Optional[int] = None) -> Request:
        """Receive one message from any peer; result() is its length."""
        mr, buf, n = _local(region, offset, length)
        r = Request(self, "recv", region)
        return r._posted(lib.tern_recv(self._h(), mr, buf, n, r._req))

    def expect(self, imm: int, count: int,
               timeout: Optional[float] = None) -> Request:
        """A request that completes once @count writes with @imm landed.
        With timeout, waits here and returns the finished request."""
        r = Request(self, "expect")
        r._posted(lib.tern_imm_expect(self._h(), imm, count, r._req))
        if timeout is not None:
            try:
                r.result(timeout)
            except Timeout:
                r.cancel()
                raise
        return r

    def imm_count(self, imm: int) -> int:
        return int(lib.tern_imm_count(self._h(), imm))

    def progress(self) -> int:
        """One progress pass; runs done callbacks. Returns completions."""
        with self._lock:
            n = _check(lib.tern_progress(self._h()), "progress")
        if n or self._inflight:
            self._reap()
        return n

    def _reap(self) -> None:
        for r in [r for r in self._inflight if r._req.done]:
            r._finish()

    def _wait(self, req: Request, timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not req.done():
            ms = -1 if deadline is None else \
                max(0, int((deadline - time.monotonic()) * 1000))
            # Bounded slices so another thread may progress, ^C is seen.
            sl = 100 if ms < 0 else min(ms, 100)
            with self._lock:
                ret = lib.tern_wait(self._h(), req._req, sl)
            if ret < 0 and ret != -_errno.ETIMEDOUT:
                raise _error(ret, "wait")
            self._reap()
            if req.done():
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(-_errno.ETIMEDOUT, req._what)

    def close(self) -> None:
        """Close peers, regions, then the ctx; requests in flight complete
        (Cancelled or their own status)."""
        if self._ctx is None:
            return
        if self._aio is not None:
            self._aio.close()
        for b in list(self._boot):
            b.close()
        for p in list(self._peers):
            p.close()
        ctx, self._ctx = self._ctx, None
        # tern_ctx_close completes every request, then closes regions.
        lib.tern_ctx_close(ctx)
        for r in list(self._regions):
            r._mr = None
            r._keep = None
        for r in list(self._inflight):
            r._finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


from .boot import connect, listen, Listener  # noqa: E402
from . import world  # noqa: E402
