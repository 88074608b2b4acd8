import { Code } from "@connectrpc/connect";
import type { CtxdClient } from "./core.js";
import type { Change } from "./gen/ctxd/v1/conversations_pb.js";
/** How `watchChanges` reconnects. Every field is optional: the defaults are `WATCH_RECONNECT`'s. */
export interface ReconnectPolicy {
    /**
     * Codes that reconnect: default `[Code.Unavailable]` (the server shutting down, nothing
     * listening). A lost connection (a reset socket, an HTTP/2 stream cancelled under the call, a
     * failed fetch) reconnects whatever its code.
     */
    codes?: Code[];
    /** The first pause, in milliseconds (default 100); each attempt in a row doubles it (`multiplier`). */
    initialBackoffMs?: number;
    /** The longest pause (default 5,000 ms). Each pause is drawn between half of its ceiling and it. */
    maxBackoffMs?: number;
    multiplier?: number;
    /**
     * Attempts in a row that make no progress (no change, nor a heartbeat after the one each stream
     * opens with) before the last error is thrown (default: no end).
     */
    maxAttempts?: number;
}
/** The default of `watchChanges`' `reconnect`: UNAVAILABLE and lost connections, for ever, 100 ms doubling to 5 s. */
export declare const WATCH_RECONNECT: Readonly<Required<ReconnectPolicy>>;
export interface WatchChangesOptions {
    /** Go on after this cursor (a change's or a heartbeat's: `ChangeStream.cursor`); default: from now. */
    afterCursor?: string;
    /** Only this conversation's changes; default: every conversation of the tenant. */
    conversationId?: string;
    /** APPENDED changes carry their messages (as the log holds them when delivered). */
    includeMessages?: boolean;
    /** Aborting it ends the iteration (as `close()`). */
    signal?: AbortSignal;
    /** How to reconnect (fields default to `WATCH_RECONNECT`'s); `false`: never, every error is thrown. */
    reconnect?: ReconnectPolicy | false;
    /** Deadline of the whole watch, in milliseconds (default: none, whatever the client's `timeoutMs`). */
    timeoutMs?: number;
    /** Extra headers on each WatchChanges call. */
    headers?: Record<string, string>;
}
/**
 * The changes `watchChanges` hands out, as an async iterable (iterate it once). `cursor` is where
 * it stands: persist it once the changes before it are handled, and pass it as `afterCursor` to
 * go on. Leaving a `for await` loop, `close()` or the options' `signal` cancels the stream.
 */
export interface ChangeStream extends AsyncIterable<Change> {
    /**
     * The cursor of the last change handed out, or of a heartbeat received since (every change
     * before it was handed out); until then the `afterCursor` given ("" for none: from now).
     */
    readonly cursor: string;
    /** True once it has ended: `close()`, the signal, a loop left early, or an error thrown. */
    readonly closed: boolean;
    /** Cancels the stream; an iteration under way ends (done). */
    close(): void;
}
/**
 * Follows the tenant's changes (or `conversationId`'s) with WatchChanges: each conversation's
 * in commit order, at least once. When the stream fails with a code of `reconnect.codes`
 * (UNAVAILABLE), loses its connection or is ended by the server, it is opened again from the
 * last cursor seen, after a capped exponential backoff (with jitter) between attempts that
 * made no progress; heartbeats move the cursor and are not handed out. Other errors are
 * thrown: OUT_OF_RANGE (ErrorInfo reason CURSOR_EXPIRED, metadata `oldest_cursor`: see
 * `errorInfo`) when the cursor is older than the changes the server keeps, INVALID_ARGUMENT for
 * a cursor it never gave out, ... The stream opens when the iteration starts.
 *
 * (A function rather than a method: the client's own `watchChanges` is the bare RPC.)
 */
export declare function watchChanges(client: CtxdClient, options?: WatchChangesOptions): ChangeStream;
