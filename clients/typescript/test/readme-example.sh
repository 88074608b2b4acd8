#!/usr/bin/env bash
# Runs the README's example (its "## Example" TypeScript block) exactly as printed, the way the
# README says to: a fresh `npm init -y` project, the client's tarball and the pinned provider
# SDKs installed, `tsc --strict`, then node, against a live ctxd ($1) and a local stand-in for
# both providers (test/fake-providers.mjs).
#   clients/typescript/test/readme-example.sh http://127.0.0.1:PORT
set -euo pipefail
url=${1:?usage: test/readme-example.sh CTXD_URL}
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'kill "${fake:-0}" 2>/dev/null || true; rm -rf "$scratch"' EXIT
# The block after "## Example" and the install commands shown above it, as printed.
python3 - "$here/README.md" "$scratch" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## Example\n", 1)[1]
sh = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
ts = re.search(r"```ts\n(.*?)```", section, re.S).group(1)
open(sys.argv[2] + "/install.sh", "w").write(sh)
open(sys.argv[2] + "/example.mts", "w").write(ts)
PY
mkdir -p "$scratch/vendor"
(cd "$here" && npm pack --silent --pack-destination "$scratch/vendor" >/dev/null)
node "$here/test/fake-providers.mjs" > "$scratch/fake.port" &
fake=$!
for _ in $(seq 1 50); do [ -s "$scratch/fake.port" ] && break; sleep 0.1; done
port=$(head -1 "$scratch/fake.port")
cd "$scratch"
export CTXD_URL=$url OPENAI_API_KEY=test OPENAI_BASE_URL=http://127.0.0.1:$port/v1
export ANTHROPIC_API_KEY=test ANTHROPIC_BASE_URL=http://127.0.0.1:$port
export npm_config_audit=false npm_config_fund=false npm_config_loglevel=error
bash -euo pipefail install.sh | tee output.txt
grep -q "messages; usage:" output.txt || { echo "FAIL the README example printed no usage line" >&2; exit 1; }
grep -q "tool_call_id" output.txt || { echo "FAIL the README example printed no field violation" >&2; exit 1; }
echo "README example: ran as printed in a fresh npm init -y project (tsc --strict, then node)"
