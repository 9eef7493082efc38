/**
 * Upstream bodies serialized in slices (`src/backends/upstream/upstream-body.ts`): exactly the text
 * `JSON.stringify` writes, small values as one string, large ones as UTF-8 chunks made while the
 * event loop keeps running.
 */
import { Effect } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { bodyText, upstreamBody } from "../../src/backends/upstream/upstream-body.ts"
import { LARGE_WIRE_UNITS } from "../../src/util/sliced-stringify.ts"
import { loopTurnsDuring } from "../support/loop-turns.ts"

const serialize = (value: unknown) => Effect.runPromise(upstreamBody(value))

describe("upstreamBody", () => {
  it("sends a small value as JSON.stringify's string", async () => {
    const value = { model: "m", messages: [{ role: "user", content: "hi" }], skipped: undefined }
    expect(await serialize(value)).toBe(JSON.stringify(value))
  })

  it("writes a large value in chunks, byte for byte what JSON.stringify writes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.string({ unit: "binary", maxLength: 40 }), async (inner, seam) => {
        // A long string whose slice boundaries fall inside surrogate pairs, escapes and lone halves.
        const long = ("😀é\"\\\n\u0001" + seam + "\ud800x\udc00").repeat(Math.ceil(LARGE_WIRE_UNITS / 8))
        const value = { model: "m", inner, messages: [{ role: "user", content: long }, undefined, { f: () => 1, n: Number.NaN }] }
        const body = await serialize(value)
        expect(typeof body).toBe("object")
        if (typeof body === "string") return
        expect(body.chunks.length).toBeGreaterThan(1)
        expect(body.bytes).toBe(body.chunks.reduce((sum, chunk) => sum + chunk.length, 0))
        expect(bodyText(body)).toBe(JSON.stringify(value))
      }),
      { numRuns: 10 }
    )
  })

  it("sends many small values in chunks too, and lets the event loop run meanwhile", async () => {
    const value = { messages: Array.from({ length: 60_000 }, (_, i) => ({ role: "user", content: `message ${i}` })) }
    const { value: body, turns } = await loopTurnsDuring(() => serialize(value))
    expect(bodyText(body)).toBe(JSON.stringify(value))
    expect(turns).toBeGreaterThan(1)
  })
})
