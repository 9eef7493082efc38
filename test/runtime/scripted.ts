/**
 * Scripted placements for dispatcher tests: each call to a placement plays the next entry of its
 * script (or the last one again), and every call is recorded.
 */
import { Stream } from "effect"
import { backendErrorFromStatus, type BackendError } from "../../src/backends/backend.ts"
import { makeUsage } from "../../src/model/usage.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import type { DispatchCandidate } from "../../src/runtime/dispatcher.ts"

export type Play =
  | { readonly kind: "answer"; readonly text: string }
  | { readonly kind: "fail"; readonly error: BackendError }
  /** Never sends anything. */
  | { readonly kind: "hang" }
  /** Sends `events`, then fails with `error`. */
  | { readonly kind: "break"; readonly events: ReadonlyArray<CanonicalEvent>; readonly error: BackendError }

export const serverError = backendErrorFromStatus(500, "upstream broke")
export const rateLimited = (seconds: number) => backendErrorFromStatus(429, "slow down", seconds)
export const badRequest = backendErrorFromStatus(400, "bad request")

export const answer = (model: string, text: string): Array<CanonicalEvent> => [
  { type: "message_start", model },
  { type: "block_start", index: 0, block: { type: "text" } },
  { type: "text_delta", index: 0, text },
  { type: "block_stop", index: 0 },
  { type: "message_stop", stopReason: "end_turn", usage: makeUsage({ outputTokens: 3 }) }
]

export const textSoFar = (model: string, text: string): Array<CanonicalEvent> => answer(model, text).slice(0, 3)

export const inToolCall = (model: string): Array<CanonicalEvent> => [
  { type: "message_start", model },
  { type: "block_start", index: 0, block: { type: "tool_use", id: "call_1", name: "lookup" } },
  { type: "tool_input_delta", index: 0, partialJson: "{\"q\":" }
]

const play = (model: string, entry: Play): Stream.Stream<CanonicalEvent, BackendError> => {
  switch (entry.kind) {
    case "answer":
      return Stream.fromIterable(answer(model, entry.text))
    case "fail":
      return Stream.fail(entry.error)
    case "hang":
      return Stream.never
    case "break":
      return Stream.concat(Stream.fromIterable(entry.events), Stream.fail(entry.error))
  }
}

export interface Scripted {
  readonly candidates: Array<DispatchCandidate>
  /** Placement ids in call order; resumed calls are recorded as `id+resume(text)`. */
  readonly calls: Array<string>
}

export const scripted = (
  scripts: ReadonlyArray<{ readonly placementId: string; readonly modelId: string; readonly plays: ReadonlyArray<Play>; readonly resume?: ReadonlyArray<Play> }>
): Scripted => {
  const calls: Array<string> = []
  const next = (plays: ReadonlyArray<Play>, count: number) => plays[Math.min(count, plays.length - 1)]
  const candidates = scripts.map(({ placementId, modelId, plays, resume }): DispatchCandidate => {
    let runs = 0
    let resumes = 0
    return {
      placementId,
      modelId,
      run: (id) =>
        Stream.suspend(() => {
          calls.push(id)
          return play(modelId, next(plays, runs++))
        }),
      ...(resume === undefined ? {} : {
        resume: (text: string) =>
          Stream.suspend(() => {
            calls.push(`${placementId}+resume(${text})`)
            return play(modelId, next(resume, resumes++))
          })
      })
    }
  })
  return { candidates, calls }
}
