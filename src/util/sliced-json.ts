/**
 * JSON parsed in slices, for request bodies too large to parse at once: `JSON.parse` of a 32 MiB
 * body of a million tiny objects holds the event loop for about half a second, and every other
 * client waits. Bytes go to @streamparser/json's tokenizer `SLICE_BYTES` at a time, and the fiber
 * yields to the event loop whenever a slice has run `SLICE_MS`, so no slice holds it for longer.
 *
 * The limits that `util/json-limits.ts` checks on a parsed value are checked here while the
 * tokens arrive, so a hostile body is refused before it is ever built:
 * - depth: a container deeper than `MAX_JSON_DEPTH` is the same 400 as `requireShallow`'s, path
 *   and all;
 * - size in values: more than `MAX_JSON_VALUES` values is a 400 naming the top-level field that
 *   crossed the limit. Every later pass over the request (Schema decode, the token bound, the
 *   upstream translation, `JSON.stringify`) is linear in the values, so this bounds them all;
 * - key length: a key longer than `MAX_JSON_KEY_CHARS` is a 400 naming the field it is in, before
 *   it is set on its object (V8 hashes a key as it is set, in one step).
 *
 * Why @streamparser/json: it is dependency-free, maintained, and its `Tokenizer`/`TokenParser`
 * pair is fed plain byte chunks, builds the same value as `JSON.parse` (`__proto__` keys
 * included) and reports every token, which is where the limits are checked. Other streaming
 * parsers (stream-json, jsonparse, clarinet) either need a Node stream pipeline per request or
 * are unmaintained.
 */
import { type ParsedElementInfo, type ParsedTokenInfo, Tokenizer, TokenParser, TokenType } from "@streamparser/json"
import type { StringBuilder } from "@streamparser/json/utils/bufferedString.js"
import { Effect, Result } from "effect"
import { InvalidRequest } from "../errors.ts"
import { findTooDeep, KEY_TOO_LONG, keyTooLong, MAX_JSON_DEPTH, MAX_JSON_KEY_CHARS, MAX_JSON_VALUES, NESTED_TOO_DEEP, tooDeep } from "./json-limits.ts"
import { formatPath, invalidField } from "./schema-issue.ts"
import { PiecedString } from "./pieced-string.ts"
import { type Sliced, SLICE_MS, stringSlices } from "./slices.ts"

/** Bytes handed to the tokenizer at once: ~0.3 ms of work on tiny objects (several ms on a busy machine). */
const SLICE_BYTES = 8 * 1024

export interface SlicedJsonLimits {
  readonly maxDepth?: number
  readonly maxValues?: number
  readonly maxKeyChars?: number
  /** The 400 for a container deeper than `maxDepth` at `path` (default: `tooDeep`, about the body). */
  readonly tooDeep?: (path: ReadonlyArray<PropertyKey>) => InvalidRequest
  /** The 400 for a key longer than `maxKeyChars` in the object at `path` (default: `keyTooLong`, about the body). */
  readonly keyTooLong?: (path: ReadonlyArray<PropertyKey>) => InvalidRequest
  /** The refusal for more than `maxValues` values (default: a 400 naming the top-level field). */
  readonly tooMany?: () => InvalidRequest
}

/** A refusal thrown from inside a token callback; the tokenizer rethrows it unchanged. */
class Refused extends Error {
  readonly error: InvalidRequest
  constructor(error: InvalidRequest) {
    super(error.message)
    this.error = error
  }
}

/** One open container: whether it is an array, and its current index or key. */
interface Open {
  readonly array: boolean
  key: string | number
}

export interface SlicedJsonParser {
  /** Parses the next bytes of the document, yielding between slices. */
  readonly feed: (bytes: Uint8Array) => Effect.Effect<void, InvalidRequest>
  /** The parsed value; `undefined` when the document held nothing but whitespace. */
  readonly end: () => Effect.Effect<unknown, InvalidRequest>
  /** Parses the next bytes at once (the caller slices them); a failure is kept for `finish`. */
  readonly write: (bytes: Uint8Array) => void
  /** `end`, at once. */
  readonly finish: () => Result.Result<unknown, InvalidRequest>
}

const malformed = (error: unknown) =>
  new InvalidRequest({ message: `Malformed JSON in the request body: ${error instanceof Error ? error.message : String(error)}` })

/** Bodies parsed here: large, so the passes after the parse each begin with a yield (`afterYield`). */
const sliced = new WeakSet<object>()

/** Whether `value` is a body this parser built (a large one). */
export const wasSliced = (value: unknown): boolean => typeof value === "object" && value !== null && sliced.has(value)

/**
 * `effect`, preceded and followed by a yield to the event loop when it works on a large body: a
 * pass of a few milliseconds then never runs in the same turn as the one before or after it.
 */
