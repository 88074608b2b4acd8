// The Inspector's acceptance test: the ctxd binary (CTXD_BIN; PostgreSQL when DATABASE_URL is
// set, else in memory) with two tenants' API keys and the Inspector on, seeded through the
// public API, and Debian's chromium driving the page as a person would.
//
//   CTXD_BIN=target/debug/ctxd [DATABASE_URL=...] node --test inspector/test/browser.test.mjs
//
// INSPECTOR_DEV_PROXY=1 serves the page from test/dev-server.mjs in front of ctxd (for a
// binary without the /inspect route); test i (the route is off without CTXD_INSPECTOR) is
// skipped then. Screenshots go to $CTXD_ARTIFACTS (default inspector/test-artifacts/).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startDevServer, CSP } from "./dev-server.mjs";
import { API_KEYS, KEY_A, KEY_B, call, commonPrefix, startCtxd } from "./harness.mjs";
import { goHash, launchBrowser, logIn, openPage, pageText, until, viewReady } from "./page.mjs";
import { buildInPage, clickBuild, domAudit, listedIds, shownPrefix } from "./views.mjs";
import { HOSTILE, seedHostile, seedLarge, seedMain, seedMany, seedTenantB } from "./seed.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.CTXD_BIN;
const store = process.env.DATABASE_URL ? "postgres" : "memory";
const proxied = process.env.INSPECTOR_DEV_PROXY === "1";
const artifacts = process.env.CTXD_ARTIFACTS || join(here, "..", "test-artifacts");
const run = `${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;
const ids = {
  main: `insp-${run}-main`, b: `insp-${run}-tenant-b`, hostile: `insp-${run}-hostile`,
  many: `insp-${run}-many`, utf8: `insp-${run}-utf8`, anthropic: `insp-${run}-anthropic`, large: `insp-${run}-large`,
  shared: `insp-${run}-shared`,
};
const markerB = `MARKER-B-${run}`;
const enc = new TextEncoder();
const say = (...parts) => console.log(`[${store}]`, ...parts);

let ctxd, dev, base, chromium, seeded, many;

before(async () => {
  assert.ok(bin, "set CTXD_BIN to the ctxd binary");
  mkdirSync(artifacts, { recursive: true });
  ctxd = await startCtxd(bin, { CTXD_API_KEYS: API_KEYS, CTXD_INSPECTOR: "true" });
  if (proxied) dev = await startDevServer(ctxd.url);
  base = proxied ? dev.url : ctxd.url;
  seeded = await seedMain(ctxd.url, KEY_A, ids.main, run);
  await seedTenantB(ctxd.url, KEY_B, ids.b, markerB);
  // One id in both tenants: two conversations that must never mix.
  await call(ctxd.url, "AppendMessage", { conversationId: ids.shared, messages: [{ role: "ROLE_USER", content: "shared by A" }] }, KEY_A);
  await call(ctxd.url, "AppendMessage", { conversationId: ids.shared, messages: [{ role: "ROLE_USER", content: `shared by B ${markerB}` }] }, KEY_B);
  await seedHostile(ctxd.url, KEY_A, ids.hostile, run);
  [many] = await Promise.all([seedMany(ctxd.url, KEY_A, ids.many, 1000), seedLarge(ctxd.url, KEY_A, ids.large)]);
  chromium = await launchBrowser();
  say(`ctxd ${ctxd.url}${proxied ? `, page through the dev server ${dev.url}` : ""}; run ${run}`);
});

after(async () => {
  await chromium?.close();
  await dev?.close();
  await ctxd?.stop();
});

const shot = (page, name) => page.screenshot({ path: join(artifacts, `${store}-${name}.png`), fullPage: true });

test("a. /inspect is served with the CSP and the other security headers", async () => {
  const res = await fetch(`${base}/inspect`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/html/);
  assert.equal(res.headers.get("content-security-policy"), CSP);
  assert.equal(res.headers.get("x-content-type-options"), "nosniff");
  assert.equal(res.headers.get("x-frame-options"), "DENY");
  assert.equal(res.headers.get("referrer-policy"), "no-referrer");
  assert.equal(await res.text(), readFileSync(join(here, "..", "dist", "index.html"), "utf8"));
  const slash = await fetch(`${base}/inspect/`);
  assert.equal(slash.status, 200);
  const js = await fetch(`${base}/inspect/inspector.js`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get("content-type"), /javascript/);
  assert.equal(js.headers.get("content-security-policy"), CSP);
  const served = Buffer.from(await js.arrayBuffer());
  assert.ok(served.equals(readFileSync(join(here, "..", "dist", "inspector.js"))), "the served bundle is dist/inspector.js");
  const css = await fetch(`${base}/inspect/inspector.css`);
  assert.equal(css.status, 200);
  assert.match(css.headers.get("content-type"), /^text\/css/);
  say(`GET /inspect 200 ${res.headers.get("content-type")}; inspector.js ${served.length} bytes (${js.headers.get("content-type")}); CSP and headers as required`);
});

test("b. without a key the page shows only the key prompt", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await page.goto(`${base}/inspect`);
    await page.waitForSelector("#key-form");
    const shown = await page.evaluate(() => ({
      nav: !!document.querySelector("#nav, nav, #view, table"),
      forms: document.querySelectorAll("form").length,
      inputs: [...document.querySelectorAll("input")].map((i) => i.type),
      links: document.querySelectorAll("a").length,
    }));
    assert.deepEqual(shown, { nav: false, forms: 1, inputs: ["password"], links: 0 });
    const text = await pageText(page);
    for (const secret of [ids.main, ids.hostile, ids.many, "Lisbon", "Sintra", seeded.summaryText, markerB]) {
      assert.ok(!text.includes(secret), `the prompt page shows ${secret}`);
    }
    // A wrong key: the error on the prompt, and still nothing else.
    await page.type("#key-input", "not-a-key");
    await page.click("#key-submit");
    await until(page, () => document.querySelector("#key-error")?.textContent);
    const error = await page.$eval("#key-error", (e) => e.textContent);
    assert.match(error, /UNAUTHENTICATED/);
    assert.equal(await page.$("#nav"), null);
    assert.deepEqual(await page.evaluate(() => [sessionStorage.length, localStorage.length]), [0, 0]);
    assert.deepEqual(watch.csp, []);
    say(`no key: only the prompt (1 form, 1 password input, no links); wrong key: "${error}"`);
  } finally {
    await close();
  }
});

test("c. with tenant A's key: the list, the log with its tool group and image, memory, search", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    await viewReady(page, "");
    assert.deepEqual(await page.evaluate((k) => [sessionStorage.getItem("ctxd.inspector.key") === k, localStorage.length, location.href.includes(k)], KEY_A), [true, 0, false]);
    const row = await page.$(`tr.conversation[data-id="${ids.main}"]`);
    assert.ok(row, "the list shows the seeded conversation");
    const rowText = await row.evaluate((r) => r.innerText);
    assert.match(rowText, /Lisbon offsite planning/);
    assert.match(rowText, /awaiting answer/);
    assert.match(rowText, /team=platform/);
    assert.match(rowText, /usage in 812/);
    assert.equal(await row.$eval("td.messages", (td) => td.textContent), "19", "the messages column");
    await shot(page, "conversations");

    // Filters and paging: this run's two labelled conversations, one per page; then by status.
    await goHash(page, base, `#/?labels=run%3D${run}&size=1`);
    const page1 = await page.$$eval("tr.conversation", (rows) => rows.map((r) => r.dataset.id));
    await page.click("#page-next");
    await until(page, () => document.querySelector("#conversations").dataset.page === "2");
    const page2 = await page.$$eval("tr.conversation", (rows) => rows.map((r) => r.dataset.id));
    assert.deepEqual([...page1, ...page2].sort(), [ids.hostile, ids.main].sort());
    assert.equal(await page.$("#page-next"), null);
    await page.click("#page-back");
    await until(page, () => document.querySelector("#conversations").dataset.page === "1");
    assert.deepEqual(await page.$$eval("tr.conversation", (rows) => rows.map((r) => r.dataset.id)), page1);
    await goHash(page, base, `#/?status=2&labels=run%3D${run}`);
    assert.deepEqual(await page.$$eval("tr.conversation", (rows) => rows.map((r) => r.dataset.id)), [ids.main]);
    assert.equal(await page.$eval("#filter-status", (s) => s.value), "2");
    await goHash(page, base, "#/");

    await page.$eval(`tr.conversation[data-id="${ids.main}"] a.conv-id`, (a) => a.click());
    await viewReady(page, `#/c/${ids.main}/log`);
    const log = await page.evaluate(() => {
      const group = document.querySelector(".tool-group[data-calls='2']");
      const img = document.querySelector("img.thumb");
      return {
        messages: [...document.querySelectorAll("#log .msg")].map((m) => `${m.id}:${m.dataset.sequence}`),
        calls: group ? [...group.querySelectorAll(".call .tool-name")].map((n) => n.textContent) : [],
        results: group ? [...group.querySelectorAll(".msg[data-role='tool'] .content")].map((n) => n.textContent) : [],
        img: img && { complete: img.complete, width: img.naturalWidth, src: img.getAttribute("src").slice(0, 22) },
        pinned: document.querySelector("#m-1")?.classList.contains("pinned"),
        uiOnly: document.querySelector("#m-8")?.classList.contains("ui-only"),
        error: document.querySelector("#m-17 .llm-error")?.innerText,
        metadata: document.querySelector("#m-1 .metadata")?.innerText,
        redacted: [document.querySelector("#m-18")?.classList.contains("redacted"), document.querySelector("#m-18 .badge-redacted")?.textContent],
        renderMs: document.querySelector("#log").dataset.renderMs,
      };
    });
    assert.equal(log.messages.length, 19);
    log.messages.forEach((m, i) => assert.equal(m, `m-${i + 1}:${i + 1}`));
    assert.deepEqual(log.calls, ["get_weather", "get_time"]);
    assert.deepEqual(log.results, ["18°C, sunny, light wind from the north", "14:05 WEST"]);
    await until(page, () => document.querySelector("img.thumb")?.naturalWidth > 0);
    const img = await page.$eval("img.thumb", (i) => [i.naturalWidth, i.naturalHeight]);
    assert.deepEqual(img, [8, 6]);
    assert.equal(log.pinned, true);
    assert.equal(log.uiOnly, true);
    assert.match(log.error, /timeout/);
    assert.match(log.error, /Booking Quinta 1-2 for 12 people from/);
    assert.match(log.metadata, /channel\s+slack/);
    assert.deepEqual(log.redacted, [true, "redacted"]);
    await shot(page, "log");

    // A link to one message scrolls to it and highlights it.
    await goHash(page, base, `#/c/${ids.main}/log?seq=11`);
    assert.equal(await page.$eval("#m-11", (m) => m.classList.contains("highlight")), true);

    await goHash(page, base, `#/c/${ids.main}/memory`);
    const memory = await page.evaluate(() => ({
      summary: document.querySelector("#summary-text")?.textContent,
      through: document.querySelector("#summary")?.dataset.through,
      version: document.querySelector("#summary")?.dataset.version,
      items: [...document.querySelectorAll(".memory-item .memory-text")].map((e) => e.textContent),
      citations: [...document.querySelectorAll("a.citation")].map((a) => a.getAttribute("href")),
    }));
    assert.equal(memory.summary, seeded.summaryText);
    assert.equal(memory.through, "2");
    assert.equal(memory.version, "1");
    assert.deepEqual(memory.items, ["Book an offsite venue for 12 people", "Venue: Quinta 1-2 in Sintra"]);
    const to = (s) => `#/c/${ids.main}/log?seq=${s}`;
    assert.deepEqual(memory.citations, [to(1), to(16), to(19), to(5)]);
    await shot(page, "memory");
    await page.click(`a.citation[href="${to(16)}"]`);
    await viewReady(page, to(16));
    assert.equal(await page.$eval("#m-16", (m) => m.classList.contains("highlight")), true);

    await goHash(page, base, `#/c/${ids.main}/search`);
    await page.type("#search-query", "Sintra venues");
    await page.click("#search-submit");
    await viewReady(page, `#/c/${ids.main}/search?q=Sintra+venues`);
    const hits = await page.$$eval("tr.hit", (rows) => rows.map((r) => [r.dataset.sequence, r.querySelector("a").getAttribute("href")]));
    assert.ok(hits.length >= 3, `search found ${hits.length}`);
    for (const [seq, href] of hits) assert.equal(href, to(seq));
    await shot(page, "search");
    assert.deepEqual(watch.csp, []);
    assert.deepEqual(watch.errors, []);
    say(`log: ${log.messages.length} messages in ${log.renderMs} ms, tool group [${log.calls}], image ${img.join("x")}; memory: ${memory.items.length} items, ${memory.citations.length} citations; search: ${hits.length} hits`);
  } finally {
    await close();
  }
});

