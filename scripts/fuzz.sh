#!/usr/bin/env bash
# Runs each cargo-fuzz target for a bounded time and prints executions and findings.
#   scripts/fuzz.sh          # 300 s per target
#   scripts/fuzz.sh 20       # 20 s per target (CI)
# Targets (fuzz/fuzz_targets): decode_validate (bytes -> every request type -> validation) and
# build_context (structured conversations and requests -> context assembly + invariants).
# Stable Rust: no sanitizer (`--sanitizer none`); libFuzzer's coverage guidance still applies.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --quiet
cd fuzz
mkdir -p corpus/decode_validate corpus/build_context
status=0
for target in decode_validate build_context; do
  log=$(mktemp)
  if cargo fuzz run --sanitizer none -O "$target" -- -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 >"$log" 2>&1; then
    echo "$target: $(grep -E '^Done' "$log"), $(grep -oE 'cov: [0-9]+' "$log" | tail -1), findings: 0"
  else
    echo "$target: FAILED (crash or error); artifacts in fuzz/artifacts/$target"
    grep -E "panicked|SUMMARY|ERROR|error" "$log" | head -20
    status=1
  fi
  rm -f "$log"
done
exit $status
