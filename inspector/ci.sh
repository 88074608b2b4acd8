#!/usr/bin/env bash
# CI for the Inspector (the page ctxd serves at /inspect):
#   inspector/ci.sh <ctxd-binary> [DATABASE_URL]
#  1. npm ci (exact pins from package-lock.json)
#  2. the generated stubs it uses, the TypeScript client's (../clients/typescript/src/gen, from
#     ../proto), and the built page (dist/, which ctxd embeds) are current: regenerate (`npm run
#     generate`: the client's buf.gen.yaml, run with this folder's buf and protoc-gen-es, whose
#     pins and @bufbuild/protobuf's must be the client's) and rebuild, then nothing may differ
#  3. tsc --noEmit
#  4. no way to parse text as HTML or run it: src/ and the bundle are free of
#     innerHTML, outerHTML, insertAdjacentHTML, document.write, eval( and new Function
#  5. the bundle's size, plain and gzipped
#  6. the unit test of the pack view's classification (test/classify.test.mjs, Node alone)
#  7. the browser test (Debian's chromium via puppeteer-core) against the binary: in memory, and on
#     PostgreSQL when a DATABASE_URL is given. INSPECTOR_DEV_PROXY=1 serves the page from
#     test/dev-server.mjs in front of the binary instead (for a binary built without the route).
# Screenshots go to $CTXD_ARTIFACTS (default inspector/test-artifacts/). The npm registry is the
# only network used (npm ci); chromium is the machine's (CHROMIUM, default /usr/bin/chromium).
set -euo pipefail
bin=${1:?usage: inspector/ci.sh <ctxd-binary> [DATABASE_URL]}
database_url=${2:-}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || { echo "FAIL $bin is not an executable" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

echo "== npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "== generated code and dist/ are current"
gen=../clients/typescript/src/gen
for dep in @bufbuild/buf @bufbuild/protoc-gen-es @bufbuild/protobuf; do
  pins=$(node -p "[require('./package.json'), require('../clients/typescript/package.json')].map((p) => ({ ...p.dependencies, ...p.devDependencies })['$dep']).join(' ')")
  [ "${pins% *}" = "${pins#* }" ] || { echo "FAIL $dep: ${pins% *} here, ${pins#* } in clients/typescript, whose stubs ($gen) this bundles" >&2; exit 1; }
done
snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
cp -r "$gen" "$snapshot/gen" 2>/dev/null || mkdir -p "$snapshot/gen"
cp -r dist "$snapshot/dist" 2>/dev/null || mkdir -p "$snapshot/dist"
npm run --silent generate || { echo "FAIL buf generate" >&2; exit 1; }
npm run --silent build || { echo "FAIL build" >&2; exit 1; }
if ! diff -r "$snapshot/gen" "$gen" >/dev/null || ! diff -r "$snapshot/dist" dist >/dev/null; then
  echo "FAIL $gen or dist/ was stale (now regenerated): run 'npm run generate && npm run build' in inspector/ and commit the result:" >&2
  diff -r "$snapshot/gen" "$gen" | head -20 >&2 || true
  diff -r "$snapshot/dist" dist | head -20 >&2 || true
  exit 1
fi
if [ "$(ls dist | tr '\n' ' ')" != "index.html inspector.css inspector.js " ]; then
  echo "FAIL dist/ must hold exactly index.html, inspector.css and inspector.js: $(ls dist)" >&2
  exit 1
fi
echo "ok $gen matches ../proto and dist/ matches src/"

echo "== typecheck"
npx tsc --noEmit

echo "== nothing parses text as HTML or runs it"
forbidden='innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function'
if grep -rnE "$forbidden" src || grep -oE "$forbidden" dist/inspector.js; then
  echo "FAIL src/ or the bundle uses one of: innerHTML outerHTML insertAdjacentHTML document.write eval( new Function" >&2
  exit 1
fi
echo "ok"

echo "== bundle size"
echo "dist/inspector.js $(wc -c < dist/inspector.js) bytes, $(gzip -9c dist/inspector.js | wc -c) gzipped; dist/inspector.css $(wc -c < dist/inspector.css) bytes"

echo "== unit test: the pack view's classification"
node --test --test-reporter=spec test/classify.test.mjs

echo "== browser test, in-memory store"
env -u DATABASE_URL CTXD_BIN="$bin" node --test --test-reporter=spec test/browser.test.mjs
if [ -n "$database_url" ]; then
  echo "== browser test, PostgreSQL"
  DATABASE_URL=$database_url CTXD_BIN="$bin" node --test --test-reporter=spec test/browser.test.mjs
fi
echo "inspector: all checks passed"
