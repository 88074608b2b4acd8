import type { CtxdClient } from "./core.js";
import { Format } from "./gen/ctxd/v1/messages_pb.js";
import type { AppendMessageResponse } from "./gen/ctxd/v1/context_service_pb.js";
/** A provider format: the enum, or its short name. */
export type FormatLike = Format | "openai-chat" | "anthropic" | "openai-responses" | "gemini";
/** Resolves a short format name ("openai-chat", "anthropic", "openai-responses", "gemini") to the enum. */
export declare function toFormat(format: FormatLike): Format;
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
export declare function appendNative(client: CtxdClient, conversationId: string, obj: unknown, format: FormatLike, options?: AppendOptions): Promise<AppendMessageResponse>;
/** Anything carrying a rendered pack: a BuildContextResponse, a ListMessagesResponse, or the JSON text itself. */
export type PackLike = {
    rendered: string;
} | string;
/** `{ messages }` for `openai.chat.completions.create` (pack built with FORMAT_OPENAI_CHAT). */
export declare function openaiChatParams<M = Record<string, unknown>>(pack: PackLike): {
    messages: M[];
};
/** `{ input }` for `openai.responses.create` (pack built with FORMAT_OPENAI_RESPONSES). */
export declare function openaiResponsesParams<I = Record<string, unknown>>(pack: PackLike): {
    input: I[];
};
/** `{ system?, messages }` for `anthropic.messages.create` (pack built with FORMAT_ANTHROPIC_MESSAGES). */
export declare function anthropicParams<M = Record<string, unknown>, S = unknown>(pack: PackLike): {
    system?: S;
    messages: M[];
};
/**
 * `{ contents, config: { systemInstruction } }` for `@google/genai` `ai.models.generateContent`
 * (pack built with FORMAT_GEMINI). `config` is left out when the pack has no system instruction.
 */
export declare function geminiParams<C = Record<string, unknown>, S = unknown>(pack: PackLike): {
    contents: C[];
    config?: {
        systemInstruction: S;
    };
};
