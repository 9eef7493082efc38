/** Helpers for the OpenAI-shaped dialect tests: decode synchronously, run encoders, read SSE text. */
import { Effect } from "effect"
import type { ChatDialect, EncodeContext } from "../../../src/dialects/dialect.ts"
import type { InvalidRequest, Unprocessable } from "../../../src/errors.ts"
import type { CanonicalEvent } from "../../../src/model/events.ts"
import type { CanonicalRequest } from "../../../src/model/request.ts"
import { makeRequest } from "../../../src/model/request.ts"
import { userMessage } from "../../../src/model/content.ts"

export const decodeWith = <Echo>(dialect: ChatDialect<Echo>) => (body: unknown) => Effect.runSync(dialect.decode(body))

export const decodeErrorWith = <Echo>(dialect: ChatDialect<Echo>) => (body: unknown): InvalidRequest | Unprocessable =>
  Effect.runSync(Effect.flip(dialect.decode(body)))

export const contextFor = <Echo>(echo: Echo, request: CanonicalRequest = makeRequest({ model: "svc-x", messages: [userMessage("hi")] })): EncodeContext<Echo> => ({
  id: "chatcmpl-test",
  model: "svc-nova-mini",
  createdAt: 1_700_000_000,
  request,
  echo
})

/** The whole SSE text an encoder writes for a list of events. */
export const encodeEvents = <Echo>(dialect: ChatDialect<Echo>, context: EncodeContext<Echo>, events: ReadonlyArray<CanonicalEvent>) => {
  const encoder = dialect.streamEncoder(context)
  return events.map((event) => encoder.event(event)).join("")
}

export interface SseFrame {
  readonly lines: ReadonlyArray<string>
  /** The data payload, parsed as JSON unless it is `[DONE]`; undefined for comment-only frames. */
  readonly data: any
}

/** Splits SSE text into frames (blank-line separated) and parses each frame's data. */
export const sseFrames = (text: string): Array<SseFrame> =>
  text.split("\n\n").filter((frame) => frame !== "").map((frame) => {
    const lines = frame.split("\n")
    const data = lines.filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n")
    return { lines, data: data === "" ? undefined : data === "[DONE]" ? "[DONE]" : JSON.parse(data) }
  })
