// A stand-in for ctxd's own /inspect route, for developing the page against a ctxd binary that
// does not serve it yet: dist/ at /inspect, /inspect/inspector.js and /inspect/inspector.css
// with the headers ctxd sends (CSP and the rest), every other request proxied to ctxd.
//
//   CTXD_UPSTREAM=http://127.0.0.1:50051 node test/dev-server.mjs [port]
//
// The browser test starts it itself when INSPECTOR_DEV_PROXY=1 (startDevServer below).
import { readFileSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");

/** The Content-Security-Policy ctxd serves the Inspector with. */
export const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILES = {
  "/inspect": ["index.html", "text/html; charset=utf-8"],
  "/inspect/": ["index.html", "text/html; charset=utf-8"],
  "/inspect/inspector.js": ["inspector.js", "text/javascript; charset=utf-8"],
  "/inspect/inspector.css": ["inspector.css", "text/css; charset=utf-8"],
};

/** Serves dist/ and proxies the rest to `upstream`; resolves to { url, close }. */
export function startDevServer(upstream, port = 0) {
  const target = new URL(upstream);
  const server = createServer((req, res) => {
    const path = req.url.split("?")[0];
    const file = FILES[path];
    if (file && (req.method === "GET" || req.method === "HEAD")) {
      // Read on every request, so a rebuild shows without a restart.
      const body = readFileSync(join(dist, file[0]));
      res.writeHead(200, {
        "content-type": file[1],
        "content-length": body.length,
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
        "cache-control": "no-cache",
      });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    if (path.startsWith("/inspect")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    const headers = { ...req.headers, host: target.host };
    const proxied = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    proxied.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`upstream error: ${err.message}\n`);
    });
    req.pipe(proxied);
  });
  return new Promise((resolve) => {
    server.listen(port, "127.0.0.1", () => {
      const { port: bound } = server.address();
      resolve({ url: `http://127.0.0.1:${bound}`, close: () => new Promise((done) => { server.close(() => done()); server.closeAllConnections(); }) });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const upstream = process.env.CTXD_UPSTREAM;
  if (!upstream) {
    console.error("set CTXD_UPSTREAM to ctxd's base URL, e.g. http://127.0.0.1:50051");
    process.exit(2);
  }
  const { url } = await startDevServer(upstream, Number(process.argv[2] ?? 0));
  console.log(`Inspector at ${url}/inspect (API proxied to ${upstream})`);
}
