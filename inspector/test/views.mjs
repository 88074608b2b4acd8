// What the browser test does in the Inspector's views: fill and build the pack form, read the
// shared prefix, walk the conversation list, audit the DOM for anything that could run.
import assert from "node:assert/strict";
import { goHash, until } from "./page.mjs";

/** Fills the pack form and builds; resolves with the request JSON the page shows. */
export async function buildInPage(page, o) {
  const set = (sel, v) => page.$eval(sel, (el, v) => { el.value = v; }, String(v));
  if (o.format) await page.select("#pack-format", String(o.format));
  if (o.maxTokens) await set("#pack-max-tokens", o.maxTokens);
  if (o.reserve) await set("#pack-reserve", o.reserve);
  if (o.policy) await page.select("#pack-history-policy", String(o.policy));
  if (o.cut) await set("#pack-tool-output-max", o.cut);
  if (o.keepRecent !== undefined) {
    await page.click("#pack-clear");
    await set("#pack-keep-recent", o.keepRecent);
  }
  if (o.recall) {
    await page.click("#pack-recall");
    await set("#pack-recall-query", o.recall);
  }
  if (o.systemPrompt) await page.type("#pack-system-prompt", o.systemPrompt);
  await clickBuild(page, "#pack-build");
  return JSON.parse(await page.$eval("#pack-request", (e) => e.textContent));
}

/** Clicks a build button and waits for the new result. */
export async function clickBuild(page, button) {
  const before = await page.evaluate(() => document.querySelector("#pack-result")?.dataset.built ?? "");
  await page.click(button);
  await until(page, (b) => {
    const r = document.querySelector("#pack-result");
    return (r?.dataset.built && r.dataset.built !== b) || !document.querySelector("#banner").hidden;
  }, before);
  const banner = await page.$eval("#banner", (b) => (b.hidden ? "" : b.textContent));
  assert.equal(banner, "", "the build failed");
}

export async function shownPrefix(page) {
  return page.evaluate(() => {
    const pre = document.querySelector("#rendered");
    return { bytes: pre.dataset.prefixBytes, total: pre.dataset.totalBytes, mark: document.querySelector("mark#prefix")?.textContent, text: pre.textContent, note: document.querySelector("#prefix-note").textContent };
  });
}

/** Every conversation id the list shows, following "Next page" to the end. */
export async function listedIds(page, base) {
  await goHash(page, base, "#/?size=1000");
  const found = [];
  for (let n = 1; ; n++) {
    found.push(...await page.$$eval("tr.conversation", (rows) => rows.map((r) => r.dataset.id)));
    const next = await page.$("#page-next");
    if (!next) return found;
    await next.click();
    await until(page, (p) => document.querySelector("#conversations")?.dataset.page === String(p), n + 1);
  }
}

/** Everything in the DOM that could run or load what the page did not write itself. */
export function domAudit() {
  const scripts = [...document.querySelectorAll("script")].map((s) => s.getAttribute("src"));
  const onAttrs = [];
  const badUrls = [];
  for (const el of document.querySelectorAll("*")) {
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith("on")) onAttrs.push(`${el.tagName} ${a.name}`);
      if (["href", "src", "action", "formaction", "xlink:href"].includes(a.name.toLowerCase())) {
        const v = a.value.trim().toLowerCase();
        if (v.startsWith("javascript:") || v.startsWith("data:text") || v.startsWith("data:image/svg") || v.startsWith("vbscript:")) badUrls.push(`${el.tagName} ${a.name}=${a.value.slice(0, 40)}`);
        if (a.name === "src" && el.tagName !== "SCRIPT" && !/^data:image\/(png|jpeg|gif|webp);base64,/.test(a.value)) badUrls.push(`${el.tagName} src=${a.value.slice(0, 40)}`);
      }
    }
  }
  return { pwned: window.__pwned, scripts, onAttrs, badUrls, csp: window.__cspViolations ?? [], svg: document.querySelectorAll("svg, iframe, object, embed").length, text: document.body.textContent };
}
