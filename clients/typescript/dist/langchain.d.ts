import type { MessageInitShape } from "@bufbuild/protobuf";
import { type BaseMessage } from "@langchain/core/messages";
import { z } from "zod";
import { type CtxdClient } from "./core.js";
import type { BuildContextResponse, ContextMessage } from "./gen/ctxd/v1/context_pb.js";
import { Format, type Message, type MessageSchema, type Tokenizer } from "./gen/ctxd/v1/messages_pb.js";
type Json = Record<string, any>;
type MessageInit = MessageInitShape<typeof MessageSchema>;
/** `message` as a ctxd message (the shape `client.appendMessage` takes). */
export declare function toCtxd(message: BaseMessage): MessageInit;
/** A ctxd message (a stored Message or a pack's ContextMessage) as a LangChain message: the inverse of toCtxd. */
export declare function fromCtxd(m: Message | ContextMessage): BaseMessage;
/** A pack as LangChain messages: the system parts that open it as texts, then the rest in order. */
export declare function packMessages(pack: BuildContextResponse): {
    system: string[];
    messages: BaseMessage[];
};
export interface CtxdContextMiddlewareOptions {
    /** The conversation; default: `threadIdPrefix` + the run's `thread_id`. */
    conversationId?: string;
    threadIdPrefix?: string;
    /** The pack's budget in tokens (default 32,000), less `reserveOutputTokens`. */
    budgetTokens?: number;
    reserveOutputTokens?: number;
    /** The model's provider: its rules shape the pack (default Format.OPENAI_CHAT). */
    format?: Format;
    tokenizer?: Tokenizer;
    /** BuildContext's `recall`, `clearToolResults` and `historyPolicy`, as the request takes them. */
    recall?: Json;
    clearToolResults?: Json;
    historyPolicy?: number;
    omitWorkingMemory?: boolean;
    /** Called with every pack (stats, what was left out). */
    onPack?: (pack: BuildContextResponse) => void;
}
/** The agent middleware (module comment). */
export declare function ctxdContextMiddleware(client: CtxdClient, options?: CtxdContextMiddlewareOptions): import("langchain").AgentMiddleware<z.ZodObject<{
    ctxdSyncedId: z.ZodDefault<z.ZodString>;
    ctxdSynced: z.ZodDefault<z.ZodNumber>;
}, z.core.$strip>, undefined, unknown, readonly (import("@langchain/core/tools").ServerTool | import("@langchain/core/tools").ClientTool)[], readonly []>;
/** Whether `error` is ctxd's NOT_FOUND (an absent conversation). */
export declare function isNotFound(error: unknown): boolean;
export {};
