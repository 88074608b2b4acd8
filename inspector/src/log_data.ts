// Reading a conversation's log through ListMessages, page after page. The last read of each
// conversation is kept (for the key or tenant that read it, see cache.ts), so that the pack view
// can look up what it needs of the log (flags, roles, calls and results, reasoning) after every
// build by reading only what was appended since.

import { api } from "./api.js";
import { currentIdentity, ScopedCache } from "./cache.js";
import type { Message } from "../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";

/** The most messages a view reads (the log view says when there are more). */
export const MAX_LOG_MESSAGES = 20_000;
/** ListMessages' largest page. */
const PAGE_SIZE = 1000;

/** Messages read from a conversation's log. */
export interface LoadedLog {
  /** In sequence order, from `after + 1`, gapless. */
  messages: Message[];
  /** The exclusive lower bound the read began at. */
  after: bigint;
  /** True when the read stopped at the limit before the end of the log. */
  truncated: boolean;
  /** The `after_sequence` to go on from when truncated. */
  nextAfter: bigint;
}

/** How a read reports progress and learns that nobody wants it any more. */
export interface ReadOptions {
  /** Called after each page with the messages read so far. */
  onPage?: (n: number) => void;
  /** False once the view that asked has gone: the read stops at the next page. */
  live?: () => boolean;
}

/** Thrown when a read stopped because its view has gone (nobody shows the error). */
export class ReadAbandoned extends Error {
  constructor() {
    super("the view that asked for this read has gone");
  }
}

const lastRead = new ScopedCache<LoadedLog>();

/** Reads the log from `after` to its end, or up to `max` messages. */
export async function loadLog(id: string, after = 0n, max = MAX_LOG_MESSAGES, options: ReadOptions = {}): Promise<LoadedLog> {
  const identity = currentIdentity();
  const messages: Message[] = [];
  const next = await readPages(id, after, max, messages, options);
  const log = { messages, after, truncated: next !== 0n, nextAfter: next };
  lastRead.set(id, log, identity);
  return log;
}

/**
 * Appends pages after `after` to `into` until the end of the log (returns 0), or until `max`
 * messages more were read (returns where to go on). Throws `ReadAbandoned` when `live()` turns
 * false between pages.
 */
async function readPages(id: string, after: bigint, max: number, into: Message[], options: ReadOptions, through?: bigint): Promise<bigint> {
  let cursor = after;
  let added = 0;
  for (;;) {
    if (options.live && !options.live()) throw new ReadAbandoned();
    const page = await api.listMessages({ conversationId: id, afterSequence: cursor, pageSize: PAGE_SIZE });
    const wanted = through === undefined ? page.messages : page.messages.filter((m) => m.sequence <= through);
    into.push(...wanted);
    added += wanted.length;
    options.onPage?.(into.length);
    if (page.nextAfterSequence === 0n || wanted.length < page.messages.length) return 0n;
    cursor = page.nextAfterSequence;
    if (through !== undefined && cursor >= through) return 0n;
    if (added >= max) return cursor;
  }
}

/**
 * The part of the log a pack of it is compared with: its newest messages through `last` (the
 * pack's `log_last_sequence`), at most `MAX_LOG_MESSAGES` of them, so that the log and the pack
 * describe the same moment. The last read of the conversation is reused for what it holds of
 * that range when its newest message is still in place (a rewind or a redaction there means a
 * full read); only what follows it is read. A redaction of an older message while the page is
 * open is not seen until the page reads that part again (the log view's "reload" does).
 */
export async function packLog(id: string, last: bigint, options: ReadOptions = {}): Promise<LoadedLog> {
  const identity = currentIdentity();
  const max = BigInt(MAX_LOG_MESSAGES);
  const after = last > max ? last - max : 0n;
  const log = (await extendCached(id, after, last, options)) ?? (await readRange(id, after, last, options));
  lastRead.set(id, log, identity);
  return log;
}

/** Sequences `after + 1 ..= last`, read from scratch. */
async function readRange(id: string, after: bigint, last: bigint, options: ReadOptions): Promise<LoadedLog> {
  const messages: Message[] = [];
  if (last > after) await readPages(id, after, Number.MAX_SAFE_INTEGER, messages, options, last);
  return { messages, after, truncated: false, nextAfter: 0n };
}

/** Sequences `after + 1 ..= last` from the cached read and what follows it, or undefined when
 *  the cached read does not reach back to `after` or its newest message changed. */
async function extendCached(id: string, after: bigint, last: bigint, options: ReadOptions): Promise<LoadedLog | undefined> {
  const cached = lastRead.get(id);
  if (!cached || cached.after > after) return undefined;
  const kept = cached.messages.filter((m) => m.sequence > after && m.sequence <= last);
  const anchor = kept.at(-1);
  if (!anchor) return undefined;
  const page = await api.listMessages({ conversationId: id, afterSequence: anchor.sequence - 1n, pageSize: PAGE_SIZE });
  const first = page.messages[0];
  if (!first || !sameMessage(first, anchor)) return undefined;
  const messages = [...kept, ...page.messages.slice(1).filter((m) => m.sequence <= last)];
  const end = messages.at(-1)!.sequence;
  if (end < last && page.nextAfterSequence !== 0n) await readPages(id, end, Number.MAX_SAFE_INTEGER, messages, options, last);
  return { messages, after, truncated: false, nextAfter: 0n };
}

function sameMessage(a: Message, b: Message): boolean {
  return a.sequence === b.sequence && a.role === b.role && a.content === b.content
    && a.createdAt?.seconds === b.createdAt?.seconds && a.createdAt?.nanos === b.createdAt?.nanos;
}
