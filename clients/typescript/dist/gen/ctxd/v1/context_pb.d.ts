import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Attachment, Format, LlmError, Message as Message$1, Reasoning, Role, Tokenizer, ToolCall } from "./messages_pb.js";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file ctxd/v1/context.proto.
 */
export declare const file_ctxd_v1_context: GenFile;
/**
 * Token budget of a context pack.
 *
 * @generated from message ctxd.v1.Budget
 */
export type Budget = Message<"ctxd.v1.Budget"> & {
    /**
     * Tokens allowed for the whole pack, including the output reserve. Required (> 0, at most
     * 10,000,000).
     *
     * @generated from field: uint32 max_tokens = 1;
     */
    maxTokens: number;
    /**
     * Tokens kept free for the model's reply (0 = none).
     *
     * @generated from field: uint32 reserve_output_tokens = 2;
     */
    reserveOutputTokens: number;
    /**
     * Maximum number of history messages (0 = no limit).
     *
     * @generated from field: uint32 max_messages = 3;
     */
    maxMessages: number;
    /**
     * Maximum number of turns of history, a turn being a user message and everything answering
     * it (0 = no limit).
     *
     * @generated from field: uint32 max_turns = 4;
     */
    maxTurns: number;
};
/**
 * Describes the message ctxd.v1.Budget.
 * Use `create(BudgetSchema)` to create a new message.
 */
export declare const BudgetSchema: GenMessage<Budget>;
/**
 * Request of BuildContext.
 *
 * @generated from message ctxd.v1.BuildContextRequest
 */
export type BuildContextRequest = Message<"ctxd.v1.BuildContextRequest"> & {
    /**
     * Conversation to build the context of. An unknown conversation is NOT_FOUND.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Token budget. `max_tokens` is required.
     *
     * @generated from field: ctxd.v1.Budget budget = 2;
     */
    budget?: Budget | undefined;
    /**
     * Tokenizer of the target model (unspecified = the server default).
     *
     * @generated from field: ctxd.v1.Tokenizer tokenizer = 3;
     */
    tokenizer: Tokenizer;
    /**
     * The caller's dynamic system prompt, placed first. Never stored.
     *
     * @generated from field: string system_prompt = 4;
     */
    systemPrompt: string;
    /**
     * Messages not yet appended (e.g. the current user turn): placed last, always kept. A pending
     * tool result answers an open call of the log or a call of an earlier pending message, and
     * must complete that call's group (every id of the calling message answered, by the log or
     * by pending results); a pending tool call must be answered by a later pending result.
     * Pending results that answer a stored call are placed right after that call's results.
     *
     * @generated from field: repeated ctxd.v1.Message pending_messages = 5;
     */
    pendingMessages: Message$1[];
    /**
     * Leave the rolling summary out of the pack.
     *
     * @generated from field: bool omit_summary = 6;
     */
    omitSummary: boolean;
    /**
     * Leave the working memory out of the pack.
     *
     * @generated from field: bool omit_working_memory = 7;
     */
    omitWorkingMemory: boolean;
    /**
     * Tool results longer than this are cut to head + tail with a marker naming the sequence
     * (0 = never cut).
     *
     * @generated from field: uint32 tool_output_max_tokens = 8;
     */
    toolOutputMaxTokens: number;
    /**
     * Provider format of `rendered` (unspecified = OpenAI chat).
     *
     * @generated from field: ctxd.v1.Format format = 9;
     */
    format: Format;
    /**
     * Where history begins when not all of it fits (unspecified = cache-stable).
     *
     * @generated from field: ctxd.v1.HistoryPolicy history_policy = 10;
     */
    historyPolicy: HistoryPolicy;
    /**
     * Which reasoning of the format's provider goes into the pack (unspecified = current turn).
     *
     * @generated from field: ctxd.v1.ReasoningPolicy reasoning = 11;
     */
    reasoning: ReasoningPolicy;
    /**
     * Whether the pack may end on an assistant reply of the log (unspecified = the format's
     * rule: not for Anthropic and Gemini, whose current models refuse it).
     *
     * @generated from field: ctxd.v1.FinalAssistant final_assistant = 12;
     */
    finalAssistant: FinalAssistant;
    /**
     * Leave `messages` out of the response: only `rendered`, `stats`, `needs_summary` and
     * `previous_response_id` come back. For callers that send `rendered` as it is, this halves
     * the response (every text would otherwise come back twice) and what both sides spend
     * encoding and decoding it. The pack is the same.
     *
     * @generated from field: bool omit_messages = 13;
     */
    omitMessages: boolean;
    /**
     * Clear older tool results (context editing): their content becomes a placeholder naming
     * the tool, the tokens it held and the sequence ListMessages returns it at, so that the
     * budget holds more of the conversation. Off when unset.
     *
     * @generated from field: ctxd.v1.ClearToolResults clear_tool_results = 14;
     */
    clearToolResults?: ClearToolResults | undefined;
    /**
     * Recall (docs/design.md, "Recall"): the earlier messages most relevant to the current
     * question that the pack does not hold verbatim, quoted with their sequences in one user
     * turn placed last, so the pack's cache-stable beginning does not move. Off when unset.
     *
     * @generated from field: ctxd.v1.Recall recall = 15;
     */
    recall?: Recall | undefined;
};
/**
 * Describes the message ctxd.v1.BuildContextRequest.
 * Use `create(BuildContextRequestSchema)` to create a new message.
 */
