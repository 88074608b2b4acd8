import { Code, ConnectError } from "@connectrpc/connect";
import { createMiddleware } from "langchain";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { z } from "zod";
import { DEFAULT_BUDGET_TOKENS } from "./core.js";
import { Format, Role, } from "./gen/ctxd/v1/messages_pb.js";
/** Base64 to bytes and back, without Node's Buffer (the module runs wherever fetch does). */
const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const toBase64 = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));
const META = "langchain.";
function json(value) {
    try {
        return JSON.stringify(value);
    }
    catch {
        return undefined;
    }
}
function textOf(content) {
    if (typeof content === "string")
        return content;
    if (!Array.isArray(content))
        return "";
    return content
        .map((b) => (typeof b === "string" ? b : b && typeof b === "object" && b.type === "text" ? String(b.text ?? "") : ""))
        .join("");
}
/** Images of a content list as ctxd attachments (URLs as `uri`, base64 and data URIs as `data`). */
function attachmentsOf(content) {
    if (!Array.isArray(content))
        return [];
    const out = [];
    for (const b of content) {
        if (!b || typeof b !== "object")
            continue;
        const block = b;
        const mime = String(block.mime_type ?? block.mimeType ?? "image/png");
        let url;
        if (block.type === "image_url")
            url = typeof block.image_url === "string" ? block.image_url : block.image_url?.url;
        else if (block.type === "image") {
            if (typeof block.data === "string" || typeof block.base64 === "string") {
                out.push({ mimeType: mime, source: { case: "data", value: fromBase64(String(block.data ?? block.base64)) } });
                continue;
            }
            url = block.url;
        }
        if (typeof url !== "string" || !url)
            continue;
        const m = /^data:([^;,]*);base64,(.*)$/s.exec(url);
        if (m)
            out.push({ mimeType: m[1] || mime, source: { case: "data", value: fromBase64(m[2] ?? "") } });
        else
            out.push({ mimeType: mime, source: { case: "uri", value: url } });
    }
    return out;
}
/** `message` as a ctxd message (the shape `client.appendMessage` takes). */
export function toCtxd(message) {
    const meta = {};
    const out = { content: textOf(message.content) };
    if (message.id)
        meta[META + "id"] = String(message.id);
    if (message.name)
        out.name = message.name;
    if (typeof message.content !== "string") {
        meta[META + "content"] = json(message.content) ?? "[]";
        out.attachments = attachmentsOf(message.content);
    }
    if (message.additional_kwargs && Object.keys(message.additional_kwargs).length) {
        const v = json(message.additional_kwargs);
        if (v !== undefined)
            meta[META + "additional_kwargs"] = v;
    }
    if (message.response_metadata && Object.keys(message.response_metadata).length) {
        const v = json(message.response_metadata);
        if (v !== undefined)
            meta[META + "response_metadata"] = v;
    }
    if (AIMessage.isInstance(message)) {
        out.role = Role.ASSISTANT;
        out.toolCalls = (message.tool_calls ?? []).map((c) => ({ id: c.id ?? "", name: c.name, arguments: JSON.stringify(c.args ?? {}) }));
        if (message.invalid_tool_calls?.length)
            meta[META + "invalid_tool_calls"] = json(message.invalid_tool_calls) ?? "[]";
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
    }
    else if (ToolMessage.isInstance(message)) {
        out.role = Role.TOOL;
        out.toolCallId = message.tool_call_id;
        if (message.status && message.status !== "success")
            meta[META + "status"] = message.status;
        if (message.artifact !== undefined) {
            const v = json(message.artifact);
            if (v !== undefined)
                meta[META + "artifact"] = v;
        }
    }
    else if (SystemMessage.isInstance(message)) {
        out.role = Role.SYSTEM;
    }
    else {
        out.role = Role.USER;
    }
    if (Object.keys(meta).length)
        out.metadata = meta;
    return out;
}
function loads(meta, key) {
    const raw = meta[META + key];
    if (raw === undefined)
        return undefined;
    try {
        return JSON.parse(raw);
    }
    catch {
        return undefined;
    }
}
/** A ctxd message (a stored Message or a pack's ContextMessage) as a LangChain message: the inverse of toCtxd. */
export function fromCtxd(m) {
    const meta = "metadata" in m ? { ...m.metadata } : {};
    let content = m.content;
    if (META + "content" in meta)
        content = loads(meta, "content");
    else if (META + "text" in meta)
        content = loads(meta, "text");
    else if (m.attachments.length) {
        content = m.content ? [{ type: "text", text: m.content }] : [];
        for (const a of m.attachments) {
            if (a.source.case === "uri")
                content.push({ type: "image", url: a.source.value });
            else if (a.source.case === "data")
                content.push({ type: "image", data: toBase64(a.source.value), mimeType: a.mimeType });
        }
    }
    const fields = { content };
    if (meta[META + "id"])
        fields.id = meta[META + "id"];
    if (m.name)
        fields.name = m.name;
    const extra = loads(meta, "additional_kwargs");
    if (extra)
        fields.additional_kwargs = extra;
    const response = loads(meta, "response_metadata");
    if (response)
        fields.response_metadata = response;
    switch (m.role) {
        case Role.ASSISTANT: {
            const tool_calls = m.toolCalls.map((c) => {
                let args;
                try {
                    args = c.arguments ? JSON.parse(c.arguments) : {};
                }
                catch {
                    args = { raw: c.arguments };
                }
                return { name: c.name, args, id: c.id, type: "tool_call" };
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
                ...(meta[META + "status"] ? { status: meta[META + "status"] } : {}),
                ...(artifact !== undefined ? { artifact } : {}),
            });
        }
        case Role.SYSTEM:
            return new SystemMessage(fields);
        default:
            return new HumanMessage(fields);
    }
}
/** A pack as LangChain messages: the system parts that open it as texts, then the rest in order. */
export function packMessages(pack) {
    const system = [];
    const messages = [];
    for (const m of pack.messages) {
        if (m.role === Role.SYSTEM && messages.length === 0)
            system.push(m.content);
        else
            messages.push(fromCtxd(m));
    }
    return { system, messages };
}
function unsynced(state) {
    const messages = state.messages ?? [];
    if (state.ctxdSyncedId) {
        for (let i = messages.length - 1; i >= 0; i--)
            if (messages[i]?.id === state.ctxdSyncedId)
                return messages.slice(i + 1);
    }
    return messages.slice(state.ctxdSynced ?? 0);
}
async function batchKey(conversation, batch) {
    const ids = batch.map((m) => String(m.id ?? "")).join("\0");
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${conversation}\0${ids}`));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
    return "langchain-" + hex.slice(0, 32);
}
/** The agent middleware (module comment). */
export function ctxdContextMiddleware(client, options = {}) {
    const conversationOf = (runtime) => {
        if (options.conversationId)
            return options.conversationId;
        const thread = runtime?.configurable?.thread_id;
        if (!thread) {
            throw new Error("ctxdContextMiddleware needs conversationId, or a thread_id in the run's config ({ configurable: { thread_id } }, with a checkpointer)");
        }
        return `${options.threadIdPrefix ?? ""}${thread}`;
    };
    const sync = async (state, runtime) => {
        const batch = unsynced(state);
        if (!batch.length)
            return undefined;
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
export function isNotFound(error) {
    return error instanceof ConnectError && error.code === Code.NotFound;
}
