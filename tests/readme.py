#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README and docs/cli.md against the CLI: every `tern CMD ...` line
in their code blocks must name a command `tern --help` lists, and every
--option on it must be one that `tern CMD --help` shows. Every `make X` and
`sh run.sh X` names a real target. So a renamed or removed flag fails
here, not in a user's first minute.

usage: tests/readme.py TERN [FILE...]   (default: README.md docs/cli.md)
"""
import os
import re
import subprocess
import sys

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def help_text(tern, *args):
    p = subprocess.run([tern, *args, "--help"], capture_output=True,
                       text=True, timeout=30)
    return p.stdout + p.stderr


def code_lines(path):
    """(line number, text) of each line inside ``` blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                inside = not inside
                continue
            if inside:
                yield n, line.rstrip("\n")


def make_targets():
    with open(os.path.join(top, "Makefile"), encoding="utf-8") as f:
        return set(re.findall(r"^([a-z][a-z0-9-]*):", f.read(), re.M))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    tern = sys.argv[1]
    files = sys.argv[2:] or [os.path.join(top, "README.md"),
                             os.path.join(top, "docs", "cli.md")]
    top_help = help_text(tern)
    block = top_help.split("commands:", 1)[-1].split("\n\n", 1)[0]
    commands = set(re.findall(r"^  ([a-z]+)\s", block, re.M))
    targets = make_targets()
    helps = {}
    bad = 0
    checked = 0
    for path in files:
        rel = os.path.relpath(path, top)
        for n, line in code_lines(path):
            cmd = line.lstrip("$ ").split("#")[0]
            m = re.match(r"(?:\S*/)?tern ([a-z]+)\b(.*)", cmd)
            if m and not re.match(r"(?:\S*/)?tern [a-z]+ \d", cmd):
                sub, rest = m.group(1), m.group(2)
                checked += 1
                if sub not in commands:
                    print(f"{rel}:{n}: `tern {sub}`: no such command "
                          f"(tern --help lists {', '.join(sorted(commands))})")
                    bad += 1
                    continue
                if sub not in helps:
                    helps[sub] = help_text(tern, sub)
                for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    if not re.search(re.escape(opt) + r"(?![a-z0-9-])",
                                     helps[sub]):
                        print(f"{rel}:{n}: `tern {sub} {opt}`: "
                              f"`tern {sub} --help` has no {opt}")
                        bad += 1
                continue
            for tgt in re.findall(r"^\s*(?:\$ )?make ([a-z][a-z0-9-]*)",
                                  cmd):
                checked += 1
                if tgt not in targets:
                    print(f"{rel}:{n}: `make {tgt}`: no such target")
                    bad += 1
            m = re.match(r"^\s*(?:\$ )?sh run\.sh ([a-z-]+)", cmd)
            if m:
                checked += 1
                if m.group(1) not in ("demo", "check"):
                    print(f"{rel}:{n}: `sh run.sh {m.group(1)}`: run.sh "
                          "takes demo or check")
                    bad += 1
    if checked == 0:
        print("readme: found no command to check (wrong files?)")
        return 1
    if bad:
        print(f"readme: {bad} line(s) drifted from the CLI")
        return 1
    print(f"readme: {checked} command lines agree with the CLI's --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