export declare const BuildContextRequestSchema: GenMessage<BuildContextRequest>;
/**
 * What `BuildContextRequest.recall` adds to a pack. Its room is kept out of older history once
 * the mandatory part, the summary and the working memory are in (so history does not depend on
 * the question), and what it leaves unused stays unused. A pack that ends on an assistant reply
 * takes no recalled turn and keeps no room for one.
 *
 * @generated from message ctxd.v1.Recall
 */
export type Recall = Message<"ctxd.v1.Recall"> & {
    /**
     * What to look for, as SearchMessages takes it (empty = the text of the newest user
     * message, pending or stored; at most 4,096 bytes).
     *
     * @generated from field: string query = 1;
     */
    query: string;
    /**
     * Tokens the recalled turn may cost (0 = 1,000; at most half the budget).
     *
     * @generated from field: uint32 max_tokens = 2;
     */
    maxTokens: number;
    /**
     * Messages it may quote (0 = 40, the most): many short excerpts carry more of what a
     * question needs than a few long ones.
     *
     * @generated from field: uint32 max_items = 3;
     */
    maxItems: number;
};
/**
 * Describes the message ctxd.v1.Recall.
 * Use `create(RecallSchema)` to create a new message.
 */
export declare const RecallSchema: GenMessage<Recall>;
/**
 * Which tool results a pack clears (docs/design.md, "Context editing"). Groups stay whole:
 * a cleared result still answers its call. Results are cleared only when not all history
 * fits whole. With cache-stable history the cleared part begins where history begins (a
 * coarse turn anchor, which stays put until even cleared history no longer fits) and ends
 * where the verbatim part begins (a finer anchor): the verbatim part grows pack after pack
 * until its results no longer fit whole, then is cleared nearly all at once, near the end of
 * the pack where little of the provider's cache is lost. With newest-that-fits history every
 * result older than the `keep_recent` newest is cleared.
 *
 * @generated from message ctxd.v1.ClearToolResults
 */
export type ClearToolResults = Message<"ctxd.v1.ClearToolResults"> & {
    /**
     * The newest results that are never cleared (tool results of the current turn never are).
     *
     * @generated from field: uint32 keep_recent = 1;
     */
    keepRecent: number;
    /**
     * Tool names whose results are never cleared (at most 64 names).
     *
     * @generated from field: repeated string exclude_tools = 2;
     */
    excludeTools: string[];
    /**
     * Also replace the arguments of the calls whose results are cleared with `{}`.
     *
     * @generated from field: bool clear_arguments = 3;
     */
    clearArguments: boolean;
};
/**
 * Describes the message ctxd.v1.ClearToolResults.
 * Use `create(ClearToolResultsSchema)` to create a new message.
 */
export declare const ClearToolResultsSchema: GenMessage<ClearToolResults>;
/**
 * One message of a context pack.
 *
 * @generated from message ctxd.v1.ContextMessage
 */
