// What the page keeps of earlier answers (log reads, renderings, form values), scoped to the
// credential that read them: a change of key or tenant ("Forget key", the tenant field, a key
// the server refused) empties every cache, and an answer that comes back after such a change is
// not stored, so nothing read as one tenant is ever shown as another.

/** Bumped on every change of key or tenant. */
let identity = 0;
const caches = new Set<{ clear(): void }>();

/** The identity calls are made with now; pass it to `ScopedCache.set` for a read begun now. */
export function currentIdentity(): number {
  return identity;
}

/** The key or the tenant changed: every cache is emptied (called by `session` in api.ts). */
export function identityChanged(): void {
  identity++;
  for (const cache of caches) cache.clear();
}

/** A map whose entries belong to the identity that read them. */
export class ScopedCache<V> {
  private readonly entries = new Map<string, V>();

  constructor() {
    caches.add(this);
  }

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  /** Stores `value`, read under `readBy`, unless the identity changed since. */
  set(key: string, value: V, readBy: number): void {
    if (readBy === identity) this.entries.set(key, value);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
