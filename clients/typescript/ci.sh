#!/usr/bin/env bash
# CI for clients/typescript against a live ctxd:  clients/typescript/ci.sh http://127.0.0.1:PORT
#  1. npm ci (exact pins from package-lock.json)
#  2. the generated stubs (src/gen, from ../../proto) and the built package (dist/) are current:
#     regenerate and rebuild, then git must see no change
#  3. the tests (node:test) against the server: every transport, the helpers, CtxdSession with
#     the Agents SDK's ScriptedModel, the AI SDK helpers with MockLanguageModelV4
#  4. the universal entry point in Deno (npm package `deno`, pinned) over Connect and gRPC-Web
#  5. a fresh project installs @ctxd/client (the `npm pack` tarball; the folder with
#     install-links=true), then `ai` and `@openai/agents` in a second npm install, and runs an app
# No provider network is used (the npm registry is, for the installs). Takes about a minute
# once npm's cache is warm.
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

echo "== install into a fresh project: @ctxd/client, then the frameworks in a second npm install"
# What a user does: install @ctxd/client from the repository, later `npm install` the frameworks
# (which rewrites node_modules), then run the app. Two ways that survive the second install:
#  - tarball: `npm pack` here, `npm install <tarball>` there (package.json records the file);
#  - folder: `npm install <path>` with `install-links=true` in the project's .npmrc (a copy).
# (A plain folder install is a symlink back here: its dependencies would come from this folder's
# node_modules, and without them the app fails with ERR_MODULE_NOT_FOUND.) The app
# (test/install/app.mjs) runs the adapters with the frameworks at the versions pinned here and
# in the README, @ai-sdk/openai-compatible and LangChain.js included.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
pin() { node -p "require('./package.json').devDependencies['$1']"; }
frameworks="ai@$(pin ai) @openai/agents@$(pin @openai/agents) zod@$(pin zod) @ai-sdk/openai-compatible@3.0.92
  langchain@$(pin langchain) @langchain/core@$(pin @langchain/core) @langchain/langgraph@$(pin @langchain/langgraph)"
tarball=$(npm pack --silent --pack-destination "$scratch" | tail -n 1)
for mode in tarball folder; do
  dir="$scratch/$mode" && mkdir -p "$dir" && cp test/install/app.mjs "$dir/"
  (
    cd "$dir"
    npm init -y >/dev/null
    if [ "$mode" = tarball ]; then
      npm install --no-audit --no-fund --loglevel=error "$scratch/$tarball" >/dev/null
    else
      echo "install-links=true" > .npmrc
      npm install --no-audit --no-fund --loglevel=error "$here" >/dev/null
    fi
    # shellcheck disable=SC2086
    npm install --no-audit --no-fund --loglevel=error $frameworks >/dev/null
    if [ -L node_modules/@ctxd/client ] || [ ! -d node_modules/@connectrpc/connect-node ]; then
      echo "FAIL $mode: @ctxd/client is a symlink or its dependencies are missing after the second npm install" >&2
      exit 1
    fi
    echo -n "$mode: " && node app.mjs "$url"
  )
done
echo "== the README's example, as printed, in a fresh npm init -y project (tsc --strict)"
"$here/test/readme-example.sh" "$url"

echo "clients/typescript: all checks passed"
