// Traces: with @opentelemetry/api installed and a propagator configured, every call carries the
// active span's W3C `traceparent`, over every transport. The peer is a real local HTTP server
// that keeps the headers it is sent (and answers nothing useful: only the headers matter).
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import * as node from "@ctxd/client/node";

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

async function headerPeer() {
  const seen = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on("end", () => res.writeHead(404).end());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { seen, server, baseUrl: `http://127.0.0.1:${server.address().port}` };
}

for (const transport of ["connect", "grpc-web"]) {
  test(`${transport}: the active span's context goes with the call`, async () => {
    const peer = await headerPeer();
    try {
      const client = node.createCtxdClient({ baseUrl: peer.baseUrl, transport, timeoutMs: 5_000 });
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
      const spanId = "00f067aa0ba902b7";
      const active = trace.setSpanContext(context.active(), { traceId, spanId, traceFlags: TraceFlags.SAMPLED });
      await context.with(active, () => client.countTokens({ text: "hi" }).catch(() => undefined));
      await client.countTokens({ text: "hi" }).catch(() => undefined);
      assert.equal(peer.seen.length, 2);
      assert.equal(peer.seen[0].traceparent, `00-${traceId}-${spanId}-01`);
      assert.equal(peer.seen[1].traceparent, undefined, "no span, no traceparent");
    } finally {
      peer.server.close();
    }
  });
}
