/**
 * The built-in catalog with every simulator delay removed, written to a file for GATEWAY_CONFIG,
 * so SDK tests run fast. `mutate` may change the copy (e.g. add an upstream-backed model).
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { defaultConfig } from "../../src/config/default-config.ts"
import type { GatewayConfig } from "../../src/config/schema.ts"

/** A deep-mutable copy of the config, for tests to edit freely. */
type Editable = any

export const fastConfig = (mutate?: (config: Editable) => void): GatewayConfig => {
  const config: Editable = structuredClone(defaultConfig)
  for (const model of [...config.models, ...(config.embeddingModels ?? [])]) {
    for (const placement of model.placements) {
      if (placement.simulator) placement.simulator = { ttftMs: 0, tokensPerSecond: 0 }
    }
  }
  // Suites send many requests with one key: the free plan's limits would throttle them. Suites
  // about limits set their own plans.
  config.plans.free = { allowanceUsd: 1_000_000, rpm: 1_000_000, tpm: 1_000_000_000, concurrency: 1_000 }
  mutate?.(config)
  return config as GatewayConfig
}

/** Writes the config into `dir` and returns the env that points the gateway at it. */
export const fastConfigEnv = (dir: string, mutate?: (config: Editable) => void) => {
  const file = join(dir, "fast-config.json")
  writeFileSync(file, JSON.stringify(fastConfig(mutate)))
  return { GATEWAY_CONFIG: file }
}
