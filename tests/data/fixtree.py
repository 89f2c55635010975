# SPDX-License-Identifier: MIT
"""Write, or with --check compare, fixture trees of files and symlinks
(shared by gen_counters.py and gen_doctor.py)."""
import os
import sys


def main(top, fixtures, script, what):
    check = "--check" in sys.argv[1:]
    bad = []
    for fixture, make in fixtures.items():
        root = os.path.join(top, fixture)
        files, links = make()
        for rel, text in sorted(files.items()):
            path = os.path.join(root, rel)
            if check:
                try:
                    with open(path) as f:
                        same = f.read() == text
                except OSError:
                    same = False
                if not same or os.path.islink(path):
                    bad.append(path)
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        for rel, target in sorted(links.items()):
            path = os.path.join(root, rel)
            if check:
                if not os.path.islink(path) or os.readlink(path) != target:
                    bad.append(path)
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(target, path)
        if check:
            # Nothing else in the tree: a stale file would be read too.
            want = {os.path.join(root, r) for r in files} | \
                {os.path.join(root, r) for r in links}
            for dirpath, dirnames, names in os.walk(root):
                for n in names + [x for x in dirnames
                                  if os.path.islink(os.path.join(dirpath, x))]:
                    path = os.path.join(dirpath, n)
                    if path not in want:
                        bad.append(path + " (not generated)")
    for b in bad:
        print("differs from " + script + ": " + b)
    if check and not bad:
        print(what + " fixtures: up to date")
    return 1 if bad else 0