/** proto name -> proto3 JSON name. */
const jsonName = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** The sections the pack view must show for BuildContext's answer `res`, from the log read here. */
async function expectedSections(conversationId, res) {
  const messages = (await call(ctxd.url, "ListMessages", { conversationId, pageSize: 1000 }, KEY_A)).messages;
  const pinnedSeqs = new Set(messages.filter((m) => m.pinned).map((m) => m.sequence));
  const n = (v) => Number(v ?? 0);
  const stats = res.stats;
  const pinned = res.messages.filter((m) => m.source === "CONTEXT_SOURCE_HISTORY" && pinnedSeqs.has(m.sequence)).reduce((s, m) => s + n(m.tokens), 0);
  const parts = ["systemPromptTokens", "summaryTokens", "workingMemoryTokens", "truncationNoticeTokens", "historyTokens", "pendingTokens", "recallTokens"].reduce((s, k) => s + n(stats[k]), 0);
  const expected = {
    system_prompt: n(stats.systemPromptTokens), pinned, summary: n(stats.summaryTokens), working_memory: n(stats.workingMemoryTokens),
    notice: n(stats.truncationNoticeTokens), recall: n(stats.recallTokens), history: n(stats.historyTokens) - pinned,
    pending: n(stats.pendingTokens), priming: Math.max(0, n(stats.totalTokens) - parts), free: Math.max(0, n(stats.budgetTokens) - n(stats.totalTokens)),
  };
  return { expected, pinned };
}

