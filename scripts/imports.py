#!/usr/bin/env python3
"""Draws the import graph of src/ from its `use` statements (and the `crate::`/`super::` paths
written inline) and holds it to docs/design.md, "Architecture":

- no circle of imports spans more than one file, except the ones design.md lists under
  "Circles we keep", each with its reason;
- no file imports from a layer above its own (the layers are LAYERS below, lowest first).

Tests are left out (files named tests.rs or *_tests.rs, and `#[cfg(test)]` modules): a test
module imports what it tests. An import of a name that a module re-exports (`pub use`) is
followed to the file that defines the name, so a folder's mod.rs that only hands names on is
not a knot; its `pub use` of its own submodules' names declares its tree and is an arrow only
where its own code uses the name.

    scripts/imports.py            check; prints the offenders and exits 1 when there are any
    scripts/imports.py --graph    also prints every arrow (file -> file: names)
"""

import argparse
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# The layers, lowest first: each is whole folders of src/ (and the few files that must sit at its
# root), so the tree shows the layers; `main` checks that every entry of src/ is in exactly one
# layer and that the root holds at most MAX_ROOT_FILES files. A file may import its own layer and
# the layers below it, never one above.
LAYERS = [
    ("foundation", ["src/proto.rs", "src/runtime/"]),
    ("domain", ["src/domain/"]),
    ("configuration", ["src/config/"]),
    ("storage and models", ["src/store/", "src/models/"]),
    ("use cases", ["src/service/"]),
    ("transport", ["src/grpc/"]),
    ("composition root", ["src/startup/", "src/fuzzing.rs", "src/lib.rs", "src/main.rs"]),
]
MAX_ROOT_FILES = 4

# The domain's floors, lowest first, held like the layers: the vocabulary imports nothing above
# it, the rules stand on the vocabulary, and what uses the rules on both. The first matching
# prefix decides a file's floor.
DOMAIN_FLOORS = [
    ("domain vocabulary", ["src/domain/tokenize.rs", "src/domain/ids.rs", "src/domain/violation.rs",
                           "src/domain/usage.rs", "src/domain/reasoning.rs", "src/domain/format.rs",
                           "src/domain/token_counts.rs", "src/domain/native_content.rs",
                           "src/domain/message.rs"]),
    ("domain rules", ["src/domain/attachments.rs", "src/domain/changes.rs", "src/domain/native/",
                      "src/domain/tool_protocol.rs",
                      "src/domain/search/", "src/domain/summary.rs", "src/domain/working_memory/"]),
    ("domain use of the rules", ["src/domain/context/", "src/domain/append/", "src/domain/conversation/"]),
    ("domain face", ["src/domain/mod.rs"]),
]


def folder_problems():
    """Where the tree and LAYERS disagree: an entry of src/ in no layer or in two, a layer
    naming what is not there, more files at the root than MAX_ROOT_FILES."""
    problems = []
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in SRC.iterdir()
                     if p.is_dir() or p.suffix == ".rs")
    named = [e for _, prefixes in LAYERS for e in prefixes]
    for entry in entries:
        count = named.count(f"src/{entry}")
        if count != 1:
            problems.append(f"src/{entry}: in {count} layers (scripts/imports.py, LAYERS)")
    for entry in named:
        if entry.removeprefix("src/") not in entries:
            problems.append(f"{entry}: named in LAYERS but not in the tree")
    root_files = [e for e in entries if not e.endswith("/")]
    if len(root_files) > MAX_ROOT_FILES:
        problems.append(f"src/ holds {len(root_files)} files ({', '.join(root_files)}): at most {MAX_ROOT_FILES}")
    return problems


USE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;{]*(?:\{[^;]*\})?[^;]*);", re.S)
INLINE_PATH = re.compile(r"(?<![\w:])(crate|super|self|ctxd)((?:::\w+)+)")
TEST_ATTR = re.compile(r"#\[cfg\(test\)\]")


