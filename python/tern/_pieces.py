# SPDX-License-Identifier: MIT
"""Batches: offset and length arrays as libtern takes them (int64 views,
no copy where possible), and piece tables (tern.pieces())."""
from __future__ import annotations

from typing import Any

from ._ffi import ffi, T as _T
from ._args import _U64, _int
from ._errors import BoundsError, _EBOUNDS

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
