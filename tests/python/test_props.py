# SPDX-License-Identifier: MIT
"""Property-based tests (Debian's python3-hypothesis) of write_batch and
read_batch over the kinds, shapes and bounds of their arguments: either
every piece lands exactly (and nothing outside them changes), or the call
raises the documented exception before anything is posted (TypeError,
ValueError, tern.BoundsError). Never a crash, a hang (every wait is
bounded) or a silent truncation. Derandomized: the same examples every
run."""
import os
import sys
import time

import numpy as np
import pytest

try:
    from hypothesis import HealthCheck, given, settings, strategies as st
except ImportError as e:  # a failure, not a skip: deps.sh check has it
    pytest.fail("hypothesis is missing (%s): install Debian's "
                "python3-hypothesis (scripts/deps.sh check)" % e,
                allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tern  # noqa: E402

LOCAL, REMOTE = 4096, 3000
EXAMPLES = int(os.environ.get("TERN_PROP_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))

_CTX = {}


def pair_for(prov):
    """One pair of ctxs per provider for all examples (hypothesis calls
    the test many times)."""
    if prov not in _CTX:
        nd = "127.0.0.1" if prov == "tcp" else None
        a = tern.Context(prov, node=nd)
        b = tern.Context(prov, node=nd)
        loc = np.zeros(LOCAL, np.uint8)
        far = np.zeros(REMOTE, np.uint8)
        s = dict(a=a, b=b, loc=loc, far=far, rl=a.register(loc),
                 rf=b.register(far), peer=a.peer(b.card))
        keep = b.peer(a.card)  # dropping a Peer removes it
        s["d"] = s["rf"].descriptor()
        _CTX[prov] = s
    return _CTX[prov]


def teardown_module(_mod):
    for s in _CTX.values():
        s["a"].close()
        s["b"].close()
    _CTX.clear()


# an offset or length: mostly in range, some at or past the edges, some
# negative, some that overflow when added
ints = st.one_of(st.integers(0, 3000), st.integers(-64, 4200),
                 st.sampled_from([0, 1, 2999, 3000, 3001, 4095, 4096, 4097,
                                  2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1,
                                  -(2 ** 63), -1]))
KINDS = ["list", "int64", "int32", "uint64", "torch", "float64",
         "list-float", "bool", "2d", "strided"]


def as_kind(vals, kind):
    """vals as the argument kind; None when the values do not fit it
    (then the example is for another kind)."""
    if kind == "list":
        return list(vals)
    if kind == "list-float":
        return [float(v) for v in vals]
    if kind == "float64":
        return np.array(vals, np.float64)
    if kind == "bool":
        return np.array([bool(v) for v in vals], dtype=bool)
    if kind == "2d":
        return np.array(vals, np.int64).reshape(1, -1) if \
            all(-2 ** 63 <= v < 2 ** 63 for v in vals) else None
    if kind in ("int64", "int32", "strided", "torch"):
        lim = 2 ** 31 if kind == "int32" else 2 ** 63
        if not all(-lim <= v < lim for v in vals):
            return None
        if kind == "torch":
            import torch
            return torch.tensor(vals, dtype=torch.int64)
        if kind == "strided":
            a = np.zeros(2 * len(vals), np.int64)
            a[::2] = vals
            return a[::2]
        return np.array(vals, np.int32 if kind == "int32" else np.int64)
    if kind == "uint64":
        if not all(0 <= v < 2 ** 64 for v in vals):
            return None
        return np.array(vals, np.uint64)
    raise AssertionError(kind)


def expected(lo, ro, ln, kinds, args):
    """The documented outcome: an exception class, or None (lands).
    Each array is checked in turn (kind, then shape), then their
    lengths, then every piece against both regions."""
    for k, a in zip(kinds, args):
        if k in ("float64", "bool") or k == "list-float" and len(a):
            return TypeError
        if k == "2d":
            return ValueError
    if not (len(lo) == len(ro) == len(ln)) or len(ln) == 0:
        return ValueError
    for a, b, n in zip(lo, ro, ln):
        a, b, n = a % 2 ** 64, b % 2 ** 64, n % 2 ** 64  # C's uint64
        if a + n > LOCAL or b + n > REMOTE:
            return tern.BoundsError
    return None


def drive(s, req):
    t0 = time.monotonic()
    while not req.done():
        s["a"].progress()
        s["b"].progress()
        assert time.monotonic() - t0 < 20, "a batch did not complete"
    return req.result()


def check(prov, op, data):
    s = pair_for(prov)
    n = data.draw(st.integers(0, 6), "n")
    lo = data.draw(st.lists(ints, min_size=n, max_size=n), "lo")
    ro = data.draw(st.lists(ints, min_size=n, max_size=n), "ro")
    ln = data.draw(st.lists(ints, min_size=n, max_size=n), "ln")
    # now and then one array of another length
    if data.draw(st.integers(0, 9), "mismatch") == 0 and n > 0:
        ro = ro[:-1]
    kinds = [data.draw(st.sampled_from(KINDS), "kind%d" % i)
             for i in range(3)]
    args = [as_kind(v, k) for v, k in zip((lo, ro, ln), kinds)]
    if any(a is None for a in args):
        kinds = ["list"] * 3
        args = [list(lo), list(ro), list(ln)]
    want = expected(lo, ro, ln, kinds, args)
    rng = np.random.default_rng(len(lo) * 7 + 1)
    src = s["loc"] if op == "write" else s["far"]
    dst = s["far"] if op == "write" else s["loc"]
    src[:] = rng.integers(0, 256, src.size, np.uint8)
    dst[:] = 0xA5
    before = dst.copy()
    fn = s["peer"].write_batch if op == "write" else s["peer"].read_batch
    if want is not None:
        with pytest.raises(want):
            fn(s["rl"], args[0], s["d"], args[1], args[2])
        assert not s["a"]._inflight
        for _ in range(3):
            s["a"].progress()
            s["b"].progress()
        assert np.array_equal(dst, before), "bytes moved by a refused call"
        return
    total = drive(s, fn(s["rl"], args[0], s["d"], args[1], args[2]))
    assert total == sum(ln)
    # every byte a piece covers holds one of the bytes written to it
    # (pieces may overlap: their order is not defined); every other byte
    # is untouched
    allowed = {}
    for a, b, k in zip(lo, ro, ln):
        so, do = (a, b) if op == "write" else (b, a)
        for i in range(k):
            allowed.setdefault(do + i, set()).add(int(src[so + i]))
    for pos in range(dst.size):
        if pos in allowed:
            assert int(dst[pos]) in allowed[pos], pos
        else:
            assert dst[pos] == 0xA5, ("written outside the pieces", pos)


@pytest.mark.parametrize("prov", ["shm", "tcp"])
@pytest.mark.parametrize("op", ["write", "read"])
def test_batch_properties(prov, op):
    @SETTINGS
    @given(st.data())
    def prop(data):
        check(prov, op, data)
    prop()
