# SPDX-License-Identifier: MIT
"""tern from Python: register memory, pass descriptors, move bytes.

Binds the installed libtern through cffi in ABI mode (no compiler needed).
libtern is found through $TERN_LIB, the source tree's build/ directory,
or the system's library path. See docs/python.md.

Lifetimes: nothing here calls into libtern from a finalizer. A Region,
Peer or Context dropped without close() is put on a queue (a deque
append, nothing else); the queue is emptied at the next call into the
package that is not a finalizer, by the owning ctx's close(), and at
interpreter exit.
"""
from __future__ import annotations

import atexit
import collections
import errno as _errno
import logging
import math
import operator
import os
import select
import threading
import time
import weakref
from typing import Any, Callable, Optional

from ._ffi import ffi, lib, LIB_PATH, PRIV_SIZE, T as _T
from ._ffi import new_attr as _new_attr

__all__ = [
    "Context", "Region", "Peer", "Request", "Error", "Timeout", "Cancelled",
    "Aborted", "PeerGone", "AccessError", "BoundsError", "ClosedError",
    "LOCAL", "REMOTE_READ", "REMOTE_WRITE", "REMOTE_ATOMIC", "ALL",
    "version", "LIB_PATH", "PRIV_SIZE", "connect", "listen", "Listener",
    "world", "pieces",
]

LOCAL = 1 << 0
REMOTE_READ = 1 << 1
REMOTE_WRITE = 1 << 2
REMOTE_ATOMIC = 1 << 3
ALL = LOCAL | REMOTE_READ | REMOTE_WRITE | REMOTE_ATOMIC

_EACCESS = 262
_EBOUNDS = 263
_ECLOSED = 268
_EPEERGONE = 269
_EABORTED = 272
_PIECES_IMM = 1
_MR_F_NOCACHE = 1 << 1  # tern/hmem.h TERN_MR_F_NOCACHE
_DESC_MAX = 24 + 8 * 32
_U32 = 1 << 32
_U64 = 1 << 64
_MS_MAX = (1 << 31) - 1
_RUN_NOWAIT = 2

_log = logging.getLogger("tern")


def version() -> str:
    """libtern's version string."""
    return ffi.string(lib.tern_version()).decode()


class Error(Exception):
    """A tern error: .code is the negative error, .prov the provider's text.

    The message names what failed, then tern_strerror(code) (or a more
    precise text), then the provider's detail in parentheses."""

    def __init__(self, code: int, what: str = "", prov: str = "",
                 text: Optional[str] = None):
        self.code = code
        self.prov = prov
        if text is None:
            text = ffi.string(lib.tern_strerror(code)).decode()
        msg = "%s: %s" % (what, text) if what else text
        if prov:
            msg += " (%s)" % prov
        super().__init__(msg)


class Timeout(Error, TimeoutError):
    """A deadline passed: an expectation's timeout, or a wait's."""


class Cancelled(Error):
    """The request was cancelled: cancel(), its peer removed or its ctx
    closed first."""


class Aborted(Error):
    """An expectation failed because a sender told this ctx that its write
    with that immediate failed or was cancelled."""


class PeerGone(Error):
    """The peer went away (its process ended, or liveness was lost)."""


class AccessError(Error):
    """The region lacks the access right the operation needs."""


class BoundsError(Error):
    """The operation falls outside a region."""


class ClosedError(Error):
    """The object was used after close() (its own, or its context's)."""

    def __init__(self, what: str):
        Exception.__init__(self, "%s is closed" % what)
        self.code = -_errno.EBADF
        self.prov = ""


_CLASSES = {-_errno.ETIMEDOUT: Timeout, -_errno.ECANCELED: Cancelled,
            -_EABORTED: Aborted, -_EPEERGONE: PeerGone,
            -_EACCESS: AccessError, -_EBOUNDS: BoundsError}


def _error(code: int, what: str = "", prov: str = "",
           text: Optional[str] = None) -> Error:
    if code == -_ECLOSED:
        return ClosedError(what or "context")
    return _CLASSES.get(code, Error)(code, what, prov, text)