def strip(text):
    """The code without comments, string and char literals (so their words are no paths)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12])):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_tests(code):
    """The code with every `#[cfg(test)]` item (a module block, a `mod x;`, a function) cut out."""
    while True:
        m = TEST_ATTR.search(code)
        if not m:
            return code
        j = m.end()
        semi, brace = code.find(";", j), code.find("{", j)
        if brace < 0 or (0 <= semi < brace):
            code = code[:m.start()] + code[semi + 1:]
            continue
        depth, k = 0, brace
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        code = code[:m.start()] + code[k + 1:]


def expand(tree):
    """`a::{b, c::{d as e}, self}` -> [(["a","b"], "b"), (["a","c","d"], "e"), (["a"], "a")]."""
    tokens = re.findall(r"::|\{|\}|,|\*|\w+", tree)
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def one(prefix):
        """One use tree after `prefix`: `a::b`, `a::{...}`, `a as b`, `*`."""
        segs = list(prefix)
        while True:
            tok = peek()
            if tok == "{":
                take()
                out = []
                while peek() not in ("}", None):
                    out += one(segs)
                    if peek() == ",":
                        take()
                take()
                return out
            if tok is None or tok in (",", "}"):
                break
            segs.append(take())
            if peek() == "::":
                take()
                continue
            if peek() == "as":
                take()
                alias = take()
                return [(trim(segs), alias)]
            break
        segs = trim(segs)
        return [(segs, segs[-1])] if segs else []

    def trim(segs):
        return segs[:-1] if segs and segs[-1] == "self" else segs

    out = []
    while peek() is not None:
        out += one([])
        if peek() == ",":
            take()
    return out


class Crate:
    def __init__(self):
        self.files = {}  # module path tuple -> file
        self.module_of = {}  # file -> module path tuple
        for path in sorted(SRC.rglob("*.rs")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "tests.rs" or path.name.endswith("_tests.rs"):
                continue
            parts = list(path.relative_to(SRC).with_suffix("").parts)
            if parts in (["lib"], ["main"]):
                parts = []
            elif parts[-1] == "mod":
                parts = parts[:-1]
            key = tuple(parts)
            if rel == "src/main.rs":
                self.module_of[rel] = ("<main>",)
                continue
            self.files[key] = rel
            self.module_of[rel] = key
        self.code = {f: without_tests(strip((ROOT / f).read_text())) for f in self.module_of}
        self.reexports = {f: {} for f in self.module_of}  # file -> name -> (segments, file of the use)
        for f in self.module_of:
            for m in USE.finditer(self.code[f]):
                if m.group(1) and m.group(1).strip().startswith("pub") and "(crate)" not in m.group(1).replace(" ", "") or m.group(1) and "pub(crate)" in m.group(1).replace(" ", ""):
                    for segs, alias in expand(m.group(2)):
                        self.reexports[f][alias] = segs

    def absolute(self, f, segs):
        """The module path `segs` names from file `f`, or None for another crate."""
        here = list(self.module_of[f])
        if here == ["<main>"]:
            return segs[1:] if segs[0] == "ctxd" else None
        first = segs[0]
        if first == "crate":
            return segs[1:]
        if first in ("super", "self"):
            base, rest = here, list(segs)
            while rest and rest[0] in ("super", "self"):
                if rest.pop(0) == "super":
                    base = base[:-1]
            return base + rest
        if tuple(here + [first]) in self.files:
            return here + segs
        return None

    def resolve(self, f, segs, depth=0):
        """(file, item name) that `segs` (used in file `f`) names, following re-exports."""
        path = self.absolute(f, segs)
        if path is None:
            return None
        base = []
        while len(base) < len(path) and tuple(base + [path[len(base)]]) in self.files:
            base.append(path[len(base)])
        target = self.files.get(tuple(base))
        if target is None:
            return None
        rest = path[len(base):]
        if rest and depth < 8:
            exported = self.reexports[target].get(rest[0])
            if exported is not None:
                further = self.resolve(target, exported + rest[1:], depth + 1)
                if further:
                    return further
        return target, (rest[0] if rest else "")

    def arrows(self):
        found = collections.defaultdict(set)
        for f in self.module_of:
            code = self.code[f]
            without_uses = re.sub(r"\bmod\s+\w+\s*;", "", USE.sub("", code))
            for m in USE.finditer(code):
                is_pub = bool(m.group(1))
                for segs, alias in expand(m.group(2)):
                    if segs[-1] == "*":
                        segs = segs[:-1]
                    if not segs:
                        continue
                    # A `pub use` is an arrow to where the name stands, not further.
                    hit = self.resolve(f, segs, depth=8 if is_pub else 0)
                    if not hit or hit[0] == f:
                        continue
                    # A module handing on a name of its own submodule declares its tree; it
                    # imports the name only where its own code uses it.
                    below = self.module_of[hit[0]][:len(self.module_of[f])] == self.module_of[f]
                    if is_pub and below and not re.search(rf"\b{re.escape(alias)}\b", without_uses):
                        continue
                    found[(f, hit[0])].add(hit[1] or segs[-1])
            for m in INLINE_PATH.finditer(without_uses):
                segs = [m.group(1)] + [s for s in m.group(2).split("::") if s]
                hit = self.resolve(f, segs)
                if hit and hit[0] != f:
                    found[(f, hit[0])].add(hit[1] or segs[-1])
        return found


def circles(files, arrows):
    graph = collections.defaultdict(set)
    for a, b in arrows:
        graph[a].add(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
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

    for v in sorted(files):
        if v not in index:
            visit(v)
    return out


def matches(f, prefixes):
    return any(f == p or (p.endswith("/") and f.startswith(p)) for p in prefixes)


def layer_of(f):
    """The file's rank, lowest first, and name: its layer, or inside the domain its floor."""
    rank = 0
    for name, prefixes in LAYERS:
        if name == "domain":
            for floor, floor_prefixes in DOMAIN_FLOORS:
                if matches(f, floor_prefixes):
                    return rank, floor
                rank += 1
            if matches(f, prefixes):
                return None, None
            continue
        if matches(f, prefixes):
            return rank, name
        rank += 1
    return None, None


