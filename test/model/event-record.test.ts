/**
 * `EventRecord` (src/stored-responses/event-record.ts), the compact record a stored Responses
 * stream keeps while it is open, against what it stands for: the events themselves and the answer
 * `collect` makes of them. For any stream that keeps the event contract (blocks in order, a
 * thinking block's thinking and signature deltas interleaved, empty deltas, deltas long enough to
 * take two characters of length, unpaired surrogates at their edges), the record gives back
 * equal events in the same order and the same answer — whether it keeps the answer's text itself
 * or cuts the deltas from the call's answer (`AnswerSoFar`, fed each chunk before the record is,
 * as `Delivered` is), and with stray deltas that break the contract (kept as they are).
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { type CanonicalEvent, collect, makeResponseBuilder } from "../../src/model/events.ts"
import { makeUsage } from "../../src/model/usage.ts"
import { EventRecord } from "../../src/stored-responses/event-record.ts"
import { runAtOnce } from "../../src/util/slices.ts"

/** A delta's text: mostly short, sometimes empty, sometimes past 255 and 32,767 characters (a two-byte length text; two characters of length). */
const deltaText = fc.oneof(
  { weight: 20, arbitrary: fc.string({ maxLength: 8, unit: "binary" }) },
  { weight: 2, arbitrary: fc.constant("") },
  { weight: 2, arbitrary: fc.constantFrom("\ud83d", "\ude00", "é", "😀") },
  { weight: 1, arbitrary: fc.integer({ min: 256, max: 70_000 }).map((n) => "x".repeat(n)) }
)

type Block =
  | { readonly kind: "text"; readonly deltas: ReadonlyArray<string> }
  | { readonly kind: "thinking"; readonly deltas: ReadonlyArray<{ readonly signature: boolean; readonly text: string }> }
  | { readonly kind: "tool_use"; readonly deltas: ReadonlyArray<string> }
  | { readonly kind: "redacted_thinking" }

const block: fc.Arbitrary<Block> = fc.oneof(
  fc.array(deltaText, { maxLength: 40 }).map((deltas) => ({ kind: "text" as const, deltas })),
  fc.array(fc.record({ signature: fc.boolean(), text: deltaText }), { maxLength: 20 }).map((deltas) => ({ kind: "thinking" as const, deltas })),
  fc.array(deltaText, { maxLength: 20 }).map((deltas) => ({ kind: "tool_use" as const, deltas })),
  fc.constant({ kind: "redacted_thinking" as const })
)

const streamOf = (blocks: ReadonlyArray<Block>): Array<CanonicalEvent> => {
  const events: Array<CanonicalEvent> = [{ type: "message_start", model: "m", id: "msg_1", usage: makeUsage({ inputTokens: 3 }) }]
  blocks.forEach((b, index) => {
    switch (b.kind) {
      case "text":
        events.push({ type: "block_start", index, block: { type: "text" } }, ...b.deltas.map((text) => ({ type: "text_delta" as const, index, text })))
        break
      case "thinking":
        events.push({ type: "block_start", index, block: { type: "thinking" } }, ...b.deltas.map((d) =>
          d.signature ? { type: "signature_delta" as const, index, signature: d.text } : { type: "thinking_delta" as const, index, thinking: d.text }))
        break
      case "tool_use":
        events.push({ type: "block_start", index, block: { type: "tool_use", id: `call_${index}`, name: "f" } }, ...b.deltas.map((partialJson) => ({ type: "tool_input_delta" as const, index, partialJson })))
        break
      case "redacted_thinking":
        events.push({ type: "block_start", index, block: { type: "redacted_thinking", data: "opaque" } })
        break
    }
    events.push({ type: "block_stop", index })
  })
  events.push({ type: "message_stop", stopReason: "end_turn", usage: makeUsage({ inputTokens: 3, outputTokens: 9 }) })
  return events
}

/**
 * Events that break the contract: deltas to a block not started (yet), or of a kind their block
 * does not take; a second start of a block.
 */
const stray: fc.Arbitrary<CanonicalEvent> = fc.oneof(
  fc.record({ type: fc.constant("block_start" as const), index: fc.integer({ min: 0, max: 7 }), block: fc.constantFrom({ type: "text" as const }, { type: "tool_use" as const, id: "call_x", name: "g" }) }),
  fc.record({ type: fc.constant("text_delta" as const), index: fc.integer({ min: 0, max: 7 }), text: deltaText }),
  fc.record({ type: fc.constant("tool_input_delta" as const), index: fc.integer({ min: 0, max: 7 }), partialJson: deltaText }),
  fc.record({ type: fc.constant("signature_delta" as const), index: fc.integer({ min: 0, max: 7 }), signature: deltaText })
)

/** `events` with `strays` put at the given places (before `message_stop`, which stays last). */
const withStrays = (events: ReadonlyArray<CanonicalEvent>, strays: ReadonlyArray<{ readonly at: number; readonly event: CanonicalEvent }>) => {
  const out = [...events]
  for (const { at, event } of strays) out.splice(1 + (at % (out.length - 1)), 0, event)
  return out
}

/**
 * Records `events` as `storeOnStop` does: with `shared`, the call's answer is fed each chunk (of
 * the given sizes) whole before the record sees its events one by one, as the dispatcher feeds
 * `Delivered` before passing the chunk on.
 */
const recordOf = (events: ReadonlyArray<CanonicalEvent>, shared: boolean, chunkSizes: ReadonlyArray<number>) => {
  if (!shared) {
    const record = new EventRecord()
    for (const event of events) record.add(event)
    return record
  }
  const answer = makeResponseBuilder()
  const record = new EventRecord(answer)
  let at = 0
  for (let c = 0; at < events.length; c++) {
    const chunk = events.slice(at, at + (chunkSizes[c % Math.max(1, chunkSizes.length)] ?? 1))
    at += chunk.length
    for (const event of chunk) answer.add(event)
    for (const event of chunk) record.add(event)
  }
  return record
}

describe("EventRecord", () => {
  it("gives back the events it was given and the answer they make", () => {
    const strays = fc.array(fc.record({ at: fc.nat(), event: stray }), { maxLength: 4 })
    const chunkSizes = fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 5 })
    fc.assert(fc.property(fc.array(block, { maxLength: 6 }), strays, fc.boolean(), chunkSizes, (blocks, extra, shared, sizes) => {
      const events = withStrays(streamOf(blocks), extra)
      const rebuilt = runAtOnce(recordOf(events, shared, sizes).rebuild())
      expect(rebuilt.events).toEqual(events)
      expect(rebuilt.response).toEqual(collect(events))
    }), { numRuns: 400 })
  })

  it("pauses on a long stream and keeps every delta's boundary", () => {
    const deltas = Array.from({ length: 5_000 }, (_, i) => `w${i} `)
    const events = streamOf([{ kind: "text", deltas }])
    const steps = recordOf(events, true, [7]).rebuild()
    let pauses = 0
    for (let step = steps.next(); ; step = steps.next()) {
      if (step.done === true) {
        expect(step.value.events).toEqual(events)
        break
      }
      pauses++
    }
    expect(pauses).toBeGreaterThan(30)
  })
})
