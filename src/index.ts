/**
 * The public embedding API — the only module other programs import. Three ways in: the whole
 * server as a Layer (`ServerLive`, what `gateway serve` runs), the embedding API (`createGateway`,
 * `createWebHandler`, `gatewayLayer`), and — for tests inside this repository — each service's own
 * `layer`/`layerTest`.
 *
 * ```ts
 * import { createGateway } from "svc-gateway"
 * const gateway = await createGateway({ config, dataDir: "./.data" })   // or createWebHandler(settings)
 * const answer = await gateway.call(await gateway.decode("messages", body))
 * const wire = gateway.encode("messages", answer)
 * const response = await gateway.handler(new Request("http://x/v1/models"))
 * await gateway.dispose()
 * ```
 */
import { Context, Effect, Layer } from "effect"
import { HttpEffect } from "effect/http"
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, Settings, type SettingsShape } from "./config/settings.ts"
import { gatewayHttpApp, GatewayServices, ServerLive } from "./gateway.ts"
import { withBodyIdleTimeout } from "./http/body-idle.ts"

export type { GatewayConfig } from "./config/schema.ts"
export { defaultConfig } from "./config/default-config.ts"
export { loadConfig, validateConfig } from "./config/load.ts"
export { Settings, type SettingsShape } from "./config/settings.ts"
export { ServerLive }
export { LogLineSink } from "./observability/json-logger.ts"
export { createGateway, dialects } from "./embedded.ts"
export type { Answer, CallOptions, DecodedRequest, DialectName, EchoByDialect, EmbeddedGateway, GatewayOptions } from "./embedded.ts"
export type { CanonicalEvent, CanonicalResponse } from "./model/events.ts"
export type { CanonicalRequest } from "./model/request.ts"
export type { PlacementQueueView } from "./runtime/capacity-queue-types.ts"

/** The gateway's services on the given settings (environment for the rest). */
export const gatewayLayer = (settings: Partial<SettingsShape> = {}) =>
  GatewayServices.pipe(Layer.provideMerge(Settings.layerWith(settings)))

/**
 * The gateway as a fetch-style handler `(Request) => Promise<Response>`, to mount in any server
 * (Hono, Bun, Deno, a Node adapter). Call `dispose()` to close its database. The host owns the
 * connections (and their header timeouts); the handler bounds how long a request body may stall.
 */
export const createWebHandler = (settings: Partial<SettingsShape> = {}) => {
  // Known once the layer is built (the settings may come from the environment); read per request.
  let bodyIdleTimeoutMs = settings.bodyIdleTimeoutMs ?? DEFAULT_BODY_IDLE_TIMEOUT_MS
  const web = HttpEffect.toWebHandlerLayerWith(gatewayLayer(settings), {
    toHandler: (context) => {
      bodyIdleTimeoutMs = Context.get(context, Settings).bodyIdleTimeoutMs
      return Effect.provide(gatewayHttpApp, context)
    }
  })
  return {
    dispose: web.dispose,
    handler: (request: Request): Promise<Response> => web.handler(withBodyIdleTimeout(request, () => bodyIdleTimeoutMs))
  }
}
