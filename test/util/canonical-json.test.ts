/**
 * The canonical JSON a request hash is made of (`canonicalJsonInSlices`): `JSON.stringify`'s text
 * with every object's keys sorted, made in slices, so a large body never holds the event loop.
 */
import { Effect } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { canonicalJsonInSlices, LARGE_WIRE_UNITS } from "../../src/util/sliced-stringify.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

/** The reference: the whole text at once, keys sorted at every level. */
const canonical = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(",")}]`
    : typeof value === "object" && value !== null
    ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(",")}}`
    : JSON.stringify(value)

const inSlices = async (value: unknown) => {
  const pieces: Array<string> = []
  await Effect.runPromise(canonicalJsonInSlices(value, (piece) => void pieces.push(piece)))
  return pieces
}

describe("canonicalJsonInSlices", () => {
  it("gives JSON.stringify's text with every object's keys sorted, a long string in pieces", async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.string({ unit: "grapheme", maxLength: 20 }), async (inner, seam) => {
        // Slice boundaries fall inside surrogate pairs and escapes.
        const long = ("😀é\"\\\n\u0001" + seam).repeat(Math.ceil(LARGE_WIRE_UNITS / 8))
        const value = { z: inner, a: [{ y: long, b: 1 }, inner], m: { "é": null, "A": true } }
        const pieces = await inSlices(value)
        expect(pieces.length).toBeGreaterThan(10)
        expect(pieces.join("")).toBe(canonical(value))
      }),
      { numRuns: 10 }
    )
  })

  it("lets the event loop run while it goes through a large body", async () => {
    const value = { input: Array.from({ length: 60_000 }, (_, i) => ({ text: `message ${i}`, role: "user" })) }
    const { value: pieces, turns } = await loopTurnsDuring(() => inSlices(value))
    expect(pieces.join("")).toBe(canonical(value))
    expect(turns).toBeGreaterThan(1)
  })
})
