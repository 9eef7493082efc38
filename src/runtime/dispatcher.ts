/**
 * Runs one request through its candidates: waits for a slot (CapacityQueues), calls, retries and
 * fails over. The dispatch rules (machines/dispatch.ts, a pure transition function) decide each
 * next step; this file only performs it and reports what happened.
 *
 * `dispatch` resolves once the first event of some attempt has arrived, so `servedModel` (the
 * `xsvc-model` header) names the model that actually produced it, and every failure before that
 * point (retries, failover, a non-retryable error, a queue timeout) is still an ordinary failure
 * the HTTP layer can answer with a status. After it, `events` carries the rest:
 * - a break in plain text continues on another candidate that has `resume` (the client sees one
 *   stream; `onContinue` lets the SSE writer mark it with a comment);
 * - a break in a tool call, or with no candidate left, fails the stream with the BackendError.
 * `events` must be run (once): it holds the slot, released when it ends, fails or is interrupted
 * (outcome `success` / `failure` / `cancelled`). A non-retryable error releases as `success`:
 * the placement answered, the request was wrong.
 */
import { Cause, Context, Effect, Exit, Layer, Random, Result, Scope, Stream, type Tracer } from "effect"
import { isReadonlyArrayNonEmpty, type NonEmptyReadonlyArray } from "effect/Array"
import { type DispatchEvent, eligibleCandidates, startDispatch, stepDispatch } from "../../machines/dispatch.ts"
import { BackendError } from "../backends/backend.ts"
import { type CanonicalEvent, type CanonicalResponse, collectStream } from "../model/events.ts"
import type { Lease, LeaseOutcome, PendingAdmission, QueuePriority, QueueTimeout } from "./capacity-queue-types.ts"
import { CapacityQueues } from "./capacity-queues.ts"
import { canContinueText, makeSplicer } from "./continuation.ts"
import { Delivered, runawayLine } from "./delivered.ts"
import { Settings } from "../config/settings.ts"
import { nextDelay } from "./retry-policy.ts"
import type { GatewayMetrics } from "../observability/gateway-metrics.ts"
import type { RequestRecord } from "../observability/request-record.ts"
import { Telemetry } from "../observability/telemetry.ts"
import { type DispatchTrace, makeDispatchTrace } from "../observability/tracing.ts"
import { onExitPlain, toPullPlain } from "../util/scoped.ts"

export interface DispatchCandidate {
  readonly placementId: string
  /** Catalog id of the model this placement serves. */
  readonly modelId: string
  readonly run: (placementId: string) => Stream.Stream<CanonicalEvent, BackendError>
  /** The whole answer at once (a client that did not stream); absent: `run` is collected. */
  readonly complete?: (() => Effect.Effect<CanonicalResponse, BackendError>) | undefined
  /** Continues a broken text answer here, from the text already sent (an assistant prefix). */
  readonly resume?: ((textSoFar: string) => Stream.Stream<CanonicalEvent, BackendError>) | undefined
}

/** What a caller may ask of one dispatch besides its candidates. */
export interface DispatchHooks {
  /** The longest one wait for a slot may take (see CapacityQueues.acquire). */
  readonly deadlineMs?: number | undefined
  /** Runs once, the first time the request has to wait for a slot. */
  readonly onQueued?: Effect.Effect<void> | undefined
  /** `batch`: takes only capacity interactive requests leave idle (see CapacityQueues.acquire). */
  readonly priority?: QueuePriority | undefined
  /** Runs when a broken text stream continues on another candidate. */
  readonly onContinue?: ((to: { readonly placementId: string; readonly modelId: string }) => Effect.Effect<void>) | undefined
  /** The HTTP request's record: queue waits, attempts, upstream time, retries, failovers. */
  readonly record?: RequestRecord | undefined
}