export type ContextMessage = Message<"ctxd.v1.ContextMessage"> & {
    /**
     * Author role.
     *
     * @generated from field: ctxd.v1.Role role = 1;
     */
    role: Role;
    /**
     * Text content (possibly cut, see `tool_output_max_tokens`).
     *
     * @generated from field: string content = 2;
     */
    content: string;
    /**
     * Author name.
     *
     * @generated from field: string name = 3;
     */
    name: string;
    /**
     * Tool calls of an assistant message.
     *
     * @generated from field: repeated ctxd.v1.ToolCall tool_calls = 4;
     */
    toolCalls: ToolCall[];
    /**
     * The call a tool message answers.
     *
     * @generated from field: string tool_call_id = 5;
     */
    toolCallId: string;
    /**
     * Attachments of the message.
     *
     * @generated from field: repeated ctxd.v1.Attachment attachments = 6;
     */
    attachments: Attachment[];
    /**
     * A failed LLM call recorded on an assistant message.
     *
     * @generated from field: ctxd.v1.LlmError error = 7;
     */
    error?: LlmError | undefined;
    /**
     * The provider's response id of an assistant message.
     *
     * @generated from field: string response_id = 8;
     */
    responseId: string;
    /**
     * Which part of the pack this message is.
     *
     * @generated from field: ctxd.v1.ContextSource source = 9;
     */
    source: ContextSource;
    /**
     * Sequence in the log, for history messages; 0 otherwise.
     *
     * @generated from field: uint64 sequence = 10;
     */
    sequence: bigint;
    /**
     * Tokens this message costs in the pack, per-message overhead included (and its reasoning,
     * when the pack carries it).
     *
     * @generated from field: uint32 tokens = 11;
     */
    tokens: number;
    /**
     * The reasoning the pack carries for this message (only for the format's provider).
     *
     * @generated from field: repeated ctxd.v1.Reasoning reasoning = 12;
     */
    reasoning: Reasoning[];
    /**
     * OpenAI Responses item id of the text, when the pack carries it.
     *
     * @generated from field: string content_item_id = 13;
     */
    contentItemId: string;
    /**
     * Gemini thought signature of the text, when the pack carries it.
     *
     * @generated from field: string content_signature = 14;
     */
    contentSignature: string;
    /**
     * OpenAI Responses `phase` of the text (`Message.content_phase`), in FORMAT_OPENAI_RESPONSES
     * packs.
     *
     * @generated from field: string content_phase = 15;
     */
    contentPhase: string;
};
/**
 * Describes the message ctxd.v1.ContextMessage.
 * Use `create(ContextMessageSchema)` to create a new message.
 */
export declare const ContextMessageSchema: GenMessage<ContextMessage>;
/**
 * Accounting of a context pack.
 *
 * @generated from message ctxd.v1.ContextStats
 */
