/**
 * The actor that executes one run, on the instance holding the run's lease. It keeps no state of
 * its own: every round it reads the run's machine state (machines/run.ts, folded from the log by
 * RunLog) and does what that state asks —
 *
 *   ready          hold the next step's worst-case cost in the budget (refused → outcome
 *                  `incomplete`, reason `budget`), write `node.started`, run the step
 *   inNode         a step started by an earlier attempt and never completed: run it again under
 *                  the same node id (its budget hold is found, not taken twice)
 *   requiresAction wait for the caller's `tool.result` events (wake-up signal or poll)
 *   finishing      write the decided `outcome`
 *   final / open   nothing (the outcome exists / the caller drives the run)
 *
 * A step writes `node.completed` with its answer, usage and cost, and settles its budget hold in
 * the same transaction. Every write is fenced by the lease attempt, so after a takeover the old
 * owner can write nothing. While a step runs, a watcher ends it as soon as the run is finished by
 * someone else (cancel). Anything unexpected ends the run `failed` — a run always gets an outcome.
 */
import { Cause, Effect, Result, Schedule } from "effect"
import { restoreRun, type RunSnapshot } from "../../machines/run.ts"
import { Catalog } from "../catalog/catalog.ts"
import { RunSignals, type SignalSubscription } from "../coordination/run-signals.ts"
import { KeysRepo } from "../keys/keys-repo.ts"
import { newId } from "../keys/secrets.ts"
import { type ContentBlock, joinText } from "../model/content.ts"
import { microsToUsd } from "../model/money.ts"
import { emptyUsage } from "../model/usage.ts"
import { type Fence, type NewEvent, RunLog, type Settle } from "./run-log.ts"
import { RunBudget } from "./run-budget.ts"
import { baseRequest, turnRequest } from "./run-input.ts"
import type { RunRow } from "./run-record.ts"
import { RunsRepo } from "./runs-repo.ts"
import { quoteTurn, startTurn, type Turn } from "./model-turn.ts"

/** How often a waiting actor re-reads the run when no signal came (lost signals only add this). */
export const POLL_MS = 1_500

/** Why a round stopped the actor. */
type Stop = "finished" | "lease_lost"

const modelFailure = (error: { readonly _tag: string; readonly message: string }) => ({
  status: "failed" as const,
  reason: "model_error",
  error: { type: error._tag, message: error.message }
})