def kept_circles():
    """The circles docs/design.md names under "Circles we keep": one list item each, its first
    line naming its files in backticks; the list ends at the first blank line."""
    design = (ROOT / "docs" / "design.md").read_text()
    m = re.search(r"Circles we keep[^\n]*\n(.*?)(\n\n|\Z)", design, re.S)
    kept = []
    if m:
        for line in m.group(1).splitlines():
            if not line.startswith("- "):
                continue
            files = re.findall(r"`(src/[^`]+\.rs)`", line)
            if len(files) > 1:
                kept.append(sorted(files))
    return kept


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--graph", action="store_true", help="print every arrow")
    args = parser.parse_args()
    crate = Crate()
    arrows = crate.arrows()
    if args.graph:
        for (a, b), names in sorted(arrows.items()):
            print(f"{a} -> {b}: {', '.join(sorted(names))}")
    problems = 0
    for problem in folder_problems():
        problems += 1
        print(problem)
    kept = kept_circles()
    for circle in circles(crate.module_of, arrows):
        if circle in kept:
            continue
        problems += 1
        print(f"circle of {len(circle)} files:")
        members = set(circle)
        for (a, b), names in sorted(arrows.items()):
            if a in members and b in members:
                print(f"  {a} -> {b}: {', '.join(sorted(names))}")
    for f in sorted(crate.module_of):
        if layer_of(f)[0] is None:
            problems += 1
            print(f"{f}: in no layer (scripts/imports.py, LAYERS)")
    for (a, b), names in sorted(arrows.items()):
        (ra, na), (rb, nb) = layer_of(a), layer_of(b)
        if ra is not None and rb is not None and rb > ra:
            problems += 1
            print(f"upward: {a} ({na}) -> {b} ({nb}): {', '.join(sorted(names))}")
    files = len(crate.module_of)
    print(f"{files} files, {len(arrows)} arrows, {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
