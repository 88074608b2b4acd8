import type { AgentInputItem, CallModelInputFilterArgs, ModelInputData, OpenAIResponsesCompactionArgs, OpenAIResponsesCompactionAwareSession, OpenAIResponsesCompactionResult, RunContext, RunContextAwareSession } from "@openai/agents-core";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { DEFAULT_BUDGET_TOKENS, type CtxdClient } from "./core.js";
import { type Tokenizer } from "./gen/ctxd/v1/messages_pb.js";
import { HistoryPolicy, type BuildContextResponse, type ClearToolResultsSchema, type PreparedRequest, type ReasoningPolicy, type RecallSchema } from "./gen/ctxd/v1/context_pb.js";
type Json = Record<string, any>;
/** One SDK AgentInputItem as the Responses API input item the SDK would send for it. */
export declare function toResponsesItem(item: AgentInputItem): Json;
/** A Responses API item (as ListMessages/BuildContext render it) as the SDK's AgentInputItem. */
export declare function fromResponsesItem(wire: Json, callNames?: Map<string, string>): AgentInputItem;
/** The default `budgetTokens` (32,000; why: see its definition in core.ts and the README). */
export { DEFAULT_BUDGET_TOKENS };
type RecallInit = MessageInitShape<typeof RecallSchema>;
type ClearToolResultsInit = MessageInitShape<typeof ClearToolResultsSchema>;
export interface CtxdSessionCompactionOptions {
    /**
     * Compact automatically (default true): the runner calls runCompaction after each turn it
     * stores, and `callModelInputFilter` checks before each model call. Compaction runs when the
     * session's pack leaves out history that no summary covers (BuildContext `needs_summary` at
     * `budgetTokens`), or, with `triggerTokens`, as soon as the history after the summary no
     * longer fits that many tokens. Never on item counts. false: only `runCompaction({ force:
     * true })` summarizes. With `wholeLog: true`, automatic compaction needs `triggerTokens`.
     */
    auto?: boolean;
    /** Compact once the history after the summary passes this many tokens (0 or unset: the pack's `needs_summary`). */
    triggerTokens?: number;
    /** Tokens of newest history Summarize leaves verbatim (default: half of what getItems' pack holds, `budgetTokens - reserveTokens`). */
    keepRecentTokens?: number;
    /** Upper bound on the summary's tokens (default: an eighth of what getItems' pack holds, so that a summary never crowds out the history). */
    maxSummaryTokens?: number;
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
    /**
     * The tokens the model may be sent per call: the input items (the agent's instructions and tool
     * schemas go beside them). Default DEFAULT_BUDGET_TOKENS, 32,000.
     */
    budgetTokens?: number;
    /**
     * Part of `budgetTokens` that getItems leaves free, for what the runner adds to the history
     * it returns (the run's new input, and the calls and results of its tool loop). Default a
     * quarter of the budget. callModelInputFilter packs each call whole and needs none.
     */
    reserveTokens?: number;
    /** The model's tokenizer (default: the server's, o200k unless configured; TOKENIZER_APPROX for models without a known one). */
    tokenizer?: Tokenizer;
    /** Put the conversation's working memory in the packs when it has one (default true). */
    workingMemory?: boolean;
    /** Recall (SearchMessages) in the packs: true for the defaults (the newest user message as the query), or the Recall fields. Off unless set. */
    recall?: boolean | RecallInit;
    /** Clear older tool results in the packs (context editing). Off unless set. */
    clearToolResults?: ClearToolResultsInit;
    /** Where history begins when not all of it fits (default: cache-stable, so provider prompt caches hit). */
    historyPolicy?: HistoryPolicy;
    /** Which stored reasoning the packs carry (default: the current turn's). */
    reasoning?: ReasoningPolicy;
    /** Tool outputs longer than this are cut to head + tail in the packs (default 0: never). */
    toolOutputMaxTokens?: number;
    /**
     * getItems returns the whole log (after the rolling summary, which comes first as a system
     * item) instead of a pack, as before packing existed; callModelInputFilter then leaves the
     * runner's input alone. For a UI's history, exports and tests of what was stored; the model
     * should get packs.
     */
    wholeLog?: boolean;
    /** Compaction (Summarize); see CtxdSessionCompactionOptions. */
    compaction?: CtxdSessionCompactionOptions;
    /** Called with each pack the session hands out: from getItems ("getItems") or to a model call ("modelInput"). */
    onPack?: (pack: BuildContextResponse, use: "getItems" | "modelInput") => void;
    /** ListMessages page size (default 1000, the server's cap). */
    pageSize?: number;
}
/** What runCompaction did: the SDK's result (`usage`, zero: ctxd spends no model tokens of the run) and more. */
export interface CtxdCompactionResult extends OpenAIResponsesCompactionResult {
    /** True when a new summary was stored. */
    compacted: boolean;
    /** The summary's watermark afterwards: it covers sequences 1 to this (0: no summary). */
    throughSequence: bigint;
    /** Why nothing was summarized (when `compacted` is false). */
    reason?: string;
}
/**
 * An Agents SDK `Session` (with `OpenAIResponsesCompactionAwareSession` and
 * `RunContextAwareSession`) stored in ctxd, handing the model context packs.
 *
 *   const session = new CtxdSession({ sessionId: "user-42/support", client, budgetTokens: 32_000 });
 *   await run(agent, "Hello", { session, callModelInputFilter: session.callModelInputFilter });
 */
