/**
 * The errors every surface can answer with. Domain code fails with these; `http/render-error.ts`
 * turns each into the status, type name and body shape of the surface the client called.
 */
import { Schema } from "effect"
import { substringOf } from "./util/long-strings.ts"

/** The most of a client's value an error message quotes. */
export const SHOWN_VALUE_CHARS = 256

/**
 * A client's value as an error message quotes it: whole when short, else its start and its length.
 * A model name of 30 MiB was quoted whole: a 30 MB error body, serialized in one turn of the event
 * loop, and a 30 MB request log line. (A long parsed value is read from its pieces, not flattened.)
 */
export const shown = (value: string, max: number = SHOWN_VALUE_CHARS): string =>
  value.length <= max ? value : `${substringOf(value, 0, max)}… (${value.length} characters)`

/** 400: malformed JSON or a field that failed validation; `param` names the field. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  param: Schema.optional(Schema.String)
}) {}

/** 401: missing or invalid credentials. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  message: Schema.String
}) {}

/** 403: a valid key that may not do this. */
export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  message: Schema.String
}) {}

/**
 * 404. `kind: "route"` for an unknown path, `"resource"` for an unknown or foreign id,
 * `"chain"` for an unknown `previous_response_id` (typed `invalid_request_error` by the spec).
 */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  message: Schema.String,
  kind: Schema.Literals(["route", "resource", "chain"]),
  param: Schema.optional(Schema.String)
}) {}

/** 405: the path exists, the method does not; `allow` lists what does. */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {
  method: Schema.String,
  allow: Schema.Array(Schema.String)
}) {}

/** 409: a write lost a race or targets something finished. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  message: Schema.String,
  /** The current version, sent back as `ETag` so the client can retry against it. */
  etag: Schema.optional(Schema.String)
}) {}

/** 413: the request body is larger than the configured limit, or holds more than the store can keep. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  limitBytes: Schema.Int,
  /** Replaces the default "body larger than the limit" message. */
  message: Schema.optional(Schema.String),
  param: Schema.optional(Schema.String)
}) {}

/** 408: the request body stopped arriving (no bytes for the idle timeout). */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", {
  message: Schema.String
}) {}

/** 422: a well-formed request that asks for something that cannot be guaranteed. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", {
  message: Schema.String,
  param: Schema.optional(Schema.String)
}) {}

/** 429 in the spec's three kinds. `retryAfterSeconds` is absent for `credits_exhausted`. */
export class LimitExceeded extends Schema.TaggedError<LimitExceeded>()("LimitExceeded", {
  kind: Schema.Literals(["rate_limit_error", "allowance_exhausted", "credits_exhausted"]),
  message: Schema.String,
  retryAfterSeconds: Schema.optional(Schema.Int),
  /** Extra response headers, e.g. the `x-ratelimit-*` state that refused the request. */
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String))
}) {}

/** 5xx `api_error`: the model did not answer (transient), or the service is briefly unavailable. */
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {
  status: Schema.Int,
  message: Schema.String,
  retryAfterSeconds: Schema.optional(Schema.Int)
}) {}

/** 501: the backing store of this surface is not enabled on this deployment. */
export class NotImplemented extends Schema.TaggedError<NotImplemented>()("NotImplemented", {
  message: Schema.String
}) {}

export type ApiError =
  | InvalidRequest
  | Unauthenticated
  | PermissionDenied
  | NotFound
  | MethodNotAllowed
  | Conflict
  | PayloadTooLarge
  | RequestTimeout
  | Unprocessable
  | LimitExceeded
  | ServiceUnavailable
  | NotImplemented
