/**
 * The gateway as a library: one runtime (storage, catalog, capacity queues, metering) that a
 * program drives without HTTP, and whose HTTP handler it can also mount in its own server.
 *
 *   const gateway = await createGateway({ config, dataDir: "./.data" })
 *   const request = await gateway.decode("chat", { model: "svc-pico-1", messages: [...] })
 *   const answer = await gateway.call(request)            // waits for capacity, fails over, metered
 *   const body = gateway.encode("chat", answer)           // what POST /v1/chat/completions returns
 *   for await (const event of gateway.stream(request)) {} // canonical events as they come
 *   await gateway.queues()                                // what GET /admin/v1/queues shows
 *   server.on("request", …gateway.handler…)               // (Request) => Promise<Response>
 *   await gateway.dispose()
 *
 * Calls are metered against a key like any request: `options.apiKey` (a `svc_…` secret), else a
 * key named `embedded` that the gateway creates on first use (default plan).
 */
import { Context, Effect, Exit, Layer, ManagedRuntime, Scope, Stream } from "effect"
import { HttpEffect } from "effect/http"
import { Catalog } from "./catalog/catalog.ts"
import { Settings, type SettingsShape } from "./config/settings.ts"
import { validateConfig } from "./config/load.ts"
import type { GatewayConfig } from "./config/schema.ts"
import { chatDialect } from "./dialects/chat/index.ts"
import { completionsDialect } from "./dialects/completions/index.ts"
import type { ChatEcho } from "./dialects/chat/index.ts"
import type { CompletionsEcho } from "./dialects/completions/index.ts"
import type { ChatDialect } from "./dialects/dialect.ts"
import type { MessagesEcho } from "./dialects/messages/index.ts"
import type { ResponsesEcho } from "./dialects/responses/index.ts"
import { messagesDialect } from "./dialects/messages/index.ts"
import { responsesDialect } from "./dialects/responses/index.ts"
import { NotFound, PermissionDenied, shown, Unauthenticated } from "./errors.ts"
import { gatewayHttpApp, GatewayServices, gatewayServicesFor } from "./gateway.ts"
import { withBodyIdleTimeout } from "./http/body-idle.ts"
import { prepareRequest } from "./catalog/requirements.ts"
import { ApiKeys } from "./keys/api-keys.ts"
import type { KeyRecord } from "./keys/keys-repo.ts"
import { allowsModel, allowsSurface } from "./keys/permissions.ts"
import type { Surface } from "./keys/surfaces.ts"
import { type CanonicalEvent, type CanonicalResponse, collectStream } from "./model/events.ts"
import type { CanonicalRequest } from "./model/request.ts"
import type { PlacementQueueView } from "./runtime/capacity-queue-types.ts"
import { CapacityQueues } from "./runtime/capacity-queues.ts"
import { ModelCaller, type Settlement } from "./runtime/model-caller.ts"

/** Each dialect with its own echo type, so an encoder can never be handed the wrong echo (or none). */
export interface EchoByDialect {
  readonly messages: MessagesEcho
  readonly chat: ChatEcho
  readonly responses: ResponsesEcho
  readonly completions: CompletionsEcho
}
export type DialectName = keyof EchoByDialect

export const dialects: { readonly [D in DialectName]: ChatDialect<EchoByDialect[D]> } = {
  messages: messagesDialect,
  chat: chatDialect,
  responses: responsesDialect,
  completions: completionsDialect
}

/** A dialect's wire body, decoded: the canonical request as dispatched and what its answer must echo. */
export type DecodedRequest<D extends DialectName = DialectName> = {
  readonly [K in D]: { readonly dialect: K; readonly request: CanonicalRequest; readonly echo: EchoByDialect[K] }
}[D]

export interface GatewayOptions extends Partial<SettingsShape> {
  /** The catalog and plans; validated like a config file. Absent: `GATEWAY_CONFIG` or the built-in catalog. */
  readonly config?: GatewayConfig | unknown
}

export interface CallOptions {
  /** The key to meter the call against (and whose permissions apply); default: the gateway's own `embedded` key. */
  readonly apiKey?: string
  /** "auto" (default) lets equivalent models serve; "exact" pins the named model. */
  readonly continuity?: "auto" | "exact"
}

export interface Answer {
  readonly servedModel: string
  /** The canonical request that was called. */
  readonly request: CanonicalRequest
  /** What it was decoded from, when it came from `decode`: `encode` in that dialect echoes it. */
  readonly decoded?: DecodedRequest
  readonly response: CanonicalResponse
  readonly settlement: Settlement
}

export interface EmbeddedGateway {
  /**
   * A dialect's wire body → the request as the gateway dispatches it (model resolved, checked),
   * with what its answer must echo. The key's permissions apply as over HTTP (403).
   */
  decode<D extends DialectName>(dialect: D, body: unknown, options?: Pick<CallOptions, "apiKey">): Promise<DecodedRequest<D>>
  call(request: CanonicalRequest | DecodedRequest, options?: CallOptions): Promise<Answer>
  stream(request: CanonicalRequest | DecodedRequest, options?: CallOptions): AsyncIterable<CanonicalEvent>
  /**
   * The dialect's response body for an answer (what its HTTP endpoint returns). An answer decoded
   * from this dialect echoes its request as sent; any other uses the canonical request's values.
   */
  encode(dialect: DialectName, answer: Answer): unknown
  queues(): Promise<ReadonlyArray<PlacementQueueView>>
  /** The whole HTTP API as a fetch-style handler, on this same runtime. */
  readonly handler: (request: Request) => Promise<Response>
  dispose(): Promise<void>
}

const isDecoded = (input: CanonicalRequest | DecodedRequest): input is DecodedRequest => "dialect" in input && "echo" in input

