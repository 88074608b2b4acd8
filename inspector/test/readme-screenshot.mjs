// The README's picture of the Inspector: the pack view of the test's seeded conversation, built
// in the Anthropic format, tight enough that results are cleared, one is cut and recall quotes
// earlier messages.
//   CTXD_BIN=target/debug/ctxd node inspector/test/readme-screenshot.mjs docs/images/inspector.png
import { API_KEYS, KEY_A, startCtxd } from "./harness.mjs";
import { launchBrowser, logIn, openPage, goHash } from "./page.mjs";
import { seedMain } from "./seed.mjs";
import { buildInPage } from "./views.mjs";

const out = process.argv[2] ?? "inspector.png";
const ctxd = await startCtxd(process.env.CTXD_BIN, { CTXD_API_KEYS: API_KEYS, CTXD_INSPECTOR: "true" }, ["DATABASE_URL"]);
const { browser, close } = await launchBrowser();
try {
  const id = "support/lisbon-offsite";
  await seedMain(ctxd.url, KEY_A, id, "readme");
  const { page } = await openPage(browser);
  await page.setViewport({ width: 1280, height: 1500 });
  await logIn(page, ctxd.url, KEY_A);
  await goHash(page, ctxd.url, `#/c/${encodeURIComponent(id)}/pack`);
  await buildInPage(page, { format: 2, maxTokens: 1400, cut: 150, keepRecent: 1, recall: "Sintra rooms", systemPrompt: "You plan offsites." });
  await page.screenshot({ path: out, clip: { x: 0, y: 0, width: 1280, height: 1500 } });
  console.log(`wrote ${out}`);
} finally {
  await close();
  await ctxd.stop();
}
