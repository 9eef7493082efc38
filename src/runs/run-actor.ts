/**
 * The actor that executes one run, on the instance holding the run's lease. Every round it reads
 * the run's machine state (machines/run.ts, folded from the log by RunLog) and does what that state
 * asks —
 *
 *   ready          hold the next step's worst-case cost in the budget (refused → outcome
 *                  `incomplete`, reason `budget`), write `node.started`, run the step
 *   inNode         a step started and not completed (an earlier attempt died, or its call failed
 *                  and is retried): run it again under the same node id
 *   requiresAction wait for the caller's `tool.result` events (their wake-up signal)
 *   finishing      write the decided `outcome`
 *   final / open   nothing (the outcome exists / the caller drives the run)
 *
 * What it keeps between rounds is derived from the log and read from it once: the conversation
 * so far (each step's answer and the tool results for it), the `node.retry` count per node, and
 * the first request decoded from the stored input. Each round reads only the events it has not
 * seen (`seq > cursor`), so a step costs the same at the 50th turn as at the first; a new attempt
 * (a takeover) starts from an empty cursor and reads the whole log once, page by page.
 *
 * A step writes `node.completed` with its answer, usage and cost, and settles its budget hold in
 * the same transaction. Every write is fenced by the lease attempt, so after a takeover the old
 * owner can write nothing. While a step runs, a watcher ends it as soon as the run is finished by
 * someone else (cancel). Waiting is on the run's wake-up signals (src/coordination/run-signals.ts):
 * nothing polls the run row, except where signals can be lost (Redis), every `recheckMs`.
 *
 * Failures (src/runs/step-failure.ts): a retryable one (an outage, a 5xx, a rate limit) never ends
 * the run: the actor writes `node.retry` (the error and the delay), backs off and runs the round
 * again — at most `maxRetries` times in a row, then the run ends `failed`/`retries_exhausted`. A
 * step the model refuses ends `failed`/`model_error`; anything else unexpected `failed`/
 * `execution_error` — a run always gets an outcome, with an `error` typed as the spec types errors.
 *
 * Each call of a step is metered under an id derived from the run, the node and the number of
 * `node.retry` events the node has so far (`stepCall`), and that id is the allowance reservation and
 * the usage-ledger entry: an attempt that re-runs a step after taking the lease over reuses the id,
 * so the key is charged for the step once, whichever attempt's call ends first. A call this actor
 * knows has ended (it failed, or the instance is stopping) is closed by a `node.retry` written with
 * its settle, so the next call gets a new id and is charged normally.
 */
import { Cause, Clock, Effect, Result } from "effect"
import { restoreRun, type RunSnapshot } from "../../machines/run.ts"
import { Catalog } from "../catalog/catalog.ts"
import type { ChatModel } from "../config/schema.ts"
import { recheckMs, RunSignals, type SignalSubscription } from "../coordination/run-signals.ts"
import { type KeyRecord, KeysRepo } from "../keys/keys-repo.ts"
import { newId } from "../util/ids.ts"
import { joinText } from "../model/content.ts"
import { microsToUsd } from "../model/money.ts"
import type { CanonicalRequest } from "../model/request.ts"
import { emptyUsage } from "../model/usage.ts"
import type { Continuity } from "../runtime/model-caller.ts"
import { quoteTurn, startTurn, type Turn, type TurnQuote } from "./model-turn.ts"
import { RunBudget } from "./run-budget.ts"
import { baseRequest, type Conversation, makeConversation } from "./run-input.ts"
import { type Fence, type NewEvent, RunLog, type Settle } from "./run-log.ts"
import type { RunStateRow } from "./run-record.ts"
import { RunsRepo } from "./runs-repo.ts"
import { type Classified, classify, retryDelayMs } from "./step-failure.ts"

/** Events read per query while catching up with the log. */
const PAGE = 1_000

/** Retries of failed rounds: at most `maxRetries` in a row, backing off from `baseMs`. */
export interface RetryPolicy {
  readonly maxRetries: number
  readonly baseMs: number
}

/** Why a round stopped the actor. */
type Stop = "finished" | "lease_lost"

/** A step's call failed in a way worth retrying; the charge of that call is closed with the retry. */
interface StepFailed {
  readonly _tag: "StepFailed"
  readonly nodeId: string
  readonly failure: Classified
  readonly settle: Settle
}

const isStepFailed = (error: unknown): error is StepFailed => (error as { _tag?: unknown })?._tag === "StepFailed"

/**
 * The current call of a step: `k` = the node's `node.retry` events so far. `chargeId` keys the
 * run's budget hold (the node id for the first call); `requestId` is the meter's id for the call
 * (allowance reservation and ledger entry), the same for every attempt that re-runs this call.
 */
