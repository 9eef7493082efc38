/**
 * Layer composition: settings → config file → database → domain services → HTTP.
 * `GatewayServices` is everything but the network listener, so programs and tests can embed it.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Console, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { Artifacts } from "./artifacts/artifacts.ts"
import { Catalog } from "./catalog/catalog.ts"
import { ConfigFile } from "./config/config-file.ts"
import { defaultMaxConnections } from "./config/open-files.ts"
import type { GatewayConfig } from "./config/schema.ts"
import { Settings } from "./config/settings.ts"
import { makeHttpApp } from "./http/app.ts"
import { allRoutes } from "./http/routes.ts"
import { AdminToken } from "./keys/admin-token.ts"
import { ApiKeys } from "./keys/api-keys.ts"
import { ResponsesRepo } from "./stored-responses/responses-repo.ts"
import { Meter } from "./metering/meter.ts"
import { CapacityQueues } from "./runtime/capacity-queues.ts"
import { Dispatcher } from "./runtime/dispatcher.ts"
import { ModelCaller } from "./runtime/model-caller.ts"
import { Placements } from "./runtime/placements.ts"
import { RunsLive } from "./runs/runs-layer.ts"
import { StatesRepo } from "./states/states-repo.ts"
import { DatabaseLive } from "./storage/database.ts"
import { ArtifactList } from "./dashboard/artifact-list.ts"
import { BatchList } from "./dashboard/batch-list.ts"
import { DashboardAssets } from "./dashboard/assets.ts"
import { KeyStatus } from "./dashboard/key-status.ts"
import { OperatorRuns } from "./dashboard/operator-runs.ts"
import { DashboardSessions } from "./dashboard/sessions.ts"
import { UsageReport } from "./dashboard/usage-report.ts"
import { Readiness } from "./health/readiness.ts"
import { BatchesLive } from "./batches/batches-layer.ts"
import { MetricsScrape } from "./observability/metrics-scrape.ts"
import { LoggingLive, MetricsListenerLive, TracingLive } from "./observability/process-layers.ts"
import { Telemetry, TelemetryLive } from "./observability/telemetry.ts"
import { stopTokenizerIfIdle } from "./model/tokenizer.ts"
import { type ServerActivity, trimWhenQuiet } from "./util/heap-trim.ts"
import { OpenStreamsLive } from "./http/open-streams.ts"

/**
 * The actor runtime: placements and their backends, one capacity queue per placement (in process,
 * or shared through Redis), the dispatcher, metering, and the ModelCaller that ties them together.
 */
const RuntimeLive = ModelCaller.layer.pipe(
  Layer.provideMerge(Dispatcher.layer),
  Layer.provideMerge(Layer.mergeAll(CapacityQueues.layer, Placements.layer, Meter.layerLive))
)

/** The dashboard's services (sessions, reports, built assets), the readiness probe and the metrics scrape. */
const DashboardLive = Layer.mergeAll(
  DashboardSessions.layer, DashboardAssets.layer, UsageReport.layer, KeyStatus.layer, OperatorRuns.layer, ArtifactList.layer, BatchList.layer, Readiness.layer,
  MetricsScrape.layer
)

/** Storage, domain services and the runtime on a given config layer; requires `Settings`. */
const servicesOn = <E, R>(config: Layer.Layer<ConfigFile, E, R>) =>
  DashboardLive.pipe(
    Layer.provideMerge(Layer.merge(RunsLive, BatchesLive)),
    Layer.provideMerge(Layer.mergeAll(ApiKeys.layer, AdminToken.layer, StatesRepo.layer, Artifacts.layerLive, ResponsesRepo.layer, RuntimeLive)),
    // Metrics and the request log (a Context.Reference: the runtime reads it without requiring it).
    Layer.provideMerge(TelemetryLive),
    Layer.provideMerge(Catalog.layer),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(config)
  )

/** Config, storage and domain services; requires `Settings`. The config is validated before storage opens. */
export const GatewayServices = servicesOn(ConfigFile.layer)

/** The same services on a config given by a program instead of `GATEWAY_CONFIG`. */
export const gatewayServicesFor = (config: GatewayConfig) => servicesOn(ConfigFile.layerWith(config))

/** The HTTP app as an Effect, for `toWebHandler` or any Effect HTTP server. */
export const gatewayHttpApp = makeHttpApp(allRoutes)