export type ContextStats = Message<"ctxd.v1.ContextStats"> & {
    /**
     * Tokens of the whole pack, including the reply priming.
     *
     * @generated from field: uint32 total_tokens = 1;
     */
    totalTokens: number;
    /**
     * Tokens of the system prompt section.
     *
     * @generated from field: uint32 system_prompt_tokens = 2;
     */
    systemPromptTokens: number;
    /**
     * Tokens of the summary section.
     *
     * @generated from field: uint32 summary_tokens = 3;
     */
    summaryTokens: number;
    /**
     * Tokens of the working memory section.
     *
     * @generated from field: uint32 working_memory_tokens = 4;
     */
    workingMemoryTokens: number;
    /**
     * Tokens of the truncation notice, and of the placeholder turn when there is one.
     *
     * @generated from field: uint32 truncation_notice_tokens = 5;
     */
    truncationNoticeTokens: number;
    /**
     * Tokens of the history section.
     *
     * @generated from field: uint32 history_tokens = 6;
     */
    historyTokens: number;
    /**
     * Tokens of the pending messages.
     *
     * @generated from field: uint32 pending_tokens = 7;
     */
    pendingTokens: number;
    /**
     * Tokens available to the pack: max_tokens - reserve_output_tokens.
     *
     * @generated from field: uint32 budget_tokens = 8;
     */
    budgetTokens: number;
    /**
     * History messages looked at.
     *
     * @generated from field: uint32 messages_considered = 9;
     */
    messagesConsidered: number;
    /**
     * History messages included.
     *
     * @generated from field: uint32 messages_included = 10;
     */
    messagesIncluded: number;
    /**
     * History messages after the summary watermark left out.
     *
     * @generated from field: uint32 messages_dropped = 11;
     */
    messagesDropped: number;
    /**
     * Complete tool-call groups left out whole.
     *
     * @generated from field: uint32 tool_groups_dropped = 12;
     */
    toolGroupsDropped: number;
    /**
     * Incomplete tool-call groups (results not yet appended) left out.
     *
     * @generated from field: uint32 incomplete_tool_groups = 13;
     */
    incompleteToolGroups: number;
    /**
     * Oldest history sequence included (0 = none).
     *
     * @generated from field: uint64 oldest_included_sequence = 14;
     */
    oldestIncludedSequence: bigint;
    /**
     * Last sequence covered by the summary (0 = no summary).
     *
     * @generated from field: uint64 summary_through_sequence = 15;
     */
    summaryThroughSequence: bigint;
    /**
     * Last sequence of the log.
     *
     * @generated from field: uint64 log_last_sequence = 16;
     */
    logLastSequence: bigint;
    /**
     * True when some tool output was cut to head + tail.
     *
     * @generated from field: bool truncated = 17;
     */
    truncated: boolean;
    /**
     * True when the mandatory parts alone exceed the budget (the pack carries them anyway). A
     * summary that does not fit even cut does not set it: the pack then holds no optional
     * history, `summary_through_sequence` is 0, and the truncation notice names the messages
     * left out, those the summary covers included, so that no message and the summary covering
     * it are both left out without the pack saying so.
     *
     * @generated from field: bool over_budget = 18;
     */
    overBudget: boolean;
    /**
     * Tokens at the start of this pack that the next call's pack is expected to repeat byte for
     * byte (and a provider to serve from its prompt cache), when the log only grows and the
     * request stays the same: with cache-stable history, everything before the pending
     * messages unless the next pack's history has to jump; with newest-that-fits history that
     * left some out, only what precedes the notice.
     *
     * @generated from field: uint32 stable_prefix_tokens = 19;
     */
    stablePrefixTokens: number;
    /**
     * Step between the turn anchors a cache-stable history may begin at, in approximate tokens
     * (0 when all history fits or the policy is newest-that-fits). History jumps forward by
     * about this much when the pack no longer fits.
     *
     * @generated from field: uint32 history_step_tokens = 20;
     */
    historyStepTokens: number;
    /**
     * Tokens of the reasoning, signatures and item ids the pack carries (part of the sections'
     * counts).
     *
     * @generated from field: uint32 reasoning_tokens = 21;
     */
    reasoningTokens: number;
    /**
     * Tokens of the format provider's reasoning that the pack's history messages carry in the
     * log but the pack leaves out (completed turns, see `ReasoningPolicy`).
     *
     * @generated from field: uint32 reasoning_tokens_omitted = 22;
     */
    reasoningTokensOmitted: number;
    /**
     * True when the summary did not fit whole: its beginning and end are in the pack, with a
     * marker saying that part of it was cut between them.
     *
     * @generated from field: bool summary_cut = 23;
     */
    summaryCut: boolean;
    /**
     * Assistant messages of the log left out because they would have ended the pack (see
     * `FinalAssistant`). They are not counted in `messages_dropped`, which counts older history.
     *
     * @generated from field: uint32 final_assistant_omitted = 24;
     */
    finalAssistantOmitted: number;
    /**
     * Tool results whose content the pack replaced with a placeholder (`clear_tool_results`).
     *
     * @generated from field: uint32 tool_results_cleared = 25;
     */
    toolResultsCleared: number;
    /**
     * Tokens the clearing saved: what the cleared results (and arguments) cost whole, less
     * what their placeholders cost.
     *
     * @generated from field: uint32 tool_result_tokens_cleared = 26;
     */
    toolResultTokensCleared: number;
    /**
     * Tokens of the recalled turn (`recall`).
     *
     * @generated from field: uint32 recall_tokens = 27;
     */
    recallTokens: number;
    /**
     * Messages the recalled turn quotes.
     *
     * @generated from field: uint32 messages_recalled = 28;
     */
    messagesRecalled: number;
    /**
     * The sequence of the message holding the provider's compaction the pack starts from (an
     * Anthropic `compaction` block, an OpenAI Responses `compaction` item or `/responses/compact`
     * window; packs of that provider's format only), 0 for none. Like the summary, it stands for
     * everything before it: nothing before it is sent, and it is not counted as dropped.
     *
     * @generated from field: uint64 compaction_sequence = 29;
     */
    compactionSequence: bigint;
};
/**
 * Describes the message ctxd.v1.ContextStats.
 * Use `create(ContextStatsSchema)` to create a new message.
 */
