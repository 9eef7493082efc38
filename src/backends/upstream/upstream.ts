/**
 * What both HTTP backends (anthropic, openai-compatible) share about talking to an upstream:
 * keep-alive undici pools per origin, and how an upstream's failures become `BackendError`s.
 *
 * - Pools: one undici `Pool` per origin, created on first use and reused (never `fetch`, which
 *   measured 4× slower as a proxy); long transport timeouts, since the runtime's own deadlines cut
 *   a call short long before these would.
 * - A non-2xx answer keeps its status and the message of its JSON error body
 *   (`{error:{message}}`, `{message}`, `{error:"…"}`), else the text itself, shortened. Except
 *   401, 403 and 404: they say the gateway's own setup (credentials, model name) is wrong, which
 *   the client cannot fix, so they become a retryable 502 (another placement may serve).
 * - `retry-after-ms` wins over `retry-after` (seconds or an HTTP date), as in both official SDKs.
 * - A request that never got an answer (refused, reset, DNS, timeout) is a retryable 502 whose
 *   message never names the upstream's host.
 * - The upstream's model name never reaches a client: it is replaced by the catalog id.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Pool } from "undici"
// Undici's Pool class alone, not the package's index: the index loads fetch, WebSocket, the cache,
// the mock agent and the rest (132 modules, ~140 ms of a start here) where Pool needs 32 (~50 ms).
// Undici (pinned) has no `exports` map, so its files are reachable by design; the path's type is
// declared in undici-pool.d.ts. Every gateway start loads it, so a move fails every test at once.
import UndiciPool from "undici/lib/dispatcher/pool.js"
import { BackendError, backendErrorFromStatus, type PlacementRuntime } from "../backend.ts"
import { UpstreamAnswerTooLarge } from "./upstream-call.ts"
import { shown } from "../../errors.ts"
import { MAX_JSON_VALUES } from "../../util/json-limits.ts"

/**
 * How long an upstream may take to answer, and to send the next bytes of its body; a streamed
 * body's bytes that complete no event count as none (`decode-stream.ts`).
 */
export const UPSTREAM_TIMEOUT_MS = 10 * 60_000

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
        pool = new UndiciPool(origin, { headersTimeout: UPSTREAM_TIMEOUT_MS, bodyTimeout: UPSTREAM_TIMEOUT_MS, keepAliveTimeout: 30_000 })
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

type Headers = IncomingHttpHeaders | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const header = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/**
 * The most content blocks (text, thinking, tool calls, server tool blocks) one answer may have.
 * Real answers have a few (a few hundred with many citations); a million tiny blocks from a broken
 * or hostile upstream held every other client for 5–18 s on a slow VM, and made a 30 MiB answer
 * 200 MB of Responses output. Past it the answer is a 502.
 */
export const MAX_ANSWER_BLOCKS = 4_096

/**
 * The longest tool-call input taken from an upstream, in characters of its JSON text (for an input
 * that comes as an object, `isLarge`'s count: its strings' characters and 4 per value). It is far
 * above what a model's output limit lets it write (128k tokens is ~0.5 MB); every pass over it
 * (parse, serialize, count) runs at once, and 2 MiB of tiny values is ~100 ms of work on a slow VM —
 * 30 MiB held every other client for 1.6–3 s. Past it the answer is a 502.
 */
export const MAX_TOOL_INPUT_CHARS = 2 * 1024 * 1024

/**
 * The most JSON values one streamed event may hold (a request body's limit): a model's events hold
 * a token or a block's start, tens of values; a 15 MiB line of tiny values, parsed at once, held
 * every other client for a second on a slow VM. Checked (`holdsMoreValues`) only for an event of
 * 1 Mi characters or more.
 */
export const MAX_EVENT_VALUES = MAX_JSON_VALUES
export const eventTooLarge = () => backendErrorFromStatus(502, `The upstream sent a stream event of more than ${MAX_EVENT_VALUES} JSON values`)

export const tooManyBlocks = () => backendErrorFromStatus(502, `The upstream's answer has more than ${MAX_ANSWER_BLOCKS} content blocks`)
export const toolInputTooLong = () => backendErrorFromStatus(502, `The upstream sent a tool call whose input is longer than ${MAX_TOOL_INPUT_CHARS} characters`)