/**
 * The Node server. Only the request side is timed; a response may take as long as it must (a
 * request waits in a capacity queue for up to 10 minutes, a stream runs for as long as it runs):
 * - headers: a client has `headersTimeoutMs` to send a request's headers (Node answers 408 and
 *   closes), and a new connection that sends nothing is closed after the same time. Node's
 *   default would be min(60 s, requestTimeout) — 0, i.e. none, with `requestTimeout: 0`.
 * - body: once the headers are in, the connection may sit idle (no bytes either way) for at most
 *   `bodyIdleTimeoutMs` while the body is still arriving, then it is closed. A large body on a
 *   slow link is fine as long as it keeps moving, so there is no bound on the whole request
 *   (`requestTimeout: 0`).
 * - after the body: an answer may take its time (a queue, a long stream), but not a client that
 *   stops taking it. Once written bytes wait on a client that takes none of them for
 *   `sendTimeoutMs` (nginx's `send_timeout`), the connection is closed: a stream stops, its
 *   upstream call ends and its slot and buffered bytes are freed. A client that reads slowly but
 *   steadily is not cut, nor one whose answer has not started. After the response, Node's
 *   keep-alive timeout applies between requests.
 * - connections: at most `maxConnections` are open (by default what the open-file limit leaves
 *   with a reserve); a new one past it is closed at once, so descriptors stay for upstream calls,
 *   the database and Redis however many connections clients open (config/open-files.ts).
 * Once a shutdown starts, connections with no request in flight are closed (those that never sent
 * one too) and each finished response closes its (keep-alive) connection, so a graceful stop ends
 * when the last in-flight request does, not when the grace period runs out.
 */
const makeNodeServer = (
  limits: {
    readonly headersTimeoutMs: number
    readonly bodyIdleTimeoutMs: number
    readonly sendTimeoutMs: number
    readonly maxConnections: number | undefined
  },
  activity: ServerActivity,
  onDropped: (cap: number) => void
) => () => {
  const server = createServer({
    requestTimeout: 0,
    headersTimeout: limits.headersTimeoutMs,
    // How often Node looks for connections past their headers timeout (its default is 30 s).
    connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
    keepAliveTimeout: 65_000
  })
  // Read here, as the server is made: the default counts the descriptors the services hold.
  const cap = limits.maxConnections ?? defaultMaxConnections() ?? 0
  if (cap > 0) {
    server.maxConnections = cap
    server.on("drop", () => onDropped(cap))
  }
  let closing = false
  // Requests in flight per connection. Node's closeIdleConnections closes a connection between
  // requests but not one that has not sent a request yet (clients and proxies open connections
  // ahead of need): left open, such a connection held a graceful stop for the whole grace period.
  const inFlight = new Map<Socket, number>()
  const close = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    closing = true
    // Every connection between requests or before its first one (Node's close closes the former too).
    for (const [socket, requests] of inFlight) if (requests === 0) socket.destroy()
    return close(callback)
  }
  // Node's own timer handling (socketOnTimeout) asks the request while its body is incomplete,
  // then the response, then the server; when nobody listens it destroys the socket.
  server.on("connection", (socket: Socket) => {
    socket.setTimeout(limits.headersTimeoutMs)
    inFlight.set(socket, 0)
    socket.once("close", () => inFlight.delete(socket))
  })
  // The listeners below are added per request and held for as long as it is open (a stream: for
  // minutes): one closure for the response's end, shared functions for the rest, and `on` rather
  // than `once` (a response closes once; `once` wraps each listener in two more objects).
  const countInFlight = (socket: Socket, response: ServerResponse) => {
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1)
    activity.started++
    activity.open++
    response.on("close", () => {
      activity.open--
      if (inFlight.has(socket)) inFlight.set(socket, Math.max(0, inFlight.get(socket)! - 1))
      // Stopping: the connection this answer leaves idle is closed now.
      if (closing) setImmediate(() => server.closeIdleConnections())
    })
  }
  // Node emits a socket's timeout on its response when no byte moved either way for the socket's
  // timeout (and no write progressed). With nothing waiting to be written, the answer is still
  // being made: nothing to do. With bytes waiting, the stall is timed from when the client last
  // took one, across timeouts, until it reaches `sendTimeoutMs`.
  const stalls = new WeakMap<Socket, { readonly since: number; readonly taken: number }>()
  function closeStalledAnswer(this: ServerResponse, socket: Socket) {
    if (socket.writableLength === 0) return
    const now = Date.now()
    const taken = socket.bytesWritten - socket.writableLength
    let stall = stalls.get(socket)
    if (stall === undefined || stall.taken !== taken) {
      stall = { since: now - (socket.timeout ?? 0), taken }
      stalls.set(socket, stall)
    }
    // Timers and `Date.now` round differently: a few ms short is the timeout reached.
    const remainingMs = limits.sendTimeoutMs - (now - stall.since)
    if (remainingMs <= 10) socket.destroy()
    else socket.setTimeout(remainingMs)
  }
  // A request with `Expect: 100-continue` arrives as `checkContinue` instead of `request`.
  server.on("checkContinue", (request, response) => countInFlight(request.socket, response))
  server.on("request", (request, response) => {
    countInFlight(request.socket, response)
    request.socket.setTimeout(limits.bodyIdleTimeoutMs)
    request.on("timeout", destroySocket)
    response.on("timeout", closeStalledAnswer)
    if (closing) response.setHeader("connection", "close")
  })
  return server
}

