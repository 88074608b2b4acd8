import type { ModelMessage, UIMessage } from "ai";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { DEFAULT_BUDGET_TOKENS, type CtxdClient } from "./core.js";
import { type MessageSchema, type Tokenizer } from "./gen/ctxd/v1/messages_pb.js";
import { type Budget, type BuildContextResponse, type ClearToolResultsSchema, type HistoryPolicy, type RecallSchema } from "./gen/ctxd/v1/context_pb.js";
type MessageInit = MessageInitShape<typeof MessageSchema>;
export { DEFAULT_BUDGET_TOKENS };
type Json = Record<string, any>;
export declare const UI_MESSAGE_KEY = "ai.ui_message";
export declare const UI_MESSAGE_ID_KEY = "ai.ui_message_id";
/** The ctxd messages one UIMessage is stored as (the first carries the UIMessage JSON). */
export declare function uiMessageToCtxd(message: UIMessage): MessageInit[];
/** The chat's UIMessages, as stored by persistOnFinish (others' messages synthesized), oldest first. [] when the chat does not exist. */
export declare function loadChat<UI extends UIMessage = UIMessage>(client: CtxdClient, conversationId: string): Promise<UI[]>;
/** ModelMessages (e.g. a streamText `response.messages`) as ctxd messages. */
export declare function modelMessagesToCtxd(messages: ModelMessage[]): MessageInit[];
export interface PersistOptions {
    /** Messages to store before the response's (streamText path: the turn's new user message). */
    prompt?: ModelMessage[] | UIMessage[];
    /** Called with the sequences stored (or nothing when there was nothing new). */
    onPersisted?: (result: {
        firstSequence: bigint;
        lastSequence: bigint;
    } | undefined) => void;
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
export declare function persistOnFinish(client: CtxdClient, conversationId: string, options?: PersistOptions): (event: Json) => Promise<void>;
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
/**
 * The prompt for streamText/generateText from a BuildContext pack within `budgetTokens`
 * (default 32,000): the system prompt, summary and working memory as system messages first,
 * then the newest history that fits (cache-stable; tool calls as `tool-call` parts, results as
 * `tool` messages, a call and its results kept or left out together), then `pending`. Pass it
 * as `messages` with `allowSystemInMessages: true`, or split it with `splitSystem`.
 */
export declare function buildPrompt(client: CtxdClient, conversationId: string, options?: BuildPromptOptions): Promise<ModelMessage[]>;
/** Splits a prompt into `{ instructions, messages }` (leading system messages as instructions). */
export declare function splitSystem(prompt: ModelMessage[]): {
    instructions: string | undefined;
    messages: ModelMessage[];
};
