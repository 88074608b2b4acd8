import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message as Message$1 } from "@bufbuild/protobuf";
/**
 * Describes the file ctxd/v1/messages.proto.
 */
export declare const file_ctxd_v1_messages: GenFile;
/**
 * Provider JSON, as `AppendMessageRequest.native` takes it and `Message.native` returns it.
 *
 * @generated from message ctxd.v1.NativeItems
 */
export type NativeItems = Message$1<"ctxd.v1.NativeItems"> & {
    /**
     * The API the JSON belongs to. FORMAT_UNSPECIFIED means OpenAI chat, as everywhere.
     *
     * @generated from field: ctxd.v1.Format format = 1;
     */
    format: Format;
    /**
     * The JSON text. On append: a response object of the format's API (Chat Completions
     * `ChatCompletion`, Anthropic `Message`, Responses `Response`, Gemini
     * `GenerateContentResponse`), or an array of request-side entries (Chat Completions
     * `messages`, Anthropic `messages`, Responses `input` items, Gemini `contents`). On a
     * stored message: that message's own part of it (docs/native.md), JSON-equal to what was
     * appended. At most the server's request size.
     *
     * @generated from field: string json = 2;
     */
    json: string;
};
/**
 * Describes the message ctxd.v1.NativeItems.
 * Use `create(NativeItemsSchema)` to create a new message.
 */
export declare const NativeItemsSchema: GenMessage<NativeItems>;
/**
 * Tokens a provider reported for the call that produced a message (its usage block), or
 * that the caller set. Zero when unknown.
 *
 * @generated from message ctxd.v1.Usage
 */
export type Usage = Message$1<"ctxd.v1.Usage"> & {
    /**
     * Input (prompt) tokens, cached ones included.
     *
     * @generated from field: uint64 input_tokens = 1;
     */
    inputTokens: bigint;
    /**
     * Output (completion) tokens, reasoning included.
     *
     * @generated from field: uint64 output_tokens = 2;
     */
    outputTokens: bigint;
    /**
     * Input tokens read from the provider's prompt cache.
     *
     * @generated from field: uint64 cached_input_tokens = 3;
     */
    cachedInputTokens: bigint;
    /**
     * Output tokens spent on reasoning, where the provider reports them.
     *
     * @generated from field: uint64 reasoning_tokens = 4;
     */
    reasoningTokens: bigint;
};
/**
 * Describes the message ctxd.v1.Usage.
 * Use `create(UsageSchema)` to create a new message.
 */
export declare const UsageSchema: GenMessage<Usage>;
/**
 * One tool (function) call made by the model in an assistant message.
 *
 * @generated from message ctxd.v1.ToolCall
 */
export type ToolCall = Message$1<"ctxd.v1.ToolCall"> & {
    /**
     * Provider-assigned call id; unique within the conversation. A `tool` message answers it
     * through `tool_call_id`. 1 to 256 bytes.
     *
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * Name of the tool the model called. 1 to 256 bytes.
     *
     * @generated from field: string name = 2;
     */
    name: string;
    /**
     * The JSON arguments text exactly as the model produced it, stored verbatim (even if it is
     * not valid JSON, so that the log reflects what the model said).
     *
     * @generated from field: string arguments = 3;
     */
    arguments: string;
    /**
     * Gemini: the `thoughtSignature` of the `functionCall` part, stored verbatim and returned
     * only in FORMAT_GEMINI packs. Base64 as the REST API returns it (standard or URL-safe,
     * padding optional); the google-genai SDKs give it as bytes, to be base64-encoded. At most
     * 1 MiB.
     *
     * @generated from field: string signature = 4;
     */
    signature: string;
    /**
     * OpenAI Responses: the `id` of the `function_call` output item (`fc_...`), returned only in
     * FORMAT_OPENAI_RESPONSES packs, next to the reasoning it was produced with. At most 256
     * bytes.
     *
     * @generated from field: string item_id = 5;
     */
    itemId: string;
};
/**
 * Describes the message ctxd.v1.ToolCall.
 * Use `create(ToolCallSchema)` to create a new message.
 */
