// Browser plumbing for the test: Debian's chromium through puppeteer-core (never a downloaded
// browser), one incognito context per scenario, and a watch on everything a page must not do
// (dialogs, CSP violations, uncaught errors).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";

export async function launchBrowser() {
  const userDataDir = mkdtempSync(join(tmpdir(), "inspector-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    userDataDir,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"],
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A page in a fresh incognito context (its own sessionStorage), with `watch`: dialogs opened,
 * CSP violations (console "Refused to ..." and securitypolicyviolation events), page errors.
 */
export async function openPage(browser) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  const watch = { dialogs: [], csp: [], errors: [], console: [] };
  page.on("dialog", async (dialog) => {
    watch.dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  page.on("console", (msg) => {
    watch.console.push(`${msg.type()}: ${msg.text()}`);
    if (msg.text().includes("Refused to")) watch.csp.push(msg.text());
  });
  page.on("pageerror", (err) => watch.errors.push(err.message));
  // Runs outside the page's CSP (DevTools protocol): records violations the console may not name.
  await page.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      window.__cspViolations = [...(window.__cspViolations ?? []), `${e.violatedDirective} ${e.blockedURI}`];
    });
  });
  return { page, context, watch, close: () => context.close() };
}

/** Waits until `fn` (run in the page) returns a truthy value. */
export function until(page, fn, arg, timeout = 15_000) {
  return page.waitForFunction(fn, { timeout, polling: 50 }, arg);
}

/** Goes to `hash` of the Inspector and waits until its view has finished (`#view[data-ready]`). */
export async function goHash(page, base, hash) {
  if (page.url().startsWith(`${base}/inspect`)) {
    await page.evaluate((h) => {
      if (location.hash === h) window.dispatchEvent(new HashChangeEvent("hashchange"));
      else location.hash = h;
    }, hash);
  } else {
    await page.goto(`${base}/inspect${hash}`);
  }
  await viewReady(page, hash);
}

/** Waits until the view of `hash` has finished (with its content or with an error banner). */
export function viewReady(page, hash) {
  return until(page, (h) => {
    const view = document.getElementById("view");
    return view && view.dataset.route === h && view.dataset.ready === "1";
  }, hash);
}

/** Loads the Inspector and enters `key` in the prompt; resolves once the app shows. */
export async function logIn(page, base, key) {
  await page.goto(`${base}/inspect`);
  await page.waitForSelector("#key-input");
  await page.type("#key-input", key);
  await page.click("#key-submit");
  await page.waitForSelector("#nav");
}

/** Text of the page as a person sees it. */
export const pageText = (page) => page.evaluate(() => document.body.innerText);
