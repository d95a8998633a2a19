#!/usr/bin/env python3
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""Turns a man page written in a small markdown subset into roff (man macros).

The sources are man/*.md; meson runs this on each (man/meson.build) and
installs the result. tests/docs/check_man.py reads the same sources with
parse() below, so the page and its check agree on what a source says.

The subset, block by block (a source that leaves it is refused, with the
line, rather than rendered wrongly):

  <!-- ... -->            a comment (may span lines); dropped
  % NAME(S) DATE MANUAL   the title line, first: page name, section, the
                          page's date (YYYY-MM-DD) and the manual's name
  # HEADING               a section (.SH), in capitals: NAME, SYNOPSIS, ...
  ## Heading              a subsection (.SS)
  ```                     a code block, up to the next ``` (.EX/.EE), shown
                          as it is written
  - item                  a bullet list item (.IP); its further lines are
                          indented two spaces; lists do not nest
  term                    a definition list item (.TP): the term on one line,
  : definition            the definition after ": ", its further lines and
                          paragraphs indented two spaces; an indented code
                          block belongs to the definition too
  text                    a paragraph (.PP); a line ending in a backslash
                          ends a line of output there (.br)

Inline, in paragraphs, items, terms and definitions: `code` (a literal,
set in bold: option names, values, topics), **bold** and *italic*
(placeholders), which do not nest; a backslash before a punctuation
character makes it literal (\\*). Text is escaped for roff: a backslash
becomes \\e, a line starting with a dot or a quote is guarded with \\&, a
hyphen in a literal or at the start of a word (an option, a minus) becomes
\\-, and in NAME the " - " between the name and its description becomes
" \\- ", as lexgrog(1) expects.

The .TH line takes the page's date from SOURCE_DATE_EPOCH when it is set
(reproducible builds set it), else from the title line; never from the
clock. Usage: md2man.py [--source "PACKAGE VERSION"] INPUT.md OUTPUT
"""
import argparse
import datetime
import os
import re
import sys

TITLE = re.compile(r'^% ([a-z0-9][a-z0-9._-]*)\((\d[a-z]*)\) (\d{4}-\d{2}-\d{2}) (.+)$')
FENCE = re.compile(r'^```[a-z]*$')


class SourceError(Exception):
    """A source outside the subset: the line number and what is wrong."""

    def __init__(self, line, message):
        super().__init__('line %d: %s' % (line, message))
        self.line = line


class Page:
    """A parsed source: the title line's fields and the sections in order."""

    def __init__(self, name, section, date, manual):
        self.name = name
        self.section = section
        self.date = date
        self.manual = manual
        self.sections = []  # [Section]

    def section_named(self, heading):
        """The section with this heading, or None."""
        return next((s for s in self.sections if s.heading == heading), None)


class Section:
    """A # heading and its blocks; a ## heading is a block of its own."""

    def __init__(self, heading, line):
        self.heading = heading
        self.line = line
        self.blocks = []


class Block:
    """A block of a section: its kind, its first line and the fields of its kind.

    'para': text (its lines joined by newlines); 'sub': text; 'code': lines;
    'bullets': items, each a text; 'defs': items, each (term, [parts], line),
    a part ('para', text) or ('code', lines).
    """

    def __init__(self, kind, line, **fields):
        self.kind = kind
        self.line = line
        self.__dict__.update(fields)


def strip_comments(lines):
    """The lines with <!-- --> comments blanked, so numbers stay right."""
    out = []
    inside = False
    for line in lines:
        if inside:
            if '-->' in line:
                inside = False
            out.append('')
            continue
        if line.startswith('<!--'):
            inside = '-->' not in line
            out.append('')
            continue
        out.append(line)
    return out


def read_code(lines, i, indent):
    """The code block whose fence is lines[i]: (its lines, the index after)."""
    body = []
    for k in range(i + 1, len(lines)):
        raw = lines[k]
        if raw == indent + '```':
            return body, k + 1
        if raw and not raw.startswith(indent):
            raise SourceError(k + 1, 'a line of an indented code block is not indented')
        body.append(raw[len(indent):])
    raise SourceError(i + 1, 'the code block is not closed')


def read_definition(lines, i):
    """The definition starting at lines[i] (': ...'): ([parts], index after)."""
    parts = []
    text = [lines[i][2:]]
    k = i + 1
    while k < len(lines):
        raw = lines[k]
        if raw.startswith('  ') and raw.strip():
            if FENCE.match(raw[2:]):
                if text:
                    parts.append(('para', '\n'.join(text)))
                    text = []
                body, k = read_code(lines, k, '  ')
                parts.append(('code', body))
                continue
            text.append(raw[2:].strip())
            k += 1
            continue
        if raw == '' and k + 1 < len(lines) and lines[k + 1].startswith('  ') and lines[k + 1].strip():
            if text:
                parts.append(('para', '\n'.join(text)))
            text = []
            k += 1
            continue
        break
    if text:
        parts.append(('para', '\n'.join(text)))
    return parts, k


def parse(text):
    """A source's Page; raises SourceError."""
    lines = strip_comments(text.split('\n'))
    i = 0
    while i < len(lines) and lines[i] == '':
        i += 1
    m = TITLE.match(lines[i]) if i < len(lines) else None
    if not m:
        raise SourceError(i + 1, 'expected the title line "% name(section) YYYY-MM-DD manual"')
    page = Page(*m.groups())
    i += 1
    section = None
    while i < len(lines):
        raw = lines[i]
        n = i + 1
        if raw == '':
            i += 1
            continue
        if raw.startswith('# '):
            heading = raw[2:].strip()
            if heading != heading.upper() or '"' in heading:
                raise SourceError(n, 'a section heading is in capitals, without quotes: %r' % heading)
            section = Section(heading, n)
            page.sections.append(section)
            i += 1
            continue
        if section is None:
            raise SourceError(n, 'text before the first section heading')
        blocks = section.blocks
        if raw.startswith('## '):
            blocks.append(Block('sub', n, text=raw[3:].strip()))
            i += 1
        elif FENCE.match(raw):
            body, i = read_code(lines, i, '')
            blocks.append(Block('code', n, lines=body))
        elif raw.startswith('- '):
            if not blocks or blocks[-1].kind != 'bullets':
                blocks.append(Block('bullets', n, items=[]))
            item = [raw[2:]]
            i += 1
            while i < len(lines) and lines[i].startswith('  ') and lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            blocks[-1].items.append('\n'.join(item))
        elif i + 1 < len(lines) and lines[i + 1].startswith(': '):
            if raw.startswith(' '):
                raise SourceError(n, 'a term is not indented')
            parts, i = read_definition(lines, i + 1)
            if not blocks or blocks[-1].kind != 'defs':
                blocks.append(Block('defs', n, items=[]))
            blocks[-1].items.append((raw, parts, n))
        elif raw.startswith(' ') or raw.startswith(': '):
            raise SourceError(n, 'an indented line or a definition outside a definition list')
        else:
            text = []
            while i < len(lines) and lines[i] != '':
                if lines[i].startswith(('#', '```', '- ', ': ', ' ')):
                    raise SourceError(i + 1, 'a paragraph ends with a blank line before another block')
                text.append(lines[i])
                i += 1
            blocks.append(Block('para', n, text='\n'.join(text)))
    return page


# Inline markup.
SPAN = re.compile(r'`([^`]*)`|\*\*([^*\s](?:[^*]*?[^*\s])?)\*\*|\*([^*\s](?:[^*]*?[^*\s])?)\*'
                  r'|\\([!-/:-@\[-`{-~])')


def escape_text(s):
    """Plain text for roff: backslashes, and hyphens starting a word."""
    s = s.replace('\\', '\\e')
    return re.sub(r'(?<![\w\\])-+(?=\w)', lambda m: '\\-' * len(m.group()), s)


def escape_literal(s):
    """A literal for roff: backslashes, and every hyphen."""
    return s.replace('\\', '\\e').replace('-', '\\-')


def plain(s, line):
    """Text between spans: a ` or * left there is markup gone wrong."""
    if re.search(r'[`*]', s):
        raise SourceError(line, 'an unclosed ` or *, or a * to write as \\*, in %r' % s.strip())
    return escape_text(s)


def inline(s, line):
    """Text with inline markup to roff text (still one string with newlines)."""
    out = []
    pos = 0
    for m in SPAN.finditer(s):
        out.append(plain(s[pos:m.start()], line))
        code, bold, italic, lit = m.groups()
        if code is not None:
            out.append('\\fB' + escape_literal(code) + '\\fR')
        elif lit is not None:
            out.append(escape_text(lit))
        else:
            inner = bold if bold is not None else italic
            if '`' in inner:
                raise SourceError(line, 'markup does not nest: %r' % m.group(0))
            out.append(('\\fB' if bold is not None else '\\fI') + escape_text(inner) + '\\fR')
        pos = m.end()
    out.append(plain(s[pos:], line))
    return ''.join(out)


def text_lines(s, line, name_section=False):
    """A block's text as roff lines: breaks, guards, and NAME's dash."""
    source = s.split('\n')
    # A line ending in one backslash (not an escaped one) breaks there.
    breaks = [bool(re.search(r'(?<!\\)(\\\\)*\\$', l)) for l in source]
    source = [l[:-1] if b else l for l, b in zip(source, breaks)]
    out = []
    for raw, brk in zip(inline('\n'.join(source), line).split('\n'), breaks):
        raw = raw.strip()
        if name_section:
            raw = raw.replace(' - ', ' \\- ', 1)
        out.append(guard(raw))
        if brk:
            out.append('.br')
    return out


def guard(line):
    """A text line that roff must not read as a request."""
    return '\\&' + line if line.startswith(('.', "'")) else line


def code_lines(body):
    """A code block's lines as roff, literal and unfilled."""
    return ['.EX'] + [guard(escape_literal(l)) for l in body] + ['.EE']


def render(page, source, date):
    """The page as roff, a list of lines; source is the .TH line's (package and version)."""
    out = [
        '.\\" SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause',
        '.\\" Generated by man/md2man.py from man/%s.%s.md: edit that file.' % (page.name, page.section),
        '.TH %s %s %s "%s" "%s"' % (page.name.upper(), page.section, date, source, page.manual),
        # Option names and topics must not be hyphenated, nor spread apart.
        '.nh',
        '.ad l',
    ]
    for section in page.sections:
        out.append('.SH "%s"' % section.heading)
        name = section.heading == 'NAME'
        for b in section.blocks:
            if b.kind == 'sub':
                out.append('.SS "%s"' % escape_text(b.text.replace('"', "'")))
            elif b.kind == 'para':
                out.append('.PP')
                out += text_lines(b.text, b.line, name)
            elif b.kind == 'code':
                out += ['.PP', '.RS 4'] + code_lines(b.lines) + ['.RE']
            elif b.kind == 'bullets':
                for item in b.items:
                    out.append('.IP \\(bu 2')
                    out += text_lines(item, b.line)
            elif b.kind == 'defs':
                for term, parts, line in b.items:
                    out.append('.TP')
                    out += text_lines(term, line)
                    for k, (kind, body) in enumerate(parts):
                        if k:
                            out.append('.IP')
                        out += text_lines(body, line) if kind == 'para' else code_lines(body)
    return out


def page_date(page):
    """SOURCE_DATE_EPOCH's day (UTC) when it is set, else the title line's."""
    epoch = os.environ.get('SOURCE_DATE_EPOCH')
    if epoch:
        return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).strftime('%Y-%m-%d')
    return page.date


def main():
    ap = argparse.ArgumentParser(description='markdown subset to roff man page')
    ap.add_argument('--source', default='', help='the package and its version, for the .TH line')
    ap.add_argument('input')
    ap.add_argument('output')
    a = ap.parse_args()
    with open(a.input, encoding='utf-8') as f:
        text = f.read()
    try:
        page = parse(text)
        lines = render(page, a.source, page_date(page))
    except SourceError as e:
        print('%s:%s' % (a.input, e), file=sys.stderr)
        return 1
    with open(a.output, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
