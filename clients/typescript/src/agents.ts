// CtxdSession: an OpenAI Agents SDK (`@openai/agents`) Session kept in ctxd.
//
// Items go in natively (AppendMessage `native`, FORMAT_OPENAI_RESPONSES) as Responses API input
// items, and come back from ListMessages(format=FORMAT_OPENAI_RESPONSES). The JS SDK's
// AgentInputItem is not the Responses wire shape (camelCase `callId`, `function_call_result`
// with a `name` for `function_call_output`, reasoning `content` for `summary`, `providerData`
// for the wire's extra fields), so items are converted both ways the way the SDK's own
// converters do (@openai/agents-openai openaiResponsesConverter: getInputItems /
// convertToOutputItem, which the package does not export), which round-trips the items the
// runner stores; see README "What round-trips".
import type { AgentInputItem, OpenAIResponsesCompactionArgs, OpenAIResponsesCompactionResult, Session } from "@openai/agents-core";
import { Code } from "@connectrpc/connect";
import type { CtxdClient } from "./core.js";
import { isCode } from "./errors.js";
import { Format } from "./gen/ctxd/v1/messages_pb.js";
import { ContextSource, SummarizeMode, type PreparedRequest } from "./gen/ctxd/v1/context_pb.js";

type Json = Record<string, any>;

// ---------------------------------------------------------------------------------------------
// SDK item <-> Responses wire item
// ---------------------------------------------------------------------------------------------

const FAKE_ID = "FAKE_ID";
const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const snake = (k: string) => k.replace(/([A-Z])/g, "_$1").toLowerCase();
function snakeKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.slice();
  if (!isRecord(v)) return v;
  const out: Json = {};
  for (const [k, e] of Object.entries(v)) out[snake(k)] = snakeKeys(e);
  return out;
}
/** providerData, snake-cased, minus the keys the item itself sets (as the SDK does). */
function extra(providerData: unknown, reserved: string[]): Json {
  const pd = snakeKeys(providerData);
  if (!isRecord(pd)) return {};
  const skip = new Set(reserved.map(snake));
  const out: Json = {};
  for (const [k, v] of Object.entries(pd)) if (!skip.has(k)) out[k] = v;
  return out;
}
function withProviderData<T extends Json>(item: T, providerData: Json): T {
  if (Object.keys(providerData).length > 0) (item as Json).providerData = providerData;
  return item;
}
function dropUndefined<T extends Json>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

function inputContentToWire(c: Json): Json {
  const cache = c.promptCacheBreakpoint ? { prompt_cache_breakpoint: c.promptCacheBreakpoint } : {};
  switch (c.type) {
    case "input_text":
      return { type: "input_text", text: c.text, ...cache, ...extra(c.providerData, ["type", "text"]) };
    case "input_image": {
      const e: Json = { type: "input_image", detail: c.detail ?? "auto" };
      if (typeof c.image === "string") e.image_url = c.image;
      else if (isRecord(c.image) && "id" in c.image) e.file_id = c.image.id;
      return { ...e, ...cache, ...extra(c.providerData, ["type", "detail", "image_url", "file_id"]) };
    }
    case "input_file": {
      const e: Json = { type: "input_file" };
      if (typeof c.file === "string") e[c.file.startsWith("data:") ? "file_data" : "file_url"] = c.file;
      else if (isRecord(c.file) && "id" in c.file) e.file_id = c.file.id;
      else if (isRecord(c.file) && "url" in c.file) e.file_url = c.file.url;
      if (c.filename) e.filename = c.filename;
      return { ...e, ...cache, ...extra(c.providerData, ["type", "file_data", "file_url", "file_id", "filename"]) };
    }
    default:
      return { ...(snakeKeys(c) as Json) };
  }
}

function toolOutputToWire(output: unknown): unknown {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) return output.map((o) => (isRecord(o) && o.type === "text" ? { type: "input_text", text: o.text } : inputContentToWire(o as Json)));
  if (isRecord(output) && output.type === "text" && typeof output.text === "string") return output.text;
  if (isRecord(output) && output.type === "image") {
    const img = output.image;
    if (typeof img === "string") return [{ type: "input_image", image_url: img, detail: output.detail ?? "auto" }];
    if (isRecord(img) && typeof img.url === "string") return [{ type: "input_image", image_url: img.url, detail: output.detail ?? "auto" }];
    if (isRecord(img) && typeof img.fileId === "string") return [{ type: "input_image", file_id: img.fileId, detail: output.detail ?? "auto" }];
    if (isRecord(img) && typeof img.data === "string") return [{ type: "input_image", image_url: `data:${img.mediaType ?? "image/png"};base64,${img.data}`, detail: output.detail ?? "auto" }];
  }
  return typeof output === "undefined" ? "" : JSON.stringify(output);
}

