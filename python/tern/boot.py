# SPDX-License-Identifier: MIT
"""tern's TCP bootstrap (tern/boot.h): exchange cards and descriptors.

    srv = tern.listen(ctx, ":0", token="s3cret", regions=[region])
    peer, descs = srv.accept(timeout=5)          # server side
    peer, descs = tern.connect(ctx, srv.address, token="s3cret",
                               regions=[region])  # client side
"""
import collections
import os
import time
from typing import List, Optional, Sequence, Tuple

from ._ffi import ffi, lib, T as _T, new_attr as _new_attr
from ._args import _ms
from ._errors import ClosedError, Timeout, _check, _error
from ._regions import _region

_DESCS_MAX = 8
_DESC_MAX = 24 + 8 * 32


def _info(ctx, regions: Sequence) -> object:
    if len(regions) > _DESCS_MAX:
        raise ValueError("tern: at most %d regions per hello" % _DESCS_MAX)
    regions = [_region("regions[%d]" % i, r) for i, r in enumerate(regions)]
    info = ffi.new(_T.boot_info_p)
    card = ctx.card
    ffi.memmove(info.card, card, len(card))
    info.card_len = len(card)
    for i, r in enumerate(regions):
        r._h()
        info.descs[i] = r._desc[0]
    info.ndesc = len(regions)
    return info


def _descs(info) -> List[bytes]:
    out = []
    buf = ffi.new(_T.char_a, _DESC_MAX)
    for i in range(info.ndesc):
        n = _check(lib.tern_mr_desc_pack(ffi.addressof(info.descs[i]), buf,
                                         _DESC_MAX), "descriptor")
        out.append(bytes(ffi.buffer(buf, n)))
    return out


def connect(ctx, addr: str, token: Optional[str] = None,
            regions: Sequence = (), timeout: float = 5.0
            ) -> Tuple[object, List[bytes]]:
    """Dial a tern.listen() server ("host:port"), trade hellos, add the
    server as a peer. Returns (peer, the server's descriptors)."""
    if not isinstance(addr, str):
        raise TypeError("tern: addr must be a str (\"host:port\"), not %s"
                        % type(addr).__name__)
    ms = _ms(timeout)
    ctx._enter()
    mine = _info(ctx, regions)
    why = ffi.new(_T.char_a, 256)
    fd = ffi.new(_T.int_p)
    ret = lib.tern_boot_dial(addr.encode(), ms, fd, why, 256)
    if ret < 0:
        raise _error(ret, "connect %s" % addr, ffi.string(why).decode())
    try:
        theirs = ffi.new(_T.boot_info_p)
        tok = token.encode() if token is not None else ffi.NULL
        ret = lib.tern_boot_hello(fd[0], tok, mine, theirs, ms, why, 256)
        if ret < 0:
            raise _error(ret, "hello %s" % addr, ffi.string(why).decode())
    finally:
        os.close(fd[0])
    peer = ctx.peer(bytes(ffi.buffer(theirs.card, theirs.card_len)))
    return peer, _descs(theirs)


class Listener:
    """A bootstrap server served from the ctx's progress."""

    def __init__(self, ctx, addr: str = ":0", token: Optional[str] = None,
                 regions: Sequence = ()):
        self._ctx = ctx
        self._hellos = collections.deque()
        self._keep = []
        ctx._enter()
        attr = _new_attr("boot_attr_p")
        a = ffi.new(_T.char_a, addr.encode())
        self._keep.append(a)
        attr.listen = a
        if token is not None:
            t = ffi.new(_T.char_a, token.encode())
            self._keep.append(t)
            attr.token = t

        hellos = self._hellos

        # Runs inside tern's progress: it only copies and appends (no
        # reference to the Listener, no call into libtern).
        @ffi.callback(_T.boot_cb)
        def on_hello(srv, info, text, data):
            try:
                hellos.append(
                    (bytes(ffi.buffer(info.card, info.card_len)),
                     _descs(info)))
            except Exception:  # never unwind through C
                pass
        self._cb = on_hello
        attr.on_hello = on_hello
        self._mine = _info(ctx, regions)
        p = ffi.new(_T.boot_srv_pp)
        why = ffi.new(_T.char_a, 256)
        with ctx._lock:
            ret = lib.tern_boot_server_open(ctx._h(), attr, self._mine, p,
                                            why, 256)
        if ret < 0:
            raise _error(ret, "listen %s" % addr, ffi.string(why).decode())
        self._srv = p[0]
        buf = ffi.new(_T.char_a, 300)
        _check(lib.tern_boot_server_addr(self._srv, buf, 300), "listen")
        self.address = ffi.string(buf).decode()
        ctx._boot.add(self)

    def accept(self, timeout: Optional[float] = None
               ) -> Tuple[object, List[bytes]]:
        """Drive progress until a client's hello arrives; returns (peer,
        the client's descriptors)."""
        _ms(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._hellos:
            if self._srv is None:
                raise ClosedError("listener")
            ctx = self._ctx
            ctx._enter()
            with ctx._lock:
                lib.tern_wait(ctx._h(), ffi.NULL, 10)
            ctx._reap()
            if deadline is not None and time.monotonic() > deadline:
                raise Timeout(-110, "accept", text="no client's hello "
                              "within %g s" % timeout)
        card, descs = self._hellos.popleft()
        return self._ctx.peer(card), descs

    def close(self) -> None:
        """Stop serving; clients already accepted stay peers. Twice, or
        after the ctx's close(), is a no-op."""
        with self._ctx._lock:
            if self._srv is None:
                return
            if self._ctx._c is not None:
                lib.tern_boot_server_close(self._srv)
            self._srv = None
            self._ctx._boot.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def listen(ctx, addr: str = ":0", token: Optional[str] = None,
           regions: Sequence = ()) -> Listener:
    """Serve tern's bootstrap on addr ("host:port", ":0" for any port)."""
    return Listener(ctx, addr, token, regions)
