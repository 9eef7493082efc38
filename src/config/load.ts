/**
 * Reads and validates the config file: Schema for each field, then the rules that span fields
 * (unique ids, references that must exist). The first bad field stops the start, named by its path.
 */
import { Effect, Schema } from "effect"
import { readFile } from "node:fs/promises"
import { firstIssue } from "../util/schema-issue.ts"
import { defaultConfig } from "./default-config.ts"
import { GatewayConfig } from "./schema.ts"

class ConfigFileError extends Schema.TaggedError<ConfigFileError>()("ConfigFileError", {
  file: Schema.String,
  /** JSON path of the first bad field, e.g. `models[0].placements[0].capacity`. */
  field: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `invalid config ${this.file}${this.field ? ` at ${this.field}` : ""}: ${this.detail}`
  }
}

const decode = Schema.decodeUnknownEffect(GatewayConfig)

/** Checks that reference other parts of the config; returns the first problem found. */
const crossCheck = (config: GatewayConfig): { field: string; message: string } | undefined => {
  const chatIds = new Map<string, number>()
  const allNames = new Map<string, string>()
  const placementIds = new Map<string, string>()
  const claim = (name: string, field: string) => {
    const previous = allNames.get(name)
    if (previous !== undefined) return { field, message: `"${name}" is already used at ${previous}` }
    allNames.set(name, field)
    return undefined
  }
  const claimPlacements = (placements: GatewayConfig["models"][number]["placements"], base: string) => {
    for (const [j, p] of placements.entries()) {
      const field = `${base}.placements[${j}]`
      const previous = placementIds.get(p.id)
      if (previous !== undefined) return { field: `${field}.id`, message: `placement id "${p.id}" is already used at ${previous}` }
      placementIds.set(p.id, field)
      if (p.backend !== "simulator" && (p.baseUrl === undefined || p.upstreamModel === undefined)) {
        return { field, message: `a ${p.backend} placement needs baseUrl and upstreamModel` }
      }
    }
    return undefined
  }
  for (const [i, m] of config.models.entries()) {
    const problem = claim(m.id, `models[${i}].id`) ??
      (m.aliases ?? []).map((a, k) => claim(a, `models[${i}].aliases[${k}]`)).find((x) => x !== undefined) ??
      claimPlacements(m.placements, `models[${i}]`)
    if (problem) return problem
    chatIds.set(m.id, i)
  }
  for (const [i, m] of (config.embeddingModels ?? []).entries()) {
    const problem = claim(m.id, `embeddingModels[${i}].id`) ??
      (m.aliases ?? []).map((a, k) => claim(a, `embeddingModels[${i}].aliases[${k}]`)).find((x) => x !== undefined) ??
      claimPlacements(m.placements, `embeddingModels[${i}]`)
    if (problem) return problem
  }
  for (const [i, m] of config.models.entries()) {
    for (const [k, eq] of (m.equivalents ?? []).entries()) {
      if (!chatIds.has(eq)) return { field: `models[${i}].equivalents[${k}]`, message: `unknown chat model "${eq}"` }
      if (eq === m.id) return { field: `models[${i}].equivalents[${k}]`, message: "a model cannot be its own equivalent" }
    }
  }
  const embeddingIds = new Set((config.embeddingModels ?? []).map((m) => m.id))
  for (const [handle, target] of Object.entries(config.compatibilityHandles ?? {})) {
    if (!chatIds.has(target) && !embeddingIds.has(target)) {
      return { field: `compatibilityHandles[${JSON.stringify(handle)}]`, message: `unknown model "${target}"` }
    }
  }
  if (!(config.defaultPlan in config.plans)) {
    return { field: "defaultPlan", message: `no plan named "${config.defaultPlan}" in plans` }
  }
  return undefined
}

/** Validates an already-parsed config value. */
export const validateConfig = Effect.fn("Config.validate")(function*(value: unknown, file: string) {
  const config = yield* decode(value).pipe(
    Effect.mapError((error) => {
      const issue = firstIssue(error)
      return new ConfigFileError({ file, field: issue.path, detail: issue.message })
    })
  )
  const problem = crossCheck(config)
  if (problem) return yield* new ConfigFileError({ file, field: problem.field, detail: problem.message })
  return config
})

/** Loads the config file at `path`, or the built-in default config when no path is given. */
export const loadConfig = Effect.fn("Config.load")(function*(path: string | undefined) {
  if (path === undefined || path === "") return yield* validateConfig(defaultConfig, "<built-in default>")
  const text = yield* Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (cause) => new ConfigFileError({ file: path, field: "", detail: `cannot read the file: ${(cause as Error).message}` })
  })
  const value = yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (cause) => new ConfigFileError({ file: path, field: "", detail: `not valid JSON: ${(cause as Error).message}` })
  })
  return yield* validateConfig(value, path)
})