export declare const ToolCallSchema: GenMessage<ToolCall>;
/**
 * One block of reasoning a model produced, stored exactly as received so that it can be sent
 * back verbatim: reasoning models refuse a tool loop whose reasoning was dropped or altered
 * (see docs/design.md, "Reasoning"). `type` names the block as its provider does:
 *
 * | provider | type                | fields                                                  |
 * |----------|---------------------|---------------------------------------------------------|
 * | ANTHROPIC| `thinking`          | `text` (the thinking), `signature` (required)           |
 * | ANTHROPIC| `redacted_thinking` | `data` (required)                                       |
 * | OPENAI   | `reasoning`         | `id` (required), `summary`, `data` (`encrypted_content`),|
 * |          |                     | `text` (a `reasoning_text` content part)                |
 * | GEMINI   | `thought`           | `text` (required), `signature` (`thoughtSignature`)     |
 *
 * Fields a type does not list must be empty; a new block type is a new `type` value, not a
 * new message.
 *
 * @generated from message ctxd.v1.Reasoning
 */
export type Reasoning = Message$1<"ctxd.v1.Reasoning"> & {
    /**
     * The provider that produced it. Required; one provider per message.
     *
     * @generated from field: ctxd.v1.Provider provider = 1;
     */
    provider: Provider;
    /**
     * The block type, as the provider spells it (table above). Required.
     *
     * @generated from field: string type = 2;
     */
    type: string;
    /**
     * Readable reasoning text, verbatim.
     *
     * @generated from field: string text = 3;
     */
    text: string;
    /**
     * The provider's signature over the reasoning, verbatim. Gemini's is base64 (as
     * `ToolCall.signature`).
     *
     * @generated from field: string signature = 4;
     */
    signature: string;
    /**
     * Opaque or encrypted reasoning (Anthropic redacted data, OpenAI `encrypted_content`). An
     * OpenAI item stored without it goes back by id alone, which the API resolves only against
     * responses it stored: with `store: false` (or zero data retention), request
     * `include: ["reasoning.encrypted_content"]` and store what it returns here.
     *
     * @generated from field: string data = 5;
     */
    data: string;
    /**
     * The provider's item id (OpenAI `rs_...`).
     *
     * @generated from field: string id = 6;
     */
    id: string;
    /**
     * Reasoning summary parts (OpenAI `summary_text`), in order.
     *
     * @generated from field: repeated string summary = 7;
     */
    summary: string[];
    /**
     * Where the block sits among the message's other blocks: how many of them come before it,
     * counting the text (when `content` or `content_signature` is set) first and then each tool
     * call. 0, the usual case, puts it first; blocks with equal positions keep their order.
     * Must not decrease from one block to the next, nor exceed the number of other blocks; an
     * Anthropic block must come before the last of them (Claude never ends a reply thinking).
     *
     * @generated from field: uint32 position = 8;
     */
    position: number;
};
/**
 * Describes the message ctxd.v1.Reasoning.
 * Use `create(ReasoningSchema)` to create a new message.
 */
export declare const ReasoningSchema: GenMessage<Reasoning>;
/**
 * A file attached to a message, e.g. an image the user sent. A pack carries it in the form its
 * format takes (docs/design.md, "Rendering"); a type the format cannot carry (an SVG for any
 * provider, a text file in OpenAI chat) becomes a text line naming it.
 *
 * @generated from message ctxd.v1.Attachment
 */
export type Attachment = Message$1<"ctxd.v1.Attachment"> & {
    /**
     * MIME type, e.g. `image/png`. Required.
     *
     * @generated from field: string mime_type = 1;
     */
    mimeType: string;
    /**
     * Optional file name shown to people and models.
     *
     * @generated from field: string filename = 2;
     */
    filename: string;
    /**
     * Where the content lives: inline bytes or a URI. Exactly one is required.
     *
     * @generated from oneof ctxd.v1.Attachment.source
     */
    source: {
        /**
         * Inline content, capped by the server's attachment size limit.
         *
         * @generated from field: bytes data = 3;
         */
        value: Uint8Array;
        case: "data";
    } | {
        /**
         * A URI the model provider can fetch, stored as given: https (or gs:// and Files API URIs
         * for Gemini), or a `data:<type>;base64,<data>` URI, which packs carry as each format's
         * inline form (a malformed one is INVALID_ARGUMENT).
         *
         * @generated from field: string uri = 4;
         */
        value: string;
        case: "uri";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * An image's width in pixels. Read from the header of inline data and data URIs at append
     * (what the caller gives is replaced); for other URIs, give it to have the image counted by
     * its size, else it counts as the largest image the format's provider takes (docs/design.md,
     * "Attachments").
     *
     * @generated from field: uint32 width = 5;
     */
    width: number;
    /**
     * An image's height in pixels, as `width`.
     *
     * @generated from field: uint32 height = 6;
     */
    height: number;
};
/**
 * Describes the message ctxd.v1.Attachment.
 * Use `create(AttachmentSchema)` to create a new message.
 */
