/**
 * `gateway simulate`: the simulator backend as a standalone upstream that speaks the Anthropic
 * Messages and OpenAI Chat Completions wire formats (plus embeddings), so the HTTP adapters are
 * tested over real HTTP and the benchmarks have an upstream. Any model name is accepted and served
 * as a reasoning-capable simulated model. `POST /_simulator/faults` injects faults for tests.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, Console, Effect, Layer, Schema } from "effect"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createServer } from "node:http"
import type { FaultSettings } from "../backends/backend.ts"
import { embedInSlices, makeSimulatorBackend, simulatorPlacement } from "../backends/simulator/simulator.ts"
import { chatDialect } from "../dialects/chat/index.ts"
import type { ChatDialect } from "../dialects/dialect.ts"
import { messagesDialect } from "../dialects/messages/index.ts"
import { type ApiError, MethodNotAllowed, NotFound, Unauthenticated } from "../errors.ts"
import { countTexts, startTokenizer } from "../model/tokenizer.ts"
import { decodeWith, readJson } from "../http/body.ts"
import { encodeDirect } from "../http/chat-answer.ts"
import { jsonResponse } from "../http/json.ts"
import { renderDefect, renderError } from "../http/render-error.ts"
import { type ErrorShape, makeMatcher, type RequestContext, type RouteDef, withRequestId } from "../http/route.ts"
import { newRequestRecord } from "../observability/request-record.ts"
import { newId } from "../util/ids.ts"

export interface SimulateOptions {
  readonly host: string
  readonly port: number
  readonly ttftMs: number
  readonly tokensPerSecond: number
  /** When set, requests must carry this key (`x-api-key` or Bearer). */
  readonly apiKey?: string | undefined
}

const FaultBody = Schema.Struct({
  mode: Schema.Literals(["none", "error", "hang", "slow", "break-mid-stream"]),
  status: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 400, maximum: 599 }))),
  rate: Schema.optional(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })))
})
const EmbedBody = Schema.Struct({
  model: Schema.String,
  input: Schema.Union([Schema.String, Schema.Array(Schema.String)]),
  dimensions: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 8192 })))
})

const makeSimulateApp = (options: SimulateOptions) => {
  const backend = makeSimulatorBackend()
  startTokenizer() // every call counts tokens exactly: load the tables now, not at the first call
  let faults: FaultSettings = { mode: "none" }
  const placementFor = (model: string) =>
    simulatorPlacement({
      id: `sim-${model}`,
      modelId: model,
      upstreamModel: model,
      reasoning: true,
      simulator: { ttftMs: options.ttftMs, tokensPerSecond: options.tokensPerSecond },
      faults
    })

  // Handlers as generators made once (`Effect.fnUntraced`), not an `Effect.gen(function*…)` per
  // request: see `answer` in http/chat-answer.ts.
  const chat = <Echo>(dialect: ChatDialect<Echo>) =>
    Effect.fnUntraced(function*(ctx: RequestContext) {
      const decoded = yield* dialect.decode(yield* readJson(ctx))
      const placement = placementFor(decoded.request.model)
      const context = {
        id: dialect.newId(),
        model: decoded.request.model,
        createdAt: Math.floor((yield* Clock.currentTimeMillis) / 1000),
        request: decoded.request,
        echo: decoded.echo
      }
      return yield* encodeDirect(dialect, context, backend.stream(decoded.request, placement))
    })

  const embed = Effect.fnUntraced(function*(ctx: RequestContext) {
    const body = yield* decodeWith(EmbedBody)(yield* readJson(ctx))
    const texts = typeof body.input === "string" ? [body.input] : body.input
    const tokens = (yield* countTexts(texts)).reduce((sum, n) => sum + n, 0)
    const data: Array<{ object: "embedding"; index: number; embedding: Array<number> }> = []
    for (const [index, text] of texts.entries()) data.push({ object: "embedding", index, embedding: yield* embedInSlices(text, body.dimensions ?? 1536) })
    return jsonResponse({
      object: "list",
      data,
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens }
    })
  })

  const setFaults = Effect.fnUntraced(function*(ctx: RequestContext) {
    const body = yield* decodeWith(FaultBody)(yield* readJson(ctx))
    faults = { mode: body.mode, ...(body.status === undefined ? {} : { status: body.status }), ...(body.rate === undefined ? {} : { rate: body.rate }) }
    return jsonResponse({ faults })
  })

  const routes: ReadonlyArray<RouteDef> = [
    { method: "POST", path: "/v1/messages", shape: "messages", auth: "messages", handler: chat(messagesDialect) },
    { method: "POST", path: "/v1/chat/completions", shape: "openai", auth: "bearer", handler: chat(chatDialect) },
    { method: "POST", path: "/v1/embeddings", shape: "openai", auth: "bearer", handler: embed },
    { method: "GET", path: "/v1/models", shape: "openai", auth: "none", handler: () => Effect.succeed(jsonResponse({ object: "list", data: [] })) },
    { method: "POST", path: "/_simulator/faults", shape: "flat", auth: "none", handler: setFaults }
  ]
  const match = makeMatcher(routes)

  const authorized = (route: RouteDef, headers: Record<string, string | undefined>) => {
    if (options.apiKey === undefined || route.auth === "none") return true
    const bearer = /^Bearer\s+(\S+)$/i.exec(headers["authorization"] ?? "")?.[1]
    return headers["x-api-key"] === options.apiKey || bearer === options.apiKey
  }

  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = newId("req")
    const url = new URL(request.url, "http://simulator")
    const found = match(request.method, url.pathname)
    let shape: ErrorShape
    let effect: Effect.Effect<HttpServerResponse.HttpServerResponse, ApiError | { readonly _tag: "SqlError" }, never>
    if (found._tag === "NoRoute") {
      shape = found.shape
      effect = Effect.fail(new NotFound({ kind: "route", message: `Unknown route: ${request.method} ${url.pathname}` }))
    } else if (found._tag === "WrongMethod") {
      shape = found.shape
      effect = Effect.fail(new MethodNotAllowed({ method: request.method, allow: found.allow }))
    } else {
      shape = found.route.shape
      const headers = request.headers
      effect = authorized(found.route, headers)
        ? found.route.handler({
          request, headers, params: found.params, query: url.searchParams, requestId, key: undefined,
          record: newRequestRecord(requestId, request.method, url.pathname, performance.now())
        }) as never
        : Effect.fail(new Unauthenticated({ message: "Invalid API key" }))
    }
    const response = yield* effect.pipe(
      Effect.catch((error) => Effect.succeed(renderError(error as ApiError, shape, requestId))),
      Effect.catchDefect((defect) =>
        Effect.logError("simulator request failed", defect).pipe(Effect.as(renderDefect(shape, requestId)))
      )
    )
    return HttpServerResponse.setHeaders(response, withRequestId({}, requestId))
  })
}

/** The standalone simulator server as a Layer; prints its address once listening. */
export const simulateServer = (options: SimulateOptions) =>
  Layer.effectDiscard(HttpServer.addressFormattedWith((address) => Console.log(`simulator listening on ${address}`))).pipe(
    Layer.provideMerge(HttpServer.serve(makeSimulateApp(options))),
    Layer.provide(NodeHttpServer.layer(() => createServer({ requestTimeout: 0, keepAliveTimeout: 65_000 }), { port: options.port, host: options.host }))
  )
