/** The usage ledger on both engines: batching, flush on close, idempotent writes, summaries. */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { newId } from "../../src/util/ids.ts"
import { monthOf } from "../../src/metering/month.ts"
import { type LedgerEntry, UsageLedger } from "../../src/metering/usage-ledger.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { databases } from "./support.ts"

const entry = (keyId: string, fields: Partial<LedgerEntry> = {}): LedgerEntry => ({
  keyId,
  model: "svc-nova-mini",
  requestId: newId("call"),
  usage: makeUsage({ inputTokens: 100, outputTokens: 20, cachedInputTokens: 10, reasoningTokens: 5 }),
  costMicros: 7,
  at: new Date(),
  ...fields
})

const rowsOf = (keyId: string) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ n: number; cost: number | null }>`SELECT count(*)::float8 AS n, sum(cost_micros)::float8 AS cost
    FROM usage_ledger WHERE key_id = ${keyId}`
  return { n: rows[0].n, cost: rows[0].cost ?? 0 }
})

/** Polls until `check` holds (the writer is a background fiber); fails after ~10 s. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      if (yield* check) return
      yield* Effect.sleep(20)
    }
    throw new Error("condition not reached")
  })

for (const db of databases()) {
  describe(`usage ledger (${db.name})`, () => {
    layer(db.layer(), { timeout: "60 seconds", excludeTestServices: true })((it) => {
      it.effect("a full batch wakes the writer at once; a partial one waits for the interval", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          yield* Effect.gen(function*() {
            const ledger = yield* UsageLedger
            for (let i = 0; i < 5; i++) yield* ledger.record(entry(keyId))
            // The interval is an hour: only the batch size can have triggered this write. Waits for
            // the writer to have taken the batch off its buffer too, not only for the rows: another
            // connection can see them committed before the writer has their answer, and a flush
            // writes whatever is buffered when its insert returns (the two entries recorded next,
            // had they come in that gap: a failure on PostgreSQL, 2026-12-01).
            yield* eventually(Effect.map(Effect.zip(rowsOf(keyId), ledger.pending), ([r, pending]) => r.n === 5 && pending === 0))
            yield* ledger.record(entry(keyId))
            yield* ledger.record(entry(keyId))
            yield* Effect.sleep(200)
            expect(yield* ledger.pending).toBe(2)
            expect((yield* rowsOf(keyId)).n).toBe(5)
          }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000, batchSize: 5 })))
          // Closing the layer wrote the partial batch.
          expect((yield* rowsOf(keyId)).n).toBe(7)
        }))

      it.effect("a partial batch is written within the interval", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          const ledger = yield* UsageLedger
          yield* ledger.record(entry(keyId))
          yield* eventually(Effect.map(ledger.pending, (n) => n === 0))
          expect((yield* rowsOf(keyId)).n).toBe(1)
        }).pipe(Effect.provide(UsageLedger.layerTest)))

      it.effect("a graceful stop writes everything still buffered (nothing lost)", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          yield* Effect.gen(function*() {
            const ledger = yield* UsageLedger
            for (let i = 0; i < 1_234; i++) yield* ledger.record(entry(keyId, { costMicros: i }))
            expect((yield* rowsOf(keyId)).n).toBe(0)
          }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000, batchSize: 100_000 })))
          expect(yield* rowsOf(keyId)).toEqual({ n: 1_234, cost: (1_233 * 1_234) / 2 })
        }))

      it.effect("a flushed row holds every field of its entry in its own column", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          const ledger = yield* UsageLedger
          const at = new Date("2026-03-04T05:06:07.089Z")
          const recorded = entry(keyId, {
            model: "svc-atlas-1",
            usage: makeUsage({ inputTokens: 101, outputTokens: 202, cachedInputTokens: 33, reasoningTokens: 44 }),
            costMicros: 9_007_199_254,
            at,
            funding: "credits"
          })
          yield* ledger.record(recorded)
          yield* ledger.flush()
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql`SELECT request_id, key_id, model, funding, input_tokens::float8 AS input, output_tokens::float8 AS output,
              cached_input_tokens::float8 AS cached, reasoning_tokens::float8 AS reasoning, cost_micros::float8 AS cost,
              to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at
            FROM usage_ledger WHERE key_id = ${keyId}`
          expect(rows).toEqual([{
            request_id: recorded.requestId, key_id: keyId, model: "svc-atlas-1", funding: "credits",
            input: 101, output: 202, cached: 33, reasoning: 44, cost: 9_007_199_254, at: at.toISOString()
          }])
        }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 }))))

      it.effect("an entry written twice (a retried batch) is stored once, beside the batch's new ones", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          const ledger = yield* UsageLedger
          const once = entry(keyId)
          yield* ledger.record(once)
          yield* ledger.flush()
          // The batch is written without a conflict clause: the stored row fails it, and it is
          // written again skipping that row.
          yield* ledger.record(entry(keyId))
          yield* ledger.record(once)
          yield* ledger.record(entry(keyId))
          yield* ledger.flush()
          expect((yield* rowsOf(keyId)).n).toBe(3)
          expect(yield* ledger.pending).toBe(0)
        }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 }))))

      it.effect("summary sums per model over [from, to); spend per month and per funding", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          const other = newId("key")
          const ledger = yield* UsageLedger
          const month = monthOf(Date.now())
          const inMonth = new Date(month.start + 1_000)
          const lastMonth = new Date(month.start - 1)
          const usage = (n: number) => makeUsage({ inputTokens: n, outputTokens: 2 * n, cachedInputTokens: 1, reasoningTokens: 1 })
          yield* ledger.record(entry(keyId, { model: "svc-atlas-1", usage: usage(10), costMicros: 100, at: inMonth }))
          yield* ledger.record(entry(keyId, { model: "svc-atlas-1", usage: usage(20), costMicros: 200, at: inMonth }))
          yield* ledger.record(entry(keyId, { model: "svc-pico-1", usage: usage(5), costMicros: 5, at: inMonth }))
          yield* ledger.record(entry(keyId, { model: "svc-pico-1", usage: usage(5), costMicros: 40, at: inMonth, funding: "credits" }))
          yield* ledger.record(entry(keyId, { model: "svc-pico-1", usage: usage(7), costMicros: 1_000, at: lastMonth }))
          yield* ledger.record(entry(other, { model: "svc-pico-1", costMicros: 9, at: inMonth }))
          // Still buffered: spend counts what SQL does not have yet.
          expect(yield* ledger.spentThisMonth(keyId)).toBe(305)
          expect(yield* ledger.spentOnCredits(keyId)).toBe(40)
          const summary = yield* ledger.summary({ keyId, from: new Date(month.start), to: new Date(month.end) })
          expect(summary).toEqual([
            { model: "svc-atlas-1", requests: 2, inputTokens: 30, outputTokens: 60, cachedInputTokens: 2, reasoningTokens: 2, costMicros: 300 },
            { model: "svc-pico-1", requests: 2, inputTokens: 10, outputTokens: 20, cachedInputTokens: 2, reasoningTokens: 2, costMicros: 45 }
          ])
          // Written now: the same totals from SQL alone.
          expect(yield* ledger.pending).toBe(0)
          expect(yield* ledger.spentThisMonth(keyId)).toBe(305)
          const wide = yield* ledger.summary({ keyId, from: new Date(lastMonth.getTime()), to: new Date(month.end) })
          expect(wide.find((m) => m.model === "svc-pico-1")).toMatchObject({ requests: 3, costMicros: 1_045 })
          const empty = yield* ledger.summary({ keyId, from: new Date(month.end), to: new Date(month.end + 1) })
          expect(empty).toEqual([])
        }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 }))))

      it.effect("spentOn says which of the given request ids its total counts, in SQL or still buffered", () =>
        Effect.gen(function*() {
          const keyId = newId("key")
          const ledger = yield* UsageLedger
          const month = monthOf(Date.now())
          const at = new Date(month.start + 1_000)
          const [a, b, c] = [newId("call"), newId("call"), newId("call")]
          yield* ledger.record(entry(keyId, { requestId: a, costMicros: 10, at }))
          yield* ledger.record(entry(keyId, { requestId: b, costMicros: 20, at, funding: "credits" }))
          yield* ledger.flush()
          yield* ledger.record(entry(keyId, { requestId: c, costMicros: 30, at }))
          expect((yield* ledger.unflushed).map((e) => e.requestId)).toEqual([c])
          const query = { keyId, funding: "allowance" as const, from: month.start, to: month.end }
          const spent = yield* ledger.spentOn({ ...query, requestIds: [a, b, c, "call_never"] })
          // b is another budget (credits): not in this total, so not counted.
          expect({ micros: spent.micros, counted: [...spent.counted].sort() }).toEqual({ micros: 40, counted: [a, c].sort() })
          expect(yield* ledger.spentOn(query)).toEqual({ micros: 40, counted: [] })
          expect((yield* ledger.spentOn({ ...query, requestIds: ["call_never"] })).counted).toEqual([])
        }).pipe(Effect.provide(UsageLedger.layerWith({ flushIntervalMs: 3_600_000 }))))
    })
  })
}
