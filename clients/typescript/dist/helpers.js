import { Format } from "./gen/ctxd/v1/messages_pb.js";
const FORMAT_NAMES = {
    "openai-chat": Format.OPENAI_CHAT,
    chat: Format.OPENAI_CHAT,
    anthropic: Format.ANTHROPIC_MESSAGES,
    "openai-responses": Format.OPENAI_RESPONSES,
    responses: Format.OPENAI_RESPONSES,
    gemini: Format.GEMINI,
};
/** Resolves a short format name ("openai-chat", "anthropic", "openai-responses", "gemini") to the enum. */
export function toFormat(format) {
    if (typeof format === "number")
        return format;
    const f = FORMAT_NAMES[format];
    if (f === undefined)
        throw new TypeError(`unknown format ${JSON.stringify(format)}`);
    return f;
}
/**
 * Appends a provider object losslessly: a response object (Chat Completions `ChatCompletion`,
 * Anthropic `Message`, Responses `Response`, Gemini `GenerateContentResponse`) or an array of
 * request-side entries (chat `messages`, Anthropic `messages`, Responses `input` items, Gemini
 * `contents`). `obj` may already be JSON text.
 */
export async function appendNative(client, conversationId, obj, format, options = {}) {
    const json = typeof obj === "string" ? obj : JSON.stringify(obj);
    if (json === undefined)
        throw new TypeError("appendNative: the object is not JSON-serialisable");
    return client.appendMessage({
        conversationId,
        native: { format: toFormat(format), json },
        idempotencyKey: options.idempotencyKey ?? "",
        expectedLastSequence: options.expectedLastSequence === undefined ? undefined : BigInt(options.expectedLastSequence),
    }, { timeoutMs: options.timeoutMs, signal: options.signal });
}
function renderedOf(pack, what) {
    const text = typeof pack === "string" ? pack : pack?.rendered;
    if (typeof text !== "string" || text === "") {
        throw new TypeError(`${what}: the pack has no rendered JSON (was a format requested?)`);
    }
    return JSON.parse(text);
}
function expectArray(value, what, format) {
    if (!Array.isArray(value)) {
        throw new TypeError(`${what}: the pack is not ${format} (rendered is not an array); build it with format ${format}`);
    }
    return value;
}
/** `{ messages }` for `openai.chat.completions.create` (pack built with FORMAT_OPENAI_CHAT). */
export function openaiChatParams(pack) {
    return { messages: expectArray(renderedOf(pack, "openaiChatParams"), "openaiChatParams", "FORMAT_OPENAI_CHAT") };
}
/** `{ input }` for `openai.responses.create` (pack built with FORMAT_OPENAI_RESPONSES). */
export function openaiResponsesParams(pack) {
    return { input: expectArray(renderedOf(pack, "openaiResponsesParams"), "openaiResponsesParams", "FORMAT_OPENAI_RESPONSES") };
}
/** `{ system?, messages }` for `anthropic.messages.create` (pack built with FORMAT_ANTHROPIC_MESSAGES). */
export function anthropicParams(pack) {
    const r = renderedOf(pack, "anthropicParams");
    if (!r || typeof r !== "object" || Array.isArray(r) || !Array.isArray(r.messages)) {
        throw new TypeError("anthropicParams: the pack is not FORMAT_ANTHROPIC_MESSAGES ({system?, messages})");
    }
    return r.system === undefined ? { messages: r.messages } : { system: r.system, messages: r.messages };
}
/**
 * `{ contents, config: { systemInstruction } }` for `@google/genai` `ai.models.generateContent`
 * (pack built with FORMAT_GEMINI). `config` is left out when the pack has no system instruction.
 */
export function geminiParams(pack) {
    const r = renderedOf(pack, "geminiParams");
    if (!r || typeof r !== "object" || Array.isArray(r) || !Array.isArray(r.contents)) {
        throw new TypeError("geminiParams: the pack is not FORMAT_GEMINI ({systemInstruction?, contents})");
    }
    return r.systemInstruction === undefined
        ? { contents: r.contents }
        : { contents: r.contents, config: { systemInstruction: r.systemInstruction } };
}
