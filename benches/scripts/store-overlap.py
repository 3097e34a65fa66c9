#!/usr/bin/env python3
"""Verbatim overlap between the two SQL stores (issue 37's measure of copied code).

usage: benches/scripts/store-overlap.py [-w W] [LABEL [SQLITE_SRC POSTGRES_SRC]]

    benches/scripts/store-overlap.py              label "head", the two store crates' src/, W=6
    benches/scripts/store-overlap.py -w 3 before payments-store-sqlite/src payments-store-postgres/src

Without paths, the stores are found by name: the workspace folder whose name ends in
`store-sqlite` and the one ending in `store-postgres` (their `src/`); relative paths are read
from the current folder, else from the repository root. W may also come from the environment
(`W=3`), as it did before the flag.

A line is non-trivial unless it is blank, a comment, lone punctuation or an import; white space
is folded. A non-trivial line of one store counts as shared when it stands in a run of W or more
consecutive non-trivial lines that the other store also has, in the same order. Printed: each
store's non-trivial lines and how many are shared, with the share of the store's lines.
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def files(root):
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith((".rs", ".sql")):
                out.append(os.path.join(d, f))
    return sorted(out)


def norm_lines(path):
    res = []
    with open(path, encoding="utf8") as f:
        for line in f:
            t = line.strip()
            if not t:
                continue
            if t.startswith("//") or t.startswith("--"):
                continue
            if re.fullmatch(r"[\[\](){};,.]+", t):
                continue
            if t.startswith("use ") or t.startswith("pub use") or t.startswith("pub(crate) use"):
                continue
            res.append(re.sub(r"\s+", " ", t))
    return res


def run(a_root, b_root, w):
    a = {f: norm_lines(f) for f in files(a_root)}
    b = {f: norm_lines(f) for f in files(b_root)}
    windows = set()
    for ls in b.values():
        for i in range(len(ls) - w + 1):
            windows.add(tuple(ls[i : i + w]))
    total = sum(len(v) for v in a.values())
    covered = 0
    for ls in a.values():
        mark = [False] * len(ls)
        for i in range(len(ls) - w + 1):
            if tuple(ls[i : i + w]) in windows:
                for j in range(i, i + w):
                    mark[j] = True
        covered += sum(mark)
    return total, covered


def find_store(suffix):
    found = sorted(d for d in glob.glob(os.path.join(ROOT, "*" + suffix)) if os.path.isdir(os.path.join(d, "src")))
    if len(found) != 1:
        sys.exit(f"store-overlap.py: expected one folder *{suffix} with a src/ in {ROOT}, found {found or 'none'}")
    return os.path.join(found[0], "src")


def existing(path):
    for cand in (path, os.path.join(ROOT, path)):
        if os.path.isdir(cand):
            return cand
    sys.exit(f"store-overlap.py: no folder {path} (here or in {ROOT})")


def share(part, whole):
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n")[2].removeprefix("usage: "), description=__doc__.split("\n")[0])
    ap.add_argument("label", nargs="?", default="head")
    ap.add_argument("sqlite", nargs="?")
    ap.add_argument("postgres", nargs="?")
    ap.add_argument("-w", type=int, default=int(os.environ.get("W", "6")), help="run length (default 6)")
    a = ap.parse_args()
    if (a.sqlite is None) != (a.postgres is None):
        ap.error("give both SQLITE_SRC and POSTGRES_SRC, or neither")
    sqlite = existing(a.sqlite) if a.sqlite else find_store("store-sqlite")
    postgres = existing(a.postgres) if a.postgres else find_store("store-postgres")
    t, c = run(sqlite, postgres, a.w)
    t2, c2 = run(postgres, sqlite, a.w)
    print(
        f"{a.label}: sqlite non-trivial {t}, lines in {a.w}-line runs also in pg {c} ({share(c, t)}); "
        f"pg non-trivial {t2}, shared {c2} ({share(c2, t2)})"
    )


if __name__ == "__main__":
    main()
