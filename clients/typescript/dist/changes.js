// Following changes: WatchChanges as an async iterable of changes that keeps its cursor, resumes
// from it and reconnects by itself.
import { Code, ConnectError } from "@connectrpc/connect";
/** The default of `watchChanges`' `reconnect`: UNAVAILABLE and lost connections, for ever, 100 ms doubling to 5 s. */
export const WATCH_RECONNECT = Object.freeze({
    codes: [Code.Unavailable],
    initialBackoffMs: 100,
    maxBackoffMs: 5_000,
    multiplier: 2,
    maxAttempts: Infinity,
});
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
export function watchChanges(client, options = {}) {
    return new Watch(client, options);
}
const NETWORK_ERROR_CODES = /^(ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENETDOWN|ENOTFOUND|EAI_AGAIN|ERR_HTTP2_.+|ERR_STREAM_PREMATURE_CLOSE|UND_ERR_.+)$/;
/** Whether an error is the connection's rather than the server's answer: a socket's, an HTTP/2 session's, a failed fetch. */
function lostConnection(error) {
    let e = error;
    for (let depth = 0; e instanceof Error && depth < 8; depth++) {
        const code = e.code;
        if (typeof code === "string" && NETWORK_ERROR_CODES.test(code))
            return true;
        // fetch's own failures: "fetch failed" (Node, Deno), "Failed to fetch", "NetworkError when
        // attempting to fetch resource", "Load failed" (browsers), "network error" (a body cut short).
        if (e instanceof TypeError && /fetch|network|load failed|terminated/i.test(e.message))
            return true;
        e = e.cause;
    }
    return false;
}
class Watch {
    client;
    options;
    cursor;
    #closed = false;
    #call;
    #wake;
    #items;
    #onAbort = () => this.close();
    constructor(client, options) {
        this.client = client;
        this.options = options;
        this.cursor = options.afterCursor ?? "";
        this.#items = this.#follow();
        if (options.signal?.aborted)
            this.close();
        else
            options.signal?.addEventListener("abort", this.#onAbort, { once: true });
    }
    get closed() {
        return this.#closed;
    }
    close() {
        this.#closed = true;
        this.#call?.abort();
        this.#wake?.();
        // Ends the loop where it waits (at once when it waits for the consumer; after the aborted
        // read or the pause otherwise): an iteration under way then gets done.
        this.#items.return(undefined).catch(() => undefined);
    }
    [Symbol.asyncIterator]() {
        return this.#items;
    }
    /** Waits `ms`, or less if the stream is closed meanwhile. */
    async #pause(ms) {
        let timer;
        try {
            await new Promise((resolve) => {
                timer = setTimeout(resolve, ms);
                this.#wake = resolve;
            });
        }
        finally {
            clearTimeout(timer);
            this.#wake = undefined;
        }
    }
    async *#follow() {
        const { conversationId = "", includeMessages = false, headers, timeoutMs } = this.options;
        const given = this.options.reconnect;
        const policy = given === false
            ? undefined
            : {
                codes: given?.codes ?? WATCH_RECONNECT.codes,
                initialBackoffMs: given?.initialBackoffMs ?? WATCH_RECONNECT.initialBackoffMs,
                maxBackoffMs: given?.maxBackoffMs ?? WATCH_RECONNECT.maxBackoffMs,
                multiplier: given?.multiplier ?? WATCH_RECONNECT.multiplier,
                maxAttempts: given?.maxAttempts ?? WATCH_RECONNECT.maxAttempts,
            };
        const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
        let failures = 0; // attempts in a row that made no progress
        try {
            while (!this.#closed) {
                const remaining = deadline === undefined ? 0 : deadline - Date.now(); // 0: no deadline
                if (deadline !== undefined && remaining <= 0) {
                    throw new ConnectError("the watch's deadline (timeoutMs) passed", Code.DeadlineExceeded);
                }
                const call = (this.#call = new AbortController());
                let error;
                const responses = this.client
                    .watchChanges({ afterCursor: this.cursor, conversationId, includeMessages }, { signal: call.signal, timeoutMs: remaining, headers })[Symbol.asyncIterator]();
                let ended = false; // the transport has finished the call (its end, or an error)
                let received = 0;
                try {
                    for (let next = await responses.next(); !next.done; next = await responses.next()) {
                        received++;
                        if (next.value.changes.length > 0 || received > 1)
                            failures = 0; // progress: a stream's opening heartbeat alone is none
                        for (const change of next.value.changes) {
                            this.cursor = change.cursor;
                            yield change;
                        }
                        if (next.value.heartbeat)
                            this.cursor = next.value.heartbeat.cursor;
                    }
                    ended = true;
                }
                catch (e) {
                    ended = true;
                    error = e;
                }
                finally {
                    this.#call = undefined;
                    if (!ended) {
                        // Left at a `yield` (a loop left early, close()): cancel the call, and read once more
                        // so that the transport sees the abort and releases the call (its deadline timer).
                        call.abort();
                        responses.next().catch(() => undefined);
                    }
                }
                if (this.#closed)
                    return;
                // The stream failed (error) or the server ended it (none): reconnect, or say why not. An
                // HTTP/2 stream whose connection is lost ends as Canceled, which this call did not ask for.
                const code = error === undefined ? undefined : ConnectError.from(error).code;
                const retryable = error === undefined ||
                    lostConnection(error) ||
                    code === Code.Canceled ||
                    (code !== undefined && policy?.codes.includes(code) === true);
                if (policy === undefined || !retryable) {
                    if (error !== undefined)
                        throw error;
                    return;
                }
                failures++;
                const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** Math.min(failures - 1, 64));
                const pause = ceiling / 2 + (Math.random() * ceiling) / 2;
                if (failures >= policy.maxAttempts || (deadline !== undefined && Date.now() + pause >= deadline)) {
                    if (error !== undefined)
                        throw error;
                    return;
                }
                await this.#pause(pause);
            }
        }
        finally {
            this.#closed = true;
            this.options.signal?.removeEventListener("abort", this.#onAbort);
        }
    }
}
