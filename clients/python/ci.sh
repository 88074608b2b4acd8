#!/usr/bin/env bash
# CI for the Python client: a venv with the pinned test dependencies (requirements-test.txt),
# the package installed from this directory as users install it, a check that the committed
# stubs are what generate.sh makes from proto/ (byte for byte), and the test suite against a running ctxd.
#   clients/python/ci.sh HOST:PORT
# The venv is kept (keyed by the pins) so a second run, e.g. against the PostgreSQL-backed
# server, reuses it; pip's wheel cache serves the downloads after the first time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${1:?usage: clients/python/ci.sh HOST:PORT}"
pins=$(cat "$here/requirements-test.txt" "$here/requirements-dev.txt" | sha256sum | cut -c1-12)
venv="${CTXD_PY_VENV:-${TMPDIR:-/tmp}/ctxd-pyclient-$pins}"
pip() { "$venv/bin/pip" --disable-pip-version-check --quiet "$@"; }
if [ ! -f "$venv/.ready" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip install -r "$here/requirements-test.txt" -r "$here/requirements-dev.txt"
  touch "$venv/.ready"
fi
# Installed from a copy: setuptools builds in the source tree, which CI keeps clean.
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
mkdir "$fresh/pkg" && cp -R "$here/pyproject.toml" "$here/README.md" "$here/src" "$fresh/pkg/"
pip install --force-reinstall --no-deps "$fresh/pkg"

echo "== stubs are current: generate.sh into a scratch directory, compared with src/ctxd/v1"
"$here/generate.sh" "$venv/bin/python" "$fresh/gen"
if ! diff -r -x __pycache__ "$fresh/gen/ctxd/v1" "$here/src/ctxd/v1" >"$fresh/diff"; then
  echo "clients/python: the committed stubs differ from proto/: run clients/python/generate.sh and commit" >&2
  head -50 "$fresh/diff" >&2
  exit 1
fi

echo "== pytest against $target"
cd "$here"
# Import the installed package, not ./src: this checks what `pip install ./clients/python` ships.
PYTHONDONTWRITEBYTECODE=1 CTXD_TARGET="$target" "$venv/bin/python" -m pytest -p no:cacheprovider -q --import-mode=importlib tests

echo "== the Google ADK tier (google-adk needs google-genai 2.x: a venv of its own, requirements-adk.txt)"
adk_pins=$(sha256sum "$here/requirements-adk.txt" | cut -c1-12)
adk_venv="${CTXD_PY_ADK_VENV:-${TMPDIR:-/tmp}/ctxd-pyclient-adk-$adk_pins}"
if [ ! -f "$adk_venv/.ready" ]; then
  rm -rf "$adk_venv"
  python3 -m venv "$adk_venv"
  "$adk_venv/bin/pip" --disable-pip-version-check --quiet install -r "$here/requirements-adk.txt"
  touch "$adk_venv/.ready"
fi
"$adk_venv/bin/pip" --disable-pip-version-check --quiet install --force-reinstall --no-deps "$fresh/pkg"
PYTHONDONTWRITEBYTECODE=1 OTEL_SDK_DISABLED=true CTXD_TARGET="$target" "$adk_venv/bin/python" -m pytest -p no:cacheprovider -q \
  --import-mode=importlib tests/test_adk.py
