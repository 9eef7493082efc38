/**
 * The run machine's generated paths replayed against the real SQL log (RunLog) on every engine:
 * after each append the stored status is what the pure machine says, seqs stay gap-free, a path
 * appended as one batch ends in the same state, and a finished run refuses every further append.
 * Also: a stale lease fence writes nothing, budget holds never overshoot and are charged once,
 * and retention prunes only finished runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "effect/sql"
import { Effect, Layer } from "effect"
import { createTestModel } from "xstate/graph"
import { runMachine, type RunEvent, type RunSnapshot, startRun, statusOf, stepRun } from "../../machines/run.ts"
import { ConfigFile } from "../../src/config/config-file.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import { Settings } from "../../src/config/settings.ts"
import { RunSignals } from "../../src/coordination/run-signals.ts"
import { RunBudget } from "../../src/runs/run-budget.ts"
import { RunLeases } from "../../src/runs/run-leases.ts"
import { RunLog } from "../../src/runs/run-log.ts"
import { RunsRepo } from "../../src/runs/runs-repo.ts"
import { PAGE_BUDGET_BYTES } from "../../src/util/json-limits.ts"
import { DatabaseLive } from "../../src/storage/database.ts"
import { storageTargets } from "../support/engines.ts"
import { input, runEvents, serialize } from "../machines/run-model.ts"

const paths = createTestModel(runMachine, { events: runEvents, serializeState: serialize, input }).getShortestPaths()
const fence = { owner: "inst_test", attempt: 1 }

const targets = storageTargets()

const newRun = (repo: RunsRepo["Service"], budgetMicros: number | null = null) =>
  Effect.map(
    repo.create("key_model", {
      executable: true, model: "svc-pico-1", input: "x", tools: [], optimization: { mode: "auto", allow: {} },
      metadata: {}, parentRunId: null, budgetMicros, lease: { owner: fence.owner, ttlMs: 600_000 }
    }, () => ({ status: 202, body: null })),
    (created) => (created as { run: { id: string } }).run.id
  )

const runLayers = (settings: Parameters<typeof Settings.layerWith>[0]) =>
  Layer.mergeAll(RunsRepo.layer, RunLeases.layer, RunBudget.layer).pipe(
    Layer.provideMerge(RunLog.layer),
    Layer.provideMerge(RunSignals.layerInProcess),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(ConfigFile.layerWith(defaultConfig)),
    Layer.provide(Settings.layerWith(settings))
  )

for (const target of targets) {
  describe(`run log follows the run machine (${target.name})`, () => {
    it.effect("every generated path, appended event by event and as one batch", () =>
      Effect.acquireUseRelease(
        Effect.promise(target.make),
        ({ settings }) =>
          Effect.gen(function*() {
            assert.isAbove(paths.length, 15)
            const repo = yield* RunsRepo
            const log = yield* RunLog
            for (const path of paths) {
              const events = path.steps.map((s) => s.event as RunEvent).filter((e) => (e.type as string) !== "xstate.init")
              const description = events.map((e) => e.type).join(" → ")
              const runId = yield* newRun(repo)
              let expected: RunSnapshot = startRun({ executable: true })
              for (const [i, event] of events.entries()) {
                const appended = yield* log.append(runId, [event], { fence })
                expected = stepRun(expected, event)
                assert.strictEqual(appended.lastSeq, i + 1, description)
                assert.strictEqual(statusOf(appended.snapshot), statusOf(expected), description)
                assert.strictEqual((yield* repo.get("key_model", runId)).status, statusOf(expected), description)
              }
              if (expected.status === "done") {
                const refused = yield* Effect.flip(log.append(runId, [{ type: "note" }], { fence }))
                assert.strictEqual(refused._tag, "Conflict", description)
                assert.strictEqual((yield* repo.get("key_model", runId)).lastSeq, events.length)
              }
              const batchRun = yield* newRun(repo)
              const batch = yield* log.append(batchRun, events, { fence })
              assert.strictEqual(batch.snapshot.value, expected.value, description)
              assert.deepStrictEqual(batch.snapshot.context, expected.context, description)
              const read = yield* log.read(batchRun, 0, 1_000)
              assert.deepStrictEqual(read.map((e) => e.seq), events.map((_, i) => i + 1))
            }
            // a stale fence (another attempt) writes nothing
            const runId = yield* newRun(repo)
            const stale = yield* Effect.flip(log.append(runId, [{ type: "node.started", nodeId: "n1" }], { fence: { ...fence, attempt: 2 } }))
            assert.strictEqual(stale._tag, "LeaseLost")

            // budget holds: idempotent per node; an orphaned hold (its attempt died before
            // node.started) is given back when the next step takes its own (else 1,200 > 1,000)
            const budget = yield* RunBudget
            const budgeted = yield* newRun(repo, 1_000)
            assert.strictEqual(yield* budget.hold(budgeted, "node_a", 600), "held")
            assert.strictEqual(yield* budget.hold(budgeted, "node_a", 600), "held")
            assert.strictEqual(yield* budget.hold(budgeted, "node_b", 600), "held")
            yield* log.append(budgeted, [{ type: "node.started", nodeId: "node_b" }, { type: "node.completed", nodeId: "node_b", stopReason: "end_turn" }], {
              fence,
              settle: { nodeId: "node_b", costMicros: 700, usage: { inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, reasoningTokens: 0 } }
            })
            const charged = yield* repo.get("key_model", budgeted)
            assert.deepStrictEqual(charged.usage, { inputTokens: 1, outputTokens: 2, costUsd: 0.0006 }) // never above the hold
            assert.strictEqual(yield* log.settle(budgeted, { nodeId: "node_b", costMicros: 700, usage: charged.usage as never }), false) // charged once
            assert.strictEqual(yield* budget.hold(budgeted, "node_c", 401), "refused") // 600 spent + 401 > 1,000
            assert.strictEqual(yield* budget.hold(budgeted, "node_d", 400), "held")

            // retention: finished runs go (with their events), live ones stay
            const finished = yield* newRun(repo)
            yield* log.append(finished, [{ type: "outcome", status: "failed" }], { fence })
            assert.isAtLeast(yield* (yield* RunLeases).prune(0), 1)
            assert.strictEqual((yield* Effect.flip(repo.get("key_model", finished)))._tag, "NotFound")
            assert.lengthOf(yield* log.read(finished, 0, 10), 0)
            assert.strictEqual((yield* repo.get("key_model", runId)).status, "running")
          }).pipe(Effect.provide(runLayers(settings))),
        ({ cleanup }) => Effect.promise(cleanup)
      ), 120_000)

    it.effect("a run's documents are read only where a step needs them, and a large one is stored exactly", () =>
      Effect.acquireUseRelease(
        Effect.promise(target.make),
        ({ settings }) =>
          Effect.gen(function*() {
            const repo = yield* RunsRepo
            // Over the size serialized in slices (256 Ki characters), with what JSON escapes.
            const input = { text: "😀 \"quoted\" \\ \n\u0001 é".repeat(20_000), items: [1, null, true, { nested: "x".repeat(300_000) }] }
            const tools = [{ name: "lookup", input_schema: { type: "object", properties: { q: { type: "string", description: "d".repeat(300_000) } } } }]
            const created = yield* repo.create("key_docs", {
              executable: true, model: "svc-pico-1", input, tools, optimization: { mode: "auto", allow: {} },
              metadata: { ticket: 7 }, parentRunId: null, budgetMicros: null, lease: { owner: fence.owner, ttlMs: 600_000 }
            }, (run) => ({ status: 202, body: { run } }))
            assert.strictEqual(created._tag, "Created")
            const id = (created as { run: { id: string } }).run.id
            // The state the actor and the log read every step: no documents at all.
            const state = yield* repo.state(id)
            assert.isDefined(state)
            for (const document of ["input", "tools", "metadata"]) assert.isFalse(document in state!, document)
            // What a view shows: tools and metadata, never the input.
            const row = yield* repo.row(id)
            assert.isFalse("input" in row!)
            assert.deepStrictEqual(row!.tools, tools)
            const view = yield* repo.get("key_docs", id)
            assert.deepStrictEqual(view.tools, tools)
            assert.deepStrictEqual(view.metadata, { ticket: 7 })
            const listed = yield* repo.list("key_docs", { limit: 10 })
            assert.deepStrictEqual(listed.data.map((run) => run.id), [id])
            // The first step's documents, exactly as sent.
            assert.deepStrictEqual(yield* repo.documents(id), { input, tools })

            // A read of the log stops once its byte budget came before an event: three events of
            // 60% of it each take two reads (the second starts past the budget), whatever the limit.
            const log = yield* RunLog
            const text = "y".repeat(Math.floor(0.6 * PAGE_BUDGET_BYTES))
            yield* log.append(id, [1, 2, 3].map((i) => ({ type: "tool.result", i, text })), { fence })
            const first = yield* log.read(id, 0, 500)
            assert.deepStrictEqual(first.map((e) => e.seq), [1, 2])
            const rest = yield* log.read(id, 2, 500)
            assert.deepStrictEqual(rest.map((e) => e.seq), [3])
            assert.strictEqual(rest[0]!.text, text)

            // A large event is stored as the JSON text it was written in: `read` parses its bytes in
            // slices, `texts` hands them on as they are; the staged pieces are gone after the write.
            const mixed = { type: "tool.result", text: "é😀\"\\\n".repeat(100_000), n: [1, null] }
            const appended = yield* log.append(id, [mixed], { fence })
            assert.deepStrictEqual(yield* log.read(id, appended.lastSeq - 1, 1), [{ ...mixed, seq: appended.lastSeq }])
            const [stored] = yield* log.texts(id, appended.lastSeq - 1, 1)
            assert.strictEqual(Buffer.concat(stored!.text).toString(), JSON.stringify(mixed))
            assert.ok(stored!.text.length > 1, "a large event's text comes in pieces")
            const sql = yield* SqlClient.SqlClient
            assert.deepStrictEqual(yield* sql`SELECT count(*)::int AS n FROM staged_documents`, [{ n: 0 }])

            // A page of a run list stops once its byte budget of tools and metadata came before a
            // run: three runs of 60% of it each, listed 10 at a time, come two, then one.
            const made: Array<string> = []
            for (const i of [1, 2, 3]) {
              const run = yield* repo.create("key_pages", {
                executable: false, model: null, input: null, tools: [], optimization: { mode: "auto", allow: {} },
                metadata: { note: "z".repeat(Math.floor(0.6 * PAGE_BUDGET_BYTES)), i }, parentRunId: null, budgetMicros: null
              }, () => ({ status: 201, body: null }))
              made.push((run as { run: { id: string } }).run.id)
            }
            const page1 = yield* repo.list("key_pages", { limit: 10 })
            assert.deepStrictEqual(page1.data.map((run) => run.metadata.i), [3, 2])
            assert.isTrue(page1.hasMore)
            const page2 = yield* repo.list("key_pages", { limit: 10, after: page1.nextCursor! })
            assert.deepStrictEqual(page2.data.map((run) => run.id), [made[0]])
            assert.isFalse(page2.hasMore)
            assert.isNull(page2.nextCursor)
          }).pipe(Effect.provide(runLayers(settings))),
        ({ cleanup }) => Effect.promise(cleanup)
      ), 120_000)
  })
}
