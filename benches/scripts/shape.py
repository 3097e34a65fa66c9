#!/usr/bin/env python3
"""The shape of the workspace (issue 56's must-show counts), measured from the source.

    benches/scripts/shape.py                      a table of every count
    benches/scripts/shape.py --json               the same, for machines
    benches/scripts/shape.py --check              exit 1 when a count is over its budget (BUDGETS)
    benches/scripts/shape.py --check-cycles       exit 1 when any crate has an import cycle
    benches/scripts/shape.py --check-docs docs/architecture.md
                                                  exit 1 when the doc's module table or port
                                                  figures disagree with the code
    --root DIR                                    measure another tree (default: this one)

Production code is a crate's `src/` without `#[cfg(test)]` items (nor the items of the feature
`planted-bugs`, which no production build has), `tests/` and `testing`
modules (`testing.rs`, `testing/`, `mod testing {}`); a line counts when it is neither blank nor
only a comment. Crates are the members of the root Cargo.toml; files are found from each crate's
roots (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) through its `mod` declarations, so files
may move without this script changing. Standard library only.

The counts:
- production lines of each crate;
- public methods (`pub fn`, `pub async fn`, ...) of each type, summed over every `impl Type {`
  block of the crate, whatever the file; the budget applies to service types (SERVICE_TYPE);
- required methods (no default body) of each port trait: every `pub trait` declared in a
  `store.rs` or under a `store/` folder, and every `pub trait` with an `async fn`; extension
  traits (`*Ext`, all provided) have none and are not listed;
- import cycles per crate: a module is a file or a `mod x {}` block; an edge is a path to
  another module of the crate in production code (`use crate::..`, `use super::..`,
  `use self::..`, `crate::a::b` in code, a child module by name), resolved through `pub use`
  re-exports to the module that defines the item; cycles are the strongly connected components
  (Tarjan) of more than one module. A module's use of its own descendants is the direction of
  the module tree and no edge; an import of an item defined in an ancestor module (a child
  using its parent's items) is "upward", counted and printed for information;
- the longest production function (lines from `fn` to its closing brace), `transition::apply`
  excepted as the state table (EXEMPT_FUNCTIONS);
- `Result<_, String>` in production code.
"""
import argparse
import glob
import json
import os
import re
import signal
import sys

# Budgets (issue 56, "Must show"). A count over its budget fails `--check`.
BUDGETS = {
    # non-blank, non-comment production lines of payments-core
    "core_production_lines": 12000,
    # public methods of the largest service type
    "service_public_methods": 25,
    # required methods of any one port trait
    "port_required_methods": 12,
    # import cycles, all crates together
    "import_cycles": 0,
    # lines of the longest production function (EXEMPT_FUNCTIONS left out)
    "function_lines": 80,
    # `Result<_, String>` in production code, all crates together
    "result_string": 0,
}
CORE_CRATE = "payments-core"
# A service type: the types that hold the application's operations.
SERVICE_TYPE = re.compile(r"(Service|Services|Cabinet|Directory|Callbacks|Ledger|Payments)$")
# Traits in the storage files that are not ports (a backend never implements them).
NOT_PORTS = {"StoreLayer"}
# Functions the length budget leaves out: module path (within its crate) :: function name.
EXEMPT_FUNCTIONS = {"payments-core:transition::apply"}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RAW_STRING = re.compile(r'b?r(#*)"')


# ---------------------------------------------------------------------------------------------
# Lexing: comments out, string contents masked, so that braces and keywords are structural.


def lex(src):
    """Return (code, masked): `code` is the source with comments blanked (newlines kept);
    `masked` also blanks the contents of string and character literals."""
    n = len(src)
    code = list(src)
    masked = list(src)
    i = 0

    def blank(a, b, both):
        for k in range(a, b):
            if src[k] != "\n":
                masked[k] = " "
                if both:
                    code[k] = " "

    def ident_char(c):
        return c.isalnum() or c == "_"

    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j, True)
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j, True)
            i = j
        elif c in "rb" and (i == 0 or not ident_char(src[i - 1])):
            m = RAW_STRING.match(src, i)
            if m:
                close = '"' + m.group(1)
                j = src.find(close, m.end())
                j = n if j < 0 else j
                blank(m.end(), j, False)
                i = j + len(close)
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i + 1, j, False)
            i = j + 1
        elif c == "'":
            # A character literal, or a lifetime / label (left alone).
            if i + 1 < n and src[i + 1] == "\\":
                j = src.find("'", i + 2)
                if src[i + 2 : i + 3] == "'":  # '\''
                    j = src.find("'", i + 3)
                blank(i + 1, j, False)
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                blank(i + 1, i + 2, False)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(code), "".join(masked)