export interface DispatchOptions extends DispatchHooks {
  /** In preference order: the model's placements, then its equivalents'. */
  readonly candidates: ReadonlyArray<DispatchCandidate>
  readonly keyId: string
  /**
   * The record of what the client was delivered, fed every chunk, and the stream's end (after the
   * slot is released): for a caller that reads them too, e.g. to count usage and settle. Inside the
   * dispatcher's own stage, not as two more stages every chunk passes through and an open stream
   * holds. Without one, the dispatcher keeps its own (the continuation reads it).
   */
  readonly delivered?: Delivered | undefined
  readonly onEnd?: ((exit: Exit.Exit<unknown, BackendError | QueueTimeout>) => Effect.Effect<unknown>) | undefined
  /** The call's admission still on its way: the first acquire rides behind it (see `PendingAdmission`). */
  readonly admission?: PendingAdmission | undefined
}

/** A non-streamed answer and where it came from. */
export interface Completed {
  readonly servedModel: string
  readonly placementId: string
  readonly response: CanonicalResponse
}

export interface Dispatched {
  readonly servedModel: string
  readonly placementId: string
  readonly events: Stream.Stream<CanonicalEvent, BackendError | QueueTimeout>
}

/** A call that has produced its first chunk; it owns the slot through `scope`. */
interface Attempt {
  readonly candidate: DispatchCandidate
  /** Its first chunk, until the stream's pull takes it (then dropped: an open stream does not keep it). */
  first: ReadonlyArray<CanonicalEvent> | undefined
  readonly pull: Effect.Effect<ReadonlyArray<CanonicalEvent>, BackendError | Cause.Done>
  /** Ends the attempt: releases the slot with `outcome` and closes the upstream stream. */
  readonly end: (outcome: LeaseOutcome) => Effect.Effect<void>
}

const emptyStream = (placementId: string) =>
  new BackendError({ status: 502, type: "api_error", message: `${placementId} ended without any event`, retryable: true })

/** An upstream far past the output ceiling it was sent (`Delivered.overran`): stopped, not retried. */
const runawayStream = (ceiling: number) =>
  new BackendError({
    status: 502,
    type: "api_error",
    message: `The upstream kept generating far past the ${ceiling}-token output ceiling it was sent (more than ${runawayLine(ceiling)} tokens) and was stopped`,
    retryable: false
  })

const outcomeOf = (error: BackendError): LeaseOutcome => (error.retryable ? "failure" : "success")

export interface DispatcherOptions {
  /** First backoff delay (doubling per round); the spec's 1 s unless a test or demo shortens it. */
  readonly retryBaseMs?: number | undefined
  /** Where waits, attempts, retries and failovers are counted (absent: nowhere). */
  readonly metrics?: GatewayMetrics | undefined
  /** Spans for queue waits, attempts and failovers (only when an exporter is configured). */
  readonly tracing?: boolean | undefined
}

/**
 * Counts one dispatch's attempts as plain calls (no Effect): each grant's wait, each attempt's
 * upstream time and outcome, and — after a failure — whether the next attempt is a retry on the
 * same placement or a failover to another. Into the metrics and the request's record. A class,
 * not four closures: an open stream holds it for as long as it lasts.
 */
class AttemptCounter {
  private readonly metrics: GatewayMetrics | undefined
  private readonly record: RequestRecord | undefined
  private failedOn: string | undefined
  constructor(metrics: GatewayMetrics | undefined, record: RequestRecord | undefined) {
    this.metrics = metrics
    this.record = record
  }
  /** A slot was granted after waiting `waitedMs`; the attempt on it starts now. */
  granted(placementId: string, waitedMs: number) {
    const { metrics, record, failedOn } = this
    if (metrics !== undefined) {
      metrics.queueWait(placementId, waitedMs / 1000)
      if (failedOn !== undefined) {
        metrics.retry(placementId)
        if (failedOn !== placementId) metrics.failover(failedOn, placementId)
      }
    }
    if (record !== undefined) {
      record.queueWaitMs += waitedMs
      record.attempts++
      record.placement = placementId
      if (failedOn !== undefined) {
        record.retries++
        if (failedOn !== placementId) record.failovers++
      }
    }
  }
  /** The attempt ended: `success`, `failure` (counted against the placement) or `cancelled`. */
  ended(placementId: string, modelId: string, outcome: LeaseOutcome, upstreamMs: number) {
    if (this.metrics !== undefined) this.metrics.upstream(placementId, modelId, outcome, upstreamMs / 1000)
    if (this.record !== undefined) this.record.upstreamMs += upstreamMs
    this.failedOn = outcome === "success" || outcome === "cancelled" ? undefined : placementId
  }
  backoff(ms: number) {
    if (this.record !== undefined) this.record.backoffMs += ms
  }
  timedOut(placementIds: ReadonlyArray<string>) {
    this.metrics?.queueTimeout(placementIds)
  }
}

