import type { GenFile, GenMessage, GenService } from "@bufbuild/protobuf/codegenv2";
import type { BuildContextRequestSchema, BuildContextResponseSchema, SummarizeRequestSchema, SummarizeResponseSchema } from "./context_pb.js";
import type { ForkConversationRequestSchema, ForkConversationResponseSchema, GetConversationRequestSchema, GetConversationResponseSchema, ListConversationsRequestSchema, ListConversationsResponseSchema, RedactMessageRequestSchema, RedactMessageResponseSchema, RewindConversationRequestSchema, RewindConversationResponseSchema, UpdateConversationRequestSchema, UpdateConversationResponseSchema, WatchChangesRequestSchema, WatchChangesResponseSchema } from "./conversations_pb.js";
import type { GetWorkingMemoryRequestSchema, GetWorkingMemoryResponseSchema, UpdateWorkingMemoryRequestSchema, UpdateWorkingMemoryResponseSchema } from "./memory_pb.js";
import type { Format, Message as Message$1, NativeItems, Role, Tokenizer } from "./messages_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file ctxd/v1/context_service.proto.
 */
export declare const file_ctxd_v1_context_service: GenFile;
/**
 * Request of AppendMessage.
 *
 * @generated from message ctxd.v1.AppendMessageRequest
 */
export type AppendMessageRequest = Message<"ctxd.v1.AppendMessageRequest"> & {
    /**
     * Conversation to append to: 1 to 256 bytes of printable ASCII, chosen by the caller
     * (e.g. `project-42/project-manager`). Created on first append.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Messages to append, in order (1 to the server's per-request limit, 100 by default).
     * Exactly one of `messages` and `native` is set.
     *
     * @generated from field: repeated ctxd.v1.Message messages = 2;
     */
    messages: Message$1[];
    /**
     * Optional. A retry with the same key and the same messages returns the original result and
     * stores nothing; the same key with different messages is FAILED_PRECONDITION. Scoped to
     * the conversation; up to 256 bytes.
     *
     * @generated from field: string idempotency_key = 3;
     */
    idempotencyKey: string;
    /**
     * Optional optimistic concurrency: when set, the append happens only if the conversation's
     * last sequence equals this value (0 = the conversation is empty or new); otherwise ABORTED
     * with the current value.
     *
     * @generated from field: optional uint64 expected_last_sequence = 4;
     */
    expectedLastSequence?: bigint | undefined;
    /**
     * What the provider returned or what the backend would send, as that API's JSON: split into
     * messages (each keeping its own part of the JSON, `Message.native`) and appended as
     * `messages` would be, with the same validation, idempotency and guard. A path into the
     * JSON names what the format does not allow (INVALID_ARGUMENT, nothing stored).
     *
     * @generated from field: ctxd.v1.NativeItems native = 5;
     */
    native?: NativeItems | undefined;
};
/**
 * Describes the message ctxd.v1.AppendMessageRequest.
 * Use `create(AppendMessageRequestSchema)` to create a new message.
 */
export declare const AppendMessageRequestSchema: GenMessage<AppendMessageRequest>;
/**
 * Response of AppendMessage.
 *
 * @generated from message ctxd.v1.AppendMessageResponse
 */
export type AppendMessageResponse = Message<"ctxd.v1.AppendMessageResponse"> & {
    /**
     * Sequence assigned to the first stored message.
     *
     * @generated from field: uint64 first_sequence = 1;
     */
    firstSequence: bigint;
    /**
     * Sequence assigned to the last stored message.
     *
     * @generated from field: uint64 last_sequence = 2;
     */
    lastSequence: bigint;
    /**
     * The conversation's last sequence after this append (equals `last_sequence` unless this is
     * a replay).
     *
     * @generated from field: uint64 conversation_last_sequence = 3;
     */
    conversationLastSequence: bigint;
    /**
     * True when this is an idempotent replay: the original result is returned, nothing stored.
     *
     * @generated from field: bool replayed = 4;
     */
    replayed: boolean;
};
/**
 * Describes the message ctxd.v1.AppendMessageResponse.
 * Use `create(AppendMessageResponseSchema)` to create a new message.
 */
export declare const AppendMessageResponseSchema: GenMessage<AppendMessageResponse>;
/**
 * Request of ListMessages.
 *
 * @generated from message ctxd.v1.ListMessagesRequest
 */
