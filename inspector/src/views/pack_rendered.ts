// The rendered pack (what the caller sends the provider), with a Copy button, and, after a
// build with the same request, the bytes it shares with the previous one highlighted. A
// rendering over 1 MiB shows a window around the end of the shared bytes (the full text one
// click away), so that the page stays responsive.

import { Format } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { h, on, replace } from "../dom.js";
import { num, utf8Length } from "../format.js";
import { sharedBytes, sharedPrefix, withoutCacheMarkers } from "../prefix.js";

/** A rendering kept for comparison with the next build of the same request. */
export interface Previous {
  rendered: string;
  stablePrefixTokens: number;
}

/** Renderings of more bytes than this are shown as a window. */
export const WINDOW_BYTES = 1 << 20;
/** Characters the window shows on each side of the end of the shared bytes. */
const WINDOW_CHARS = 8192;

/**
 * `<pre id="rendered">` (`data-total-bytes`, and `data-prefix-bytes` when `previous` is known),
 * split into `<mark id="prefix">` (the whole characters of the shared bytes) and the rest. For a
 * large rendering (`data-windowed`) the pre holds only the window; "show all" fills it whole.
 */
export function renderedElement(rendered: string, stablePrefixTokens: number, previous: Previous | undefined, format: Format): HTMLElement {
  const pre = h("pre", { id: "rendered", class: "json rendered" });
  const shared = previous ? sharedPrefix(previous.rendered, rendered) : undefined;
  const total = shared?.totalBytes ?? utf8Length(rendered);
  pre.dataset.totalBytes = String(total);
  if (shared) pre.dataset.prefixBytes = String(shared.bytes);
  const prefix = shared?.prefix ?? "";
  const rest = shared ? shared.rest : rendered;
  const whole = () => replace(pre, shared ? h("mark", { id: "prefix" }, prefix) : null, h("span", { class: "rest" }, rest));
  let windowNote: HTMLElement | null = null;
  if (total > WINDOW_BYTES) {
    pre.dataset.windowed = "1";
    const note = drawWindow(pre, prefix, rest, shared !== undefined);
    const all = on(h("button", { type: "button", id: "rendered-all" }, `Show all ${num(total)} bytes`), "click", () => {
      whole();
      delete pre.dataset.windowed;
      note.remove();
    });
    note.append(" ", all);
    windowNote = note;
  } else {
    whole();
  }
  const copy = on(h("button", { type: "button", id: "copy-rendered" }, "Copy"), "click", () => copyText(rendered, pre, copy));
  return h("section", { class: "rendered-section" }, h("h3", null, "Rendered", copy),
    prefixNote(total, stablePrefixTokens, previous, shared?.bytes),
    previous && format === Format.ANTHROPIC_MESSAGES ? unmarkedNote(previous.rendered, rendered) : null,
    windowNote, pre);
}

/** What the comparison with the previous build found, or how to get one. */
function prefixNote(total: number, stablePrefixTokens: number, previous: Previous | undefined, bytes: number | undefined): HTMLElement {
  if (!previous || bytes === undefined) {
    return h("p", { id: "prefix-note", class: "note" },
      `${num(total)} bytes · stable_prefix_tokens ${num(stablePrefixTokens)} · `,
      "build again after the agent's next turn to see the bytes the provider's prompt cache would reuse");
  }
  return h("p", { id: "prefix-note" },
    `${num(bytes)} of ${num(total)} bytes shared with the previous pack (${percent(bytes, total)})`,
    ` · stable_prefix_tokens: the previous pack expected ${num(previous.stablePrefixTokens)} tokens to repeat; this one expects ${num(stablePrefixTokens)}`);
}

/** Anthropic packs: the shared prefix with the `cache_control` markers taken out of both. */
function unmarkedNote(previous: string, current: string): HTMLElement {
  const { bytes, totalBytes } = sharedBytes(withoutCacheMarkers(previous), withoutCacheMarkers(current));
  return h("p", { id: "prefix-unmarked", "data-prefix-bytes": bytes, "data-total-bytes": totalBytes },
    `Without the cache_control markers: ${num(bytes)} of ${num(totalBytes)} bytes shared (${percent(bytes, totalBytes)}). `,
    h("span", { class: "note" }, "The markers sit on the last blocks of the last two messages and so move every turn, but where they sit is not part of the content Anthropic caches: this is the prefix its cache can reuse."));
}

function percent(part: number, whole: number): string {
  return `${whole ? ((100 * part) / whole).toFixed(1) : "0.0"}%`;
}

/** Fills `pre` with the characters around the end of the shared prefix; returns the note that
 *  says what is not shown. */
function drawWindow(pre: HTMLElement, prefix: string, rest: string, marked: boolean): HTMLElement {
  const start = safeCut(prefix, prefix.length - WINDOW_CHARS);
  const end = safeCut(rest, WINDOW_CHARS);
  const before = prefix.slice(0, start);
  const after = rest.slice(end);
  replace(pre, marked ? h("mark", { id: "prefix" }, prefix.slice(start)) : null, h("span", { class: "rest" }, rest.slice(0, end)));
  return h("p", { class: "note warn", id: "rendered-window" },
    `A large rendering: shown from ${before ? `after its first ${num(utf8Length(before))} bytes` : "its start"}`,
    marked ? " (the shared part, highlighted, ends in the middle)" : "",
    after ? ` to ${num(utf8Length(after))} bytes before its end.` : " to its end.");
}

/** `at` clamped to the text, moved back off the second half of a surrogate pair. */
function safeCut(text: string, at: number): number {
  if (at <= 0) return 0;
  if (at >= text.length) return text.length;
  const c = text.charCodeAt(at);
  return c >= 0xdc00 && c <= 0xdfff ? at - 1 : at;
}

async function copyText(text: string, pre: HTMLElement, button: HTMLButtonElement): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // No clipboard (an insecure origin, or permission refused): select it for Ctrl+C (all of it).
    document.getElementById("rendered-all")?.click();
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = getSelection();
    selection?.removeAllRanges();
    selection?.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
}
