/** The validated config file (catalog + plans) as a service, loaded once at start. */
import { Context, Effect, Layer } from "effect"
import { loadConfig } from "./load.ts"
import type { GatewayConfig } from "./schema.ts"
import { Settings } from "./settings.ts"

export class ConfigFile extends Context.Service<ConfigFile, GatewayConfig>()("gateway/config/ConfigFile") {
  /** Loads `GATEWAY_CONFIG`, or the built-in simulator catalog. Fails with `ConfigFileError`. */
  static readonly layer = Layer.effect(ConfigFile, Effect.gen(function*() {
    const settings = yield* Settings
    return ConfigFile.of(yield* loadConfig(settings.configPath))
  }))
  static readonly layerWith = (config: GatewayConfig) => Layer.succeed(ConfigFile)(config)
}