export declare const ContextStatsSchema: GenMessage<ContextStats>;
/**
 * Response of BuildContext.
 *
 * @generated from message ctxd.v1.BuildContextResponse
 */
export type BuildContextResponse = Message<"ctxd.v1.BuildContextResponse"> & {
    /**
     * The pack, in order.
     *
     * @generated from field: repeated ctxd.v1.ContextMessage messages = 1;
     */
    messages: ContextMessage[];
    /**
     * The pack as JSON text in the requested provider format, ready to send.
     *
     * @generated from field: string rendered = 2;
     */
    rendered: string;
    /**
     * Accounting of the pack.
     *
     * @generated from field: ctxd.v1.ContextStats stats = 3;
     */
    stats?: ContextStats | undefined;
    /**
     * True when dropped history exists that the summary does not cover: call Summarize.
     *
     * @generated from field: bool needs_summary = 4;
     */
    needsSummary: boolean;
    /**
     * The newest assistant `response_id` of the log (empty if none).
     *
     * @generated from field: string previous_response_id = 5;
     */
    previousResponseId: string;
};
/**
 * Describes the message ctxd.v1.BuildContextResponse.
 * Use `create(BuildContextResponseSchema)` to create a new message.
 */
export declare const BuildContextResponseSchema: GenMessage<BuildContextResponse>;
/**
 * A conversation's rolling summary.
 *
 * @generated from message ctxd.v1.Summary
 */
export type Summary = Message<"ctxd.v1.Summary"> & {
    /**
     * Summary text.
     *
     * @generated from field: string text = 1;
     */
    text: string;
    /**
     * Last sequence the summary covers: it covers 1..=through_sequence.
     *
     * @generated from field: uint64 through_sequence = 2;
     */
    throughSequence: bigint;
    /**
     * Tokens of the text under the request's tokenizer.
     *
     * @generated from field: uint32 tokens = 3;
     */
    tokens: number;
    /**
     * Which summarizer produced it (`extractive`, `openai`, `provided`).
     *
     * @generated from field: string summarizer = 4;
     */
    summarizer: string;
    /**
     * Version number, incremented on each change.
     *
     * @generated from field: uint64 version = 5;
     */
    version: bigint;
    /**
     * When this version was stored.
     *
     * @generated from field: google.protobuf.Timestamp updated_at = 6;
     */
    updatedAt?: Timestamp | undefined;
};
/**
 * Describes the message ctxd.v1.Summary.
 * Use `create(SummarySchema)` to create a new message.
 */
export declare const SummarySchema: GenMessage<Summary>;
/**
 * An LLM request prepared for the caller's own model (bring your own LLM).
 *
 * @generated from message ctxd.v1.PreparedRequest
 */