const shownSections = (page) => page.$$eval("td[data-section]", (tds) => Object.fromEntries(tds.map((td) => [td.dataset.section, Number(td.textContent)])));

test("d. the pack view's figures are BuildContext's", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    await goHash(page, base, `#/c/${ids.main}/pack`);
    const options = { format: 2, maxTokens: 1500, reserve: 100, policy: 2, cut: 150, keepRecent: 1, recall: "Sintra rooms", systemPrompt: "You plan offsites ✓" };
    const shown = await buildInPage(page, options);
    const request = {
      conversationId: ids.main, budget: { maxTokens: 1500, reserveOutputTokens: 100 }, systemPrompt: "You plan offsites ✓",
      toolOutputMaxTokens: 150, format: "FORMAT_ANTHROPIC_MESSAGES", historyPolicy: "HISTORY_POLICY_NEWEST",
      clearToolResults: { keepRecent: 1 }, recall: { query: "Sintra rooms" },
    };
    assert.deepEqual(shown, request, "the page sent the request the form says");
    const res = await call(ctxd.url, "BuildContext", request, KEY_A);
    const stats = res.stats;
    const cells = await page.$$eval("[data-stat]", (tds) => Object.fromEntries(tds.map((td) => [td.dataset.stat, td.textContent])));
    for (const name of ["system_prompt_tokens", "summary_tokens", "working_memory_tokens", "truncation_notice_tokens", "history_tokens",
      "pending_tokens", "recall_tokens", "total_tokens", "budget_tokens", "messages_dropped", "tool_results_cleared", "stable_prefix_tokens"]) {
      assert.ok(name in cells, `no cell for ${name}`);
    }
    for (const [name, text] of Object.entries(cells)) {
      if (name === "needs_summary") assert.equal(text, String(res.needsSummary ?? false));
      else if (name === "previous_response_id") assert.equal(text, res.previousResponseId || "—");
      else {
        const value = stats[jsonName(name)];
        const expected = value === undefined ? (["truncated", "over_budget", "summary_cut"].includes(name) ? "false" : "0") : String(value);
        assert.equal(text, expected, name);
      }
    }
    // The derived sections, computed here from the response and the log.
    const { expected, pinned } = await expectedSections(ids.main, res);
    assert.deepEqual(await shownSections(page), expected);
    assert.ok(pinned > 0, "the pinned opener is in the pack");
    const n = (v) => Number(v ?? 0);
    assert.ok(n(stats.toolResultsCleared) > 0 || n(stats.messagesDropped) > 0, "the budget is tight enough to clear or drop");
    // The log strip agrees with the pack: cleared results, the omitted final reply, what recall quoted.
    assert.ok(n(stats.toolResultsCleared) > 0, "results are cleared");
    assert.ok(n(stats.finalAssistantOmitted) > 0, "the final reply is omitted");
    const fates = await page.$$eval("#ranges .legend li", (lis) => Object.fromEntries(lis.map((li) => [li.dataset.fate, Number(li.dataset.count)])));
    assert.equal(fates.cleared, n(stats.toolResultsCleared));
    assert.equal(fates.final, n(stats.finalAssistantOmitted));
    assert.equal(fates["ui-only"], 1);
    assert.equal(await page.$("#ranges .checks .mismatch"), null, "no count of the page disagrees with the stats");
    // Recall: the page lists the items the recalled turn quotes, as many as the stats say, each a
    // message of the log.
    const recalledShown = await page.$$eval("#recalled a.recalled", (as) => as.map((a) => a.dataset.sequence));
    const recallTurn = res.messages.find((m) => m.source === "CONTEXT_SOURCE_RECALL").content;
    const quoted = [...recallTurn.matchAll(/\n\n\[message (\d+), /g)].map((x) => x[1]);
    assert.ok(n(stats.messagesRecalled) > 0, "recall quotes messages");
    assert.equal(recalledShown.length, n(stats.messagesRecalled));
    assert.deepEqual(recalledShown, quoted);
    const logged = new Set((await call(ctxd.url, "ListMessages", { conversationId: ids.main, pageSize: 1000 }, KEY_A)).messages.map((m) => m.sequence));
    for (const seq of recalledShown) assert.ok(logged.has(seq), `recalled #${seq} is a message of the log`);
    assert.equal(await page.$eval("#rendered", (e) => e.textContent), res.rendered);
    await page.browserContext().overridePermissions(base, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
    await page.click("#copy-rendered");
    await until(page, () => document.querySelector("#copy-rendered").textContent !== "Copy");
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), res.rendered, "Copy put the rendering on the clipboard");
    await shot(page, "pack");
    assert.deepEqual(watch.csp, []);
    say(`pack: total ${n(stats.totalTokens)} of ${n(stats.budgetTokens)}; sections ${JSON.stringify(expected)}; cleared ${n(stats.toolResultsCleared)}, dropped ${n(stats.messagesDropped)}, recall ${n(stats.recallTokens)} quoting [${recalledShown}]; fates ${JSON.stringify(fates)}`);
  } finally {
    await close();
  }
});