const stepCall = (runId: string, nodeId: string, k: number) => ({
  chargeId: k === 0 ? nodeId : `${nodeId}/${k}`,
  requestId: `${runId}/${nodeId}/${k}`
})

/**
 * What one actor keeps: its run, its services and what it has read of the log. The actor's steps
 * below are generators made once, taking this, not written inside `runActor`: a `function*` made
 * per run (or per step) is a generator closure of its own, which V8 keeps, with the run's state,
 * through young-generation collections (`test/runtime-http/generator-closures.test.ts`).
 */
interface Actor {
  readonly runId: string
  readonly fence: Fence
  readonly policy: RetryPolicy
  readonly repo: RunsRepo["Service"]
  readonly log: RunLog["Service"]
  readonly budget: RunBudget["Service"]
  readonly catalog: Catalog["Service"]
  readonly keys: KeysRepo["Service"]
  readonly signals: RunSignals["Service"]
  readonly subscription: SignalSubscription
  /**
   * Meter ids this actor already used: a call whose `node.retry` could not be written (storage
   * down) must not reuse its predecessor's id, or the store would take it for the same call.
   */
  readonly usedRequestIds: Set<string>
  /** Lost signals are possible only on Redis: there (only) a waiter also re-reads now and then. */
  readonly recheck: number | undefined
  // What the log says so far, each event folded once (see the header).
  readonly conversation: Conversation
  readonly retriesOf: Map<string, number>
  cursor: number
  first: { readonly model: ChatModel; readonly request: CanonicalRequest } | undefined
}

/** Folds the events after the actor's cursor, up to at least `lastSeq` (the run row's). */
const catchUp = Effect.fnUntraced(function*(a: Actor, lastSeq: number) {
  while (a.cursor < lastSeq) {
    const events = yield* a.log.read(a.runId, a.cursor, PAGE)
    if (events.length === 0) return
    for (const event of events) {
      a.conversation.add(event)
      if (event.type === "node.retry" && typeof event.nodeId === "string") a.retriesOf.set(event.nodeId, (a.retriesOf.get(event.nodeId) ?? 0) + 1)
      a.cursor = event.seq
    }
  }
})

const write = (a: Actor, events: ReadonlyArray<NewEvent>, settle?: Settle) =>
  a.log.append(a.runId, events, { fence: a.fence, ...(settle === undefined ? {} : { settle }) })

const outcome = (a: Actor, fields: { status: string; reason: string | null; [key: string]: unknown }, settle?: Settle) =>
  write(a, [{ type: "outcome", ...fields }], settle).pipe(Effect.as<Stop>("finished"))

const finishedNow = (a: Actor) => a.repo.state(a.runId).pipe(Effect.map((row) => row === undefined || row.finished_at !== null))

/** Resolves once the run is finished by a write not ours (a cancel): ends a running step. */
const finishedElsewhere = Effect.fnUntraced(function*(a: Actor, watch: SignalSubscription) {
  while (true) {
    yield* watch.wait(a.recheck)
    if (yield* finishedNow(a).pipe(Effect.orElseSucceed(() => false))) return "finished" as const
  }
})

/** Waits `ms` before a retry; returns early when the run was finished meanwhile (a cancel). */
const pause = Effect.fnUntraced(function*(a: Actor, ms: number) {
  const until = (yield* Clock.currentTimeMillis) + ms
  while (true) {
    const left = until - (yield* Clock.currentTimeMillis)
    if (left <= 0) return
    if ((yield* a.subscription.wait(left)) && (yield* finishedNow(a).pipe(Effect.orElseSucceed(() => false)))) return
  }
})

/** A step's call, once its budget is held: what it needs, and its turn once started. */
interface StepCall {
  readonly nodeId: string
  readonly quote: TurnQuote
  readonly key: KeyRecord
  readonly continuity: Continuity
  readonly requestId: string
  readonly chargeId: string
  turn: Turn | undefined
}

const settleOf = (step: StepCall, costMicros: number, usage = emptyUsage): Settle => ({ nodeId: step.chargeId, costMicros, usage })

/** A failed call: retried (by the round loop) or, when the rules say so, the run's end. */
const stepFailed = (a: Actor, step: StepCall, error: unknown, settle: Settle) => {
  const failure = classify(error)
  return failure.retryable
    ? Effect.fail<StepFailed>({ _tag: "StepFailed", nodeId: step.nodeId, failure, settle })
    : outcome(a, { status: "failed", reason: failure.reason, error: failure.error }, settle)
}

