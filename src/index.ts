/**
 * The public embedding API — the only module other programs import.
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
import { Effect, Layer } from "effect"
import { HttpEffect } from "effect/http"
import { Settings, type SettingsShape } from "./config/settings.ts"
import { gatewayHttpApp, GatewayServices, ServerLive } from "./gateway.ts"

export type { GatewayConfig } from "./config/schema.ts"
export { defaultConfig } from "./config/default-config.ts"
export { loadConfig, validateConfig } from "./config/load.ts"
export { Settings, type SettingsShape } from "./config/settings.ts"
export { Catalog } from "./catalog/catalog.ts"
export { ApiKeys } from "./keys/api-keys.ts"
export { GatewayServices, gatewayHttpApp, ServerLive }
export { createGateway, dialects } from "./embedded.ts"
export type { Answer, CallOptions, DecodedRequest, DialectName, EchoByDialect, EmbeddedGateway, GatewayOptions } from "./embedded.ts"
export type { CanonicalEvent, CanonicalResponse } from "./model/events.ts"
export type { CanonicalRequest } from "./model/request.ts"
export type { PlacementQueueView } from "./runtime/capacity-queues.ts"

/** The gateway's services on the given settings (environment for the rest). */
export const gatewayLayer = (settings: Partial<SettingsShape> = {}) =>
  GatewayServices.pipe(Layer.provideMerge(Settings.layerWith(settings)))

/**
 * The gateway as a fetch-style handler `(Request) => Promise<Response>`, to mount in any server
 * (Hono, Bun, Deno, a Node adapter). Call `dispose()` to close its database.
 */
export const createWebHandler = (settings: Partial<SettingsShape> = {}) =>
  HttpEffect.toWebHandlerLayerWith(gatewayLayer(settings), {
    toHandler: (context) => Effect.provide(gatewayHttpApp, context)
  })