/**
 * The longest wait an upstream's `retry-after` is taken for (a day): what it asks beyond is read as
 * a day. The wait is passed on to the client as a whole number of seconds, and `1e300` (or a date
 * centuries ahead) is none a client can use — it made the answer's own error fail to build (a 500).
 */
export const MAX_RETRY_AFTER_SECONDS = 86_400

/** Seconds the upstream asks us to wait: `retry-after-ms` first, then `retry-after`; at most a day. */
export const retryAfterSeconds = (headers: Headers, nowMs: number = Date.now()): number | undefined => {
  const seconds = statedWait(headers, nowMs)
  return seconds === undefined ? undefined : Math.min(seconds, MAX_RETRY_AFTER_SECONDS)
}

const statedWait = (headers: Headers, nowMs: number): number | undefined => {
  const ms = header(headers, "retry-after-ms")?.trim()
  if (ms !== undefined && ms !== "" && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms) / 1000
  const raw = header(headers, "retry-after")?.trim()
  if (raw === undefined || raw === "") return undefined
  const seconds = Number(raw)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(raw)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - nowMs) / 1000)
}

/**
 * The most of an upstream's error body read as JSON for its message: a real one is a few hundred
 * bytes; a hostile one of megabytes is neither parsed in one turn of the event loop nor quoted whole.
 */
const ERROR_BODY_JSON_CHARS = 64 * 1024
/** The most of an upstream's error message (or text) the gateway's own error quotes. */
const ERROR_MESSAGE_CHARS = 1_000

/** The message of an error body, or the text itself shortened. */
const errorBodyMessage = (status: number, text: string): string => {
  if (text.length <= ERROR_BODY_JSON_CHARS) {
    try {
      const body = JSON.parse(text)
      const message = body?.error?.message ?? body?.message ?? (typeof body?.error === "string" ? body.error : undefined)
      if (typeof message === "string" && message !== "") return shown(message, ERROR_MESSAGE_CHARS)
    } catch {
      // not JSON: fall through to the text itself
    }
  }
  const trimmed = text.slice(0, 500).trim()
  return trimmed === "" ? `The upstream answered HTTP ${status}` : trimmed
}

/** Replaces the upstream's model name with the catalog id wherever it appears. */
const hideUpstreamModel = (message: string, placement: Pick<PlacementRuntime, "modelId" | "upstreamModel">): string =>
  placement.upstreamModel === placement.modelId || placement.upstreamModel === ""
    ? message
    : message.replaceAll(placement.upstreamModel, placement.modelId)

/** The same for an error raised anywhere in a call (mid-stream errors too). */
export const scrubError = (placement: Pick<PlacementRuntime, "modelId" | "upstreamModel">) => (error: BackendError): BackendError => {
  const message = hideUpstreamModel(error.message, placement)
  if (message === error.message) return error
  return new BackendError({
    status: error.status,
    type: error.type,
    message,
    retryable: error.retryable,
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds })
  })
}

/** A non-2xx answer as the error the runtime reasons about (see the file header). */
export const errorFromResponse = (
  status: number,
  headers: Headers,
  text: string,
  placement: Pick<PlacementRuntime, "modelId" | "upstreamModel">
): BackendError => {
  const message = hideUpstreamModel(errorBodyMessage(status, text), placement)
  if (status === 401 || status === 403 || status === 404) {
    return backendErrorFromStatus(502, `The upstream refused the gateway's placement settings (HTTP ${status}): ${message}`)
  }
  return backendErrorFromStatus(status, message, retryAfterSeconds(headers))
}

/** A request that never got an answer, or whose answer was too large to read. */
export const connectionError = (cause: unknown): BackendError => {
  if (cause instanceof UpstreamAnswerTooLarge) return backendErrorFromStatus(502, cause.message)
  const code = (cause as { code?: unknown } | null)?.code
  return backendErrorFromStatus(502, `Could not reach the upstream${typeof code === "string" ? ` (${code})` : ""}`)
}
