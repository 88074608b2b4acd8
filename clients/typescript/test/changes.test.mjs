// watchChanges: WatchChanges as an async iterable of changes that keeps its cursor, resumes from
// it, reconnects by itself (a connection cut by a proxy here; a ctxd restarted with SIGTERM, from
// CTXD_BIN or the repository's target/debug/ctxd) and throws what retrying cannot help
// (OUT_OF_RANGE), over every transport.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import fs from "node:fs";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import * as universal from "@ctxd/client";
import * as node from "@ctxd/client/node";
import { ChangeKind, Code, ConnectError, Role, errorInfo, watchChanges } from "@ctxd/client/node";
import { baseUrl, uniqueId } from "./env.mjs";

const FAST = { initialBackoffMs: 50, maxBackoffMs: 500 };
const POKE = "ts-client/changes/poke";

const variants = [
  ["node grpc", (o) => node.createCtxdClient({ ...o, transport: "grpc" })],
  ["node connect", (o) => node.createCtxdClient({ ...o, transport: "connect" })],
  ["node connect http2", (o) => node.createCtxdClient({ ...o, transport: "connect", httpVersion: "2" })],
  ["node grpc-web", (o) => node.createCtxdClient({ ...o, transport: "grpc-web" })],
  ["fetch connect", (o) => universal.createCtxdClient({ ...o, transport: "connect" })],
  ["fetch connect binary", (o) => universal.createCtxdClient({ ...o, transport: "connect", useBinaryFormat: true })],
  ["fetch grpc-web", (o) => universal.createCtxdClient({ ...o, transport: "grpc-web" })],
];

