#!/usr/bin/env python3
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""Checks that every relative link of the documents resolves.

For each markdown link or image, [text](target) and ![alt](target), and each
HTML href= or src= outside code blocks and code spans, whose target is not a
URL (http:, https:, mailto:, ...):
  - the file or folder it names exists, relative to the document's folder
    (a target that is only "#anchor" names the document itself);
  - an #anchor into a markdown file matches one of its headings as GitHub
    turns a heading into an anchor (the heading's text lowercased, every
    character but letters, digits, marks, '_', '-' and spaces left out,
    spaces made '-', a repeated anchor given -1, -2, ...), or an HTML
    id= or name= of that file; an anchor into any other file must be a
    line (#L12, #L12-L20).
Usage: check_links.py [--self-test] ROOT DOC...; a DOC that is a folder
stands for every *.md file in it. --self-test also checks documents of its
own, one with good links and one for each kind of broken link, and that
each broken one is reported. Exits 0 when every link resolves, 1 naming each link
that does not, 2 on a usage error.
"""

import os
import re
import shutil
import sys
import tempfile
import unicodedata

from check_quotes import expand  # DOC... as files: a folder is its *.md files

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
# [text](target "title") and ![alt](target); text may hold one level of [].
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+"[^"]*")?\s*\)')
HTML_REF = re.compile(r'\b(?:href|src)\s*=\s*"([^"]*)"')
HTML_ID = re.compile(r'\b(?:id|name)\s*=\s*"([^"]*)"')
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
LINE_ANCHOR = re.compile(r'^L\d+(-L\d+)?$')


def prose_lines(text, blank_code=True):
    """(line number, line) of text outside fenced code blocks, code spans
    blanked (but with blank_code False: a heading's code is part of its
    anchor)."""
    fence = None
    for n, line in enumerate(text.split('\n'), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, re.sub(r'`[^`]*`', lambda s: ' ' * len(s.group(0)), line) if blank_code else line


def heading_text(raw):
    """The text GitHub renders for a heading's markdown."""
    t = re.sub(r'!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)', r'\1', raw)  # links: their text
    t = re.sub(r'<[^>]+>', '', t)                                       # HTML tags
    out = []
    for i, part in enumerate(re.split(r'(`[^`]*`)', t)):
        if i % 2:
            out.append(part[1:-1])  # a code span: as it is
            continue
        part = re.sub(r'\*\*(.+?)\*\*|(?<!\w)__(.+?)__(?!\w)', lambda m: m.group(1) or m.group(2), part)
        part = re.sub(r'\*(.+?)\*|(?<!\w)_(.+?)_(?!\w)', lambda m: m.group(1) or m.group(2), part)
        out.append(part)
    return ''.join(out)


def slug(text):
    """GitHub's anchor for a heading's text: it keeps what Ruby's
    [\p{Word}\- ] matches (letters, marks, decimal and letter numbers,
    connector punctuation such as '_', '-' and spaces)."""
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in ' -' or cat[0] in 'LM' or cat in ('Nd', 'Nl', 'Pc'):
            out.append(ch)
    return ''.join(out).replace(' ', '-')


def anchors_of(text):
    """Every anchor a markdown text offers: its headings' and its HTML ids."""
    found, seen = set(), {}
    for _, line in prose_lines(text, blank_code=False):
        m = HEADING.match(line)
        if m:
            base = slug(heading_text(m.group(2)))
            k = seen.get(base, 0)
            seen[base] = k + 1
            found.add(base if k == 0 else '%s-%d' % (base, k))
        for m in HTML_ID.finditer(re.sub(r'`[^`]*`', '', line)):
            found.add(m.group(1))
    return found


def links(text):
    """(line number, target) of every link outside code."""
    for n, line in prose_lines(text):
        for m in LINK.finditer(line):
            yield n, m.group(1).strip('<>')
        for m in HTML_REF.finditer(line):
            yield n, m.group(1)


def check(root, docs):
    """(problems, links checked)."""
    problems, count, cache = [], 0, {}

    def anchors_in(path):
        if path not in cache:
            with open(path, encoding='utf-8') as f:
                cache[path] = anchors_of(f.read())
        return cache[path]

    for doc in expand(docs):
        with open(doc, encoding='utf-8') as f:
            text = f.read()
        shown = os.path.relpath(doc, root)
        for n, target in links(text):
            if not target or SCHEME.match(target) or target.startswith('//'):
                continue
            count += 1
            path, _, anchor = target.partition('#')
            full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(full):
                problems.append('%s:%d: (%s): %s does not exist' % (shown, n, target, os.path.relpath(full, root)))
                continue
            if not anchor:
                continue
            if full.endswith('.md') and os.path.isfile(full):
                if anchor not in anchors_in(full):
                    problems.append('%s:%d: (%s): no heading of %s has the anchor #%s' % (
                        shown, n, target, os.path.relpath(full, root), anchor))
            elif not LINE_ANCHOR.match(anchor):
                problems.append('%s:%d: (%s): #%s: an anchor into %s, which is not markdown, can only be a line (#L12)' % (
                    shown, n, target, anchor, os.path.relpath(full, root)))
    return problems, count


def self_test():
    """Plants each kind of broken link in a document of its own and checks
    that each is reported (and that a good link and anchor are not)."""
    plants = [
        ('[a page](no-such-page.md)', 'no-such-page.md does not exist'),
        ('[a section](#no-such-heading)', 'has the anchor #no-such-heading'),
        ('![a picture](no-such-picture.png)', 'no-such-picture.png does not exist'),
        ('[a section](other.md#no-such-heading)', 'other.md has the anchor #no-such-heading'),
        ('[code](other.c#main)', 'can only be a line'),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, 'other.md'), 'w', encoding='utf-8') as f:
            f.write('# Other\n\n## The `--flag`, 2.0 and 2.1 (issue 9)\n\n## Other\n\n### `a__b` *and* __c__\n')
        open(os.path.join(tmp, 'other.c'), 'w').close()
        doc = os.path.join(tmp, 'doc.md')
        good = ('# A page\n\n[here](#a-page), [there](other.md#the---flag-20-and-21-issue-9), '
                '[again](other.md#other-1), [more](other.md#a__b-and-c), [code](other.c#L3), `[not a link](nowhere.md)`\n'
                '```\n[not a link](nowhere.md)\n```\n')
        for line, expect in [(None, None)] + plants:
            with open(doc, 'w', encoding='utf-8') as f:
                f.write(good + ('\n' + line + '\n' if line else ''))
            problems, _ = check(tmp, [doc])
            if line is None:
                if problems:
                    failures.append('self-test: good links reported: %s' % problems)
            elif any(expect in p for p in problems) and len(problems) == 1:
                print('self-test: planted %s: caught' % line)
            else:
                failures.append('self-test: planted %s: expected one problem with %r, got %s' % (
                    line, expect, problems or 'none'))
    return failures


def main(argv):
    self_testing = '--self-test' in argv
    args = [a for a in argv if a != '--self-test']
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, docs = args[0], args[1:]
    problems, count = check(root, docs)
    if self_testing:
        problems += self_test()
    for p in problems:
        print(p, file=sys.stderr)
    print('%d relative links checked, %d problem(s)' % (count, len(problems)))
    return 1 if problems or count == 0 else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
