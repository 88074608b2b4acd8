import { Code } from "@connectrpc/connect";
import { DEFAULT_BUDGET_TOKENS } from "./core.js";
import { isCode } from "./errors.js";
import { Format } from "./gen/ctxd/v1/messages_pb.js";
import { ContextSource, HistoryPolicy, SummarizeMode, } from "./gen/ctxd/v1/context_pb.js";
// ---------------------------------------------------------------------------------------------
// SDK item <-> Responses wire item
// ---------------------------------------------------------------------------------------------
const FAKE_ID = "FAKE_ID";
const isRecord = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const snake = (k) => k.replace(/([A-Z])/g, "_$1").toLowerCase();
function snakeKeys(v) {
    if (Array.isArray(v))
        return v.slice();
    if (!isRecord(v))
        return v;
    const out = {};
    for (const [k, e] of Object.entries(v))
        out[snake(k)] = snakeKeys(e);
    return out;
}
/** providerData, snake-cased, minus the keys the item itself sets (as the SDK does). */
function extra(providerData, reserved) {
    const pd = snakeKeys(providerData);
    if (!isRecord(pd))
        return {};
    const skip = new Set(reserved.map(snake));
    const out = {};
    for (const [k, v] of Object.entries(pd))
        if (!skip.has(k))
            out[k] = v;
    return out;
}
function withProviderData(item, providerData) {
    if (Object.keys(providerData).length > 0)
        item.providerData = providerData;
    return item;
}
function dropUndefined(o) {
    for (const k of Object.keys(o))
        if (o[k] === undefined)
            delete o[k];
    return o;
}
function inputContentToWire(c) {
    const cache = c.promptCacheBreakpoint ? { prompt_cache_breakpoint: c.promptCacheBreakpoint } : {};
    switch (c.type) {
        case "input_text":
            return { type: "input_text", text: c.text, ...cache, ...extra(c.providerData, ["type", "text"]) };
        case "input_image": {
            const e = { type: "input_image", detail: c.detail ?? "auto" };
            if (typeof c.image === "string")
                e.image_url = c.image;
            else if (isRecord(c.image) && "id" in c.image)
                e.file_id = c.image.id;
            return { ...e, ...cache, ...extra(c.providerData, ["type", "detail", "image_url", "file_id"]) };
        }
        case "input_file": {
            const e = { type: "input_file" };
            if (typeof c.file === "string")
                e[c.file.startsWith("data:") ? "file_data" : "file_url"] = c.file;
            else if (isRecord(c.file) && "id" in c.file)
                e.file_id = c.file.id;
            else if (isRecord(c.file) && "url" in c.file)
                e.file_url = c.file.url;
            if (c.filename)
                e.filename = c.filename;
            return { ...e, ...cache, ...extra(c.providerData, ["type", "file_data", "file_url", "file_id", "filename"]) };
        }
        default:
            return { ...snakeKeys(c) };
    }
}
function toolOutputToWire(output) {
    if (typeof output === "string")
        return output;
    if (Array.isArray(output))
        return output.map((o) => (isRecord(o) && o.type === "text" ? { type: "input_text", text: o.text } : inputContentToWire(o)));
    if (isRecord(output) && output.type === "text" && typeof output.text === "string")
        return output.text;
    if (isRecord(output) && output.type === "image") {
        const img = output.image;
        if (typeof img === "string")
            return [{ type: "input_image", image_url: img, detail: output.detail ?? "auto" }];
        if (isRecord(img) && typeof img.url === "string")
            return [{ type: "input_image", image_url: img.url, detail: output.detail ?? "auto" }];
        if (isRecord(img) && typeof img.fileId === "string")
            return [{ type: "input_image", file_id: img.fileId, detail: output.detail ?? "auto" }];
        if (isRecord(img) && typeof img.data === "string")
            return [{ type: "input_image", image_url: `data:${img.mediaType ?? "image/png"};base64,${img.data}`, detail: output.detail ?? "auto" }];
    }
    return typeof output === "undefined" ? "" : JSON.stringify(output);
}
/** One SDK AgentInputItem as the Responses API input item the SDK would send for it. */
export function toResponsesItem(item) {
    const it = item;
    const pd = it.providerData;
    if (it.type === "message" || (it.type === undefined && typeof it.role === "string")) {
        if (it.role === "system" || it.role === "developer") {
            return dropUndefined({ type: "message", id: it.id, role: it.role, content: it.content, ...extra(pd, ["id", "role", "content", "phase"]) });
        }
        if (it.role === "user") {
            const content = typeof it.content === "string" ? it.content : it.content.map(inputContentToWire);
            return dropUndefined({ type: "message", id: it.id, role: "user", content, ...extra(pd, ["id", "role", "content", "phase"]) });
        }
        if (it.role === "assistant") {
            const phase = it.phase ?? (isRecord(pd) ? pd.phase : undefined);
            const content = it.content.map((c) => {
                if (c.type === "output_text") {
                    const annotations = isRecord(c.providerData) && Array.isArray(c.providerData.annotations) ? c.providerData.annotations : [];
                    return { type: "output_text", text: c.text, annotations, ...extra(c.providerData, ["type", "text", "annotations"]) };
                }
                if (c.type === "refusal")
                    return { type: "refusal", refusal: c.refusal, ...extra(c.providerData, ["type", "refusal"]) };
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
                summary: (it.content ?? []).map((c) => ({ type: "summary_text", text: c.text, ...extra(c.providerData, ["type", "text"]) })),
                ...(typeof encrypted === "string" ? { encrypted_content: encrypted } : {}),
                ...(Array.isArray(it.rawContent) && it.rawContent.length ? { content: it.rawContent.map((c) => ({ type: "reasoning_text", text: c.text })) } : {}),
                ...extra(pd, ["id", "type", "summary", "encrypted_content", "content"]),
            });
        }
        case "compaction":
            return dropUndefined({ type: "compaction", id: it.id ?? undefined, encrypted_content: it.encrypted_content ?? it.encryptedContent });
        case "hosted_tool_call": {
            const p = (snakeKeys(pd) ?? {});
            const type = typeof p.type === "string" ? p.type : it.name;
            const out = { ...p, type, id: it.id };
            if (it.status !== undefined)
                out.status = it.status;
            if (type === "image_generation_call" && it.output !== undefined)
                out.result = it.output;
            return dropUndefined(out);
        }
        case "unknown":
            return dropUndefined({ ...snakeKeys(pd), id: it.id });
        default: {
            // computer / shell / apply_patch / tool_search / program items: the wire item is the SDK
            // item snake-cased with its providerData spread in (the SDK's own rule for extra fields).
            const { providerData, ...rest } = it;
            const out = snakeKeys(rest);
            if (out.type === "computer_call_result")
                out.type = "computer_call_output";
            return dropUndefined({ ...out, ...extra(providerData, Object.keys(out)) });
        }
    }
}
function inputContentFromWire(c) {
    const { type } = c;
    if (type === "input_text") {
        const { type: _t, text, prompt_cache_breakpoint, ...rest } = c;
        return withProviderData({ type, text, ...(prompt_cache_breakpoint ? { promptCacheBreakpoint: prompt_cache_breakpoint } : {}) }, rest);
    }
    if (type === "input_image") {
        const { type: _t, image_url, file_id, detail, prompt_cache_breakpoint, ...rest } = c;
        const out = { type };
        if (typeof image_url === "string")
            out.image = image_url;
        else if (typeof file_id === "string")
            out.image = { id: file_id };
        if (detail !== undefined)
            out.detail = detail;
        if (prompt_cache_breakpoint)
            out.promptCacheBreakpoint = prompt_cache_breakpoint;
        return withProviderData(out, rest);
    }
    if (type === "input_file") {
        const { type: _t, file_data, file_url, file_id, filename, prompt_cache_breakpoint, ...rest } = c;
        const out = { type };
        if (typeof file_data === "string")
            out.file = file_data;
        else if (typeof file_url === "string")
            out.file = file_url;
        else if (typeof file_id === "string")
            out.file = { id: file_id };
        if (filename)
            out.filename = filename;
        if (prompt_cache_breakpoint)
            out.promptCacheBreakpoint = prompt_cache_breakpoint;
        return withProviderData(out, rest);
    }
    return c;
}
/** A Responses API item (as ListMessages/BuildContext render it) as the SDK's AgentInputItem. */
export function fromResponsesItem(wire, callNames = new Map()) {
    const w = { ...wire };
    if (w.type === "message" || (w.type === undefined && typeof w.role === "string")) {
        if (w.role === "assistant") {
            const { id, type: _t, role, content, status, phase, ...rest } = w;
            const parts = (Array.isArray(content) ? content : [{ type: "output_text", text: String(content ?? "") }]).map((c) => {
                if (c.type === "output_text") {
                    const { type, text, ...pd } = c;
                    if (Array.isArray(pd.annotations) && pd.annotations.length === 0)
                        delete pd.annotations;
                    return withProviderData({ type, text }, pd);
                }
                if (c.type === "refusal") {
                    const { type, refusal, ...pd } = c;
                    return withProviderData({ type, refusal }, pd);
                }
                return c;
            });
            const out = dropUndefined({ id, type: "message", role, content: parts, status: status ?? "completed" });
            if (phase === "commentary" || phase === "final_answer") {
                out.phase = phase;
                rest.phase = phase;
            }
            return withProviderData(out, rest);
        }
        const { id, type, role, content, ...rest } = w;
        let c = content;
        if (role === "user" && Array.isArray(content))
            c = content.map(inputContentFromWire);
        if ((role === "system" || role === "developer") && Array.isArray(content)) {
            c = content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
        }
        return withProviderData(dropUndefined({ id, type: type ?? undefined, role, content: c }), rest);
    }
    switch (w.type) {
        case "function_call": {
            const { call_id, name, namespace, caller, status, arguments: args, id, type, ...pd } = w;
            if (typeof call_id === "string" && typeof name === "string")
                callNames.set(call_id, name);
            return withProviderData(dropUndefined({
                type,
                id,
                callId: call_id,
                name,
                ...(typeof namespace === "string" ? { namespace } : {}),
                status,
                arguments: args,
                ...(isRecord(caller) ? { caller: caller.type === "program" ? { type: "program", callerId: caller.caller_id } : { type: "direct" } } : {}),
            }), pd);
        }
        case "function_call_output": {
            const { call_id, status, output, name, function_name, namespace, caller, id, type: _t, ...pd } = w;
            let out = output;
            if (Array.isArray(output))
                out = output.map((o) => inputContentFromWire(o));
            return withProviderData(dropUndefined({
                type: "function_call_result",
                id,
                callId: call_id,
                name: name ?? function_name ?? callNames.get(call_id) ?? call_id,
                ...(typeof namespace === "string" ? { namespace } : {}),
                status: status ?? "completed",
                output: typeof out === "string" ? { type: "text", text: out } : out,
            }), pd);
        }
        case "reasoning": {
            const { summary, content, encrypted_content, id, type, ...rest } = w;
            const pd = { ...rest };
            if (typeof encrypted_content === "string")
                pd.encryptedContent = encrypted_content;
            return withProviderData(dropUndefined({
                type,
                id,
                content: (summary ?? []).map(({ text, type: _ty, ...r }) => withProviderData({ type: "input_text", text }, r)),
                ...(Array.isArray(content) && content.length ? { rawContent: content.map((c) => ({ type: "reasoning_text", text: c.text })) } : {}),
            }), pd);
        }
        case "compaction": {
            const { encrypted_content, created_by, id, type, ...pd } = w;
            return withProviderData(dropUndefined({ type, id: id ?? undefined, encrypted_content, created_by }), pd);
        }
        case "file_search_call":
        case "web_search_call":
        case "image_generation_call":
        case "code_interpreter_call": {
            const { status, result, ...rest } = w;
            return dropUndefined({ type: "hosted_tool_call", id: w.id, name: w.type, status, output: result ?? undefined, providerData: rest });
        }
        default:
            return { type: "unknown", id: w.id, providerData: w };
    }
}
// ---------------------------------------------------------------------------------------------
// Keys, usage and appends
// ---------------------------------------------------------------------------------------------
/** Responses input items that answer a client-executed call (a tool message in ctxd). */
const OUTPUT_TYPES = new Set([
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
]);
/** A wire item the model produced (ctxd stores a run of them as one assistant message). */
function isModelSide(w) {
    if (w.type === undefined || w.type === "message")
        return w.role === "assistant";
    return !OUTPUT_TYPES.has(w.type);
}
/** JSON with sorted keys: equal for JSON-equal values. */
function stable(v) {
    if (Array.isArray(v))
        return `[${v.map(stable).join(",")}]`;
    if (isRecord(v))
        return `{${Object.keys(v).sort().filter((k) => v[k] !== undefined).map((k) => `${JSON.stringify(k)}:${stable(v[k])}`).join(",")}}`;
    return JSON.stringify(v) ?? "null";
}
/** An item's exact wire form, as a key. */
const wireKey = (item) => stable(toResponsesItem(item));
/**
 * What an item is, whatever the ids and metadata the SDK or a pack add or strip: calls and their
 * results by call id (unique in a conversation), messages by role and text, reasoning by content.
 */
