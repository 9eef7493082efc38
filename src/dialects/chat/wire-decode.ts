/**
 * Wire fields shared by the OpenAI-shaped dialects (chat and legacy completions). How they are
 * decoded (in stages, synchronously, one 400 wording) is `../staged-decode.ts`.
 */
import { Schema } from "effect"
import { opt, refuse } from "../staged-decode.ts"

export const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
export const Temperature = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 2 }))
export const TopP = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
/** OpenAI accepts one stop string or up to four. */
export const Stop = Schema.Union([Schema.String, Schema.Array(Schema.String).check(Schema.isMaxLength(4))])
export const JsonObjectWire = Schema.Record(Schema.String, Schema.Unknown)
export const StreamOptions = Schema.Struct({ include_usage: opt(Schema.Boolean) })
/**
 * OpenAI's `metadata` (Chat Completions, Responses, batches): at most 16 pairs, keys of at most 64
 * characters, values of at most 512, as OpenAI refuses beyond them. A Responses stream repeats it
 * in every envelope frame, so without a bound a value of megabytes was serialized several times.
 */
export const OpenAiMetadata = Schema.Record(Schema.String, Schema.String.check(Schema.isMaxLength(512))).check(
  Schema.isMaxProperties(16),
  // On the record, not its key schema: a key the key schema refuses is dropped, not refused.
  Schema.makeFilter((metadata) => Object.keys(metadata).every((key) => key.length <= 64) || "Expected keys of at most 64 characters")
)

/** The canonical stop sequences of a wire `stop` (a string or a list). */
export const stopSequences = (stop: string | ReadonlyArray<string> | null | undefined): ReadonlyArray<string> =>
  stop === null || stop === undefined ? [] : typeof stop === "string" ? [stop] : stop

/** Refuses `n` other than 1: one choice per response is all the gateway produces. */
export const checkSingleChoice = (n: number | null | undefined): void => {
  if (n !== null && n !== undefined && n !== 1) refuse("n", `only n=1 is supported (got ${n}); send separate requests for more choices`)
}
