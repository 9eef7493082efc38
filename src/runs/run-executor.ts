/**
 * The run actor host of one instance. It runs one actor (src/runs/run-actor.ts) per run whose
 * lease it holds, and three loops:
 *  - heartbeat (every lease/3): extends its leases; an actor whose run is no longer ours (lease
 *    taken over after a stall, run finished) is stopped;
 *  - reaper (at start, then every lease/2): ends every live run of a revoked key (`failed`,
 *    `key_revoked`: its owner can no longer drive or cancel it), then claims runs whose lease
 *    lapsed — their instance died or stopped — and resumes them from the log; a run claimed more
 *    than `maxAttempts` times ends `failed` with reason `max_attempts` (a run that crashes its
 *    instance must not crash them all);
 *  - retention (hourly): prunes runs finished more than `retentionDays` ago.
 * On a graceful stop the actors are interrupted first, then the leases are let go, so another
 * instance resumes the runs at once instead of after the lease time.
 */
import { Context, Effect, FiberMap, Layer } from "effect"
import type { Catalog } from "../catalog/catalog.ts"
import { Settings } from "../config/settings.ts"
import type { RunSignals } from "../coordination/run-signals.ts"
import type { KeysRepo } from "../keys/keys-repo.ts"
import { newId } from "../util/ids.ts"
import type { ModelCaller } from "../runtime/model-caller.ts"
import { runActor } from "./run-actor.ts"
import type { RunBudget } from "./run-budget.ts"
import { RunLeases } from "./run-leases.ts"
import { RunLog } from "./run-log.ts"
import { RunsRepo } from "./runs-repo.ts"
import { RepeatedFailure, repeatInScope } from "../util/repeated-failure.ts"

type ActorServices = RunsRepo | RunLog | RunBudget | RunSignals | Catalog | ModelCaller | KeysRepo

export class RunExecutor extends Context.Service<RunExecutor, {
  /** This process's lease owner id. */
  readonly instanceId: string
  readonly leaseMs: number
  /** How often an idle event stream sends a heartbeat comment. */
  readonly heartbeatMs: number
  /** Starts the actor of a run this instance just leased (attempt 1 at create). */
  start(runId: string, attempt: number): Effect.Effect<void>
}>()("gateway/runs/RunExecutor") {
  static readonly layer = Layer.effect(RunExecutor, Effect.gen(function*() {
    const { runLeaseMs: leaseMs, runMaxAttempts: maxAttempts, runRetentionDays: retentionDays, runSseHeartbeatMs: heartbeatMs, runStepRetries, runRetryBaseMs } =
      yield* Settings
    const leases = yield* RunLeases
    const log = yield* RunLog
    const repo = yield* RunsRepo
    const services = yield* Effect.context<ActorServices>()
    const instanceId = newId("inst")
    const retryPolicy = { maxRetries: Math.max(0, runStepRetries), baseMs: Math.max(1, runRetryBaseMs) }

    // Registered before the actors' FiberMap, so it runs after they are interrupted.
    yield* Effect.addFinalizer(() => leases.release(instanceId).pipe(Effect.ignore))
    const actors = yield* FiberMap.make<string>()
    const attempts = new Map<string, number>()

    const start = Effect.fnUntraced(function*(runId: string, attempt: number) {
      attempts.set(runId, attempt)
      yield* FiberMap.run(
        actors,
        runId,
        runActor(runId, { owner: instanceId, attempt }, retryPolicy).pipe(
          Effect.ensuring(Effect.sync(() => attempts.delete(runId))),
          Effect.provideContext(services)
        ),
        { onlyIfMissing: true }
      )
    })

    const heartbeat = Effect.gen(function*() {
      const held = new Map((yield* leases.renew(instanceId, leaseMs)).map((claim) => [claim.runId, claim.attempt]))
      for (const [runId, attempt] of attempts) {
        if (held.get(runId) !== attempt) yield* FiberMap.remove(actors, runId)
      }
      // A run we hold without a live actor (its actor gave up on a storage outage) is started
      // again, so no leased run is left without an executor.
      for (const [runId, attempt] of held) {
        if (!attempts.has(runId)) yield* start(runId, attempt)
      }
    })

    const endRevokedFailures = new RepeatedFailure("runs: ending revoked keys' runs")
    const reap = Effect.gen(function*() {
      // Its failure must not keep lapsed runs from being claimed.
      yield* repo.endRevoked().pipe(
        Effect.andThen(endRevokedFailures.succeeded),
        Effect.catchCause((cause) => endRevokedFailures.failed("failed; retrying", cause))
      )
      const claims = yield* leases.claimExpired(instanceId, leaseMs, 16)
      for (const claim of claims) {
        if (claim.attempt > maxAttempts) {
          yield* log.append(claim.runId, [{ type: "outcome", status: "failed", reason: "max_attempts", attempts: claim.attempt - 1 }], {
            fence: { owner: instanceId, attempt: claim.attempt }
          }).pipe(Effect.ignore)
        } else {
          yield* log.append(claim.runId, [{ type: "run.resumed", attempt: claim.attempt }], { fence: { owner: instanceId, attempt: claim.attempt } }).pipe(Effect.ignore)
          yield* start(claim.runId, claim.attempt)
        }
      }
    })

    // An outage fails every round: logged once, then a line a minute (`RepeatedFailure`).
    yield* repeatInScope("runs: heartbeat", Math.max(100, Math.floor(leaseMs / 3)), heartbeat)
    yield* repeatInScope("runs: reaper", Math.max(200, Math.floor(leaseMs / 2)), reap)
    yield* repeatInScope("runs: retention", 3_600_000, leases.prune(retentionDays))

    return RunExecutor.of({ instanceId, leaseMs: leaseMs, heartbeatMs, start })
  }))
}
