# SPDX-License-Identifier: MIT
"""Request: one operation in flight, with wait(), result(), callbacks and
await."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._ffi import ffi, lib, T as _T
from ._args import _ms
from ._errors import Error, _error

_log = logging.getLogger("tern")

if TYPE_CHECKING:  # annotations only: _ctx imports this module
    from ._ctx import Context


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
