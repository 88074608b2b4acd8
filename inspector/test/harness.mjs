// Test plumbing: the ctxd binary on a free port (in memory, or PostgreSQL with DATABASE_URL),
// Connect JSON calls as any client makes them, and small helpers.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer } from "node:net";
import { deflateSync } from "node:zlib";

/** The two tenants' keys and the CTXD_API_KEYS value that admits them. */
export const KEY_A = "inspector-test-key-a";
export const KEY_B = "inspector-test-key-b";
export const sha256hex = (text) => createHash("sha256").update(text).digest("hex");
export const API_KEYS = `${sha256hex(KEY_A)}=tenant-a,${sha256hex(KEY_B)}=tenant-b`;

/** A port nobody listens on (for a moment). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Starts ctxd with `env` added and `unset` removed; resolves once /healthz answers 200. */
export async function startCtxd(bin, env, unset = []) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const childEnv = { ...process.env, CTXD_LISTEN: `127.0.0.1:${port}`, RUST_LOG: process.env.RUST_LOG ?? "warn", ...env };
  for (const name of unset) delete childEnv[name];
  if (!childEnv.DATABASE_URL) delete childEnv.DATABASE_URL; // empty means in memory, as for the test
  const child = spawn(bin, [], {
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout.on("data", (d) => { log += d; });
  child.stderr.on("data", (d) => { log += d; });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r(undefined), 100))]);
    if (code !== undefined) throw new Error(`ctxd exited with ${code} before serving:\n${log}`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`ctxd did not become healthy in 30 s:\n${log}`);
    }
  }
  return {
    url,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** One Connect JSON call; returns the parsed answer, or throws with the Connect code. */
export async function call(base, method, body, key, extraHeaders = {}) {
  const headers = { "content-type": "application/json", ...extraHeaders };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${base}/ctxd.v1.ContextService/${method}`, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  const json = text ? JSON.parse(text) : {};
  if (!res.ok) {
    const err = new Error(`${method}: ${res.status} ${json.code}: ${json.message}`);
    err.code = json.code;
    throw err;
  }
  return json;
}

/** A real PNG (w x h, RGB, a gradient), as a data: URI. */
export function pngDataUri(w = 8, h = 6) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, "ascii");
    data.copy(out, 8);
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++) {
    rows[y * (1 + 3 * w)] = 0;
    for (let x = 0; x < w; x++) {
      const at = y * (1 + 3 * w) + 1 + 3 * x;
      rows[at] = (255 * x) / (w - 1);
      rows[at + 1] = (255 * y) / (h - 1);
      rows[at + 2] = 160;
    }
  }
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(rows)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
  return `data:image/png;base64,${png.toString("base64")}`;
}

/** Length of the longest common prefix of two byte arrays. */
export function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