export type PreparedRequest = Message<"ctxd.v1.PreparedRequest"> & {
    /**
     * The request messages as OpenAI chat JSON text.
     *
     * @generated from field: string rendered = 1;
     */
    rendered: string;
    /**
     * The request messages, typed.
     *
     * @generated from field: repeated ctxd.v1.Message messages = 2;
     */
    messages: Message$1[];
    /**
     * The watermark the request starts from.
     *
     * @generated from field: uint64 base_through_sequence = 3;
     */
    baseThroughSequence: bigint;
    /**
     * The watermark the result would reach. A long backlog is covered in steps (a step reads at
     * most 4 MiB of messages): this may be short of the log's end, and the next request goes on
     * from here once the result is stored.
     *
     * @generated from field: uint64 through_sequence = 4;
     */
    throughSequence: bigint;
    /**
     * The `response_format` to send with the request, as OpenAI JSON text: for memory
     * extraction, `json_schema` with the extraction schema (the same schema is in the
     * instructions, for models without structured output); empty for summaries.
     *
     * @generated from field: string response_format = 5;
     */
    responseFormat: string;
    /**
     * The `max_tokens` to send with the request: the answer's size limit.
     *
     * @generated from field: uint32 max_output_tokens = 6;
     */
    maxOutputTokens: number;
    /**
     * The conversation's redactions and rewinds so far, when the request was prepared. Send it
     * back with the result (`expected_log_changes`): a result made from messages removed since
     * is refused (ABORTED), so that removed text never comes back through it.
     *
     * @generated from field: uint64 log_changes = 7;
     */
    logChanges: bigint;
};
/**
 * Describes the message ctxd.v1.PreparedRequest.
 * Use `create(PreparedRequestSchema)` to create a new message.
 */
export declare const PreparedRequestSchema: GenMessage<PreparedRequest>;
/**
 * Request of Summarize.
 *
 * @generated from message ctxd.v1.SummarizeRequest
 */
export type SummarizeRequest = Message<"ctxd.v1.SummarizeRequest"> & {
    /**
     * Conversation to summarize.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Tokens of newest history to leave verbatim; the cut snaps back to a turn or tool-group
     * boundary.
     *
     * @generated from field: uint32 keep_recent_tokens = 2;
     */
    keepRecentTokens: number;
    /**
     * Tokenizer for counting (unspecified = the server default).
     *
     * @generated from field: ctxd.v1.Tokenizer tokenizer = 3;
     */
    tokenizer: Tokenizer;
    /**
     * How to produce the summary (unspecified = server).
     *
     * @generated from field: ctxd.v1.SummarizeMode mode = 4;
     */
    mode: SummarizeMode;
    /**
     * SUMMARIZE_MODE_PROVIDED: the caller's summary text.
     *
     * @generated from field: string summary_text = 5;
     */
    summaryText: string;
    /**
     * SUMMARIZE_MODE_PROVIDED: the last sequence the caller's summary covers.
     *
     * @generated from field: uint64 through_sequence = 6;
     */
    throughSequence: bigint;
    /**
     * The watermark the caller based its summary on; ABORTED if the stored one moved.
     *
     * @generated from field: optional uint64 expected_through_sequence = 7;
     */
    expectedThroughSequence?: bigint | undefined;
    /**
     * Upper bound on the summary's tokens (0 = the server default).
     *
     * @generated from field: uint32 max_summary_tokens = 8;
     */
    maxSummaryTokens: number;
    /**
     * SUMMARIZE_MODE_PROVIDED: the `log_changes` of the PREPARE the summary was made from;
     * ABORTED, with the current value, if messages were redacted or rewound since (checked by
     * the store under the removals' lock, in the transaction that stores the summary). Unset
     * counts as 0: a summary of a conversation that was ever redacted or rewound is refused
     * without it (nothing tells what the caller's model read).
     *
     * @generated from field: optional uint64 expected_log_changes = 9;
     */
    expectedLogChanges?: bigint | undefined;
};
/**
 * Describes the message ctxd.v1.SummarizeRequest.
 * Use `create(SummarizeRequestSchema)` to create a new message.
 */
export declare const SummarizeRequestSchema: GenMessage<SummarizeRequest>;
/**
 * Response of Summarize.
 *
 * @generated from message ctxd.v1.SummarizeResponse
 */
export type SummarizeResponse = Message<"ctxd.v1.SummarizeResponse"> & {
    /**
     * The current summary (after the change, if any).
     *
     * @generated from field: ctxd.v1.Summary summary = 1;
     */
    summary?: Summary | undefined;
    /**
     * True when a new summary version was stored.
     *
     * @generated from field: bool changed = 2;
     */
    changed: boolean;
    /**
     * SUMMARIZE_MODE_PREPARE: the request to run on the caller's model.
     *
     * @generated from field: ctxd.v1.PreparedRequest prepared = 3;
     */
    prepared?: PreparedRequest | undefined;
};
/**
 * Describes the message ctxd.v1.SummarizeResponse.
 * Use `create(SummarizeResponseSchema)` to create a new message.
 */