/** What the page must show for a previous and a current rendering. */
function expectedPrefix(previous, current) {
  const a = enc.encode(previous);
  const b = enc.encode(current);
  const bytes = commonPrefix(a, b);
  let whole = bytes;
  while (whole > 0 && whole < b.length && (b[whole] & 0xc0) === 0x80) whole--;
  return { bytes, total: b.length, mark: Buffer.from(b.subarray(0, whole)) };
}

test("e. build again after the next turn: the shared byte prefix", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  const captured = [];
  page.on("response", async (r) => {
    if (r.url().endsWith("/ctxd.v1.ContextService/BuildContext") && r.request().method() === "POST") captured.push((await r.json()).rendered);
  });
  try {
    await logIn(page, base, KEY_A);
    await goHash(page, base, `#/c/${ids.main}/pack`);
    const request = await buildInPage(page, { maxTokens: 3000 });
    assert.equal(await page.$("mark#prefix"), null, "a first build has nothing to compare with");
    const before = (await call(ctxd.url, "BuildContext", request, KEY_A)).rendered;
    await call(ctxd.url, "AppendMessage", { conversationId: ids.main, messages: [
      { role: "ROLE_USER", content: "And dinner on the first night — somewhere with fado?" },
      { role: "ROLE_ASSISTANT", content: "Clube de Fado in Alfama has a table for 12 at 20:00." },
    ] }, KEY_A);
    await clickBuild(page, "#pack-build-again");
    const afterTurnRes = await call(ctxd.url, "BuildContext", request, KEY_A);
    const afterTurn = afterTurnRes.rendered;
    assert.deepEqual(await shownSections(page), (await expectedSections(ids.main, afterTurnRes)).expected, "sections after the log grew");
    for (let i = 0; i < 100 && captured.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(captured.slice(0, 2), [before, afterTurn], "the page's renderings are BuildContext's");
    const want = expectedPrefix(before, afterTurn);
    const got = await shownPrefix(page);
    assert.equal(Number(got.bytes), want.bytes);
    assert.equal(Number(got.total), want.total);
    assert.ok(Buffer.from(enc.encode(got.mark)).equals(want.mark), "the mark holds the whole characters of the shared bytes");
    assert.equal(got.text, afterTurn);
    assert.ok(want.bytes > 0 && want.bytes < want.total);
    await shot(page, "pack-again");
    say(`prefix: ${got.note}`);

    // A change inside a two-byte character: é (c3 a9) became ê (c3 aa). The shared bytes end
    // in the middle of it; the mark ends before it.
    // The first message is pinned, its replacement is not: the page must notice the rewind.
    await call(ctxd.url, "AppendMessage", { conversationId: ids.utf8, messages: [{ role: "ROLE_USER", content: "Un café, s'il vous plaît", pinned: true }] }, KEY_A);
    await goHash(page, base, `#/c/${ids.utf8}/pack`);
    const r2 = await buildInPage(page, { maxTokens: 2000 });
    const first = (await call(ctxd.url, "BuildContext", r2, KEY_A)).rendered;
    assert.ok((await shownSections(page)).pinned > 0, "the pinned message is counted");
    await call(ctxd.url, "RewindConversation", { conversationId: ids.utf8, afterSequence: "0" }, KEY_A);
    await call(ctxd.url, "AppendMessage", { conversationId: ids.utf8, messages: [{ role: "ROLE_USER", content: "Un cafê, s'il vous plaît" }] }, KEY_A);
    await clickBuild(page, "#pack-build-again");
    const secondRes = await call(ctxd.url, "BuildContext", r2, KEY_A);
    const second = secondRes.rendered;
    assert.deepEqual(await shownSections(page), (await expectedSections(ids.utf8, secondRes)).expected, "sections after a rewind");
    assert.equal((await shownSections(page)).pinned, 0);
    const want2 = expectedPrefix(first, second);
    const got2 = await shownPrefix(page);
    assert.equal(enc.encode(second)[want2.bytes - 1], 0xc3, "the shared bytes end inside the character");
    assert.equal(Number(got2.bytes), want2.bytes);
    assert.ok(Buffer.from(enc.encode(got2.mark)).equals(want2.mark));
    assert.ok(got2.mark.endsWith("Un caf"), got2.mark.slice(-20));
    assert.deepEqual(watch.csp, []);
    say(`prefix across a split character: ${want2.bytes} shared bytes, mark of ${want2.mark.length} bytes ending "${got2.mark.slice(-6)}"`);

    // Anthropic: the cache_control markers sit on the last two messages and move every turn, so
    // the raw prefix stops at the first one; the page also compares without them.
    await call(ctxd.url, "AppendMessage", { conversationId: ids.anthropic, messages: [
      { role: "ROLE_USER", content: "Which fado house?" }, { role: "ROLE_ASSISTANT", content: "Clube de Fado." }, { role: "ROLE_USER", content: "For how many?" },
    ] }, KEY_A);
    await goHash(page, base, `#/c/${ids.anthropic}/pack`);
    const r3 = await buildInPage(page, { format: 2, maxTokens: 2000 });
    const third = (await call(ctxd.url, "BuildContext", r3, KEY_A)).rendered;
    await call(ctxd.url, "AppendMessage", { conversationId: ids.anthropic, messages: [
      { role: "ROLE_ASSISTANT", content: "Twelve." }, { role: "ROLE_USER", content: "Book it." },
    ] }, KEY_A);
    await clickBuild(page, "#pack-build-again");
    const fourth = (await call(ctxd.url, "BuildContext", r3, KEY_A)).rendered;
    const unmark = (t) => t.replaceAll('"cache_control":{"type":"ephemeral"},', "");
    const raw = expectedPrefix(third, fourth);
    const unmarked = expectedPrefix(unmark(third), unmark(fourth));
    assert.equal(Number((await shownPrefix(page)).bytes), raw.bytes, "the raw byte prefix is still shown");
    const shownUnmarked = await page.$eval("#prefix-unmarked", (p) => [Number(p.dataset.prefixBytes), Number(p.dataset.totalBytes)]);
    assert.deepEqual(shownUnmarked, [unmarked.bytes, unmarked.total]);
    assert.ok(unmarked.bytes > raw.bytes, `without the markers more is shared (${unmarked.bytes} > ${raw.bytes})`);
    say(`anthropic: ${raw.bytes} bytes shared raw, ${unmarked.bytes} of ${unmarked.total} without the cache_control markers`);
  } finally {
    await close();
  }
});

