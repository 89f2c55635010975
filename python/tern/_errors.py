# SPDX-License-Identifier: MIT
"""tern's exceptions: Error and its kinds, and the mapping from a negative
error code (what libtern returns) to the class that names it."""
from __future__ import annotations

import errno as _errno
from typing import Optional

from ._ffi import ffi, lib

_EACCESS = 262
_EBOUNDS = 263
_ECLOSED = 268
_EPEERGONE = 269
_EABORTED = 272


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