/** The step's call: started, answered (or cancelled), and its answer written with its settle. */
const callStep = Effect.fnUntraced(function*(a: Actor, step: StepCall) {
  const started = yield* Effect.result(startTurn(step.quote, { key: step.key, continuity: step.continuity, requestId: step.requestId }))
  if (Result.isFailure(started)) return yield* stepFailed(a, step, started.failure, settleOf(step, 0))
  const turn = started.success
  step.turn = turn
  const watch = yield* a.signals.subscribe(a.runId)
  const answer = yield* Effect.raceFirst(
    Effect.map(Effect.result(turn.response), (result) => ({ _tag: "Answered" as const, result })),
    Effect.map(finishedElsewhere(a, watch), () => ({ _tag: "Cancelled" as const }))
  )
  const settlement = yield* turn.settled
  const settle = settleOf(step, settlement.costMicros, settlement.usage)
  if (answer._tag === "Cancelled") {
    yield* a.log.settle(a.runId, settle)
    return "finished" as const
  }
  if (Result.isFailure(answer.result)) return yield* stepFailed(a, step, answer.result.failure, settle)
  const response = answer.result.success
  const toolCalls = response.content.flatMap((block) => block.type === "tool_use" ? [{ id: block.id, name: block.name, input: block.input }] : [])
  yield* write(a, [{
    type: "node.completed",
    nodeId: step.nodeId,
    model: turn.servedModel,
    stopReason: response.stopReason,
    output: response.content,
    toolCalls,
    usage: settlement.usage,
    costUsd: microsToUsd(settlement.costMicros)
  }], settle).pipe(
    // Cancelled between the answer and this write: the step is still charged to the run.
    Effect.catchTag("Conflict", () => a.log.settle(a.runId, settle).pipe(Effect.as("finished" as const)))
  )
  return undefined
})

/**
 * This instance stops (or lost the run) with the call in flight: while the lease is still ours,
 * close the call's charge with a `node.retry`, so whoever runs the step next is metered as a new
 * call (this one has ended). After a takeover the write is refused.
 */
const closeInterrupted = Effect.fnUntraced(function*(a: Actor, step: StepCall) {
  const settlement = step.turn === undefined ? undefined : yield* step.turn.settled.pipe(Effect.timeoutOption("1 second"))
  const ended = settlement?._tag === "Some" ? settleOf(step, settlement.value.costMicros, settlement.value.usage) : settleOf(step, 0)
  yield* write(a, [{
    type: "node.retry",
    nodeId: step.nodeId,
    retry: 0,
    maxRetries: a.policy.maxRetries,
    delayMs: 0,
    error: { type: "api_error", message: "The step was interrupted: its gateway instance is stopping; it runs again on the next attempt" }
  }], ended)
})

const runStep = Effect.fnUntraced(function*(a: Actor, row: RunStateRow, snapshot: RunSnapshot, nodeId: string) {
  const model = a.catalog.chatModel(row.model ?? "")
  if (model === undefined) {
    return yield* outcome(a, { status: "failed", reason: "model_unavailable", error: { type: "not_found", message: `The model ${row.model} is no longer in the catalog` } })
  }
  // The stored input and tools are read and decoded once (again only if the catalog's model changed).
  if (a.first?.model !== model) {
    const documents = yield* a.repo.documents(a.runId)
    a.first = { model, request: yield* baseRequest(model, documents?.input ?? null, documents?.tools ?? []) }
  }
  yield* catchUp(a, Number(row.last_seq))
  const request = a.conversation.request(a.first.request)
  const call = stepCall(a.runId, nodeId, a.retriesOf.get(nodeId) ?? 0)
  const continuity = row.optimization.mode === "exact" ? "exact" : "auto"
  const key = yield* a.keys.findById(row.key_id)
  if (key === undefined || key.revokedAt !== null) return yield* outcome(a, { status: "failed", reason: "key_revoked" })
  // Priced over the models this key may use only (continuity never serves another).
  const quote = yield* quoteTurn(request, continuity, key)
  if ((yield* a.budget.hold(a.runId, call.chargeId, quote.worstCaseMicros)) === "refused") {
    return yield* outcome(a, { status: "incomplete", reason: "budget", budgetUsd: row.budget_micros === null ? null : microsToUsd(Number(row.budget_micros)) })
  }
  if (snapshot.value === "ready") yield* write(a, [{ type: "node.started", nodeId, model: model.id, turn: snapshot.context.nodes + 1 }])
  let requestId = call.requestId
  for (let n = 1; a.usedRequestIds.has(requestId); n++) requestId = `${call.requestId}~${n}`
  a.usedRequestIds.add(requestId)

  const step: StepCall = { nodeId, quote, key, continuity, requestId, chargeId: call.chargeId, turn: undefined }
  return yield* Effect.scoped(callStep(a, step)).pipe(
    Effect.onInterrupt(() => closeInterrupted(a, step).pipe(Effect.timeout("3 seconds"), Effect.ignore))
  )
})

