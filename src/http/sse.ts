/**
 * Server-Sent Events framing shared by the dialects. Both SDKs split events on blank lines, treat
 * `:` lines as comments, and choke on empty `data:` — so every frame has JSON data, and keepalives
 * are comments.
 */

/** `event: <name>` + `data: <json>` (Messages and Responses dialects). */
export const namedFrame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** `data: <json>` only (Chat Completions and legacy completions: never an `event:` line). */
export const dataFrame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`

/** A comment line, ignored by every SSE parser. */
export const commentFrame = (text: string) => `: ${text.replace(/[\r\n]+/g, " ")}\n\n`

export const SSE_HEADERS = {
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
} as const

/** Keepalives and switch-over markers as comments: what the OpenAI-shaped dialects send. */
export const commentSignals = {
  keepalive: () => commentFrame("keepalive"),
  switchover: (note: string) => commentFrame(note)
}
