/**
 * Who executes which run. An executable run belongs to the instance holding its lease
 * (`lease_owner`, `lease_expires_at`); the owner extends its leases by heartbeat. When a process
 * dies its leases lapse, and any instance's reaper claims the run (`FOR UPDATE SKIP LOCKED`, so two
 * reapers never claim the same run) with `attempt + 1`. The attempt is the fence: log writes of an
 * older attempt are refused (see RunLog). Lease times are the database's clock, the one clock all
 * instances share.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"

export interface Claim {
  readonly runId: string
  readonly attempt: number
}

const toClaim = (row: { id: string; attempt: number }): Claim => ({ runId: row.id, attempt: Number(row.attempt) })

export class RunLeases extends Context.Service<RunLeases, {
  /** Claims up to `limit` live executable runs whose lease lapsed. */
  claimExpired(owner: string, ttlMs: number, limit: number): Effect.Effect<ReadonlyArray<Claim>, SqlError.SqlError>
  /** Extends every live lease `owner` holds; returns them (a run missing here is no longer ours). */
  renew(owner: string, ttlMs: number): Effect.Effect<ReadonlyArray<Claim>, SqlError.SqlError>
  /** Lets the leases of `owner` lapse now (graceful stop), so another instance resumes at once. */
  release(owner: string): Effect.Effect<void, SqlError.SqlError>
  /** Deletes runs finished more than `retentionDays` ago (events and charges cascade) and expired idempotency keys. */
  prune(retentionDays: number): Effect.Effect<number, SqlError.SqlError>
}>()("gateway/runs/RunLeases") {
  static readonly layer = Layer.effect(RunLeases, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ttl = (ms: number) => sql`now() + ${Math.round(ms)}::int * interval '1 millisecond'`

    const claimExpired = Effect.fn("RunLeases.claimExpired")(function*(owner: string, ttlMs: number, limit: number) {
      const rows = yield* sql<{ id: string; attempt: number }>`UPDATE runs SET lease_owner = ${owner}, lease_expires_at = ${ttl(ttlMs)}, attempt = attempt + 1
        WHERE id IN (
          SELECT id FROM runs WHERE executable AND finished_at IS NULL AND (lease_expires_at IS NULL OR lease_expires_at < now())
          ORDER BY lease_expires_at NULLS FIRST LIMIT ${limit} FOR UPDATE SKIP LOCKED
        ) RETURNING id, attempt`
      return rows.map(toClaim)
    })

    const renew = Effect.fn("RunLeases.renew")(function*(owner: string, ttlMs: number) {
      const rows = yield* sql<{ id: string; attempt: number }>`UPDATE runs SET lease_expires_at = ${ttl(ttlMs)}
        WHERE lease_owner = ${owner} AND finished_at IS NULL RETURNING id, attempt`
      return rows.map(toClaim)
    })

    const release = Effect.fn("RunLeases.release")(function*(owner: string) {
      yield* sql`UPDATE runs SET lease_expires_at = now() WHERE lease_owner = ${owner} AND finished_at IS NULL`
    })

    const prune = Effect.fn("RunLeases.prune")(function*(retentionDays: number) {
      const rows = yield* sql`DELETE FROM runs WHERE finished_at < now() - ${retentionDays}::int * interval '1 day' RETURNING id`
      yield* sql`DELETE FROM run_idempotency WHERE expires_at < now()`
      return rows.length
    })

    return RunLeases.of({ claimExpired, renew, release, prune })
  }))
}
