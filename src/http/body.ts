/**
 * Request bodies: read within the size limit (413 beyond it), parsed as JSON (400 when malformed),
 * capped in nesting depth (400) and, when large, in JSON values (400; `util/json-limits.ts`), then decoded with a Schema whose first failure names the field
 * (400 `param`). Bodies that are stored are also checked to be storable (`util/json-limits.ts`):
 * 400 naming the field for text or numbers PostgreSQL refuses, 413 beyond what a row can hold.
 */
import { IncomingMessage } from "node:http"
import { Effect, type Fiber, Schema, Stream } from "effect"
import { HttpIncomingMessage, type HttpServerError } from "effect/http"
import { InvalidRequest, type LimitExceeded, PayloadTooLarge, RequestTimeout, type ServiceUnavailable } from "../errors.ts"
import { LARGE_BODY_BYTES, requireShallow, requireStorable } from "../util/json-limits.ts"
import { slicedJsonParser } from "../util/sliced-json.ts"
import { invalidRequestFromIssue } from "../util/schema-issue.ts"
import { findBodyStalled } from "./body-idle.ts"
import type { RequestContext } from "./route.ts"

/** The body limit in force; the app sets it from `GATEWAY_MAX_BODY_BYTES`. */
export const bodyLimit = (limitBytes: number) => Effect.provideService(HttpIncomingMessage.MaxBodySize, BigInt(limitBytes) as never)

/** What a failure to read the body answers: 413 beyond the limit, 408 when it stalled, else 400. */
const bodyReadError = (error: HttpServerError.HttpServerError, limit: number) => {
  if (error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge") return new PayloadTooLarge({ limitBytes: limit })
  const stalled = findBodyStalled("cause" in error.reason ? error.reason.cause : undefined)
  return stalled !== undefined
    ? new RequestTimeout({ message: `The request body stalled: ${stalled.message}` })
    : new InvalidRequest({ message: "The request body could not be read" })
}

/** The body limit in force for this fiber (see `bodyLimit`). */
const limitOf = (fiber: Fiber.Fiber<unknown, unknown>) => Number(fiber.getRef(HttpIncomingMessage.MaxBodySize) ?? Number.MAX_SAFE_INTEGER)

export interface ReadJsonOptions {
  /** An empty body is `undefined` instead of a 400. */
  readonly optional?: boolean
  /** The body is stored as sent: check it is storable (`requireStorable`). */
  readonly storable?: boolean
}

const emptyBody = (options: ReadJsonOptions | undefined) =>
  options?.optional
    ? Effect.succeed(undefined)
    : Effect.fail(new InvalidRequest({ message: "The request body is empty; a JSON object is required" }))

/** As the platform decodes a body (a leading BOM dropped). */
const utf8 = new TextDecoder()

/**
 * A small body (declared length within the limit) read straight from node:http's request: its
 * chunks gathered until `end`, one fiber resumption. The platform's reader (a stream with its
 * listeners, a cached Effect, a pull per chunk) took ~0.2 ms more per request at concurrency 1.
 * The request's handler runs while node:http is still parsing the socket's bytes, so even a body
 * that came with the headers is not there yet: it always waits for `end`.
 */
const readNodeText = (source: IncomingMessage, release: () => void): Effect.Effect<string, InvalidRequest> =>
  Effect.callback<string, InvalidRequest>((resume) => {
    if (source.readableEnded || source.readableFlowing !== null || source.readableDidRead) {
      release()
      return resume(Effect.fail(new InvalidRequest({ message: "The request body could not be read" })))
    }
    const chunks: Array<Buffer> = []
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
    }
    const onEnd = () => {
      stop()
      resume(Effect.sync(() => utf8.decode(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))))
    }
    const onBroken = () => {
      stop()
      resume(Effect.fail(new InvalidRequest({ message: "The request body could not be read" })))
    }
    let stopped = false
    // Called once the body ended, broke, or its reader was interrupted.
    const stop = () => {
      if (stopped) return
      stopped = true
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onBroken)
      source.off("close", onBroken)
      release()
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onBroken)
    source.on("close", onBroken)
    return Effect.sync(stop)
  })

const nothingToRelease = () => {}

/**
 * A small body as text: node:http's own request read directly (its declared length counted
 * against the `BodyBudget` until it has been read), else the platform's reader.
 */
const readText = (ctx: RequestContext) =>
  Effect.withFiber((fiber): Effect.Effect<string, InvalidRequest | PayloadTooLarge | RequestTimeout | LimitExceeded | ServiceUnavailable> => {
    const limit = limitOf(fiber)
    const declared = Number(ctx.headers["content-length"] ?? "0")
    if (declared > limit) return Effect.fail(new PayloadTooLarge({ limitBytes: limit }))
    const source = (ctx.request as { readonly source?: unknown }).source
    // Behind the fetch-style handler (the embedding API) the body is a web stream.
    if (!(source instanceof IncomingMessage)) return ctx.request.text.pipe(Effect.mapError((error) => bodyReadError(error, limit)))
    const budget = ctx.bodyBudget
    if (budget === undefined || !(declared > 0)) return readNodeText(source, nothingToRelease)
    const key = ctx.key?.id ?? ""
    const over = budget.take(key, declared)
    return over === undefined ? readNodeText(source, () => budget.give(key, declared)) : Effect.fail(over)
  })

