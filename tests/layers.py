#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering rules of docs/architecture.md, read off the tree.

usage: tests/layers.py [SOURCE-DIR]

Fails (exit 1, one line per breach) when:
- code outside src/prov/ includes a libfabric header, calls fi_*() or
  names an FI_* constant;
- code outside src/topo/ calls hwloc, or outside src/hmem/ calls CUDA's
  driver API (cu*());
- a folder includes a header of a folder it may not depend on (the table
  ALLOWED below), the engine's private header above all;
- the folders' include graph has a cycle.
"""
import os
import re
import sys

top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                      os.path.join(os.path.dirname(__file__), '..'))

# What each folder may include besides itself and the public headers
# (include/tern/). Data flows down: every edge points down this list.
ALLOWED = {
    'tools': {'apps', 'bench', 'src/core', 'src/wire', 'src/boot',
              'src/topo'},
    'bench': {'apps', 'src/core', 'src/wire'},
    'apps': {'src/core', 'src/wire'},
    'src/world': {'src/engine', 'src/wire', 'src/core'},
    'src/engine': {'src/prov', 'src/wire', 'src/hmem', 'src/topo',
                   'src/core'},
    'src/boot': {'src/wire', 'src/core'},
    'src/prov': {'src/wire', 'src/core'},
    'src/hmem': {'src/core'},
    'src/topo': {'src/core'},
    'src/wire': {'src/core'},
    'src/core': set(),
}
# The benchmarks of the library's internals may look inside it.
EXEMPT = {'bench/inproc.c'}

INC = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)
FI_CALL = re.compile(r'\bfi_[a-z_0-9]+\s*\(')
FI_CONST = re.compile(r'\bFI_[A-Z][A-Z_0-9]*\b')
HWLOC = re.compile(r'\bhwloc_[a-z_0-9]+\s*\(')
CUDA = re.compile(r'\bcu[A-Z][A-Za-z0-9_]*\s*\(')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def folder_of(rel):
    parts = rel.split('/')
    if parts[0] == 'src' and len(parts) > 2:
        return 'src/' + parts[1]
    if parts[0] in ('tools', 'bench', 'apps') and len(parts) > 1:
        return parts[0]
    return None


def resolve(rel, name):
    """The folder a quoted include lands in, or None (system, public)."""
    here = os.path.dirname(rel)
    for base in (here, 'src', '.', 'bench'):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(top, cand)):
            return folder_of(cand)
    return None


def main():
    bad = []
    edges = {}
    for root in ('src', 'apps', 'bench', 'tools'):
        for dirpath, _, files in os.walk(os.path.join(top, root)):
            for f in sorted(files):
                if not f.endswith(('.c', '.h')):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, top)
                me = folder_of(rel)
                if me is None:
                    continue
                text = open(path, encoding='utf-8', errors='replace').read()
                code = STRING.sub('""', COMMENT.sub(' ', text))
                if rel in EXEMPT or rel.startswith('bench/raw/'):
                    continue
                for kind, name in INC.findall(text):
                    if kind == '<':
                        if name.startswith('rdma/') and me != 'src/prov':
                            bad.append(f'{rel}: includes <{name}> '
                                       '(only src/prov/ may)')
                        if name.startswith('hwloc') and me != 'src/topo':
                            bad.append(f'{rel}: includes <{name}> '
                                       '(only src/topo/ may)')
                        continue
                    to = resolve(rel, name)
                    if to is None or to == me:
                        continue
                    edges.setdefault(me, set()).add(to)
                    if to not in ALLOWED.get(me, set()):
                        bad.append(f'{rel}: includes "{name}" ({to}), '
                                   f'which {me} may not depend on')
                if me != 'src/prov':
                    m = FI_CALL.search(code) or FI_CONST.search(code)
                    if m:
                        bad.append(f'{rel}: names {m.group(0).strip("( ")}'
                                   ' (only src/prov/ reaches libfabric)')
                if me != 'src/topo' and HWLOC.search(code):
                    bad.append(f'{rel}: calls hwloc (only src/topo/ may)')
                if me != 'src/hmem' and CUDA.search(code):
                    bad.append(f'{rel}: calls CUDA (only src/hmem/ may)')
    # A cycle in the folders' include graph.
    state = {}

    def visit(n, stack):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                bad.append('include cycle across folders: ' +
                           ' -> '.join(cyc))
            elif m not in state:
                visit(m, stack + [m])
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n, [n])
    for line in bad:
        print('layers: ' + line)
    if bad:
        print(f'layers: {len(bad)} breach(es); the rules are in '
              'docs/architecture.md')
        return 1
    print('layers: ok (%d folders, %d edges)' %
          (len(edges), sum(len(v) for v in edges.values())))
    return 0


if __name__ == '__main__':
    sys.exit(main())
