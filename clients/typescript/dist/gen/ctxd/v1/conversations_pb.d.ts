import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Message as Message$1, Usage } from "./messages_pb.js";
import type { FieldMask, Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file ctxd/v1/conversations.proto.
 */
export declare const file_ctxd_v1_conversations: GenFile;
/**
 * A conversation as a resource. The first append creates it (or UpdateConversation with
 * `allow_missing`).
 *
 * @generated from message ctxd.v1.Conversation
 */
export type Conversation = Message<"ctxd.v1.Conversation"> & {
    /**
     * Its id.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Caller-set title: up to 1024 bytes, no control characters.
     *
     * @generated from field: string title = 2;
     */
    title: string;
    /**
     * Caller-set status.
     *
     * @generated from field: ctxd.v1.ConversationStatus status = 3;
     */
    status: ConversationStatus;
    /**
     * Caller-set labels: up to 64; keys of 1 to 63 bytes, a lowercase letter then lowercase
     * letters, digits, `_`, `-` or `.`; values up to 256 bytes, no control characters.
     *
     * @generated from field: map<string, string> labels = 4;
     */
    labels: {
        [key: string]: string;
    };
    /**
     * Output only. When it was created.
     *
     * @generated from field: google.protobuf.Timestamp created_at = 5;
     */
    createdAt?: Timestamp | undefined;
    /**
     * Output only. Its last append, fork or update: the order of ListConversations
     * (microsecond resolution).
     *
     * @generated from field: google.protobuf.Timestamp updated_at = 6;
     */
    updatedAt?: Timestamp | undefined;
    /**
     * Output only. The log's last sequence (0 when empty).
     *
     * @generated from field: uint64 last_sequence = 7;
     */
    lastSequence: bigint;
    /**
     * Output only. The summary's watermark (0 without a summary).
     *
     * @generated from field: uint64 summary_through_sequence = 8;
     */
    summaryThroughSequence: bigint;
    /**
     * Output only. The working memory's version (0 without one).
     *
     * @generated from field: uint64 memory_version = 9;
     */
    memoryVersion: bigint;
    /**
     * When retention deletes it (with everything it holds); unset: kept until the server's
     * inactivity rule (CTXD_RETENTION_INACTIVE_SECS, off by default) applies. An explicit time
     * overrides the inactivity rule. From this time until the sweep deletes it, the conversation
     * takes no more messages (AppendMessage: FAILED_PRECONDITION, reason CONVERSATION_EXPIRED).
     *
     * @generated from field: google.protobuf.Timestamp expire_time = 10;
     */
    expireTime?: Timestamp | undefined;
    /**
     * Output only. Where it was forked from, for a fork.
     *
     * @generated from field: ctxd.v1.ForkOrigin forked_from = 11;
     */
    forkedFrom?: ForkOrigin | undefined;
    /**
     * Output only. The `usage` of the messages the log holds, summed (a rewind removes that of
     * the messages it removes; a fork starts with that of the messages it copied).
     *
     * @generated from field: ctxd.v1.Usage usage = 12;
     */
    usage?: Usage | undefined;
};
/**
 * Describes the message ctxd.v1.Conversation.
 * Use `create(ConversationSchema)` to create a new message.
 */
export declare const ConversationSchema: GenMessage<Conversation>;
/**
 * The conversation and sequence a fork copied.
 *
 * @generated from message ctxd.v1.ForkOrigin
 */
export type ForkOrigin = Message<"ctxd.v1.ForkOrigin"> & {
    /**
     * The source conversation.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * The fork holds the source's messages 1..=sequence.
     *
     * @generated from field: uint64 sequence = 2;
     */
    sequence: bigint;
};
/**
 * Describes the message ctxd.v1.ForkOrigin.
 * Use `create(ForkOriginSchema)` to create a new message.
 */
export declare const ForkOriginSchema: GenMessage<ForkOrigin>;
/**
 * Request of GetConversation.
 *
 * @generated from message ctxd.v1.GetConversationRequest
 */
export type GetConversationRequest = Message<"ctxd.v1.GetConversationRequest"> & {
    /**
     * Conversation to read. NOT_FOUND when absent.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
};
/**
 * Describes the message ctxd.v1.GetConversationRequest.
 * Use `create(GetConversationRequestSchema)` to create a new message.
 */
export declare const GetConversationRequestSchema: GenMessage<GetConversationRequest>;
/**
 * Response of GetConversation.
 *
 * @generated from message ctxd.v1.GetConversationResponse
 */
export type GetConversationResponse = Message<"ctxd.v1.GetConversationResponse"> & {
    /**
     * The conversation.
     *
     * @generated from field: ctxd.v1.Conversation conversation = 1;
     */
    conversation?: Conversation | undefined;
};
/**
 * Describes the message ctxd.v1.GetConversationResponse.
 * Use `create(GetConversationResponseSchema)` to create a new message.
 */
export declare const GetConversationResponseSchema: GenMessage<GetConversationResponse>;
/**
 * Request of UpdateConversation.
 *
 * @generated from message ctxd.v1.UpdateConversationRequest
 */
export type UpdateConversationRequest = Message<"ctxd.v1.UpdateConversationRequest"> & {
    /**
     * The conversation (by `conversation_id`) and the new values of the fields in `update_mask`.
     *
     * @generated from field: ctxd.v1.Conversation conversation = 1;
     */
    conversation?: Conversation | undefined;
    /**
     * Fields to set: `title`, `status`, `labels` (the whole map), `expire_time` (unset clears
     * it). Required; other paths are INVALID_ARGUMENT.
     *
     * @generated from field: google.protobuf.FieldMask update_mask = 2;
     */
    updateMask?: FieldMask | undefined;
    /**
     * Creates an empty conversation when there is none (otherwise NOT_FOUND).
     *
     * @generated from field: bool allow_missing = 3;
     */
    allowMissing: boolean;
};
/**
 * Describes the message ctxd.v1.UpdateConversationRequest.
 * Use `create(UpdateConversationRequestSchema)` to create a new message.
 */
export declare const UpdateConversationRequestSchema: GenMessage<UpdateConversationRequest>;
/**
 * Response of UpdateConversation.
 *
 * @generated from message ctxd.v1.UpdateConversationResponse
 */
export type UpdateConversationResponse = Message<"ctxd.v1.UpdateConversationResponse"> & {
    /**
     * The conversation after the update.
     *
     * @generated from field: ctxd.v1.Conversation conversation = 1;
     */
    conversation?: Conversation | undefined;
};
/**
 * Describes the message ctxd.v1.UpdateConversationResponse.
 * Use `create(UpdateConversationResponseSchema)` to create a new message.
 */
export declare const UpdateConversationResponseSchema: GenMessage<UpdateConversationResponse>;
/**
 * Request of ListConversations.
 *
 * @generated from message ctxd.v1.ListConversationsRequest
 */
export type ListConversationsRequest = Message<"ctxd.v1.ListConversationsRequest"> & {
    /**
     * Conversations per page (0 = 50; capped at 1000).
     *
     * @generated from field: uint32 page_size = 1;
     */
    pageSize: number;
    /**
     * `next_page_token` of the previous page, with the same filters; empty for the first page.
     *
     * @generated from field: string page_token = 2;
     */
    pageToken: string;
    /**
     * Only conversations carrying all of these labels with these values.
     *
     * @generated from field: map<string, string> labels = 3;
     */
    labels: {
        [key: string]: string;
    };
    /**
     * Only conversations with this status (UNSPECIFIED: any).
     *
     * @generated from field: ctxd.v1.ConversationStatus status = 4;
     */
    status: ConversationStatus;
};
/**
 * Describes the message ctxd.v1.ListConversationsRequest.
 * Use `create(ListConversationsRequestSchema)` to create a new message.
 */
export declare const ListConversationsRequestSchema: GenMessage<ListConversationsRequest>;
/**
 * Response of ListConversations.
 *
 * @generated from message ctxd.v1.ListConversationsResponse
 */
export type ListConversationsResponse = Message<"ctxd.v1.ListConversationsResponse"> & {
    /**
     * The tenant's conversations, newest activity first (then by id, descending). Paging is by
     * keyset: a conversation not touched while paging appears exactly once; one appended to
     * meanwhile moves to the front and may be seen twice or not at all.
     *
     * @generated from field: repeated ctxd.v1.Conversation conversations = 1;
     */
    conversations: Conversation[];
    /**
     * Token of the next page; empty on the last page.
     *
     * @generated from field: string next_page_token = 2;
     */
    nextPageToken: string;
};
/**
 * Describes the message ctxd.v1.ListConversationsResponse.
 * Use `create(ListConversationsResponseSchema)` to create a new message.
 */
export declare const ListConversationsResponseSchema: GenMessage<ListConversationsResponse>;
/**
 * Request of ForkConversation.
 *
 * @generated from message ctxd.v1.ForkConversationRequest
 */
export type ForkConversationRequest = Message<"ctxd.v1.ForkConversationRequest"> & {
    /**
     * The conversation to fork.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * The fork holds messages 1..=through_sequence (at least 1, at most the last sequence).
     * INVALID_ARGUMENT inside a tool-call group: a call at or before it answered after it.
     *
     * @generated from field: uint64 through_sequence = 2;
     */
    throughSequence: bigint;
    /**
     * The new conversation's id; ALREADY_EXISTS when taken.
     *
     * @generated from field: string new_conversation_id = 3;
     */
    newConversationId: string;
};
/**
 * Describes the message ctxd.v1.ForkConversationRequest.
 * Use `create(ForkConversationRequestSchema)` to create a new message.
 */
export declare const ForkConversationRequestSchema: GenMessage<ForkConversationRequest>;
/**
 * Response of ForkConversation.
 *
 * @generated from message ctxd.v1.ForkConversationResponse
 */
export type ForkConversationResponse = Message<"ctxd.v1.ForkConversationResponse"> & {
    /**
     * The fork: the messages, the newest summary version within them, the working-memory items
     * whose sources all lie within them, the source's title and labels; independent afterwards.
     *
     * @generated from field: ctxd.v1.Conversation conversation = 1;
     */
    conversation?: Conversation | undefined;
};
/**
 * Describes the message ctxd.v1.ForkConversationResponse.
 * Use `create(ForkConversationResponseSchema)` to create a new message.
 */
export declare const ForkConversationResponseSchema: GenMessage<ForkConversationResponse>;
/**
 * Request of RedactMessage.
 *
 * @generated from message ctxd.v1.RedactMessageRequest
 */
export type RedactMessageRequest = Message<"ctxd.v1.RedactMessageRequest"> & {
    /**
     * The conversation.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * The message to redact (NOT_FOUND when there is none).
     *
     * @generated from field: uint64 sequence = 2;
     */
    sequence: bigint;
};
/**
 * Describes the message ctxd.v1.RedactMessageRequest.
 * Use `create(RedactMessageRequestSchema)` to create a new message.
 */
export declare const RedactMessageRequestSchema: GenMessage<RedactMessageRequest>;
/**
 * Request of RewindConversation.
 *
 * @generated from message ctxd.v1.RewindConversationRequest
 */
export type RewindConversationRequest = Message<"ctxd.v1.RewindConversationRequest"> & {
    /**
     * The conversation (NOT_FOUND when there is none).
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Messages after this sequence are removed; 0 removes them all. Past the end is
     * INVALID_ARGUMENT; the last sequence removes nothing.
     *
     * @generated from field: uint64 after_sequence = 2;
     */
    afterSequence: bigint;
    /**
     * Optional optimistic concurrency: when set, the rewind happens only if the conversation's
     * last sequence equals this value; otherwise ABORTED with the current value.
     *
     * @generated from field: optional uint64 expected_last_sequence = 3;
     */
    expectedLastSequence?: bigint | undefined;
};
/**
 * Describes the message ctxd.v1.RewindConversationRequest.
 * Use `create(RewindConversationRequestSchema)` to create a new message.
 */
export declare const RewindConversationRequestSchema: GenMessage<RewindConversationRequest>;
/**
 * Response of RewindConversation.
 *
 * @generated from message ctxd.v1.RewindConversationResponse
 */
export type RewindConversationResponse = Message<"ctxd.v1.RewindConversationResponse"> & {
    /**
     * Messages removed.
     *
     * @generated from field: uint64 messages_removed = 1;
     */
    messagesRemoved: bigint;
    /**
     * The conversation's last sequence afterwards (`after_sequence`).
     *
     * @generated from field: uint64 last_sequence = 2;
     */
    lastSequence: bigint;
    /**
     * Summary versions removed because they covered removed messages.
     *
     * @generated from field: uint64 summaries_removed = 3;
     */
    summariesRemoved: bigint;
    /**
     * The summary watermark afterwards.
     *
     * @generated from field: uint64 summary_through_sequence = 4;
     */
    summaryThroughSequence: bigint;
    /**
     * The working-memory version afterwards (a new one when there is a memory).
     *
     * @generated from field: uint64 memory_version = 5;
     */
    memoryVersion: bigint;
};
/**
 * Describes the message ctxd.v1.RewindConversationResponse.
 * Use `create(RewindConversationResponseSchema)` to create a new message.
 */
export declare const RewindConversationResponseSchema: GenMessage<RewindConversationResponse>;
/**
 * Response of RedactMessage.
 *
 * @generated from message ctxd.v1.RedactMessageResponse
 */
export type RedactMessageResponse = Message<"ctxd.v1.RedactMessageResponse"> & {
    /**
     * The message as stored now: content `[redacted]`, tool arguments `{}`, no attachments or
     * error; role, name, tool-call ids and names, the answered call, flags, metadata and
     * response id kept.
     *
     * @generated from field: ctxd.v1.Message message = 1;
     */
    message?: Message$1 | undefined;
    /**
     * Summary versions removed because they covered the message.
     *
     * @generated from field: uint64 summaries_removed = 2;
     */
    summariesRemoved: bigint;
    /**
     * The summary watermark afterwards (it moves back when summaries were removed).
     *
     * @generated from field: uint64 summary_through_sequence = 3;
     */
    summaryThroughSequence: bigint;
    /**
     * The working-memory version afterwards (a new one when items citing the message went).
     *
     * @generated from field: uint64 memory_version = 4;
     */
    memoryVersion: bigint;
};
/**
 * Describes the message ctxd.v1.RedactMessageResponse.
 * Use `create(RedactMessageResponseSchema)` to create a new message.
 */
export declare const RedactMessageResponseSchema: GenMessage<RedactMessageResponse>;
/**
 * Request of WatchChanges.
 *
 * @generated from message ctxd.v1.WatchChangesRequest
 */
export type WatchChangesRequest = Message<"ctxd.v1.WatchChangesRequest"> & {
    /**
     * Resume after this cursor (from a `Change` or a `heartbeat`): every change committed after
     * it is delivered. Empty: from now (at least once: a change that committed a moment before the
     * call, while an older transaction still ran, may come too). A cursor older than the changes kept
     * (CTXD_CHANGES_RETENTION, 7 days by default) is OUT_OF_RANGE, with the oldest cursor still
     * held in an ErrorInfo (`oldest_cursor`): resync, then go on from there.
     *
     * @generated from field: string after_cursor = 1;
     */
    afterCursor: string;
    /**
     * Only this conversation's changes; empty: every conversation of the tenant.
     *
     * @generated from field: string conversation_id = 2;
     */
    conversationId: string;
    /**
     * Whether APPENDED changes carry their messages (as the log holds them when delivered: a
     * message redacted since comes as its tombstone, one rewound since does not come).
     *
     * @generated from field: bool include_messages = 3;
     */
    includeMessages: boolean;
};
/**
 * Describes the message ctxd.v1.WatchChangesRequest.
 * Use `create(WatchChangesRequestSchema)` to create a new message.
 */
export declare const WatchChangesRequestSchema: GenMessage<WatchChangesRequest>;
/**
 * One recorded change.
 *
 * @generated from message ctxd.v1.Change
 */
export type Change = Message<"ctxd.v1.Change"> & {
    /**
     * Resume after this change with this cursor (opaque).
     *
     * @generated from field: string cursor = 1;
     */
    cursor: string;
    /**
     * The conversation it happened to.
     *
     * @generated from field: string conversation_id = 2;
     */
    conversationId: string;
    /**
     * What it did.
     *
     * @generated from field: ctxd.v1.ChangeKind kind = 3;
     */
    kind: ChangeKind;
    /**
     * The first sequence it concerns (see ChangeKind); 0 when none.
     *
     * @generated from field: uint64 first_sequence = 4;
     */
    firstSequence: bigint;
    /**
     * The last sequence it concerns (see ChangeKind); 0 when none.
     *
     * @generated from field: uint64 last_sequence = 5;
     */
    lastSequence: bigint;
    /**
     * APPENDED with `include_messages` only: the appended messages as the log holds them when the
     * change is delivered (a message redacted since comes as its tombstone; one rewound since does
     * not come, and the REWOUND change follows). One response carries at most 2 MiB of messages
     * (within the 4 MiB gRPC clients accept by default), so an append larger than that carries the
     * messages that fit, in order, with `messages_truncated`.
     *
     * @generated from field: repeated ctxd.v1.Message messages = 6;
     */
    messages: Message$1[];
    /**
     * When it was made.
     *
     * @generated from field: google.protobuf.Timestamp time = 7;
     */
    time?: Timestamp | undefined;
    /**
     * Some of the append's messages did not fit one response: read those after the last one
     * carried (after first_sequence - 1 when none is) up to last_sequence with ListMessages.
     *
     * @generated from field: bool messages_truncated = 8;
     */
    messagesTruncated: boolean;
};
/**
 * Describes the message ctxd.v1.Change.
 * Use `create(ChangeSchema)` to create a new message.
 */
export declare const ChangeSchema: GenMessage<Change>;
/**
 * Every stream opens with one (its starting cursor), and a stream idle for a while gets one, so
 * clients and proxies can tell a live stream from a dead one.
 *
 * @generated from message ctxd.v1.Heartbeat
 */
export type Heartbeat = Message<"ctxd.v1.Heartbeat"> & {
    /**
     * Every change before this cursor was delivered: resume from it.
     *
     * @generated from field: string cursor = 1;
     */
    cursor: string;
    /**
     * When it was sent.
     *
     * @generated from field: google.protobuf.Timestamp time = 2;
     */
    time?: Timestamp | undefined;
};
/**
 * Describes the message ctxd.v1.Heartbeat.
 * Use `create(HeartbeatSchema)` to create a new message.
 */
export declare const HeartbeatSchema: GenMessage<Heartbeat>;
/**
 * One message of the WatchChanges stream: changes, or a heartbeat.
 *
 * @generated from message ctxd.v1.WatchChangesResponse
 */
export type WatchChangesResponse = Message<"ctxd.v1.WatchChangesResponse"> & {
    /**
     * Changes in cursor order: each conversation's in commit order.
     *
     * @generated from field: repeated ctxd.v1.Change changes = 1;
     */
    changes: Change[];
    /**
     * Set on the stream's first message, and when there was nothing to deliver for a while.
     *
     * @generated from field: ctxd.v1.Heartbeat heartbeat = 2;
     */
    heartbeat?: Heartbeat | undefined;
};
/**
 * Describes the message ctxd.v1.WatchChangesResponse.
 * Use `create(WatchChangesResponseSchema)` to create a new message.
 */
export declare const WatchChangesResponseSchema: GenMessage<WatchChangesResponse>;
/**
 * Where a conversation stands, as its owner sets it (ctxd never changes it by itself).
 *
 * @generated from enum ctxd.v1.ConversationStatus
 */
export declare enum ConversationStatus {
    /**
     * Not set: in a request filter, any status; never stored.
     *
     * @generated from enum value: CONVERSATION_STATUS_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * In use. Every conversation starts here.
     *
     * @generated from enum value: CONVERSATION_STATUS_ACTIVE = 1;
     */
    ACTIVE = 1,
    /**
     * Waiting for the user's answer.
     *
     * @generated from enum value: CONVERSATION_STATUS_AWAITING_ANSWER = 2;
     */
    AWAITING_ANSWER = 2,
    /**
     * Nothing happening.
     *
     * @generated from enum value: CONVERSATION_STATUS_IDLE = 3;
     */
    IDLE = 3,
    /**
     * Finished.
     *
     * @generated from enum value: CONVERSATION_STATUS_CLOSED = 4;
     */
    CLOSED = 4
}
/**
 * Describes the enum ctxd.v1.ConversationStatus.
 */
export declare const ConversationStatusSchema: GenEnum<ConversationStatus>;
/**
 * What a change did (DESIGN 2.11). Removals carry no removed content.
 *
 * @generated from enum ctxd.v1.ChangeKind
 */
export declare enum ChangeKind {
    /**
     * Never sent.
     *
     * @generated from enum value: CHANGE_KIND_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * An AppendMessage: `first_sequence..last_sequence` are the appended messages.
     *
     * @generated from enum value: CHANGE_KIND_APPENDED = 1;
     */
    APPENDED = 1,
    /**
     * A RedactMessage: `first_sequence` (= `last_sequence`) is now a tombstone.
     *
     * @generated from enum value: CHANGE_KIND_REDACTED = 2;
     */
    REDACTED = 2,
    /**
     * A RewindConversation: messages from `first_sequence` on are gone (`last_sequence` was the
     * end before it; below `first_sequence` when nothing was removed).
     *
     * @generated from enum value: CHANGE_KIND_REWOUND = 3;
     */
    REWOUND = 3,
    /**
     * A DeleteConversation: the conversation and everything in it are gone.
     *
     * @generated from enum value: CHANGE_KIND_DELETED = 4;
     */
    DELETED = 4,
    /**
     * The retention sweep deleted the conversation (its `expire_time` passed, or inactivity).
     *
     * @generated from enum value: CHANGE_KIND_EXPIRED = 5;
     */
    EXPIRED = 5,
    /**
     * A ForkConversation created this conversation holding `first_sequence..last_sequence` of
     * its source (the conversation's `forked_from`).
     *
     * @generated from enum value: CHANGE_KIND_FORKED = 6;
     */
    FORKED = 6,
    /**
     * An UpdateConversation changed the resource (title, status, labels, expiry).
     *
     * @generated from enum value: CHANGE_KIND_UPDATED = 7;
     */
    UPDATED = 7,
    /**
     * A summary was stored, through `last_sequence`.
     *
     * @generated from enum value: CHANGE_KIND_SUMMARIZED = 8;
     */
    SUMMARIZED = 8,
    /**
     * The working memory was stored (read it again). Not ordered against the conversation's
     * other changes: it may come just before one that committed just before it.
     *
     * @generated from enum value: CHANGE_KIND_MEMORY_UPDATED = 9;
     */
    MEMORY_UPDATED = 9
}
/**
 * Describes the enum ctxd.v1.ChangeKind.
 */
export declare const ChangeKindSchema: GenEnum<ChangeKind>;
