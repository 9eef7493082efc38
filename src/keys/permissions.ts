/**
 * What a key may do: a set of surfaces and a set of model id patterns. `null` means "all".
 * Model patterns match canonical catalog ids; `*` matches any run of characters.
 */
import { Schema } from "effect"
import { type Surface, Surfaces } from "./surfaces.ts"

export const PermissionsInput = Schema.Struct({
  surfaces: Schema.optional(Schema.NullOr(Schema.Array(Schema.Literals(Surfaces)))),
  models: Schema.optional(Schema.NullOr(Schema.Array(Schema.String.check(Schema.isPattern(/^[A-Za-z0-9.*:_-]+$/, {
    expected: "a model id pattern of letters, digits, . - _ : and *"
  })))))
})
export type PermissionsInput = typeof PermissionsInput.Type

export interface Permissions {
  readonly surfaces: ReadonlyArray<Surface> | null
  readonly models: ReadonlyArray<string> | null
}

export const allPermissions: Permissions = { surfaces: null, models: null }

export const normalizePermissions = (input: PermissionsInput | null | undefined): Permissions => ({
  surfaces: input?.surfaces ?? null,
  models: input?.models ?? null
})

const patternCache = new Map<string, RegExp>()
const toRegExp = (pattern: string) => {
  let re = patternCache.get(pattern)
  if (re === undefined) {
    re = new RegExp("^" + pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$")
    patternCache.set(pattern, re)
  }
  return re
}

export const allowsSurface = (p: Permissions, surface: Surface) => p.surfaces === null || p.surfaces.includes(surface)
export const allowsModel = (p: Permissions, modelId: string) =>
  p.models === null || p.models.some((pattern) => toRegExp(pattern).test(modelId))