/** The body of an answer in one dialect, with that dialect's echo. */
const encodeIn = <D extends DialectName>(name: D, answer: Answer): unknown => {
  const dialect = dialects[name]
  const decoded = answer.decoded
  // Only the dialect a request was decoded from has its echo; the cast is what that check proves.
  const echo = decoded !== undefined && decoded.dialect === name ? (decoded.echo as EchoByDialect[D]) : dialect.defaultEcho(answer.request)
  return dialect.encodeResponse(answer.response, {
    id: dialect.newId(),
    model: answer.servedModel,
    createdAt: Math.floor(Date.now() / 1000),
    request: answer.request,
    echo
  })
}

export const createGateway = async (options: GatewayOptions = {}): Promise<EmbeddedGateway> => {
  const { config, ...settings } = options
  const services = config === undefined
    ? GatewayServices
    : Layer.unwrap(Effect.map(validateConfig(config, "<createGateway config>"), gatewayServicesFor))
  const runtime = ManagedRuntime.make(services.pipe(Layer.provideMerge(Settings.layerWith(settings))))
  const context = await runtime.context()
  const app = await runtime.runPromise(gatewayHttpApp)
  const webHandler = HttpEffect.toWebHandler(Effect.provideContext(app, context))
  // The host owns the connection; the handler bounds how long a request body may stall.
  const { bodyIdleTimeoutMs } = Context.get(context, Settings)
  const handler = (request: Request) => webHandler(withBodyIdleTimeout(request, () => bodyIdleTimeoutMs))

  let ownKey: KeyRecord | undefined
  const keyFor = Effect.fnUntraced(function*(apiKey: string | undefined) {
    const keys = yield* ApiKeys
    if (apiKey !== undefined) {
      const key = yield* keys.authenticate(apiKey)
      if (key === undefined) return yield* new Unauthenticated({ message: "Invalid API key" })
      return key
    }
    if (ownKey !== undefined) return ownKey
    const existing = (yield* keys.list()).find((k) => k.name === "embedded" && k.revokedAt === null)
    ownKey = existing ?? (yield* keys.create({ name: "embedded" })).record
    return ownKey
  })

  /** The HTTP path's checks: the key may use the surface and the model (403), the model exists (404). */
  const checkModel = Effect.fnUntraced(function*(key: KeyRecord, name: string, surface?: Surface) {
    if (surface !== undefined && !allowsSurface(key.permissions, surface)) {
      return yield* new PermissionDenied({ message: `This key is not allowed to use the ${surface} surface` })
    }
    const model = (yield* Catalog).resolveChat(name)
    if (model === undefined) return yield* new NotFound({ kind: "resource", message: `The model '${shown(name)}' does not exist`, param: "model" })
    if (!allowsModel(key.permissions, model.id)) {
      return yield* new PermissionDenied({ message: `This key is not allowed to use the model ${model.id}` })
    }
    return model
  })

  const decodeIn = Effect.fnUntraced(function*<D extends DialectName>(name: D, body: unknown, key: KeyRecord) {
    const dialect = dialects[name]
    const decoded = yield* dialect.decode(body)
    const model = yield* checkModel(key, decoded.request.model, dialect.surface)
    const viaHandle = (yield* Catalog).isCompatibilityHandle(decoded.request.model)
    const request = yield* prepareRequest(model, decoded.request, { viaHandle })
    return { dialect: name, request, echo: decoded.echo }
  })

  const decodeWith = Effect.fnUntraced(function*(name: DialectName, body: unknown, apiKey: string | undefined) {
    return yield* decodeIn(name, body, yield* keyFor(apiKey))
  })
  const decode = <D extends DialectName>(name: D, body: unknown, options: Pick<CallOptions, "apiKey"> = {}) =>
    // The mapped type cannot see that `{dialect: name, …}` is the member for D.
    runtime.runPromise(decodeWith(name, body, options.apiKey)) as Promise<DecodedRequest<D>>

  /** The call's key, checked against the request's model (a request may be built by hand). */
  const start = Effect.fnUntraced(function*(input: CanonicalRequest | DecodedRequest, callOptions: CallOptions) {
    const request = isDecoded(input) ? input.request : input
    const key = yield* keyFor(callOptions.apiKey)
    yield* checkModel(key, request.model)
    const started = yield* (yield* ModelCaller).call(request, { key, continuity: callOptions.continuity })
    return { request, started }
  })

  const callWith = Effect.fnUntraced(function*(input: CanonicalRequest | DecodedRequest, callOptions: CallOptions) {
    const { request, started } = yield* start(input, callOptions)
    const response = yield* collectStream(started.events)
    return {
      servedModel: started.servedModel,
      request,
      ...(isDecoded(input) ? { decoded: input } : {}),
      response,
      settlement: yield* started.settled
    } satisfies Answer
  })
  const call = (input: CanonicalRequest | DecodedRequest, callOptions: CallOptions = {}) =>
    runtime.runPromise(Effect.scoped(callWith(input, callOptions)))

  async function* stream(input: CanonicalRequest | DecodedRequest, callOptions: CallOptions = {}): AsyncIterable<CanonicalEvent> {
    const scope = await runtime.runPromise(Scope.make())
    try {
      const events = await runtime.runPromise(start(input, callOptions).pipe(Effect.map(({ started }) => started.events), Scope.provide(scope)))
      yield* Stream.toAsyncIterable(events)
    } finally {
      await runtime.runPromise(Scope.close(scope, Exit.void))
    }
  }

  return {
    decode,
    call,
    stream,
    encode: encodeIn,
    queues: () => runtime.runPromise(Effect.flatMap(CapacityQueues, (queues) => queues.view())),
    handler: (request) => handler(request),
    dispose: () => runtime.dispose()
  }
}