test("f. a tenant sees only its own conversations", async () => {
  for (const [key, own, other, hidden] of [[KEY_A, ids.main, ids.b, markerB], [KEY_B, ids.b, ids.main, "Lisbon"]]) {
    const { page, watch, close } = await openPage(chromium.browser);
    try {
      await logIn(page, base, key);
      const listed = await listedIds(page, base);
      assert.ok(listed.includes(own), `${own} is listed`);
      assert.ok(!listed.includes(other), `${other} is listed`);
      assert.ok(!(await pageText(page)).includes(hidden));
      for (const view of ["log", "pack", "memory", "search"]) {
        await goHash(page, base, `#/c/${other}/${view}`);
        const banner = await page.$eval("#banner", (b) => [b.hidden, b.dataset.code]);
        assert.deepEqual(banner, [false, "NOT_FOUND"], `${view} of the other tenant's conversation`);
        const text = await pageText(page);
        assert.ok(!text.includes(hidden), `the ${view} view shows ${hidden}`);
        assert.equal(await page.$("#conv-head"), null);
      }
      // Forget key: back to the prompt, nothing stored.
      if (key === KEY_A) {
        await goHash(page, base, `#/c/${ids.shared}/pack`);
        await buildInPage(page, { maxTokens: 1234 });
      }
      await page.click("#forget-key");
      await page.waitForSelector("#key-form");
      assert.deepEqual(await page.evaluate(() => [sessionStorage.length, !!document.querySelector("#nav")]), [0, false]);
      if (key === KEY_A) {
        // Tenant B in the same page, on its conversation of the same id: nothing tenant A's
        // page kept (form values, the last rendering, the log read) is used.
        await page.type("#key-input", KEY_B);
        await page.click("#key-submit");
        await page.waitForSelector("#nav");
        await goHash(page, base, `#/c/${ids.shared}/pack`);
        assert.equal(await page.$eval("#pack-max-tokens", (i) => i.value), "16000", "the form's values are tenant A's");
        await clickBuild(page, "#pack-build");
        assert.equal(await page.$("mark#prefix"), null, "tenant A's rendering was compared");
        const text = await pageText(page);
        assert.ok(text.includes(`shared by B ${markerB}`) && !text.includes("shared by A"), "the pack is tenant B's");
        await page.click("#forget-key");
        await page.waitForSelector("#key-form");
      }
      assert.deepEqual(watch.csp, []);
      say(`tenant ${key === KEY_A ? "A" : "B"}: ${listed.length} conversations listed, the other's not among them; its views NOT_FOUND`);
    } finally {
      await close();
    }
  }
});