export declare class CtxdSession implements RunContextAwareSession, OpenAIResponsesCompactionAwareSession {
    readonly sessionId: string;
    readonly client: CtxdClient;
    /** The runner passes its RunContext to every session call (usage is read from it). */
    readonly acceptsRunContext: true;
    readonly budgetTokens: number;
    readonly reserveTokens: number;
    readonly wholeLog: boolean;
    private readonly options;
    private readonly compaction;
    private readonly pageSize;
    private run;
    constructor(options: CtxdSessionOptions);
    getSessionId(): Promise<string>;
    /** The BuildContext request of the session's packs. */
    private packRequest;
    /** What getItems' pack holds: the budget less the reserve. */
    private packRoom;
    /** The session's pack (undefined when the conversation does not exist yet). */
    private pack;
    /** The conversation's last sequence and summary watermark (0, 0 when it does not exist). */
    private state;
    /**
     * The history to give the model: the session's pack (BuildContext, FORMAT_OPENAI_RESPONSES,
     * within `budgetTokens`: summary, working memory, the newest history that fits, recall) as
     * Responses input items, or with `wholeLog` the log after the summary. `limit`: the newest
     * `limit` of those items, in order (the SDK's meaning).
     */
    getItems(limit?: number, runContext?: RunContext<any>): Promise<AgentInputItem[]>;
    private packItems;
    /** The runner's getItems starts a run: what it gave the model, and (for a new RunContext) fresh bookkeeping. */
    private beginRun;
    /** Items of messages after..through (inclusive), in order, per message. */
    private read;
    /** wholeLog's getItems: the summary as a system item, then the log after its watermark. */
    private logItems;
    /** The conversation's rolling summary as a system message item (what compaction leaves). */
    private summaryItem;
    /**
     * Appends items natively in order. The usage not stored yet goes on the last run of model
     * items (one assistant message), appended as a Responses `Response` object so that ctxd reads
     * it into Message.usage; the items before and after it go as input arrays, each append guarded
     * by the previous one's last sequence, and rewound if a later one fails (all or nothing).
     */
    private append;
    /**
     * Appends the items in one go (natively, as Responses input items), with the usage the run
     * reported since the last append on the newest assistant message (Message.usage). Items that
     * callModelInputFilter already stored during this run are not stored again.
     */
    addItems(items: AgentInputItem[], runContext?: RunContext<any>): Promise<void>;
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
    readonly callModelInputFilter: ({ modelData }: CallModelInputFilterArgs<any>) => Promise<ModelInputData>;
    /**
     * Removes and returns the newest item: RewindConversation removes the last message; when that
     * message held several items (a model turn's reasoning, text and calls are one ctxd message),
     * the others are appended again, guarded by expected_last_sequence.
     */
    popItem(_runContext?: RunContext<any>): Promise<AgentInputItem | undefined>;
    private callName;
    clearSession(_runContext?: RunContext<any>): Promise<void>;
    /**
     * The runner's replacement of history by a provider `compaction` item and what follows it:
     * ctxd keeps the log, so the items are appended (packs carry the compaction item, and the SDK
     * reads history from the newest one on). Without this, the SDK would clear the session and
     * write the replacement back.
     */
    replaceHistoryWithCompaction(items: AgentInputItem[], runContext?: RunContext<any>): Promise<void>;
    /** Whether automatic compaction is due (`pack`: the session's pack, when at hand). */
    private compactionDue;
    /** One Summarize (server, or prepare + the caller's model + provided): whether it stored a new summary. */
    private summarizeOnce;
    /** Summarize, keeping `keepRecentTokens` verbatim; forced, whatever can be (keeping nothing) when that left nothing. */
    private compact;
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
    runCompaction(args?: OpenAIResponsesCompactionArgs, _runContext?: RunContext<any>): Promise<CtxdCompactionResult | null>;
    /** Every item of the log, ignoring the summary (the UI's full history). */
    getAllItems(): Promise<AgentInputItem[]>;
}