/** One SDK AgentInputItem as the Responses API input item the SDK would send for it. */
export function toResponsesItem(item: AgentInputItem): Json {
  const it = item as Json;
  const pd = it.providerData;
  if (it.type === "message" || (it.type === undefined && typeof it.role === "string")) {
    if (it.role === "system" || it.role === "developer") {
      return dropUndefined({ type: "message", id: it.id, role: it.role, content: it.content, ...extra(pd, ["id", "role", "content", "phase"]) });
    }
    if (it.role === "user") {
      const content = typeof it.content === "string" ? it.content : (it.content as Json[]).map(inputContentToWire);
      return dropUndefined({ type: "message", id: it.id, role: "user", content, ...extra(pd, ["id", "role", "content", "phase"]) });
    }
    if (it.role === "assistant") {
      const phase = it.phase ?? (isRecord(pd) ? pd.phase : undefined);
      const content = (it.content as Json[]).map((c) => {
        if (c.type === "output_text") {
          const annotations = isRecord(c.providerData) && Array.isArray(c.providerData.annotations) ? c.providerData.annotations : [];
          return { type: "output_text", text: c.text, annotations, ...extra(c.providerData, ["type", "text", "annotations"]) };
        }
        if (c.type === "refusal") return { type: "refusal", refusal: c.refusal, ...extra(c.providerData, ["type", "refusal"]) };
        return snakeKeys(c);
      });
      const msg = dropUndefined({
        type: "message",
        id: it.id === FAKE_ID ? undefined : it.id,
        role: "assistant",
        content,
        status: it.status,
        ...(phase === undefined ? {} : { phase }),
        ...extra(pd, ["type", "id", "role", "content", "status", "phase"]),
      });
      return msg;
    }
  }
  switch (it.type) {
    case "function_call":
      return dropUndefined({
        type: "function_call",
        id: it.id === FAKE_ID ? undefined : it.id,
        call_id: it.callId,
        name: it.name,
        arguments: it.arguments,
        status: it.status,
        ...(it.caller ? { caller: it.caller.type === "program" ? { type: "program", caller_id: it.caller.callerId } : { type: "direct" } } : {}),
        ...(typeof it.namespace === "string" ? { namespace: it.namespace } : {}),
        ...extra(pd, ["id", "type", "name", "call_id", "arguments", "status", "namespace", "caller"]),
      });
    case "function_call_result":
      return dropUndefined({
        type: "function_call_output",
        id: it.id,
        call_id: it.callId,
        output: toolOutputToWire(it.output),
        status: it.status,
        ...extra(pd, ["type", "id", "call_id", "output", "status", "namespace", "caller", "name"]),
      });
    case "reasoning": {
      const encrypted = isRecord(pd) ? (pd.encryptedContent ?? pd.encrypted_content) : undefined;
      return dropUndefined({
        id: it.id,
        type: "reasoning",
        summary: ((it.content ?? []) as Json[]).map((c) => ({ type: "summary_text", text: c.text, ...extra(c.providerData, ["type", "text"]) })),
        ...(typeof encrypted === "string" ? { encrypted_content: encrypted } : {}),
        ...(Array.isArray(it.rawContent) && it.rawContent.length ? { content: it.rawContent.map((c: Json) => ({ type: "reasoning_text", text: c.text })) } : {}),
        ...extra(pd, ["id", "type", "summary", "encrypted_content", "content"]),
      });
    }
    case "compaction":
      return dropUndefined({ type: "compaction", id: it.id ?? undefined, encrypted_content: it.encrypted_content ?? it.encryptedContent });
    case "hosted_tool_call": {
      const p = (snakeKeys(pd) ?? {}) as Json;
      const type = typeof p.type === "string" ? p.type : it.name;
      const out: Json = { ...p, type, id: it.id };
      if (it.status !== undefined) out.status = it.status;
      if (type === "image_generation_call" && it.output !== undefined) out.result = it.output;
      return dropUndefined(out);
    }
    case "unknown":
      return dropUndefined({ ...(snakeKeys(pd) as Json), id: it.id });
    default: {
      // computer / shell / apply_patch / tool_search / program items: the wire item is the SDK
      // item snake-cased with its providerData spread in (the SDK's own rule for extra fields).
      const { providerData, ...rest } = it;
      const out = snakeKeys(rest) as Json;
      if (out.type === "computer_call_result") out.type = "computer_call_output";
      return dropUndefined({ ...out, ...extra(providerData, Object.keys(out)) });
    }
  }
}

