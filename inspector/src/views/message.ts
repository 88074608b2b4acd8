// One log message as the timeline draws it. Every value from the log goes in as text (`h`
// children) or through the URL checks of dom.ts; nothing is parsed as markup.

import { FormatSchema, RoleSchema, type Attachment, type Message, type Reasoning, type TokenCounts, type ToolCall, type Usage } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { ProviderSchema, Role } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { externalLink, h, isDataImage, type Child } from "../dom.js";
import { argumentsText, enumLabel, num, prettyJson, time } from "../format.js";
import { messageHref } from "../routes.js";

/** The content RedactMessage leaves in place of a message's text. */
export const REDACTED = "[redacted]";

/** Image types shown from inline data (as a data URI the page builds). */
const INLINE_IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** Facts about the log a message is drawn with: the calls by id, for tool results. */
export interface LogIndex {
  conversationId: string;
  /** Call id -> the call and the sequence of the message that made it. */
  calls: Map<string, { call: ToolCall; sequence: bigint }>;
}

/** The message's element: `<article id="m-<seq>" data-sequence>`. */
export function messageElement(m: Message, index: LogIndex): HTMLElement {
  const role = enumLabel(RoleSchema, m.role);
  const redacted = m.content === REDACTED;
  const classes = ["msg", `role-${role}`, m.pinned && "pinned", m.excludeFromContext && "ui-only",
    m.error && "has-error", redacted && "redacted"].filter(Boolean).join(" ");
  return h("article", { class: classes, id: `m-${m.sequence}`, "data-sequence": m.sequence, "data-role": role },
    header(m, role, redacted, index),
    m.reasoning.length > 0 ? reasoning(m.reasoning) : null,
    m.role === Role.TOOL ? resultOf(m, index) : null,
    m.content ? h("div", { class: "content" }, m.content) : null,
    m.toolCalls.map(callElement),
    m.error ? h("div", { class: "llm-error" },
      h("div", { class: "llm-error-head" }, "LLM error ", h("code", null, m.error.code || "(no code)"), ": ", m.error.message),
      m.error.partialOutput ? [h("div", { class: "label" }, "partial output"), h("div", { class: "content partial" }, m.error.partialOutput)] : null) : null,
    m.attachments.length > 0 ? h("div", { class: "attachments" }, m.attachments.map(attachmentElement)) : null,
    metadata(m),
    m.native ? h("details", { class: "native" },
      h("summary", null, `native JSON (${enumLabel(FormatSchema, m.native.format)})`),
      h("pre", { class: "json" }, prettyJson(m.native.json))) : null,
  );
}

function header(m: Message, role: string, redacted: boolean, index: LogIndex): HTMLElement {
  return h("header", { class: "msg-head" },
    h("a", { class: "seq", href: messageHref(index.conversationId, m.sequence) }, `#${m.sequence}`),
    h("span", { class: `role role-${role}` }, role),
    m.name ? h("span", { class: "name" }, m.name) : null,
    m.pinned ? h("span", { class: "badge badge-pinned" }, "pinned") : null,
    m.excludeFromContext ? h("span", { class: "badge badge-ui" }, "UI-only: never in context") : null,
    redacted ? h("span", { class: "badge badge-redacted" }, "redacted") : null,
    m.error ? h("span", { class: "badge badge-error" }, "error") : null,
    m.contentPhase ? h("span", { class: "badge" }, `phase ${m.contentPhase}`) : null,
    h("span", { class: "tokens", title: "token counts at append (per-message overhead included)" }, tokens(m.tokens)),
    m.reasoningTokens ? h("span", { class: "tokens", title: "tokens of reasoning, signatures and item ids" }, `reasoning ${tokens(m.reasoningTokens)}`) : null,
    m.usage ? h("span", { class: "usage" }, usage(m.usage)) : null,
    h("time", { class: "time" }, time(m.createdAt)),
    occurredApart(m) ? h("time", { class: "time", title: "occurred_at: when it happened" }, `happened ${time(m.occurredAt)}`) : null,
    m.responseId ? h("span", { class: "ids" }, `response ${m.responseId}`) : null,
    m.contentItemId ? h("span", { class: "ids" }, `item ${m.contentItemId}`) : null,
  );
}

