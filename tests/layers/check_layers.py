#!/usr/bin/env python3
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""The plugin's layers, checked against the table that documents them.

docs/design.md, section "Layout", holds a table: one row per folder of
plugin/, the layers it may include, and whether it may include Mosquitto's
headers. This script reads that table and fails on:
  - a folder of plugin/ the table does not name, or a row with no folder;
  - an #include "..." of a project header written without its folder
    (every include names its layer: "util/topic.h"), or of a folder the
    table does not let the file's folder include;
  - an #include of a Mosquitto header (<mosquitto*.h>, <mqtt_protocol.h>)
    outside the folders the table allows it in;
  - an #include of a header the section names private to its folder (the
    line "Headers private to their folder ...: `engine/engine.h`.") from a
    file of another folder;
  - a function the built libraries define whose prefix (before "__") is
    neither its file's name nor one of the shared prefixes the section
    lists (the line "Shared prefixes: `dlq__` ...");
  - an import circle between files: a module is a .c file with the header
    of the same name (a header alone is a module too); a module imports
    another when one of its files includes one of the other's, or when its
    object calls a function the other's object defines (read with nm from
    the built static libraries given with --lib).
Usage: check_layers.py --root DIR [--nm NM --lib LIB.a ...]
       check_layers.py --self-test --root DIR [...]: also plants each kind of
       fault in a copy of the tree and checks that each is reported.
Exits 0 when the tree keeps the table, 1 (with every problem listed) when
not, 2 on a usage error.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
MOSQUITTO = re.compile(r'^(mosquitto[^/]*\.h|mqtt_protocol\.h)$')
PUBLIC = 'mosquitto_dlq.h'  # include/: the public contract, for every layer


def layout_section(design):
    text = open(design, encoding='utf-8').read()
    m = re.search(r'^## Layout\n(.*?)(?=^## )', text, re.S | re.M)
    if not m:
        raise SystemExit('%s: no "## Layout" section' % design)
    return m


def read_private(design):
    """The headers (folder/name.h) that only files of their folder may include."""
    m = re.search(r'^Headers private to their folder[^:]*:(.*?)$', layout_section(design).group(1), re.M)
    return set(re.findall(r'`(\w+/\w+\.h)`', m.group(1))) if m else set()


def read_shared_prefixes(design):
    """The function prefixes several files may define (without the '__')."""
    m = re.search(r'Shared\s+prefixes:(.*?)\.\s', layout_section(design).group(1), re.S)
    return set(re.findall(r'`(\w+?)__`', m.group(1))) if m else set()


def read_table(design):
    """{folder: (set of folders it may include, may include Mosquitto headers)}."""
    m = layout_section(design)
    rows = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if not line.startswith('|') or len(cells) < 4:
            continue
        folder = re.fullmatch(r'`plugin/(\w+)/`', cells[0])
        if not folder:
            continue
        may = set(re.findall(r'`(\w+)/`', cells[2]))
        mosq = cells[3].lower().startswith('yes')
        rows[folder.group(1)] = (may, mosq)
    if not rows:
        raise SystemExit('%s: the Layout section has no table of plugin/ folders' % design)
    return rows


