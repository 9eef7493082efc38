/**
 * The transport to an OpenAI-compatible upstream: a POST over an undici `Pool` per origin (created
 * on first use, reused with keep-alive; never `fetch`, which measured 4× slower as a proxy), and
 * the mapping of what can go wrong to `BackendError`:
 * - a non-2xx answer → `backendErrorFromStatus(status, upstream message, retry-after seconds)`
 *   (except 401/403/404, see `httpError`);
 * - a connection that fails or breaks (refused, reset, timed out) → 502, retryable.
 * Messages never name the upstream's host; the caller scrubs the upstream model name.
 */
import { Effect, Stream } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { Pool } from "undici"
import type { BackendError, UpstreamTarget } from "../backend.ts"
import { backendErrorFromStatus } from "../backend.ts"

/**
 * Reasoning upstreams can be silent for minutes before their first chunk; the runtime's own
 * deadlines cut a call short long before these transport limits would.
 */
const TIMEOUT_MS = 10 * 60_000

export interface UpstreamPools {
  get(origin: string): Pool
  close(): Promise<void>
}

export const makeUpstreamPools = (): UpstreamPools => {
  const pools = new Map<string, Pool>()
  return {
    get(origin) {
      let pool = pools.get(origin)
      if (pool === undefined) {
        pool = new Pool(origin, { headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS, keepAliveTimeout: 30_000 })
        pools.set(origin, pool)
      }
      return pool
    },
    async close() {
      const all = [...pools.values()]
      pools.clear()
      await Promise.all(all.map((pool) => pool.close()))
    }
  }
}

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** `retry-after-ms` wins over `retry-after` (seconds or an HTTP date), as in the OpenAI SDK. */
export const retryAfterSeconds = (headers: IncomingHttpHeaders, now = Date.now()): number | undefined => {
  const ms = Number(header(headers, "retry-after-ms"))
  if (header(headers, "retry-after-ms") !== undefined && Number.isFinite(ms) && ms >= 0) return ms / 1000
  const raw = header(headers, "retry-after")
  if (raw === undefined || raw.trim() === "") return undefined
  const seconds = Number(raw)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(raw)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - now) / 1000)
}

/** The message of an error body (`{error:{message}}`, `{message}`, or plain text, shortened). */
export const upstreamErrorMessage = (status: number, text: string): string => {
  try {
    const body = JSON.parse(text)
    const message = body?.error?.message ?? body?.message ?? (typeof body?.error === "string" ? body.error : undefined)
    if (typeof message === "string" && message !== "") return message
  } catch {
    // not JSON: fall through to the text itself
  }
  const trimmed = text.trim().slice(0, 500)
  return trimmed === "" ? `the upstream answered with status ${status}` : trimmed
}

const connectionError = (error: unknown): BackendError => {
  const code = (error as { code?: unknown })?.code
  return backendErrorFromStatus(502, `the upstream connection failed${typeof code === "string" ? ` (${code})` : ""}`)
}

/**
 * A non-2xx answer. 401, 403 and 404 say the gateway's own setup is wrong (credentials, model
 * name), not the client's request: they become a retryable 502 so another placement can serve,
 * and the client is not told its request was bad.
 */
export const httpError = (status: number, text: string, headers: IncomingHttpHeaders): BackendError => {
  const message = upstreamErrorMessage(status, text)
  if (status === 401 || status === 403 || status === 404) {
    return backendErrorFromStatus(502, `the upstream refused the gateway's call (${status}): ${message}`)
  }
  return backendErrorFromStatus(status, message, retryAfterSeconds(headers))
}

export interface UpstreamCall {
  readonly origin: string
  readonly path: string
  readonly target: UpstreamTarget
  readonly body: string
}

const requestHeaders = (call: UpstreamCall, accept: string): Record<string, string> => ({
  "content-type": "application/json",
  accept,
  ...(call.target.apiKey === undefined || call.target.apiKey === "" ? {} : { authorization: `Bearer ${call.target.apiKey}` })
})

/**
 * POSTs the body and reads the whole answer as JSON (non-streamed calls). Interrupting the call
 * (client gone, deadline) aborts the upstream request.
 */
export const postForJson = (pools: UpstreamPools, call: UpstreamCall): Effect.Effect<unknown, BackendError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await pools.get(call.origin).request({ path: call.path, method: "POST", headers: requestHeaders(call, "application/json"), body: call.body, signal })
      const text = await response.body.text()
      return { status: response.statusCode, headers: response.headers, text }
    },
    catch: connectionError
  }).pipe(Effect.flatMap(({ status, headers, text }) => {
    if (status < 200 || status >= 300) return Effect.fail(httpError(status, text, headers))
    try {
      return Effect.succeed(JSON.parse(text) as unknown)
    } catch {
      return Effect.fail(backendErrorFromStatus(502, "the upstream answered with a body that is not JSON"))
    }
  }))

/**
 * POSTs the body and streams the response bytes. The response is released (its socket destroyed
 * if unread) when the stream ends or is interrupted, e.g. when the client goes away.
 */
export const postForStream = (pools: UpstreamPools, call: UpstreamCall): Stream.Stream<Uint8Array, BackendError> =>
  Stream.unwrap(Effect.gen(function*() {
    const headers = requestHeaders(call, "text/event-stream")
    const response = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: (signal) => pools.get(call.origin).request({ path: call.path, method: "POST", headers, body: call.body, signal }),
        catch: connectionError
      }),
      (response) => Effect.sync(() => response.body.destroy())
    )
    if (response.statusCode < 200 || response.statusCode >= 300) {
      const text = yield* Effect.tryPromise(() => response.body.text()).pipe(Effect.orElseSucceed(() => ""))
      return yield* httpError(response.statusCode, text, response.headers)
    }
    return Stream.fromAsyncIterable(response.body as AsyncIterable<Uint8Array>, connectionError)
  }))
