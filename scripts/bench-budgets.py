#!/usr/bin/env python3
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
#
# The budgets of issue 14 and every callgrind case (BENCHMARKS.md,
# "Instructions per message"; the first layout is docs/benchmark-history.md's
# "Budgets (issue 14)") from two outputs of
# run-bench.sh, one per broker line, side by side, each against the bare
# broker of its own version in its own run (the figures are the runs'; this
# only lays them out):
#   ./run-bench.sh >bench-2.0.md
#   ./run-bench.sh --broker 2.1 >bench-2.1.md
#   scripts/bench-budgets.py bench-2.0.md bench-2.1.md
# prints the section's body as Markdown. A table a run lacks (a suite
# skipped with --only, a failed case) shows as "–".
import re
import sys


def tables(text):
    """Every Markdown table of a run, by the heading above it: a list of
    (heading, header cells, rows of cells)."""
    out, heading, header, rows = [], "", None, []
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
            continue
        if header is not None:
            out.append((heading, header, rows))
            header, rows = None, []
    return out


def find(run, prefix):
    for heading, header, rows in run["tables"]:
        if heading.startswith(prefix):
            return header, rows
    return None, []


def column(header, name, nth=0):
    """The index of the nth column called name."""
    seen = -1
    for i, h in enumerate(header or []):
        if h == name:
            seen += 1
            if seen == nth:
                return i
    return None


def cell(row, i):
    return row[i] if i is not None and i < len(row) and row[i] else "–"


def load(path):
    text = open(path, encoding="utf-8").read()
    run = {"tables": tables(text), "path": path}
    m = re.search(r"^## dlq_bench (.*)$", text, re.M)
    run["title"] = m.group(1) if m else "?"
    m = re.search(r"Broker: mosquitto ([0-9.]+)", text)
    run["version"] = m.group(1) if m else "?"
    m = re.search(r"^Code measured: (.*)\.$", text, re.M)
    run["code"] = m.group(1) if m else "?"
    m = re.search(r"^Machine: (.*?)\.?$", text, re.M)
    run["machine"] = m.group(1) if m else "?"
    return run


def budgets(a, b):
    ha, ra = find(a, "Budgets (issue 14)")
    hb, rb = find(b, "Budgets (issue 14)")
    by_b = {r[0]: r for r in rb}
    mi, fi, vi = column(ha, "measured"), column(ha, "floor"), column(ha, "met/missed")
    fb = column(hb, "floor")
    v1, v2 = a["version"], b["version"]
    print("| path | budget | %s | %s floor | %s | %s floor | met/missed %s · %s |" % (v1, v1, v2, v2, v1, v2))
    print("|---|---|---|---|---|---|---|")
    for r in ra:
        o = by_b.get(r[0], [])
        print("| %s | %s | %s | %s | %s | %s | %s · %s |" % (r[0], cell(r, 1), cell(r, mi), cell(r, fi), cell(o, mi),
                                                            cell(o, fb), cell(r, vi), cell(o, vi)))
    # The memory budget, from the memory suite's table.
    name = "beyond payload + topic + properties B/record"
    figs, verdicts = [], []
    for run in (a, b):
        h, rows = find(run, "Memory")
        i, v = column(h, name), (len(h) - 1 if h else None)
        figs.append(" / ".join(cell(r, i) for r in rows) or "–")
        found = {cell(r, v).strip("*") for r in rows}
        verdicts.append("**missed**" if "missed" in found else ", ".join(sorted(found)) or "–")
    h, rows = find(a, "Memory")
    sizes = " / ".join(r[0] for r in rows) or "?"
    print("| memory per kept record beyond payload + topic + properties (B, payload %s B) | ≤ 96 B | %s | – | %s | – "
          "| %s · %s |" % (sizes, figs[0], figs[1], verdicts[0], verdicts[1]))


