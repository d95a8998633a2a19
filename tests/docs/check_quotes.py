# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""Checks that the code a document quotes is still in the file it names.

A fenced code block preceded by a line `<!-- quoted from PATH -->` must
appear, line for line, in PATH (relative to the repository root), so that
the docs show the code CI runs. Usage: check_quotes.py ROOT DOC...; a DOC
that is a folder stands for every *.md file in it, so a page added to docs/
is checked without naming it. Exits 1 naming each block that is not found.
"""

import os
import re
import sys

MARK = re.compile(r"^<!-- quoted from (\S+) -->$")


def quotes(text):
    """(path, block, line number) for every marked block of text."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            yield m.group(1), None, i + 1
            continue
        end = next((k for k in range(i + 2, len(lines)) if lines[k] == "```"), None)
        yield m.group(1), None if end is None else "\n".join(lines[i + 2:end]) + "\n", i + 1


def expand(docs):
    """The files DOC... name: each folder as its *.md files, sorted."""
    for doc in docs:
        if os.path.isdir(doc):
            yield from sorted(os.path.join(doc, n) for n in os.listdir(doc) if n.endswith(".md"))
        else:
            yield doc


def main(root, docs):
    bad = 0
    count = 0
    for doc in expand(docs):
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for path, block, line in quotes(text):
            count += 1
            if block is None:
                print(f"{doc}:{line}: the mark is not followed by a closed code block", file=sys.stderr)
                bad += 1
                continue
            try:
                with open(f"{root}/{path}", encoding="utf-8") as f:
                    source = f.read()
            except OSError as e:
                print(f"{doc}:{line}: {path}: {e}", file=sys.stderr)
                bad += 1
                continue
            if block not in source:
                first = block.split("\n", 1)[0]
                print(f"{doc}:{line}: the block starting '{first}' is not in {path} any more", file=sys.stderr)
                bad += 1
    print(f"{count} quoted blocks, {bad} not found")
    return 1 if bad or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