/**
 * What one dispatch keeps, streamed or not: the rules' state and what its steps report to. Both
 * paths take their next step through the same helpers (`eligibleNext`, `acquireSlot`), so a rule
 * (the backoff, the circuits' verdict, a queue timeout, a grant) is performed in one place. A
 * class, as what an open stream holds is (one object, its fields in place).
 */
class DispatchRun {
  state: ReturnType<typeof startDispatch>
  lastError: BackendError | undefined = undefined
  /** The admission the first acquire rides behind; taken by it. */
  admission: PendingAdmission | undefined
  queued = false
  readonly options: DispatchOptions
  /** The candidates, by placement id (`candidateById`): a handful, so a scan rather than a Map each open stream holds. */
  readonly candidates: ReadonlyArray<DispatchCandidate>
  readonly counter: AttemptCounter
  readonly trace: DispatchTrace | undefined
  /**
   * What the queue runs when the dispatch has to wait: `queuedOnce`, when there is an
   * `options.onQueued`. Made by the caller, where a closure over the run costs no context of its own.
   */
  readonly onQueued: Effect.Effect<void> | undefined
  /** `streamed`: the rules learn which candidates can continue a broken stream. */
  constructor(options: DispatchOptions, metrics: GatewayMetrics | undefined, trace: DispatchTrace | undefined, streamed: boolean, onQueued: Effect.Effect<void> | undefined) {
    this.state = startDispatch({
      candidates: options.candidates.map(({ placementId, modelId, resume }) =>
        streamed ? { placementId, modelId, canResume: resume !== undefined } : { placementId, modelId })
    })
    this.admission = options.admission
    this.options = options
    this.candidates = options.candidates
    this.counter = new AttemptCounter(metrics, options.record)
    this.trace = trace
    this.onQueued = onQueued
  }
  /** `options.onQueued` the first time the dispatch waits, nothing after. */
  queuedOnce(): Effect.Effect<void> {
    if (this.queued || this.options.onQueued === undefined) return Effect.void
    this.queued = true
    return this.options.onQueued
  }
}

/** One streamed dispatch's state, shared by `connect` and the stream's pull. */
class DispatchSession extends DispatchRun {
  /** The attempt whose stream is being read. */
  current: Attempt | undefined = undefined
  /** The attempt that holds a slot but is not handed over yet: ended on any early exit. */
  pendingEnd: Attempt["end"] | undefined = undefined
  readonly sent: Delivered
  readonly dispatchedAt = performance.now()
  constructor(options: DispatchOptions, metrics: GatewayMetrics | undefined, trace: DispatchTrace | undefined, onQueued: Effect.Effect<void> | undefined) {
    super(options, metrics, trace, true, onQueued)
    this.sent = options.delivered ?? new Delivered()
  }
}

/** A slot granted to a dispatch: its lease, the candidate it is for, and when. */
interface Grant {
  readonly lease: Lease
  readonly candidate: DispatchCandidate
  readonly grantedAt: number
}

/** Effect's `uninterruptibleMask` restore: runs an effect with the interruptibility of before the mask. */
type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** A candidate by its placement id: one the dispatch's own rules named, so it is there. */
const candidateById = (candidates: ReadonlyArray<DispatchCandidate>, placementId: string): DispatchCandidate =>
  candidates.find((candidate) => candidate.placementId === placementId)!

/** Steps a dispatch's rules. */
const advance = (d: DispatchRun, event: DispatchEvent) => {
  d.state = stepDispatch(d.state, event)
}
/** Read through a function: `advance` changes the state behind the type checker's narrowing. */
const phase = (d: DispatchRun) => d.state.value

