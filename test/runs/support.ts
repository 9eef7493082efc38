/** Plain-fetch helpers for the run endpoints (no official SDK covers them) and an SSE reader. */
import type { GatewayHandle } from "../support/gateway-process.ts"

export interface Answer {
  readonly status: number
  readonly body: any
  readonly headers: Headers
}

export const client = (baseUrl: string, key: string) => {
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })
    const text = await res.text()
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text), headers: res.headers }
  }
  return {
    key,
    call,
    create: (body: unknown, headers?: Record<string, string>) => call("POST", "/v1/agent-runs", body, headers),
    get: (id: string) => call("GET", `/v1/agent-runs/${id}`),
    list: (query = "") => call("GET", `/v1/agent-runs${query}`),
    append: (id: string, events: ReadonlyArray<unknown>) => call("POST", `/v1/agent-runs/${id}/events`, { events }),
    cancel: (id: string, reason?: string) => call("POST", `/v1/agent-runs/${id}/cancel`, reason === undefined ? undefined : { reason }),
    /** Polls GET until `done(run)` holds (a run changes state in the background). */
    waitFor: async (id: string, done: (run: any) => boolean, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const { body } = await call("GET", `/v1/agent-runs/${id}`)
        if (done(body.run)) return body.run
        if (Date.now() > deadline) throw new Error(`run ${id} did not reach the expected state: ${JSON.stringify(body.run)}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    },
    events: (id: string, options: SseOptions = {}) => readSse(`${baseUrl}/v1/agent-runs/${id}/events`, key, options)
  }
}

export type RunsClient = ReturnType<typeof client>

export const keyFor = async (gw: Pick<GatewayHandle, "admin">, name: string) =>
  ((await (await gw.admin("POST", "/admin/v1/keys", { name, plan: "pro" })).json()) as { key: string }).key

export interface SseFrame {
  readonly id?: string
  readonly event?: string
  readonly data?: string
  readonly comment?: string
}

export interface SseOptions {
  readonly lastEventId?: string
  /** Stop reading (and disconnect) once this holds for the frames so far. */
  readonly until?: (frames: ReadonlyArray<SseFrame>) => boolean
  readonly timeoutMs?: number
}

export interface SseResult {
  readonly status: number
  readonly headers: Headers
  readonly frames: ReadonlyArray<SseFrame>
  /** The `data` of every event frame (not `done`), parsed. */
  readonly events: ReadonlyArray<any>
  /** True when the server ended the stream (after `done`). */
  readonly ended: boolean
}

/** Reads an SSE response frame by frame, until the server ends it or `until` holds. */
export const readSse = async (url: string, key: string, options: SseOptions = {}): Promise<SseResult> => {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), options.timeoutMs ?? 30_000)
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${key}`, ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId }) },
    signal: controller.signal
  })
  const frames: Array<SseFrame> = []
  let ended = false
  if (res.status === 200 && res.body !== null) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
    // A frame's text arrives in many reads when it is large (a run's document of megabytes). Its
    // pieces wait in a list until a read brings a frame's end: searching a string grown read by read
    // would flatten all of it on every read (quadratic: seconds of copying for one large frame).
    let pieces: Array<string> = []
    let lastChar = ""
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) {
          ended = true
          break
        }
        if ((lastChar + value).indexOf("\n\n") < 0) {
          pieces.push(value)
          lastChar = value.slice(-1) || lastChar
          continue
        }
        pieces.push(value)
        let buffer = pieces.join("")
        let cut: number
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          const frame: Record<string, string> = {}
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) frame.comment = line.slice(1).trim()
            else {
              const at = line.indexOf(":")
              frame[line.slice(0, at)] = line.slice(at + 1).replace(/^ /, "")
            }
          }
          frames.push(frame)
          // several frames can arrive in one chunk: stop exactly at the one that satisfies `until`
          if (options.until?.(frames)) break
        }
        pieces = buffer === "" ? [] : [buffer]
        lastChar = buffer.slice(-1)
        if (options.until?.(frames)) break
      }
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
  } else clearTimeout(timer)
  const events = frames.filter((f) => f.event !== undefined && f.event !== "done").map((f) => JSON.parse(f.data!))
  return { status: res.status, headers: res.headers, frames, events, ended }
}

/** The invariants every run log keeps: seq 1..n without gaps or repeats, at most one outcome, last. */
export const checkLog = (events: ReadonlyArray<any>) => {
  const seqs = events.map((e) => e.seq)
  const expected = Array.from({ length: events.length }, (_, i) => i + 1)
  const outcomes = events.filter((e) => e.type === "outcome")
  return {
    gapFree: JSON.stringify(seqs) === JSON.stringify(expected),
    outcomes: outcomes.length,
    outcomeLast: outcomes.length === 0 || events[events.length - 1].type === "outcome"
  }
}