function inputContentFromWire(c: Json): Json {
  const { type } = c;
  if (type === "input_text") {
    const { type: _t, text, prompt_cache_breakpoint, ...rest } = c;
    return withProviderData({ type, text, ...(prompt_cache_breakpoint ? { promptCacheBreakpoint: prompt_cache_breakpoint } : {}) }, rest);
  }
  if (type === "input_image") {
    const { type: _t, image_url, file_id, detail, prompt_cache_breakpoint, ...rest } = c;
    const out: Json = { type };
    if (typeof image_url === "string") out.image = image_url;
    else if (typeof file_id === "string") out.image = { id: file_id };
    if (detail !== undefined) out.detail = detail;
    if (prompt_cache_breakpoint) out.promptCacheBreakpoint = prompt_cache_breakpoint;
    return withProviderData(out, rest);
  }
  if (type === "input_file") {
    const { type: _t, file_data, file_url, file_id, filename, prompt_cache_breakpoint, ...rest } = c;
    const out: Json = { type };
    if (typeof file_data === "string") out.file = file_data;
    else if (typeof file_url === "string") out.file = file_url;
    else if (typeof file_id === "string") out.file = { id: file_id };
    if (filename) out.filename = filename;
    if (prompt_cache_breakpoint) out.promptCacheBreakpoint = prompt_cache_breakpoint;
    return withProviderData(out, rest);
  }
  return c;
}

