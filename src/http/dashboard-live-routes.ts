/**
 * The dashboard's live views (`/dashboard/api/*`, session cookie, flat error shape):
 * - queues (operators): every placement's capacity, slots in use, waiters per key, circuit state
 *   and injected fault, as a snapshot and as an SSE feed (`event: queues`) that sends a new
 *   snapshot whenever something changed (checked every 500 ms) and a heartbeat comment otherwise;
 * - runs: operators see every key's runs, key holders only their own (another key's run is 404);
 *   a run's event log is the run API's own SSE stream; cancel ends a live run.
 */
import { type Cause, Clock, Effect, Queue, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { isTerminal, TERMINAL_STATUSES } from "../../machines/run.ts"
import { Catalog } from "../catalog/catalog.ts"
import type { RunSignals } from "../coordination/run-signals.ts"
import { sessionIdOf } from "../dashboard/guard.ts"
import { OperatorRuns } from "../dashboard/operator-runs.ts"
import { type DashboardSession, DashboardSessions } from "../dashboard/sessions.ts"
import { InvalidRequest, NotFound } from "../errors.ts"
import { ApiKeys } from "../keys/api-keys.ts"
import { runEventFrames } from "../runs/event-stream.ts"
import { RunExecutor } from "../runs/run-executor.ts"
import { RunLog } from "../runs/run-log.ts"
import { toRunView } from "../runs/run-record.ts"
import { RunsRepo } from "../runs/runs-repo.ts"
import { CapacityQueues } from "../runtime/capacity-queues.ts"
import { Placements } from "../runtime/placements.ts"
import { readJson } from "./body.ts"
import { dashboardApi } from "./dashboard-api-routes.ts"
import { jsonResponse } from "./json.ts"
import type { RouteServices } from "./route-services.ts"
import type { RequestContext, RouteDef } from "./route.ts"
import { commentFrame, namedFrame, SSE_HEADERS, sseStreamResponse } from "./sse.ts"
import { limitParam } from "./limit-param.ts"

const NO_STORE = { "cache-control": "no-store" }

// ---- queues (operators) ----

const POLL_MS = 500
const HEARTBEAT_MS = 15_000
/** How often a long-lived feed re-checks that its session still stands (sign-out, revocation). */
const SESSION_CHECK_MS = 15_000

/** Every placement's queue, with its model, backend, injected fault and the names of waiting keys. */
interface SnapshotSources {
  readonly catalog: Catalog["Service"]
  readonly queues: CapacityQueues["Service"]
  readonly placements: Placements["Service"]
  readonly keys: ApiKeys["Service"]
  /** Names of keys seen waiting, looked up once each. */
  readonly names: Map<string, { name: string | null; hint: string }>
}

/** The snapshot itself: a generator made once (each run of the feed's loop reads it anew). */
const snapshotOf = Effect.fnUntraced(function*(s: SnapshotSources) {
  const views = yield* s.queues.view()
  const unknown = [...new Set(views.flatMap((v) => Object.keys(v.waitingByKey)))].filter((id) => !s.names.has(id))
  yield* Effect.forEach(unknown, (id) =>
    s.keys.get(id).pipe(
      Effect.tap((key) => Effect.sync(() => s.names.set(id, { name: key.name, hint: key.hint }))),
      Effect.ignore
    ), { discard: true })
  return views.map((view) => {
    const serving = s.placements.byId.get(view.placementId)
    const faults = serving?.runtime.faults
    return {
      placementId: view.placementId,
      modelId: s.catalog.placements.get(view.placementId)?.modelId ?? null,
      backend: serving?.config.backend ?? null,
      capacity: view.capacity,
      inUse: view.inUse,
      waiting: view.waiting,
      waitingByKey: Object.entries(view.waitingByKey)
        .filter(([, n]) => n > 0)
        .map(([keyId, waiting]) => ({ keyId, name: s.names.get(keyId)?.name ?? null, hint: s.names.get(keyId)?.hint ?? null, waiting })),
      circuit: view.circuit,
      fault: faults === undefined || faults.mode === "none" ? null : { ...faults }
    }
  })
})

const makeQueueSnapshot = Effect.gen(function*() {
  const sources: SnapshotSources = {
    catalog: yield* Catalog,
    queues: yield* CapacityQueues,
    placements: yield* Placements,
    keys: yield* ApiKeys,
    names: new Map()
  }
  return snapshotOf(sources)
})

const queuesNow = Effect.fnUntraced(function*() {
  const snapshot = yield* makeQueueSnapshot
  return jsonResponse({ object: "dashboard_queues", at: new Date().toISOString(), data: yield* snapshot }, { headers: NO_STORE })
})

/** The queues' frames into `queue` while the session lasts (made once, not per connection). */
const feedQueues = Effect.fnUntraced(function*(
  queue: Queue.Queue<string, Cause.Done>,
  session: DashboardSession,
  sessionId: string,
  snapshot: Effect.Success<typeof makeQueueSnapshot>,
  sessions: DashboardSessions["Service"]
) {
  let previous = ""
  let lastSent = 0
  let lastSessionCheck = yield* Clock.currentTimeMillis
  while (true) {
    const now = yield* Clock.currentTimeMillis
    if (now >= session.expiresAt.getTime()) break
    if (now - lastSessionCheck >= SESSION_CHECK_MS) {
      lastSessionCheck = now
      if ((yield* sessions.lookup(sessionId))._tag === "Ended") break
    }
    const data = yield* snapshot
    const text = JSON.stringify(data)
    if (text !== previous) {
      previous = text
      lastSent = now
      yield* Queue.offer(queue, namedFrame("queues", { at: new Date(now).toISOString(), data }))
    } else if (now - lastSent >= HEARTBEAT_MS) {
      lastSent = now
      yield* Queue.offer(queue, commentFrame("heartbeat"))
    }
    yield* Effect.sleep(POLL_MS)
  }
  yield* Queue.offer(queue, namedFrame("signed-out", { message: "Your session ended; sign in again" }))
  yield* Queue.end(queue)
})

const queuesFeed = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const snapshot = yield* makeQueueSnapshot
  const sessions = yield* DashboardSessions
  const sessionId = sessionIdOf(ctx)!
  const frames = Stream.callback<string>((queue) =>
    feedQueues(queue, session, sessionId, snapshot, sessions).pipe(Effect.catch(() => Queue.end(queue))), { bufferSize: 16 })
  return HttpServerResponse.stream(frames.pipe(Stream.encodeText), { contentType: "text/event-stream", headers: SSE_HEADERS })
})

