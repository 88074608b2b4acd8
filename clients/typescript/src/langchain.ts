// LangChain.js (`langchain` 1.5 `createAgent`, @langchain/core 1.4, @langchain/langgraph 1.7): an
// agent middleware that hands the model a ctxd pack instead of the whole history, and keeps the
// log. The same design as the Python `ctxd.langchain` (clients/python):
//
// - beforeModel appends to the ctxd log what the agent's state holds that the log does not yet
//   (the user's message, the previous reply with its tool calls and usage, the tool results),
//   with an idempotency key made of the messages' ids; the conversation is `conversationId`, or
//   `threadIdPrefix` + the run's `thread_id` (a resumed thread continues the same conversation).
// - wrapModelCall replaces the messages the model receives with BuildContext's pack (budget,
//   tokenizer, summary and memory, recall, clearing, the cache-stable policy, the provider rules
//   of `format`); the agent's system prompt is counted in the budget and stays the system
//   message, followed by the pack's summary, memory and truncation notice.
// - afterAgent appends the final reply.
// The graph's state is not rewritten: checkpointers, interrupts and human-in-the-loop work as
// without the middleware. Messages map both ways losslessly (toCtxd / fromCtxd): what ctxd has no
// field for goes in the message's metadata under `langchain.*` keys, as in Python.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createMiddleware } from "langchain";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { z } from "zod";
import { DEFAULT_BUDGET_TOKENS, type CtxdClient } from "./core.js";
import type { BuildContextResponse, ContextMessage } from "./gen/ctxd/v1/context_pb.js";
import {
  Format,
  Role,
  type AttachmentSchema,
  type Message,
  type MessageSchema,
  type Tokenizer,
} from "./gen/ctxd/v1/messages_pb.js";

type Json = Record<string, any>;
type MessageInit = MessageInitShape<typeof MessageSchema>;
type AttachmentInit = MessageInitShape<typeof AttachmentSchema>;

/** Base64 to bytes and back, without Node's Buffer (the module runs wherever fetch does). */
const fromBase64 = (text: string): Uint8Array => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const toBase64 = (bytes: Uint8Array): string => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));

const META = "langchain.";

function json(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((b) => (typeof b === "string" ? b : b && typeof b === "object" && (b as Json).type === "text" ? String((b as Json).text ?? "") : ""))
    .join("");
}

/** Images of a content list as ctxd attachments (URLs as `uri`, base64 and data URIs as `data`). */
function attachmentsOf(content: unknown): AttachmentInit[] {
  if (!Array.isArray(content)) return [];
  const out: AttachmentInit[] = [];
  for (const b of content) {
    if (!b || typeof b !== "object") continue;
    const block = b as Json;
    const mime = String(block.mime_type ?? block.mimeType ?? "image/png");
    let url: unknown;
    if (block.type === "image_url") url = typeof block.image_url === "string" ? block.image_url : block.image_url?.url;
    else if (block.type === "image") {
      if (typeof block.data === "string" || typeof block.base64 === "string") {
        out.push({ mimeType: mime, source: { case: "data", value: fromBase64(String(block.data ?? block.base64)) } });
        continue;
      }
      url = block.url;
    }
    if (typeof url !== "string" || !url) continue;
    const m = /^data:([^;,]*);base64,(.*)$/s.exec(url);
    if (m) out.push({ mimeType: m[1] || mime, source: { case: "data", value: fromBase64(m[2] ?? "") } });
    else out.push({ mimeType: mime, source: { case: "uri", value: url } });
  }
  return out;
}

