// Vercel AI SDK (`ai`) helpers: load a chat for the UI, persist what a turn added without
// rewriting history, and build the next prompt from a ctxd context pack.
//
// Storage: each UIMessage becomes the ctxd messages a model sees (user text and files; per step
// an assistant message with its text and tool calls, then one tool message per result), and
// the first of them carries the whole UIMessage as JSON in metadata `ai.ui_message` (all carry
// `ai.ui_message_id`). loadChat returns those UIMessages verbatim; BuildContext packs (and
// buildPrompt) see ordinary messages, tool calls and results.
import type { ModelMessage, UIMessage } from "ai";
import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { DEFAULT_BUDGET_TOKENS, type CtxdClient } from "./core.js";
import { isCode } from "./errors.js";
import { Format, Role, type Message, type MessageSchema, type Tokenizer } from "./gen/ctxd/v1/messages_pb.js";
import {
  type Budget,
  type BuildContextResponse,
  type ClearToolResultsSchema,
  type ContextMessage,
  type HistoryPolicy,
  type RecallSchema,
} from "./gen/ctxd/v1/context_pb.js";

type MessageInit = MessageInitShape<typeof MessageSchema>;

export { DEFAULT_BUDGET_TOKENS };
type Json = Record<string, any>;

export const UI_MESSAGE_KEY = "ai.ui_message";
export const UI_MESSAGE_ID_KEY = "ai.ui_message_id";

function textOf(parts: Json[]): string {
  return parts.filter((p) => p.type === "text" && typeof p.text === "string").map((p) => p.text).join("\n");
}
function outputText(output: unknown): string {
  return typeof output === "string" ? output : JSON.stringify(output ?? null);
}
function isToolPart(p: Json): boolean {
  return typeof p.type === "string" && (p.type.startsWith("tool-") || p.type === "dynamic-tool");
}
function toolNameOf(p: Json): string {
  return p.type === "dynamic-tool" ? String(p.toolName) : String(p.type).slice("tool-".length);
}
function attachmentsOf(parts: Json[]) {
  return parts
    .filter((p) => p.type === "file" && typeof p.url === "string")
    .map((p) => ({ mimeType: String(p.mediaType ?? "application/octet-stream"), filename: p.filename ?? "", source: { case: "uri" as const, value: p.url as string } }));
}

function newId(): string {
  return `msg-${globalThis.crypto.randomUUID()}`;
}

/** The ctxd messages one UIMessage is stored as (the first carries the UIMessage JSON). */
export function uiMessageToCtxd(message: UIMessage): MessageInit[] {
  const parts = (message.parts ?? []) as Json[];
  const tag = { [UI_MESSAGE_ID_KEY]: message.id };
  const out: MessageInit[] = [];
  if (message.role === "system") {
    out.push({ role: Role.SYSTEM, content: textOf(parts) || " " });
  } else if (message.role === "user") {
    const attachments = attachmentsOf(parts);
    const content = textOf(parts);
    out.push({ role: Role.USER, content: content || (attachments.length ? "" : " "), attachments });
  } else {
    // One assistant message per step (steps start at `step-start` parts), then its results.
    const steps: Json[][] = [[]];
    for (const p of parts) {
      if (p.type === "step-start" && steps[steps.length - 1]!.length > 0) steps.push([]);
      else if (p.type !== "step-start") steps[steps.length - 1]!.push(p);
    }
    for (const step of steps) {
      const tools = step.filter(isToolPart);
      const content = textOf(step);
      if (!content && tools.length === 0) continue;
      out.push({
        role: Role.ASSISTANT,
        content,
        toolCalls: tools.map((t) => ({ id: String(t.toolCallId), name: toolNameOf(t), arguments: JSON.stringify(t.input ?? {}) })),
      });
      for (const t of tools) {
        if (t.state === "output-available") out.push({ role: Role.TOOL, toolCallId: String(t.toolCallId), content: outputText(t.output) });
        else if (t.state === "output-error") out.push({ role: Role.TOOL, toolCallId: String(t.toolCallId), content: String(t.errorText ?? "error") });
        else if (t.state === "output-denied") out.push({ role: Role.TOOL, toolCallId: String(t.toolCallId), content: "[tool call denied]" });
      }
    }
    // Nothing a model would see (e.g. reasoning only): a UI-only record, so the message still loads.
    if (out.length === 0) out.push({ role: Role.ASSISTANT, content: "[no text]", excludeFromContext: true });
  }
  for (const m of out) m.metadata = { ...tag };
  out[0]!.metadata = { ...tag, [UI_MESSAGE_KEY]: JSON.stringify(message) };
  return out;
}

