#!/usr/bin/env python3
"""The size of the storage ports (issue 37's measure): the methods a backend must write.

    benches/scripts/port-count.py [--root DIR]

Finds the storage port traits wherever they are: every `pub trait` declared in a `store.rs`
or under a `store/` folder of a workspace crate's production code (the files reached from the
crate's lib.rs through its `mod` declarations, as benches/scripts/shape.py reads them; test
and `testing` modules left out), and prints, per crate and trait, its required methods (a
signature ending in `;`: a backend writes it) and its provided ones (a default body: a backend
may override it). Extension traits (`*Ext`, lookups over the `find_*` methods, implemented once
for every store) have no required method and are left out, as are the traits of shape.py's
NOT_PORTS (the decorator's `StoreLayer`). Exits 1 when it finds no port at all (a port moved
out of reach of this script is a failure, not a zero).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shape  # noqa: E402  (the same reading of the source as the must-show counts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    root = os.path.normpath(ap.parse_args().root)
    required = provided = 0
    found = False
    for name in shape.workspace_crates(root):
        ports = [p for p in shape.port_traits(shape.Crate(root, name)) if p["store_port"]]
        if not ports:
            continue
        found = True
        crate_required = 0
        for p in ports:
            print(f"{name}: {p['trait']}: {p['required']} required, {p['provided']} provided ({p['file']})")
            crate_required += p["required"]
            required += p["required"]
            provided += p["provided"]
        print(f"{name}: {crate_required} required")
    print(f"total: {required} required, {provided} provided")
    if not found:
        print("no storage port trait found (a store.rs or store/ folder with a `pub trait`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