/** `message` as a ctxd message (the shape `client.appendMessage` takes). */
export function toCtxd(message: BaseMessage): MessageInit {
  const meta: Record<string, string> = {};
  const out: MessageInit = { content: textOf(message.content) };
  if (message.id) meta[META + "id"] = String(message.id);
  if (message.name) out.name = message.name;
  if (typeof message.content !== "string") {
    meta[META + "content"] = json(message.content) ?? "[]";
    out.attachments = attachmentsOf(message.content);
  }
  if (message.additional_kwargs && Object.keys(message.additional_kwargs).length) {
    const v = json(message.additional_kwargs);
    if (v !== undefined) meta[META + "additional_kwargs"] = v;
  }
  if (message.response_metadata && Object.keys(message.response_metadata).length) {
    const v = json(message.response_metadata);
    if (v !== undefined) meta[META + "response_metadata"] = v;
  }
  if (AIMessage.isInstance(message)) {
    out.role = Role.ASSISTANT;
    out.toolCalls = (message.tool_calls ?? []).map((c) => ({ id: c.id ?? "", name: c.name, arguments: JSON.stringify(c.args ?? {}) }));
    if (message.invalid_tool_calls?.length) meta[META + "invalid_tool_calls"] = json(message.invalid_tool_calls) ?? "[]";
    const u = message.usage_metadata;
    if (u) {
      out.usage = {
        inputTokens: BigInt(u.input_tokens ?? 0),
        outputTokens: BigInt(u.output_tokens ?? 0),
        cachedInputTokens: BigInt(u.input_token_details?.cache_read ?? 0),
        reasoningTokens: BigInt(u.output_token_details?.reasoning ?? 0),
      };
      meta[META + "usage_metadata"] = json(u) ?? "{}";
    }
    if (!out.content?.trim() && !out.toolCalls.length) {
      // An empty reply is still a reply: ctxd needs content, calls or an error.
      meta[META + "text"] = json(out.content ?? "") ?? '""';
      out.content = "(empty reply)";
    }
  } else if (ToolMessage.isInstance(message)) {
    out.role = Role.TOOL;
    out.toolCallId = message.tool_call_id;
    if (message.status && message.status !== "success") meta[META + "status"] = message.status;
    if (message.artifact !== undefined) {
      const v = json(message.artifact);
      if (v !== undefined) meta[META + "artifact"] = v;
    }
  } else if (SystemMessage.isInstance(message)) {
    out.role = Role.SYSTEM;
  } else {
    out.role = Role.USER;
  }
  if (Object.keys(meta).length) out.metadata = meta;
  return out;
}