def match_brace(text, open_pos):
    """The position of the `}` closing the `{` at open_pos (in masked text)."""
    depth = 0
    for k in range(open_pos, len(text)):
        ch = text[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def item_end(text, start):
    """The end of the item starting at `start`: its first `;` at depth 0, or the `}` matching
    its first `{`."""
    depth = 0
    for k in range(start, len(text)):
        ch = text[k]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return k
        elif depth == 0 and ch == "{":
            return match_brace(text, k)
    return len(text) - 1


def line_of(text, pos, starts):
    """1-based line number of pos, given the sorted line start offsets."""
    lo, hi = 0, len(starts)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid
    return lo + 1


def line_starts(text):
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


# ---------------------------------------------------------------------------------------------
# The module tree of a crate.

ATTRS = r"(?:\#\[[^\]]*(?:\[[^\]]*\][^\]]*)*\]\s*)*"
CFG_TEST = re.compile(r"#\[cfg\((?:test|all\(test[^\]]*)\)\]")
# Left out of production like tests: the planted bugs of the history checker (feature
# `planted-bugs`, never in a production build; docs/correctness.md). Matched in the source
# (the masked text blanks the string), where the masked text has the attribute too.
CFG_PLANTED = re.compile(r'#\[cfg\(feature\s*=\s*"planted-bugs"\)\]')
MOD_DECL = re.compile(r"(?m)^[ \t]*(" + ATTRS + r")(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


class Module:
    def __init__(self, crate, path, file, span):
        self.crate = crate
        self.path = path  # tuple of names, () for the crate root
        self.file = file
        self.span = span  # (start, end) offsets in the file's text
        self.children = {}  # name -> Module
        self.parent = None

    @property
    def name(self):
        return "::".join(self.path) or "crate"


class SourceFile:
    def __init__(self, path, rel):
        self.path = path
        self.rel = rel
        with open(path, encoding="utf8") as f:
            self.src = f.read()
        self.code, self.masked = lex(self.src)
        self.starts = line_starts(self.src)
        # Spans (start, end) left out of production: #[cfg(test)] items, mod testing {}.
        self.excluded = []

    def is_excluded(self, pos):
        return any(a <= pos <= b for a, b in self.excluded)


class Crate:
    def __init__(self, root, name):
        self.root = root
        self.name = name
        self.dir = os.path.join(root, name)
        self.files = {}  # rel path -> SourceFile (production files only)
        self.modules = []  # every production Module
        self.skipped_files = []  # test / testing files, not measured
        roots = []
        for r in ("src/lib.rs", "src/main.rs"):
            if os.path.exists(os.path.join(self.dir, r)):
                roots.append(r)
        roots += sorted(os.path.relpath(p, self.dir) for p in glob.glob(os.path.join(self.dir, "src/bin/*.rs")))
        for r in roots:
            prefix = () if r in ("src/lib.rs",) else (("<" + os.path.splitext(os.path.basename(r))[0] + ">"),)
            self.load(r, prefix, None, is_root=True)

    def load(self, rel, path, parent, is_root=False):
        full = os.path.join(self.dir, rel)
        if not os.path.exists(full):
            return
        sf = SourceFile(full, os.path.join(self.name, rel))
        self.files[rel] = sf
        mod = Module(self, path, sf, (0, len(sf.src)))
        if parent is not None:
            parent.children[path[-1]] = mod
            mod.parent = parent
        self.modules.append(mod)
        self.scan(sf, mod, 0, len(sf.src), rel, is_root)

    def scan(self, sf, mod, start, end, rel, is_root):
        """Find the excluded items and the child modules declared in [start, end) of sf."""
        text = sf.masked
        # #[cfg(test)] items anywhere in this range (nested ones included, cheap enough).
        planted = [m for m in CFG_PLANTED.finditer(sf.src, start, end) if text[m.start()] == "#"]
        cfgs = sorted(list(CFG_TEST.finditer(text, start, end)) + planted, key=lambda m: m.start())
        for m in cfgs:
            if sf.is_excluded(m.start()):
                continue
            k = m.end()
            # skip further attributes and white space
            while True:
                am = re.compile(r"\s*#\[").match(text, k)
                if not am:
                    break
                k = match_bracket(text, am.end() - 1) + 1
            e = item_end(text, k)
            sf.excluded.append((m.start(), e))
            decl = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").match(text, k)
            if decl:
                self.skipped_files.append(self.child_file(rel, is_root, decl.group(1)) or decl.group(1))
        depth_at = brace_depths(text, start, end)
        base_depth = depth_at(start)
        for m in MOD_DECL.finditer(text, start, end):
            pos = m.start(2)
            if sf.is_excluded(pos) or depth_at(m.start()) != base_depth:
                continue
            name = m.group(2)
            path_attr = re.search(r'#\[path\s*=\s*"([^"]*)"\]', sf.src[m.start(1) : m.end(1)])
            if name == "testing":
                # test support: left out of production, like tests
                if m.group(3) == "{":
                    sf.excluded.append((m.start(), match_brace(text, m.end(3) - 1)))
                else:
                    sf.excluded.append((m.start(), m.end()))
                    self.skipped_files.append(self.child_file(rel, is_root, name) or name)
                continue
            if m.group(3) == "{":
                open_pos = m.end(3) - 1
                close = match_brace(text, open_pos)
                child = Module(self, mod.path + (name,), sf, (open_pos, close))
                child.parent = mod
                mod.children[name] = child
                self.modules.append(child)
                self.scan(sf, child, open_pos + 1, close, rel, False)
                # an inline module's children live in a folder named after it
                continue
            if path_attr:
                child_rel = os.path.normpath(os.path.join(os.path.dirname(rel), path_attr.group(1)))
            else:
                child_rel = self.child_file(rel, is_root, name)
            if child_rel:
                self.load(child_rel, mod.path + (name,), mod)

    def child_file(self, rel, is_root, name):
        d = os.path.dirname(rel)
        base = os.path.basename(rel)
        if not (is_root or base == "mod.rs"):
            d = os.path.join(d, os.path.splitext(base)[0])
        for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
            if os.path.exists(os.path.join(self.dir, cand)):
                return cand
        return None

    def module_at(self, sf, pos):
        """The innermost module whose span in sf contains pos."""
        best = None
        for m in self.modules:
            if m.file is sf and m.span[0] <= pos <= m.span[1]:
                if best is None or len(m.path) > len(best.path):
                    best = m
        return best

    def by_path(self, path):
        for m in self.modules:
            if m.path == path:
                return m
        return None


def match_bracket(text, open_pos):
    depth = 0
    for k in range(open_pos, len(text)):
        if text[k] == "[":
            depth += 1
        elif text[k] == "]":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def brace_depths(text, start, end):
    """A function giving the brace depth (relative to `start`) at a position in [start, end)."""
    marks = []
    depth = 0
    for k in range(start, end):
        ch = text[k]
        if ch == "{":
            depth += 1
            marks.append((k + 1, depth))
        elif ch == "}":
            depth -= 1
            marks.append((k, depth))
    import bisect

    keys = [p for p, _ in marks]

    def at(pos):
        i = bisect.bisect_right(keys, pos) - 1
        return 0 if i < 0 else marks[i][1]

    return at


def workspace_crates(root):
    with open(os.path.join(root, "Cargo.toml"), encoding="utf8") as f:
        toml = f.read()
    m = re.search(r"(?ms)^\[workspace\].*?^members\s*=\s*\[(.*?)\]", toml)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    out = []
    for pat in members:
        for d in sorted(glob.glob(os.path.join(root, pat))):
            if os.path.isdir(os.path.join(d, "src")):
                out.append(os.path.relpath(d, root))
    return out


# ---------------------------------------------------------------------------------------------
# Counts.


def production_lines(crate):
    total = 0
    per_file = {}
    for rel, sf in crate.files.items():
        lines = sf.code.split("\n")
        excl_lines = set()
        for a, b in sf.excluded:
            for ln in range(line_of(sf.src, a, sf.starts), line_of(sf.src, b, sf.starts) + 1):
                excl_lines.add(ln)
        n = sum(1 for i, l in enumerate(lines, 1) if l.strip() and i not in excl_lines)
        per_file[sf.rel] = n
        total += n
    return total, per_file


IMPL = re.compile(r"\bimpl\b")


def impl_blocks(crate):
    """Yield (sf, header, open, close) for every production `impl` block."""
    for sf in crate.files.values():
        text = sf.masked
        for m in IMPL.finditer(text):
            if sf.is_excluded(m.start()):
                continue
            # An impl item starts a statement: preceded by start, `}`, `;`, `]` or a keyword.
            before = text[: m.start()].rstrip()
            if before and before[-1] not in "};]{" and not re.search(r"(unsafe|default|pub)$", before):
                continue
            k = m.end()
            depth = 0
            while k < len(text):
                ch = text[k]
                if ch == "<":
                    depth += 1
                elif ch == ">" and text[k - 1] != "-":
                    depth -= 1
                elif ch in "{;" and depth <= 0:
                    break
                k += 1
            if k >= len(text) or text[k] != "{":
                continue
            yield sf, " ".join(text[m.end() : k].split()), k, match_brace(text, k)


def strip_generics(s):
    out, depth = [], 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">" and (i == 0 or s[i - 1] != "-"):
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def public_methods(crate):
    counts = {}
    for sf, header, open_pos, close in impl_blocks(crate):
        h = strip_generics(header).strip()
        if re.search(r"\bfor\b", h):
            continue  # a trait impl
        h = re.sub(r"\bwhere\b.*", "", h).strip()
        ty = h.split("::")[-1].strip()
        if not IDENT.fullmatch(ty or ""):
            continue
        body = sf.masked[open_pos + 1 : close]
        depth_at = brace_depths(body, 0, len(body))
        n = 0
        for fm in re.finditer(r"\bpub\s+(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+\w+", body):
            if depth_at(fm.start()) == 0 and not sf.is_excluded(open_pos + 1 + fm.start()):
                n += 1
        entry = counts.setdefault(ty, {"methods": 0, "blocks": 0, "files": set()})
        entry["methods"] += n
        entry["blocks"] += 1
        entry["files"].add(sf.rel)
    return counts


TRAIT = re.compile(r"(?m)^[ \t]*pub\s+trait\s+(\w+)[^{;]*\{")


def port_traits(crate):
    out = []
    for rel, sf in crate.files.items():
        store_file = os.path.basename(rel) == "store.rs" or "/store/" in rel
        text = sf.masked
        for m in TRAIT.finditer(text):
            if sf.is_excluded(m.start()):
                continue
            open_pos = m.end() - 1
            close = match_brace(text, open_pos)
            body = text[open_pos + 1 : close]
            # A port listing's `@sync { .. }` group (payments-core's store/port.rs) holds methods
            # of the trait itself: its braces are not a level.
            for sm in reversed(list(re.finditer(r"@sync\s*\{", body))):
                end = match_brace(body, sm.end() - 1)
                body = body[: sm.start()] + " " * (sm.end() - sm.start()) + body[sm.end() : end] + " " + body[end + 1 :]
            depth_at = brace_depths(body, 0, len(body))
            required, provided, is_async = [], [], False
            for fm in re.finditer(r"\b(async\s+)?(?:unsafe\s+)?fn\s+(\w+)", body):
                if depth_at(fm.start()) != 0:
                    continue
                is_async = is_async or bool(fm.group(1))
                k, depth = fm.end(), 0
                while k < len(body):
                    ch = body[k]
                    if ch in "([":
                        depth += 1
                    elif ch in ")]":
                        depth -= 1
                    elif depth == 0 and ch in ";{":
                        break
                    k += 1
                (required if k < len(body) and body[k] == ";" else provided).append(fm.group(2))
            # async-trait methods show as `async fn`; an `fn .. -> BoxFuture` is async too
            is_async = is_async or "Future" in body
            if not (store_file or is_async) or not required or m.group(1) in NOT_PORTS:
                continue
            out.append(
                {
                    "trait": m.group(1),
                    "file": sf.rel,
                    "required": len(required),
                    "provided": len(provided),
                    "store_port": store_file,
                }
            )
    return out


FN = re.compile(r"\bfn\s+(\w+)")


def functions(crate):
    """Every production function with a body: (qualified name, file, first line, lines)."""
    out = []
    impls = [(sf, header, o, c) for sf, header, o, c in impl_blocks(crate)]
    for sf in crate.files.values():
        text = sf.masked
        for m in FN.finditer(text):
            if sf.is_excluded(m.start()):
                continue
            # the signature ends at `{` (a body) or `;` (a declaration)
            k, depth = m.end(), 0
            while k < len(text):
                ch = text[k]
                if ch in "([":
                    depth += 1
                elif ch in ")]":
                    depth -= 1
                elif depth == 0 and ch in ";{":
                    break
                k += 1
            if k >= len(text) or text[k] != "{":
                continue
            close = match_brace(text, k)
            first = line_of(sf.src, m.start(), sf.starts)
            last = line_of(sf.src, close, sf.starts)
            owner = None
            for isf, header, o, c in impls:
                if isf is sf and o < m.start() < c:
                    h = strip_generics(header)
                    h = re.sub(r"\bwhere\b.*", "", h)
                    ty = re.split(r"\bfor\b", h)[-1].strip().split("::")[-1].strip()
                    owner = ty
            mod = crate.module_at(sf, m.start())
            modname = mod.name if mod else "?"
            name = f"{owner}::{m.group(1)}" if owner else f"{modname}::{m.group(1)}"
            out.append(
                {
                    "name": name,
                    "key": f"{crate.name}:{modname}::{m.group(1)}",
                    "file": f"{sf.rel}:{first}",
                    "lines": last - first + 1,
                }
            )
    return out


RESULT = re.compile(r"\bResult\s*<")


def result_strings(crate):
    out = []
    for sf in crate.files.values():
        text = sf.masked
        for m in RESULT.finditer(text):
            if sf.is_excluded(m.start()):
                continue
            k, depth, args, cur = m.end(), 1, [], []
            while k < len(text) and depth:
                ch = text[k]
                if ch == "<":
                    depth += 1
                elif ch == ">" and text[k - 1] != "-":
                    depth -= 1
                    if depth == 0:
                        break
                elif ch in "([":
                    depth += 1
                elif ch in ")]":
                    depth -= 1
                elif ch == "," and depth == 1:
                    args.append("".join(cur))
                    cur = []
                    k += 1
                    continue
                cur.append(ch)
                k += 1
            args.append("".join(cur))
            if len(args) == 2 and re.sub(r"\s", "", args[1]) in ("String", "std::string::String"):
                out.append(f"{sf.rel}:{line_of(sf.src, m.start(), sf.starts)}")
    return out


# ---------------------------------------------------------------------------------------------
# The module graph.

USE = re.compile(r"(?s)\buse\s+([^;]*);")


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [[a,b], [a,c,d], [a,c,e]] (a glob gives its prefix + ['*'])."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@", tree))
    out = []

    def walk(prefix, s):
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if "{" in p:
                head, rest = p.split("{", 1)
                rest = rest[: rest.rfind("}")]
                walk(prefix + [x for x in head.split("::") if x], rest)
            else:
                out.append(prefix + [x for x in p.split("::") if x])

    walk([], tree)
    return out