test("g. hostile content is shown as text and never runs", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    const { script, img, svg, js, dataHtml, dataSvg } = HOSTILE;
    const views = [
      ["#/", [img]],
      [`#/c/${ids.hostile}/log`, [script, img, svg, js, dataHtml, dataSvg, `tool${svg}`, `not json ${img}`, `native ${img}`]],
      [`#/c/${ids.hostile}/memory`, [`${script} ${img}`, img, svg, script]],
      [`#/c/${ids.hostile}/search?q=pwned`, [script]],
      [`#/c/${ids.hostile}/pack`, []],
    ];
    // The pack is built tight, so that results are cleared (placeholders naming the hostile
    // tool) and recall quotes hostile excerpts: the first budget of a few that does both.
    const packOptions = { format: "FORMAT_ANTHROPIC_MESSAGES", clearToolResults: {}, recall: { query: "pwned window" } };
    let budget;
    for (const maxTokens of [7000, 6500, 7500, 6000, 8000]) {
      const { stats } = await call(ctxd.url, "BuildContext", { conversationId: ids.hostile, budget: { maxTokens }, ...packOptions }, KEY_A);
      if (Number(stats.toolResultsCleared ?? 0) > 0 && Number(stats.messagesRecalled ?? 0) > 0) {
        budget = maxTokens;
        break;
      }
    }
    assert.ok(budget, "a budget at which the hostile pack clears results and recalls messages");
    for (const [hash, strings] of views) {
      await goHash(page, base, hash);
      let pack;
      if (hash.endsWith("/pack")) {
        const sent = await buildInPage(page, { format: 2, maxTokens: budget, keepRecent: 0, recall: "pwned window" });
        pack = await call(ctxd.url, "BuildContext", sent, KEY_A);
        strings.push(`[tool result cleared to save context: tool${svg} returned`);
      }
      await new Promise((r) => setTimeout(r, 200)); // give any injected handler a chance to fire
      const audit = await page.evaluate(domAudit);
      assert.equal(audit.pwned, undefined, `${hash}: window.__pwned was set`);
      assert.deepEqual(audit.scripts, ["/inspect/inspector.js"], hash);
      assert.deepEqual(audit.onAttrs, [], hash);
      assert.deepEqual(audit.badUrls, [], hash);
      assert.equal(audit.svg, 0, hash);
      assert.deepEqual(audit.csp, [], hash);
      for (const s of strings) assert.ok(audit.text.includes(s), `${hash} does not show ${s} verbatim`);
      if (pack) {
        const rendered = await page.$eval("#rendered", (e) => e.textContent);
        assert.ok(rendered.includes(script));
        const recalled = pack.messages.find((m) => m.source === "CONTEXT_SOURCE_RECALL").content;
        assert.ok(recalled.includes(script), "recall quotes a hostile excerpt");
        assert.ok(rendered.includes(JSON.stringify(recalled).slice(1, -1)), "the recalled turn is drawn in the rendering");
        assert.ok(Number(pack.stats.toolResultsCleared) > 0);
      }
      if (hash.endsWith("/log")) {
        const native = await page.$eval("#m-9", (m) => [m.querySelector("details.native pre")?.textContent, m.querySelector("details.reasoning")?.textContent]);
        assert.ok(native[0]?.includes(script) && native[0].includes("thinking"), `native JSON: ${native[0]}`);
        assert.ok(native[1]?.includes(script), "reasoning");
      }
    }
    assert.deepEqual(watch.dialogs, []);
    assert.deepEqual(watch.csp, []);
    assert.deepEqual(watch.errors, []);
    await goHash(page, base, `#/c/${ids.hostile}/log`);
    const external = await page.$$eval("a[target=_blank]", (as) => as.map((a) => [a.getAttribute("href"), a.getAttribute("rel")]));
    assert.deepEqual(external, [["https://example.invalid/pic.png", "noopener noreferrer"]]);
    await shot(page, "hostile");
    say(`hostile: ${views.length} views, no script ran, no on* attribute, no javascript:/data:text URL, no CSP violation, no dialog`);
  } finally {
    await close();
  }
});

