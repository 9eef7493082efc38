/**
 * How every dialect decodes its wire body: in stages, with Schemas, synchronously.
 *
 * - **Stages**: the envelope first (scalars checked, lists left as `unknown[]`), then each message
 *   or item by its `role` / `type`, then each part by its `type` — rather than one big union, so an
 *   error names the deepest field that is wrong (`messages[2].content[0].image_url.url: Expected
 *   string, got 5`) instead of "matches no member of a union" about the wrong member.
 * - **Schemas** describe every shape; hand-written code only adds what a shape cannot say (a
 *   refused feature, a tool_choice naming no tool). Both fail with the one 400 of
 *   `util/schema-issue.ts` (`invalidField`), so the wording is the same on every surface.
 * - **Synchronously**: a decode is plain code that throws that 400, run once per request by
 *   `decodeRequest`; each Schema is JIT-compiled (`SchemaJITCompiler`), so a valid value is
 *   checked by generated code with no Effect run per stage. An invalid one takes Schema's detailed
 *   path, which builds the issue. Its long lists (messages, input items) are decoded by a
 *   generator that pauses every 128 items (`Sliced`, `pausesAt` in `util/slices.ts`), so a large
 *   body's decode gives the event loop turns instead of holding it (~6–9 ms for 21,800 messages
 *   on a slow VM).
 */
import { Effect, Schema, SchemaIssue, SchemaParser } from "effect"
import * as SchemaJIT from "effect/schema/SchemaJITCompiler"
import { InvalidRequest } from "../errors.ts"
import { invalidField, invalidRequestFromIssue } from "../util/schema-issue.ts"
import { aroundYields, wasSliced } from "../util/sliced-json.ts"
import { runInSlices, type Sliced, SLICE_MS } from "../util/slices.ts"

type Decodable = Schema.Top & { readonly DecodingServices: never }

/** Refuses the field at `path` (a 400 naming it); only inside a decode run by `decodeRequest`. */
export const refuse = (path: string, message: string): never => {
  throw invalidField(path, message)
}

/** A decoder for the value found at `path` of the body; a bad value throws the 400 naming the full path. */
export const decoderAt = <S extends Decodable>(schema: S) => {
  SchemaJIT.enable(schema.ast)
  // The sync adapter calls the compiled decoder directly (no Effect run) while the value is valid;
  // an invalid one throws an Error carrying the issue. That Error is only a carrier for the 400, so
  // it is built without a stack trace (capturing one tripled the cost of a refused request). The
  // schemas here hold no user code, so no other error can lose a stack this way.
  const decode = SchemaParser.decodeUnknownSync(schema)
  return (value: unknown, path: string): S["Type"] => {
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      return decode(value)
    } catch (error) {
      const issue = error instanceof Error ? error.cause : undefined
      if (SchemaIssue.isIssue(issue)) throw invalidRequestFromIssue(issue, path)
      throw error
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
  }
}

/**
 * Decodes an object by its discriminator field (`type` or `role`): the member schema it selects,
 * or, when the discriminator is missing or unknown, a 400 about the discriminator itself.
 */
export const discriminated = <const M extends Record<string, Decodable>>(key: string, members: M) => {
  const tag = decoderAt(Schema.Struct({ [key]: Schema.Literals(Object.keys(members)) }))
  const byTag = new Map(Object.entries(members).map(([name, schema]) => [name, decoderAt(schema)]))
  return (value: unknown, path: string): M[keyof M]["Type"] => {
    const name = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined
    const member = typeof name === "string" ? byTag.get(name) : undefined
    if (member !== undefined) return member(value, path)
    tag(value, path)
    // The tag decoder accepted a tag with no member: impossible, the literals are the members' names.
    return refuse(`${path}.${key}`, "unknown")
  }
}

/** A decode with no long list of its own, as a sliced one (it never pauses). */
export const whole = <A>(decode: (body: unknown) => A) =>
  function*(body: unknown): Sliced<A> {
    return decode(body)
  }

/**
 * Runs a sliced decode to its end. A body parsed at once (under 128 KiB) is decoded in this turn,
 * pauses ignored; a large one (parsed in slices, `wasSliced`) in turns of about SLICE_MS, the
 * event loop running at the pauses between them, and in turns of its own before and after
 * (`aroundYields`). The 400 (`isExpected`) fails the Effect; anything else thrown is a defect.
 */
export const runDecode = <A, E>(body: unknown, steps: () => Sliced<A>, isExpected: (error: unknown) => error is E): Effect.Effect<A, E> =>
  aroundYields(body, runInSlices(madeWhenRun(steps), isExpected, wasSliced(body) ? SLICE_MS : Number.POSITIVE_INFINITY))

/** `steps()` made at the first step, inside the driver's catch: a decode may refuse before its first pause (or be a plain call that throws). */
function* madeWhenRun<A>(steps: () => Sliced<A>): Sliced<A> {
  return yield* steps()
}

const isInvalidRequest = (error: unknown): error is InvalidRequest => error instanceof InvalidRequest

/** A dialect's decode as the Effect it returns: its 400 fails the Effect (see `runDecode`). */
export const decodeRequest = <A>(decode: (body: unknown) => Sliced<A>) => (body: unknown): Effect.Effect<A, InvalidRequest> =>
  runDecode(body, () => decode(body), isInvalidRequest)

/** Optional, and `null` accepted as absent: OpenAI clients often send explicit nulls. */
export const opt = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

/** `null` (an explicit "not given") as `undefined`. */
export const given = <A>(value: A | null | undefined): A | undefined => (value === null ? undefined : value)

/** Drops `undefined` fields, so optional canonical fields are absent rather than undefined. */
export const definedFields = <T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } => {
  // A `for…in` over the literal, not `Object.entries` (an array per field, on every request).
  const out: Record<string, unknown> = {}
  for (const name in fields) {
    const value = fields[name]
    if (value !== undefined) out[name] = value
  }
  return out as { [K in keyof T]?: Exclude<T[K], undefined> }
}
