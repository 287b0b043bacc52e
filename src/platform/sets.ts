// Small collection helpers the pipeline uses in more than one place.

/** Groups pairs into a map of sets: key -> every value met with it. */
export const groupSets = <T, K, V>(items: Iterable<T>, key: (item: T) => K, value: (item: T) => V): Map<K, Set<V>> => {
  const m = new Map<K, Set<V>>()
  for (const item of items) {
    const k = key(item)
    let s = m.get(k)
    if (!s) m.set(k, (s = new Set()))
    s.add(value(item))
  }
  return m
}
