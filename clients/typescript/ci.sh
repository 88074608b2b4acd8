#!/usr/bin/env bash
# CI for clients/typescript against a live ctxd:  clients/typescript/ci.sh http://127.0.0.1:PORT
#  1. npm ci (exact pins from package-lock.json)
#  2. the generated stubs (src/gen, from ../../proto) and the built package (dist/) are current:
#     regenerate and rebuild, then git must see no change
#  3. the tests (node:test) against the server: every transport, the helpers, CtxdSession with
#     the Agents SDK's ScriptedModel, the AI SDK helpers with MockLanguageModelV4
#  4. the universal entry point in Deno (npm package `deno`, pinned) over Connect and gRPC-Web
#  5. `npm install <path>` into a fresh project, linked and copied (--install-links), and a call
# No provider network is used. Takes well under a minute once npm's cache is warm.
set -euo pipefail
url=${1:?usage: ci.sh http://127.0.0.1:PORT}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

echo "== npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "== generated code and dist/ are current"
snapshot=$(mktemp -d)
cp -r src/gen "$snapshot/gen" 2>/dev/null || mkdir -p "$snapshot/gen"
cp -r dist "$snapshot/dist" 2>/dev/null || mkdir -p "$snapshot/dist"
npx buf generate || { echo "FAIL buf generate" >&2; exit 1; }
npm run --silent build || { echo "FAIL tsc build" >&2; exit 1; }
if ! diff -r "$snapshot/gen" src/gen >/dev/null || ! diff -r "$snapshot/dist" dist >/dev/null; then
  echo "FAIL src/gen or dist/ was stale (now regenerated): run 'npm run generate && npm run build' in clients/typescript and commit the result:" >&2
  diff -r "$snapshot/gen" src/gen | head -20 >&2 || true
  diff -r "$snapshot/dist" dist | head -20 >&2 || true
  rm -rf "$snapshot"
  exit 1
fi
rm -rf "$snapshot"
echo "ok src/gen matches ../../proto and dist/ matches src/"

echo "== tests against $url"
CTXD_URL=$url node --test --test-reporter=spec test/*.test.mjs

echo "== Deno (universal entry, fetch)"
CTXD_URL=$url DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1 npx --no-install deno run --quiet --no-lock \
  --allow-net --allow-env=CTXD_URL --allow-read test/deno/smoke.mjs

echo "== npm install <path>"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat > "$scratch/use.mjs" <<'JS'
import { createCtxdClient, Role } from "@ctxd/client/node";
import * as web from "@ctxd/client";
import { CtxdSession } from "@ctxd/client/agents";
import { loadChat } from "@ctxd/client/ai";
const [url] = process.argv.slice(2);
const grpc = createCtxdClient({ baseUrl: url });
const id = `ts-client/install/${process.pid}-${Date.now()}`;
const r = await grpc.appendMessage({ conversationId: id, messages: [{ role: Role.USER, content: "hi" }] });
const fetched = await web.createCtxdClient({ baseUrl: url }).getConversation({ conversationId: id });
if (r.lastSequence !== 1n || fetched.conversation.lastSequence !== 1n || typeof CtxdSession !== "function" || typeof loadChat !== "function") process.exit(1);
console.log("ok installed package: gRPC append, Connect read, adapters load");
JS
for mode in link copy; do
  dir="$scratch/$mode" && mkdir -p "$dir" && cp "$scratch/use.mjs" "$dir/"
  (cd "$dir" && npm init -y >/dev/null && \
   npm install --no-audit --no-fund --loglevel=error $([ $mode = copy ] && echo --install-links) "$here" >/dev/null && \
   echo -n "$mode: " && node use.mjs "$url")
done
echo "clients/typescript: all checks passed"