export const aroundYields = <A, E>(body: unknown, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  wasSliced(body) ? Effect.yieldNow.pipe(Effect.andThen(effect), Effect.tap(() => Effect.yieldNow)) : effect

/** A parser for one JSON document, fed in chunks (see above). */
export const slicedJsonParser = (limits: SlicedJsonLimits = {}): SlicedJsonParser => {
  const maxDepth = limits.maxDepth ?? MAX_JSON_DEPTH
  const maxValues = limits.maxValues ?? MAX_JSON_VALUES
  const maxKeyChars = limits.maxKeyChars ?? MAX_JSON_KEY_CHARS
  const nestedTooDeep = limits.tooDeep ?? tooDeep
  const longKey = limits.keyTooLong ?? keyTooLong
  // Strings are gathered by our own builder (`util/pieced-string.ts`): a long one (a base64 image,
  // a huge text) in flat pieces, remembered beside it so that it is never flattened at once. The
  // tokenizer keeps its builder in a private field, set here after construction (the library's
  // own `stringBufferSize` builder is the one it replaces; `long-strings.test.ts` fails if it is not used).
  const tokenizer = new Tokenizer()
  ;(tokenizer as unknown as { bufferedString: StringBuilder }).bufferedString = new PiecedString()
  // Only the whole document is emitted: no callback per value.
  const tokens = new TokenParser({ paths: ["$"] })
  const open: Array<Open> = []
  let expectKey = false
  let values = 0
  let result: unknown = undefined
  let done = false
  let failure: InvalidRequest | undefined

  const refuse = (error: InvalidRequest): never => {
    throw new Refused(error)
  }
  const countValue = () => {
    if (++values > maxValues) {
      if (limits.tooMany !== undefined) refuse(limits.tooMany())
      const top = open[0]
      const field = top !== undefined && !top.array ? formatPath([top.key]) : undefined
      refuse(new InvalidRequest({
        message: `${field ?? "The request body"}: more than ${maxValues} JSON values in the request body; send fewer messages, items or keys (split the work across requests)`,
        ...(field === undefined ? {} : { param: field })
      }))
    }
  }
  // The callbacks are bound to names before they are set: V8 allocates a function literal
  // assigned straight to a property in the old generation, where it would keep this parse's
  // state alive through young-generation collections (see patches/effect+4.1.0.patch).
  const onValue = ({ value }: ParsedElementInfo) => {
    result = value
    done = true
  }
  const onToken = (info: ParsedTokenInfo) => {
    switch (info.token) {
      case TokenType.LEFT_BRACE:
      case TokenType.LEFT_BRACKET:
        countValue()
        if (open.length >= maxDepth) refuse(nestedTooDeep(open.map((o) => o.key)))
        open.push({ array: info.token === TokenType.LEFT_BRACKET, key: 0 })
        expectKey = info.token === TokenType.LEFT_BRACE
        break
      case TokenType.RIGHT_BRACE:
      case TokenType.RIGHT_BRACKET:
        open.pop()
        expectKey = false
        break
      case TokenType.COMMA: {
        const top = open[open.length - 1]
        if (top !== undefined && top.array) (top.key as number)++
        else expectKey = true
        break
      }
      case TokenType.STRING:
        if (expectKey) {
          // The path to the object the key is in (its own entry's key is the one before, or 0).
          if ((info.value as string).length > maxKeyChars) refuse(longKey(open.slice(0, -1).map((o) => o.key)))
          open[open.length - 1]!.key = info.value as string
          expectKey = false
        } else {
          countValue()
        }
        break
      case TokenType.COLON:
      case TokenType.SEPARATOR:
        break
      default:
        countValue()
    }
    tokens.write(info)
  }
  tokens.onValue = onValue
  tokenizer.onToken = onToken

  /** Writes `bytes` synchronously; a malformed document or a limit records the failure. */
  const write = (bytes: Uint8Array) => {
    try {
      tokenizer.write(bytes)
    } catch (error) {
      failure = error instanceof Refused ? error.error : malformed(error)
    }
  }

  // When the running slice began: kept across `feed` calls, so chunks smaller than a slice (a
  // socket's, a stored document's) still yield once their run reaches SLICE_MS — timed per call,
  // a run of 7 KB chunks never yielded at all. After a wait between chunks the next one yields
  // first: one pause too many, never one too few.
  let sliceStarted = performance.now()
  // A loop that returns at each pause, not a generator: a `function*` written here would be a new
  // generator closure per parser, which V8 keeps (with the parser) through young-generation
  // collections (see `test/runtime-http/generator-closures.test.ts`).
  const feedFrom = (bytes: Uint8Array, from: number): Effect.Effect<void, InvalidRequest> => {
    for (let at = from; at < bytes.length && failure === undefined; at += SLICE_BYTES) {
      if (performance.now() - sliceStarted >= SLICE_MS) {
        return Effect.flatMap(Effect.yieldNow, () => {
          sliceStarted = performance.now()
          write(bytes.subarray(at, at + SLICE_BYTES))
          return feedFrom(bytes, at + SLICE_BYTES)
        })
      }
      write(bytes.subarray(at, at + SLICE_BYTES))
    }
    return failure === undefined ? Effect.void : Effect.fail(failure)
  }
  const feed = (bytes: Uint8Array): Effect.Effect<void, InvalidRequest> => Effect.suspend(() => feedFrom(bytes, 0))

  const finish = (): Result.Result<unknown, InvalidRequest> => {
    if (failure !== undefined) return Result.fail(failure)
    try {
      tokenizer.end() // a token cut short fails here; a number at the very end is emitted here
    } catch (error) {
      return Result.fail(error instanceof Refused ? error.error : malformed(error))
    }
    // No token at all: the document was nothing but whitespace.
    if (values === 0) return Result.succeed(undefined)
    if (!done) return Result.fail(malformed("the document ended before its value was complete"))
    if (typeof result === "object" && result !== null) sliced.add(result)
    return Result.succeed(result)
  }
  const end = (): Effect.Effect<unknown, InvalidRequest> => Effect.suspend(() => Effect.fromResult(finish()))

  return { feed, end, write, finish }
}

/** A stored document of up to this many bytes is parsed at once (well under a millisecond). */
const STORED_AT_ONCE_BYTES = 64 * 1024

/**
 * A stored document's JSON text, in the chunks it is kept in: parsed at once when small, in slices
 * when large. No limit on its values (appends add up past a request's); a failure is a defect, as
 * the store holds only the JSON the gateway wrote (an upstream's answer included, whose keys no
 * request limit bounded).
 */
export const parseStoredInSlices = (chunks: ReadonlyArray<Uint8Array>): Effect.Effect<unknown> =>
  Effect.suspend(() => {
    const bytes = chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0)
    if (bytes <= STORED_AT_ONCE_BYTES) return Effect.sync(() => JSON.parse(Buffer.concat(chunks, bytes).toString()) as unknown)
    const parser = slicedJsonParser({ maxValues: Number.POSITIVE_INFINITY, maxKeyChars: Number.POSITIVE_INFINITY })
    return Effect.forEach(chunks, parser.feed, { discard: true }).pipe(Effect.andThen(parser.end()), Effect.orDie)
  })