/** One round: read the state, act on it. `undefined` means go on. */
const roundOf = Effect.fnUntraced(function*(a: Actor) {
  const row = yield* a.repo.state(a.runId)
  if (row === undefined || row.finished_at !== null) return "finished" as const
  if (row.lease_owner !== a.fence.owner || row.attempt !== a.fence.attempt) return "lease_lost" as const
  const snapshot = restoreRun(row.machine)
  switch (snapshot.value) {
    case "ready": {
      const nodeId = row.node_ids[snapshot.context.nodes] ?? newId("node")
      return yield* runStep(a, row, snapshot, nodeId)
    }
    case "inNode":
      return yield* runStep(a, row, snapshot, snapshot.context.openNode!)
    case "requiresAction":
      yield* a.subscription.wait(a.recheck)
      return undefined
    case "finishing": {
      const decided = snapshot.context.decided!
      // The answer's text rides on the outcome, so a caller that only waits for it needs nothing else.
      yield* catchUp(a, Number(row.last_seq))
      const last = a.conversation.lastOutput()
      return yield* outcome(a, { status: decided.status, reason: decided.reason, text: last === undefined ? "" : joinText(last) })
    }
    default:
      return "finished" as const
  }
})

const round = (a: Actor) =>
  roundOf(a).pipe(
    Effect.catchTags({
      LeaseLost: () => Effect.succeed<Stop>("lease_lost"),
      // The run finished under us (a cancel landed between our read and our write).
      Conflict: () => Effect.succeed<Stop>("finished")
    })
  )

/**
 * After a failed round: back off and go again (`undefined`), or end the run. Failures that are
 * not retryable go on to the actor's last resort (`runActor`).
 */
const backOff = Effect.fnUntraced(function*(a: Actor, error: unknown, retry: number) {
  const step = isStepFailed(error) ? error : undefined
  const failure = step?.failure ?? classify(error)
  if (!failure.retryable) return yield* Effect.fail(error)
  if (retry > a.policy.maxRetries) {
    return yield* outcome(a, { status: "failed", reason: "retries_exhausted", error: failure.error, retries: a.policy.maxRetries }, step?.settle)
  }
  const delayMs = retryDelayMs(retry, failure, a.policy.baseMs)
  // Best effort: with storage down the event cannot be written, and the next round fails the
  // same way until it is back.
  yield* write(a, [{ type: "node.retry", nodeId: step?.nodeId ?? null, retry, maxRetries: a.policy.maxRetries, delayMs, error: failure.error }], step?.settle).pipe(
    Effect.catchCause((cause) => Effect.logWarning(`run ${a.runId}: could not log retry ${retry}`, cause))
  )
  yield* pause(a, delayMs)
  return undefined
})

const afterFailure = (a: Actor, error: unknown, retry: number) =>
  backOff(a, error, retry).pipe(
    Effect.catchTags({
      LeaseLost: () => Effect.succeed<Stop>("lease_lost"),
      Conflict: () => Effect.succeed<Stop>("finished")
    })
  )

/** The actor's rounds, until one stops it. */
const runRounds = Effect.fnUntraced(function*(runId: string, fence: Fence, policy: RetryPolicy) {
  const signals = yield* RunSignals
  const a: Actor = {
    runId,
    fence,
    policy,
    repo: yield* RunsRepo,
    log: yield* RunLog,
    budget: yield* RunBudget,
    catalog: yield* Catalog,
    keys: yield* KeysRepo,
    signals,
    subscription: yield* signals.subscribe(runId),
    usedRequestIds: new Set(),
    recheck: recheckMs(signals),
    conversation: makeConversation(),
    retriesOf: new Map(),
    cursor: 0,
    first: undefined
  }
  let stop: Stop | undefined
  let failures = 0
  while (stop === undefined) {
    const result = yield* Effect.result(round(a))
    if (Result.isSuccess(result)) {
      failures = 0
      stop = result.success
    } else {
      failures++
      stop = yield* afterFailure(a, result.failure, failures)
    }
  }
  return stop
})

export const runActor = (runId: string, fence: Fence, policy: RetryPolicy) =>
  runRounds(runId, fence, policy).pipe(
    // Anything else (a bug, a stored request that no longer fits its model) still ends the run with
    // an outcome when the log can take it; otherwise the lease lapses and another attempt resumes.
    Effect.catchCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
      const failure = classify(Cause.squash(cause))
      return Effect.logError(`run ${runId} failed`, cause).pipe(
        Effect.andThen(
          Effect.flatMap(RunLog, (log) =>
            log.append(runId, [{ type: "outcome", status: "failed", reason: failure.reason, error: failure.error }], { fence })
          ).pipe(Effect.ignore)
        ),
        Effect.as<Stop>("finished")
      )
    }),
    Effect.scoped,
    Effect.withSpan("RunActor", { attributes: { runId } })
  )