def is_ancestor(a, b):
    """Whether module a is a proper ancestor of module b."""
    p = b.parent
    while p is not None:
        if p is a:
            return True
        p = p.parent
    return False


class Graph:
    def __init__(self, crate):
        self.crate = crate
        self.edges = {}  # module name -> set of module names
        self.upward = []  # (from, to, place)
        self.places = {}  # (from, to) -> the first place of that import
        self.reexports = {}  # Module -> {name: target path list}
        self.defined = {}  # Module -> set of item names defined there
        for mod in crate.modules:
            self.reexports[mod] = {}
        self.collect_reexports()
        for mod in crate.modules:
            self.edges.setdefault(mod.name, set())
        self.collect_edges()

    def own_text(self, mod):
        """The masked text of mod itself: its span without its inline children and excluded
        items, as (offset, text) pieces."""
        sf = mod.file
        a, b = mod.span
        holes = [c.span for c in mod.children.values() if c.file is sf] + [e for e in sf.excluded if a <= e[0] <= b]
        holes.sort()
        pieces, cur = [], a
        for h0, h1 in holes:
            if h0 > cur:
                pieces.append((cur, sf.masked[cur:h0]))
            cur = max(cur, h1 + 1)
        if cur < b:
            pieces.append((cur, sf.masked[cur:b]))
        return pieces

    def collect_reexports(self):
        pat = re.compile(r"(?s)\bpub(?:\([^)]*\))?\s+use\s+([^;]*);")
        for mod in self.crate.modules:
            for off, text in self.own_text(mod):
                for m in pat.finditer(text):
                    for path in expand_use(m.group(1)):
                        last, _, alias = path[-1].partition("@")
                        path = path[:-1] + [last]
                        if last == "*":
                            continue
                        self.reexports[mod][alias or last] = (path, mod)

    def resolve(self, mod, path, hops=0):
        """The module a path used in mod refers to (its deepest module prefix, through
        re-exports), or None when it leaves the crate."""
        if not path:
            return None
        head = path[0]
        if head == "crate":
            cur, rest = self.crate.by_path(()), path[1:]
        elif head == "self":
            cur, rest = mod, path[1:]
        elif head == "super":
            cur, rest = mod, path
            while rest and rest[0] == "super":
                cur = cur.parent if cur and cur.parent else cur
                rest = rest[1:]
        elif head in mod.children:
            cur, rest = mod, path
        else:
            return None
        return self.descend(cur, rest, hops)

    def descend(self, cur, rest, hops):
        while rest and rest[0] in cur.children:
            cur, rest = cur.children[rest[0]], rest[1:]
        if rest and rest[0] in self.reexports.get(cur, {}) and hops < 10:
            target, where = self.reexports[cur][rest[0]]
            if where is cur and target[:1] == [rest[0]]:
                return cur
            r = self.resolve(where, target, hops + 1)
            return None if r is None else self.descend(r, rest[1:], hops + 1)
        return cur

    def add(self, mod, target, place):
        if target is None or target is mod:
            return
        self.places.setdefault((mod.name, target.name), place)
        if is_ancestor(mod, target):
            return  # a module uses its own child modules: the tree's own direction
        self.edges[mod.name].add(target.name)
        # upward: the item is defined in one of mod's ancestors
        anc = mod.parent
        while anc is not None:
            if anc is target:
                self.upward.append((mod.name, target.name, place))
                break
            anc = anc.parent

    def collect_edges(self):
        for mod in self.crate.modules:
            sf = mod.file
            for off, text in self.own_text(mod):
                for m in USE.finditer(text):
                    for path in expand_use(m.group(1)):
                        path = [p.partition("@")[0] for p in path]
                        if path and path[-1] == "*":
                            path = path[:-1]
                        self.add(mod, self.resolve(mod, path), f"{sf.rel}:{line_of(sf.src, off + m.start(), sf.starts)}")
                used = set()
                # paths in code (not in `use`): crate::a::b, super::a, self::a, child::a
                code = USE.sub(lambda mm: " " * len(mm.group(0)), text)
                for m in re.finditer(r"(?<![\w:])((?:crate|super|self|\w+)(?:::\w+)+)", code):
                    segs = m.group(1).split("::")
                    if segs[0] not in ("crate", "super", "self") and segs[0] not in mod.children:
                        continue
                    key = m.group(1)
                    if key in used:
                        continue
                    used.add(key)
                    self.add(mod, self.resolve(mod, segs), f"{sf.rel}:{line_of(sf.src, off + m.start(), sf.starts)}")

    def cycles(self):
        index, low, stack, on, out = {}, {}, [], set(), []
        counter = [0]
        sys.setrecursionlimit(10000)

        def strong(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in sorted(self.edges.get(v, ())):
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        for v in sorted(self.edges):
            if v not in index:
                strong(v)
        return sorted(out)


# ---------------------------------------------------------------------------------------------


def measure(root):
    crates = [Crate(root, name) for name in workspace_crates(root)]
    report = {"root": os.path.abspath(root), "crates": {}, "budgets": BUDGETS}
    all_types, all_ports, all_fns, all_results = [], [], [], []
    for c in crates:
        lines, per_file = production_lines(c)
        graph = Graph(c)
        cycles = graph.cycles()
        types = public_methods(c)
        for ty, e in types.items():
            all_types.append(
                {
                    "crate": c.name,
                    "type": ty,
                    "methods": e["methods"],
                    "impl_blocks": e["blocks"],
                    "files": len(e["files"]),
                    "service": bool(SERVICE_TYPE.search(ty)),
                }
            )
        for p in port_traits(c):
            all_ports.append(dict(p, crate=c.name))
        for f in functions(c):
            all_fns.append(dict(f, crate=c.name))
        rs = result_strings(c)
        all_results += rs
        report["crates"][c.name] = {
            "production_lines": lines,
            "files": len(c.files),
            "largest_files": sorted(per_file.items(), key=lambda kv: -kv[1])[:3],
            "cycles": cycles,
            "cycle_edges": [
                [f"{a} -> {b} ({graph.places[(a, b)]})" for a in cyc for b in sorted(graph.edges[a]) if b in cyc]
                for cyc in cycles
            ],
            "upward_imports": len(graph.upward),
            "upward_pairs": len({(a, b) for a, b, _ in graph.upward}),
            "upward": [f"{a} -> {b} ({p})" for a, b, p in graph.upward],
            "result_string": len(rs),
        }
    all_types.sort(key=lambda t: (-t["methods"], t["crate"], t["type"]))
    all_ports.sort(key=lambda p: (-p["required"], p["crate"], p["trait"]))
    all_fns.sort(key=lambda f: (-f["lines"], f["file"]))
    report["types"] = all_types[:12]
    services = [t for t in all_types if t["service"]]
    report["largest_service"] = services[0] if services else None
    report["ports"] = all_ports
    report["store_port_required_total"] = {
        c.name: sum(p["required"] for p in all_ports if p["crate"] == c.name and p["store_port"])
        for c in crates
        if any(p["crate"] == c.name and p["store_port"] for p in all_ports)
    }
    counted = [f for f in all_fns if f["key"] not in EXEMPT_FUNCTIONS]
    report["longest_functions"] = counted[:5]
    report["exempt_functions"] = [f for f in all_fns if f["key"] in EXEMPT_FUNCTIONS]
    report["result_string"] = all_results
    report["figures"] = {
        "core_production_lines": report["crates"].get(CORE_CRATE, {}).get("production_lines", 0),
        "service_public_methods": services[0]["methods"] if services else 0,
        "port_required_methods": max((p["required"] for p in all_ports), default=0),
        "import_cycles": sum(len(c["cycles"]) for c in report["crates"].values()),
        "function_lines": counted[0]["lines"] if counted else 0,
        "result_string": len(all_results),
    }
    return report


def over_budget(report, only=None):
    out = []
    for k, limit in BUDGETS.items():
        if only and k not in only:
            continue
        v = report["figures"][k]
        if v > limit:
            out.append(f"{k}: {v} > {limit}")
    return out


def print_table(r):
    p = print
    p(f"shape of {r['root']}")
    p("")
    p(f"{'crate':<26}{'prod lines':>11}{'files':>7}{'cycles':>8}{'upward':>8}{'Result<_,String>':>18}")
    for name, c in r["crates"].items():
        p(
            f"{name:<26}{c['production_lines']:>11}{c['files']:>7}{len(c['cycles']):>8}"
            f"{c['upward_imports']:>8}{c['result_string']:>18}"
        )
    p("")
    p("import cycles (modules of one strongly connected component):")
    any_cycle = False
    for name, c in r["crates"].items():
        for cyc, edges in zip(c["cycles"], c["cycle_edges"]):
            any_cycle = True
            p(f"  {name}: {len(cyc)} modules: {', '.join(cyc)}")
            for e in edges:
                p(f"      {e}")
    if not any_cycle:
        p("  none")
    upward = [
        f"{n} {c['upward_imports']} ({c['upward_pairs']} pair{'' if c['upward_pairs'] == 1 else 's'} of modules)"
        for n, c in r["crates"].items()
        if c["upward_imports"]
    ]
    p("upward imports (a module uses an item its ancestor defines; information): " + (", ".join(upward) or "none"))
    p("")
    p("public methods per type (largest; * = service type):")
    for t in r["types"]:
        star = "*" if t["service"] else " "
        p(f"  {star} {t['crate']:<24}{t['type']:<28}{t['methods']:>4} in {t['impl_blocks']} impl blocks, {t['files']} files")
    ls = r["largest_service"]
    if ls:
        p(f"  largest service type: {ls['type']} ({ls['crate']}), {ls['methods']} public methods")
    p("")
    p("port traits, required methods (provided in brackets):")
    for pt in r["ports"]:
        kind = "storage" if pt["store_port"] else "async"
        p(f"  {pt['crate']:<24}{pt['trait']:<26}{pt['required']:>4}  ({pt['provided']})  {kind}  {pt['file']}")
    for crate, n in r["store_port_required_total"].items():
        p(f"  storage port of {crate}: {n} required methods")
    p("")
    p("longest production functions:")
    for f in r["longest_functions"]:
        p(f"  {f['lines']:>5} lines  {f['name']}  {f['file']}")
    for f in r["exempt_functions"]:
        p(f"  ({f['lines']} lines  {f['name']}  {f['file']}: exempt, the state table)")
    p("")
    p(f"Result<_, String> in production code: {len(r['result_string'])}")
    for place in r["result_string"]:
        p(f"  {place}")
    p("")
    p("budgets (issue 56):")
    for k, limit in BUDGETS.items():
        v = r["figures"][k]
        p(f"  {k:<26}{v:>7}  budget {limit:<7}{'ok' if v <= limit else 'OVER'}")


# ---------------------------------------------------------------------------------------------
# The architecture document's figures.


def check_docs(root, doc, report):
    """Compare the doc with the code: the module table of payments-core (every `pub mod` of its
    lib.rs, no other), the storage repository table (each trait's required methods) and the
    sentences that state the port's totals (marked `<!-- shape: KEY -->`)."""
    problems = []
    with open(doc, encoding="utf8") as f:
        text = f.read()
    # 1. the module table: the first table after the heading naming payments-core
    lib = os.path.join(root, CORE_CRATE, "src/lib.rs")
    with open(lib, encoding="utf8") as f:
        _, masked = lex(f.read())
    pub_mods = set(re.findall(r"(?m)^\s*pub\s+mod\s+(\w+)", masked))
    sec = re.search(r"(?ms)^#+ `" + re.escape(CORE_CRATE) + r"`.*?\n((?:\|[^\n]*\n)+)", text)
    if not sec:
        problems.append(f"{doc}: no module table under a heading naming `{CORE_CRATE}`")
    else:
        doc_mods = set()
        for row in sec.group(1).splitlines()[2:]:
            first = row.split("|")[1] if row.count("|") > 1 else ""
            doc_mods |= set(re.findall(r"`(\w+)`", first))
        for m in sorted(pub_mods - doc_mods):
            problems.append(f"{doc}: module table lacks `{m}` (a `pub mod` of {CORE_CRATE}/src/lib.rs)")
        for m in sorted(doc_mods - pub_mods):
            problems.append(f"{doc}: module table names `{m}`, not a `pub mod` of {CORE_CRATE}/src/lib.rs")
    # 2. the repository table: `| `Trait` | ... | N |`
    ports = {(p["trait"]): p for p in report["ports"]}
    for m in re.finditer(r"(?m)^\| `(\w+)` \|.*\| (\d+) \|\s*$", text):
        name, n = m.group(1), int(m.group(2))
        if name in ports and ports[name]["required"] != n:
            problems.append(f"{doc}: `{name}` has {n} required methods in the doc, {ports[name]['required']} in the code")
    # 3. marked figures: <!-- shape: port_required:payments-core -->52
    values = {}
    for crate, n in report["store_port_required_total"].items():
        values[f"port_required:{crate}"] = n
    values["port_required:all"] = sum(report["store_port_required_total"].values())
    values.update({k: v for k, v in report["figures"].items()})
    for m in re.finditer(r"<!-- shape: ([\w:.-]+) -->\s*\**([\d,.]+)(k?)", text):
        key, shown, kilo = m.group(1), m.group(2), m.group(3)
        if key not in values:
            problems.append(f"{doc}: unknown figure `{key}`")
            continue
        actual = values[key]
        if kilo:
            ok = f"{actual / 1000:.1f}" == shown
        else:
            ok = int(shown.replace(",", "")) == actual
        if not ok:
            problems.append(f"{doc}: {key} is {shown}{kilo} in the doc, {actual} in the code")
    if not re.search(r"<!-- shape: port_required:", text):
        problems.append(f"{doc}: no marked port count (`<!-- shape: port_required:CRATE -->N`)")
    return problems


def main():
    # `shape.py | head` ends quietly
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true", help="fail when a count is over its budget")
    ap.add_argument("--check-cycles", action="store_true", help="fail when a crate has an import cycle")
    ap.add_argument("--check-docs", metavar="DOC", help="fail when DOC's figures disagree with the code")
    a = ap.parse_args()
    root = os.path.normpath(a.root)
    report = measure(root)
    if a.json:
        print(json.dumps(report, indent=2, default=sorted))
    else:
        print_table(report)
    failed = []
    if a.check:
        failed += over_budget(report)
    if a.check_cycles:
        failed += over_budget(report, only={"import_cycles"})
    if a.check_docs:
        doc = a.check_docs if os.path.isabs(a.check_docs) else os.path.join(root, a.check_docs)
        failed += check_docs(root, doc, report)
    for f in failed:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
