/**
 * How an append's `delta` combines into a state's value — one rule per JSON type:
 *
 * | current value | delta            | result                                                   |
 * |---------------|------------------|----------------------------------------------------------|
 * | null (fresh)  | anything         | the delta                                                |
 * | object        | object           | JSON merge patch (RFC 7386): keys set, `null` deletes, nested objects merge |
 * | array         | array            | the delta's elements appended                            |
 * | number        | number           | the sum                                                  |
 * | string        | string           | concatenation                                            |
 * | boolean       | boolean          | the delta (last write wins)                              |
 * | any other pairing                | 400 naming `delta` and both types                        |
 */
import { isPlainObject, type Json, jsonType } from "../util/json.ts"


const mergePatch = (target: Json, patch: Json): Json => {
  if (!isPlainObject(patch)) return patch
  const out: Record<string, Json> = isPlainObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key]
    else out[key] = mergePatch(out[key] ?? null, value)
  }
  return out
}

export type CombineResult = { readonly ok: true; readonly value: Json } | { readonly ok: false; readonly message: string }

/** The 400's message when the delta's type is not the current value's. */
export const mismatchMessage = (current: string, delta: string) =>
  `delta: a ${delta} cannot be combined with the current ${current} value (expected a ${current})`

export const combine = (current: Json, delta: Json): CombineResult => {
  const a = jsonType(current)
  const b = jsonType(delta)
  if (a === "null") return { ok: true, value: delta }
  if (a !== b) return { ok: false, message: mismatchMessage(a, b) }
  switch (a) {
    case "object":
      return { ok: true, value: mergePatch(current, delta) }
    case "array":
      return { ok: true, value: [...(current as ReadonlyArray<Json>), ...(delta as ReadonlyArray<Json>)] }
    case "number": {
      const sum = (current as number) + (delta as number)
      return Number.isFinite(sum) ? { ok: true, value: sum } : { ok: false, message: "delta: the sum is not a finite number" }
    }
    case "string":
      return { ok: true, value: (current as string) + (delta as string) }
    default:
      return { ok: true, value: delta }
  }
}
