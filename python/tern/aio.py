# SPDX-License-Identifier: MIT
"""asyncio integration: the ctx's wait fd in the running loop.

`await request` registers tern_ctx_fd() with loop.add_reader(); when it is
readable tern runs one progress pass (tern_run NOWAIT), then re-arms
(tern_ctx_arm) and sets a timer for tern_ctx_timeout(). Where the ctx has
no fd, it polls with adaptive sleeps from 50 us doubling up to 20 ms (the
C loop's TERN_POLL_SLEEP_MAX_US), reset by every completion.
"""
import asyncio
import errno

from ._ffi import lib

_RUN_NOWAIT = 2
_POLL_MIN = 50e-6
_POLL_MAX = 20e-3


class _Watcher:
    def __init__(self, ctx, loop):
        self.ctx = ctx
        self.loop = loop
        self.fd = ctx._fd
        self.timer = None
        self.sleep = _POLL_MIN
        self.closed = False
        self.reading = False
        self.kick()

    def run(self):
        if self.closed:
            return
        ctx = self.ctx
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        with ctx._lock:
            c = ctx._c
            if c is None:
                return
            n = lib.tern_run(c, _RUN_NOWAIT)
            if ctx._busy:
                ctx._drain_dead()
        ctx._reap()
        if not ctx._inflight:
            # nothing awaited: stop watching (a level-triggered fd left
            # unarmed would wake us in a loop); the next await kicks
            self._unwatch()
            return
        if self.fd < 0:
            self.sleep = _POLL_MIN if n > 0 else min(self.sleep * 2,
                                                     _POLL_MAX)
            self.timer = self.loop.call_later(self.sleep, self.run)
            return
        with ctx._lock:
            c = ctx._c
            if c is None:
                return
            ret = lib.tern_ctx_arm(c)
            t = lib.tern_ctx_timeout(c)
        if ret == -errno.EAGAIN:
            self.timer = self.loop.call_soon(self.run)
            return
        if t >= 0:
            self.timer = self.loop.call_later(t / 1000.0, self.run)

    def kick(self):
        if self.fd >= 0 and not self.reading:
            self.loop.add_reader(self.fd, self.run)
            self.reading = True
        # a new request is posted by the next progress pass: run soon,
        # not at a poll timer's end
        if isinstance(self.timer, asyncio.TimerHandle):
            self.timer.cancel()
            self.timer = None
        if self.timer is None:
            self.timer = self.loop.call_soon(self.run)

    def _unwatch(self):
        if self.reading and not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        self.reading = False

    def close(self):
        if self.closed:
            return
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        self._unwatch()
        self.ctx._aio = None


def _watch(ctx):
    loop = asyncio.get_running_loop()
    w = ctx._aio
    if w is not None and (w.loop is not loop or w.closed):
        w.close()
        w = None
    if w is None:
        ctx._aio = _Watcher(ctx, loop)
    else:
        w.kick()