/** Whether the message happened at another time than it was appended (imported history). */
function occurredApart(m: { createdAt?: { seconds: bigint; nanos: number }; occurredAt?: { seconds: bigint; nanos: number } }): boolean {
  return m.occurredAt !== undefined
    && (m.occurredAt.seconds !== m.createdAt?.seconds || m.occurredAt.nanos !== m.createdAt?.nanos);
}

/** Token counts as `o200k 12 · cl100k 12 · approx 9`, leaving out a count the server has not
 * made yet (a tokenizer CTXD_TOKENIZERS leaves out, until a pack first needs it). */
export function tokens(t: TokenCounts | undefined): string {
  if (!t) return "tokens —";
  const counts: [string, number | undefined][] = [["o200k", t.o200kBase], ["cl100k", t.cl100kBase], ["approx", t.approx]];
  return counts
    .filter((c): c is [string, number] => c[1] !== undefined)
    .map(([name, n]) => `${name} ${num(n)}`)
    .join(" · ");
}

/** A usage block as `usage in 1,200 (cached 1,000) · out 80 (reasoning 20)`. */
export function usage(u: Usage): string {
  const cached = u.cachedInputTokens ? ` (cached ${num(u.cachedInputTokens)})` : "";
  const reasoning = u.reasoningTokens ? ` (reasoning ${num(u.reasoningTokens)})` : "";
  return `usage in ${num(u.inputTokens)}${cached} · out ${num(u.outputTokens)}${reasoning}`;
}

function resultOf(m: Message, index: LogIndex): HTMLElement {
  const origin = index.calls.get(m.toolCallId);
  return h("div", { class: "result-of" }, "result of ",
    h("span", { class: "tool-name" }, origin?.call.name ?? "an unknown call"), " ",
    h("code", null, m.toolCallId),
    origin ? [" (called at ", h("a", { href: messageHref(index.conversationId, origin.sequence) }, `#${origin.sequence}`), ")"] : null);
}

function callElement(call: ToolCall): HTMLElement {
  return h("div", { class: "call", "data-call-id": call.id },
    h("div", { class: "call-head" }, "call ", h("span", { class: "tool-name" }, call.name), " ", h("code", null, call.id),
      call.itemId ? h("span", { class: "ids" }, ` item ${call.itemId}`) : null,
      call.signature ? h("span", { class: "ids" }, ` signature ${call.signature.length} chars`) : null),
    h("pre", { class: "json args" }, argumentsText(call.arguments)));
}

function reasoning(blocks: Reasoning[]): HTMLElement {
  const providers = [...new Set(blocks.map((b) => enumLabel(ProviderSchema, b.provider)))].join(", ");
  return h("details", { class: "reasoning" },
    h("summary", null, `reasoning: ${blocks.length} block${blocks.length === 1 ? "" : "s"} (${providers})`),
    blocks.map((b) => h("div", { class: "reasoning-block" },
      h("div", { class: "label" }, `${b.type} · position ${b.position}`, b.id ? ` · id ${b.id}` : "",
        b.signature ? ` · signature ${b.signature.length} chars` : "", b.data ? ` · data ${b.data.length} chars` : ""),
      b.text ? h("div", { class: "content" }, b.text) : null,
      b.summary.map((s) => h("div", { class: "content reasoning-summary" }, s)))));
}

function attachmentElement(a: Attachment): HTMLElement {
  const caption = [a.mimeType, a.filename, a.width && a.height ? `${a.width}×${a.height}` : ""].filter(Boolean).join(" · ");
  let body: Child;
  if (a.source.case === "uri") {
    const uri = a.source.value;
    body = isDataImage(uri) ? h("img", { src: uri, alt: a.filename || a.mimeType, class: "thumb" })
      : h("div", { class: "uri-line" }, "uri ", externalLink(uri));
  } else if (a.source.case === "data") {
    const data = a.source.value;
    const type = a.mimeType.split(";")[0]!.trim().toLowerCase();
    body = INLINE_IMAGE_TYPES.has(type) ? h("img", { src: `data:${type};base64,${base64(data)}`, alt: a.filename || type, class: "thumb" })
      : h("div", { class: "uri-line" }, `inline data, ${num(data.length)} bytes`);
  } else {
    body = h("div", { class: "uri-line" }, "no content");
  }
  return h("figure", { class: "attachment" }, body, h("figcaption", null, caption));
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function metadata(m: Message): HTMLElement | null {
  const entries = Object.entries(m.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return null;
  return h("dl", { class: "metadata" }, entries.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}