test("h. a log of 1,000 messages renders in under a second", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    await goHash(page, base, `#/c/${ids.many}/log`);
    const r = await page.evaluate(() => ({
      ms: Number(document.querySelector("#log").dataset.renderMs),
      messages: document.querySelectorAll("#log .msg").length,
      groups: document.querySelectorAll("#log .tool-group").length,
      uiOnly: document.querySelectorAll("#log .msg.ui-only").length,
      status: document.querySelector("#log-status").textContent,
    }));
    say(`log of ${r.messages} messages rendered in ${r.ms} ms (${r.groups} tool groups, ${r.uiOnly} UI-only events; page says "${r.status}")`);
    assert.equal(r.messages, 1000);
    assert.equal(r.groups, many.groups);
    assert.ok(many.uiOnly > 0);
    assert.equal(r.uiOnly, many.uiOnly);
    assert.ok(r.ms > 0 && r.ms < 1000, `${r.ms} ms`);
    await goHash(page, base, `#/c/${ids.many}/log?seq=750`);
    assert.equal(await page.$eval("#m-750", (m) => m.classList.contains("highlight")), true);
    await page.screenshot({ path: join(artifacts, `${store}-many.png`) });
    assert.deepEqual(watch.csp, []);
  } finally {
    await close();
  }
});

test("i. with API keys and without CTXD_INSPECTOR, /inspect is 404", { skip: proxied && "the dev proxy serves the page, not ctxd" }, async () => {
  const off = await startCtxd(bin, { CTXD_API_KEYS: API_KEYS }, ["CTXD_INSPECTOR"]);
  try {
    const statuses = [];
    for (const path of ["/inspect", "/inspect/", "/inspect/inspector.js", "/inspect/inspector.css"]) statuses.push((await fetch(`${off.url}${path}`)).status);
    assert.deepEqual(statuses, [404, 404, 404, 404]);
    say(`without CTXD_INSPECTOR: ${statuses.join(", ")}`);
  } finally {
    await off.stop();
  }
});

test("j. a server without API keys: the app at once, with a tenant field", async () => {
  const open = await startCtxd(bin, { CTXD_INSPECTOR: "true" }, ["CTXD_API_KEYS", "DATABASE_URL"]);
  const front = proxied ? await startDevServer(open.url) : undefined;
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    const id = `insp-${run}-open`;
    await call(open.url, "AppendMessage", { conversationId: id, messages: [{ role: "ROLE_USER", content: "hello from tenant-x" }] }, undefined, { "x-tenant-id": "tenant-x" });
    const url = front ? front.url : open.url;
    await page.goto(`${url}/inspect`);
    await viewReady(page, "");
    assert.equal(await page.$("#key-form"), null);
    assert.equal(await page.$(`tr.conversation[data-id="${id}"]`), null, "the default tenant does not see tenant-x's conversation");
    await page.type("#tenant-input", "tenant-x");
    await page.click("#tenant-form button");
    await until(page, (i) => document.querySelector(`tr.conversation[data-id="${i}"]`), id);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("ctxd.inspector.tenant")), "tenant-x");
    await goHash(page, url, `#/c/${id}/log`);
    assert.match(await page.$eval("#m-1", (m) => m.textContent), /hello from tenant-x/);
    // Another tenant with a conversation of the same id: a tenant change empties what the page
    // kept (the form's values, the last rendering, the log read), so nothing of tenant-x shows.
    await call(open.url, "AppendMessage", { conversationId: id, messages: [{ role: "ROLE_USER", content: "hello from tenant-y" }] }, undefined, { "x-tenant-id": "tenant-y" });
    await goHash(page, url, `#/c/${id}/pack`);
    await buildInPage(page, { maxTokens: 1234 });
    await page.$eval("#tenant-input", (i) => { i.value = "tenant-y"; });
    await page.click("#tenant-form button");
    await viewReady(page, `#/c/${id}/pack`);
    assert.equal(await page.$eval("#pack-max-tokens", (i) => i.value), "16000", "the form's values are tenant-x's");
    await clickBuild(page, "#pack-build");
    assert.equal(await page.$("mark#prefix"), null, "a rendering of tenant-x's conversation was compared");
    assert.match(await page.$eval("#rendered", (e) => e.textContent), /hello from tenant-y/);
    assert.deepEqual(watch.csp, []);
    say("no API keys: the app without a prompt; x-tenant-id from the tenant field; a tenant change forgets what the page kept");
  } finally {
    await close();
    await front?.close();
    await open.stop();
  }
});

test("k. a rendering over 1 MiB: a window around the end of the shared bytes, all of it on request", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    await goHash(page, base, `#/c/${ids.large}/pack`);
    const request = await buildInPage(page, { maxTokens: 2_000_000 });
    const before = (await call(ctxd.url, "BuildContext", request, KEY_A)).rendered;
    await call(ctxd.url, "AppendMessage", { conversationId: ids.large, messages: [{ role: "ROLE_USER", content: "And the summary of it?" }] }, KEY_A);
    await clickBuild(page, "#pack-build-again");
    const current = (await call(ctxd.url, "BuildContext", request, KEY_A)).rendered;
    const want = expectedPrefix(before, current);
    assert.ok(want.total > 1024 * 1024, `${want.total} bytes`);
    const got = await page.evaluate(() => {
      const pre = document.querySelector("#rendered");
      return { windowed: pre.dataset.windowed, bytes: Number(pre.dataset.prefixBytes), total: Number(pre.dataset.totalBytes), chars: pre.textContent.length, mark: document.querySelector("mark#prefix").textContent };
    });
    assert.equal(got.windowed, "1");
    assert.equal(got.bytes, want.bytes, "the exact shared byte count");
    assert.equal(got.total, want.total);
    assert.ok(got.chars < 20_000, `the window holds ${got.chars} characters`);
    assert.ok(want.mark.toString("utf8").endsWith(got.mark), "the mark is the end of the shared characters");
    await page.click("#rendered-all");
    const all = await shownPrefix(page);
    assert.equal(all.text, current);
    assert.ok(Buffer.from(enc.encode(all.mark)).equals(want.mark));
    assert.deepEqual(watch.csp, []);
    assert.deepEqual(watch.errors, []);
    say(`large rendering: ${want.total} bytes, ${want.bytes} shared; window of ${got.chars} characters, then all of it`);
  } finally {
    await close();
  }
});

