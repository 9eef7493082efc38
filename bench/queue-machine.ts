/**
 * Micro-benchmark of the capacity queue machine (machines/queue.ts) under a deep queue: per N,
 * enqueues N waiters over 8 keys (every 4th a batch request) on a placement of capacity 16, cancels
 * every other waiter, then releases holders one at a time until every waiter was granted. Prints
 * µs per event for each phase: the best of 5 batches, each repeating the round until it has taken
 * ~100k events (after one batch of warm-up), so small N is not dominated by timer resolution.
 *
 *   node bench/queue-machine.ts [--sizes 100,1000,10000]
 */
import { parseArgs } from "node:util"
import { type QueueState, startQueue, stepQueue } from "../machines/queue.ts"

const { values } = parseArgs({ options: { sizes: { type: "string", default: "100,1000,10000" } } })
const sizes = values.sizes.split(",").map(Number)
const KEYS = 8
const CAPACITY = 16

interface Round {
  readonly enqueue: number
  readonly cancel: number
  readonly grant: number
}

const round = (n: number, repeats: number): Round => {
  const total = { enqueue: 0, cancel: 0, grant: 0 }
  for (let r = 0; r < repeats; r++) {
    const one = roundOnce(n)
    total.enqueue += one.enqueue
    total.cancel += one.cancel
    total.grant += one.grant
  }
  return { enqueue: total.enqueue / repeats, cancel: total.cancel / repeats, grant: total.grant / repeats }
}

const roundOnce = (n: number): Round => {
  let state: QueueState = startQueue({ capacity: CAPACITY })
  const holders: Array<string> = []
  const take = (granted: ReadonlyArray<string>) => { for (const id of granted) holders.push(id) }

  let t = performance.now()
  for (let i = 0; i < n; i++) {
    const step = stepQueue(state, { type: "ENQUEUE", waiterId: `w${i}`, keyId: `k${i % KEYS}`, priority: i % 4 === 3 ? "batch" : "interactive" })
    state = step.state
    take(step.granted)
  }
  const enqueue = (performance.now() - t) * 1000 / n

  // Cancel every other waiter still waiting (holders are the first CAPACITY − 0 granted ones).
  const held = new Set(holders)
  const cancels: Array<string> = []
  for (let i = 0; i < n; i += 2) if (!held.has(`w${i}`)) cancels.push(`w${i}`)
  t = performance.now()
  for (const waiterId of cancels) {
    const step = stepQueue(state, { type: "CANCEL", waiterId })
    state = step.state
    take(step.granted)
  }
  const cancel = (performance.now() - t) * 1000 / Math.max(1, cancels.length)

  t = performance.now()
  let releases = 0
  for (let next = 0; next < holders.length; next++) {
    const step = stepQueue(state, { type: "RELEASE", waiterId: holders[next], outcome: "success" })
    state = step.state
    take(step.granted)
    releases++
  }
  const grant = (performance.now() - t) * 1000 / releases
  if (state.context.stats.granted !== n - cancels.length) throw new Error(`granted ${state.context.stats.granted}, expected ${n - cancels.length}`)
  return { enqueue, cancel, grant }
}

console.log(`capacity ${CAPACITY}, ${KEYS} keys, µs per event (best of 5)`)
console.log("N".padStart(7), "enqueue".padStart(10), "cancel".padStart(10), "release+grant".padStart(14))
for (const n of sizes) {
  const repeats = Math.max(1, Math.round(100_000 / n))
  round(n, repeats)
  const rounds = Array.from({ length: 5 }, () => round(n, repeats))
  const best = (pick: (r: Round) => number) => Math.min(...rounds.map(pick)).toFixed(2)
  console.log(String(n).padStart(7), best((r) => r.enqueue).padStart(10), best((r) => r.cancel).padStart(10), best((r) => r.grant).padStart(14))
}