/** A JSON text (a tool call's arguments) from which it is parsed in steps rather than by `JSON.parse` at once. */
const TEXT_AT_ONCE_UNITS = 64 * 1024

/**
 * A JSON text inside a request (a tool call's `arguments`, a string on the wire, at `path`) parsed
 * for a sliced decode (`dialects/staged-decode.ts`): a short one by `JSON.parse`, a long one
 * `SLICE_BYTES` of it per step, so the decode can pause between them (`JSON.parse` of 15 MiB of
 * arguments held the event loop ~65 ms on a slow VM, and the collection it set off as long again).
 * The value is `JSON.parse`'s; undefined when the text is not JSON. No limit on its values (as
 * `JSON.parse`, it is one value of a body already counted), but the body's limit on depth: a
 * value nested deeper than `MAX_JSON_DEPTH` is refused (thrown: the decode's 400 naming `path`),
 * as it would be anywhere else in the body — the gateway serializes it, and `JSON.stringify`
 * overflows the stack at a few thousand levels.
 */
export function* parseJsonTextInSteps(text: string, path: string): Sliced<{ readonly value: unknown } | undefined> {
  const refused = () => invalidField(path, NESTED_TOO_DEEP)
  if (text.length <= TEXT_AT_ONCE_UNITS) {
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      return undefined
    }
    if (findTooDeep(value) !== undefined) throw refused()
    return { value }
  }
  let refusal: InvalidRequest | undefined
  const parser = slicedJsonParser({
    maxValues: Number.POSITIVE_INFINITY,
    tooDeep: () => (refusal = refused()),
    keyTooLong: () => (refusal = invalidField(path, KEY_TOO_LONG))
  })
  for (const slice of stringSlices(text)) {
    // The tokenizer takes SLICE_BYTES a step, as `feed` gives it: a slice of many tiny values is
    // milliseconds of work.
    const bytes = Buffer.from(slice)
    for (let at = 0; at < bytes.length; at += SLICE_BYTES) {
      parser.write(bytes.subarray(at, at + SLICE_BYTES))
      if (refusal !== undefined) throw refusal
      yield
    }
  }
  const parsed = parser.finish()
  return Result.isSuccess(parsed) && parsed.success !== undefined ? { value: parsed.success } : undefined
}