// ---- runs (both; key holders see their own) ----

const LIST_LIMIT = { default: 20, max: 100 }

const listQuery = Effect.fnUntraced(function*(ctx: RequestContext) {
  const status = ctx.query.get("status") || undefined
  if (status !== undefined && status !== "running" && status !== "requires_action" && !isTerminal(status)) {
    return yield* new InvalidRequest({ message: `status: expected one of running, requires_action, ${TERMINAL_STATUSES.join(", ")}`, param: "status" })
  }
  const limit = yield* limitParam(ctx, LIST_LIMIT)
  return { status, limit, after: ctx.query.get("after") || undefined }
})

const listRuns = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const query = yield* listQuery(ctx)
  if (session.role === "key") {
    const page = yield* (yield* RunsRepo).list(session.key.id, {
      limit: query.limit,
      ...(query.status === undefined ? {} : { status: query.status }),
      ...(query.after === undefined ? {} : { after: query.after })
    })
    return jsonResponse({ object: "list", ...page, data: page.data.map((run) => ({ ...run, keyId: session.key.id })) }, { headers: NO_STORE })
  }
  const keyId = ctx.query.get("keyId") || undefined
  const page = yield* (yield* OperatorRuns).list({ ...query, keyId })
  return jsonResponse({ object: "list", ...page }, { headers: NO_STORE })
})

/** The run's owner, when this session may see the run; 404 otherwise (as on the run API). */
const ownedRun = Effect.fnUntraced(function*(session: DashboardSession, id: string) {
  const row = yield* (yield* RunsRepo).row(id)
  if (row === undefined || (session.role === "key" && row.key_id !== session.key.id)) {
    return yield* new NotFound({ kind: "resource", message: `No run with id ${id}` })
  }
  return row
})

const getRun = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const row = yield* ownedRun(session, ctx.params.id)
  return jsonResponse({ run: { ...toRunView(row), keyId: row.key_id } }, { headers: NO_STORE })
})

const runEvents = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  yield* ownedRun(session, ctx.params.id)
  const raw = ctx.headers["last-event-id"] ?? ctx.query.get("after") ?? "0"
  if (!/^\d+$/.test(raw.trim())) return yield* new InvalidRequest({ message: "after: expected an event seq (a non-negative integer)", param: "after" })
  const executor = yield* RunExecutor
  const services = yield* Effect.context<RunLog | RunSignals | RunsRepo>()
  // A first comment sends the headers at once, so the page can say "live" before the first event.
  const frames = Stream.concat(Stream.make(new TextEncoder().encode(commentFrame("connected"))), runEventFrames(ctx.params.id, Number(raw.trim()), executor.heartbeatMs))
    .pipe(Stream.provideContext(services))
  return sseStreamResponse(frames, {})
})

const cancelRun = Effect.fnUntraced(function*(ctx: RequestContext, session: DashboardSession) {
  const row = yield* ownedRun(session, ctx.params.id)
  const body = (yield* readJson(ctx, { optional: true })) as { reason?: unknown } | undefined
  const reason = typeof body?.reason === "string" && body.reason.trim() !== ""
    ? body.reason.slice(0, 500)
    : session.role === "operator" ? "cancelled by an operator from the dashboard" : "cancelled from the dashboard"
  const run = yield* (yield* RunsRepo).cancel(row.key_id, row.id, reason)
  return jsonResponse({ run: { ...run, keyId: row.key_id } }, { headers: NO_STORE })
})

export const dashboardLiveRoutes: ReadonlyArray<RouteDef<RouteServices>> = [
  dashboardApi("GET", "/queues", "operator", queuesNow),
  dashboardApi("GET", "/queues/stream", "operator", queuesFeed),
  dashboardApi("GET", "/runs", "signed-in", listRuns),
  dashboardApi("GET", "/runs/{id}", "signed-in", getRun),
  dashboardApi("GET", "/runs/{id}/events", "signed-in", runEvents),
  dashboardApi("POST", "/runs/{id}/cancel", "signed-in", cancelRun)
]
