import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { shortWordTokens } from "../../scripts/generate-o200k-words.ts"
import { countTextTokensExact } from "../../src/model/bpe.ts"
import { O200K_SHORT_WORDS } from "../../src/model/o200k-words.ts"
import { textTokenBound, textTokenBoundSteps } from "../../src/model/token-bound.ts"
import { forgetPieces, isKept, LONG_STRING_CHARS, rememberPieces } from "../../src/util/long-strings.ts"
import { tokenizerText as text } from "../support/token-text.ts"

describe("textTokenBound", () => {
  it.prop("is never below the exact count", [text], ([sample]) => {
    const exact = countTextTokensExact(sample)
    const bound = textTokenBound(sample)
    if (bound < exact) throw new Error(`bound ${bound} < exact ${exact} for ${JSON.stringify(sample)}`)
  }, { timeout: 120_000, arbitrary: { runs: 3_000 } })

  it.prop("is never above the UTF-8 bytes", [text], ([sample]) => {
    assert.isAtMost(textTokenBound(sample), new TextEncoder().encode(sample).length)
  }, { arbitrary: { runs: 1_000 } })

  it.prop("is the same computed in steps", [text], ([sample]) => {
    const steps = textTokenBoundSteps(sample, 7)
    while (steps.next());
    assert.strictEqual(steps.tokens, textTokenBound(sample))
  }, { arbitrary: { runs: 1_000 } })

  it("holds on real text and is tighter than bytes there", () => {
    for (const file of ["README.md", "src/runtime/model-caller.ts", "package.json"]) {
      const sample = readFileSync(file, "utf8")
      const exact = countTextTokensExact(sample)
      const bound = textTokenBound(sample)
      assert.isAtLeast(bound, exact, file)
      assert.isBelow(bound, Buffer.byteLength(sample) * 0.8, file)
    }
  })

  it("is the same in steps through runs longer than a step, and no step reads far past its end", () => {
    for (const sample of ["x" + "a".repeat(100_000) + "B", "1".repeat(50_000) + " x", "٣" + "12".repeat(5_000), "ab " + "z".repeat(40) + "'s"]) {
      const steps = textTokenBoundSteps(sample, 1_000)
      let calls = 0
      while (steps.next()) calls++
      assert.strictEqual(steps.tokens, textTokenBound(sample))
      assert.isAtLeast(steps.tokens, countTextTokensExact(sample))
      assert.isAtLeast(calls, Math.floor(sample.length / 5_000))
    }
  })

  it("is the same in steps over a long text kept in pieces, read a window at a time", () => {
    // Runs of every kind, long and short, that steps and pieces cut anywhere.
    const segment = ["the cat's 12 345 ", "1".repeat(5_000), " ", "a".repeat(3_500), "B ", "😀 ٣ 漢字 ", "z".repeat(40), "'s\n", "42".repeat(1_700), " x"].join("")
    const flat = segment.repeat(Math.ceil((LONG_STRING_CHARS + 1) / segment.length))
    for (const pieceChars of [262_139, 100_003]) {
      const pieces: Array<string> = []
      for (let at = 0; at < flat.length; at += pieceChars) pieces.push(flat.slice(at, at + pieceChars))
      let rope = pieces[0]!
      for (const piece of pieces.slice(1)) rope += piece
      rememberPieces(rope, pieces)
      assert.isTrue(isKept(rope))
      const steps = textTokenBoundSteps(rope, 16_384)
      while (steps.next());
      assert.strictEqual(steps.tokens, textTokenBound(flat))
      forgetPieces()
    }
  })

  it("is fast on an unbroken 1 MiB run", () => {
    for (const run of ["a".repeat(1 << 20), "A".repeat(1 << 20), "😀".repeat(1 << 18)]) {
      const started = performance.now()
      assert.isAtLeast(textTokenBound(run), countTextTokensExact(run.slice(0, 4096)))
      assert.isBelow(performance.now() - started, 1_000)
    }
  })
})

describe("the vocabulary facts the bound relies on", () => {
  it("o200k-words.ts lists exactly the o200k tokens of 2–4 characters over [ a-z] (regenerate with scripts/generate-o200k-words.ts)", () => {
    assert.deepStrictEqual([...O200K_SHORT_WORDS].sort(), shortWordTokens())
  })

  it("every string of 1 to 3 ASCII digits is one token", () => {
    for (let n = 0; n < 1000; n++) {
      for (const digits of new Set([String(n), String(n).padStart(2, "0"), String(n).padStart(3, "0")])) {
        if (digits.length <= 3) assert.strictEqual(countTextTokensExact(digits), 1, digits)
      }
    }
  })
})