/** Opens the call inside the attempt's scope and waits for its first chunk. */
const firstChunk = (candidate: DispatchCandidate, open: Stream.Stream<CanonicalEvent, BackendError>, scope: Scope.Closeable) =>
  Effect.flatMap(Scope.provide(scope)(toPullPlain(open)), (pull) =>
    pull.pipe(
      Effect.catchIf(Cause.isDone, () => Effect.fail(emptyStream(candidate.placementId))),
      Effect.map((first) => ({ pull, first }))
    ))

const makeDispatcher = (queues: CapacityQueues["Service"], dispatcherOptions: DispatcherOptions = {}) => {
  /** A retry's wait: the backoff the rules call for after `d.lastError`, then `RETRY_DUE`. */
  const backoff = (d: DispatchRun): Effect.Effect<void> =>
    Effect.flatMap(Random.next, (random) => {
      const delay = nextDelay(d.state.context.attempts, d.lastError!, () => random, dispatcherOptions.retryBaseMs) ?? 0
      d.counter.backoff(delay)
      return Effect.andThen(Effect.sleep(delay), Effect.sync(() => advance(d, { type: "RETRY_DUE" })))
    })

  /** The candidates the rules allow now, each of their circuits asked (only once the dispatch has failed). */
  const eligibleAfterCircuits = (d: DispatchRun, failed: BackendError): Effect.Effect<ReadonlyArray<DispatchCandidate>, BackendError> =>
    Effect.flatMap(
      Effect.forEach(eligibleCandidates(d.state), (c) => Effect.map(queues.isOpen(c.placementId), (open) => (open ? c.placementId : undefined))),
      (open) => {
        // The rules end a request that already failed once every eligible placement is sick.
        advance(d, { type: "CIRCUITS", open: open.filter((id) => id !== undefined) })
        return phase(d) === "failed" ? Effect.fail(failed) : eligibleNow(d)
      }
    )

  /** The candidates the rules allow now; fails with the last error when none is left. */
  const eligibleNow = (d: DispatchRun): Effect.Effect<ReadonlyArray<DispatchCandidate>, BackendError> => {
    const eligible = eligibleCandidates(d.state).map((c) => candidateById(d.candidates, c.placementId))
    return eligible.length === 0 ? Effect.fail(d.lastError ?? emptyStream("dispatch")) : Effect.succeed(eligible)
  }

  /**
   * Where the next attempt may go, by the rules: after the backoff they call for, and once the
   * dispatch has failed, among the candidates whose circuit is still closed. Fails with the last
   * error when the rules have given up. The one home of these steps, for both paths. Reads the
   * state when called: call it when the step is taken (in a generator, or inside a `suspend`).
   */
  const eligibleNext = (d: DispatchRun): Effect.Effect<ReadonlyArray<DispatchCandidate>, BackendError> => {
    switch (phase(d)) {
      case "failed":
        return Effect.fail(d.lastError ?? emptyStream("dispatch"))
      case "retryWait":
        return Effect.andThen(backoff(d), Effect.suspend(() => eligibleNext(d)))
      default:
        return d.lastError === undefined ? eligibleNow(d) : eligibleAfterCircuits(d, d.lastError)
    }
  }

  /**
   * A slot on one of `eligible`, then `use` of it, which runs uninterruptibly unless it `restore`s:
   * the wait stays interruptible (a client that leaves drops out of the queue at once), and once
   * a slot is granted nothing can interrupt before `use` has taken charge of giving it back. A
   * queue timeout and a grant are reported here, for both paths. Made here, not in `connectLoop`'s
   * loop, whose variables that closures use live in one context that `end` (and so an open
   * stream) keeps: the acquiring effect and its targets would stay with it. Takes the admission
   * and starts the wait's clock when called: call it when the step is taken.
   */
  const acquireSlot = <A, E>(d: DispatchRun, eligible: ReadonlyArray<DispatchCandidate>, use: (grant: Grant, restore: Restore) => Effect.Effect<A, E>) => {
    const askedAt = performance.now()
    const targets = eligible.map((c) => c.placementId)
    const admission = d.admission
    d.admission = undefined
    const acquire = queues.acquire({ candidates: targets, keyId: d.options.keyId, deadlineMs: d.options.deadlineMs, onQueued: d.onQueued, priority: d.options.priority, admission })
    return Effect.uninterruptibleMask((restore) =>
      Effect.matchEffect(restore(d.trace === undefined ? acquire : d.trace.queueWait(acquire, targets)), {
        onFailure: (timeout) => {
          d.counter.timedOut(targets)
          advance(d, { type: "QUEUE_TIMEOUT" })
          return Effect.fail(timeout)
        },
        onSuccess: (lease) => {
          advance(d, { type: "GRANTED", placementId: lease.placementId })
          const grantedAt = performance.now()
          d.counter.granted(lease.placementId, grantedAt - askedAt)
          return use({ lease, candidate: candidateById(d.candidates, lease.placementId), grantedAt }, restore)
        }
      }))
  }

  /**
   * Follows the rules from `waiting` until an attempt has produced its first chunk. The generators
   * here are made once per dispatcher, never per request: V8 gives each generator closure a map in
   * the old generation that keeps the closure's scope (the whole request) alive through every
   * young-generation collection until the next full GC (see `answer` in http/chat-answer.ts).
   */
  const connectLoop = Effect.fnUntraced(function*(d: DispatchSession) {
    while (true) {
      const eligible = yield* eligibleNext(d)
      const scope = yield* Scope.make()
      // The slot is given back by `end`, after the scope (the upstream call) closes, not as a
      // second finalizer on the scope: a scope with two finalizers keeps them in a Map (~400 bytes
      // an open stream held), one with a single finalizer keeps it in a field. `end` is the
      // scope's only closer, and is called on every exit (`connect`, the stream's end).
      let held: Lease | undefined
      let grantedAt: number | undefined
      let attemptOn: DispatchCandidate | undefined
      let attemptSpan: Tracer.Span | undefined
      const end = (result: LeaseOutcome) =>
        Effect.suspend(() => {
          if (grantedAt !== undefined && attemptOn !== undefined) {
            d.counter.ended(attemptOn.placementId, attemptOn.modelId, result, performance.now() - grantedAt)
            grantedAt = undefined
            if (attemptSpan !== undefined) d.trace!.attemptEnded(attemptSpan, attemptOn.placementId, result, d.lastError)
          }
          const lease = held
          held = undefined
          // Uninterruptible, so an interruption between the two cannot keep the slot.
          return lease === undefined ? Scope.close(scope, Exit.void) : Effect.uninterruptible(Effect.andThen(Scope.close(scope, Exit.void), lease.release(result)))
        })
      d.pendingEnd = end
      const candidate = yield* acquireSlot(d, eligible, (grant) =>
        Effect.sync(() => {
          held = grant.lease
          grantedAt = grant.grantedAt
          attemptOn = grant.candidate
          return grant.candidate
        }))
      if (d.trace !== undefined) attemptSpan = yield* d.trace.attempt(candidate.placementId, candidate.modelId)
      const open = d.state.context.continuing ? candidate.resume!(d.sent.state.text) : candidate.run(candidate.placementId)
      // Under the attempt's span, so the upstream request carries it as its `traceparent`.
      const first = firstChunk(candidate, open, scope)
      const result = yield* Effect.result(attemptSpan === undefined ? first : Effect.withParentSpan(first, attemptSpan))
      if (Result.isSuccess(result)) {
        advance(d, { type: "FIRST_BYTE" })
        if (d.current === undefined) {
          // The answer's first event: time to first token, from the request's arrival when known.
          const firstAt = performance.now()
          const record = d.options.record
          if (record !== undefined) record.ttftMs = firstAt - record.startedAt
          dispatcherOptions.metrics?.timeToFirstToken(candidate.modelId, (firstAt - (record?.startedAt ?? d.dispatchedAt)) / 1000)
        }
        d.pendingEnd = undefined
        return { candidate, end, ...result.success } satisfies Attempt
      }
      d.lastError = result.failure
      yield* end(outcomeOf(result.failure))
      advance(d, { type: "FAILED", error: result.failure })
    }
  })
  const connect = (d: DispatchSession): Effect.Effect<Attempt, BackendError | QueueTimeout> =>
    connectLoop(d).pipe(Effect.onExit((exit) => {
      if (Exit.isFailure(exit)) d.trace?.done()
      return Exit.isFailure(exit) && d.pendingEnd !== undefined ? d.pendingEnd("cancelled") : Effect.void
    }))

  const dispatch = Effect.fnUntraced(function*(options: DispatchOptions) {
    const trace = dispatcherOptions.tracing === true ? yield* makeDispatchTrace() : undefined
    // `d` is kept by this generator's context already, so the closure costs no context of its own.
    const onQueued = options.onQueued === undefined ? undefined : Effect.suspend(() => d.queuedOnce())
    const d: DispatchSession = new DispatchSession(options, dispatcherOptions.metrics, trace, onQueued)
    const first = yield* connect(d)
    d.current = first
    const served = first.candidate

    let splice: ((event: CanonicalEvent) => ReadonlyArray<CanonicalEvent>) | undefined
    const deliver = (events: ReadonlyArray<CanonicalEvent>) => {
      const out = splice === undefined ? events : events.flatMap(splice)
      d.sent.add(out)
      return out
    }

    /** After a break: continue the text elsewhere if the rules allow, else fail the stream. */
    const onBreak = (error: BackendError): Effect.Effect<void, BackendError | QueueTimeout> =>
      Effect.suspend(() => {
        d.lastError = error
        return Effect.andThen(d.current!.end(outcomeOf(error)), Effect.suspend(() => {
          advance(d, canContinueText(d.sent.state) ? { type: "CONTINUE_TEXT", error } : { type: "FAILED", error })
          if (phase(d) !== "waiting") return Effect.fail(error)
          splice = makeSplicer(d.sent.state)
          return Effect.flatMap(connect(d), (next) => {
            d.current = next
            return options.onContinue === undefined ? Effect.void : options.onContinue(next.candidate)
          })
        }))
      })

    /** Ends the attempt (a failure: the placement misbehaved) and fails the stream. */
    const stopRunaway = (ceiling: number): Effect.Effect<never, BackendError> =>
      Effect.suspend(() => {
        const error = runawayStream(ceiling)
        d.lastError = error
        return d.current!.end("failure").pipe(
          Effect.andThen(Effect.sync(() => advance(d, { type: "FAILED", error }))),
          Effect.andThen(Effect.fail(error))
        )
      })

    type Chunk = NonEmptyReadonlyArray<CanonicalEvent>
    const pull: Effect.Effect<Chunk, BackendError | QueueTimeout | Cause.Done> = Effect.suspend(() => {
      // Checked before the next chunk, so the chunk that crossed the line was delivered.
      const overran = d.sent.overran
      if (overran !== undefined) return stopRunaway(overran)
      const taken = d.current!.first
      if (taken !== undefined) {
        d.current!.first = undefined
        const out = deliver(taken)
        return isReadonlyArrayNonEmpty(out) ? Effect.succeed(out) : pull
      }
      return Effect.matchEffect(d.current!.pull, {
        onSuccess: (chunk) => {
          const out = deliver(chunk)
          return isReadonlyArrayNonEmpty(out) ? Effect.succeed(out) : pull
        },
        onFailure: (error) =>
          Cause.isDone(error)
            ? d.current!.end("success").pipe(
              Effect.andThen(Effect.sync(() => advance(d, { type: "SUCCEEDED" }))),
              Effect.andThen(Effect.fail(error))
            )
            : onBreak(error).pipe(Effect.andThen(pull))
      })
    })

    const onEnd = options.onEnd
    const events = onExitPlain(Stream.fromPull(Effect.succeed(pull)), (exit) =>
      Effect.suspend(() => {
        const ended = d.current!.end("cancelled")
        d.trace?.done()
        return onEnd === undefined ? ended : Effect.andThen(ended, onEnd(exit))
      }))
    return { servedModel: served.modelId, placementId: served.placementId, events } satisfies Dispatched
  })
  /**
   * The same rules for a client that did not stream: each attempt takes a slot, asks for the whole
   * answer and gives the slot back; there is no first byte, so every failure can still fail over.
   */
  const complete = (options: DispatchOptions): Effect.Effect<Completed, BackendError | QueueTimeout> =>
    dispatcherOptions.tracing === true
      ? Effect.flatMap(makeDispatchTrace(), (trace) => completeWith(options, trace).pipe(Effect.ensuring(Effect.sync(() => trace.done()))))
      : completeWith(options, undefined)

  const completeWith = (options: DispatchOptions, trace: DispatchTrace | undefined): Effect.Effect<Completed, BackendError | QueueTimeout> =>
    Effect.suspend(() => {
      const onQueued = options.onQueued === undefined ? undefined : Effect.suspend(() => d.queuedOnce())
      const d: DispatchRun = new DispatchRun(options, dispatcherOptions.metrics, trace, false, onQueued)
      /** On a granted slot: the whole answer, the slot given back however the call ends. */
      const call = ({ lease, candidate, grantedAt }: Grant, restore: Restore) => {
        const answer = candidate.complete?.() ?? collectStream(candidate.run(candidate.placementId))
        const attempt = (span: Tracer.Span | undefined) =>
          restore(span === undefined ? answer : Effect.withParentSpan(answer, span)).pipe(
            Effect.onExit((exit) => {
              const outcome = Exit.isSuccess(exit) ? "success" : Cause.hasInterruptsOnly(exit.cause) ? "cancelled" : failureOutcome(exit.cause)
              d.counter.ended(candidate.placementId, candidate.modelId, outcome, performance.now() - grantedAt)
              if (span !== undefined) trace!.attemptEnded(span, candidate.placementId, outcome, failureOf(exit))
              return lease.release(outcome)
            })
          )
        return (trace === undefined ? attempt(undefined) : Effect.flatMap(trace.attempt(candidate.placementId, candidate.modelId), attempt)).pipe(
          Effect.map((response): Completed => ({ servedModel: candidate.modelId, placementId: candidate.placementId, response }))
        )
      }
      const loop: Effect.Effect<Completed, BackendError | QueueTimeout> = Effect.suspend(() =>
        Effect.flatMap(eligibleNext(d), (eligible) =>
          Effect.matchEffect(acquireSlot(d, eligible, call), {
            onSuccess: (completed) => {
              advance(d, { type: "SUCCEEDED" })
              return Effect.succeed(completed)
            },
            onFailure: (error) => {
              if (error._tag === "QueueTimeout") return Effect.fail(error)
              d.lastError = error
              advance(d, { type: "FAILED", error })
              return loop
            }
          })))
      return loop
    })

  return { dispatch, complete }
}

