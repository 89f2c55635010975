#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The man pages the build rendered (docs/man/CMakeLists.txt).

usage: tests/docs/man.py lint MAN-DIR
       tests/docs/man.py coverage MAN-DIR TERN SOURCE-DIR

lint: every page under MAN-DIR/man{1,3,7} renders with groff (-man -ww:
all warnings) and with man -l, and neither says a word on stderr.

coverage: the pages cannot drift from what they document:
- every exported function (tests/abi/symbols.txt) has its section-3 page,
  every public header its tern_<header>(3), and tern(3) exists;
- every command `tern --help` lists has tern-<command>(1), named in tern(1),
  and every option its `tern <command> --help` shows is in that page;
- there is no section-1 page of a command tern does not have;
- tern(1)'s ENVIRONMENT names exactly the TERN_* variables of `tern --help`.
Exit 1 with one line per problem.
"""
import glob
import os
import re
import subprocess
import sys

problems = []


def bad(msg):
    problems.append(msg)


def pages(man):
    out = []
    for sec in ('1', '3', '7'):
        out += sorted(glob.glob(os.path.join(man, 'man' + sec, '*.' + sec)))
    return out


def lint(man):
    found = pages(man)
    if not any(p.endswith('.1') for p in found) or \
            not any(p.endswith('.3') for p in found):
        bad('%s has no rendered pages: the build needs scdoc and python3 '
            '(scripts/deps.sh check installs them)' % man)
        return
    env = dict(os.environ, MANWIDTH='80', MAN_DISABLE_SECCOMP='1',
               LC_ALL='C.UTF-8', MANROFFSEQ='', PAGER='cat')
    for p in found:
        name = os.path.relpath(p, man)
        r = subprocess.run(['groff', '-t', '-man', '-ww', '-z', p],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0 or r.stderr.strip():
            bad('%s: groff -man -ww: %s' % (name, r.stderr.strip() or
                                            'exit %d' % r.returncode))
        r = subprocess.run(['man', '--warnings=w', '-l', p],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0 or r.stderr.strip() or not r.stdout.strip():
            bad('%s: man -l: %s' % (name, r.stderr.strip() or
                                    'exit %d, %d bytes' %
                                    (r.returncode, len(r.stdout))))
    if not problems:
        print('%d pages render without a warning' % len(found))


def read(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except OSError as e:
        bad('%s: %s' % (path, e.strerror))
        return ''


def run_help(tern, *args):
    r = subprocess.run([tern] + list(args) + ['--help'], capture_output=True,
                       text=True)
    if r.returncode != 0:
        bad('%s %s --help: exit %d' % (tern, ' '.join(args), r.returncode))
    return r.stdout


def coverage(man, tern, src):
    man3 = os.path.join(man, 'man3')
    with open(os.path.join(src, 'tests', 'abi', 'symbols.txt')) as f:
        # name@@NODE or name@NODE: one page per name
        symbols = sorted({ln.strip().split('@')[0] for ln in f
                          if ln.strip()})
    for fn in symbols:
        if not os.path.isfile(os.path.join(man3, fn + '.3')):
            bad('%s has no page %s(3)' % (fn, fn))
    for h in glob.glob(os.path.join(src, 'include', 'tern', '*.h')):
        base = os.path.basename(h)[:-2]
        page = 'tern' if base == 'tern' else 'tern_' + base
        if not os.path.isfile(os.path.join(man3, page + '.3')):
            bad('<tern/%s.h> has no page %s(3)' % (base, page))

    top = run_help(tern)
    m = re.search(r'^commands:\n(.*?)\n\n', top, re.S | re.M)
    cmds = re.findall(r'^  (\S+)', m.group(1), re.M) if m else []
    if not cmds:
        bad('tern --help lists no commands')
    tern1 = read(os.path.join(man, 'man1', 'tern.1'))
    for cmd in cmds:
        page = os.path.join(man, 'man1', 'tern-%s.1' % cmd)
        if not os.path.isfile(page):
            bad('tern %s has no page tern-%s(1) (docs/man/tern-%s.1.scd)' %
                (cmd, cmd, cmd))
            continue
        if ('tern-%s' % cmd) not in tern1:
            bad('tern(1) does not name tern-%s(1)' % cmd)
        text = read(page)
        for opt in sorted(set(re.findall(r'^ +(?:-\w, )?(--[\w-]+)',
                                         run_help(tern, cmd), re.M))):
            if opt not in text:
                bad('tern-%s(1) does not describe %s (tern %s --help '
                    'shows it)' % (cmd, opt, cmd))
    for p in glob.glob(os.path.join(man, 'man1', 'tern-*.1')):
        cmd = os.path.basename(p)[len('tern-'):-2]
        if cmd not in cmds:
            bad('tern-%s(1): tern has no command %s' % (cmd, cmd))

    m = re.search(r'^environment:\n(.*)', top, re.S | re.M)
    env_help = set(re.findall(r'^  (TERN_\w+)', m.group(1) if m else '',
                              re.M))
    m = re.search(r'^\.SH ENVIRONMENT\n(.*?)(^\.SH |\Z)', tern1, re.S | re.M)
    env_man = set(re.findall(r'\\fB(TERN_\w+)\\fR\n\.RS', m.group(1)
                             if m else ''))
    for v in sorted(env_help - env_man):
        bad('tern(1) ENVIRONMENT lacks %s (tern --help lists it)' % v)
    for v in sorted(env_man - env_help):
        bad('tern(1) ENVIRONMENT has %s, which tern --help does not list' % v)
    print('%d functions, %d commands, %d variables documented' %
          (len(symbols), len(cmds), len(env_help)))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == 'lint':
        lint(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == 'coverage':
        coverage(*sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