export declare const AttachmentSchema: GenMessage<Attachment>;
/**
 * A failed or timed-out LLM call, recorded on an assistant message so that "continue" has an
 * anchor and the partial output is not lost.
 *
 * @generated from message ctxd.v1.LlmError
 */
export type LlmError = Message$1<"ctxd.v1.LlmError"> & {
    /**
     * Machine-readable error code from the provider or the caller, e.g. `timeout`, `rate_limited`.
     *
     * @generated from field: string code = 1;
     */
    code: string;
    /**
     * Human-readable error message.
     *
     * @generated from field: string message = 2;
     */
    message: string;
    /**
     * Whatever the model streamed before the failure.
     *
     * @generated from field: string partial_output = 3;
     */
    partialOutput: string;
};
/**
 * Describes the message ctxd.v1.LlmError.
 * Use `create(LlmErrorSchema)` to create a new message.
 */
export declare const LlmErrorSchema: GenMessage<LlmError>;
/**
 * Token counts of a stored message, computed once: at append time under the tokenizers the
 * server counts (`CTXD_TOKENIZERS`; its default tokenizer and `approx` always), and under any
 * other when a BuildContext or Summarize first needs it. A count not made yet is absent.
 *
 * @generated from message ctxd.v1.TokenCounts
 */
export type TokenCounts = Message$1<"ctxd.v1.TokenCounts"> & {
    /**
     * Tokens under o200k_base, including the per-message chat overhead.
     *
     * @generated from field: optional uint32 o200k_base = 1;
     */
    o200kBase?: number | undefined;
    /**
     * Tokens under cl100k_base, including the per-message chat overhead.
     *
     * @generated from field: optional uint32 cl100k_base = 2;
     */
    cl100kBase?: number | undefined;
    /**
     * Tokens under the approximate tokenizer, including the per-message chat overhead.
     *
     * @generated from field: uint32 approx = 3;
     */
    approx: number;
};
/**
 * Describes the message ctxd.v1.TokenCounts.
 * Use `create(TokenCountsSchema)` to create a new message.
 */
export declare const TokenCountsSchema: GenMessage<TokenCounts>;
/**
 * One message of a conversation log.
 *
 * @generated from message ctxd.v1.Message
 */
