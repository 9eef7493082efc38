/**
 * The batch workers of one instance. Every instance runs them, so any instance executes any
 * batch:
 *  - fill (every poll interval — longer while polls find nothing — and at once when a batch is
 *    created here): claims up to
 *    `concurrency` − (requests in flight) requests with a lease and executes each in a fiber
 *    (execute-request.ts), then writes its result — fenced by the claim's attempt, so a request
 *    taken over meanwhile keeps the result of its current holder only;
 *  - heartbeat (every lease/3): extends the leases; a request no longer ours is interrupted;
 *  - sweeper (every lease/2, at most 1 s): expires batches past their window and ends the
 *    orphaned in-flight requests of stopped batches.
 * A request whose lease lapsed (its instance died) is claimed again by whichever instance polls
 * first; after `maxTakeovers` takeovers it ends `errored` (a request that crashes instances must
 * not crash them all). Batch calls are metered under a stable id per request, so a request
 * re-executed after a takeover is charged once. On a graceful stop the fibers are interrupted
 * first and the leases let go, so another instance continues at once.
 */
import { Context, Effect, FiberMap, Layer, Schedule, Semaphore } from "effect"
import { Catalog } from "../catalog/catalog.ts"
import { Settings } from "../config/settings.ts"
import { coalescedRuns } from "../util/coalesced-runs.ts"
import { errorBody } from "../http/render-error.ts"
import { KeysRepo } from "../keys/keys-repo.ts"
import { newId } from "../util/ids.ts"
import { ModelCaller } from "../runtime/model-caller.ts"
import { ServiceUnavailable } from "../errors.ts"
import { type BatchClaim, BatchesRepo, type RequestOutcome } from "./batches-repo.ts"
import { executeRequest } from "./execute-request.ts"
import { RepeatedFailure, repeatInScope } from "../util/repeated-failure.ts"

