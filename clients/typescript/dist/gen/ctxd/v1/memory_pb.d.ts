import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { PreparedRequest } from "./context_pb.js";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file ctxd/v1/memory.proto.
 */
export declare const file_ctxd_v1_memory: GenFile;
/**
 * One remembered fact with its provenance.
 *
 * @generated from message ctxd.v1.MemoryItem
 */
export type MemoryItem = Message<"ctxd.v1.MemoryItem"> & {
    /**
     * The fact.
     *
     * @generated from field: string text = 1;
     */
    text: string;
    /**
     * Provenance: sequences of the messages the fact came from.
     *
     * @generated from field: repeated uint64 source_sequences = 2;
     */
    sourceSequences: bigint[];
    /**
     * Stable id of the item within the memory document (server-assigned when empty).
     *
     * @generated from field: string id = 3;
     */
    id: string;
    /**
     * Id of the item that superseded this one; empty while the item is current. Items are
     * superseded, never silently deleted.
     *
     * @generated from field: string superseded_by = 4;
     */
    supersededBy: string;
};
/**
 * Describes the message ctxd.v1.MemoryItem.
 * Use `create(MemoryItemSchema)` to create a new message.
 */
export declare const MemoryItemSchema: GenMessage<MemoryItem>;
/**
 * A term the conversation defined.
 *
 * @generated from message ctxd.v1.GlossaryEntry
 */
export type GlossaryEntry = Message<"ctxd.v1.GlossaryEntry"> & {
    /**
     * The term.
     *
     * @generated from field: string term = 1;
     */
    term: string;
    /**
     * Its definition.
     *
     * @generated from field: string definition = 2;
     */
    definition: string;
    /**
     * Provenance: sequences of the messages the definition came from.
     *
     * @generated from field: repeated uint64 source_sequences = 3;
     */
    sourceSequences: bigint[];
};
/**
 * Describes the message ctxd.v1.GlossaryEntry.
 * Use `create(GlossaryEntrySchema)` to create a new message.
 */
export declare const GlossaryEntrySchema: GenMessage<GlossaryEntry>;
/**
 * The structured facts of a conversation.
 *
 * @generated from message ctxd.v1.WorkingMemory
 */
export type WorkingMemory = Message<"ctxd.v1.WorkingMemory"> & {
    /**
     * A short prose summary of the facts.
     *
     * @generated from field: string summary = 1;
     */
    summary: string;
    /**
     * What the conversation is trying to achieve.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem goals = 2;
     */
    goals: MemoryItem[];
    /**
     * What the result must do.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem requirements = 3;
     */
    requirements: MemoryItem[];
    /**
     * Limits the result must respect.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem constraints = 4;
     */
    constraints: MemoryItem[];
    /**
     * Choices that were made.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem decisions = 5;
     */
    decisions: MemoryItem[];
    /**
     * Things taken as true without confirmation.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem assumptions = 6;
     */
    assumptions: MemoryItem[];
    /**
     * Questions asked and not yet answered.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem open_questions = 7;
     */
    openQuestions: MemoryItem[];
    /**
     * People and parties involved.
     *
     * @generated from field: repeated ctxd.v1.MemoryItem stakeholders = 8;
     */
    stakeholders: MemoryItem[];
    /**
     * Terms and their definitions.
     *
     * @generated from field: repeated ctxd.v1.GlossaryEntry glossary = 9;
     */
    glossary: GlossaryEntry[];
    /**
     * Last sequence the facts were extracted through.
     *
     * @generated from field: uint64 through_sequence = 10;
     */
    throughSequence: bigint;
    /**
     * Version number, incremented on each change; used by UpdateWorkingMemory.
     *
     * @generated from field: uint64 version = 11;
     */
    version: bigint;
    /**
     * When this version was stored.
     *
     * @generated from field: google.protobuf.Timestamp updated_at = 12;
     */
    updatedAt?: Timestamp | undefined;
};
/**
 * Describes the message ctxd.v1.WorkingMemory.
 * Use `create(WorkingMemorySchema)` to create a new message.
 */