function itemKey(item) {
    const w = toResponsesItem(item);
    const type = w.type ?? "message";
    if (type === "message") {
        const c = w.content;
        const text = Array.isArray(c) ? c.map((p) => (typeof p?.text === "string" ? p.text : typeof p?.refusal === "string" ? p.refusal : stable(p))).join("\u0000") : typeof c === "string" ? c : stable(c);
        return `m:${w.role}:${text}`;
    }
    if (typeof w.call_id === "string")
        return `${OUTPUT_TYPES.has(type) ? "o" : "c"}:${type}:${w.call_id}`;
    if (type === "reasoning")
        return `r:${w.encrypted_content ?? ""}:${stable(w.summary ?? [])}`;
    return `x:${type}:${typeof w.id === "string" ? w.id : stable(w)}`;
}
const add = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
function take(m, k) {
    const n = m.get(k) ?? 0;
    if (n <= 0)
        return false;
    if (n === 1)
        m.delete(k);
    else
        m.set(k, n - 1);
    return true;
}
/** How much of each run's Usage (RunContext.usage, which only grows) is already stored. */
const usageMarks = new WeakMap();
/**
 * The first time the session sees a run's RunContext (the runner's first session call of the
 * run: getItems, before any model call), the usage it already carries belongs to the part of the
 * run made before it was serialized (a RunState resumed after tool approvals) and was stored by
 * the process that ran it: only what comes after counts.
 */
