/**
 * The sliced serializer (`src/util/sliced-stringify.ts`) on one long string: a tool description or
 * a prompt of megabytes is a single value, and the loop must turn inside it, not only between
 * values.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { jsonChunksInSlices, jsonTextInSlices, jsonTextsInSlices } from "../../src/util/sliced-stringify.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

/** 12 Mi characters of two-byte text with escapes: ~200 slices of the serializer's. */
const longString = () => "é 😀 \"quoted\" \\ line\n".repeat(12 * 1024 * 1024 / 24)

describe("the sliced serializer on one long string", () => {
  it("lets the event loop turn while it serializes the string, and gives JSON.stringify's bytes", async () => {
    // Counted by pieces alone, the clock was read once per 256 pieces, and a long string's 64 Ki
    // character slices are pieces: the whole string went by in one turn (1–2 turns here).
    const value = { tools: [{ description: longString() }] }
    const { value: body, turns } = await loopTurnsDuring(() => Effect.runPromise(jsonChunksInSlices(value)))
    expect(Buffer.concat(body.chunks).equals(Buffer.from(JSON.stringify(value)))).toBe(true)
    expect(body.bytes).toBe(Buffer.byteLength(JSON.stringify(value)))
    expect(turns).toBeGreaterThan(5)
  })

  it("gives the same text for a long string among small values", async () => {
    const value = { a: 1, list: Array.from({ length: 3_000 }, (_, i) => ({ i, s: `x${i}` })), long: longString().slice(0, 3_000_001), end: [null, true] }
    const { value: text, turns } = await loopTurnsDuring(() => Effect.runPromise(jsonTextInSlices(value)))
    expect(text).toBe(JSON.stringify(value))
    expect(turns).toBeGreaterThan(1)
  })

  it("gives each of many values its own text, yielding between them (a stored response's items)", async () => {
    const small = Array.from({ length: 40_000 }, (_, i) => ({ id: `msg_${i}`, text: `é ${i}` }))
    const { value: texts, turns } = await loopTurnsDuring(() => Effect.runPromise(jsonTextsInSlices(small)))
    expect(texts).toEqual(small.map((value) => JSON.stringify(value)))
    expect(turns).toBeGreaterThan(1)
    const mixed = [{ a: 1 }, { long: longString().slice(0, 1_000_001) }, null, "x"]
    expect(await Effect.runPromise(jsonTextsInSlices(mixed))).toEqual(mixed.map((value) => JSON.stringify(value)))
  })
})
