// Builds dist/: the bundle (esbuild: one ES module, minified, no legal comments, no source map)
// and the page and stylesheet copied as they are. The stubs of ctxd.v1 in the bundle are the
// TypeScript client's (stubs.mjs). The same sources give the same bytes, so CI can rebuild and
// ask git whether dist/ is current. ctxd embeds these three files and nothing else (`/inspect`,
// `/inspect/inspector.js`, `/inspect/inspector.css`).
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { stubsImportFromInspector } from "./stubs.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist);
await build({
  absWorkingDir: here,
  entryPoints: ["src/main.ts"],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  outfile: "dist/inspector.js",
  legalComments: "none",
  sourcemap: false,
  charset: "ascii",
  logLevel: "warning",
  plugins: [stubsImportFromInspector],
});
copyFileSync(join(here, "src/index.html"), join(dist, "index.html"));
copyFileSync(join(here, "src/inspector.css"), join(dist, "inspector.css"));
for (const name of readdirSync(dist).sort()) console.log(`dist/${name} ${statSync(join(dist, name)).size} bytes`);