/** A Responses API item (as ListMessages/BuildContext render it) as the SDK's AgentInputItem. */
export function fromResponsesItem(wire: Json, callNames: Map<string, string> = new Map()): AgentInputItem {
  const w = { ...wire };
  if (w.type === "message" || (w.type === undefined && typeof w.role === "string")) {
    if (w.role === "assistant") {
      const { id, type: _t, role, content, status, phase, ...rest } = w;
      const parts = (Array.isArray(content) ? content : [{ type: "output_text", text: String(content ?? "") }]).map((c: Json) => {
        if (c.type === "output_text") {
          const { type, text, ...pd } = c;
          if (Array.isArray(pd.annotations) && pd.annotations.length === 0) delete pd.annotations;
          return withProviderData({ type, text }, pd);
        }
        if (c.type === "refusal") {
          const { type, refusal, ...pd } = c;
          return withProviderData({ type, refusal }, pd);
        }
        return c;
      });
      const out: Json = dropUndefined({ id, type: "message", role, content: parts, status: status ?? "completed" });
      if (phase === "commentary" || phase === "final_answer") {
        out.phase = phase;
        rest.phase = phase;
      }
      return withProviderData(out, rest) as AgentInputItem;
    }
    const { id, type, role, content, ...rest } = w;
    let c = content;
    if (role === "user" && Array.isArray(content)) c = content.map(inputContentFromWire);
    if ((role === "system" || role === "developer") && Array.isArray(content)) {
      c = content.map((p: Json) => (typeof p?.text === "string" ? p.text : "")).join("");
    }
    return withProviderData(dropUndefined({ id, type: type ?? undefined, role, content: c }), rest) as AgentInputItem;
  }
  switch (w.type) {
    case "function_call": {
      const { call_id, name, namespace, caller, status, arguments: args, id, type, ...pd } = w;
      if (typeof call_id === "string" && typeof name === "string") callNames.set(call_id, name);
      return withProviderData(
        dropUndefined({
          type,
          id,
          callId: call_id,
          name,
          ...(typeof namespace === "string" ? { namespace } : {}),
          status,
          arguments: args,
          ...(isRecord(caller) ? { caller: caller.type === "program" ? { type: "program", callerId: caller.caller_id } : { type: "direct" } } : {}),
        }),
        pd,
      ) as AgentInputItem;
    }
    case "function_call_output": {
      const { call_id, status, output, name, function_name, namespace, caller, id, type: _t, ...pd } = w;
      let out: unknown = output;
      if (Array.isArray(output)) out = output.map((o: Json) => inputContentFromWire(o));
      return withProviderData(
        dropUndefined({
          type: "function_call_result",
          id,
          callId: call_id,
          name: name ?? function_name ?? callNames.get(call_id) ?? call_id,
          ...(typeof namespace === "string" ? { namespace } : {}),
          status: status ?? "completed",
          output: typeof out === "string" ? { type: "text", text: out } : out,
        }),
        pd,
      ) as AgentInputItem;
    }
    case "reasoning": {
      const { summary, content, encrypted_content, id, type, ...rest } = w;
      const pd: Json = { ...rest };
      if (typeof encrypted_content === "string") pd.encryptedContent = encrypted_content;
      return withProviderData(
        dropUndefined({
          type,
          id,
          content: ((summary ?? []) as Json[]).map(({ text, type: _ty, ...r }) => withProviderData({ type: "input_text", text }, r)),
          ...(Array.isArray(content) && content.length ? { rawContent: content.map((c: Json) => ({ type: "reasoning_text", text: c.text })) } : {}),
        }),
        pd,
      ) as AgentInputItem;
    }
    case "compaction": {
      const { encrypted_content, created_by, id, type, ...pd } = w;
      return withProviderData(dropUndefined({ type, id: id ?? undefined, encrypted_content, created_by }), pd) as AgentInputItem;
    }
    case "file_search_call":
    case "web_search_call":
    case "image_generation_call":
    case "code_interpreter_call": {
      const { status, result, ...rest } = w;
      return dropUndefined({ type: "hosted_tool_call", id: w.id, name: w.type, status, output: result ?? undefined, providerData: rest }) as AgentInputItem;
    }
    default:
      return { type: "unknown", id: w.id, providerData: w } as AgentInputItem;
  }
}

// ---------------------------------------------------------------------------------------------
// The session
// ---------------------------------------------------------------------------------------------

export interface CtxdSessionCompactionOptions {
  /** Tokens of newest history Summarize leaves verbatim (default 2000). */
  keepRecentTokens?: number;
  /**
   * Compact when the history no longer fits this many tokens (BuildContext `needs_summary` at
   * this budget). Default 0: compact only when the runner or caller forces it.
   */
  triggerTokens?: number;
  /**
   * Bring your own LLM: gets ctxd's prepared summarization request (OpenAI chat messages in
   * `prepared.rendered`) and returns the summary text, stored with SUMMARIZE_MODE_PROVIDED.
   * Without it, the server's configured summarizer runs (SUMMARIZE_MODE_SERVER).
   */
  summarize?: (prepared: PreparedRequest) => Promise<string>;
}

export interface CtxdSessionOptions {
  /** The ctxd conversation id the session lives in. */
  sessionId: string;
  /** A client from createCtxdClient (`@ctxd/client` or `@ctxd/client/node`). */
  client: CtxdClient;
  /** Compaction (runCompaction) backed by ctxd's Summarize; see CtxdSessionCompactionOptions. */
  compaction?: CtxdSessionCompactionOptions;
  /** ListMessages page size (default 1000, the server's cap). */
  pageSize?: number;
}

type Window = { items: AgentInputItem[]; perMessage: { sequence: bigint; wire: Json[] }[] };

/**
 * An Agents SDK `Session` (and `OpenAIResponsesCompactionAwareSession`) stored in ctxd.
 *
 *   const session = new CtxdSession({ sessionId: "user-42/support", client });
 *   await run(agent, "Hello", { session });
 */
export class CtxdSession implements Session {
  readonly sessionId: string;
  readonly client: CtxdClient;
  private readonly compaction: CtxdSessionCompactionOptions;
  private readonly pageSize: number;

