/**
 * Agent runs (flat surface, Bearer auth, permission surface `runs`): create, list, read, the event
 * log (SSE read, append) and cancel. Every id is scoped to the key: another key's run is 404.
 */
import { createHash } from "node:crypto"
import { Effect, Schema, Stream } from "effect"
import { isTerminal, TERMINAL_STATUSES } from "../../machines/run.ts"
import { Catalog } from "../catalog/catalog.ts"
import type { RunSignals } from "../coordination/run-signals.ts"
import { InvalidRequest, PermissionDenied, shown } from "../errors.ts"
import { allowsModel } from "../keys/permissions.ts"
import { MAX_USD_AMOUNT, usdToMicros } from "../model/money.ts"
import { runEventFrames } from "../runs/event-stream.ts"
import { RunExecutor } from "../runs/run-executor.ts"
import { baseRequest, isUsableInput } from "../runs/run-input.ts"
import { type NewEvent, RunLog } from "../runs/run-log.ts"
import type { RunView } from "../runs/run-record.ts"
import type { Json } from "../util/json.ts"
import { canonicalJsonInSlices } from "../util/sliced-stringify.ts"
import { RunsRepo } from "../runs/runs-repo.ts"
import { decodeWith, readJson } from "./body.ts"
import { jsonResponse } from "./json.ts"
import { type RequestContext, requireKey, type RouteDef, routeFamily } from "./route.ts"
import { sseStreamResponse } from "./sse.ts"
import { limitParam } from "./limit-param.ts"

const JsonObject = Schema.Record(Schema.String, Schema.Unknown)

const CreateBody = Schema.Struct({
  model: Schema.optional(Schema.NonEmptyString),
  input: Schema.optional(Schema.Union([Schema.String, Schema.Array(Schema.Unknown)])),
  tools: Schema.optional(Schema.Array(JsonObject)),
  optimization: Schema.optional(Schema.Struct({
    mode: Schema.optional(Schema.Literals(["exact", "auto"])),
    allow: Schema.optional(JsonObject)
  })),
  budgetUsd: Schema.optional(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: MAX_USD_AMOUNT }))),
  metadata: Schema.optional(JsonObject),
  parentRunId: Schema.optional(Schema.NonEmptyString)
})
const CancelBody = Schema.Struct({ reason: Schema.optional(Schema.String) })
const decodeCreate = decodeWith(CreateBody)
const decodeCancel = decodeWith(CancelBody)

const MAX_IDEMPOTENCY_KEY = 200
const MAX_EVENTS_PER_APPEND = 1_000
const LIST_LIMIT = { default: 20, max: 100 }

/**
 * The SHA-256 of the body's JSON with object keys sorted, so the same body hashes the same
 * whatever its key order; made in slices (the body may be 16 MiB: made whole and hashed at once,
 * it held the event loop 130–200 ms on a slow VM).
 */
const requestHash = (body: unknown): Effect.Effect<string> =>
  Effect.suspend(() => {
    const hash = createHash("sha256")
    return Effect.map(canonicalJsonInSlices(body, (piece) => void hash.update(piece)), () => hash.digest("hex"))
  })

const idempotencyKey = (ctx: RequestContext) => {
  const key = ctx.headers["idempotency-key"]
  if (key === undefined) return Effect.succeed(undefined)
  return key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY
    ? Effect.fail(new InvalidRequest({ message: `Idempotency-Key: must be 1 to ${MAX_IDEMPOTENCY_KEY} characters`, param: "Idempotency-Key" }))
    : Effect.succeed(key)
}

const create = Effect.fnUntraced(function*(ctx: RequestContext) {
  const raw = (yield* readJson(ctx, { optional: true, storable: true })) ?? {}
  const idempotency = yield* idempotencyKey(ctx)
  const body = yield* decodeCreate(raw)
  const key = yield* requireKey(ctx)
  const model = body.model === undefined ? undefined : (yield* Catalog).resolveChat(body.model)
  if (body.model !== undefined && model === undefined) {
    return yield* new InvalidRequest({ message: `model: the model '${shown(body.model)}' does not exist`, param: "model" })
  }
  if (model !== undefined && !allowsModel(key.permissions, model.id)) {
    return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
  }
  const tools = (body.tools ?? []) as ReadonlyArray<Json>
  const input = (body.input ?? null) as Json
  const executable = model !== undefined && isUsableInput(input)
  if (model !== undefined && executable) yield* baseRequest(model, input, tools)
  const executor = yield* RunExecutor
  const render = (run: RunView) =>
    executable ? { status: 202, body: { run, execution: "started" } } : { status: 201, body: { run } }
  const created = yield* (yield* RunsRepo).create(key.id, {
    executable,
    model: model?.id ?? null,
    input,
    tools,
    optimization: { mode: body.optimization?.mode ?? "auto", allow: (body.optimization?.allow ?? {}) as { [key: string]: Json } },
    metadata: (body.metadata ?? {}) as { [key: string]: Json },
    parentRunId: body.parentRunId ?? null,
    budgetMicros: body.budgetUsd === undefined ? null : usdToMicros(body.budgetUsd),
    ...(executable ? { lease: { owner: executor.instanceId, ttlMs: executor.leaseMs } } : {})
  }, render, idempotency === undefined ? undefined : { key: idempotency, requestHash: yield* requestHash(raw) })
  if (created._tag === "Replayed") {
    return jsonResponse(created.response.body, { status: 200, headers: { "idempotency-replayed": "true" } })
  }
  if (executable) yield* executor.start(created.run.id, 1)
  return jsonResponse(created.response.body, { status: created.response.status })
})