def sources(plugin):
    for folder in sorted(os.listdir(plugin)):
        path = os.path.join(plugin, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if name.endswith(('.c', '.h')):
                yield folder, name


def module_of(folder, name):
    return folder + '/' + os.path.splitext(name)[0]


def check_includes(plugin, table, problems, edges, private=frozenset()):
    folders = {f for f in os.listdir(plugin) if os.path.isdir(os.path.join(plugin, f))}
    for f in sorted(folders - set(table)):
        problems.append('plugin/%s/: a folder the table in docs/design.md does not name' % f)
    for f in sorted(set(table) - folders):
        problems.append('docs/design.md names plugin/%s/, which does not exist' % f)
    headers = {}
    for folder, name in sources(plugin):
        if name.endswith('.h'):
            headers.setdefault(name, []).append(folder)
    for folder, name in sources(plugin):
        may, mosq = table.get(folder, (set(), False))
        where = 'plugin/%s/%s' % (folder, name)
        for n, line in enumerate(open(os.path.join(plugin, folder, name), encoding='utf-8'), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, target = m.groups()
            if kind == '<':
                if MOSQUITTO.match(target) and not mosq:
                    problems.append('%s:%d: includes <%s>: only %s may include Mosquitto headers' % (
                        where, n, target, ', '.join('plugin/%s/' % f for f in sorted(table) if table[f][1])))
                continue
            if target == PUBLIC:
                continue
            if '/' not in target:
                hint = ' (write "%s/%s")' % (headers[target][0], target) if target in headers else ''
                problems.append('%s:%d: includes "%s" without its folder%s' % (where, n, target, hint))
                continue
            tfolder, tname = target.split('/', 1)
            if not os.path.exists(os.path.join(plugin, tfolder, tname)):
                problems.append('%s:%d: includes "%s", which is not in plugin/' % (where, n, target))
                continue
            if tfolder != folder and target in private:
                problems.append('%s:%d: includes "%s", which is private to plugin/%s/ (docs/design.md, Layout)' % (
                    where, n, target, tfolder))
            elif tfolder != folder and tfolder not in may:
                problems.append('%s:%d: includes "%s": plugin/%s/ may include only %s (docs/design.md, Layout)' % (
                    where, n, target, folder,
                    ', '.join('plugin/%s/' % f for f in sorted(may)) or 'its own folder'))
            edges[module_of(folder, name)].add((module_of(tfolder, tname), 'includes ' + target))


def check_calls(nm, libs, edges, problems=None, shared=frozenset()):
    defined, used = {}, collections.defaultdict(set)
    out = subprocess.run([nm, '-A'] + libs, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r'.*?([a-z]+)_([A-Za-z0-9_]+)\.c\.o:\s*[0-9a-f]*\s+([A-Za-z])\s+(\S+)$', line)
        if not m:
            continue
        module = m.group(1) + '/' + m.group(2)
        kind, sym = m.group(3), m.group(4)
        if kind in 'TDBRC':
            defined[sym] = module
            prefix = sym.split('__')[0] if '__' in sym else None
            if (kind == 'T' and problems is not None and prefix and prefix != m.group(2)
                    and prefix not in shared):
                problems.append('plugin/%s.c defines %s: its prefix names neither the file nor a shared prefix '
                                '(docs/design.md, Layout)' % (module, sym))
        elif kind == 'U':
            used[module].add(sym)
    for module, syms in used.items():
        for sym in syms:
            target = defined.get(sym)
            if target and target != module:
                edges[module].add((target, 'calls ' + sym))


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    graph = {a: {b for b, _ in bs} for a, bs in edges.items()}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def check(root, nm, libs):
    plugin = os.path.join(root, 'plugin')
    table = read_table(os.path.join(root, 'docs', 'design.md'))
    problems, edges = [], collections.defaultdict(set)
    check_includes(plugin, table, problems, edges, read_private(os.path.join(root, 'docs', 'design.md')))
    if libs:
        check_calls(nm, libs, edges, problems, read_shared_prefixes(os.path.join(root, 'docs', 'design.md')))
    for comp in circles(edges):
        ties = []
        for a in comp:
            for b, why in sorted(edges[a]):
                if b in comp:
                    ties.append('    %s -> %s: %s' % (a, b, why))
        problems.append('import circle between %s:\n%s' % (', '.join(comp), '\n'.join(ties)))
    return problems, len(list(sources(plugin))), len(table)


def self_test(root, nm, libs):
    """Plants each kind of fault in a copy and checks that it is caught."""
    plants = [
        ('util/topic.c', '#include "engine/dlq.h"\n', 'may include only'),
        ('engine/track.c', '#include <mosquitto.h>\n', 'only plugin/broker/ may include Mosquitto headers'),
        ('model/ledger.c', '#include "topic.h"\n', 'without its folder'),
        ('engine/dlq.h', '#include "engine/engine.h"\n', 'import circle'),
        ('api/status.c', '#include "engine/engine.h"\n', 'private to plugin/engine/'),
    ]
    failures = []
    for path, line, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            for part in ('plugin', 'docs'):
                shutil.copytree(os.path.join(root, part), os.path.join(tmp, part))
            target = os.path.join(tmp, 'plugin', path)
            text = open(target, encoding='utf-8').read()
            # After the file's first include, where a real one would go.
            at = text.index('#include')
            open(target, 'w', encoding='utf-8').write(text[:at] + line + text[at:])
            problems, _, _ = check(tmp, nm, [])
            if not any(expect in p for p in problems):
                failures.append('planted %r in plugin/%s: expected a problem with %r, got %s' % (
                    line.strip(), path, expect, problems or 'none'))
            else:
                print('self-test: planted %s in plugin/%s: caught (%s)' % (line.strip(), path, expect))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--root', required=True)
    ap.add_argument('--nm', default='nm')
    ap.add_argument('--lib', action='append', default=[])
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    problems, files, folders = check(a.root, a.nm, a.lib)
    if a.self_test:
        problems += self_test(a.root, a.nm, a.lib)
    for p in problems:
        print(p)
    if problems:
        print('layers: %d problem(s)' % len(problems))
        return 1
    print('layers: %d files in %d folders keep the table of docs/design.md; no import circle%s' % (
        files, folders, ' (includes and calls)' if a.lib else ' (includes)'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
