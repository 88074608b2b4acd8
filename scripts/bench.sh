#!/usr/bin/env bash
# Runs the BuildContext benchmark against a throwaway PostgreSQL and compares token counting
# with tiktoken (Python) on the same text. Usage: scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d); chmod 755 "$work"
trap 'scripts/throwaway-postgres.sh stop "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
url=$(scripts/throwaway-postgres.sh start "$work/pg")
DATABASE_URL=$url cargo bench --bench build_context | tee "$work/bench.txt"

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check tiktoken
data=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/bpe-openai-*/data | head -1)
echo "# tiktoken (Python) on the same text"
"$work/venv/bin/python" scripts/tiktoken_oracle.py "$data" --throughput target/bench-token-text.txt | tee "$work/tiktoken.txt"
python3 - "$work/bench.txt" "$work/tiktoken.txt" <<'PY'
import json, sys
ours = {j["encoding"]: j for j in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{"))}
theirs = {j["encoding"]: j for j in (json.loads(l) for l in open(sys.argv[2]) if l.startswith("{"))}
for name in ours:
    same = "equal counts" if ours[name]["tokens"] == theirs[name]["tokens"] else "COUNTS DIFFER"
    print(f"{name}: ctxd/tiktoken throughput = {ours[name]['bytes_per_sec'] / theirs[name]['bytes_per_sec']:.2f}x ({same}; target >= 2x)")
PY
