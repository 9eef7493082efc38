/**
 * The one place errors become HTTP responses, per surface shape:
 * - `messages` (`/v1/messages*`): `{type:"error", error:{type, message}, request_id}`;
 * - `openai` (chat, responses, completions, embeddings, models): `{error:{message, type, param, code}}`;
 * - `flat` (runs, states, artifacts, admin): `{error:{type, message}}`.
 */
import { HttpServerResponse } from "effect/http"
import { type ApiError, shown } from "../errors.ts"
import type { ErrorShape } from "./route.ts"

interface Rendered {
  readonly status: number
  readonly dialectType: string
  readonly flatType: string
  readonly message: string
  readonly param?: string | undefined
  readonly headers: Record<string, string>
}

const describe = (error: ApiError): Rendered => {
  switch (error._tag) {
    case "InvalidRequest":
      return { status: 400, dialectType: "invalid_request_error", flatType: "invalid_request", message: error.message, param: error.param, headers: {} }
    case "Unauthenticated":
      return { status: 401, dialectType: "authentication_error", flatType: "unauthorized", message: error.message, headers: {} }
    case "PermissionDenied":
      return { status: 403, dialectType: "permission_error", flatType: "permission_error", message: error.message, headers: {} }
    case "NotFound":
      return {
        status: 404,
        dialectType: error.kind === "chain" ? "invalid_request_error" : "not_found",
        flatType: "not_found",
        message: error.message,
        param: error.param,
        headers: {}
      }
    case "MethodNotAllowed":
      return {
        status: 405,
        dialectType: "method_not_allowed",
        flatType: "method_not_allowed",
        message: `Method ${error.method} is not allowed here; allowed: ${error.allow.join(", ")}`,
        headers: { allow: error.allow.join(", ") }
      }
    case "Conflict":
      return { status: 409, dialectType: "invalid_request_error", flatType: "conflict", message: error.message, headers: error.etag === undefined ? {} : { etag: error.etag } }
    case "PayloadTooLarge":
      return {
        status: 413,
        dialectType: "invalid_request_error",
        flatType: "request_too_large",
        message: error.message ?? `Request body is larger than the limit of ${error.limitBytes} bytes`,
        param: error.param,
        headers: {}
      }
    case "RequestTimeout":
      // The rest of the body is not read: the connection cannot carry another request.
      return { status: 408, dialectType: "invalid_request_error", flatType: "request_timeout", message: error.message, headers: { connection: "close" } }
    case "Unprocessable":
      return { status: 422, dialectType: "invalid_request_error", flatType: "invalid_request", message: error.message, param: error.param, headers: {} }
    case "LimitExceeded":
      return {
        status: 429,
        dialectType: error.kind,
        flatType: error.kind,
        message: error.message,
        headers: {
          ...error.headers,
          ...(error.retryAfterSeconds === undefined ? {} : { "retry-after": String(error.retryAfterSeconds) }),
          // The spec forbids retrying a spent allowance or empty credits; the SDKs obey this header.
          ...(error.kind === "rate_limit_error" ? {} : { "x-should-retry": "false" })
        }
      }
    case "ServiceUnavailable":
      return {
        status: error.status,
        dialectType: "api_error",
        flatType: "api_error",
        message: error.message,
        headers: error.retryAfterSeconds === undefined ? {} : { "retry-after": String(error.retryAfterSeconds) }
      }
    case "NotImplemented":
      return { status: 501, dialectType: "not_implemented", flatType: "not_implemented", message: error.message, headers: {} }
  }
}

/**
 * The most of a message an error body or a log line carries: values are quoted short where the
 * message is made (`shown`); this bounds a message that quotes one whole all the same.
 */
const MAX_MESSAGE_CHARS = 8 * 1024

/** `describe`, its message bounded. */
const described = (error: ApiError) => {
  const r = describe(error)
  return r.message.length <= MAX_MESSAGE_CHARS ? r : { ...r, message: shown(r.message, MAX_MESSAGE_CHARS) }
}

/** The error body alone, for streams that must end with an error event in the dialect's shape. */
export const errorBody = (error: ApiError, shape: ErrorShape, requestId: string): { status: number; body: unknown; headers: Record<string, string> } => {
  const r = described(error)
  const body = shape === "messages"
    ? { type: "error", error: { type: r.dialectType, message: r.message }, request_id: requestId }
    : shape === "openai"
    ? { error: { message: r.message, type: r.dialectType, param: r.param ?? null, code: null } }
    : { error: { type: r.flatType, message: r.message } }
  return { status: r.status, body, headers: r.headers }
}

export const renderError = (error: ApiError, shape: ErrorShape, requestId: string) => {
  const { status, body, headers } = errorBody(error, shape, requestId)
  return HttpServerResponse.jsonUnsafe(body, { status, headers })
}

/** What a client is told of a defect (a bug): nothing of it but the id to quote. */
export const defectMessage = (requestId: string | undefined) =>
  requestId === undefined ? "Internal error" : `Internal error; quote request id ${requestId} when reporting it`

/** A defect (a bug) still answers in the surface's shape, never with a bare 500 page. */
export const renderDefect = (shape: ErrorShape, requestId: string) => {
  const message = defectMessage(requestId)
  const body = shape === "messages"
    ? { type: "error", error: { type: "api_error", message }, request_id: requestId }
    : shape === "openai"
    ? { error: { message, type: "api_error", param: null, code: null } }
    : { error: { type: "api_error", message } }
  return HttpServerResponse.jsonUnsafe(body, { status: 500 })
}

/** The error's type (dialect name) and message, as the request log records them. */
export const errorSummary = (error: ApiError): { readonly type: string; readonly message: string } => {
  const r = described(error)
  return { type: r.dialectType, message: r.message }
}