def _check(ret: int, what: str) -> int:
    if ret < 0:
        raise _error(ret, what)
    return ret


# ---- argument checks: before anything is exported or posted ------------

def _int(name: str, v: Any) -> int:
    """An offset, length or count: an int (or numpy/torch integer scalar),
    never a float or bool."""
    if isinstance(v, bool):
        raise TypeError("tern: %s must be an integer, not bool" % name)
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError("tern: %s must be an integer, not %s"
                        % (name, type(v).__name__)) from None


def _u64(name: str, v: Any) -> int:
    """A remote offset: outside [0, 2**64) cannot be in any region."""
    v = _int(name, v)
    if v < 0 or v >= _U64:
        raise BoundsError(-_EBOUNDS, name, text="%d is outside every "
                          "region" % v)
    return v


def _imm(v: Any, name: str = "imm") -> int:
    v = _int(name, v)
    if v < 0 or v >= _U32:
        raise ValueError("tern: %s must fit in 32 bits (0 <= %s < 2**32), "
                         "got %d" % (name, name, v))
    return v


def _word(name: str, v: Any) -> int:
    """An atomic operand: any 64-bit word (negative ints wrap)."""
    v = _int(name, v)
    if v < -(1 << 63) or v >= _U64:
        raise ValueError("tern: %s must fit in 64 bits, got %d" % (name, v))
    return v % _U64


def _region(name: str, r: Any) -> "Region":
    if not isinstance(r, Region):
        raise TypeError("tern: %s must be a tern.Region (from "
                        "ctx.register()), not %s" % (name, type(r).__name__))
    return r


def _ms(timeout: Optional[float], name: str = "timeout") -> int:
    """Seconds -> C milliseconds (-1: none), rounded up."""
    if timeout is None:
        return -1
    if isinstance(timeout, bool) or not isinstance(
            timeout, (int, float)) and not hasattr(timeout, "__float__"):
        raise TypeError("tern: %s must be seconds (a number) or None"
                        % name)
    t = float(timeout)
    if t != t or t < 0:
        raise ValueError("tern: %s must be >= 0 seconds, got %r"
                         % (name, timeout))
    return min(_MS_MAX, int(math.ceil(t * 1000)))