  constructor(options: CtxdSessionOptions) {
    if (!options?.sessionId) throw new TypeError("CtxdSession: sessionId is required");
    if (!options.client) throw new TypeError("CtxdSession: client is required");
    this.sessionId = options.sessionId;
    this.client = options.client;
    this.compaction = options.compaction ?? {};
    this.pageSize = options.pageSize ?? 1000;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The conversation's last sequence and summary watermark (0, 0 when it does not exist). */
  private async state(): Promise<{ last: bigint; summaryThrough: bigint }> {
    try {
      const { conversation } = await this.client.getConversation({ conversationId: this.sessionId });
      return { last: conversation?.lastSequence ?? 0n, summaryThrough: conversation?.summaryThroughSequence ?? 0n };
    } catch (e) {
      if (isCode(e, Code.NotFound)) return { last: 0n, summaryThrough: 0n };
      throw e;
    }
  }

  /** Items of messages after..through (inclusive), in order, per message. */
  private async read(after: bigint, through: bigint): Promise<Window> {
    const perMessage: Window["perMessage"] = [];
    let cursor = after;
    while (cursor < through) {
      const gap = through - cursor;
      const pageSize = gap < BigInt(this.pageSize) ? Number(gap) : this.pageSize;
      const page = await this.client.listMessages({
        conversationId: this.sessionId,
        afterSequence: cursor,
        pageSize,
        format: Format.OPENAI_RESPONSES,
      });
      if (page.messages.length === 0) break;
      const rendered = page.rendered ? (JSON.parse(page.rendered) as Json[]) : [];
      // Split the page's rendering back into messages: render each message's share by counting
      // the items of the same page rendered one message at a time is costly, so use the page as
      // a whole and attribute items to messages only when needed (popItem reads one message).
      perMessage.push({ sequence: page.messages[page.messages.length - 1]!.sequence, wire: rendered });
      const next = page.nextAfterSequence;
      cursor = next === 0n ? through : next;
    }
    const names = new Map<string, string>();
    const items = perMessage.flatMap((m) => m.wire.map((w) => fromResponsesItem(w, names)));
    return { items, perMessage };
  }

  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    const { last, summaryThrough } = await this.state();
    if (last === 0n) return [];
    const floor = summaryThrough;
    const head: AgentInputItem[] = [];
    if (summaryThrough > 0n) {
      const summary = await this.summaryItem();
      if (summary) head.push(summary);
    }
    if (limit === undefined) return [...head, ...(await this.read(floor, last)).items];
    // Newest `limit` items: read backwards in growing windows of messages.
    let window = BigInt(Math.max(limit, 8));
    for (;;) {
      const after = last - window > floor ? last - window : floor;
      const { items } = await this.read(after, last);
      if (items.length >= limit) return items.slice(items.length - limit);
      if (after === floor) return [...head, ...items].slice(-limit);
      window *= 2n;
    }
  }

  /** The conversation's rolling summary as a system message item (what compaction leaves). */
  private async summaryItem(): Promise<AgentInputItem | undefined> {
    const pack = await this.client.buildContext({
      conversationId: this.sessionId,
      budget: { maxTokens: 10_000_000, maxMessages: 1 },
      omitWorkingMemory: true,
      format: Format.OPENAI_RESPONSES,
    });
    const summary = pack.messages.find((m) => m.source === ContextSource.SUMMARY);
    return summary ? ({ type: "message", role: "system", content: summary.content } as AgentInputItem) : undefined;
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (!items.length) return;
    const wire = items.map(toResponsesItem);
    await this.client.appendMessage({
      conversationId: this.sessionId,
      native: { format: Format.OPENAI_RESPONSES, json: JSON.stringify(wire) },
    });
  }

