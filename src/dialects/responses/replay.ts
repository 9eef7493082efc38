/**
 * Replaying a stored response as its event stream (`GET /v1/responses/{id}?stream=true`).
 *
 * A stored response keeps the canonical events it was encoded from and the echo of its request;
 * feeding them to the same stream encoder again gives the same frames — the same events, deltas
 * and sequence numbers a live stream of it had, ending with `response.completed` (or
 * `response.incomplete`) whose `response` is the stored envelope. `starting_after` drops every
 * event up to and including that sequence number, as OpenAI's resumption does.
 */
import type { CanonicalEvent } from "../../model/events.ts"
import { makeRequest } from "../../model/request.ts"
import type { ResponsesEcho } from "./decode.ts"
import { makeResponsesStreamEncoder } from "./stream.ts"

/** What is stored beside a response so its stream can be replayed. */
export interface ReplayRecord {
  readonly createdAt: number
  readonly echo: ResponsesEcho
  readonly events: ReadonlyArray<CanonicalEvent>
}

/** The SSE frames of the stored response, after `startingAfter` when given. */
export const replayFrames = (id: string, model: string, record: ReplayRecord, startingAfter?: number): Array<string> => {
  const encoder = makeResponsesStreamEncoder({ id, model, createdAt: record.createdAt, echo: record.echo, request: makeRequest({ model, messages: [] }) })
  const frames = record.events.flatMap((event) => encoder.event(event).split(/(?<=\n\n)/).filter((frame) => frame !== ""))
  if (startingAfter === undefined) return frames
  return frames.filter((frame) => sequenceOf(frame) > startingAfter)
}

/** Every Responses frame's data begins `{"type":"…","sequence_number":N`. */
const sequenceOf = (frame: string): number => {
  const match = /\ndata: \{"type":"[^"]*","sequence_number":(\d+)/.exec(frame)
  return match === null ? -1 : Number(match[1])
}
