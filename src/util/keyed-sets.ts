/**
 * Sets of values by key, a key dropped once its set is empty: the listeners of each run
 * (`coordination/run-signals.ts`) and of each Redis channel (`coordination/redis-client.ts`).
 */
export class KeyedSets<K, V> {
  readonly #sets = new Map<K, Set<V>>()

  /** The values under `key` (none: an empty iteration). */
  get(key: K): Iterable<V> {
    return this.#sets.get(key) ?? []
  }

  add(key: K, value: V): void {
    const set = this.#sets.get(key)
    if (set === undefined) this.#sets.set(key, new Set([value]))
    else set.add(value)
  }

  /** Removes `value` from `key`'s set; true when that emptied it (the key is gone now). */
  delete(key: K, value: V): boolean {
    const set = this.#sets.get(key)
    if (set === undefined) return false
    set.delete(value)
    if (set.size > 0) return false
    this.#sets.delete(key)
    return true
  }
}