/** A UIMessage for a run of messages stored without one (appended by other clients). */
function synthesize(group: Message[], results: Map<string, Message>): UIMessage {
  const first = group[0]!;
  const id = `ctxd-${first.sequence}`;
  if (first.role === Role.USER || first.role === Role.SYSTEM) {
    const parts: Json[] = [{ type: "text", text: first.content }];
    for (const a of first.attachments) if (a.source.case === "uri") parts.push({ type: "file", mediaType: a.mimeType, url: a.source.value, ...(a.filename ? { filename: a.filename } : {}) });
    return { id, role: first.role === Role.USER ? "user" : "system", parts } as UIMessage;
  }
  const parts: Json[] = [];
  for (const m of group) {
    if (m.role !== Role.ASSISTANT) continue;
    parts.push({ type: "step-start" });
    if (m.content) parts.push({ type: "text", text: m.content, state: "done" });
    for (const c of m.toolCalls) {
      let input: unknown = c.arguments;
      try { input = JSON.parse(c.arguments); } catch { /* keep the text */ }
      const r = results.get(c.id);
      let output: unknown = r?.content;
      if (r) { try { output = JSON.parse(r.content); } catch { /* text output */ } }
      parts.push(r
        ? { type: "dynamic-tool", toolName: c.name, toolCallId: c.id, state: "output-available", input, output }
        : { type: "dynamic-tool", toolName: c.name, toolCallId: c.id, state: "input-available", input });
    }
  }
  return { id, role: "assistant", parts } as UIMessage;
}

async function scan(client: CtxdClient, conversationId: string): Promise<{ messages: Message[]; last: bigint }> {
  const messages: Message[] = [];
  let after = 0n;
  for (;;) {
    let page;
    try {
      page = await client.listMessages({ conversationId, afterSequence: after, pageSize: 1000 });
    } catch (e) {
      if (isCode(e, Code.NotFound)) return { messages: [], last: 0n };
      throw e;
    }
    messages.push(...page.messages);
    if (page.nextAfterSequence === 0n || page.messages.length === 0) break;
    after = page.nextAfterSequence;
  }
  return { messages, last: messages.length ? messages[messages.length - 1]!.sequence : 0n };
}

function toUIMessages(messages: Message[]): UIMessage[] {
  const byId = new Map<string, UIMessage>();
  const order: string[] = [];
  const results = new Map<string, Message>();
  for (const m of messages) if (m.role === Role.TOOL) results.set(m.toolCallId, m);
  let foreign: Message[] = [];
  const flush = () => {
    if (!foreign.length) return;
    const ui = synthesize(foreign, results);
    byId.set(ui.id, ui);
    order.push(ui.id);
    foreign = [];
  };
  for (const m of messages) {
    const json = m.metadata[UI_MESSAGE_KEY];
    if (json !== undefined) {
      flush();
      const ui = JSON.parse(json) as UIMessage;
      if (!byId.has(ui.id)) order.push(ui.id);
      byId.set(ui.id, ui); // a later version of the same message (a continuation) replaces it in place
      continue;
    }
    if (m.metadata[UI_MESSAGE_ID_KEY] !== undefined || m.excludeFromContext) continue;
    if (m.role === Role.TOOL) continue;
    if (m.role === Role.USER || m.role === Role.SYSTEM) { flush(); foreign = [m]; flush(); continue; }
    foreign.push(m); // consecutive assistant messages (a tool loop) make one UIMessage
  }
  flush();
  return order.map((id) => byId.get(id)!);
}