test("l. cache-stable history: the anchor it starts at, and newest-that-fits for comparison", async () => {
  const { page, watch, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    await goHash(page, base, `#/c/${ids.many}/pack`);
    const request = await buildInPage(page, { maxTokens: 3000 });
    const { stats } = await call(ctxd.url, "BuildContext", request, KEY_A);
    const newest = (await call(ctxd.url, "BuildContext", { ...request, historyPolicy: "HISTORY_POLICY_NEWEST" }, KEY_A)).stats;
    assert.ok(Number(stats.historyStepTokens) > 0 && Number(stats.messagesDropped) > 0, "history starts at an anchor");
    const why = await page.$eval("#ranges tr[data-fate='dropped'] td.why", (td) => td.textContent);
    assert.match(why, new RegExp(`turn anchor \\(#${stats.oldestIncludedSequence}\\)`));
    assert.match(why, /might have fit/);
    const fates = await page.$$eval("#ranges .legend li", (lis) => Object.fromEntries(lis.map((li) => [li.dataset.fate, Number(li.dataset.count)])));
    assert.equal(fates["ui-only"], many.uiOnly);
    assert.equal(fates.missing, undefined);
    await page.click("#compare-newest");
    await until(page, () => document.querySelector("#compare-newest-result")?.dataset.oldest);
    const shown = await page.$eval("#compare-newest-result", (e) => [e.dataset.oldest, e.textContent]);
    assert.equal(shown[0], newest.oldestIncludedSequence);
    await shot(page, "pack-cache-stable");
    assert.deepEqual(watch.csp, []);
    say(`cache-stable: history from #${stats.oldestIncludedSequence} (step ${stats.historyStepTokens}); newest-that-fits:${shown[1]}`);
  } finally {
    await close();
  }
});

test("m. a link to a pack builds it when opened, and every view says when it loads, is empty or failed", async () => {
  const { page, close } = await openPage(chromium.browser);
  try {
    await logIn(page, base, KEY_A);
    // Opened cold (a shared link; the key stays in the tab's session): built without a click.
    const link = `#/c/${encodeURIComponent(ids.main)}/pack?format=2&maxTokens=1500&systemPrompt=You%20plan%20offsites&build=1`;
    await page.goto(`${base}/inspect${link}`);
    await viewReady(page, link);
    const built = await page.$eval("#pack-result", (r) => r.dataset.built ?? "");
    assert.ok(built, "the linked pack was built without a click");
    const request = JSON.parse(await page.$eval("#pack-request", (e) => e.textContent));
    assert.equal(request.format, "FORMAT_ANTHROPIC_MESSAGES");
    assert.deepEqual(request.budget, { maxTokens: 1500 });
    assert.equal(request.systemPrompt, "You plan offsites");
    assert.equal(await page.$eval("#pack-max-tokens", (e) => e.value), "1500", "the form shows the link's options");
    await shot(page, "pack-deep-link");
    // Building from the form puts its options in the URL: that URL is the link.
    await page.$eval("#pack-max-tokens", (e) => { e.value = "1200"; });
    await clickBuild(page, "#pack-build");
    assert.match(await page.evaluate(() => location.hash), /maxTokens=1200.*build=1/);

    // Before a build, the pack view says what to do; a search without a query too.
    await goHash(page, base, `#/c/${encodeURIComponent(ids.main)}/pack`);
    assert.match(await pageText(page), /Set the options and press Build/);
    await goHash(page, base, `#/c/${encodeURIComponent(ids.main)}/search`);
    assert.match(await pageText(page), /Type a query and press Search/);
    // Empty states, in words.
    await goHash(page, base, `#/c/${encodeURIComponent(ids.main)}/search?q=zzzqqqxxx`);
    assert.match(await pageText(page), /No message matches\./);
    await goHash(page, base, `#/c/${encodeURIComponent(ids.shared)}/memory`);
    assert.match(await pageText(page), /No working memory yet\./);
    // A failed view says so in the view, not only in the banner.
    await goHash(page, base, "#/c/no-such-conversation-here/log");
    assert.match(await page.$eval("#view-error", (e) => e.textContent), /could not be loaded: .*not.found/i);

    // Loading, in words, while the list is on its way (its answer held back for a moment).
    await page.setRequestInterception(true);
    page.on("request", (r) => {
      if (r.url().endsWith("/ListConversations")) setTimeout(() => r.continue(), 1_500);
      else r.continue();
    });
    await page.evaluate(() => { location.hash = "#/?size=25"; });
    await until(page, () => document.querySelector("#conversations-loading")?.textContent === "loading conversations…");
    await shot(page, "loading");
    await viewReady(page, "#/?size=25");
    assert.equal(await page.$("#conversations-loading"), null, "the loading text is gone once the list is in");
  } finally {
    await close();
  }
});