export type ListMessagesRequest = Message<"ctxd.v1.ListMessagesRequest"> & {
    /**
     * Conversation to read.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Exclusive lower bound: messages with a greater sequence are returned (0 = from the start).
     *
     * @generated from field: uint64 after_sequence = 2;
     */
    afterSequence: bigint;
    /**
     * Maximum number of messages to return (0 = 100; capped at 1000). A page also holds only the
     * messages that fit in 3 MiB with `rendered` (within the 4 MiB gRPC clients accept by
     * default); a larger message comes alone: follow `next_after_sequence`.
     *
     * @generated from field: uint32 page_size = 3;
     */
    pageSize: number;
    /**
     * Optional: the page also rendered whole in this format as `rendered` (what an agent
     * framework's session store returns): every message in context in order, as history, with no
     * budget, trimming, cutting or pack parts (system prompt, summary, memory); UI-only messages
     * (`exclude_from_context`) are left out. Native data (reasoning, signatures, item ids) comes
     * back in its own provider's format only, every turn's. Unset: no rendering.
     *
     * @generated from field: optional ctxd.v1.Format format = 4;
     */
    format?: Format | undefined;
};
/**
 * Describes the message ctxd.v1.ListMessagesRequest.
 * Use `create(ListMessagesRequestSchema)` to create a new message.
 */
export declare const ListMessagesRequestSchema: GenMessage<ListMessagesRequest>;
/**
 * Response of ListMessages.
 *
 * @generated from message ctxd.v1.ListMessagesResponse
 */
export type ListMessagesResponse = Message<"ctxd.v1.ListMessagesResponse"> & {
    /**
     * Messages in sequence order, with server-set fields filled.
     *
     * @generated from field: repeated ctxd.v1.Message messages = 1;
     */
    messages: Message$1[];
    /**
     * Pass as `after_sequence` to get the next page; 0 when the end was reached.
     *
     * @generated from field: uint64 next_after_sequence = 2;
     */
    nextAfterSequence: bigint;
    /**
     * The page in the requested `format` (JSON text, as BuildContext's `rendered`); empty when no
     * format was asked for.
     *
     * @generated from field: string rendered = 3;
     */
    rendered: string;
};
/**
 * Describes the message ctxd.v1.ListMessagesResponse.
 * Use `create(ListMessagesResponseSchema)` to create a new message.
 */
export declare const ListMessagesResponseSchema: GenMessage<ListMessagesResponse>;
/**
 * Request of DeleteConversation.
 *
 * @generated from message ctxd.v1.DeleteConversationRequest
 */
