# SPDX-License-Identifier: MIT
"""The install docs/python.md documents, run as it is written there (the
venv's path replaced by a scratch directory): on Debian 12 and 13, as a
user or as root (CI's pristine roots), without touching the system
Python, offline."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
DOC = os.path.join(SRC, "docs", "python.md")
VENV = "/opt/tern-venv"


def documented_commands():
    with open(DOC) as f:
        doc = f.read()
    sec = doc[doc.index("## Install"):]
    sec = sec[:sec.index("\n## ", 1)]
    m = re.search(r"```sh\n(.*?)```", sec, re.S)
    assert m, "docs/python.md's Install has no ```sh block"
    cmds = [ln for ln in m.group(1).splitlines() if ln.strip()]
    assert any("venv" in c for c in cmds) and \
        any("pip install" in c for c in cmds), cmds
    return cmds


def test_documented_venv_install():
    cmds = documented_commands()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_NO_INPUT"] = "1"
    env["PIP_NO_CACHE_DIR"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    d = tempfile.mkdtemp(prefix="tern-venv-")
    try:
        venv = os.path.join(d, "venv")
        out = ""
        for c in cmds:
            c = c.replace(VENV, venv)
            r = subprocess.run(["sh", "-c", c], cwd=SRC, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, (c, r.stdout, r.stderr)
            out = r.stdout
        assert out.strip() == tern_version(), out
        # the venv's own copy, seen from elsewhere, with Debian's
        # numpy (and cffi) through the system site
        r = subprocess.run(
            [os.path.join(venv, "bin", "python"), "-c",
             "import tern, numpy, cffi; print(tern.__file__)"],
            cwd="/", env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(venv), r.stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tern_version():
    import tern
    return tern.version()


def test_wrong_interpreter_says_so():
    """An interpreter without cffi: the ImportError names the package
    and the interpreter."""
    d = tempfile.mkdtemp(prefix="tern-nocffi-")
    try:
        with open(os.path.join(d, "cffi.py"), "w") as f:
            f.write("raise ImportError('No module named cffi')\n")
        env = dict(os.environ, PYTHONPATH=d + os.pathsep +
                   os.path.join(SRC, "python"))
        r = subprocess.run([sys.executable, "-c", "import tern"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert "python3-cffi" in r.stderr and sys.executable in r.stderr, \
            r.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)
