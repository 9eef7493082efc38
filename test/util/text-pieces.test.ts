/**
 * `TextPieces` (src/util/text-pieces.ts) against the plain concatenation it stands for: for any
 * sequence of additions and clears, its text is the concatenation since the last clear, and its
 * parts concatenate to that text in few parts: each run more than twice as long as the next, so
 * at most log2 of the text's length plus three.
 */
import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { TextPieces } from "../../src/util/text-pieces.ts"

describe("TextPieces", () => {
  it("reads back what was added since the last clear, in few parts", () => {
    fc.assert(fc.property(
      fc.array(fc.oneof({ weight: 30, arbitrary: fc.string({ maxLength: 6 }).map((text) => ({ add: text })) }, { weight: 1, arbitrary: fc.constant({ clear: true as const }) }), { maxLength: 400 }),
      (steps) => {
        const pieces = new TextPieces()
        let model = ""
        let added = 0
        for (const step of steps) {
          if ("clear" in step) {
            pieces.clear()
            model = ""
            added = 0
          } else {
            pieces.add(step.add)
            model += step.add
            added++
          }
          expect(pieces.text()).toBe(model)
          const parts = pieces.parts()
          expect(parts.join("")).toBe(model)
          expect(parts.length).toBeLessThanOrEqual(Math.log2(model.length + 1) + 3)
          if (added >= 8) expect(parts.length).toBeLessThan(added)
        }
      }
    ), { numRuns: 200 })
  })
})