export type DeleteConversationRequest = Message<"ctxd.v1.DeleteConversationRequest"> & {
    /**
     * Conversation to erase. NOT_FOUND when absent.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
};
/**
 * Describes the message ctxd.v1.DeleteConversationRequest.
 * Use `create(DeleteConversationRequestSchema)` to create a new message.
 */
export declare const DeleteConversationRequestSchema: GenMessage<DeleteConversationRequest>;
/**
 * Response of DeleteConversation.
 *
 * @generated from message ctxd.v1.DeleteConversationResponse
 */
export type DeleteConversationResponse = Message<"ctxd.v1.DeleteConversationResponse"> & {
    /**
     * Number of messages erased.
     *
     * @generated from field: uint64 messages_deleted = 1;
     */
    messagesDeleted: bigint;
};
/**
 * Describes the message ctxd.v1.DeleteConversationResponse.
 * Use `create(DeleteConversationResponseSchema)` to create a new message.
 */
export declare const DeleteConversationResponseSchema: GenMessage<DeleteConversationResponse>;
/**
 * Request of CountTokens.
 *
 * @generated from message ctxd.v1.CountTokensRequest
 */
export type CountTokensRequest = Message<"ctxd.v1.CountTokensRequest"> & {
    /**
     * Text to count.
     *
     * @generated from field: string text = 1;
     */
    text: string;
    /**
     * Tokenizer to count with (unspecified = the server default).
     *
     * @generated from field: ctxd.v1.Tokenizer tokenizer = 2;
     */
    tokenizer: Tokenizer;
};
/**
 * Describes the message ctxd.v1.CountTokensRequest.
 * Use `create(CountTokensRequestSchema)` to create a new message.
 */
export declare const CountTokensRequestSchema: GenMessage<CountTokensRequest>;
/**
 * Response of CountTokens.
 *
 * @generated from message ctxd.v1.CountTokensResponse
 */
export type CountTokensResponse = Message<"ctxd.v1.CountTokensResponse"> & {
    /**
     * Number of tokens of the text alone (no chat framing).
     *
     * @generated from field: uint32 tokens = 1;
     */
    tokens: number;
    /**
     * The tokenizer actually used (resolves TOKENIZER_UNSPECIFIED).
     *
     * @generated from field: ctxd.v1.Tokenizer tokenizer = 2;
     */
    tokenizer: Tokenizer;
};
/**
 * Describes the message ctxd.v1.CountTokensResponse.
 * Use `create(CountTokensResponseSchema)` to create a new message.
 */
export declare const CountTokensResponseSchema: GenMessage<CountTokensResponse>;
/**
 * Request of SearchMessages.
 *
 * @generated from message ctxd.v1.SearchMessagesRequest
 */
export type SearchMessagesRequest = Message<"ctxd.v1.SearchMessagesRequest"> & {
    /**
     * Conversation to search. An unknown conversation is NOT_FOUND.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * What to look for, in words (1 to 4,096 bytes): a message matches when it holds any of
     * the query's words after stemming (e.g. "invoice" finds "invoices"); stop words ("the",
     * "what") are ignored, and a query of stop words only finds nothing. Words are runs of
     * letters and digits: `INV-2291` is the words `inv` and `2291`. At most 32 distinct words
     * count.
     *
     * @generated from field: string query = 2;
     */
    query: string;
    /**
     * Hits per page (0 = 10; capped at 50). A page also stops once its messages reach 4 MiB.
     *
     * @generated from field: uint32 page_size = 3;
     */
    pageSize: number;
    /**
     * Only messages of these roles (empty = every role; at most 8 entries).
     *
     * @generated from field: repeated ctxd.v1.Role roles = 4;
     */
    roles: Role[];
    /**
     * Only tool calls of these tools and their results (empty = every message; at most 64
     * names).
     *
     * @generated from field: repeated string tool_names = 5;
     */
    toolNames: string[];
    /**
     * `next_page_token` of the previous page, with the same conversation, query and filters
     * (empty = the first page). Pages follow the ranking of the first page's log: messages
     * appended since are not found by later pages.
     *
     * @generated from field: string page_token = 6;
     */
    pageToken: string;
};
/**
 * Describes the message ctxd.v1.SearchMessagesRequest.
 * Use `create(SearchMessagesRequestSchema)` to create a new message.
 */
export declare const SearchMessagesRequestSchema: GenMessage<SearchMessagesRequest>;
/**
 * One message SearchMessages found.
 *
 * @generated from message ctxd.v1.SearchHit
 */
export type SearchHit = Message<"ctxd.v1.SearchHit"> & {
    /**
     * Its sequence (ListMessages returns it whole).
     *
     * @generated from field: uint64 sequence = 1;
     */
    sequence: bigint;
    /**
     * Its role.
     *
     * @generated from field: ctxd.v1.Role role = 2;
     */
    role: Role;
    /**
     * About 200 bytes of its text, white space collapsed, with `…` where text was left out:
     * the window (whole sentences where they fit) that holds the most of the query's weight,
     * rare words counting more than common ones. The text searched is the content, then each
     * tool call's name and arguments, then a failed call's message and partial output, up to
     * the first 64 KiB.
     *
     * @generated from field: string snippet = 3;
     */
    snippet: string;
    /**
     * Its rank score: BM25 with the conversation's own term statistics, or with embeddings on,
     * the fused score (docs/design.md, "Recall"). It orders the hits; its scale depends on the
     * query and the conversation, so compare it within one query only.
     *
     * @generated from field: float score = 4;
     */
    score: number;
    /**
     * For a tool call, the (first) tool it calls; for a tool result, the tool that returned
     * it; empty otherwise.
     *
     * @generated from field: string tool_name = 5;
     */
    toolName: string;
    /**
     * How much of the query it matches, from 0 to 1, comparable across queries: its BM25 score
     * as a share of the score of a mean-length message holding every query word once. A
     * message that only shares a participant's name or a greeting scores a few hundredths; one
     * holding the query's rarest words, 0.5 and more. 0 for a hit only the semantic half found.
     *
     * @generated from field: float relevance = 6;
     */
    relevance: number;
};
/**
 * Describes the message ctxd.v1.SearchHit.
 * Use `create(SearchHitSchema)` to create a new message.
 */
export declare const SearchHitSchema: GenMessage<SearchHit>;
/**
 * Response of SearchMessages.
 *
 * @generated from message ctxd.v1.SearchMessagesResponse
 */
export type SearchMessagesResponse = Message<"ctxd.v1.SearchMessagesResponse"> & {
    /**
     * Hits, best first (equal scores: newest first).
     *
     * @generated from field: repeated ctxd.v1.SearchHit hits = 1;
     */
    hits: SearchHit[];
    /**
     * Pass as `page_token` for the next page; empty when there is none.
     *
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
};
/**
 * Describes the message ctxd.v1.SearchMessagesResponse.
 * Use `create(SearchMessagesResponseSchema)` to create a new message.
 */
export declare const SearchMessagesResponseSchema: GenMessage<SearchMessagesResponse>;
/**
 * ContextService keeps LLM conversations and assembles the context for the next LLM call.
 *
 * Every call is scoped to a tenant (from the credential, or the `x-tenant-id` metadata header
 * when auth is disabled). Another tenant's conversation is indistinguishable from a missing one:
 * NOT_FOUND.
 *
 * @generated from service ctxd.v1.ContextService
 */
export declare const ContextService: GenService<{
    /**
     * Appends one or more messages to a conversation, atomically and in order, creating the
     * conversation on first use. Validates each message and the tool-call protocol; on any
     * violation nothing is stored (INVALID_ARGUMENT with field violations). Honours
     * `idempotency_key` and `expected_last_sequence`.
     *
     * @generated from rpc ctxd.v1.ContextService.AppendMessage
     */
    appendMessage: {
        methodKind: "unary";
        input: typeof AppendMessageRequestSchema;
        output: typeof AppendMessageResponseSchema;
    };
    /**
     * Returns the context pack for the next LLM call within a token budget: system prompt,
     * summary, working memory, the newest history that fits, pending messages. Tool-call groups
     * are never split. A pack whose messages and rendering pass the server's response limit
     * (CTXD_MAX_RESPONSE_BYTES, 16 MiB by default) is RESOURCE_EXHAUSTED: ask for a smaller budget.
     *
     * @generated from rpc ctxd.v1.ContextService.BuildContext
     */
    buildContext: {
        methodKind: "unary";
        input: typeof BuildContextRequestSchema;
        output: typeof BuildContextResponseSchema;
    };
    /**
     * Advances the conversation's rolling summary: server-side, prepare-only (bring your own
     * LLM), or caller-provided. The summary watermark only moves forward. A server-side summary
     * that fails changes nothing: UNAVAILABLE when retrying can help (endpoint down, timeout,
     * 429, 5xx), FAILED_PRECONDITION when it cannot (401/403, other 4xx, a truncated, empty or
     * oversized answer), with the endpoint's error text.
     *
     * @generated from rpc ctxd.v1.ContextService.Summarize
     */
    summarize: {
        methodKind: "unary";
        input: typeof SummarizeRequestSchema;
        output: typeof SummarizeResponseSchema;
    };
    /**
     * Returns the structured facts of the conversation, optionally refreshing them first. A
     * refresh whose extraction fails or is not of the schema changes nothing (statuses as for
     * Summarize).
     *
     * @generated from rpc ctxd.v1.ContextService.GetWorkingMemory
     */
    getWorkingMemory: {
        methodKind: "unary";
        input: typeof GetWorkingMemoryRequestSchema;
        output: typeof GetWorkingMemoryResponseSchema;
    };
    /**
     * Merges caller-extracted facts into the working memory, with optimistic concurrency.
     *
     * @generated from rpc ctxd.v1.ContextService.UpdateWorkingMemory
     */
    updateWorkingMemory: {
        methodKind: "unary";
        input: typeof UpdateWorkingMemoryRequestSchema;
        output: typeof UpdateWorkingMemoryResponseSchema;
    };
    /**
     * Pages through the full log in sequence order (full tool outputs, UI history).
     *
     * @generated from rpc ctxd.v1.ContextService.ListMessages
     */
    listMessages: {
        methodKind: "unary";
        input: typeof ListMessagesRequestSchema;
        output: typeof ListMessagesResponseSchema;
    };
    /**
     * Erases a conversation: messages, summary, memory and idempotency records.
     *
     * @generated from rpc ctxd.v1.ContextService.DeleteConversation
     */
    deleteConversation: {
        methodKind: "unary";
        input: typeof DeleteConversationRequestSchema;
        output: typeof DeleteConversationResponseSchema;
    };
    /**
     * Counts the tokens of a text with a named tokenizer, exactly as BuildContext counts content.
     *
     * @generated from rpc ctxd.v1.ContextService.CountTokens
     */
    countTokens: {
        methodKind: "unary";
        input: typeof CountTokensRequestSchema;
        output: typeof CountTokensResponseSchema;
    };
    /**
     * Pages through the tenant's conversations, newest activity first, filtered by labels (all
     * must match) and status. Never shows another tenant's.
     *
     * @generated from rpc ctxd.v1.ContextService.ListConversations
     */
    listConversations: {
        methodKind: "unary";
        input: typeof ListConversationsRequestSchema;
        output: typeof ListConversationsResponseSchema;
    };
    /**
     * Returns one conversation's resource: title, status, labels, expiry, counters, origin.
     *
     * @generated from rpc ctxd.v1.ContextService.GetConversation
     */
    getConversation: {
        methodKind: "unary";
        input: typeof GetConversationRequestSchema;
        output: typeof GetConversationResponseSchema;
    };
    /**
     * Sets the fields named by `update_mask` (title, status, labels, expire_time); with
     * `allow_missing`, creates the conversation when there is none.
     *
     * @generated from rpc ctxd.v1.ContextService.UpdateConversation
     */
    updateConversation: {
        methodKind: "unary";
        input: typeof UpdateConversationRequestSchema;
        output: typeof UpdateConversationResponseSchema;
    };
    /**
     * Creates a conversation holding a prefix of another (branching, "edit and regenerate"),
     * in one transaction. A fork copies at most CTXD_MAX_FORK_MESSAGES (10,000) messages, and a
     * tenant runs at most two forks at once on a replica (a third: RESOURCE_EXHAUSTED).
     *
     * @generated from rpc ctxd.v1.ContextService.ForkConversation
     */
    forkConversation: {
        methodKind: "unary";
        input: typeof ForkConversationRequestSchema;
        output: typeof ForkConversationResponseSchema;
    };
    /**
     * Replaces one message's content with a tombstone, and removes what was derived from it
     * (summaries covering it, memory items citing it, idempotency hashes), so the text cannot
     * come back.
     *
     * @generated from rpc ctxd.v1.ContextService.RedactMessage
     */
    redactMessage: {
        methodKind: "unary";
        input: typeof RedactMessageRequestSchema;
        output: typeof RedactMessageResponseSchema;
    };
    /**
     * Removes the messages after a sequence (an agent's undo, a framework session's `pop_item`)
     * and what was derived from them, in one transaction: summaries covering them, memory items
     * citing them, the idempotency records of the appends that stored them; calls they answered
     * are open again. The next append gets `after_sequence + 1`.
     *
     * @generated from rpc ctxd.v1.ContextService.RewindConversation
     */
    rewindConversation: {
        methodKind: "unary";
        input: typeof RewindConversationRequestSchema;
        output: typeof RewindConversationResponseSchema;
    };
    /**
     * Finds a conversation's messages by full-text relevance, best first: PostgreSQL text search
     * (`ts_rank` over the OR of the query's words, stemmed in `CTXD_SEARCH_LANGUAGE`), the same
     * ranking on the in-memory store. Redacted and rewound messages are never found.
     *
     * @generated from rpc ctxd.v1.ContextService.SearchMessages
     */
    searchMessages: {
        methodKind: "unary";
        input: typeof SearchMessagesRequestSchema;
        output: typeof SearchMessagesResponseSchema;
    };
    /**
     * Follows the tenant's changes (or one conversation's) from a cursor, without polling and
     * without missing one: every change committed after the cursor, at least once, each
     * conversation's in commit order, on any replica, across restarts and database outages
     * (docs/design.md, "Change feed"). Server streaming; idle streams get heartbeats; a replica
     * serves at most CTXD_MAX_WATCHERS streams (one more: RESOURCE_EXHAUSTED) and ends them with
     * UNAVAILABLE when it shuts down: resume from the last cursor.
     *
     * @generated from rpc ctxd.v1.ContextService.WatchChanges
     */
    watchChanges: {
        methodKind: "server_streaming";
        input: typeof WatchChangesRequestSchema;
        output: typeof WatchChangesResponseSchema;
    };
}>;