export const runActor = (runId: string, fence: Fence) =>
  Effect.gen(function*() {
    const repo = yield* RunsRepo
    const log = yield* RunLog
    const budget = yield* RunBudget
    const catalog = yield* Catalog
    const keys = yield* KeysRepo
    const signals = yield* RunSignals
    const subscription = yield* signals.subscribe(runId)

    const write = (events: ReadonlyArray<NewEvent>, settle?: Settle) =>
      log.append(runId, events, { fence, ...(settle === undefined ? {} : { settle }) })

    const outcome = (fields: { status: string; reason: string | null; [key: string]: unknown }) =>
      write([{ type: "outcome", ...fields }]).pipe(Effect.as<Stop>("finished"))

    /** Resolves once the run is finished by a write not ours (a cancel): ends a running step. */
    const finishedElsewhere = (watch: SignalSubscription) =>
      Effect.gen(function*() {
        while (true) {
          yield* watch.wait(POLL_MS)
          const row = yield* repo.row(runId)
          if (row === undefined || row.finished_at !== null) return "finished" as const
        }
      })

    const runStep = (row: RunRow, snapshot: RunSnapshot, nodeId: string) =>
      Effect.gen(function*() {
        const model = catalog.chatModel(row.model ?? "")
        if (model === undefined) return yield* outcome({ status: "failed", reason: "model_unavailable", error: { message: `The model ${row.model} is no longer in the catalog` } })
        const base = yield* baseRequest(model, row.input, row.tools)
        const request = turnRequest(base, yield* log.read(runId, 0, 100_000))
        const continuity = row.optimization.mode === "exact" ? "exact" : "auto"
        const quote = yield* quoteTurn(request, continuity)
        const key = yield* keys.findById(row.key_id)
        if (key === undefined || key.revokedAt !== null) return yield* outcome({ status: "failed", reason: "key_revoked" })
        if ((yield* budget.hold(runId, nodeId, quote.worstCaseMicros)) === "refused") {
          return yield* outcome({ status: "incomplete", reason: "budget", budgetUsd: row.budget_micros === null ? null : microsToUsd(Number(row.budget_micros)) })
        }
        if (snapshot.value === "ready") yield* write([{ type: "node.started", nodeId, model: model.id, turn: snapshot.context.nodes + 1 }])
        return yield* Effect.scoped(Effect.gen(function*() {
          const started = yield* Effect.result(startTurn(quote, { key, continuity }))
          if (Result.isFailure(started)) {
            yield* log.settle(runId, { nodeId, costMicros: 0, usage: emptyUsage })
            return yield* outcome(modelFailure(started.failure))
          }
          const turn: Turn = started.success
          const watch = yield* signals.subscribe(runId)
          const answer = yield* Effect.raceFirst(
            Effect.map(Effect.result(turn.response), (result) => ({ _tag: "Answered" as const, result })),
            Effect.map(finishedElsewhere(watch), () => ({ _tag: "Cancelled" as const }))
          )
          const settlement = yield* turn.settled
          const settle = { nodeId, costMicros: settlement.costMicros, usage: settlement.usage }
          if (answer._tag === "Cancelled") {
            yield* log.settle(runId, settle)
            return "finished" as const
          }
          if (Result.isFailure(answer.result)) {
            yield* log.settle(runId, settle)
            return yield* outcome(modelFailure(answer.result.failure))
          }
          const response = answer.result.success
          const toolCalls = response.content.flatMap((block) => block.type === "tool_use" ? [{ id: block.id, name: block.name, input: block.input }] : [])
          yield* write([{
            type: "node.completed",
            nodeId,
            model: turn.servedModel,
            stopReason: response.stopReason,
            output: response.content,
            toolCalls,
            usage: settlement.usage,
            costUsd: microsToUsd(settlement.costMicros)
          }], settle).pipe(
            // Cancelled between the answer and this write: the step is still charged to the run.
            Effect.catchTag("Conflict", () => log.settle(runId, settle).pipe(Effect.as("finished" as const)))
          )
          return undefined
        }))
      })

    /** One round: read the state, act on it. `undefined` means go on. */
    const round = Effect.gen(function*() {
      const row = yield* repo.row(runId)
      if (row === undefined || row.finished_at !== null) return "finished" as const
      if (row.lease_owner !== fence.owner || row.attempt !== fence.attempt) return "lease_lost" as const
      const snapshot = restoreRun(row.machine)
      switch (snapshot.value) {
        case "ready": {
          const nodeId = row.node_ids[snapshot.context.nodes] ?? newId("node")
          return yield* runStep(row, snapshot, nodeId)
        }
        case "inNode":
          return yield* runStep(row, snapshot, snapshot.context.openNode!)
        case "requiresAction":
          yield* subscription.wait(POLL_MS)
          return undefined
        case "finishing": {
          const decided = snapshot.context.decided!
          // The answer's text rides on the outcome, so a caller that only waits for it needs nothing else.
          const steps = (yield* log.read(runId, 0, 100_000)).filter((event) => event.type === "node.completed")
          const last = steps[steps.length - 1]?.output
          return yield* outcome({ status: decided.status, reason: decided.reason, text: Array.isArray(last) ? joinText(last as ReadonlyArray<ContentBlock>) : "" })
        }
        default:
          return "finished" as const
      }
    })

    let stop: Stop | undefined
    while (stop === undefined) {
      stop = yield* round.pipe(
        Effect.catchTags({
          LeaseLost: () => Effect.succeed<Stop>("lease_lost"),
          // The run finished under us (a cancel landed between our read and our write).
          Conflict: () => Effect.succeed<Stop>("finished")
        })
      )
    }
    return stop
  }).pipe(
    // Anything else (a storage outage that outlasted the retries, a bug) still ends the run with
    // an outcome when the log can take it; otherwise the lease lapses and another attempt resumes.
    Effect.retry({ times: 3, schedule: Schedule.exponential("500 millis"), while: (error) => (error as { _tag?: string })?._tag === "SqlError" }),
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : Effect.logError(`run ${runId} failed`, cause).pipe(
          Effect.andThen(
            Effect.flatMap(RunLog, (log) =>
              log.append(runId, [{ type: "outcome", status: "failed", reason: "execution_error", error: { message: String(Cause.squash(cause)) } }], { fence })
            ).pipe(Effect.ignore)
          ),
          Effect.as<Stop>("finished")
        )
    ),
    Effect.scoped,
    Effect.withSpan("RunActor", { attributes: { runId } })
  )