  /**
   * Removes and returns the newest item: RewindConversation removes the last message; when that
   * message held several items (a model turn's reasoning, text and calls are one ctxd message),
   * the others are appended again, guarded by expected_last_sequence.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    for (let attempt = 0; ; attempt++) {
      const { last } = await this.state();
      if (last === 0n) return undefined;
      // Find the newest message that renders to at least one item.
      let seq = last;
      let wire: Json[] = [];
      while (seq > 0n) {
        const page = await this.client.listMessages({ conversationId: this.sessionId, afterSequence: seq - 1n, pageSize: 1, format: Format.OPENAI_RESPONSES });
        wire = page.rendered ? (JSON.parse(page.rendered) as Json[]) : [];
        if (wire.length > 0) break;
        seq -= 1n;
      }
      if (wire.length === 0) return undefined;
      // The calls named earlier in the log, for the popped result's `name`.
      const names = new Map<string, string>();
      const popped = wire[wire.length - 1]!;
      if (popped.type === "function_call_output" && popped.call_id) {
        const name = await this.callName(popped.call_id, seq);
        if (name) names.set(popped.call_id, name);
      }
      try {
        await this.client.rewindConversation({ conversationId: this.sessionId, afterSequence: seq - 1n, expectedLastSequence: last });
      } catch (e) {
        if (isCode(e, Code.Aborted) && attempt < 3) continue; // someone appended meanwhile
        throw e;
      }
      const keep = wire.slice(0, -1);
      if (keep.length > 0) {
        await this.client.appendMessage({
          conversationId: this.sessionId,
          native: { format: Format.OPENAI_RESPONSES, json: JSON.stringify(keep) },
          expectedLastSequence: seq - 1n,
        });
      }
      for (const w of keep) fromResponsesItem(w, names);
      return fromResponsesItem(popped, names);
    }
  }

  private async callName(callId: string, before: bigint): Promise<string | undefined> {
    // Tool results answer a call at most a few messages back; look at the previous 64.
    const after = before > 65n ? before - 65n : 0n;
    const page = await this.client.listMessages({ conversationId: this.sessionId, afterSequence: after, pageSize: Number(before - 1n - after) || 1 });
    for (const m of page.messages) for (const c of m.toolCalls) if (c.id === callId) return c.name;
    return undefined;
  }

  async clearSession(): Promise<void> {
    try {
      await this.client.deleteConversation({ conversationId: this.sessionId });
    } catch (e) {
      if (!isCode(e, Code.NotFound)) throw e;
    }
  }

  /**
   * The SDK's compaction hook (OpenAIResponsesCompactionAwareSession), run by the runner after a
   * turn is persisted: advances ctxd's rolling summary with Summarize when the history no longer
   * fits `compaction.triggerTokens` (or when `force`). getItems then returns the summary as a
   * system message followed by the items after the summary's watermark; the log keeps everything
   * (ListMessages, `getAllItems`).
   */
  async runCompaction(args?: OpenAIResponsesCompactionArgs): Promise<OpenAIResponsesCompactionResult | null> {
    const trigger = this.compaction.triggerTokens ?? 0;
    if (!args?.force) {
      if (trigger <= 0) return null;
      const { last } = await this.state();
      if (last === 0n) return null;
      const probe = await this.client.buildContext({
        conversationId: this.sessionId,
        budget: { maxTokens: trigger },
        omitMessages: true,
        omitWorkingMemory: true,
        format: Format.OPENAI_RESPONSES,
        historyPolicy: 2, // newest that fits: needs_summary as soon as anything is dropped
      });
      if (!probe.needsSummary) return null;
    }
    const keepRecentTokens = this.compaction.keepRecentTokens ?? 2000;
    let changed: boolean;
    if (this.compaction.summarize) {
      const { prepared } = await this.client.summarize({ conversationId: this.sessionId, keepRecentTokens, mode: SummarizeMode.PREPARE });
      if (!prepared || prepared.throughSequence === prepared.baseThroughSequence) return null;
      const text = await this.compaction.summarize(prepared);
      const res = await this.client.summarize({
        conversationId: this.sessionId,
        mode: SummarizeMode.PROVIDED,
        summaryText: text,
        throughSequence: prepared.throughSequence,
        expectedThroughSequence: prepared.baseThroughSequence,
        expectedLogChanges: prepared.logChanges,
      });
      changed = res.changed;
    } else {
      const res = await this.client.summarize({ conversationId: this.sessionId, keepRecentTokens, mode: SummarizeMode.SERVER });
      changed = res.changed;
    }
    if (!changed) return null;
    const usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, inputTokensDetails: {}, outputTokensDetails: {}, endpoint: "ctxd.summarize" };
    return { usage } as unknown as OpenAIResponsesCompactionResult;
  }

  /** Every item of the log, ignoring the summary (the UI's full history). */
  async getAllItems(): Promise<AgentInputItem[]> {
    const { last } = await this.state();
    return last === 0n ? [] : (await this.read(0n, last)).items;
  }
}
