// Provider-native helpers: append what a provider SDK returned (or would send) as its own JSON,
// and hand a context pack to the provider SDK call.
import type { CtxdClient } from "./core.js";
import { Format } from "./gen/ctxd/v1/messages_pb.js";
import type { AppendMessageResponse } from "./gen/ctxd/v1/context_service_pb.js";

/** A provider format: the enum, or its short name. */
export type FormatLike = Format | "openai-chat" | "anthropic" | "openai-responses" | "gemini";

const FORMAT_NAMES: Record<string, Format> = {
  "openai-chat": Format.OPENAI_CHAT,
  chat: Format.OPENAI_CHAT,
  anthropic: Format.ANTHROPIC_MESSAGES,
  "openai-responses": Format.OPENAI_RESPONSES,
  responses: Format.OPENAI_RESPONSES,
  gemini: Format.GEMINI,
};

/** Resolves a short format name ("openai-chat", "anthropic", "openai-responses", "gemini") to the enum. */
export function toFormat(format: FormatLike): Format {
  if (typeof format === "number") return format;
  const f = FORMAT_NAMES[format];
  if (f === undefined) throw new TypeError(`unknown format ${JSON.stringify(format)}`);
  return f;
}

export interface AppendOptions {
  /** A retry with the same key stores nothing again (scoped to the conversation). */
  idempotencyKey?: string;
  /** Append only if the conversation's last sequence is this (0: empty or new); else ABORTED. */
  expectedLastSequence?: bigint | number;
  /** Per-call deadline in milliseconds. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Appends a provider object losslessly: a response object (Chat Completions `ChatCompletion`,
 * Anthropic `Message`, Responses `Response`, Gemini `GenerateContentResponse`) or an array of
 * request-side entries (chat `messages`, Anthropic `messages`, Responses `input` items, Gemini
 * `contents`). `obj` may already be JSON text.
 */
export async function appendNative(
  client: CtxdClient,
  conversationId: string,
  obj: unknown,
  format: FormatLike,
  options: AppendOptions = {},
): Promise<AppendMessageResponse> {
  const json = typeof obj === "string" ? obj : JSON.stringify(obj);
  if (json === undefined) throw new TypeError("appendNative: the object is not JSON-serialisable");
  return client.appendMessage(
    {
      conversationId,
      native: { format: toFormat(format), json },
      idempotencyKey: options.idempotencyKey ?? "",
      expectedLastSequence: options.expectedLastSequence === undefined ? undefined : BigInt(options.expectedLastSequence),
    },
    { timeoutMs: options.timeoutMs, signal: options.signal },
  );
}

/** Anything carrying a rendered pack: a BuildContextResponse, a ListMessagesResponse, or the JSON text itself. */
export type PackLike = { rendered: string } | string;

function renderedOf(pack: PackLike, what: string): unknown {
  const text = typeof pack === "string" ? pack : pack?.rendered;
  if (typeof text !== "string" || text === "") {
    throw new TypeError(`${what}: the pack has no rendered JSON (was a format requested?)`);
  }
  return JSON.parse(text);
}

function expectArray(value: unknown, what: string, format: string): unknown[] {
  if (!Array.isArray(value)) {
    throw new TypeError(`${what}: the pack is not ${format} (rendered is not an array); build it with format ${format}`);
  }
  return value;
}

/** `{ messages }` for `openai.chat.completions.create` (pack built with FORMAT_OPENAI_CHAT). */
export function openaiChatParams<M = Record<string, unknown>>(pack: PackLike): { messages: M[] } {
  return { messages: expectArray(renderedOf(pack, "openaiChatParams"), "openaiChatParams", "FORMAT_OPENAI_CHAT") as M[] };
}

/** `{ input }` for `openai.responses.create` (pack built with FORMAT_OPENAI_RESPONSES). */
export function openaiResponsesParams<I = Record<string, unknown>>(pack: PackLike): { input: I[] } {
  return { input: expectArray(renderedOf(pack, "openaiResponsesParams"), "openaiResponsesParams", "FORMAT_OPENAI_RESPONSES") as I[] };
}

/** `{ system?, messages }` for `anthropic.messages.create` (pack built with FORMAT_ANTHROPIC_MESSAGES). */
export function anthropicParams<M = Record<string, unknown>, S = unknown>(pack: PackLike): { system?: S; messages: M[] } {
  const r = renderedOf(pack, "anthropicParams") as { system?: S; messages?: M[] };
  if (!r || typeof r !== "object" || Array.isArray(r) || !Array.isArray(r.messages)) {
    throw new TypeError("anthropicParams: the pack is not FORMAT_ANTHROPIC_MESSAGES ({system?, messages})");
  }
  return r.system === undefined ? { messages: r.messages } : { system: r.system, messages: r.messages };
}

/**
 * `{ contents, config: { systemInstruction } }` for `@google/genai` `ai.models.generateContent`
 * (pack built with FORMAT_GEMINI). `config` is left out when the pack has no system instruction.
 */
export function geminiParams<C = Record<string, unknown>, S = unknown>(pack: PackLike): {
  contents: C[];
  config?: { systemInstruction: S };
} {
  const r = renderedOf(pack, "geminiParams") as { systemInstruction?: S; contents?: C[] };
  if (!r || typeof r !== "object" || Array.isArray(r) || !Array.isArray(r.contents)) {
    throw new TypeError("geminiParams: the pack is not FORMAT_GEMINI ({systemInstruction?, contents})");
  }
  return r.systemInstruction === undefined
    ? { contents: r.contents }
    : { contents: r.contents, config: { systemInstruction: r.systemInstruction } };
}