/** The backend error that ended a call, if any (for its span). */
const failureOf = (exit: Exit.Exit<unknown, BackendError | QueueTimeout>): BackendError | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const error = exit.cause.reasons.find(Cause.isFailReason)?.error
  return error !== undefined && error._tag === "BackendError" ? error : undefined
}

/** A failed call's verdict on its placement's health: only a retryable error counts against it. */
const failureOutcome = (cause: Cause.Cause<BackendError | QueueTimeout>): LeaseOutcome => {
  const error = cause.reasons.find(Cause.isFailReason)?.error
  return error !== undefined && error._tag === "BackendError" ? outcomeOf(error) : "failure"
}

export class Dispatcher extends Context.Service<Dispatcher, {
  dispatch(options: DispatchOptions): Effect.Effect<Dispatched, BackendError | QueueTimeout>
  /** A client that did not stream: the whole answer, after the same retries and failover. */
  complete(options: DispatchOptions): Effect.Effect<Completed, BackendError | QueueTimeout>
}>()("gateway/runtime/Dispatcher") {
  static readonly layer = Layer.effect(Dispatcher, Effect.gen(function*() {
    const { retryBaseMs } = yield* Settings
    const { metrics, tracing } = yield* Telemetry
    return Dispatcher.of(makeDispatcher(yield* CapacityQueues, { retryBaseMs, metrics, tracing }))
  }))

  /** With explicit options instead of Settings (tests, embedders). */
  static readonly layerWith = (options: DispatcherOptions) =>
    Layer.effect(Dispatcher, Effect.gen(function*() {
      const { metrics, tracing } = yield* Telemetry
      return Dispatcher.of(makeDispatcher(yield* CapacityQueues, { metrics, tracing, ...options }))
    }))
}