function firstSight(context) {
    const usage = context?.usage;
    if (isRecord(usage) && !usageMarks.has(usage))
        usageMarks.set(usage, markOf(usage));
}
/** Where a Usage stands now. */
function markOf(usage) {
    const len = (v) => (Array.isArray(v) ? v.length : 0);
    return { input: Number(usage.inputTokens) || 0, output: Number(usage.outputTokens) || 0, inputDetails: len(usage.inputTokensDetails), outputDetails: len(usage.outputTokensDetails) };
}
/** The part of a run's usage not stored yet, and how to mark it stored. */
function unstoredUsage(usage) {
    if (!isRecord(usage))
        return undefined;
    const u = usage;
    const mark = usageMarks.get(usage) ?? { input: 0, output: 0, inputDetails: 0, outputDetails: 0 };
    const now = markOf(u);
    const sum = (details, from, to, key) => (Array.isArray(details) ? details.slice(from, to) : []).reduce((n, d) => n + (Number(d?.[key]) || 0), 0);
    const wire = {
        input_tokens: Math.max(0, now.input - mark.input),
        output_tokens: Math.max(0, now.output - mark.output),
        input_tokens_details: { cached_tokens: sum(u.inputTokensDetails, mark.inputDetails, now.inputDetails, "cached_tokens") },
        output_tokens_details: { reasoning_tokens: sum(u.outputTokensDetails, mark.outputDetails, now.outputDetails, "reasoning_tokens") },
    };
    const empty = !wire.input_tokens && !wire.output_tokens && !wire.input_tokens_details.cached_tokens && !wire.output_tokens_details.reasoning_tokens;
    return empty ? undefined : { wire, commit: () => usageMarks.set(usage, now) };
}
// ---------------------------------------------------------------------------------------------
// The session
// ---------------------------------------------------------------------------------------------
/** The default `budgetTokens` (32,000; why: see its definition in core.ts and the README). */
export { DEFAULT_BUDGET_TOKENS };
const ZERO_USAGE = { inputTokens: 0, outputTokens: 0, totalTokens: 0, inputTokensDetails: {}, outputTokensDetails: {}, endpoint: "ctxd.summarize" };
/**
 * An Agents SDK `Session` (with `OpenAIResponsesCompactionAwareSession` and
 * `RunContextAwareSession`) stored in ctxd, handing the model context packs.
 *
 *   const session = new CtxdSession({ sessionId: "user-42/support", client, budgetTokens: 32_000 });
 *   await run(agent, "Hello", { session, callModelInputFilter: session.callModelInputFilter });
 */
