// Reading a conversation's log through ListMessages, page after page, and keeping the last
// read per conversation so that the pack view can look up flags (pinned, UI-only) without
// reading the whole log again after every turn.

import { api } from "./api.js";
import type { Message } from "./gen/ctxd/v1/messages_pb.js";

/** The most messages a view reads (the log view says when there are more). */
export const MAX_LOG_MESSAGES = 20_000;
/** ListMessages' largest page. */
const PAGE_SIZE = 1000;

/** Messages read from a conversation's log. */
export interface LoadedLog {
  /** In sequence order, from `after + 1`. */
  messages: Message[];
  /** The exclusive lower bound the read began at. */
  after: bigint;
  /** True when the read stopped at the limit before the end of the log. */
  truncated: boolean;
  /** The `after_sequence` to go on from when truncated. */
  nextAfter: bigint;
}

const cache = new Map<string, LoadedLog>();

/** Reads the log from `after` to its end, or up to `max` messages. */
export async function loadLog(id: string, after = 0n, max = MAX_LOG_MESSAGES, onPage?: (n: number) => void): Promise<LoadedLog> {
  const messages: Message[] = [];
  const next = await readPages(id, after, max, messages, onPage);
  const log = { messages, after, truncated: next !== 0n, nextAfter: next };
  if (after === 0n) cache.set(id, log);
  return log;
}

/** Appends pages to `into` until the end (returns 0) or `max` messages (returns where to go on). */
async function readPages(id: string, after: bigint, max: number, into: Message[], onPage?: (n: number) => void): Promise<bigint> {
  let cursor = after;
  for (;;) {
    const page = await api.listMessages({ conversationId: id, afterSequence: cursor, pageSize: PAGE_SIZE });
    into.push(...page.messages);
    onPage?.(into.length);
    if (page.nextAfterSequence === 0n) return 0n;
    cursor = page.nextAfterSequence;
    if (into.length >= max) return cursor;
  }
}

/**
 * The log from its start, brought up to date: the cached read extended with what was appended
 * since, when its last message is still in place (a rewind or a redaction there means a full
 * read). Flags (pinned, UI-only) and roles never change in place, so an extension is exact.
 */
export async function currentLog(id: string): Promise<LoadedLog> {
  const cached = cache.get(id);
  const last = cached?.messages.at(-1);
  if (!cached || cached.truncated || !last) return loadLog(id);
  const page = await api.listMessages({ conversationId: id, afterSequence: last.sequence - 1n, pageSize: PAGE_SIZE });
  const first = page.messages[0];
  if (!first || !sameMessage(first, last)) return loadLog(id);
  const messages = [...cached.messages, ...page.messages.slice(1)];
  const next = page.nextAfterSequence === 0n ? 0n
    : await readPages(id, page.nextAfterSequence, MAX_LOG_MESSAGES - messages.length, messages);
  const log = { messages, after: 0n, truncated: next !== 0n, nextAfter: next };
  cache.set(id, log);
  return log;
}

function sameMessage(a: Message, b: Message): boolean {
  return a.sequence === b.sequence && a.role === b.role && a.content === b.content
    && a.createdAt?.seconds === b.createdAt?.seconds && a.createdAt?.nanos === b.createdAt?.nanos;
}