const parseSmallJson = (text: string, options: ReadJsonOptions | undefined): Effect.Effect<unknown, InvalidRequest | PayloadTooLarge | RequestTimeout> => {
  if (text.trim() === "") return emptyBody(options)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return Effect.fail(new InvalidRequest({ message: `Malformed JSON in the request body: ${(error as Error).message}` }))
  }
  const checked = options?.storable ? Effect.andThen(requireShallow(value), requireStorable(value)) : requireShallow(value)
  return Effect.as(checked, value)
}

/** Small bodies: read whole, `JSON.parse`d at once (well under a millisecond at LARGE_BODY_BYTES). */
const readSmallJson = (ctx: RequestContext, options?: ReadJsonOptions) =>
  Effect.flatMap(readText(ctx), (text) => parseSmallJson(text, options))

/**
 * Large bodies (or chunked ones): parsed chunk by chunk as they arrive, in slices that yield
 * to the event loop (`util/sliced-json.ts`), which also checks depth and the value count — no
 * 32 MiB string is decoded and no 32 MiB `JSON.parse` holds every other client. A refused body
 * is still read to its end (without parsing), so the client gets the 400 rather than a reset.
 * The bytes being parsed count against the gateway's `BodyBudget` until the body has been read
 * (as a small body's declared length does while it is read).
 */
const readLargeJson = (ctx: RequestContext, options?: ReadJsonOptions) =>
  Effect.withFiber((fiber) => {
    const limit = limitOf(fiber)
    const budget = ctx.bodyBudget
    const budgetKey = ctx.key?.id ?? ""
    const parser = slicedJsonParser()
    let bytes = 0
    let held = 0
    let refused: InvalidRequest | undefined
    const read = Stream.runForEach(ctx.request.stream, (chunk): Effect.Effect<void, PayloadTooLarge | LimitExceeded | ServiceUnavailable> => {
      bytes += chunk.length
      if (bytes > limit) return Effect.fail(new PayloadTooLarge({ limitBytes: limit }))
      if (refused !== undefined) return Effect.void
      if (budget !== undefined) {
        const over = budget.take(budgetKey, chunk.length)
        if (over !== undefined) return Effect.fail(over)
        held += chunk.length
      }
      return Effect.catch(parser.feed(chunk), (error) => {
        refused = error
        return Effect.void
      })
    })
    return read.pipe(
      Effect.ensuring(Effect.sync(() => budget?.give(budgetKey, held))),
      Effect.mapError((error) => error._tag === "HttpServerError" ? bodyReadError(error, limit) : error),
      Effect.andThen(() => refused !== undefined ? Effect.fail(refused) : parser.end()),
      Effect.flatMap((value): Effect.Effect<unknown, InvalidRequest | PayloadTooLarge> => {
        if (value === undefined) return emptyBody(options)
        return options?.storable ? Effect.as(requireStorable(value), value) : Effect.succeed(value)
      })
    )
  })

/**
 * The parsed JSON body; `undefined` when the body is empty and `optional` is set. A body declared
 * longer than LARGE_BODY_BYTES, or sent chunked (no declared length), is parsed in slices; any
 * other at once. (A request with neither header has no body on HTTP/1.1; behind the fetch-style
 * handler it may, and is read whole, as before.)
 */
export const readJson = (
  ctx: RequestContext,
  options?: ReadJsonOptions
): Effect.Effect<unknown, InvalidRequest | PayloadTooLarge | RequestTimeout | LimitExceeded | ServiceUnavailable> => {
  const declared = ctx.headers["content-length"]
  const large = declared !== undefined ? Number(declared) > LARGE_BODY_BYTES : ctx.headers["transfer-encoding"] !== undefined
  return large ? readLargeJson(ctx, options) : readSmallJson(ctx, options)
}

/** Decodes a value with a Schema; the error names the first bad field (`util/schema-issue.ts`). */
export const decodeWith = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(schema)
  return (value: unknown): Effect.Effect<S["Type"], InvalidRequest> =>
    decode(value).pipe(Effect.mapError((error) => invalidRequestFromIssue(error.issue)))
}

/** Reads and decodes a JSON body in one step. */
export const readBody = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S, options?: ReadJsonOptions) => {
  const decode = decodeWith(schema)
  return (ctx: RequestContext) => Effect.flatMap(readJson(ctx, options), (value) => decode(value ?? {}))
}