const list = Effect.fnUntraced(function*(ctx: RequestContext) {
  const status = ctx.query.get("status") ?? undefined
  if (status !== undefined && status !== "running" && status !== "requires_action" && !isTerminal(status)) {
    return yield* new InvalidRequest({
      message: `status: expected one of running, requires_action, ${TERMINAL_STATUSES.join(", ")}`,
      param: "status"
    })
  }
  const limit = yield* limitParam(ctx, LIST_LIMIT)
  const parentRunId = ctx.query.get("parentRunId") ?? undefined
  const after = ctx.query.get("after") ?? undefined
  const page = yield* (yield* RunsRepo).list((yield* requireKey(ctx)).id, {
    limit,
    ...(status === undefined ? {} : { status }),
    ...(parentRunId === undefined ? {} : { parentRunId }),
    ...(after === undefined ? {} : { after })
  })
  return jsonResponse({ object: "list", ...page })
})

const get = Effect.fnUntraced(function*(ctx: RequestContext) {
  return jsonResponse({ run: yield* (yield* RunsRepo).get((yield* requireKey(ctx)).id, ctx.params.id) })
})

/** Where a reader resumes: `Last-Event-ID` (what EventSource sends on reconnect), else `?after=`. */
const resumeCursor = (ctx: RequestContext) => {
  const header = ctx.headers["last-event-id"]
  const value = header ?? ctx.query.get("after") ?? undefined
  if (value === undefined || value.trim() === "") return Effect.succeed(0)
  return /^\d+$/.test(value.trim())
    ? Effect.succeed(Number(value.trim()))
    : Effect.fail(new InvalidRequest({
      message: `${header !== undefined ? "Last-Event-ID" : "after"}: expected an event seq (a non-negative integer)`,
      param: header !== undefined ? "Last-Event-ID" : "after"
    }))
}

const readEvents = Effect.fnUntraced(function*(ctx: RequestContext) {
  yield* (yield* RunsRepo).owned((yield* requireKey(ctx)).id, ctx.params.id)
  const after = yield* resumeCursor(ctx)
  const executor = yield* RunExecutor
  const services = yield* Effect.context<RunLog | RunSignals | RunsRepo>()
  const frames = runEventFrames(ctx.params.id, after, executor.heartbeatMs).pipe(Stream.provideContext(services))
  return sseStreamResponse(frames, {})
})

/**
 * Each event: an object with a non-empty single-line `type` (it becomes the SSE `event:` line); an
 * `outcome` names one of the terminal statuses (default `completed`) and a string reason, if any.
 */
const validEvents = (body: unknown) => {
  const events = typeof body === "object" && body !== null ? (body as { events?: unknown }).events : undefined
  if (!Array.isArray(events) || events.length < 1 || events.length > MAX_EVENTS_PER_APPEND) {
    return Effect.fail(new InvalidRequest({ message: `events: expected an array of 1 to ${MAX_EVENTS_PER_APPEND} events`, param: "events" }))
  }
  for (const [i, event] of events.entries()) {
    if (typeof event !== "object" || event === null || Array.isArray(event)) {
      return Effect.fail(new InvalidRequest({ message: `events[${i}]: expected an object with a string type`, param: `events[${i}]` }))
    }
    const type = (event as { type?: unknown }).type
    if (typeof type !== "string" || type === "" || type.length > 200 || /[\r\n]/.test(type)) {
      return Effect.fail(new InvalidRequest({ message: `events[${i}].type: expected a non-empty string of at most 200 characters on one line`, param: `events[${i}].type` }))
    }
    if (type === "outcome") {
      const { status, reason } = event as { status?: unknown; reason?: unknown }
      if (status !== undefined && (typeof status !== "string" || !isTerminal(status))) {
        return Effect.fail(new InvalidRequest({ message: `events[${i}].status: an outcome's status must be one of ${TERMINAL_STATUSES.join(", ")}`, param: `events[${i}].status` }))
      }
      if (reason !== undefined && reason !== null && typeof reason !== "string") {
        return Effect.fail(new InvalidRequest({ message: `events[${i}].reason: expected a string or null`, param: `events[${i}].reason` }))
      }
    }
  }
  // An outcome without a status ends the run `completed`, and the log says so too.
  return Effect.succeed((events as ReadonlyArray<NewEvent>).map((event) =>
    event.type === "outcome" && event.status === undefined ? { ...event, status: "completed" } : event
  ))
}

const appendEvents = Effect.fnUntraced(function*(ctx: RequestContext) {
  const events = yield* validEvents(yield* readJson(ctx, { storable: true }))
  const appended = yield* (yield* RunLog).append(ctx.params.id, events, { keyId: (yield* requireKey(ctx)).id }).pipe(
    Effect.catchTag("LeaseLost", () => Effect.die("a caller append carries no fence"))
  )
  return jsonResponse({ appended: appended.appended, lastSeq: appended.lastSeq })
})

const cancel = Effect.fnUntraced(function*(ctx: RequestContext) {
  const body = yield* decodeCancel((yield* readJson(ctx, { optional: true, storable: true })) ?? {})
  return jsonResponse({ run: yield* (yield* RunsRepo).cancel((yield* requireKey(ctx)).id, ctx.params.id, body.reason ?? null) })
})

type RunsServices = RunsRepo | RunLog | RunExecutor | Catalog | RunSignals

const route = routeFamily<RunsServices>({ shape: "flat", auth: "bearer", surface: "runs" })

export const runsRoutes: ReadonlyArray<RouteDef<RunsServices>> = [
  route("POST", "/v1/agent-runs", create),
  route("GET", "/v1/agent-runs", list),
  route("GET", "/v1/agent-runs/{id}", get),
  route("GET", "/v1/agent-runs/{id}/events", readEvents),
  route("POST", "/v1/agent-runs/{id}/events", appendEvents),
  route("POST", "/v1/agent-runs/{id}/cancel", cancel)
]
