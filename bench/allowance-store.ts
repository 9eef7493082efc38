/**
 * Micro-benchmark of the in-process allowance store (src/coordination/in-process.ts) once its memory
 * of finished ids is full: one budget takes a reserve and a settle per call at `--rate` calls per
 * second of simulated time (ids as `newId` mints them), first for 11 minutes of it (the memory is 10
 * minutes: ids now expire as fast as they come), then three measured rounds. Prints µs per reserve +
 * settle and the longest single one (a young-generation GC lands inside some), then what the store's
 * memory of ids holds: the heap (after a full collection) and the array buffers, over the same
 * before the first call, per id remembered.
 *
 *   node bench/allowance-store.ts [--rate 400] [--calls 200000]
 */
import { parseArgs } from "node:util"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect } from "effect"
import { makeInProcess } from "../src/coordination/in-process.ts"
import { newId } from "../src/util/ids.ts"

const { values } = parseArgs({ options: { rate: { type: "string", default: "400" }, calls: { type: "string", default: "200000" } } })
const rate = Number(values.rate)
const calls = Number(values.calls)

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void
/**
 * The heap after a full collection, and the array buffers' bytes (off the heap; freed by a thread of
 * V8's after the collection: read after a pause and a second one).
 */
const memory = async () => {
  gc()
  await new Promise((resolve) => setTimeout(resolve, 200))
  gc()
  const { heapUsed, arrayBuffers } = process.memoryUsage()
  return { heapUsed, arrayBuffers }
}
const before = await memory()

const store = makeInProcess()
const local = store.local!
const BUDGET = "allowance:k1:2026-01"
const T0 = 1_767_225_600_000
Effect.runSync(store.budgetSeed({ budget: BUDGET, spent: 0, granted: 0, grantIds: [], expireAt: 0, now: T0, counted: [], uncounted: [], final: false }))

let call = 0
const oneCall = () => {
  const now = T0 + (call++ * 1000) / rate
  const id = newId("res")
  local.budgetReserve({ budget: BUDGET, cap: 1e15, amount: 10, id, ttlMs: 60_000, now, expireAt: 0 })
  local.budgetSettle({ budget: BUDGET, id, chargeId: newId("call"), amount: 10, actual: 5, now })
}

for (let i = 0; i < rate * 660; i++) oneCall()
for (let round = 0; round < 3; round++) {
  let longest = 0
  const started = performance.now()
  for (let i = 0; i < calls; i++) {
    const t = performance.now()
    oneCall()
    longest = Math.max(longest, performance.now() - t)
  }
  const us = ((performance.now() - started) * 1000) / calls
  console.log(`rate ${rate}/s: ${us.toFixed(2)} µs per reserve + settle (timer included), longest ${longest.toFixed(2)} ms`)
}
const after = await memory()
const ids = Math.round(rate * 600 * 2) // ten minutes of holds and charges
const perId = (bytes: number) => (bytes / ids).toFixed(1)
console.log(`memory of ~${ids.toLocaleString("en-US")} ids: heap +${perId(after.heapUsed - before.heapUsed)} B/id, array buffers +${perId(after.arrayBuffers - before.arrayBuffers)} B/id`)