def instructions(a, b):
    ha, ra = find(a, "Instructions (callgrind)")
    hb, rb = find(b, "Instructions (callgrind)")
    key = lambda r: (r[0], r[1])
    by_b = {key(r): r for r in rb}
    pd, vs, pc = (column(ha, "broker Ir per delivered message"), column(ha, "vs bare (same subscribers)"),
                  column(ha, "plugin callbacks ÷ broker"))
    pp = column(ha, "broker Ir per published message")
    v1, v2 = a["version"], b["version"]
    print("| case | pubs→subs | %s Ir per delivery (storm: per published message) | ÷ bare %s | plugin's share | "
          "%s Ir per delivery (storm: per published message) | ÷ bare %s | plugin's share |" % (v1, v1, v2, v2))
    print("|---|---|---|---|---|---|---|---|")
    for r in ra:
        o = by_b.get(key(r), [])

        def fig(x):
            d = cell(x, pd)
            return cell(x, pp) if d == "–" else d
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (r[0], r[1], fig(r), cell(r, vs), cell(r, pc),
                                                          fig(o), cell(o, vs), cell(o, pc)))


def side_by_side(a, b, prefix, cols, title):
    ha, ra = find(a, prefix)
    hb, rb = find(b, prefix)
    by_b = {(r[0], r[1]): r for r in rb}
    heads = []
    for run in (a, b):
        for label, _, _ in cols:
            heads.append("%s %s" % (run["version"], label))
    print("| QoS | pubs→subs | %s | clean rounds %s · %s |" % (" | ".join(heads), a["version"], b["version"]))
    print("|---|---|%s---|" % ("---|" * len(heads)))
    ca, cb = column(ha, "clean rounds"), column(hb, "clean rounds")
    for r in ra:
        o = by_b.get((r[0], r[1]), [])
        figs = [cell(r, column(ha, n, k)) for _, n, k in cols] + [cell(o, column(hb, n, k)) for _, n, k in cols]
        print("| %s | %s | %s | %s · %s |" % (r[0], r[1], " | ".join(figs), cell(r, ca), cell(o, cb)))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/bench-budgets.py RUN-2.0.md RUN-2.1.md (outputs of run-bench.sh)")
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print("Made by `./run-bench.sh >A.md`, `./run-bench.sh --broker 2.1 >B.md` and "
          "`scripts/bench-budgets.py A.md B.md`.\n")
    for run in (a, b):
        print("- mosquitto %s: `dlq_bench %s`; %s; code measured: %s." % (run["version"], run["title"],
                                                                           run["machine"], run["code"]))
    print("\n#### Against the budgets (instructions: callgrind; memory: RSS growth)\n")
    budgets(a, b)
    print("\n#### Instructions per case (callgrind, QoS 1, 200 B; ÷ the bare broker of the same version "
          "with as many subscribers)\n")
    instructions(a, b)
    print("\n#### Throughput, closed loop (÷ the bare broker of the same version; median [min-max] of clean rounds)\n")
    side_by_side(a, b, "Throughput", [("untracked ÷ bare", "÷ bare", 0), ("tracked ÷ bare", "÷ bare", 1),
                                      ("CPU-normalized untracked", "CPU-normalized untracked ÷ bare", 0),
                                      ("CPU-normalized tracked", "CPU-normalized tracked ÷ bare", 0)], "")
    print("\n#### Latency at a fixed offered load (end to end, µs: p50 / p90 / p99)\n")
    side_by_side(a, b, "Latency", [("bare", "bare", 0), ("untracked", "untracked", 0), ("tracked", "tracked", 0),
                                   ("untracked p99 ÷ bare", "untracked p99 ÷ bare", 0),
                                   ("tracked p99 ÷ bare", "tracked p99 ÷ bare", 0)], "")
    print("\n#### NACK storm (NACKs handled/s ÷ the bare broker's delivered msg/s)\n")
    side_by_side(a, b, "NACK storm", [("NACKs/s ÷ bare", "NACKs/s ÷ bare delivered/s", 0),
                                      ("CPU-normalized", "CPU-normalized NACKs/s ÷ bare delivered/s", 0),
                                      ("broker µs per NACK", "broker µs per NACK", 0)], "")


if __name__ == "__main__":
    main()
