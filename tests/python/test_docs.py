# SPDX-License-Identifier: MIT
"""docs/python.md documents the package as it is: every name in
tern.__all__, every public method with its parameters in order, every
public attribute (as the C side's man-page coverage does for the
headers)."""
import inspect
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tern  # noqa: E402
import tern.world  # noqa: E402

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                   "docs", "python.md")

# Attributes set in __init__ (not visible on the class).
INSTANCE = {
    "Context": ["provider", "fabric", "rails", "has_wait_fd", "atomics"],
    "Region": ["obj", "addr", "nbytes", "access", "cuda"],
    "Listener": ["address"],
    "World": ["rank", "size", "peers", "descs"],
}
# Classes users construct themselves: their constructor's signature too.
CONSTRUCTED = {"Context", "Error"}


def text():
    with open(DOC) as f:
        return f.read()


def params_in_doc(doc, name):
    """Every parameter list written as NAME(...) in the doc."""
    out = []
    pat = r"(?<![\w])%s\(((?:[^()]|\([^()]*\))*)\)" % re.escape(name)
    for m in re.finditer(pat, doc):
        inner = " ".join(m.group(1).split())
        ps = []
        for p in re.sub(r"\([^()]*\)", "", inner).split(","):
            p = p.strip()
            if not p:
                continue
            ps.append(re.split(r"[=\s]", p)[0])
        out.append(ps)
    return out


def signature_names(fn):
    sig = inspect.signature(fn)
    return [p.name for p in sig.parameters.values() if p.name != "self"]


def check_callable(doc, missing, label, fn, name):
    want = signature_names(fn)
    got = params_in_doc(doc, name)
    if want not in got:
        missing.append("%s(%s) (the doc has %s)"
                       % (label, ", ".join(want), got or "nothing"))


def test_every_public_name_documented():
    doc = text()
    missing = []
    classes = {}
    for name in tern.__all__:
        obj = getattr(tern, name)
        if inspect.isclass(obj):
            classes[name] = obj
            if "tern.%s" % name not in doc and \
                    "`%s" % name not in doc:
                missing.append("tern.%s" % name)
            if name in CONSTRUCTED:
                check_callable(doc, missing, "tern.%s" % name,
                               obj.__init__, name)
        elif inspect.isfunction(obj):
            check_callable(doc, missing, "tern.%s" % name, obj, name)
        elif inspect.ismodule(obj):
            if "tern.%s" % name not in doc:
                missing.append("tern.%s" % name)
        elif "tern.%s" % name not in doc:
            missing.append("tern.%s (a constant)" % name)
    classes["World"] = tern.world.World
    check_callable(doc, missing, "tern.world.from_store",
                   tern.world.from_store, "from_store")
    for cname, cls in classes.items():
        if issubclass(cls, BaseException):
            continue
        for attr, val in vars(cls).items():
            if attr.startswith("_"):
                continue
            if isinstance(val, property):
                if "." + attr not in doc:
                    missing.append("%s.%s" % (cname, attr))
            elif inspect.isfunction(val):
                check_callable(doc, missing, "%s.%s" % (cname, attr), val,
                               attr)
        for attr in INSTANCE.get(cname, []):
            assert hasattr(cls, "__init__")
            if "." + attr not in doc:
                missing.append("%s.%s" % (cname, attr))
    assert not missing, "docs/python.md lacks:\n  " + "\n  ".join(missing)


def test_instance_attributes_exist():
    """INSTANCE above lists attributes that really exist."""
    with tern.Context("shm") as c:
        r = c.register(bytearray(8))
        for a in INSTANCE["Context"]:
            getattr(c, a)
        for a in INSTANCE["Region"]:
            getattr(r, a)
        w = tern.world.World(0, 1, {0: None}, {0: []})
        for a in INSTANCE["World"]:
            getattr(w, a)
        with tern.listen(c, "127.0.0.1:0") as lst:
            for a in INSTANCE["Listener"]:
                getattr(lst, a)
