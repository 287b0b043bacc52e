// A small seeded PRNG (mulberry32) so the demo has the same shape on every run, and the
// few choices built on it. Math.random is never used for data.

export interface Random {
  /** Uniform in [0, 1). */
  readonly next: () => number
  /** Integer in [min, max], both included. */
  readonly int: (min: number, max: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <T>(items: ReadonlyArray<T>) => T
  /** A value chosen in proportion to its weight. */
  readonly weighted: <T extends string>(weights: Readonly<Partial<Record<T, number>>>) => T
  /** `n` distinct items (all of them when there are fewer). */
  readonly sample: <T>(items: ReadonlyArray<T>, n: number) => T[]
}

export const seededRandom = (seed: number): Random => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  const pick = <T>(items: ReadonlyArray<T>): T => {
    if (items.length === 0) throw new RangeError("pick from an empty list")
    return items[Math.floor(next() * items.length)]!
  }
  const weighted = <T extends string>(weights: Readonly<Partial<Record<T, number>>>): T => {
    const entries = Object.entries(weights) as Array<[T, number]>
    const total = entries.reduce((s, [, w]) => s + w, 0)
    let r = next() * total
    for (const [value, w] of entries) {
      r -= w
      if (r < 0) return value
    }
    return entries[entries.length - 1]![0]
  }
  const sample = <T>(items: ReadonlyArray<T>, n: number): T[] => {
    const copy = [...items]
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      ;[copy[i], copy[j]] = [copy[j]!, copy[i]!]
    }
    return copy.slice(0, Math.max(0, n))
  }
  return { next, int, chance: (p) => next() < p, pick, weighted, sample }
}
