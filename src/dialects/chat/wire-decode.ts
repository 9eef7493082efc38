/**
 * Decoding helpers shared by the OpenAI-shaped dialects (chat and legacy completions).
 *
 * Requests are decoded in stages (envelope, then each message by its `role`, each part by its
 * `type`) rather than with one big union, so an error names the deepest field that is wrong —
 * `messages[2].content[0].image_url.url: Expected string` — instead of "matches no member of a union".
 */
import { Effect, Schema } from "effect"
import { InvalidRequest } from "../../errors.ts"
import { firstIssue } from "../../util/schema-issue.ts"

/** Optional, and `null` accepted as absent: OpenAI clients often send explicit nulls. */
export const opt = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

export const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
export const Temperature = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 2 }))
export const TopP = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
/** OpenAI accepts one stop string or up to four. */
export const Stop = Schema.Union([Schema.String, Schema.Array(Schema.String).check(Schema.isMaxLength(4))])
export const JsonObjectWire = Schema.Record(Schema.String, Schema.Unknown)
export const StreamOptions = Schema.Struct({ include_usage: opt(Schema.Boolean) })

/** `a` + `b` as a field path: `messages[2]` + `content[0].type` → `messages[2].content[0].type`. */
export const joinPath = (prefix: string, rest: string): string =>
  prefix === "" ? rest : rest === "" ? prefix : rest.startsWith("[") ? `${prefix}${rest}` : `${prefix}.${rest}`

/** A 400 that names the field. */
export const invalidField = (param: string, message: string): InvalidRequest =>
  new InvalidRequest({ message: param === "" ? message : `${param}: ${message}`, ...(param === "" ? {} : { param }) })

/** Decodes `value` found at `path` of the body; the error names the full path of the bad field. */
export const decodeAt = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(schema)
  return (value: unknown, path: string): Effect.Effect<S["Type"], InvalidRequest> =>
    decode(value).pipe(
      Effect.mapError((error) => {
        const issue = firstIssue(error)
        return invalidField(joinPath(path, issue.path), issue.message)
      })
    )
}

type Member = Schema.Top & { readonly DecodingServices: never }

/**
 * Decodes an object by its discriminator field (`type` or `role`): first the discriminator alone,
 * so an unknown value is reported as such, then the member schema it selects.
 */
export const discriminated = <const M extends Record<string, Member>>(key: string, members: M) => {
  const tags = Object.keys(members)
  const tag = decodeAt(Schema.Struct({ [key]: Schema.Literals(tags) }))
  const byTag = new Map(Object.entries(members).map(([name, schema]) => [name, decodeAt(schema)]))
  return (value: unknown, path: string): Effect.Effect<M[keyof M]["Type"], InvalidRequest> =>
    Effect.flatMap(tag(value, path), (decoded) => byTag.get((decoded as Record<string, string>)[key])!(value, path))
}

/** Drops `undefined` fields, so optional canonical fields are absent rather than undefined. */
export const definedFields = <T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } => {
  const out: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) out[name] = value
  return out as { [K in keyof T]?: Exclude<T[K], undefined> }
}

/** `null` (an explicit "not given") as `undefined`. */
export const given = <A>(value: A | null | undefined): A | undefined => (value === null ? undefined : value)

/** The canonical stop sequences of a wire `stop` (a string or a list). */
export const stopSequences = (stop: string | ReadonlyArray<string> | null | undefined): ReadonlyArray<string> =>
  stop === null || stop === undefined ? [] : typeof stop === "string" ? [stop] : stop

/** Refuses `n` other than 1: one choice per response is all the gateway produces. */
export const checkSingleChoice = (n: number | null | undefined) =>
  n === null || n === undefined || n === 1
    ? Effect.void
    : Effect.fail(invalidField("n", `only n=1 is supported (got ${n}); send separate requests for more choices`))
