import type { AgentInputItem, OpenAIResponsesCompactionArgs, OpenAIResponsesCompactionResult, Session } from "@openai/agents-core";
import type { CtxdClient } from "./core.js";
import { type PreparedRequest } from "./gen/ctxd/v1/context_pb.js";
type Json = Record<string, any>;
/** One SDK AgentInputItem as the Responses API input item the SDK would send for it. */
export declare function toResponsesItem(item: AgentInputItem): Json;
/** A Responses API item (as ListMessages/BuildContext render it) as the SDK's AgentInputItem. */
export declare function fromResponsesItem(wire: Json, callNames?: Map<string, string>): AgentInputItem;
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
/**
 * An Agents SDK `Session` (and `OpenAIResponsesCompactionAwareSession`) stored in ctxd.
 *
 *   const session = new CtxdSession({ sessionId: "user-42/support", client });
 *   await run(agent, "Hello", { session });
 */
export declare class CtxdSession implements Session {
    readonly sessionId: string;
    readonly client: CtxdClient;
    private readonly compaction;
    private readonly pageSize;
    constructor(options: CtxdSessionOptions);
    getSessionId(): Promise<string>;
    /** The conversation's last sequence and summary watermark (0, 0 when it does not exist). */
    private state;
    /** Items of messages after..through (inclusive), in order, per message. */
    private read;
    getItems(limit?: number): Promise<AgentInputItem[]>;
    /** The conversation's rolling summary as a system message item (what compaction leaves). */
    private summaryItem;
    addItems(items: AgentInputItem[]): Promise<void>;
    /**
     * Removes and returns the newest item: RewindConversation removes the last message; when that
     * message held several items (a model turn's reasoning, text and calls are one ctxd message),
     * the others are appended again, guarded by expected_last_sequence.
     */
    popItem(): Promise<AgentInputItem | undefined>;
    private callName;
    clearSession(): Promise<void>;
    /**
     * The SDK's compaction hook (OpenAIResponsesCompactionAwareSession), run by the runner after a
     * turn is persisted: advances ctxd's rolling summary with Summarize when the history no longer
     * fits `compaction.triggerTokens` (or when `force`). getItems then returns the summary as a
     * system message followed by the items after the summary's watermark; the log keeps everything
     * (ListMessages, `getAllItems`).
     */
    runCompaction(args?: OpenAIResponsesCompactionArgs): Promise<OpenAIResponsesCompactionResult | null>;
    /** Every item of the log, ignoring the summary (the UI's full history). */
    getAllItems(): Promise<AgentInputItem[]>;
}
export {};
