/** Config validation: the built-in catalog is valid and rich; a bad file names its first bad field. */
import { Effect } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { makeCatalog } from "../../src/catalog/catalog.ts"
import { defaultConfig } from "../../src/config/default-config.ts"
import { loadConfig, validateConfig } from "../../src/config/load.ts"
import { runCli } from "../support/gateway-process.ts"

const failureOf = async (value: unknown) => {
  const result = await Effect.runPromise(Effect.result(validateConfig(value, "test.json")))
  if (result._tag !== "Failure") throw new Error("expected the config to be refused")
  return result.failure
}

describe("built-in default config", () => {
  it("is valid and covers what the catalog promises", async () => {
    const config = await Effect.runPromise(loadConfig(undefined))
    const tiers = new Set(config.models.map((m) => m.tier))
    expect([...tiers].sort()).toEqual(["frontier", "premium", "workhorse"])
    expect(config.models.length).toBeGreaterThanOrEqual(6)
    expect(config.models.some((m) => !m.capabilities.vision)).toBe(true)
    expect(config.models.some((m) => !m.capabilities.documents)).toBe(true)
    expect(config.models.some((m) => m.capabilities.reasoning)).toBe(true)
    expect(config.models.some((m) => m.pricing.cachedInput === null)).toBe(true)
    expect(config.models.some((m) => m.maxOutput === null)).toBe(true)
    expect(config.models.some((m) => m.preview === true)).toBe(true)
    const dims = (config.embeddingModels ?? []).map((m) => m.dimensions)
    expect(dims).toHaveLength(7)
    expect(Math.min(...dims)).toBe(384)
    expect(Math.max(...dims)).toBe(2048)
    const catalog = makeCatalog(config)
    for (const handle of ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o4-mini", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"]) {
      expect(catalog.resolveChat(handle), handle).toBeDefined()
    }
    for (const handle of ["text-embedding-3-small", "text-embedding-3-large"]) {
      expect(catalog.resolveEmbedding(handle), handle).toBeDefined()
    }
    expect(config.plans.free).toEqual({ allowanceUsd: 5, rpm: 60, tpm: 1000000, concurrency: 8 })
    expect(config.plans.pro).toEqual({ allowanceUsd: 100, rpm: 600, tpm: 2000000, concurrency: 64 })
    for (const m of config.models) expect(m.displayName).toMatch(/simulated/)
  })
})

describe("config validation", () => {
  it("names the JSON path of the first bad field", async () => {
    const bad = structuredClone(defaultConfig) as any
    bad.models[1].placements[0].capacity = 0
    const error = await failureOf(bad)
    expect(error.field).toBe("models[1].placements[0].capacity")
    expect(error.message).toContain("models[1].placements[0].capacity")
  })

  it("checks references across fields", async () => {
    const cases: Array<[(c: any) => void, string]> = [
      [(c) => (c.models[0].equivalents = ["svc-missing"]), "models[0].equivalents[0]"],
      [(c) => (c.compatibilityHandles["gpt-4o"] = "svc-missing"), 'compatibilityHandles["gpt-4o"]'],
      [(c) => (c.defaultPlan = "enterprise"), "defaultPlan"],
      [(c) => (c.models[1].aliases = ["atlas"]), "models[1].aliases[0]"],
      [(c) => (c.models[1].placements[0].id = "atlas-a"), "models[1].placements[0].id"],
      [(c) => (c.models[0].placements[0] = { id: "up", backend: "anthropic", capacity: 1 }), "models[0].placements[0]"],
      [(c) => (c.models[0].id = "atlas-1"), "models[0].id"]
    ]
    for (const [mutate, field] of cases) {
      const config = structuredClone(defaultConfig) as any
      mutate(config)
      expect((await failureOf(config)).field, field).toBe(field)
    }
  })

  it("refuses to start with a bad file, naming the field, and exits non-zero", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gateway-config-"))
    const file = join(dir, "bad.json")
    const bad = structuredClone(defaultConfig) as any
    bad.plans.free.rpm = "lots"
    writeFileSync(file, JSON.stringify(bad))
    const result = await runCli(["serve", "--port", "0", "--config", file], { GATEWAY_DATA_DIR: join(dir, "data") })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("plans.free.rpm")
    const notJson = join(dir, "broken.json")
    writeFileSync(notJson, "{")
    const broken = await runCli(["serve", "--config", notJson], { GATEWAY_DATA_DIR: join(dir, "data") })
    expect(broken.code).toBe(1)
    expect(broken.stderr).toContain("not valid JSON")
  })
})
