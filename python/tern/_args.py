# SPDX-License-Identifier: MIT
"""Argument checks, run before anything is exported or posted: integers,
offsets, immediates, atomic words, timeouts, and the buffer a region
registers (with its export released on any failure)."""
from __future__ import annotations

import math
import operator
from typing import Any, Optional

from ._ffi import ffi, T as _T
from ._errors import BoundsError, _EBOUNDS

_U32 = 1 << 32
_U64 = 1 << 64
_MS_MAX = (1 << 31) - 1


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
