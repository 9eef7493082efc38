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
import type { ChatDialect } from "./dialects/dialect.ts"
import { messagesDialect } from "./dialects/messages/index.ts"
import { responsesDialect } from "./dialects/responses/index.ts"
import { NotFound, Unauthenticated } from "./errors.ts"
import { gatewayHttpApp, GatewayServices, gatewayServicesFor } from "./gateway.ts"
import { withBodyIdleTimeout } from "./http/body-idle.ts"
import { prepareRequest } from "./catalog/requirements.ts"
import { ApiKeys } from "./keys/api-keys.ts"
import type { KeyRecord } from "./keys/keys-repo.ts"
import { type CanonicalEvent, type CanonicalResponse, collectStream } from "./model/events.ts"
import type { CanonicalRequest } from "./model/request.ts"
import { CapacityQueues, type PlacementQueueView } from "./runtime/capacity-queues.ts"
import { ModelCaller, type Settlement } from "./runtime/model-caller.ts"

export const dialects = { messages: messagesDialect, chat: chatDialect, responses: responsesDialect, completions: completionsDialect } as const
export type DialectName = keyof typeof dialects

export interface GatewayOptions extends Partial<SettingsShape> {
  /** The catalog and plans; validated like a config file. Absent: `GATEWAY_CONFIG` or the built-in catalog. */
  readonly config?: GatewayConfig | unknown
}

export interface CallOptions {
  /** The key to meter the call against; default: the gateway's own `embedded` key. */
  readonly apiKey?: string
  /** "auto" (default) lets equivalent models serve; "exact" pins the named model. */
  readonly continuity?: "auto" | "exact"
}

export interface Answer {
  readonly servedModel: string
  readonly response: CanonicalResponse
  readonly settlement: Settlement
}

export interface EmbeddedGateway {
  /** A dialect's wire body → the canonical request as the gateway dispatches it (model resolved, checked). */
  decode(dialect: DialectName, body: unknown): Promise<CanonicalRequest>
  call(request: CanonicalRequest, options?: CallOptions): Promise<Answer>
  stream(request: CanonicalRequest, options?: CallOptions): AsyncIterable<CanonicalEvent>
  /** The dialect's response body for an answer (what its HTTP endpoint returns). */
  encode(dialect: DialectName, answer: Answer, request?: CanonicalRequest): unknown
  queues(): Promise<ReadonlyArray<PlacementQueueView>>
  /** The whole HTTP API as a fetch-style handler, on this same runtime. */
  readonly handler: (request: Request) => Promise<Response>
  dispose(): Promise<void>
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
  const keyFor = (apiKey: string | undefined) =>
    Effect.gen(function*() {
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

  const decode = (name: DialectName, body: unknown) =>
    runtime.runPromise(Effect.gen(function*() {
      const dialect: ChatDialect<unknown> = dialects[name]
      const decoded = yield* dialect.decode(body)
      const model = (yield* Catalog).resolveChat(decoded.request.model)
      if (model === undefined) {
        return yield* new NotFound({ kind: "resource", message: `The model '${decoded.request.model}' does not exist`, param: "model" })
      }
      return yield* prepareRequest(model, decoded.request)
    }))

  const call = (request: CanonicalRequest, callOptions: CallOptions = {}) =>
    runtime.runPromise(Effect.scoped(Effect.gen(function*() {
      const key = yield* keyFor(callOptions.apiKey)
      const started = yield* (yield* ModelCaller).call(request, { key, continuity: callOptions.continuity })
      const response = yield* collectStream(started.events)
      return { servedModel: started.servedModel, response, settlement: yield* started.settled }
    })))

  async function* stream(request: CanonicalRequest, callOptions: CallOptions = {}): AsyncIterable<CanonicalEvent> {
    const scope = await runtime.runPromise(Scope.make())
    try {
      const events = await runtime.runPromise(Effect.gen(function*() {
        const key = yield* keyFor(callOptions.apiKey)
        const started = yield* (yield* ModelCaller).call(request, { key, continuity: callOptions.continuity })
        return started.events
      }).pipe(Scope.provide(scope)))
      yield* Stream.toAsyncIterable(events)
    } finally {
      await runtime.runPromise(Scope.close(scope, Exit.void))
    }
  }

  const encode = (name: DialectName, answer: Answer, request?: CanonicalRequest) => {
    const dialect: ChatDialect<unknown> = dialects[name]
    const base = request ?? ({ model: answer.servedModel } as CanonicalRequest)
    return dialect.encodeResponse(answer.response, {
      id: dialect.newId(),
      model: answer.servedModel,
      createdAt: Math.floor(Date.now() / 1000),
      request: base,
      echo: undefined
    })
  }

  return {
    decode,
    call,
    stream,
    encode,
    queues: () => runtime.runPromise(Effect.gen(function*() {
      return yield* (yield* CapacityQueues).view()
    })),
    handler: (request) => handler(request),
    dispose: () => runtime.dispose()
  }
}