def _buffer(obj: Any):
    """(address, nbytes, keep, is_cuda) of a buffer or tensor. Every check
    runs before the buffer is exported; on any failure the export is
    released before the exception leaves (an exception kept in a
    reference cycle must not hold it). keep is the tensor, or the
    memoryview that pins the buffer (a bytearray cannot be resized while
    registered)."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
        if not obj.is_contiguous():
            raise ValueError("tern: tensor must be contiguous")
        n = obj.numel() * obj.element_size()
        if n == 0:
            raise ValueError("tern: cannot register an empty tensor")
        return obj.data_ptr(), n, obj, obj.device.type == "cuda"
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("tern: register() takes a buffer (bytearray, "
                        "memoryview, numpy array) or a torch tensor, not %s"
                        % type(obj).__name__) from None
    why = None
    if not mv.contiguous:
        why = "buffer must be contiguous"
    elif mv.readonly:
        why = "buffer must be writable (this one is read-only)"
    elif mv.nbytes == 0:
        why = "cannot register an empty buffer"
    if why is not None:
        mv.release()
        raise ValueError("tern: " + why)
    try:
        cbuf = ffi.from_buffer(mv, require_writable=True)
        try:
            addr = int(ffi.cast(_T.uintptr, cbuf))
        finally:
            ffi.release(cbuf)
    except BaseException:
        mv.release()
        raise
    return addr, mv.nbytes, mv, False


def _unpin(keep: Any) -> None:
    """Let go of what a region pinned (a memoryview's export)."""
    if type(keep) is memoryview:
        try:
            keep.release()
        except (BufferError, ValueError):
            pass


# ---- deferred closes ---------------------------------------------------

# Contexts dropped without close(), and contexts with regions or peers
# dropped without close(): finalizers only append here (deque.append is
# atomic and takes no lock of cffi's or ours); _drain() does the closing
# from a safe place.
_dead_ctxs: collections.deque = collections.deque()
_pending: collections.deque = collections.deque()


def _drain() -> None:
    """Close what finalizers queued. Called at entry to the package's
    calls, never from a finalizer. A ctx whose lock another thread holds
    is left for a later call (no lock order to deadlock on)."""
    for _ in range(len(_dead_ctxs)):
        try:
            c = _dead_ctxs.popleft()
        except IndexError:
            break
        if c._lock.acquire(blocking=False):
            try:
                c.close()
            finally:
                c._lock.release()
        else:
            _dead_ctxs.append(c)
    for _ in range(len(_pending)):
        try:
            c = _pending.popleft()
        except IndexError:
            break
        if c._lock.acquire(blocking=False):
            try:
                c._drain_dead()
            finally:
                c._lock.release()
        else:
            _pending.append(c)


def _at_exit() -> None:
    try:
        _drain()
    except Exception:  # never fail an exit
        pass


atexit.register(_at_exit)


# ---- requests ----------------------------------------------------------

class Request:
    """One operation in flight: wait(), done(), result(), callbacks, await.

    A request in flight is held by its ctx (with its region, peer,
    descriptor and arrays): dropping it does not cancel it or free what
    tern still writes into."""

    __slots__ = ("_ctx", "_req", "_keep", "_cbs", "_what", "_finished",
                 "_err", "__weakref__")

    def __init__(self, ctx: "Context", what: str, keep: Any = None):
        self._ctx = ctx
        # ffi.new zero-fills: that is what tern_req_init(req, NULL, NULL)
        # sets (no callback, nothing done, no links), without a second
        # C call on every operation.
        self._req = ffi.new(_T.req_p)
        self._keep = keep
        self._cbs: list = []
        self._what = what
        self._finished = False
        self._err = None  # (what, text) for a failure's message

    def _posted(self, ret: int) -> "Request":
        """Called under the ctx's lock with the post's return."""
        if ret < 0:
            self._keep = None
            raise _error(ret, self._what)
        ctx = self._ctx
        ctx._inflight.add(self)
        if ctx._waiters:
            ctx._kick()
        return self

    def _finish(self) -> None:
        """Once tern set req->done: release what it held, run callbacks
        (outside the ctx's lock; exceptions they raise are logged)."""
        ctx = self._ctx
        with ctx._lock:
            if self._finished:
                return
            self._finished = True
            ctx._inflight.discard(self)
            self._keep = None
            cbs, self._cbs = self._cbs, []
        for cb in cbs:
            try:
                cb(self)
            except Exception:
                _log.exception("tern: exception in a done callback of %s",
                               self._what)

    def done(self) -> bool:
        """True once the operation completed (success or error). Does not
        drive progress."""
        if not self._finished and self._req.done:
            self._finish()
        return self._finished

    def wait(self, timeout: Optional[float] = None) -> "Request":
        """Drive the ctx's progress until done; raise tern.Timeout after
        @timeout seconds (the request stays in flight: wait again or
        cancel()). Returns the request."""
        _ms(timeout)
        if not self.done():
            self._ctx._wait(self, timeout)
        return self

    def result(self, timeout: Optional[float] = None) -> int:
        """Wait, then return the length (bytes, or the count for expect())
        or raise the operation's error."""
        self.wait(timeout)
        st = self._req.status
        if st:
            raise self._failure(st)
        return int(self._req.len)

    def _failure(self, st: int) -> Error:
        prov = ffi.string(self._req.errmsg).decode(errors="replace")
        if self._err is not None:
            text = self._err(st, int(self._req.len))
            if text is not None:
                return _error(st, self._what, prov, text)
        return _error(st, self._what, prov)

    def exception(self, timeout: Optional[float] = None):
        """Wait, then return the operation's error (None on success).
        Raises tern.Timeout when the wait itself times out."""
        self.wait(timeout)
        st = self._req.status
        return self._failure(st) if st else None

    @property
    def value(self) -> int:
        """Atomics: the remote word's old value; a quiet: how many of its
        operations failed."""
        return int(self._req.value)

    @property
    def imm(self) -> Optional[int]:
        """Receives: the immediate carried, or None."""
        return int(self._req.imm) if self._req.flags & 1 else None

    @property
    def nbytes(self) -> int:
        """req->len: bytes moved (a failed expectation: how many
        arrived)."""
        return int(self._req.len)

    def add_done_callback(self, fn: Callable[["Request"], Any]) -> None:
        """Call fn(request) once done: from the progress of whichever
        thread reaps it, or at once if already done."""
        if not self.done():
            with self._ctx._lock:
                if not self._finished:
                    self._cbs.append(fn)
                    return
        fn(self)

    def cancel(self) -> bool:
        """Ask tern to cancel; the request completes with tern.Cancelled
        from progress. False when it already completed or the provider
        holds it (it completes on its own)."""
        if self.done():
            return False
        ctx = self._ctx
        with ctx._lock:
            if self._finished or ctx._c is None:
                return False
            return lib.tern_req_cancel(ctx._c, self._req) == 0

    def __await__(self):
        import asyncio
        from . import aio
        if not self.done():
            fut = asyncio.get_running_loop().create_future()

            def _done(_r):
                if not fut.done():
                    fut.get_loop().call_soon_threadsafe(_set, fut)
            self.add_done_callback(_done)
            aio._watch(self._ctx)
            yield from fut.__await__()
        return self.result(0)


def _set(fut) -> None:
    if not fut.done():
        fut.set_result(None)


# ---- regions, peers ----------------------------------------------------

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
                    attr = _new_attr("mr_attr_p")
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
                    attr = _new_attr("mr_attr_p")
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


_NP = None  # numpy, imported on first use (only batches need it)
_I64 = None  # its int64 dtype


def _numpy():
    global _NP, _I64
    if _NP is None:
        try:
            import numpy
        except ImportError as e:
            import sys
            raise ImportError(
                "tern: batches need numpy: Debian's python3-numpy, with "
                "Debian's /usr/bin/python3 (this interpreter is %s): %s"
                % (sys.executable, e)) from e
        _NP, _I64 = numpy, numpy.dtype(numpy.int64)
    return _NP


def _i64(name: str, a) -> Any:
    """A contiguous int64 numpy view of an integer numpy array, integer
    torch tensor or sequence of ints: the array itself when it already is
    one (no call, no copy). Anything else raises TypeError naming @name.
    uint64 values keep their bits (C reads them as uint64)."""
    np = _NP if _NP is not None else _numpy()
    seq = False
    orig = a
    if type(a) is np.ndarray and a.dtype is _I64 and a.flags.c_contiguous \
            and a.ndim == 1:
        return a
    if hasattr(a, "detach") and hasattr(a, "numpy") and \
            hasattr(a, "dtype"):
        dt = a.dtype
        if dt.is_floating_point or dt.is_complex or \
                str(dt) == "torch.bool":
            raise TypeError("tern: %s must hold integers, not %s"
                            % (name, dt))
        a = a.detach().cpu().numpy()
    elif isinstance(a, (str, bytes, bytearray, memoryview)) or \
            not hasattr(a, "__len__") and not isinstance(a, np.ndarray):
        raise TypeError("tern: %s must be an array or sequence of "
                        "integers, not %s" % (name, type(a).__name__))
    else:
        seq = not isinstance(a, np.ndarray)
        orig = a
        try:
            a = np.asarray(a)
        except (ValueError, TypeError, OverflowError) as e:
            raise TypeError("tern: %s must be a sequence of integers (%s)"
                            % (name, e)) from None
    if a.ndim != 1:
        raise ValueError("tern: %s must be 1-D, not %d-D" % (name, a.ndim))
    if a.dtype.kind not in "iu":
        if a.size == 0 and seq:  # [] (numpy makes it float64)
            return np.zeros(0, np.int64)
        if not (seq or a.dtype.kind == "O"):
            raise TypeError("tern: %s must hold integers (int64), not %s"
                            % (name, a.dtype))
        # ints numpy would not keep as ints (0 and 2**63 together become
        # float64), or anything else: each checked, kept as its 64 bits
        vals = [_int(name + "[%d]" % i, v)
                for i, v in enumerate(orig if seq else a.tolist())]
        for i, v in enumerate(vals):
            if v < -(1 << 63) or v >= _U64:
                raise BoundsError(-_EBOUNDS, "%s[%d]" % (name, i),
                                  text="%d is outside every region" % v)
        return np.array([v % _U64 for v in vals], np.uint64).view(np.int64)
    if a.dtype.itemsize == 8 and a.dtype.kind == "u":
        return np.ascontiguousarray(a).view(np.int64)
    return np.ascontiguousarray(a, dtype=np.int64)


def _piece_dtype():
    np = _numpy()
    return np.dtype([("loff", "<u8"), ("roff", "<u8"), ("len", "<u8"),
                     ("region", "<u4"), ("pad", "<u4")])


_PIECE_DTYPE = None


def _arrays(local_offsets, remote_offsets, lengths):
    lo = _i64("local_offsets", local_offsets)
    ro = _i64("remote_offsets", remote_offsets)
    ln = _i64("lengths", lengths)
    n = ln.shape[0]
    if n == 0 or lo.shape != ln.shape or ro.shape != ln.shape:
        raise ValueError("tern: local_offsets, remote_offsets and lengths "
                         "must have the same length, at least 1 (got %d, "
                         "%d, %d)" % (lo.shape[0], ro.shape[0], n))
    return lo, ro, ln, n


def pieces(local_offsets, remote_offsets, lengths) -> Any:
    """A piece table: a numpy structured array laid out as struct
    tern_piece (loff, roff, len, region 0, pad 0), built with four
    vectorised column copies, which write_batch() and read_batch() hand to
    tern_write_pieces()/tern_read_pieces(). Three arrays cost the same
    (C takes them as they are); a table is one object to keep."""
    np = _numpy()
    global _PIECE_DTYPE
    if _PIECE_DTYPE is None:
        _PIECE_DTYPE = _piece_dtype()
    lo, ro, ln, n = _arrays(local_offsets, remote_offsets, lengths)
    t = np.empty((n, 4), np.int64)
    t[:, 0] = lo
    t[:, 1] = ro
    t[:, 2] = ln
    t[:, 3] = 0  # region 0, pad 0
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
            raise ValueError("tern: pass local_offsets, remote_offsets and "
                             "lengths, or one non-empty table from "
                             "tern.pieces() as local_offsets")
        if (t["pad"] != 0).any() or (t["region"] != 0).any():
            raise ValueError("tern: a piece table's region and pad must "
                             "be 0 (build it with tern.pieces())")
        return t, None
    if remote_offsets is None or lengths is None:
        raise ValueError("tern: pass local_offsets, remote_offsets and "
                         "lengths together")
    return None, _arrays(local_offsets, remote_offsets, lengths)


# cffi's own from_buffer under ffi.from_buffer(), which only adds an
# argument shuffle: a third of a microsecond per array.
_from_buffer = getattr(getattr(ffi, "_backend", None), "from_buffer", None)


def _u64p(a):
    if _from_buffer is not None:
        return _from_buffer(_T.u64_a, a, False)
    return ffi.from_buffer(_T.u64_a, a)


class Peer:
    """A remote ctx, made by ctx.peer(card)."""

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
        """Remove the peer: its queued operations and expectations
        complete tern.Cancelled. Twice, or after the ctx's close(), is a
        no-op."""
        ctx = self._ctx
        if self._p is None:
            return
        ctx._enter_open()
        with ctx._lock:
            self._close_dead()

    def _close_dead(self) -> bool:
        if self._p is not None and self._ctx._c is not None:
            lib.tern_peer_remove(self._p)
        self._p = None
        self._ctx._peers.discard(self)
        return True

    def __del__(self):
        try:
            if self._p is not None:
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
        attr = _new_attr("ctx_attr_p")
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
        """Close listeners, peers, regions, then the ctx; requests in
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


from .boot import connect, listen, Listener  # noqa: E402
from . import world  # noqa: E402
