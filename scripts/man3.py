#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Section-3 man pages, made from the public headers' doc comments.

usage: scripts/man3.py INCLUDE-DIR OUT-DIR VERSION

Writes into OUT-DIR (emptied of *.3 first):
- one page per TERN_API function (and static inline one: the attr
  structs' *_init), e.g. tern_write.3: its prototype, the
  /** */ comment right above it (functions declared one after another
  with no blank line share the comment above the first, and a page);
- one page per header, e.g. tern_req.3 for <tern/req.h>: the header's
  @file comment, every prototype, its types and constants as declared,
  and its functions with the first sentence of each;
- tern.3: the umbrella <tern/tern.h>, how to build, the header pages.

Nothing here is written by hand: a function without a doc comment is an
error (exit 1), so the headers stay the one source.
"""
import os
import re
import sys

def die(msg):
    print('man3.py: ' + msg, file=sys.stderr)
    sys.exit(1)


# ---- the header, cut into chunks -----------------------------------------

def is_inline(decl):
    """A static inline function of the header (its body follows)."""
    return re.match(r'static\s+inline\b', decl) is not None


def is_function(decl):
    """What gets a page: a TERN_API declaration or a static inline
    function."""
    return 'TERN_API' in decl or is_inline(decl)


def chunks(text):
    """Comments, preprocessor lines and declarations, in order, each as
    (kind, text, blank_before): kind is 'doc' (/** */), 'comment', 'pp' or
    'decl' (up to ';' outside braces); blank_before is True when a blank
    line separates it from the chunk before."""
    out = []
    i, n = 0, len(text)
    blank = False
    while i < n:
        if text[i] in ' \t':
            i += 1
            continue
        if text[i] == '\n':
            # two newlines in a row (spaces between) make a blank line
            j = i + 1
            while j < n and text[j] in ' \t':
                j += 1
            if j < n and text[j] == '\n':
                blank = True
            i += 1
            continue
        if text.startswith('/*', i):
            j = text.find('*/', i)
            if j < 0:
                die('unterminated comment')
            kind = 'doc' if text.startswith('/**', i) and \
                not text.startswith('/**<', i) else 'comment'
            out.append((kind, text[i:j + 2], blank))
            i = j + 2
        elif text[i] == '#':
            j = i
            while True:
                k = text.find('\n', j)
                if k < 0:
                    k = n
                if text[k - 1] == '\\':
                    j = k + 1
                    continue
                break
            out.append(('pp', text[i:k], blank))
            i = k
        elif text.startswith('extern "C"', i):
            i = text.find('{', i) + 1  # C++ linkage: not a declaration
        elif text[i] == '}':
            i += 1  # its end
        else:
            depth, j = 0, i
            while j < n:
                c = text[j]
                if text.startswith('/*', j):
                    j = text.find('*/', j) + 2
                    continue
                if c == '{':
                    depth += 1
                elif c == '}':
                    depth -= 1
                    # a static inline function ends with its body
                    if depth == 0 and is_inline(text[i:j]):
                        break
                elif c == ';' and depth == 0:
                    break
                j += 1
            out.append(('decl', text[i:j + 1], blank))
            i = j + 1
            # a comment on the same line belongs to the declaration
            m = re.match(r'[ \t]*(/\*.*?\*/)', text[i:], re.S)
            if m and '\n' not in text[i:i + m.start(1)]:
                kind, txt, b = out[-1]
                out[-1] = (kind, txt + ' ' + m.group(1), b)
                i += m.end()
        blank = False
    return out


def comment_lines(c):
    """The text of a /** */ comment, one string per line, stars gone."""
    body = c[3:-2] if c.startswith('/**') else c[2:-2]
    lines = []
    for ln in body.split('\n'):
        ln = re.sub(r'^\s*\* ?', '', ln) if ln.strip().startswith('*') \
            else ln.strip()
        lines.append(ln.rstrip())
    while lines and lines[0] == '':
        lines.pop(0)
    while lines and lines[-1] == '':
        lines.pop()
    return lines


# ---- roff ---------------------------------------------------------------

def esc(s):
    """Text for roff: backslashes escaped, the few non-ASCII characters of
    the headers as roff's own names (the pages stay ASCII)."""
    s = s.replace('\\', '\\e')
    s = s.replace('\u00b5', '\\(mc').replace('\u2014', '\\(em')
    if any(ord(c) > 127 for c in s):
        die('a character roff has no name for here: %r' % s)
    return s


def inline(s):
    """Doc-comment markup to roff: @p x italic, `x` bold."""
    s = esc(s)
    s = re.sub(r'@p\s+(\*?[A-Za-z_][A-Za-z0-9_]*)', r'\\fI\1\\fP', s)
    s = re.sub(r'`([^`]+)`', r'\\fB\1\\fP', s)
    return s


def line_out(s):
    """A text line that roff must not take for a request."""
    if s.startswith(('.', "'")):
        return '\\&' + s
    return s


def plain(s):
    s = re.sub(r'@p\s+', '', s)
    return s.replace('`', '')


def first_sentence(text):
    """The first sentence of @p text (one line), for NAME and lists."""
    m = re.search(r'(?<!e\.g)(?<!i\.e)(?<!etc)\.(\s|$)', text)
    s = text[:m.start() + 1] if m else text
    s = s.strip()
    if s.endswith('.'):
        s = s[:-1]
    return s[:1].lower() + s[1:] if s[:2] != s[:2].upper() else s


def paragraphs(lines):
    """Blocks of a comment: ('p', text) paragraphs and ('li', text) items
    of '- ' lists (continuation lines are indented)."""
    blocks, cur = [], None
    for ln in lines:
        if ln.strip() == '':
            cur = None
            continue
        if ln.startswith('- '):
            cur = ['li', ln[2:].strip()]
            blocks.append(cur)
        elif cur is not None and (cur[0] == 'p' or ln.startswith(' ')):
            cur[1] += ' ' + ln.strip()
        else:
            cur = ['p', ln.strip()]
            blocks.append(cur)
    return blocks


def roff_blocks(blocks):
    out = []
    for kind, text in blocks:
        if kind == 'li':
            out += ['.IP \\(bu 2', line_out(inline(text))]
        else:
            out += ['.PP', line_out(inline(text))]
    return out


def split_doc(lines):
    """A function comment as (description blocks, [(param, text)],
    return text). @param runs to the next tag or blank line; @return, which
    may start inside a line, to the next blank line."""
    desc, params, ret = [], [], []
    mode = 'desc'

    def add(text):
        if mode == 'param':
            params[-1][1] += ' ' + text.strip()
        elif mode == 'ret':
            ret.append(text.strip())
        else:
            desc.append(text)

    for ln in lines:
        s = ln.strip()
        if s == '':
            mode = 'desc'
            desc.append('')
            continue
        m = re.match(r'@param\s+(\S+)\s*(.*)', s)
        if m:
            params.append([m.group(1), m.group(2)])
            mode = 'param'
            continue
        if '@return' in s:
            before, after = ln.split('@return', 1)
            if before.strip():
                add(before.rstrip())
            mode = 'ret'
            add(after)
            continue
        add(ln)
    return paragraphs(desc), params, ' '.join(ret).strip()


# ---- prototypes ---------------------------------------------------------

def proto(decl):
    """(return type, name, [(type, param)]) of a TERN_API declaration or
    a static inline function (its body dropped)."""
    d = re.sub(r'/\*.*?\*/', '', decl, flags=re.S)
    if is_inline(d):
        d = re.sub(r'^static\s+inline\s+', '', d.split('{', 1)[0])
    d = ' '.join(d.replace('TERN_API', '').split()).rstrip(';').strip()
    m = re.match(r'(.*?)\b(tern_\w+)\s*\((.*)\)$', d)
    if not m:
        die('cannot read the prototype: ' + d)
    params = []
    if m.group(3).strip() != 'void':
        for p in m.group(3).split(','):
            p = p.strip()
            pm = re.match(r'(.*?)(\w+)$', p)
            if not pm or '(' in p:
                die('cannot read parameter %r of %s' % (p, m.group(2)))
            params.append((pm.group(1), pm.group(2)))
    return m.group(1).strip(), m.group(2), params


def synopsis_lines(ret, name, params):
    """.BI lines: the types bold, the parameter names italic."""
    head = ret + ('' if ret.endswith('*') else ' ') + name + '('
    if not params:
        return ['.BI "%svoid);"' % head]
    # parameters packed into lines of at most 72 columns, as in the header
    lines, cur, col = [], [], len(head)
    for i, (typ, pname) in enumerate(params):
        tail = ');' if i == len(params) - 1 else ','
        width = len(typ) + len(pname) + len(tail) + 1
        if cur and col + width > 72:
            lines.append(cur)
            cur, col = [], len(head)
        cur.append((typ, pname, tail))
        col += width
    lines.append(cur)
    out = []
    for n, line in enumerate(lines):
        args = []
        for i, (typ, pname, tail) in enumerate(line):
            lead = (head if n == 0 else ' ' * len(head)) if i == 0 else ' '
            args += ['"%s%s"' % (lead, typ), pname]
            args.append('"%s"' % tail)
        # .BI alternates bold and italic: merge neighbouring bold pieces
        merged = [args[0]]
        for a in args[1:]:
            if merged[-1].startswith('"') and a.startswith('"') and \
                    len(merged) % 2 == 1:
                merged[-1] = merged[-1][:-1] + a[1:]
            else:
                merged.append(a)
        out.append('.BI ' + ' '.join(merged))
    return out


# ---- one header -----------------------------------------------------------

class Header:
    def __init__(self, path):
        self.path = path
        self.base = os.path.basename(path)[:-2]
        with open(path, encoding='utf-8') as f:
            text = f.read()
        ch = chunks(text)
        self.file_doc = []
        self.groups = []  # [doc lines, [decl, ...]]
        self.types = []  # verbatim text of types and constants
        pending = None  # a comment waiting for the item right after it
        skip_depth = 0  # inside #if/#ifdef blocks other than the guard
        guard = None
        prev_fn = False
        self.last_type = False  # the chunk before was a type or constant
        for kind, txt, blank in ch:
            if kind in ('doc', 'comment'):
                if kind == 'doc' and '@file' in txt:
                    lines = comment_lines(txt)
                    self.file_doc = [ln for ln in lines
                                     if not ln.startswith('@file')]
                    pending = None
                else:
                    pending = (kind, txt) if not skip_depth else None
                prev_fn = False
                continue
            attached = pending if pending is not None and not blank \
                else None
            pending = None
            if kind == 'pp':
                word = re.match(r'#\s*(\w+)', txt).group(1)
                if word == 'ifndef' and guard is None:
                    guard = txt.split()[1]
                elif word in ('if', 'ifdef', 'ifndef'):
                    skip_depth += 1
                elif word == 'endif':
                    if skip_depth:
                        skip_depth -= 1
                elif word == 'define' and not skip_depth and \
                        txt.split()[1] != guard:
                    self.add_type(txt, attached, blank)
                else:
                    self.last_type = False
                prev_fn = False
                continue
            if skip_depth:
                self.last_type = False
                continue
            if is_function(txt):
                if attached and attached[0] == 'doc':
                    self.groups.append([comment_lines(attached[1]), [txt]])
                elif prev_fn and not blank and attached is None:
                    self.groups[-1][1].append(txt)
                else:
                    die('%s: %s has no doc comment right above it' %
                        (path, proto(txt)[1]))
                prev_fn, self.last_type = True, False
            else:
                self.add_type(txt, attached, blank)
                prev_fn = False

    def add_type(self, txt, comment, blank):
        """A type or constant, verbatim with its comment; lines that follow
        each other in the header (no comment, no blank line between) stay
        together."""
        if comment is None and not blank and self.last_type:
            self.types[-1] += '\n' + txt
        else:
            self.types.append((comment[1] + '\n' if comment else '') + txt)
        self.last_type = True

    def subject(self):
        blocks = paragraphs(self.file_doc)
        return first_sentence(blocks[0][1]) if blocks else self.base


# ---- pages ----------------------------------------------------------------

def th(name, version):
    return ['.\\" Generated by scripts/man3.py from include/tern/; '
            'do not edit.',
            '.TH %s 3 "" "tern %s" "tern Library Functions"' %
            (name, version), '.nh', '.ad l']


LIBRARY = ['.SH LIBRARY',
           'tern (\\fIlibtern\\fP, \\fB\\-ltern\\fP; '
           '\\fBpkg\\-config \\-\\-cflags \\-\\-libs tern\\fP, or CMake '
           '\\fBfind_package(tern)\\fP and the target \\fBtern::tern\\fP)']


def see_also(names):
    out = ['.SH SEE ALSO']
    for i, (n, s) in enumerate(names):
        out.append('.BR %s (%s)%s' % (n, s, ',' if i < len(names) - 1
                                      else ''))
    return out


def function_page(hdr, group, version):
    doc, decls = group
    protos = [proto(d) for d in decls]
    names = [p[1] for p in protos]
    blocks, params, ret = split_doc(doc)
    if not blocks and not ret:
        die('%s: the comment of %s says nothing' % (hdr.path, names[0]))
    summary = first_sentence(' '.join(
        t for k, t in blocks[:1])) if blocks else first_sentence(ret)
    out = th(names[0], version)
    out += ['.SH NAME', '%s \\- %s' % (', '.join(names),
                                       esc(plain(summary)))]
    out += LIBRARY
    out += ['.SH SYNOPSIS', '.nf',
            '.B #include <tern/%s.h>' % hdr.base, '.PP']
    for p in protos:
        out += synopsis_lines(*p)
    out += ['.fi', '.SH DESCRIPTION']
    out += roff_blocks(blocks) if blocks else ['See RETURN VALUE.']
    if params:
        out += ['.SH ARGUMENTS']
        for pname, text in params:
            out += ['.TP', '.I ' + pname, line_out(inline(text))]
    if ret:
        out += ['.SH RETURN VALUE', line_out(inline(ret))]
    out += see_also([('tern_' + hdr.base, 3), ('tern', 7)])
    return names, out


def header_page(hdr, version):
    name = 'tern_' + hdr.base
    out = th(name, version)
    out += ['.SH NAME', '%s \\- %s' % (name, esc(plain(hdr.subject())))]
    out += LIBRARY
    out += ['.SH SYNOPSIS', '.nf', '.B #include <tern/%s.h>' % hdr.base]
    out.append('.PP')
    for g in hdr.groups:
        for d in g[1]:
            out += synopsis_lines(*proto(d))
    out += ['.fi', '.SH DESCRIPTION']
    desc = paragraphs(hdr.file_doc)
    out += roff_blocks(desc) if desc else \
        ['.PP', 'The declarations of \\fI<tern/%s.h>\\fP.' % hdr.base]
    if hdr.types:
        out += ['.SH TYPES AND CONSTANTS', '.PP', '.in +4n', '.nf']
        for i, t in enumerate(hdr.types):
            if i:
                out.append('')
            for ln in t.expandtabs(8).split('\n'):
                out.append(line_out(esc(ln.rstrip())))
        out += ['.fi', '.in']
    out += ['.SH FUNCTIONS']
    for doc, decls in hdr.groups:
        blocks, _, ret = split_doc(doc)
        text = ' '.join(t for k, t in blocks[:1]) if blocks else ret
        for d in decls:
            out += ['.TP', '.BR %s (3)' % proto(d)[1],
                    line_out(inline(first_sentence(text)))]
    out += see_also([('tern', 3), ('tern', 7)])
    return name, out


def umbrella_page(headers, umbrella, version):
    out = th('tern', version)
    out += ['.SH NAME', 'tern \\- move memory between processes and hosts '
            'with RDMA, over libfabric (the C library)']
    out += LIBRARY
    out += ['.SH SYNOPSIS', '.nf', '.B #include <tern/tern.h>', '.fi',
            '.PP', '.in +4n', '.nf',
            'cc app.c $(pkg\\-config \\-\\-cflags \\-\\-libs tern)',
            '.fi', '.in', '.PP', 'or in CMake:', '.PP', '.in +4n', '.nf',
            'find_package(tern REQUIRED)',
            'target_link_libraries(app PRIVATE tern::tern)', '.fi', '.in',
            '.SH DESCRIPTION']
    out += roff_blocks(paragraphs(umbrella.file_doc))
    out += ['.PP', 'Every call returns 0 (or a non\\-negative count) on '
            'success and a negative error code on failure; '
            '\\fBtern_strerror\\fP(3) describes it. The concepts (ctx, '
            'rail, region, descriptor, card, peer, the completion contract) '
            'are in \\fBtern\\fP(7). Each header has a page listing its '
            'types and functions, and each function a page of its own:']
    for h in headers:
        out += ['.TP', '.BR tern_%s (3)' % h.base,
                '\\fI<tern/%s.h>\\fP: %s' % (h.base, esc(plain(h.subject())))]
    out += see_also([('tern', 1), ('tern', 7)])
    return out


def main():
    if len(sys.argv) != 4:
        die('usage: man3.py INCLUDE-DIR OUT-DIR VERSION')
    inc, outdir, version = sys.argv[1:]
    tdir = os.path.join(inc, 'tern')
    umbrella = Header(os.path.join(tdir, 'tern.h'))
    # the headers in the umbrella's order, then any it does not include
    with open(os.path.join(tdir, 'tern.h'), encoding='utf-8') as f:
        order = re.findall(r'^#include <tern/(\w+)\.h>', f.read(), re.M)
    order += sorted(f[:-2] for f in os.listdir(tdir) if f.endswith('.h')
                    and f[:-2] not in order and f != 'tern.h')
    headers = [Header(os.path.join(tdir, n + '.h')) for n in order]
    pages = {}
    for h in headers:
        name, lines = header_page(h, version)
        pages[name] = lines
        for g in h.groups:
            fnames, lines = function_page(h, g, version)
            for fn in fnames:
                if fn in pages:
                    die('%s is declared twice' % fn)
                pages[fn] = lines
    pages['tern'] = umbrella_page(headers, umbrella, version)
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        if f.endswith('.3'):
            os.remove(os.path.join(outdir, f))
    for name, lines in pages.items():
        with open(os.path.join(outdir, name + '.3'), 'w',
                  encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
