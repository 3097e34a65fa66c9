#!/usr/bin/env python3
"""The long runs' figures in docs/correctness.md, from their reports.

    benches/scripts/correctness.py            print the tables
    benches/scripts/correctness.py --write    rewrite them in docs/correctness.md
    benches/scripts/correctness.py --check    exit 1 when docs/correctness.md differs (CI)

Reads every report a long run of payments-chaos wrote and that was kept in docs/correctness/
(`report.json`, renamed after its run), and renders the tables between the markers
`<!-- long-runs:begin -->` and `<!-- long-runs:end -->`: one row per run (store, nodes, length,
seed, operations, unknown outcomes, payments, callback deliveries, anomalies), then the faults
of each kind per run. Exits 1 when there is no report (a figure without its source is a
failure) or a report has an invariant that was not checked at all. Standard library only.
"""
import argparse
import glob
import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = os.path.join(ROOT, "docs", "correctness.md")
BEGIN, END = "<!-- long-runs:begin -->", "<!-- long-runs:end -->"
KINDS = ["kill", "pause", "cut_database", "cut_upstream", "clock_jump", "database_restart",
         "database_kill", "upstream_slow", "upstream_failing", "upstream_ambiguous", "disk_full",
         "restarted_by_supervisor"]


def reports():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "correctness", "*.json"))):
        with open(path) as f:
            out.append((os.path.basename(path), json.load(f)))
    return out


def minutes(seconds):
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds} s"


def render(runs):
    lines = [
        "| run | store | nodes | length | seed | operations | unknown outcomes | payments | "
        "callback deliveries | anomalies |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in runs:
        anomalies = sum(len(v["violations"]) for v in r["verdicts"])
        lines.append(
            f"| `{name}` | {r['store']} | {r['nodes']} | {minutes(r['seconds'])} | {r['seed']} | "
            f"{r['total_operations']:,} | {r['unknown']:,} | {r['payments']:,} | "
            f"{r['deliveries']:,} | {anomalies} |")
    lines += ["", "| fault | " + " | ".join(f"`{n}`" for n, _ in runs) + " |",
              "|---|" + "---|" * len(runs)]
    for kind in KINDS:
        cells = [str(r["faults"].get(kind, 0)) if kind in r["faults"] else "-" for _, r in runs]
        lines.append(f"| `{kind}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    runs = reports()
    if not runs:
        print("no report in docs/correctness/", file=sys.stderr)
        return 1
    for name, r in runs:
        unchecked = [v["name"] for v in r["verdicts"] if v["checked"] == 0 and v["name"] != "nodes_stayed_up"
                     and v["name"] != "upstream_requests_signed"]
        if unchecked:
            print(f"{name}: invariants that checked nothing: {unchecked}", file=sys.stderr)
            return 1
    table = render(runs)
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC} has no {BEGIN} ... {END}", file=sys.stderr)
        return 1
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if a.write:
        with open(DOC, "w") as f:
            f.write(new)
    elif a.check:
        if new != doc:
            print("docs/correctness.md's long-run tables differ from docs/correctness/*.json: "
                  "run benches/scripts/correctness.py --write", file=sys.stderr)
            return 1
        print(f"docs/correctness.md: the tables of {len(runs)} long runs agree with their reports")
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
