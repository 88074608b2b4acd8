// The rendered pack (what the caller sends the provider), with a Copy button, and, after a
// build with the same request, the bytes it shares with the previous one highlighted.

import { h, on } from "../dom.js";
import { num } from "../format.js";
import { sharedPrefix } from "../prefix.js";

/** A rendering kept for comparison with the next build of the same request. */
export interface Previous {
  rendered: string;
  stablePrefixTokens: number;
}

/** `<pre id="rendered">`, split into `<mark id="prefix">` and the rest when `previous` is known. */
export function renderedElement(rendered: string, stablePrefixTokens: number, previous: Previous | undefined): HTMLElement {
  const pre = h("pre", { id: "rendered", class: "json rendered" });
  let note: HTMLElement;
  if (previous) {
    const shared = sharedPrefix(previous.rendered, rendered);
    pre.dataset.prefixBytes = String(shared.bytes);
    pre.dataset.totalBytes = String(shared.totalBytes);
    pre.append(h("mark", { id: "prefix" }, shared.prefix), h("span", { class: "rest" }, shared.rest));
    const pct = shared.totalBytes ? ((100 * shared.bytes) / shared.totalBytes).toFixed(1) : "0.0";
    note = h("p", { id: "prefix-note" },
      `${num(shared.bytes)} of ${num(shared.totalBytes)} bytes shared with the previous pack (${pct}%)`,
      ` · stable_prefix_tokens: the previous pack expected ${num(previous.stablePrefixTokens)} tokens to repeat; this one expects ${num(stablePrefixTokens)}`);
  } else {
    pre.dataset.totalBytes = String(new TextEncoder().encode(rendered).length);
    pre.append(h("span", { class: "rest" }, rendered));
    note = h("p", { id: "prefix-note", class: "note" },
      `${num(Number(pre.dataset.totalBytes))} bytes · stable_prefix_tokens ${num(stablePrefixTokens)} · `,
      "build again after the agent's next turn to see the bytes the provider's prompt cache would reuse");
  }
  const copy = on(h("button", { type: "button", id: "copy-rendered" }, "Copy"), "click", () => copyText(rendered, pre, copy));
  return h("section", { class: "rendered-section" }, h("h3", null, "Rendered", copy), note, pre);
}

async function copyText(text: string, pre: HTMLElement, button: HTMLButtonElement): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // No clipboard (an insecure origin, or permission refused): select it for Ctrl+C.
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
}
