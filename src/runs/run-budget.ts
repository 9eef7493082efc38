/**
 * A run's `budgetUsd`, kept in SQL beside the run: before each step the step's worst-case cost is
 * held (`reserved_micros`) only if spend + holds + it stay within the budget, checked and taken in
 * one UPDATE under the row lock, so two instances can never overshoot it together. The hold is
 * keyed by the step's node id: a step re-run after a crash finds its hold and takes no second one;
 * `RunLog` settles it into spend once, at the real cost (never above the hold).
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"

export type HoldAnswer = "held" | "refused"

export class RunBudget extends Context.Service<RunBudget, {
  hold(runId: string, nodeId: string, amountMicros: number): Effect.Effect<HoldAnswer, SqlError.SqlError>
}>()("gateway/runs/RunBudget") {
  static readonly layer = Layer.effect(RunBudget, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const holdLocked = Effect.fnUntraced(function*(runId: string, nodeId: string, amountMicros: number) {
      const existing = yield* sql`SELECT node_id FROM run_charges WHERE node_id = ${nodeId}`
      if (existing.length > 0) return "held" as const
      // Only the run's one actor takes holds, one step at a time: a hold of another step still
      // unsettled here was taken by an attempt that died before its `node.started`, so nothing
      // ran under it. Give it back, or it would shrink the budget for good.
      const orphans = yield* sql<{ reserved_micros: string | number }>`UPDATE run_charges SET cost_micros = 0, settled_at = now()
        WHERE run_id = ${runId} AND node_id <> ${nodeId} AND cost_micros IS NULL RETURNING reserved_micros`
      const orphaned = orphans.reduce((sum, row) => sum + Number(row.reserved_micros), 0)
      if (orphaned > 0) yield* sql`UPDATE runs SET reserved_micros = reserved_micros - ${orphaned} WHERE id = ${runId}`
      const amount = Math.max(1, Math.ceil(amountMicros))
      const taken = yield* sql`UPDATE runs SET reserved_micros = reserved_micros + ${amount}
        WHERE id = ${runId} AND finished_at IS NULL
          AND (budget_micros IS NULL OR spent_micros + reserved_micros + ${amount} <= budget_micros)
        RETURNING id`
      if (taken.length === 0) return "refused" as const
      yield* sql`INSERT INTO run_charges (node_id, run_id, reserved_micros) VALUES (${nodeId}, ${runId}, ${amount})`
      return "held" as const
    })

    const hold = (runId: string, nodeId: string, amountMicros: number) =>
      sql.withTransaction(holdLocked(runId, nodeId, amountMicros)).pipe(Effect.withSpan("RunBudget.hold"))
    return RunBudget.of({ hold })
  }))
}