export declare const SummarizeResponseSchema: GenMessage<SummarizeResponse>;
/**
 * Which stored reasoning goes into a pack. Reasoning (and signatures and item ids) only ever
 * goes to the provider that produced it; other formats leave it out.
 *
 * @generated from enum ctxd.v1.ReasoningPolicy
 */
export declare enum ReasoningPolicy {
    /**
     * Current turn (the default).
     *
     * @generated from enum value: REASONING_POLICY_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Reasoning of the current turn only: the messages after the newest user message that opens
     * a turn (one typed while tools ran, rendered with their results, does not), where a tool
     * loop is under way and the providers require it back. Reasoning of completed turns
     * is left out (the providers ignore it there, and it is often larger than the replies);
     * `ContextStats.reasoning_tokens_omitted` counts what that saved.
     *
     * @generated from enum value: REASONING_POLICY_CURRENT_TURN = 1;
     */
    CURRENT_TURN = 1,
    /**
     * All stored reasoning of the provider, e.g. for models that keep earlier turns' thinking.
     *
     * @generated from enum value: REASONING_POLICY_ALL = 2;
     */
    ALL = 2
}
/**
 * Describes the enum ctxd.v1.ReasoningPolicy.
 */
export declare const ReasoningPolicySchema: GenEnum<ReasoningPolicy>;
/**
 * Where a message of a context pack comes from.
 *
 * @generated from enum ctxd.v1.ContextSource
 */
export declare enum ContextSource {
    /**
     * Not set; never returned.
     *
     * @generated from enum value: CONTEXT_SOURCE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * The caller's `system_prompt`.
     *
     * @generated from enum value: CONTEXT_SOURCE_SYSTEM_PROMPT = 1;
     */
    SYSTEM_PROMPT = 1,
    /**
     * The conversation's rolling summary.
     *
     * @generated from enum value: CONTEXT_SOURCE_SUMMARY = 2;
     */
    SUMMARY = 2,
    /**
     * The rendered working memory.
     *
     * @generated from enum value: CONTEXT_SOURCE_WORKING_MEMORY = 3;
     */
    WORKING_MEMORY = 3,
    /**
     * A notice that older history was left out and no summary covers it.
     *
     * @generated from enum value: CONTEXT_SOURCE_TRUNCATION_NOTICE = 4;
     */
    TRUNCATION_NOTICE = 4,
    /**
     * A message of the stored log.
     *
     * @generated from enum value: CONTEXT_SOURCE_HISTORY = 5;
     */
    HISTORY = 5,
    /**
     * One of the request's `pending_messages`.
     *
     * @generated from enum value: CONTEXT_SOURCE_PENDING = 6;
     */
    PENDING = 6,
    /**
     * A fixed user turn ("[The conversation continues from earlier messages.]") that opens an
     * Anthropic or Gemini pack whose first message would otherwise not be a user turn (an
     * assistant opener, history that starts inside a turn, or no message at all): both APIs
     * require one. Or the fixed user turn "[The conversation continues.]" that closes a pack
     * which may not end on an assistant message (see `FinalAssistant`) when a pinned one would
     * end it.
     *
     * @generated from enum value: CONTEXT_SOURCE_PLACEHOLDER = 7;
     */
    PLACEHOLDER = 7,
    /**
     * Earlier messages that `BuildContextRequest.recall` found for the current question, quoted
     * in one user turn at the end of the pack.
     *
     * @generated from enum value: CONTEXT_SOURCE_RECALL = 8;
     */
    RECALL = 8
}
/**
 * Describes the enum ctxd.v1.ContextSource.
 */
export declare const ContextSourceSchema: GenEnum<ContextSource>;
/**
 * Where history begins when not all of it fits the budget (see docs/design.md, "Cache-stable
 * packs").
 *
 * @generated from enum ctxd.v1.HistoryPolicy
 */
