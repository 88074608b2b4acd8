#!/usr/bin/env python3
"""Holds the source to the sizes a reader can take in (docs/design.md, "Architecture"): no file
under src/ over 500 lines and no function over 80 lines, tests aside (files named tests.rs and
`#[cfg(test)]` modules). Prints the offenders and exits 1 when there are any.

    scripts/sizes.py [--max-file 500] [--max-fn 80] [--top N]
"""

import argparse
import pathlib
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]")


def code_of(line):
    """The line without string literals, char literals and its line comment."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "' '", line)
    return line.split("//", 1)[0]


def functions(lines):
    """(name, first line, length) of each function outside test modules."""
    found = []
    skip_until_depth = None
    depth = 0
    open_fns = []  # (name, start line, depth at which its body opened)
    pending_test = False
    for number, raw in enumerate(lines, 1):
        code = code_of(raw)
        if CFG_TEST.match(raw):
            pending_test = True
        match = FN.match(code)
        if match and skip_until_depth is None:
            open_fns.append([match.group(6), number, None])
        for ch in code:
            if ch == "{":
                if pending_test and skip_until_depth is None:
                    skip_until_depth = depth
                    pending_test = False
                if open_fns and open_fns[-1][2] is None:
                    open_fns[-1][2] = depth
                depth += 1
            elif ch == "}":
                depth -= 1
                if skip_until_depth is not None and depth == skip_until_depth:
                    skip_until_depth = None
                if open_fns and open_fns[-1][2] == depth:
                    name, start, _ = open_fns.pop()
                    found.append((name, start, number - start + 1))
            elif ch == ";" and open_fns and open_fns[-1][2] is None:
                open_fns.pop()  # a declaration without a body (trait method)
        if pending_test and ";" in code and "{" not in code:
            pending_test = False  # `#[cfg(test)]` on an item without a body (a `use`)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-file", type=int, default=500)
    parser.add_argument("--max-fn", type=int, default=80)
    parser.add_argument("--top", type=int, default=0, help="also list the N longest functions")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent / "src"
    problems, all_fns = [], []
    for path in sorted(root.rglob("*.rs")):
        if path.name == "tests.rs":
            continue
        lines = path.read_text().splitlines()
        rel = path.relative_to(root.parent)
        if len(lines) > args.max_file:
            problems.append(f"{rel}: {len(lines)} lines (at most {args.max_file})")
        for name, start, length in functions(lines):
            all_fns.append((length, f"{rel}:{start} {name}"))
            if length > args.max_fn:
                problems.append(f"{rel}:{start}: fn {name} is {length} lines (at most {args.max_fn})")
    for length, where in sorted(all_fns, reverse=True)[: args.top]:
        print(f"{length:5} {where}")
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(1)
    print(f"sizes: every file under src/ within {args.max_file} lines, every function within {args.max_fn}")


if __name__ == "__main__":
    main()