/** A tenant of the test's own: a tenant-wide watch sees the test's changes only. */
const newTenant = () => uniqueId("tenant").replace(/\//g, "-");

/**
 * A cursor every change the test makes next comes after. A watch from now opens as it is
 * iterated, so the test cannot know when; appends to POKE are made until the stream sees one,
 * and that change's cursor is the answer.
 */
async function startCursor(client) {
  const stream = watchChanges(client, { conversationId: POKE, timeoutMs: 30_000 });
  let poking = true;
  const poker = (async () => {
    while (poking) {
      await client.appendMessage({ conversationId: POKE, messages: [{ role: Role.USER, content: "poke" }] });
      await sleep(100);
    }
  })();
  try {
    for await (const change of stream) {
      assert.equal(stream.cursor, change.cursor);
      return stream.cursor;
    }
    throw new Error("the watch ended");
  } finally {
    poking = false;
    await poker;
  }
}

async function take(stream, n) {
  const out = [];
  if (n === 0) return out;
  for await (const change of stream) {
    out.push(change);
    if (out.length === n) break;
  }
  return out;
}

const kinds = (changes) => changes.map((c) => [c.conversationId, ChangeKind[c.kind], c.firstSequence, c.lastSequence]);

for (const [name, make] of variants) {
  test(`${name}: changes in order with their kinds, resumed from a persisted cursor`, async () => {
    const client = make({ baseUrl, tenant: newTenant(), timeoutMs: 10_000 });
    const conversationId = uniqueId(name.replace(/ /g, "-"));
    const cursor = await startCursor(client);
    await client.appendMessage({ conversationId, messages: [{ role: Role.USER, content: "a" }, { role: Role.ASSISTANT, content: "b" }] });
    await client.appendMessage({ conversationId, messages: [{ role: Role.USER, content: "c" }] });
    await client.redactMessage({ conversationId, sequence: 2n });
    await client.rewindConversation({ conversationId, afterSequence: 2n });
    await client.deleteConversation({ conversationId });

    // The client's timeoutMs (10 s) is not the watch's: it has none unless given.
    const stream = watchChanges(client, { afterCursor: cursor, conversationId });
    assert.equal(stream.cursor, cursor);
    const changes = await take(stream, 5);
    assert.ok(stream.closed, "leaving the loop closes it");
    assert.deepEqual(kinds(changes), [
      [conversationId, "APPENDED", 1n, 2n],
      [conversationId, "APPENDED", 3n, 3n],
      [conversationId, "REDACTED", 2n, 2n],
      [conversationId, "REWOUND", 3n, 3n],
      [conversationId, "DELETED", changes[4].firstSequence, changes[4].lastSequence],
    ]);
    assert.equal(stream.cursor, changes[4].cursor);
    assert.equal(new Set(changes.map((c) => c.cursor)).size, 5);

    // A consumer that persisted the cursor after the second change goes on from the third.
    const resumed = watchChanges(client, { afterCursor: changes[1].cursor, conversationId });
    assert.deepEqual(kinds(await take(resumed, 3)), kinds(changes.slice(2)));

    // Messages come with APPENDED changes when asked for.
    const other = uniqueId("with-messages");
    const live = watchChanges(client, { afterCursor: changes[4].cursor, conversationId: other, includeMessages: true, timeoutMs: 30_000 });
    await client.appendMessage({ conversationId: other, messages: [{ role: Role.USER, content: "hello" }] });
    const [appended] = await take(live, 1);
    assert.deepEqual(appended.messages.map((m) => m.content), ["hello"]);
  });
}

test("OUT_OF_RANGE (an expired cursor) is thrown at once, with its ErrorInfo; INVALID_ARGUMENT too", async () => {
  const client = node.createCtxdClient({ baseUrl, tenant: newTenant() });
  await client.appendMessage({ conversationId: uniqueId("any"), messages: [{ role: Role.USER, content: "x" }] });
  const started = Date.now();
  const error = await take(watchChanges(client, { afterCursor: "c1.1.0.1000000." }), 1).catch((e) => e);
  assert.ok(Date.now() - started < 5_000, "not retried");
  assert.ok(error instanceof ConnectError, String(error));
  assert.equal(error.code, Code.OutOfRange);
  const info = errorInfo(error);
  assert.equal(info.reason, "CURSOR_EXPIRED");
  assert.match(info.metadata.oldest_cursor, /^c1\./);
  const invalid = await take(watchChanges(universal.createCtxdClient({ baseUrl }), { afterCursor: "nope" }), 1).catch((e) => e);
  assert.equal(invalid.code, Code.InvalidArgument);
});

test("close() and the signal end an iteration under way; an aborted signal never opens the stream", async () => {
  const client = node.createCtxdClient({ baseUrl, tenant: newTenant() });
  const quiet = uniqueId("quiet");
  const stream = watchChanges(client, { conversationId: quiet });
  setTimeout(() => stream.close(), 300);
  let started = Date.now();
  assert.deepEqual(await take(stream, 1), []);
  assert.ok(stream.closed && Date.now() - started < 5_000);

  const controller = new AbortController();
  const signalled = watchChanges(universal.createCtxdClient({ baseUrl }), { conversationId: quiet, signal: controller.signal });
  setTimeout(() => controller.abort(), 300);
  started = Date.now();
  assert.deepEqual(await take(signalled, 1), []);
  assert.ok(signalled.closed && Date.now() - started < 5_000);

  assert.deepEqual(await take(watchChanges(client, { signal: AbortSignal.abort() }), 1), []);
});

/**
 * A TCP proxy to the server that can cut every connection and refuse new ones for a while: what
 * a network outage (or a load balancer's restart) does to a stream.
 */
async function proxy(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const state = { up: true, connections: 0 };
  const server = net.createServer((down) => {
    if (!state.up) return down.destroy();
    state.connections++;
    const up = net.connect(Number(port), hostname);
    for (const [a, b] of [[down, up], [up, down]]) {
      sockets.add(a);
      a.on("error", () => b.destroy());
      a.on("close", () => {
        sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    state,
    url: `http://127.0.0.1:${server.address().port}`,
    cut() {
      state.up = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      state.up = true;
    },
    close() {
      this.cut();
      server.close();
    },
  };
}

for (const [name, make] of variants.filter(([n]) => !n.includes("binary"))) {
  test(`${name}: reconnects after a lost connection and resumes from its cursor, nothing lost`, async () => {
    const tenant = newTenant();
    const direct = node.createCtxdClient({ baseUrl, tenant, timeoutMs: 10_000 });
    const p = await proxy(baseUrl);
    try {
      const conversationId = uniqueId("cut");
      const cursor = await startCursor(direct);
      const append = (content) => direct.appendMessage({ conversationId, messages: [{ role: Role.USER, content }] });
      await append("before");
      const stream = watchChanges(make({ baseUrl: p.url, tenant }), {
        afterCursor: cursor, conversationId, includeMessages: true, reconnect: FAST, timeoutMs: 60_000,
      });
      const it = stream[Symbol.asyncIterator]();
      const got = [(await it.next()).value];
      assert.equal(p.state.connections, 1);
      p.cut();
      // Committed while the watcher cannot reach the server: delivered once it is back.
      await append("during 1");
      await append("during 2");
      setTimeout(() => p.restore(), 1_000);
      got.push((await it.next()).value, (await it.next()).value);
      await append("after");
      got.push((await it.next()).value);
      assert.equal(stream.cursor, got[3].cursor);
      await it.return();
      assert.ok(stream.closed);
      assert.ok(p.state.connections >= 2, `${p.state.connections} connection(s)`);
      assert.deepEqual(got.map((c) => c.messages.map((m) => m.content)).flat(), ["before", "during 1", "during 2", "after"]);
    } finally {
      p.close();
    }
  });
}

test("reconnect: false throws when the connection is lost", async () => {
  const p = await proxy(baseUrl);
  try {
    const stream = watchChanges(node.createCtxdClient({ baseUrl: p.url }), { conversationId: uniqueId("quiet"), reconnect: false });
    setTimeout(() => p.cut(), 300);
    const error = await take(stream, 1).catch((e) => e);
    assert.ok(error instanceof ConnectError, String(error));
    assert.ok(stream.closed);
  } finally {
    p.close();
  }
});

// -- a server restarted ----------------------------------------------------------------------

const repoBinary = fileURLToPath(new URL("../../../target/debug/ctxd", import.meta.url));
const binary = process.env.CTXD_BIN || (fs.existsSync(repoBinary) ? repoBinary : undefined);

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A ctxd of the test's own (in-memory store, heartbeats every second) on `port`. */
async function startServer(port) {
  const env = { ...process.env, CTXD_LISTEN: `127.0.0.1:${port}` };
  delete env.DATABASE_URL;
  const child = spawn(binary, ["--changes-heartbeat-secs", "1"], { env, stdio: "ignore" });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
  for (let i = 0; i < 600; i++) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => resolve(s.destroy() || true));
      s.on("error", () => resolve(false));
    });
    if (ok) return { child, exited };
    await sleep(50);
  }
  child.kill("SIGKILL");
  throw new Error("ctxd did not listen");
}

async function waitFor(condition, ms, what) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    assert.ok(Date.now() < deadline, what);
    await sleep(50);
  }
}