export type Message = Message$1<"ctxd.v1.Message"> & {
    /**
     * Author role. Required.
     *
     * @generated from field: ctxd.v1.Role role = 1;
     */
    role: Role;
    /**
     * Text content. Required for system messages, and for user messages without attachments;
     * optional for assistant messages with tool calls or an error, and for tool results.
     *
     * @generated from field: string content = 2;
     */
    content: string;
    /**
     * Optional author name (e.g. the agent or user name), passed through to providers.
     *
     * @generated from field: string name = 3;
     */
    name: string;
    /**
     * Tool calls made by an assistant message. Only on ROLE_ASSISTANT.
     *
     * @generated from field: repeated ctxd.v1.ToolCall tool_calls = 4;
     */
    toolCalls: ToolCall[];
    /**
     * The call a ROLE_TOOL message answers. Required on ROLE_TOOL, forbidden elsewhere. It must
     * name a call made earlier in this conversation (or earlier in the same request) that has no
     * result yet.
     *
     * @generated from field: string tool_call_id = 5;
     */
    toolCallId: string;
    /**
     * Files attached to the message, e.g. images.
     *
     * @generated from field: repeated ctxd.v1.Attachment attachments = 6;
     */
    attachments: Attachment[];
    /**
     * Free-form string pairs (mode, run id, agent id...), stored and returned as given.
     *
     * @generated from field: map<string, string> metadata = 7;
     */
    metadata: {
        [key: string]: string;
    };
    /**
     * A UI-only event: kept in the log, never put into a context pack.
     *
     * @generated from field: bool exclude_from_context = 8;
     */
    excludeFromContext: boolean;
    /**
     * Always kept in context packs (e.g. the session opener).
     *
     * @generated from field: bool pinned = 9;
     */
    pinned: boolean;
    /**
     * A failed LLM call, only on ROLE_ASSISTANT.
     *
     * @generated from field: ctxd.v1.LlmError error = 10;
     */
    error?: LlmError | undefined;
    /**
     * The provider's response id, for OpenAI Responses `previous_response_id` chaining.
     *
     * @generated from field: string response_id = 11;
     */
    responseId: string;
    /**
     * Server-set: position in the conversation, gapless from 1. Ignored on append.
     *
     * @generated from field: uint64 sequence = 12;
     */
    sequence: bigint;
    /**
     * Server-set: when the message was stored. Ignored on append.
     *
     * @generated from field: google.protobuf.Timestamp created_at = 13;
     */
    createdAt?: Timestamp | undefined;
    /**
     * Server-set: token counts per tokenizer. Ignored on append. They exclude `reasoning` and
     * signatures, which are counted in `reasoning_tokens` because packs carry them only for
     * their provider and only for the current turn (see `BuildContextRequest.reasoning`).
     *
     * @generated from field: ctxd.v1.TokenCounts tokens = 14;
     */
    tokens?: TokenCounts | undefined;
    /**
     * Reasoning the model produced with this reply (assistant only), in the order received; see
     * `Reasoning`. At most 64 blocks; with the signatures, item ids and content it counts against
     * the content size limit.
     *
     * @generated from field: repeated ctxd.v1.Reasoning reasoning = 15;
     */
    reasoning: Reasoning[];
    /**
     * OpenAI Responses: the `id` of the assistant `message` output item (`msg_...`) that carried
     * `content`. Assistant only, at most 256 bytes.
     *
     * @generated from field: string content_item_id = 16;
     */
    contentItemId: string;
    /**
     * Gemini: the `thoughtSignature` of the text part that carried `content`, base64 (as
     * `ToolCall.signature`). Assistant only.
     *
     * @generated from field: string content_signature = 17;
     */
    contentSignature: string;
    /**
     * Server-set: tokens of the reasoning, signatures and provider item ids (a Responses
     * `msg_...` id is sent back with its item), as packs for their provider count them; unset
     * when the message carries none. Ignored on append.
     *
     * @generated from field: ctxd.v1.TokenCounts reasoning_tokens = 18;
     */
    reasoningTokens?: TokenCounts | undefined;
    /**
     * OpenAI Responses: the `phase` of the assistant `message` item that carried `content`,
     * `commentary` or `final_answer`, as the model labelled it. OpenAI asks for it back on every
     * assistant message (newer models degrade without it), so FORMAT_OPENAI_RESPONSES packs
     * carry it on completed turns too, with or without their reasoning; other formats leave it
     * out. Assistant only; not next to another provider's reasoning or signatures.
     *
     * @generated from field: string content_phase = 19;
     */
    contentPhase: string;
    /**
     * Output only (refused on append: use `AppendMessageRequest.native`). The message as its
     * provider's JSON, for a message appended natively: rendered back byte for byte (JSON-equal)
     * in packs and ListMessages of that format, within the reasoning policy; other formats get
     * the fields above (docs/native.md lists what each type becomes).
     *
     * @generated from field: ctxd.v1.NativeItems native = 20;
     */
    native?: NativeItems | undefined;
    /**
     * The provider's usage for the call that produced the message. Set from a response
     * object's usage block on a native append; settable on any message.
     *
     * @generated from field: ctxd.v1.Usage usage = 21;
     */
    usage?: Usage | undefined;
    /**
     * When the message happened: for history imported with its original times. Optional on
     * append (unset: the append time); never in the future (a minute of clock skew is allowed)
     * and never earlier than the message before it (in the request or the log), or the append
     * is refused with INVALID_ARGUMENT naming `messages[i].occurred_at`. Always set on reads
     * (`created_at` when the caller gave none). Recall shows it on each recalled message. It
     * never moves `created_at`, the sequence, ordering or retention.
     *
     * @generated from field: google.protobuf.Timestamp occurred_at = 22;
     */
    occurredAt?: Timestamp | undefined;
};
/**
 * Describes the message ctxd.v1.Message.
 * Use `create(MessageSchema)` to create a new message.
 */
export declare const MessageSchema: GenMessage<Message>;
/**
 * Role of a message author, as the LLM chat protocols define it.
 *
 * @generated from enum ctxd.v1.Role
 */
export declare enum Role {
    /**
     * Not set; rejected on append.
     *
     * @generated from enum value: ROLE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Instructions for the model. Stored system messages are history; the caller's dynamic
     * prompt goes in BuildContextRequest.system_prompt instead.
     *
     * @generated from enum value: ROLE_SYSTEM = 1;
     */
    SYSTEM = 1,
    /**
     * A human (or upstream agent) turn.
     *
     * @generated from enum value: ROLE_USER = 2;
     */
    USER = 2,
    /**
     * A model reply: text, tool calls, or a failed call recorded in `error`.
     *
     * @generated from enum value: ROLE_ASSISTANT = 3;
     */
    ASSISTANT = 3,
    /**
     * The result of one tool call, answering `tool_call_id`.
     *
     * @generated from enum value: ROLE_TOOL = 4;
     */
    TOOL = 4
}
/**
 * Describes the enum ctxd.v1.Role.
 */