export declare enum HistoryPolicy {
    /**
     * Cache-stable (the default).
     *
     * @generated from enum value: HISTORY_POLICY_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * History begins at a turn anchor: a turn boundary fixed by the log alone, which stays put
     * from call to call while the pack fits and then jumps forward by one step
     * (`ContextStats.history_step_tokens`). The pack's beginning (system prompt, summary,
     * memory, notice, oldest history) repeats byte for byte between jumps, so provider prompt
     * caches hit; packs use less of the budget than newest-that-fits, by half a step on average.
     *
     * @generated from enum value: HISTORY_POLICY_CACHE_STABLE = 1;
     */
    CACHE_STABLE = 1,
    /**
     * The newest history that fits: the most recent context, but once history overflows, the
     * pack's beginning changes on every call and nothing after the system prompt is cached.
     *
     * @generated from enum value: HISTORY_POLICY_NEWEST = 2;
     */
    NEWEST = 2
}
/**
 * Describes the enum ctxd.v1.HistoryPolicy.
 */
export declare const HistoryPolicySchema: GenEnum<HistoryPolicy>;
/**
 * Whether a pack may end on an assistant reply of the log: a final assistant message with no
 * tool calls, which a pack ends on when it is built right after a reply, after a failed LLM
 * call (`Message.error`), or after a note typed while tools ran. Claude 4.6 and later refuse a
 * request that ends on an assistant message with a 400 ("This model does not support
 * assistant message prefill"), and Gemini 3 models one that ends on a model turn ("Requests
 * ending with a model turn are not supported"). Older Claude models continue such a message
 * as a prefill; the OpenAI APIs take it as a turn like any other.
 *
 * @generated from enum ctxd.v1.FinalAssistant
 */
export declare enum FinalAssistant {
    /**
     * The format's rule (the default): left out for FORMAT_ANTHROPIC_MESSAGES and FORMAT_GEMINI,
     * kept for the OpenAI formats.
     *
     * @generated from enum value: FINAL_ASSISTANT_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Kept: the pack may end on it (a prefill for models that take one).
     *
     * @generated from enum value: FINAL_ASSISTANT_KEEP = 1;
     */
    KEEP = 1,
    /**
     * Left out: the pack ends on the user turn or the tool results before it, so the model
     * answers them afresh (a retry after a failed call, a regenerated reply).
     * `ContextStats.final_assistant_omitted` counts the messages left out; the next pack, built
     * after a new user message, includes them. A pending assistant message (the caller's own
     * prefill) is never left out and still ends the pack. A pinned one is not left out either:
     * the placeholder user turn "[The conversation continues.]" follows it. The replies are left
     * out before the budget is shared out, so a long one (a timed-out answer's partial output)
     * leaves room for the history, summary and memory it would have pushed out.
     * `previous_response_id` still names the newest response of the log, which may be a reply
     * left out here.
     *
     * @generated from enum value: FINAL_ASSISTANT_OMIT = 2;
     */
    OMIT = 2
}
/**
 * Describes the enum ctxd.v1.FinalAssistant.
 */
export declare const FinalAssistantSchema: GenEnum<FinalAssistant>;
/**
 * How Summarize produces the summary.
 *
 * @generated from enum ctxd.v1.SummarizeMode
 */
export declare enum SummarizeMode {
    /**
     * Same as SUMMARIZE_MODE_SERVER.
     *
     * @generated from enum value: SUMMARIZE_MODE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Run the server's configured summarizer and store the result.
     *
     * @generated from enum value: SUMMARIZE_MODE_SERVER = 1;
     */
    SERVER = 1,
    /**
     * Store nothing; return the ready-to-run LLM request for the caller's own model.
     *
     * @generated from enum value: SUMMARIZE_MODE_PREPARE = 2;
     */
    PREPARE = 2,
    /**
     * Store the caller's `summary_text`, produced with its own model, for `through_sequence`.
     *
     * @generated from enum value: SUMMARIZE_MODE_PROVIDED = 3;
     */
    PROVIDED = 3
}
/**
 * Describes the enum ctxd.v1.SummarizeMode.
 */
export declare const SummarizeModeSchema: GenEnum<SummarizeMode>;
