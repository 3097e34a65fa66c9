#!/usr/bin/env python3
"""The size of the storage port (issue 37's measure): the methods a backend must write.

    benches/scripts/port-count.py

Reads the traits of the port from payments-core (store.rs, store/tx.rs, cabinet.rs) and prints,
per trait, its required methods (a signature ending in `;`: a backend writes it) and its
provided ones (a default body: a backend may override it). The extension traits (`*Ext`, the
lookups by name over the `find_*` methods, implemented once for every store) are not part of
the port and are left out.
"""
import re

FILES = [
    "payments-core/src/store.rs",
    "payments-core/src/store/tx.rs",
    "payments-core/src/cabinet.rs",
]
required = provided = 0
for path in FILES:
    src = open(path, encoding="utf8").read()
    for m in re.finditer(r"pub trait (\w+)[^{]*\{(.*?)\n\}", src, re.S):
        name, body = m.group(1), m.group(2)
        if name.endswith("Ext"):
            continue
        req, prov = [], []
        for item in re.split(r"\n(?=    (?:async )?fn )", body):
            fm = re.match(r"\s*(?:async )?fn (\w+)", item)
            if not fm:
                continue
            end = re.search(r"\)\s*(->[^;{]*)?(;|\{)", item, re.S)
            (req if end.group(2) == ";" else prov).append(fm.group(1))
        required += len(req)
        provided += len(prov)
        print(f"{name}: {len(req)} required, {len(prov)} provided")
print(f"total: {required} required, {provided} provided")
