/**
 * Request bodies: read within the size limit (413 beyond it), parsed as JSON (400 when malformed),
 * capped in nesting depth (400), then decoded with a Schema whose first failure names the field
 * (400 `param`). Bodies that are stored are also checked to be storable (`util/json-limits.ts`):
 * 400 naming the field for text or numbers PostgreSQL refuses, 413 beyond what a row can hold.
 */
import { Effect, Schema } from "effect"
import { HttpIncomingMessage } from "effect/http"
import { InvalidRequest, PayloadTooLarge, RequestTimeout } from "../errors.ts"
import { requireShallow, requireStorable } from "../util/json-limits.ts"
import { invalidRequestFromIssue } from "../util/schema-issue.ts"
import { findBodyStalled } from "./body-idle.ts"
import type { RequestContext } from "./route.ts"

/** The body limit in force; the app sets it from `GATEWAY_MAX_BODY_BYTES`. */
export const bodyLimit = (limitBytes: number) => Effect.provideService(HttpIncomingMessage.MaxBodySize, BigInt(limitBytes) as never)

const readText = (ctx: RequestContext) =>
  Effect.withFiber((fiber) => {
    const limit = Number(fiber.getRef(HttpIncomingMessage.MaxBodySize) ?? Number.MAX_SAFE_INTEGER)
    const declared = Number(ctx.request.headers["content-length"] ?? "0")
    if (declared > limit) return Effect.fail(new PayloadTooLarge({ limitBytes: limit }))
    return ctx.request.text.pipe(
      Effect.mapError((error) => {
        if (error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge") return new PayloadTooLarge({ limitBytes: limit })
        const stalled = findBodyStalled("cause" in error.reason ? error.reason.cause : undefined)
        return stalled !== undefined
          ? new RequestTimeout({ message: `The request body stalled: ${stalled.message}` })
          : new InvalidRequest({ message: "The request body could not be read" })
      })
    )
  })

export interface ReadJsonOptions {
  /** An empty body is `undefined` instead of a 400. */
  readonly optional?: boolean
  /** The body is stored as sent: check it is storable (`requireStorable`). */
  readonly storable?: boolean
}

/** The parsed JSON body; `undefined` when the body is empty and `optional` is set. */
export const readJson = (ctx: RequestContext, options?: ReadJsonOptions) =>
  Effect.flatMap(readText(ctx), (text): Effect.Effect<unknown, InvalidRequest | PayloadTooLarge | RequestTimeout> => {
    if (text.trim() === "") {
      return options?.optional
        ? Effect.succeed(undefined)
        : Effect.fail(new InvalidRequest({ message: "The request body is empty; a JSON object is required" }))
    }
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (error) {
      return Effect.fail(new InvalidRequest({ message: `Malformed JSON in the request body: ${(error as Error).message}` }))
    }
    const checked = options?.storable ? Effect.andThen(requireShallow(value), requireStorable(value)) : requireShallow(value)
    return Effect.as(checked, value)
  })

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