/** The chat's UIMessages, as stored by persistOnFinish (others' messages synthesized), oldest first. [] when the chat does not exist. */
export async function loadChat<UI extends UIMessage = UIMessage>(client: CtxdClient, conversationId: string): Promise<UI[]> {
  return toUIMessages((await scan(client, conversationId)).messages) as UI[];
}

/** ModelMessages (e.g. a streamText `response.messages`) as ctxd messages. */
export function modelMessagesToCtxd(messages: ModelMessage[]): MessageInit[] {
  const out: MessageInit[] = [];
  for (const m of messages) {
    if (m.role === "system") out.push({ role: Role.SYSTEM, content: m.content });
    else if (m.role === "user") {
      if (typeof m.content === "string") out.push({ role: Role.USER, content: m.content });
      else {
        const parts = m.content as Json[];
        const attachments = parts
          .filter((p) => p.type === "file" && (typeof p.data === "string" || p.data instanceof URL))
          .map((p) => ({ mimeType: String(p.mediaType), filename: p.filename ?? "", source: { case: "uri" as const, value: String(p.data) } }));
        out.push({ role: Role.USER, content: textOf(parts) || (attachments.length ? "" : " "), attachments });
      }
    } else if (m.role === "assistant") {
      const parts: Json[] = typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content as Json[]);
      const calls = parts.filter((p) => p.type === "tool-call" && !p.providerExecuted);
      const content = parts.filter((p) => p.type === "text").map((p) => p.text).join("");
      if (!content && !calls.length) continue;
      out.push({ role: Role.ASSISTANT, content, toolCalls: calls.map((c) => ({ id: c.toolCallId, name: c.toolName, arguments: JSON.stringify(c.input ?? {}) })) });
    } else if (m.role === "tool") {
      for (const p of m.content as Json[]) {
        if (p.type !== "tool-result") continue;
        const o = p.output as Json;
        const content =
          o?.type === "text" || o?.type === "error-text" ? String(o.value)
          : o?.type === "json" || o?.type === "error-json" ? JSON.stringify(o.value)
          : o?.type === "execution-denied" ? `[tool call denied${o.reason ? `: ${o.reason}` : ""}]`
          : o?.type === "content" ? (o.value as Json[]).filter((x) => x.type === "text").map((x) => x.text).join("\n")
          : JSON.stringify(o ?? null);
        out.push({ role: Role.TOOL, toolCallId: p.toolCallId, content });
      }
    }
  }
  return out;
}

export interface PersistOptions {
  /** Messages to store before the response's (streamText path: the turn's new user message). */
  prompt?: ModelMessage[] | UIMessage[];
  /** Called with the sequences stored (or nothing when there was nothing new). */
  onPersisted?: (result: { firstSequence: bigint; lastSequence: bigint } | undefined) => void;
}

/**
 * An `onFinish` callback that appends only what is new, never rewriting history.
 *
 * - `toUIMessageStreamResponse({ originalMessages, onFinish: persistOnFinish(client, id) })`:
 *   gets the updated UIMessage list; appends what follows the stored chat (the user's new message
 *   and the response; a continued message is stored again as a new version, which loadChat shows
 *   in place). Set `generateMessageId` there (as the AI SDK's persistence guide says): a message
 *   without an id is stored under a new `msg-<uuid>` id.
 * - `streamText` / `generateText({ onEnd | onFinish: persistOnFinish(client, id, { prompt: [userMessage] }) })`:
 *   appends `prompt` and the call's `responseMessages` (every step's assistant message and tool results).
 *
 * Appends carry `expected_last_sequence` (the log as read), so a concurrent writer makes the
 * append fail (ABORTED) and it is retried against the new log, never interleaved.
 */
