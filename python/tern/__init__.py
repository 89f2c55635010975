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
from ._ffi import ffi, lib, LIB_PATH, PRIV_SIZE  # noqa: F401

# The package's topics live in private modules (_errors, _args, _closes,
# _requests, _regions, _pieces, _peers, _ctx); every public name is
# re-exported here, where it always was: tern.Context, tern.Region, ...
from ._errors import (  # noqa: F401
    Error, Timeout, Cancelled, Aborted, PeerGone, AccessError, BoundsError,
    ClosedError, _check, _error)
from ._requests import Request  # noqa: F401
from ._regions import (  # noqa: F401
    ALL, LOCAL, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE, Region, _desc)
from ._pieces import pieces  # noqa: F401
from ._peers import Peer  # noqa: F401
from ._ctx import Context  # noqa: F401

__all__ = [
    "Context", "Region", "Peer", "Request", "Error", "Timeout", "Cancelled",
    "Aborted", "PeerGone", "AccessError", "BoundsError", "ClosedError",
    "LOCAL", "REMOTE_READ", "REMOTE_WRITE", "REMOTE_ATOMIC", "ALL",
    "version", "LIB_PATH", "PRIV_SIZE", "connect", "listen", "Listener",
    "world", "pieces",
]


def version() -> str:
    """libtern's version string."""
    return ffi.string(lib.tern_version()).decode()


from .boot import connect, listen, Listener  # noqa: E402
from . import world  # noqa: E402
