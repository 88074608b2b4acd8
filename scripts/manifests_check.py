#!/usr/bin/env python3
"""Checks what `kubectl apply -k deploy/k8s` applies: no Secret (the real one is created from the
operator's own values; an example applied from the Kustomization would turn auth off and
overwrite a real Secret of that name) and no placeholder credential in any manifest it lists.

    scripts/manifests_check.py [deploy/k8s]    exits 1, naming each problem, when there are any
"""

import pathlib
import re
import sys

PLACEHOLDERS = re.compile(r"change-?me|changeme|password123|example-key|<password>|CTXD_API_KEYS:\s*\"\"", re.I)


def resources(folder):
    """The files the Kustomization lists under `resources:` (one `- name` per line)."""
    listed, inside = [], False
    for line in (folder / "kustomization.yaml").read_text().splitlines():
        if re.match(r"^\S", line):
            inside = line.startswith("resources:")
            continue
        item = re.match(r"^\s+-\s+(\S+)", line)
        if inside and item:
            listed.append(item.group(1))
    return listed


def main():
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "deploy/k8s")
    problems = []
    listed = resources(folder)
    if not listed:
        problems.append("kustomization.yaml lists no resources")
    for name in listed:
        text = (folder / name).read_text()
        if re.search(r"^kind:\s*Secret\s*$", text, re.M):
            problems.append(f"{name}: a Secret is applied by the Kustomization")
        for n, line in enumerate(text.splitlines(), 1):
            if PLACEHOLDERS.search(line) and not line.lstrip().startswith("#"):
                problems.append(f"{name}:{n}: placeholder credential: {line.strip()}")
    for problem in problems:
        print(problem)
    print(f"{len(listed)} manifests applied, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