export function persistOnFinish(client: CtxdClient, conversationId: string, options: PersistOptions = {}) {
  return async (event: Json): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      const { messages: stored, last } = await scan(client, conversationId);
      let toStore: MessageInit[];
      if (Array.isArray(event?.messages) && event.messages.every((m: Json) => typeof m?.id === "string" && Array.isArray(m?.parts))) {
        // The list is the stored chat plus what this request added: skip the stored prefix
        // (same position, same JSON), store the rest. A message with no id (the SDK leaves
        // response ids empty unless `generateMessageId` is set) gets one, so loadChat can tell
        // it apart.
        const storedUi = toUIMessages(stored).map((m) => JSON.stringify(m));
        const incoming = event.messages as UIMessage[];
        let i = 0;
        while (i < incoming.length && i < storedUi.length && JSON.stringify(incoming[i]) === storedUi[i]) i++;
        toStore = incoming.slice(i).map((m) => (m.id ? m : { ...m, id: newId() })).flatMap(uiMessageToCtxd);
      } else {
        const response: ModelMessage[] = event?.responseMessages ?? event?.response?.messages ?? [];
        const prompt = options.prompt ?? [];
        const promptMsgs = prompt.length && "parts" in (prompt[0] as Json)
          ? (prompt as UIMessage[]).flatMap(uiMessageToCtxd)
          : modelMessagesToCtxd(prompt as ModelMessage[]);
        toStore = [...promptMsgs, ...modelMessagesToCtxd(response)];
      }
      if (!toStore.length) { options.onPersisted?.(undefined); return; }
      try {
        const res = await client.appendMessage({ conversationId, messages: toStore, expectedLastSequence: last });
        options.onPersisted?.({ firstSequence: res.firstSequence, lastSequence: res.lastSequence });
        return;
      } catch (e) {
        if (isCode(e, Code.Aborted) && attempt < 3) continue;
        throw e;
      }
    }
  };
}

export interface BuildPromptOptions {
  /**
   * Token budget of the whole prompt: system prompt, summary, memory, history and `pending`
   * (default DEFAULT_BUDGET_TOKENS, 32,000). Tool schemas are not counted: leave room for them.
   */
  budgetTokens?: number;
  /** The other Budget fields (`reserveOutputTokens` is kept free inside the budget); `budget.maxTokens`, when set, wins over `budgetTokens`. */
  budget?: Partial<Pick<Budget, "maxTokens" | "reserveOutputTokens" | "maxMessages" | "maxTurns">>;
  /** The model's tokenizer (default: the server's, o200k unless configured; TOKENIZER_APPROX for models without a known one). */
  tokenizer?: Tokenizer;
  /** Where history begins when not all of it fits (default: cache-stable, so provider prompt caches hit). */
  historyPolicy?: HistoryPolicy;
  /** Recall (SearchMessages): true for the defaults (the newest user message as the query), or the Recall fields. Off unless set. */
  recall?: boolean | MessageInitShape<typeof RecallSchema>;
  /** Clear older tool results (context editing). Off unless set. */
  clearToolResults?: MessageInitShape<typeof ClearToolResultsSchema>;
  /** Called with the BuildContext response the prompt is made of (stats: tokens, what was left out). */
  onPack?: (pack: BuildContextResponse) => void;
  /** Dynamic system prompt, placed first (never stored). */
  system?: string;
  /** Messages not stored yet (the new user turn), placed last. */
  pending?: ModelMessage[];
  /** Tool outputs longer than this are cut to head + tail (0: never). */
  toolOutputMaxTokens?: number;
  /** Leave the rolling summary / working memory out. */
  omitSummary?: boolean;
  omitWorkingMemory?: boolean;
}

