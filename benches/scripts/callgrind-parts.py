#!/usr/bin/env python3
"""What a create costs beyond the verify-only reference, part by part, in instructions.

Reads two runs of callgrind.sh (one of creates, one with VERIFY=1, the same REQUESTS) and
prints, per request, each part's instructions in the create run, in the reference run and the
difference. A part is a function's inclusive cost (everything it calls), summed over the
server's threads, or, for the rows marked "self", the instructions spent in the named
functions themselves.

    PERF_DIR=/tmp/c benches/scripts/callgrind.sh 1 2000 16
    VERIFY=1 PERF_DIR=/tmp/v benches/scripts/callgrind.sh 1 2000 16
    benches/scripts/callgrind-parts.py /tmp/c/callgrind/run-1 /tmp/v/callgrind/run-1 2000

Valgrind's CPU has no SHA extensions: SHA-256 (the body digest, the requisite digest) runs the
portable code under it and costs more instructions than on a CPU with them.
"""

import collections
import glob
import re
import subprocess
import sys

# (label, how, pattern): "incl" takes the largest inclusive cost of a function whose name
# equals the pattern (callgrind lists a function once per source file its inlined code came
# from; the largest is the whole function), "self" sums the self cost of every function whose
# name contains it.
PARTS = [
    ("the payment's insert: its row, 10 index entries, metadata trigger", "incl",
     "payments_store_sqlite::payments::insert_encoded"),
    ("the request's nonce", "incl", "payments_store_sqlite::nonces::use_nonce"),
    ("the request log's write", "incl",
     "<payments_store_sql::port::Shared<R> as payments_core::store::RequestLogStore>"
     "::insert_requests::{{closure}}::{{closure}}::{{closure}}"),
    ("the status counts", "incl", "payments_store_sqlite::payments::count_status"),
    ("BEGIN and COMMIT (the WAL frames)", "incl", "rusqlite::Connection::execute_batch"),
    ("the SQLite writer thread in all", "incl", "payments_store_sqlite::writer::run"),
    ("the log lines (formatting)", "incl",
     "<tracing_subscriber::fmt::fmt_layer::Layer<S,N,E,W> as "
     "tracing_subscriber::layer::Layer<S>>::on_event"),
    ("the payment's values, sealing and digest included", "incl",
     "payments_store_sql::record::payment_values"),
    ("  of which sealing the requisites", "incl",
     "payments_store_sql::sealing::RequisiteSealing::seal_payment"),
    ("  of which the requisite's keyed digest", "incl",
     "payments_store_sql::sealing::RequisiteSealing::digest_requisite"),
    ("Ed25519 (curve25519_dalek, self)", "self", "curve25519_dalek"),
    ("memcpy (self)", "self", "__memcpy_avx_unaligned_erms"),
]

LINE = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$")
FILE = re.compile(r"^(\?\?\?|[^\s:<]*\.(rs|c|h|S|cc|cpp)):")


def functions(path, inclusive):
    """{function name: [costs, one per source file it is listed under]} of one dump."""
    args = ["callgrind_annotate", "--auto=no", "--threshold=100", path]
    if inclusive:
        args.insert(1, "--inclusive=yes")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    found = collections.defaultdict(list)
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(2))
        # "file:function", the file relative to the working directory or absolute, or "???".
        name = FILE.sub("", name, count=1)
        found[name].append(int(m.group(1).replace(",", "")))
    return found


def parts(run):
    """Each part's instructions in one run, summed over its threads, and the run's total."""
    totals = collections.Counter()
    dumps = sorted(glob.glob(run + "/callgrind.out.1-*"))
    if not dumps:
        sys.exit(f"no callgrind dumps in {run}")
    for dump in dumps:
        incl, own = functions(dump, True), functions(dump, False)
        totals["total"] += max(incl.get("PROGRAM TOTALS", [0]))
        for label, how, pattern in PARTS:
            if how == "incl":
                totals[label] += max(incl.get(pattern, [0]))
            else:
                totals[label] += sum(sum(v) for k, v in own.items() if pattern in k)
    return totals


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    create, reference = parts(sys.argv[1]), parts(sys.argv[2])
    print(f"| instructions per request | create | reference | difference |")
    print("|---|---|---|---|")
    for label in ["total"] + [p[0] for p in PARTS]:
        c, r = create[label] / n, reference[label] / n
        print(f"| {label} | {c:,.0f} | {r:,.0f} | {c - r:+,.0f} |")


if __name__ == "__main__":
    main()