test("survives a server restarted with SIGTERM (gRPC and Connect)", { skip: binary ? false : "no ctxd binary (CTXD_BIN)" }, async () => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let server = await startServer(port);
  try {
    const tenant = newTenant();
    const clients = [node.createCtxdClient({ baseUrl: url, tenant }), universal.createCtxdClient({ baseUrl: url, tenant })];
    const streams = clients.map((c) => watchChanges(c, { reconnect: FAST, timeoutMs: 120_000 }));
    const strict = watchChanges(clients[0], { reconnect: false });
    const got = streams.map(() => []);
    const loops = streams.map(async (s, i) => {
      for await (const change of s) got[i].push(change);
    });
    const strictEnd = take(strict, 1).catch((e) => e);
    // A heartbeat came: each stream is open, its cursor the server's horizon (no change yet).
    await waitFor(() => streams.every((s) => s.cursor !== "") && strict.cursor !== "", 30_000, "no heartbeat");
    const heartbeats = streams.map((s) => s.cursor);

    server.child.kill("SIGTERM"); // streams end with UNAVAILABLE, the server exits
    assert.equal(await server.exited, 0);
    const error = await strictEnd;
    assert.equal(error?.code, Code.Unavailable, String(error));
    server = await startServer(port); // the same port, a new (empty) in-memory store

    await clients[0].appendMessage({ conversationId: "after-restart", messages: [{ role: Role.USER, content: "hello again" }] });
    await waitFor(() => got.every((g) => g.length > 0), 30_000, "no change after the restart");
    for (const [i, g] of got.entries()) {
      assert.deepEqual(kinds(g), [["after-restart", "APPENDED", 1n, 1n]]);
      assert.notEqual(streams[i].cursor, heartbeats[i]);
      assert.equal(streams[i].closed, false);
    }
    for (const s of streams) s.close();
    await Promise.all(loops);
  } finally {
    server.child.kill("SIGKILL");
  }
});
