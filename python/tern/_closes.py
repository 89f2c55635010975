# SPDX-License-Identifier: MIT
"""Deferred closes: what finalizers drop is queued here and closed from a
safe place (the next call into the package, a ctx's close, exit), never
from the finalizer itself."""
from __future__ import annotations

import atexit
import collections

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