export declare const RoleSchema: GenEnum<Role>;
/**
 * Tokenizer used to count tokens.
 *
 * @generated from enum ctxd.v1.Tokenizer
 */
export declare enum Tokenizer {
    /**
     * The server's configured default (o200k_base unless configured otherwise).
     *
     * @generated from enum value: TOKENIZER_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * OpenAI o200k_base (GPT-4o, GPT-4.1, o-series), exact.
     *
     * @generated from enum value: TOKENIZER_O200K_BASE = 1;
     */
    O200K_BASE = 1,
    /**
     * OpenAI cl100k_base (GPT-4, GPT-3.5), exact.
     *
     * @generated from enum value: TOKENIZER_CL100K_BASE = 2;
     */
    CL100K_BASE = 2,
    /**
     * UTF-8 bytes / 4, rounded up, for models without a known tokenizer.
     *
     * @generated from enum value: TOKENIZER_APPROX = 3;
     */
    APPROX = 3
}
/**
 * Describes the enum ctxd.v1.Tokenizer.
 */
export declare const TokenizerSchema: GenEnum<Tokenizer>;
/**
 * Provider format of the rendered pack.
 *
 * @generated from enum ctxd.v1.Format
 */
export declare enum Format {
    /**
     * OpenAI chat (the default).
     *
     * @generated from enum value: FORMAT_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * OpenAI Chat Completions `messages` array, with `tool_calls` and `tool` messages.
     *
     * @generated from enum value: FORMAT_OPENAI_CHAT = 1;
     */
    OPENAI_CHAT = 1,
    /**
     * Anthropic Messages `{system, messages}`, with `tool_use` / `tool_result` blocks and
     * strictly alternating roles. `system` is one text block; it and the last block of each of
     * the last two messages carry `cache_control` prompt-cache breakpoints (three of the four a
     * request may carry). Anthropic reasoning comes back as `thinking` / `redacted_thinking`
     * blocks in place.
     *
     * @generated from enum value: FORMAT_ANTHROPIC_MESSAGES = 2;
     */
    ANTHROPIC_MESSAGES = 2,
    /**
     * OpenAI Responses `input` array: system parts and user turns as `message` items (system
     * parts first, with role `system`, not in `instructions`: the whole pack is one array and
     * `instructions` stays the caller's), assistant text as `message` items, calls as
     * `function_call` and results as `function_call_output` items, OpenAI reasoning as
     * `reasoning` items with their `encrypted_content`, next to the item ids they came with.
     *
     * @generated from enum value: FORMAT_OPENAI_RESPONSES = 3;
     */
    OPENAI_RESPONSES = 3,
    /**
     * Gemini `generateContent` body `{systemInstruction, contents}` (REST JSON, camelCase): roles
     * `user` / `model` alternating, calls as `functionCall` parts, results as `functionResponse`
     * parts (`{"output": text}`, matched by name and id) opening the next user content, images
     * as `inlineData` / `fileData`, Gemini thought parts and `thoughtSignature`s in place.
     *
     * @generated from enum value: FORMAT_GEMINI = 4;
     */
    GEMINI = 4
}
/**
 * Describes the enum ctxd.v1.Format.
 */
export declare const FormatSchema: GenEnum<Format>;
/**
 * The model provider whose native data (reasoning, signatures, item ids) a message carries.
 * Native data is returned only in packs for the same provider.
 *
 * @generated from enum ctxd.v1.Provider
 */
export declare enum Provider {
    /**
     * Not set; rejected on a `Reasoning`.
     *
     * @generated from enum value: PROVIDER_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Anthropic Messages (Claude): `thinking` and `redacted_thinking` blocks.
     *
     * @generated from enum value: PROVIDER_ANTHROPIC = 1;
     */
    ANTHROPIC = 1,
    /**
     * OpenAI Responses: `reasoning` items.
     *
     * @generated from enum value: PROVIDER_OPENAI = 2;
     */
    OPENAI = 2,
    /**
     * Google Gemini: thought parts and thought signatures.
     *
     * @generated from enum value: PROVIDER_GEMINI = 3;
     */
    GEMINI = 3
}
/**
 * Describes the enum ctxd.v1.Provider.
 */
export declare const ProviderSchema: GenEnum<Provider>;
