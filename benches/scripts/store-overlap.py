#!/usr/bin/env python3
"""Verbatim overlap between the two SQL stores (issue 37's measure of copied code).

    benches/scripts/store-overlap.py LABEL SQLITE_SRC POSTGRES_SRC      (W=6 by default)
    W=3 benches/scripts/store-overlap.py head payments-store-sqlite/src payments-store-postgres/src

A line is non-trivial unless it is blank, a comment, lone punctuation or an import; white space
is folded. A non-trivial line of one store counts as shared when it stands in a run of W or more
consecutive non-trivial lines that the other store also has, in the same order. Printed: each
store's non-trivial lines and how many are shared, with the share of the store's lines.
"""
import os, re, sys, subprocess
def files(root):
    out=[]
    for d,_,fs in os.walk(root):
        for f in fs:
            if f.endswith(('.rs','.sql')): out.append(os.path.join(d,f))
    return sorted(out)
def norm_lines(path):
    res=[]
    for l in open(path,encoding='utf8'):
        t=l.strip()
        if not t: continue
        if t.startswith('//') or t.startswith('--'): continue
        if re.fullmatch(r'[\[\](){};,.]+', t): continue
        if t.startswith('use ') or t.startswith('pub use') or t.startswith('pub(crate) use'): continue
        res.append(re.sub(r'\s+',' ',t))
    return res
def run(a_root,b_root,W=int(os.environ.get("W","6"))):
    A={f:norm_lines(f) for f in files(a_root)}
    B={f:norm_lines(f) for f in files(b_root)}
    win=set()
    for f,ls in B.items():
        for i in range(len(ls)-W+1): win.add(tuple(ls[i:i+W]))
    total=sum(len(v) for v in A.values()); cov=0
    for f,ls in A.items():
        mark=[False]*len(ls)
        for i in range(len(ls)-W+1):
            if tuple(ls[i:i+W]) in win:
                for j in range(i,i+W): mark[j]=True
        cov+=sum(mark)
    return total,cov
for label,a,b in [(sys.argv[1],sys.argv[2],sys.argv[3])]:
    t,c=run(a,b); t2,c2=run(b,a)
    print(f"{label}: sqlite non-trivial {t}, lines in W-line runs also in pg {c} ({100*c/t:.1f}%); pg non-trivial {t2}, shared {c2} ({100*c2/t2:.1f}%)")