export class CtxdSession {
    sessionId;
    client;
    /** The runner passes its RunContext to every session call (usage is read from it). */
    acceptsRunContext = true;
    budgetTokens;
    reserveTokens;
    wholeLog;
    options;
    compaction;
    pageSize;
    run;
    constructor(options) {
        if (!options?.sessionId)
            throw new TypeError("CtxdSession: sessionId is required");
        if (!options.client)
            throw new TypeError("CtxdSession: client is required");
        const budget = options.budgetTokens ?? DEFAULT_BUDGET_TOKENS;
        if (!Number.isInteger(budget) || budget <= 0 || budget > 10_000_000) {
            throw new TypeError(`CtxdSession: budgetTokens must be an integer from 1 to 10,000,000, got ${budget}`);
        }
        this.sessionId = options.sessionId;
        this.client = options.client;
        this.options = options;
        const reserve = options.reserveTokens ?? Math.floor(budget / 4);
        if (!Number.isInteger(reserve) || reserve < 0 || reserve >= budget) {
            throw new TypeError(`CtxdSession: reserveTokens must be an integer from 0 to budgetTokens - 1, got ${reserve}`);
        }
        this.budgetTokens = budget;
        this.reserveTokens = reserve;
        this.wholeLog = options.wholeLog === true;
        this.compaction = options.compaction ?? {};
        this.pageSize = options.pageSize ?? 1000;
    }
    async getSessionId() {
        return this.sessionId;
    }
    /** The BuildContext request of the session's packs. */
    packRequest(extra = {}) {
        const o = this.options;
        return {
            conversationId: this.sessionId,
            budget: { maxTokens: this.budgetTokens },
            format: Format.OPENAI_RESPONSES,
            ...(o.tokenizer === undefined ? {} : { tokenizer: o.tokenizer }),
            omitWorkingMemory: o.workingMemory === false,
            ...(o.historyPolicy === undefined ? {} : { historyPolicy: o.historyPolicy }),
            ...(o.reasoning === undefined ? {} : { reasoning: o.reasoning }),
            ...(o.toolOutputMaxTokens ? { toolOutputMaxTokens: o.toolOutputMaxTokens } : {}),
            ...(o.clearToolResults ? { clearToolResults: o.clearToolResults } : {}),
            ...(o.recall ? { recall: o.recall === true ? {} : o.recall } : {}),
            ...extra,
        };
    }
    /** What getItems' pack holds: the budget less the reserve. */
    packRoom() {
        return this.budgetTokens - this.reserveTokens;
    }
    /** The session's pack (undefined when the conversation does not exist yet). */
    async pack(extra = {}) {
        try {
            return await this.client.buildContext(this.packRequest(extra));
        }
        catch (e) {
            if (isCode(e, Code.NotFound))
                return undefined;
            throw e;
        }
    }
    /** The conversation's last sequence and summary watermark (0, 0 when it does not exist). */
    async state() {
        try {
            const { conversation } = await this.client.getConversation({ conversationId: this.sessionId });
            return { last: conversation?.lastSequence ?? 0n, summaryThrough: conversation?.summaryThroughSequence ?? 0n };
        }
        catch (e) {
            if (isCode(e, Code.NotFound))
                return { last: 0n, summaryThrough: 0n };
            throw e;
        }
    }
    /**
     * The history to give the model: the session's pack (BuildContext, FORMAT_OPENAI_RESPONSES,
     * within `budgetTokens`: summary, working memory, the newest history that fits, recall) as
     * Responses input items, or with `wholeLog` the log after the summary. `limit`: the newest
     * `limit` of those items, in order (the SDK's meaning).
     */
    async getItems(limit, runContext) {
        if (limit !== undefined && limit <= 0)
            return [];
        let items;
        if (this.wholeLog)
            items = await this.logItems(limit);
        else {
            const pack = await this.pack({ budget: { maxTokens: this.budgetTokens, reserveOutputTokens: this.reserveTokens } });
            items = pack ? this.packItems(pack, "getItems") : [];
            if (limit !== undefined)
                items = items.slice(-limit);
        }
        if (runContext !== undefined && limit === undefined)
            this.beginRun(runContext, items);
        return items;
    }
    packItems(pack, use) {
        this.options.onPack?.(pack, use);
        const names = new Map();
        return (pack.rendered ? JSON.parse(pack.rendered) : []).map((w) => fromResponsesItem(w, names));
    }
    /** The runner's getItems starts a run: what it gave the model, and (for a new RunContext) fresh bookkeeping. */
    beginRun(context, items) {
        firstSight(context);
        const history = items.map(itemKey);
        // The same RunContext with items stored ahead of the runner: a read in the middle of a run.
        if (this.run && this.run.context === context && this.run.ahead.size > 0)
            this.run.history = history;
        else
            this.run = { context, history, stored: new Map(), ahead: new Map(), injected: new Set() };
    }
    /** Items of messages after..through (inclusive), in order, per message. */
    async read(after, through) {
        const perMessage = [];
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
            if (page.messages.length === 0)
                break;
            const rendered = page.rendered ? JSON.parse(page.rendered) : [];
            perMessage.push({ sequence: page.messages[page.messages.length - 1].sequence, wire: rendered });
            const next = page.nextAfterSequence;
            cursor = next === 0n ? through : next;
        }
        const names = new Map();
        const items = perMessage.flatMap((m) => m.wire.map((w) => fromResponsesItem(w, names)));
        return { items, perMessage };
    }
    /** wholeLog's getItems: the summary as a system item, then the log after its watermark. */
    async logItems(limit) {
        const { last, summaryThrough } = await this.state();
        if (last === 0n)
            return [];
        const floor = summaryThrough;
        const head = [];
        if (summaryThrough > 0n) {
            const summary = await this.summaryItem();
            if (summary)
                head.push(summary);
        }
        if (limit === undefined)
            return [...head, ...(await this.read(floor, last)).items];
        // Newest `limit` items: read backwards in growing windows of messages.
        let window = BigInt(Math.max(limit, 8));
        for (;;) {
            const after = last - window > floor ? last - window : floor;
            const { items } = await this.read(after, last);
            if (items.length >= limit)
                return items.slice(items.length - limit);
            if (after === floor)
                return [...head, ...items].slice(-limit);
            window *= 2n;
        }
    }
    /** The conversation's rolling summary as a system message item (what compaction leaves). */
    async summaryItem() {
        const pack = await this.client.buildContext({
            conversationId: this.sessionId,
            budget: { maxTokens: 10_000_000, maxMessages: 1 },
            omitWorkingMemory: true,
            format: Format.OPENAI_RESPONSES,
        });
        const summary = pack.messages.find((m) => m.source === ContextSource.SUMMARY);
        return summary ? { type: "message", role: "system", content: summary.content } : undefined;
    }
    /**
     * Appends items natively in order. The usage not stored yet goes on the last run of model
     * items (one assistant message), appended as a Responses `Response` object so that ctxd reads
     * it into Message.usage; the items before and after it go as input arrays, each append guarded
     * by the previous one's last sequence, and rewound if a later one fails (all or nothing).
     */
    async append(items, context) {
        if (!items.length)
            return;
        const usage = context?.usage;
        firstSight(context);
        const wire = items.map(toResponsesItem);
        const pending = unstoredUsage(usage);
        let end = wire.length;
        while (end > 0 && !isModelSide(wire[end - 1]))
            end--;
        if (!pending || end === 0) {
            await this.client.appendMessage({ conversationId: this.sessionId, native: { format: Format.OPENAI_RESPONSES, json: JSON.stringify(wire) } });
            return;
        }
        let start = end;
        while (start > 0 && isModelSide(wire[start - 1]))
            start--;
        const parts = [];
        if (start > 0)
            parts.push(JSON.stringify(wire.slice(0, start)));
        parts.push(JSON.stringify({ object: "response", output: wire.slice(start, end), usage: pending.wire }));
        if (end < wire.length)
            parts.push(JSON.stringify(wire.slice(end)));
        let first;
        let expected;
        for (const json of parts) {
            try {
                const res = await this.client.appendMessage({
                    conversationId: this.sessionId,
                    native: { format: Format.OPENAI_RESPONSES, json },
                    ...(expected === undefined ? {} : { expectedLastSequence: expected }),
                });
                first ??= res.firstSequence;
                expected = res.lastSequence;
            }
            catch (e) {
                // All or nothing: take back what the earlier requests stored.
                if (first !== undefined && expected !== undefined) {
                    await this.client.rewindConversation({ conversationId: this.sessionId, afterSequence: first - 1n, expectedLastSequence: expected }).catch(() => undefined);
                }
                throw e;
            }
        }
        pending.commit();
    }
    /**
     * Appends the items in one go (natively, as Responses input items), with the usage the run
     * reported since the last append on the newest assistant message (Message.usage). Items that
     * callModelInputFilter already stored during this run are not stored again.
     */
    async addItems(items, runContext) {
        if (!items.length)
            return;
        const run = this.run;
        let fresh = items;
        if (run && (run.ahead.size || run.injected.size)) {
            // The runner hands over the run's input as the model got it (which, with the filter, may
            // hold pack items: summary, notice, history the start-of-run pack lacked), then the run's
            // output. Skipped: what the filter stored ahead; calls and results the log holds (call ids
            // are unique); pack items before the last of those (the output after it is new).
            const keys = items.map(itemKey);
            const claimed = keys.map((k) => take(run.ahead, k));
            const last = claimed.lastIndexOf(true);
            const history = new Set(run.history);
            const logged = (k) => /^[co]:/.test(k) && (run.stored.has(k) || run.injected.has(k) || history.has(k));
            fresh = items.filter((_, i) => !claimed[i] && !logged(keys[i]) && !(i < last && run.injected.has(keys[i])));
        }
        await this.append(fresh, runContext ?? run?.context);
        if (run)
            for (const it of fresh)
                add(run.stored, itemKey(it));
    }
    /**
     * A `callModelInputFilter` (RunConfig / run options) that makes every model call of a run a
     * pack within `budgetTokens`, not only the history getItems gave at its start: before each
     * call it stores the run's items that the log lacks (the new input, the model's calls and
     * their results; addItems later skips them), compacts when due, and hands the model the
     * session's pack, reusing the runner's own item objects where the pack holds them unchanged.
     *
     *   await run(agent, input, { session, callModelInputFilter: session.callModelInputFilter });
     *
     * ctxd keeps the current turn (from the newest user message on) whole: a single tool loop
     * longer than the budget is sent whole, with `stats.over_budget` (see `onPack`).
     */
    callModelInputFilter = async ({ modelData }) => {
        const run = this.run;
        if (this.wholeLog)
            return modelData;
        if (!run) {
            warnOnce(this, "CtxdSession.callModelInputFilter: the run does not use this session (pass { session, callModelInputFilter: session.callModelInputFilter }); the input is left as it is");
            return modelData;
        }
        const input = modelData.input;
        // The run's input is what getItems gave (possibly without orphan calls) and then its own items.
        let start = 0;
        for (let j = 0; start < input.length; start++) {
            const k = itemKey(input[start]);
            let m = j;
            while (m < run.history.length && run.history[m] !== k)
                m++;
            if (m === run.history.length)
                break;
            j = m + 1;
        }
        const tail = input.slice(start);
        const historyCalls = new Set(run.history.filter((k) => k.startsWith("c:") || k.startsWith("o:")));
        if (tail.some((it) => historyCalls.has(itemKey(it)))) {
            warnOnce(run, "CtxdSession.callModelInputFilter: the model input does not start with the session's history (a sessionInputCallback reordered it?); the input is left as it is");
            return modelData;
        }
        const known = new Map(run.stored);
        const missing = tail.filter((it) => !take(known, itemKey(it)));
        if (missing.length) {
            await this.append(missing, run.context);
            for (const it of missing) {
                const k = itemKey(it);
                add(run.stored, k);
                add(run.ahead, k);
            }
        }
        let pack = await this.pack();
        if (pack && (await this.compactionDue(pack)) && (await this.compact(false)).compacted)
            pack = await this.pack();
        if (!pack)
            return modelData;
        this.options.onPack?.(pack, "modelInput");
        // The runner's own objects where the pack holds them unchanged: the SDK then knows which of
        // its items the model got (session persistence, server conversation tracking).
        const pool = new Map();
        const names = new Map();
        for (const it of input) {
            const k = wireKey(it);
            pool.set(k, [...(pool.get(k) ?? []), it]);
            const w = it;
            if (w.type === "function_call" && typeof w.callId === "string")
                names.set(w.callId, w.name);
        }
        const out = (pack.rendered ? JSON.parse(pack.rendered) : []).map((w) => {
            const item = fromResponsesItem(w, names);
            const own = pool.get(wireKey(item))?.shift();
            if (own)
                return own;
            // Not one of the input's items: the summary, memory, a notice, history the start-of-run
            // pack lacked, or an item the pack changed (a cleared or cut result). The runner may take
            // it for input to store; addItems skips it.
            run.injected.add(itemKey(item));
            return item;
        });
        return { ...modelData, input: out };
    };
    /**
     * Removes and returns the newest item: RewindConversation removes the last message; when that
     * message held several items (a model turn's reasoning, text and calls are one ctxd message),
     * the others are appended again, guarded by expected_last_sequence.
     */
    async popItem(_runContext) {
        for (let attempt = 0;; attempt++) {
            const { last } = await this.state();
            if (last === 0n)
                return undefined;
            // Find the newest message that renders to at least one item.
            let seq = last;
            let wire = [];
            while (seq > 0n) {
                const page = await this.client.listMessages({ conversationId: this.sessionId, afterSequence: seq - 1n, pageSize: 1, format: Format.OPENAI_RESPONSES });
                wire = page.rendered ? JSON.parse(page.rendered) : [];
                if (wire.length > 0)
                    break;
                seq -= 1n;
            }
            if (wire.length === 0)
                return undefined;
            // The calls named earlier in the log, for the popped result's `name`.
            const names = new Map();
            const popped = wire[wire.length - 1];
            if (popped.type === "function_call_output" && popped.call_id) {
                const name = await this.callName(popped.call_id, seq);
                if (name)
                    names.set(popped.call_id, name);
            }
            try {
                await this.client.rewindConversation({ conversationId: this.sessionId, afterSequence: seq - 1n, expectedLastSequence: last });
            }
            catch (e) {
                if (isCode(e, Code.Aborted) && attempt < 3)
                    continue; // someone appended meanwhile
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
            for (const w of keep)
                fromResponsesItem(w, names);
            const item = fromResponsesItem(popped, names);
            if (this.run)
                take(this.run.stored, itemKey(item));
            return item;
        }
    }
    async callName(callId, before) {
        // Tool results answer a call at most a few messages back; look at the previous 64.
        const after = before > 65n ? before - 65n : 0n;
        const page = await this.client.listMessages({ conversationId: this.sessionId, afterSequence: after, pageSize: Number(before - 1n - after) || 1 });
        for (const m of page.messages)
            for (const c of m.toolCalls)
                if (c.id === callId)
                    return c.name;
        return undefined;
    }
    async clearSession(_runContext) {
        this.run = undefined;
        try {
            await this.client.deleteConversation({ conversationId: this.sessionId });
        }
        catch (e) {
            if (!isCode(e, Code.NotFound))
                throw e;
        }
    }
    /**
     * The runner's replacement of history by a provider `compaction` item and what follows it:
     * ctxd keeps the log, so the items are appended (packs carry the compaction item, and the SDK
     * reads history from the newest one on). Without this, the SDK would clear the session and
     * write the replacement back.
     */
    async replaceHistoryWithCompaction(items, runContext) {
        await this.addItems(items, runContext);
    }
    /** Whether automatic compaction is due (`pack`: the session's pack, when at hand). */
    async compactionDue(pack) {
        const c = this.compaction;
        if (c.auto === false)
            return false;
        if (c.triggerTokens && c.triggerTokens > 0) {
            const probe = await this.pack({
                budget: { maxTokens: c.triggerTokens },
                omitMessages: true,
                omitWorkingMemory: true,
                recall: undefined,
                historyPolicy: HistoryPolicy.NEWEST, // needs_summary as soon as anything is dropped
            });
            return probe?.needsSummary ?? false;
        }
        if (this.wholeLog)
            return false;
        pack ??= await this.pack({ omitMessages: true });
        return pack?.needsSummary ?? false;
    }
    /** One Summarize (server, or prepare + the caller's model + provided): whether it stored a new summary. */
    async summarizeOnce(keepRecentTokens) {
        const common = {
            conversationId: this.sessionId,
            keepRecentTokens,
            ...(this.options.tokenizer === undefined ? {} : { tokenizer: this.options.tokenizer }),
            maxSummaryTokens: this.compaction.maxSummaryTokens ?? Math.max(1, Math.floor(this.packRoom() / 8)),
        };
        const summarize = this.compaction.summarize;
        if (!summarize) {
            const res = await this.client.summarize({ ...common, mode: SummarizeMode.SERVER });
            return { changed: res.changed, through: res.summary?.throughSequence ?? 0n };
        }
        const { prepared } = await this.client.summarize({ ...common, mode: SummarizeMode.PREPARE });
        if (!prepared || prepared.throughSequence === prepared.baseThroughSequence)
            return { changed: false, through: prepared?.baseThroughSequence ?? 0n };
        const text = await summarize(prepared);
        const res = await this.client.summarize({
            ...common,
            mode: SummarizeMode.PROVIDED,
            summaryText: text,
            throughSequence: prepared.throughSequence,
            expectedThroughSequence: prepared.baseThroughSequence,
            expectedLogChanges: prepared.logChanges,
        });
        return { changed: res.changed, through: res.summary?.throughSequence ?? prepared.throughSequence };
    }
    /** Summarize, keeping `keepRecentTokens` verbatim; forced, whatever can be (keeping nothing) when that left nothing. */
    async compact(force) {
        const keep = this.compaction.keepRecentTokens ?? Math.floor(this.packRoom() / 2);
        const once = async (k) => {
            try {
                return await this.summarizeOnce(k);
            }
            catch (e) {
                if (isCode(e, Code.NotFound))
                    return { changed: false, through: 0n };
                throw e;
            }
        };
        let res = await once(keep);
        if (!res.changed && force && keep > 0)
            res = await once(0);
        const usage = { ...ZERO_USAGE };
        if (res.changed)
            return { usage, compacted: true, throughSequence: res.through };
        const { last, summaryThrough } = await this.state();
        const reason = last === 0n
            ? "the session is empty: there is nothing to summarize"
            : summaryThrough >= last
                ? `everything is summarized already: the summary covers sequences 1 to ${summaryThrough}, the last message`
                : `Summarize found nothing to fold in after sequence ${summaryThrough} (of ${last}): what follows is kept verbatim`;
        return { usage, compacted: false, throughSequence: summaryThrough, reason };
    }
    /**
     * Compaction: the SDK's hook (OpenAIResponsesCompactionAwareSession), run by the runner after
     * a turn is stored. Advances ctxd's rolling summary with Summarize when due (see
     * CtxdSessionCompactionOptions: tokens, never item counts); returns null when it was not due or
     * found nothing new. `{ force: true }` always summarizes what it can (keeping
     * `keepRecentTokens` verbatim, or nothing when that leaves nothing to summarize) and never
     * returns null: `compacted: false` with a `reason` says why nothing was (an empty session, or
     * one summarized to its last message). Packs then carry the summary in place of what it covers;
     * the log keeps everything (ListMessages, `getAllItems`).
     */
    async runCompaction(args, _runContext) {
        const force = args?.force === true;
        if (!force && !(await this.compactionDue()))
            return null;
        const result = await this.compact(force);
        return result.compacted || force ? result : null;
    }
    /** Every item of the log, ignoring the summary (the UI's full history). */
    async getAllItems() {
        const { last } = await this.state();
        return last === 0n ? [] : (await this.read(0n, last)).items;
    }
}
const warned = new WeakSet();
function warnOnce(holder, message) {
    if (warned.has(holder))
        return;
    warned.add(holder);
    console.warn(message);
}