export declare const WorkingMemorySchema: GenMessage<WorkingMemory>;
/**
 * Request of GetWorkingMemory.
 *
 * @generated from message ctxd.v1.GetWorkingMemoryRequest
 */
export type GetWorkingMemoryRequest = Message<"ctxd.v1.GetWorkingMemoryRequest"> & {
    /**
     * Conversation to read.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Run the configured extractor over the messages after the memory's watermark first.
     *
     * @generated from field: bool refresh = 2;
     */
    refresh: boolean;
    /**
     * Store nothing; return the extraction request to run on the caller's own model.
     *
     * @generated from field: bool prepare = 3;
     */
    prepare: boolean;
};
/**
 * Describes the message ctxd.v1.GetWorkingMemoryRequest.
 * Use `create(GetWorkingMemoryRequestSchema)` to create a new message.
 */
export declare const GetWorkingMemoryRequestSchema: GenMessage<GetWorkingMemoryRequest>;
/**
 * Response of GetWorkingMemory.
 *
 * @generated from message ctxd.v1.GetWorkingMemoryResponse
 */
export type GetWorkingMemoryResponse = Message<"ctxd.v1.GetWorkingMemoryResponse"> & {
    /**
     * The working memory (after the refresh, if requested).
     *
     * @generated from field: ctxd.v1.WorkingMemory memory = 1;
     */
    memory?: WorkingMemory | undefined;
    /**
     * When `prepare` was set: the extraction request to run on the caller's model.
     *
     * @generated from field: ctxd.v1.PreparedRequest prepared = 2;
     */
    prepared?: PreparedRequest | undefined;
};
/**
 * Describes the message ctxd.v1.GetWorkingMemoryResponse.
 * Use `create(GetWorkingMemoryResponseSchema)` to create a new message.
 */
export declare const GetWorkingMemoryResponseSchema: GenMessage<GetWorkingMemoryResponse>;
/**
 * Request of UpdateWorkingMemory.
 *
 * @generated from message ctxd.v1.UpdateWorkingMemoryRequest
 */
export type UpdateWorkingMemoryRequest = Message<"ctxd.v1.UpdateWorkingMemoryRequest"> & {
    /**
     * Conversation to update.
     *
     * @generated from field: string conversation_id = 1;
     */
    conversationId: string;
    /**
     * Items to merge (bring your own LLM). Required; at most 1,000 items per category and 1,000
     * glossary entries. `through_sequence` advances the watermark.
     *
     * @generated from field: ctxd.v1.WorkingMemory memory = 2;
     */
    memory?: WorkingMemory | undefined;
    /**
     * The version the caller based its update on; ABORTED on a mismatch.
     *
     * @generated from field: optional uint64 expected_version = 3;
     */
    expectedVersion?: bigint | undefined;
    /**
     * The `log_changes` of the prepared extraction the items came from; ABORTED, with the
     * current value, if messages were redacted or rewound since. Unset counts as 0: an update
     * of a conversation that was ever redacted or rewound is refused without it.
     *
     * @generated from field: optional uint64 expected_log_changes = 4;
     */
    expectedLogChanges?: bigint | undefined;
};
/**
 * Describes the message ctxd.v1.UpdateWorkingMemoryRequest.
 * Use `create(UpdateWorkingMemoryRequestSchema)` to create a new message.
 */
export declare const UpdateWorkingMemoryRequestSchema: GenMessage<UpdateWorkingMemoryRequest>;
/**
 * Response of UpdateWorkingMemory.
 *
 * @generated from message ctxd.v1.UpdateWorkingMemoryResponse
 */
export type UpdateWorkingMemoryResponse = Message<"ctxd.v1.UpdateWorkingMemoryResponse"> & {
    /**
     * The working memory after the merge.
     *
     * @generated from field: ctxd.v1.WorkingMemory memory = 1;
     */
    memory?: WorkingMemory | undefined;
};
/**
 * Describes the message ctxd.v1.UpdateWorkingMemoryResponse.
 * Use `create(UpdateWorkingMemoryResponseSchema)` to create a new message.
 */
export declare const UpdateWorkingMemoryResponseSchema: GenMessage<UpdateWorkingMemoryResponse>;
