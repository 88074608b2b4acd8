#!/usr/bin/env bash
# The benchmark suite, one command: starts a throwaway PostgreSQL, runs the Rust bench (the real
# ctxd binary and tonic client; see benches/suite/main.rs), then measures tiktoken and LangChain
# trim_messages (Python) on the same text and conversation and prints every ratio.
#   scripts/bench.sh               # full run (about 10 minutes on 2 cores)
#   BENCH_QUICK=1 scripts/bench.sh # small sizes: proves the harness end to end (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d); chmod 755 "$work"
trap 'scripts/throwaway-postgres.sh stop "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check tiktoken langchain-core
url=$(scripts/throwaway-postgres.sh start "$work/pg")
DATABASE_URL=$url cargo bench --bench suite | tee "$work/bench.txt"

data=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/bpe-openai-*/data | head -1)
echo "# tiktoken (Python) on the same texts"
for text in corpus chat; do
  "$work/venv/bin/python" scripts/tiktoken_oracle.py "$data" --throughput "target/bench/$text.txt" | tee -a "$work/tiktoken.txt"
done
max_tokens=$(python3 -c 'import json,sys; [print(j["max_tokens"]) for j in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")) if j.get("bench") == "build_context"]' "$work/bench.txt")
echo "# LangChain trim_messages + tiktoken (Python) on the same conversation, max_tokens=$max_tokens"
"$work/venv/bin/python" scripts/langchain_trim.py "$data" target/bench/conversation.json "$max_tokens" | tee "$work/langchain.txt"

echo "# ratios"
python3 - "$work/bench.txt" "$work/tiktoken.txt" "$work/langchain.txt" <<'PY'
import json, sys
def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]
ours, theirs = lines(sys.argv[1]), lines(sys.argv[2])
tiktoken = {(j["text"], j["encoding"]): j for j in theirs}
for j in ours:
    if "encoding" in j:
        t = tiktoken[(j["text"], j["encoding"])]
        same = "equal counts" if j["tokens"] == t["tokens"] else "COUNTS DIFFER"
        print(f"{j['text']} text, {j['encoding']}: ctxd {j['bytes_per_sec'] / 1e6:.1f} MB/s, tiktoken {t['bytes_per_sec'] / 1e6:.1f} MB/s"
              f" = {j['bytes_per_sec'] / t['bytes_per_sec']:.2f}x ({same}; target >= 2x)")
build = next(j for j in ours if j.get("bench") == "build_context")
trim = lines(sys.argv[3])[0]
print(f"{build['messages']} messages: LangChain trim p50 {trim['p50_ms']:.1f} ms / BuildContext p50 {build['p50_ms']:.2f} ms"
      f" = {trim['p50_ms'] / build['p50_ms']:.0f}x  (target >= 100x)")
PY
