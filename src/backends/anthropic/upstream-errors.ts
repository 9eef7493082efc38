/**
 * How an Anthropic upstream's failures become `BackendError`s (pure).
 *
 * - A non-2xx answer keeps its status and the message of its `{type: "error", error: {message}}`
 *   body, with `retry-after` (seconds or an HTTP date) as `retryAfterSeconds`. Except 401, 403 and
 *   404: those mean the gateway's upstream key or model name is wrong, which the client cannot fix,
 *   so they become a retryable 502 (another placement may work).
 * - A connection failure is a retryable 502.
 * - Messages never name the upstream model: it is replaced by the catalog id.
 */
import type { PlacementRuntime } from "../backend.ts"
import { BackendError, backendErrorFromStatus } from "../backend.ts"

type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const header = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/** `retry-after` as seconds: a number of seconds, or an HTTP date from now; `retry-after-ms` otherwise. */
export const retryAfterSeconds = (headers: Headers, nowMs: number = Date.now()): number | undefined => {
  const raw = header(headers, "retry-after")?.trim()
  if (raw !== undefined && raw !== "") {
    const seconds = Number(raw)
    if (Number.isFinite(seconds) && seconds >= 0) return seconds
    const date = Date.parse(raw)
    if (!Number.isNaN(date)) return Math.max(0, (date - nowMs) / 1000)
  }
  const ms = Number(header(headers, "retry-after-ms"))
  return Number.isFinite(ms) && ms >= 0 ? ms / 1000 : undefined
}

/** Replaces the upstream's model name with the catalog id wherever it appears. */
export const hideUpstreamModel = (message: string, placement: Pick<PlacementRuntime, "modelId" | "upstreamModel">): string =>
  placement.upstreamModel === placement.modelId || placement.upstreamModel === ""
    ? message
    : message.replaceAll(placement.upstreamModel, placement.modelId)

/** The message of an error body: Messages-shaped JSON, else the text itself (shortened). */
const bodyMessage = (status: number, body: string): string => {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown }; message?: unknown }
    const message = parsed?.error?.message ?? parsed?.message
    if (typeof message === "string" && message !== "") return message
  } catch {
    // not JSON: fall through to the raw text
  }
  const text = body.trim().slice(0, 300)
  return text === "" ? `The upstream answered HTTP ${status}` : text
}

export const errorFromResponse = (
  status: number,
  headers: Headers,
  body: string,
  placement: Pick<PlacementRuntime, "modelId" | "upstreamModel">
): BackendError => {
  const message = hideUpstreamModel(bodyMessage(status, body), placement)
  if (status === 401 || status === 403 || status === 404) {
    return backendErrorFromStatus(502, `The upstream refused the gateway's placement settings (HTTP ${status}): ${message}`)
  }
  return backendErrorFromStatus(status, message, retryAfterSeconds(headers))
}

/** A request that never got an answer: refused connection, reset, DNS failure, timeout. */
export const connectionError = (cause: unknown): BackendError => {
  const code = (cause as { code?: unknown } | null)?.code
  const detail = typeof code === "string" ? code : cause instanceof Error ? cause.message : String(cause)
  return new BackendError({ status: 502, type: "api_error", message: `Could not reach the upstream (${detail})`, retryable: true })
}
