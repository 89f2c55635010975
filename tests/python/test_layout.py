# SPDX-License-Identifier: MIT
"""The cffi declarations match the C headers: sizes and public offsets of
every struct the package shares with libtern, read from a C compiler."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tern._ffi import ffi, lib  # noqa: E402

INC = os.environ.get("TERN_INCLUDE") or os.path.join(
    os.path.dirname(__file__), "..", "..", "include")

FIELDS = {
    "tern_req": ["cb", "data", "done", "status", "len", "imm", "value",
                 "flags", "prov_errno", "errmsg", "_priv"],
    "tern_piece": ["loff", "roff", "len", "region", "pad"],
    "tern_mr_desc": ["base", "len", "flags", "nkeys", "keys"],
    "tern_ctx_attr": ["field_mask", "provider", "node", "domain", "rails", "log_level",
                      "post_batch", "flags", "stripe_chunk", "domains"],
    "tern_ctx_info": ["provider", "rails", "wait_fd", "hmem",
                      "stage_bytes"],
    "tern_mr_attr": ["field_mask", "buf", "len", "access", "kind", "device", "flags"],
    "tern_boot_info": ["card", "card_len", "descs", "ndesc", "ticket",
                       "ticket_len"],
    "tern_boot_server_attr": ["field_mask", "listen", "token", "on_hello", "data",
                              "claim_ms"],
    "tern_peer_rail": ["up", "cooldown_ms", "down_ms", "downs",
                       "rerouted", "probes"],
    "tern_world_attr": ["field_mask", "rank", "size", "timeout_ms", "lease_s",
                        "on_member", "arg"],
    "tern_world_store": ["set", "get", "arg", "prefix"],
}

# Constants cffi declares with their values (the headers' are
# expressions): the same numbers.
CONSTS = ["TERN_CTX_ATTR_FIELDS_ALL", "TERN_MR_ATTR_FIELDS_ALL",
          "TERN_BOOT_SERVER_ATTR_FIELDS_ALL", "TERN_WORLD_ATTR_FIELDS_ALL"]


def test_layout_matches_headers():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler to read the headers' layout with"
    lines = ['#include <stdio.h>', '#include <stddef.h>',
             '#include <tern/tern.h>', '#include <tern/hmem.h>',
             '#include <tern/boot.h>', '#include <tern/world.h>',
             'int main(void) {']
    for s, fs in FIELDS.items():
        lines.append('printf("%s %%zu\\n", sizeof(struct %s));' % (s, s))
        for f in fs:
            lines.append('printf("%s.%s %%zu\\n", offsetof(struct %s, %s));'
                         % (s, f, s, f))
    for c in CONSTS:
        lines.append('printf("%s %%llu\\n", (unsigned long long)%s);'
                     % (c, c))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "l.c"), os.path.join(d, "l")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.run([cc, "-I", INC, src, "-o", exe], check=True)
        out = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout
    for line in out.splitlines():
        key, val = line.split()
        if key in CONSTS:
            got = getattr(lib, key)
        elif "." in key:
            s, f = key.split(".")
            got = ffi.offsetof("struct " + s, f)
        else:
            got = ffi.sizeof("struct " + key)
        assert got == int(val), "%s: cffi %d, C %s" % (key, got, val)


def test_asan_loaded_where_expected():
    """python_asan (make asan-check) really runs under AddressSanitizer:
    its runtime is in the process and libtern is the ASan build."""
    if os.environ.get("TERN_EXPECT_ASAN") != "1":
        return
    import ctypes
    import tern
    assert hasattr(ctypes.CDLL(None), "__asan_init"), "libasan not loaded"
    assert "build-asan" in tern.LIB_PATH, tern.LIB_PATH