function contextToModelMessages(pack: ContextMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  const names = new Map<string, string>();
  for (const m of pack) {
    if (m.role === Role.SYSTEM) out.push({ role: "system", content: m.content });
    else if (m.role === Role.USER) {
      const files = m.attachments.filter((a) => a.source.case !== undefined);
      if (!files.length) out.push({ role: "user", content: m.content });
      else {
        const content: Json[] = [];
        if (m.content) content.push({ type: "text", text: m.content });
        for (const a of files) {
          const data = a.source.case === "uri" ? a.source.value : a.source.value;
          content.push({ type: "file", mediaType: a.mimeType, data, ...(a.filename ? { filename: a.filename } : {}) });
        }
        out.push({ role: "user", content } as ModelMessage);
      }
    } else if (m.role === Role.ASSISTANT) {
      const content: Json[] = [];
      const text = m.content || (m.error ? m.error.partialOutput : "");
      if (text) content.push({ type: "text", text });
      for (const c of m.toolCalls) {
        names.set(c.id, c.name);
        let input: unknown;
        try { input = JSON.parse(c.arguments || "{}"); } catch { input = c.arguments; }
        content.push({ type: "tool-call", toolCallId: c.id, toolName: c.name, input });
      }
      out.push({ role: "assistant", content } as ModelMessage);
    } else if (m.role === Role.TOOL) {
      let output: Json = { type: "text", value: m.content };
      try {
        const v = JSON.parse(m.content);
        if (v !== null && typeof v === "object") output = { type: "json", value: v };
      } catch { /* text output */ }
      const part = { type: "tool-result", toolCallId: m.toolCallId, toolName: names.get(m.toolCallId) ?? "", output };
      const prev = out[out.length - 1];
      if (prev?.role === "tool") (prev.content as Json[]).push(part);
      else out.push({ role: "tool", content: [part] } as ModelMessage);
    }
  }
  return out;
}

/**
 * The prompt for streamText/generateText from a BuildContext pack within `budgetTokens`
 * (default 32,000): the system prompt, summary and working memory as system messages first,
 * then the newest history that fits (cache-stable; tool calls as `tool-call` parts, results as
 * `tool` messages, a call and its results kept or left out together), then `pending`. Pass it
 * as `messages` with `allowSystemInMessages: true`, or split it with `splitSystem`.
 */
export async function buildPrompt(client: CtxdClient, conversationId: string, options: BuildPromptOptions = {}): Promise<ModelMessage[]> {
  const pending = options.pending?.length ? modelMessagesToCtxd(options.pending) : [];
  let pack;
  try {
    pack = await client.buildContext({
      conversationId,
      budget: { ...options.budget, maxTokens: options.budget?.maxTokens || (options.budgetTokens ?? DEFAULT_BUDGET_TOKENS) },
      systemPrompt: options.system ?? "",
      pendingMessages: pending,
      format: Format.OPENAI_CHAT,
      ...(options.tokenizer === undefined ? {} : { tokenizer: options.tokenizer }),
      toolOutputMaxTokens: options.toolOutputMaxTokens ?? 0,
      omitSummary: options.omitSummary ?? false,
      omitWorkingMemory: options.omitWorkingMemory ?? false,
      ...(options.historyPolicy === undefined ? {} : { historyPolicy: options.historyPolicy }),
      ...(options.recall ? { recall: options.recall === true ? {} : options.recall } : {}),
      ...(options.clearToolResults ? { clearToolResults: options.clearToolResults } : {}),
    });
  } catch (e) {
    // A chat with no message yet: the prompt is the system prompt and the pending messages.
    if (!isCode(e, Code.NotFound)) throw e;
    return [...(options.system ? [{ role: "system", content: options.system } as ModelMessage] : []), ...(options.pending ?? [])];
  }
  options.onPack?.(pack);
  return contextToModelMessages(pack.messages);
}

/** Splits a prompt into `{ instructions, messages }` (leading system messages as instructions). */
export function splitSystem(prompt: ModelMessage[]): { instructions: string | undefined; messages: ModelMessage[] } {
  let i = 0;
  const system: string[] = [];
  while (i < prompt.length && prompt[i]!.role === "system") system.push(prompt[i++]!.content as string);
  return { instructions: system.length ? system.join("\n\n") : undefined, messages: prompt.slice(i) };
}