export class BatchWorkers extends Context.Service<BatchWorkers, {
  readonly instanceId: string
  /** How long a new batch may take (`expires_at` = created + this). */
  readonly windowMs: number
  /** Claims work now (after a batch was created here) instead of at the next poll. */
  wake(): Effect.Effect<void>
}>()("gateway/batches/BatchWorkers") {
  static readonly layer = Layer.effect(BatchWorkers, Effect.gen(function*() {
    const all = yield* Settings
    const settings = {
      leaseMs: all.batchLeaseMs,
      concurrency: all.batchConcurrency,
      pollMs: all.batchPollMs,
      windowMs: all.batchWindowMs,
      maxTakeovers: all.batchMaxTakeovers
    }
    const repo = yield* BatchesRepo
    const keys = yield* KeysRepo
    const modelCaller = yield* ModelCaller
    const catalog = yield* Catalog
    const instanceId = newId("inst")
    const concurrency = Math.max(1, settings.concurrency)
    const leaseMs = Math.max(300, settings.leaseMs)

    // Registered before the fibers' FiberMap, so it runs after they are interrupted.
    yield* Effect.addFinalizer(() => repo.release(instanceId).pipe(Effect.ignore))
    const inFlight = yield* FiberMap.make<string>()
    const attempts = new Map<string, number>()
    const fillLock = yield* Semaphore.make(1)
    const scope = yield* Effect.scope

    const tag = (claim: BatchClaim) => `${claim.batchId}:${claim.idx}`
    // Polls that found nothing in a row: an idle instance polls less often (up to 16 × pollMs, at
    // most 5 s), so it does not query SQL twice a second for nothing; any claim or local create
    // brings it back to pollMs.
    let idlePolls = 0
    const pollMs = Math.max(20, settings.pollMs)
    const nextPollMs = () => Math.min(Math.max(pollMs, 5_000), pollMs * 2 ** Math.min(4, idlePolls))

    /** Writes the outcome, retrying a storage failure a few times (the lease keeps the request ours). */
    const record = (claim: BatchClaim, outcome: RequestOutcome) =>
      repo.finish(claim, instanceId, outcome).pipe(
        Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.upTo({ times: 5 }))),
        Effect.catchCause((cause) => Effect.logWarning(`batches: recording ${tag(claim)} failed; its lease will lapse and it runs again`, cause))
      )

    const tooManyTakeovers = (claim: BatchClaim): RequestOutcome => {
      const error = new ServiceUnavailable({ status: 500, message: `The request was interrupted ${claim.takeovers} times (its instance stopped) and is not retried again` })
      const requestId = `batchreq_${claim.batchId}_${claim.idx}`
      const rendered = errorBody(error, claim.kind === "messages" ? "messages" : "openai", requestId)
      const result = claim.kind === "messages"
        ? { type: "errored", error: rendered.body }
        : { status_code: 500, request_id: requestId, body: rendered.body }
      return { _tag: "Ended", state: "errored", result: JSON.stringify(result) }
    }

    const execute = Effect.fnUntraced(function*(claim: BatchClaim): Effect.fn.Return<void> {
      if (claim.takeovers > settings.maxTakeovers) {
        yield* record(claim, tooManyTakeovers(claim))
        return
      }
      const key = yield* keys.findById(claim.keyId).pipe(Effect.orElseSucceed(() => null))
      if (key === null) return // storage trouble: let the lease lapse, it runs again
      // Provided one by one: Effect.provideContext merges by copying the fiber's whole context
      // (~60 services) per item; an added service is linked on top of it instead.
      const outcome = yield* Effect.scoped(executeRequest(claim, key)).pipe(
        Effect.provideService(ModelCaller, modelCaller),
        Effect.provideService(Catalog, catalog)
      )
      yield* record(claim, outcome)
    })

    // An outage fails every poll: logged once, then a line a minute (`RepeatedFailure`).
    const claimFailures = new RepeatedFailure("batches")
    const fill: Effect.Effect<void> = fillLock.withPermits(1)(Effect.gen(function*() {
      const free = concurrency - attempts.size
      if (free <= 0) return
      const claims = yield* repo.claim(instanceId, leaseMs, free)
      yield* claimFailures.succeeded
      idlePolls = claims.length === 0 ? idlePolls + 1 : 0
      for (const claim of claims) {
        attempts.set(tag(claim), claim.attempt)
        yield* FiberMap.run(
          inFlight,
          tag(claim),
          execute(claim).pipe(
            // Only this attempt's entry: a newer claim of the same request may have replaced it.
            Effect.ensuring(Effect.sync(() => attempts.get(tag(claim)) === claim.attempt && attempts.delete(tag(claim)))),
            // A freed worker looks for more work at once.
            Effect.ensuring(fills.ask)
          )
        )
      }
    }).pipe(Effect.catchCause((cause) => claimFailures.failed("claiming requests failed; retrying", cause))))
    // Every request that ends asks for a fill: one run after the current one serves all the asks
    // that came meanwhile (`coalescedRuns`), rather than a fiber each waiting on the lock.
    const fills = coalescedRuns(fill, scope)

    // Under the fill lock: a request claimed just now is in `attempts` before its lease is judged.
    const heartbeat = fillLock.withPermits(1)(Effect.gen(function*() {
      const held = yield* repo.renew(instanceId, leaseMs)
      for (const [id, attempt] of attempts) {
        if (held.has(`${id}@${attempt}`)) continue
        // Taken over (or ended) meanwhile: stop working on it.
        attempts.delete(id)
        yield* FiberMap.remove(inFlight, id)
      }
      // A lease held with no fiber working on it (its fiber ended without writing a result, e.g.
      // storage failed past the retries) is let go, so the request runs again instead of being
      // renewed forever.
      const orphans = [...held].filter((h) => {
        const [id, attempt] = h.split("@")
        return attempts.get(id) !== Number(attempt)
      })
      if (orphans.length > 0) yield* repo.releaseClaims(instanceId, orphans)
    }))

    yield* repeatInScope("batches: heartbeat", Math.max(100, Math.floor(leaseMs / 3)), heartbeat)
    yield* repeatInScope("batches: sweeper", Math.max(100, Math.min(1_000, Math.floor(leaseMs / 2))), repo.sweep())
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(fill, Effect.suspend(() => Effect.sleep(nextPollMs())))))

    return BatchWorkers.of({
      instanceId,
      windowMs: Math.max(1, settings.windowMs),
      wake: () =>
        Effect.suspend(() => {
          idlePolls = 0
          return fills.ask
        })
    })
  }))
}