function loads(meta: Record<string, string>, key: string): any {
  const raw = meta[META + key];
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** A ctxd message (a stored Message or a pack's ContextMessage) as a LangChain message: the inverse of toCtxd. */
export function fromCtxd(m: Message | ContextMessage): BaseMessage {
  const meta: Record<string, string> = "metadata" in m ? { ...m.metadata } : {};
  let content: any = m.content;
  if (META + "content" in meta) content = loads(meta, "content");
  else if (META + "text" in meta) content = loads(meta, "text");
  else if (m.attachments.length) {
    content = m.content ? [{ type: "text", text: m.content }] : [];
    for (const a of m.attachments) {
      if (a.source.case === "uri") content.push({ type: "image", url: a.source.value });
      else if (a.source.case === "data") content.push({ type: "image", data: toBase64(a.source.value), mimeType: a.mimeType });
    }
  }
  const fields: Json = { content };
  if (meta[META + "id"]) fields.id = meta[META + "id"];
  if (m.name) fields.name = m.name;
  const extra = loads(meta, "additional_kwargs");
  if (extra) fields.additional_kwargs = extra;
  const response = loads(meta, "response_metadata");
  if (response) fields.response_metadata = response;
  switch (m.role) {
    case Role.ASSISTANT: {
      const tool_calls = m.toolCalls.map((c) => {
        let args: Json;
        try {
          args = c.arguments ? JSON.parse(c.arguments) : {};
        } catch {
          args = { raw: c.arguments };
        }
        return { name: c.name, args, id: c.id, type: "tool_call" as const };
      });
      let usage = loads(meta, "usage_metadata");
      if (usage === undefined && "usage" in m && m.usage) {
        const u = m.usage;
        usage = { input_tokens: Number(u.inputTokens), output_tokens: Number(u.outputTokens), total_tokens: Number(u.inputTokens + u.outputTokens) };
      }
      const invalid = loads(meta, "invalid_tool_calls");
      return new AIMessage({ ...fields, tool_calls, ...(invalid ? { invalid_tool_calls: invalid } : {}), ...(usage ? { usage_metadata: usage } : {}) });
    }
    case Role.TOOL: {
      const artifact = loads(meta, "artifact");
      return new ToolMessage({
        ...fields,
        content: fields.content,
        tool_call_id: m.toolCallId,
        ...(meta[META + "status"] ? { status: meta[META + "status"] as "error" } : {}),
        ...(artifact !== undefined ? { artifact } : {}),
      });
    }
    case Role.SYSTEM:
      return new SystemMessage(fields as any);
    default:
      return new HumanMessage(fields as any);
  }
}

/** A pack as LangChain messages: the system parts that open it as texts, then the rest in order. */
export function packMessages(pack: BuildContextResponse): { system: string[]; messages: BaseMessage[] } {
  const system: string[] = [];
  const messages: BaseMessage[] = [];
  for (const m of pack.messages) {
    if (m.role === Role.SYSTEM && messages.length === 0) system.push(m.content);
    else messages.push(fromCtxd(m));
  }
  return { system, messages };
}

export interface CtxdContextMiddlewareOptions {
  /** The conversation; default: `threadIdPrefix` + the run's `thread_id`. */
  conversationId?: string;
  threadIdPrefix?: string;
  /** The pack's budget in tokens (default 32,000), less `reserveOutputTokens`. */
  budgetTokens?: number;
  reserveOutputTokens?: number;
  /** The model's provider: its rules shape the pack (default Format.OPENAI_CHAT). */
  format?: Format;
  tokenizer?: Tokenizer;
  /** BuildContext's `recall`, `clearToolResults` and `historyPolicy`, as the request takes them. */
  recall?: Json;
  clearToolResults?: Json;
  historyPolicy?: number;
  omitWorkingMemory?: boolean;
  /** Called with every pack (stats, what was left out). */
  onPack?: (pack: BuildContextResponse) => void;
}

function unsynced(state: { messages: BaseMessage[]; ctxdSyncedId?: string; ctxdSynced?: number }): BaseMessage[] {
  const messages = state.messages ?? [];
  if (state.ctxdSyncedId) {
    for (let i = messages.length - 1; i >= 0; i--) if (messages[i]?.id === state.ctxdSyncedId) return messages.slice(i + 1);
  }
  return messages.slice(state.ctxdSynced ?? 0);
}

async function batchKey(conversation: string, batch: BaseMessage[]): Promise<string> {
  const ids = batch.map((m) => String(m.id ?? "")).join("\0");
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${conversation}\0${ids}`));
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  return "langchain-" + hex.slice(0, 32);
}

/** The agent middleware (module comment). */
export function ctxdContextMiddleware(client: CtxdClient, options: CtxdContextMiddlewareOptions = {}) {
  const conversationOf = (runtime: { configurable?: { thread_id?: string } } | undefined): string => {
    if (options.conversationId) return options.conversationId;
    const thread = runtime?.configurable?.thread_id;
    if (!thread) {
      throw new Error("ctxdContextMiddleware needs conversationId, or a thread_id in the run's config ({ configurable: { thread_id } }, with a checkpointer)");
    }
    return `${options.threadIdPrefix ?? ""}${thread}`;
  };
  const sync = async (state: any, runtime: any) => {
    const batch = unsynced(state);
    if (!batch.length) return undefined;
    const conversationId = conversationOf(runtime);
    for (let start = 0; start < batch.length; start += 100) {
      const chunk = batch.slice(start, start + 100);
      await client.appendMessage({ conversationId, messages: chunk.map(toCtxd), idempotencyKey: await batchKey(conversationId, chunk) });
    }
    return { ctxdSyncedId: String(batch[batch.length - 1]?.id ?? ""), ctxdSynced: state.messages.length };
  };
  return createMiddleware({
    name: "CtxdContextMiddleware",
    stateSchema: z.object({ ctxdSyncedId: z.string().default(""), ctxdSynced: z.number().default(0) }),
    beforeModel: sync,
    afterAgent: sync,
    wrapModelCall: async (request, handler) => {
      const systemPrompt = request.systemMessage ? textOf(request.systemMessage.content) : "";
      const pack = await client.buildContext({
        conversationId: conversationOf(request.runtime),
        budget: { maxTokens: options.budgetTokens ?? DEFAULT_BUDGET_TOKENS, reserveOutputTokens: options.reserveOutputTokens ?? 0 },
        format: options.format ?? Format.OPENAI_CHAT,
        ...(options.tokenizer !== undefined ? { tokenizer: options.tokenizer } : {}),
        systemPrompt,
        ...(options.recall ? { recall: options.recall } : {}),
        ...(options.clearToolResults ? { clearToolResults: options.clearToolResults } : {}),
        ...(options.historyPolicy !== undefined ? { historyPolicy: options.historyPolicy } : {}),
        omitWorkingMemory: options.omitWorkingMemory ?? false,
      });
      options.onPack?.(pack);
      const { system, messages } = packMessages(pack);
      return handler({ ...request, messages, systemMessage: new SystemMessage(system.join("\n\n")) });
    },
  });
}

/** Whether `error` is ctxd's NOT_FOUND (an absent conversation). */
export function isNotFound(error: unknown): boolean {
  return error instanceof ConnectError && error.code === Code.NotFound;
}
