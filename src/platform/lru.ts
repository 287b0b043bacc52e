// A cache bounded by entries and by bytes, the least recently used out first, with an optional
// time to live. Whatever a process remembers about requests must stay bounded whatever the
// requests are (docs/design.md, "Work before a key is known is bounded"); this is that bound.
// Pure apart from its own state: the caller passes the clock, and sizes are the caller's
// estimates (V8 does not tell an object's size).

export interface LruOptions<K, V> {
  readonly maxEntries: number
  readonly maxBytes: number
  /** The bytes an entry holds, key and value together: an estimate. */
  readonly sizeOf: (key: K, value: V) => number
  /** Milliseconds an entry is good for after it was set; absent: until it is pushed out. */
  readonly ttlMs?: number | undefined
}

export interface LruStats {
  readonly entries: number
  readonly bytes: number
  readonly maxEntries: number
  readonly maxBytes: number
  /** Entries pushed out by the bounds since the cache was made (not expired nor deleted ones). */
  readonly evictions: number
}

interface Slot<V> {
  readonly value: V
  readonly size: number
  readonly expires: number
}

/** Rough bytes of a string in V8 (header and characters, two bytes each at most). */
export const stringBytes = (s: string): number => 24 + 2 * s.length

export class Lru<K, V> {
  // A Map iterates in insertion order: the first entry is the least recently used, as every
  // use re-inserts its entry at the end.
  private readonly slots = new Map<K, Slot<V>>()
  private bytes = 0
  private evictions = 0
  private readonly options: LruOptions<K, V>

  constructor(options: LruOptions<K, V>) {
    if (!(options.maxEntries >= 1) || !(options.maxBytes >= 1))
      throw new Error("an LRU needs at least one entry and one byte")
    this.options = options
  }

  /** The value, made the most recently used; undefined when absent or expired (then removed). */
  get(key: K, now: number): V | undefined {
    const slot = this.slots.get(key)
    if (slot === undefined) return undefined
    if (now >= slot.expires) {
      this.remove(key, slot)
      return undefined
    }
    this.slots.delete(key)
    this.slots.set(key, slot)
    return slot.value
  }

  /** The value, leaving the order as it is; undefined when absent or expired. */
  peek(key: K, now: number): V | undefined {
    const slot = this.slots.get(key)
    return slot === undefined || now >= slot.expires ? undefined : slot.value
  }

  /**
   * Remembers the value as the most recently used, pushing out the least recently used entries
   * until both bounds hold. An entry larger than the whole byte bound is not kept (false).
   */
  set(key: K, value: V, now: number): boolean {
    const size = this.options.sizeOf(key, value)
    const old = this.slots.get(key)
    if (old !== undefined) this.remove(key, old)
    if (size > this.options.maxBytes) return false
    const expires = this.options.ttlMs === undefined ? Number.POSITIVE_INFINITY : now + this.options.ttlMs
    this.slots.set(key, { value, size, expires })
    this.bytes += size
    for (const [k, slot] of this.slots) {
      if (this.slots.size <= this.options.maxEntries && this.bytes <= this.options.maxBytes) break
      this.remove(k, slot)
      this.evictions++
    }
    return true
  }

  delete(key: K): void {
    const slot = this.slots.get(key)
    if (slot !== undefined) this.remove(key, slot)
  }

  clear(): void {
    this.slots.clear()
    this.bytes = 0
  }

  get size(): number {
    return this.slots.size
  }

  stats(): LruStats {
    return {
      entries: this.slots.size,
      bytes: this.bytes,
      maxEntries: this.options.maxEntries,
      maxBytes: this.options.maxBytes,
      evictions: this.evictions
    }
  }

  /** The keys from the least to the most recently used (expired ones included until met). */
  keys(): Array<K> {
    return [...this.slots.keys()]
  }

  private remove(key: K, slot: Slot<V>): void {
    this.slots.delete(key)
    this.bytes -= slot.size
  }
}
