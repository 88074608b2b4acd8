// The part of a pack a provider's prompt cache reuses: the longest common prefix of two
// renderings, in UTF-8 bytes (what providers hash), and the split of the newer one at the last
// whole character inside it.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How two renderings compare. */
export interface SharedPrefix {
  /** Bytes the two UTF-8 encodings share from their start. */
  bytes: number;
  /** UTF-8 bytes of the newer rendering. */
  totalBytes: number;
  /** The newer rendering's longest run of whole characters within the shared bytes. */
  prefix: string;
  /** The rest of the newer rendering. */
  rest: string;
}

/** Length of the longest common prefix of two byte arrays. */
export function commonPrefixLength(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Compares `current` with `previous` byte for byte. */
export function sharedPrefix(previous: string, current: string): SharedPrefix {
  const before = encoder.encode(previous);
  const now = encoder.encode(current);
  const bytes = commonPrefixLength(before, now);
  // A character whose bytes straddle the end of the shared run is not shared: back off to
  // the start of it (continuation bytes are 10xxxxxx).
  let whole = bytes;
  while (whole > 0 && whole < now.length && ((now[whole]! & 0xc0) === 0x80)) whole--;
  return {
    bytes,
    totalBytes: now.length,
    prefix: decoder.decode(now.subarray(0, whole)),
    rest: decoder.decode(now.subarray(whole)),
  };
}

/** Anthropic's prompt-cache breakpoints as ctxd renders them (render/anthropic.rs: the member
 *  is inserted into blocks with sorted keys, so it comes first and a comma follows it). */
const CACHE_MARKER = /"cache_control":\{"type":"ephemeral"\},|,"cache_control":\{"type":"ephemeral"\}/g;

/** An Anthropic rendering without its `cache_control` members: where the markers sit is not
 *  part of the cached content, and they move every turn. */
export function withoutCacheMarkers(rendered: string): string {
  return rendered.replace(CACHE_MARKER, "");
}

/** Bytes the UTF-8 encodings of two texts share from their start, and the second's length. */
export function sharedBytes(previous: string, current: string): { bytes: number; totalBytes: number } {
  const now = encoder.encode(current);
  return { bytes: commonPrefixLength(encoder.encode(previous), now), totalBytes: now.length };
}