/** A request whose body stalled past the idle timeout: its connection is closed. */
function destroySocket(this: IncomingMessage) {
  this.socket.destroy()
}

/** Serves the app on HOST:PORT with a graceful shutdown bound; prints the address once listening. */
const HttpListenerLive = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* Settings
  const app = yield* gatewayHttpApp
  const activity: ServerActivity = { started: 0, open: 0 }
  const metrics = (yield* Telemetry).metrics
  const log = Effect.runForkWith(yield* Effect.context<never>())
  // Counted for every connection, logged at most every 10 s (a flood would flood the log too).
  let dropped = 0
  let lastLogged = 0
  const onDropped = (cap: number) => {
    metrics?.connectionDropped()
    dropped++
    const now = Date.now()
    if (now - lastLogged < 10_000) return
    lastLogged = now
    log(Effect.logWarning(`closed ${dropped} new connection(s) at once: ${cap} are open (GATEWAY_MAX_CONNECTIONS)`))
    dropped = 0
  }
  const announce = Layer.effectDiscard(Effect.andThen(
    // Memory given back once the server is quiet (util/heap-trim.ts); GATEWAY_IDLE_TRIM_MS=0: never.
    // An idle tokenizer thread stops with it (a simulator catalog starts one at once).
    settings.idleTrimMs > 0
      ? Effect.forkScoped(trimWhenQuiet(activity, settings.idleTrimMs, () => (stopTokenizerIfIdle() ? "tokenizer thread stopped" : undefined)))
      : Effect.void,
    HttpServer.addressFormattedWith((address) => Console.log(`gateway listening on ${address}`))
  ))
  return announce.pipe(
    Layer.provideMerge(HttpServer.serve(app)),
    Layer.provide(NodeHttpServer.layer(
      makeNodeServer(settings, activity, onDropped),
      { port: settings.port, host: settings.host, gracefulShutdownTimeout: `${settings.shutdownGraceMs} millis` }
    )),
    // Built before the server and released after its graceful stop: streams still open then are
    // interrupted (settled, logged) before the services below close.
    Layer.provide(OpenStreamsLive)
  )
}))

/** Prints, once, the first API key and admin token created on a fresh data dir. */
const BootstrapLive = Layer.effectDiscard(Effect.gen(function*() {
  const keys = yield* ApiKeys
  const admin = yield* AdminToken
  const created = yield* keys.bootstrap()
  if (created !== undefined) {
    yield* Console.log(`first API key (shown once, store it now): ${created.secret}`)
  }
  if (admin.created !== undefined) {
    yield* Console.log(`admin token created (also saved in the data dir as admin-token, mode 0600)`)
  }
}))

/**
 * The whole server: services, first-start bootstrap, HTTP listener (and the metrics listener), with
 * the JSON logger and, when configured, the OTLP tracer under everything. Requires `Settings`.
 */
export const ServerLive = Layer.mergeAll(HttpListenerLive, MetricsListenerLive).pipe(
  Layer.provideMerge(BootstrapLive),
  Layer.provideMerge(GatewayServices),
  Layer.provideMerge(Layer.mergeAll(LoggingLive, TracingLive))
)
