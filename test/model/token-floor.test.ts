/**
 * The streamed text's token floor (`token-floor.ts`): never above the exact o200k_base count, however
 * the text is cut into pieces; the longest token it assumes is the vocabulary's; close enough on
 * real text (English, code, a script written with spaces) to stop a runaway stream near where it
 * overran.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import o200kRanks from "gpt-tokenizer/bpeRanks/o200k_base"
import { readFileSync } from "node:fs"
import { countTextTokensExact } from "../../src/model/bpe.ts"
import { isCjk, MAX_TOKEN_CJK, MAX_TOKEN_UNITS, MAX_TOKEN_WIDE_BYTES, TokenFloor } from "../../src/model/token-floor.ts"
import { tokenizerText } from "../support/token-text.ts"

const floorOf = (pieces: ReadonlyArray<string>) => {
  const floor = new TokenFloor()
  for (const piece of pieces) floor.add(piece)
  return floor.tokens
}

/** The text cut at the given fractions of its length (a stream's deltas end anywhere). */
const cutAt = (text: string, fractions: ReadonlyArray<number>) => {
  const at = [...new Set(fractions.map((f) => Math.floor(f * text.length)))].sort((a, b) => a - b)
  return [0, ...at].map((start, i) => text.slice(start, at[i] ?? text.length))
}
const fractions = Arbitrary.array(Arbitrary.schema(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 }))), { maxLength: 12 })

describe("TokenFloor", () => {
  it.prop("is never above the exact count, however the text is cut", [tokenizerText, fractions], ([text, cuts]) => {
    const pieces = cutAt(text, cuts)
    assert.strictEqual(pieces.join(""), text)
    const exact = countTextTokensExact(text)
    const floor = floorOf(pieces)
    if (floor > exact) throw new Error(`floor ${floor} > exact ${exact} for ${JSON.stringify(pieces)}`)
  }, { timeout: 120_000, arbitrary: { runs: 3_000 } })

  it("is never above the exact count where whitespace joins what it seems to split", () => {
    // One pre-token each: a run of whitespace (NBSP, ideographic space, line separator among it),
    // punctuation with line ends and a slash after it, a contraction.
    for (const text of ["a \u00a0 \u00a0 b", "x \u3000 \u2028 \u0085 y", ".\n/", ";\r\n//", "don't", "it's 1٣2"]) {
      assert.isAtMost(floorOf([text]), countTextTokensExact(text), JSON.stringify(text))
    }
  })

  it("is the same whole or in pieces", () => {
    const text = "Don't stop: it\u2019s 12 o'clock, naïve café-goers; snake_case and camelCase.\n  x1y"
    const whole = floorOf([text])
    for (let size = 1; size < 9; size++) {
      const pieces = Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size))
      assert.strictEqual(floorOf(pieces), whole, `pieces of ${size}`)
    }
  })

  it("assumes no token longer than the vocabulary's longest", () => {
    let longest = 0
    // Not the library's `decode`: it decodes with one streaming TextDecoder shared by the thread, and
    // a token that ends inside a character leaves its bytes there, to corrupt the next decode by any
    // other test in this worker (tokens.test.ts saw U+FFFD).
    const utf8 = new TextDecoder()
    for (const token of o200kRanks) {
      // The ordinary tokens (the special ones are not in the ranks). A token that ends inside a
      // character decodes to U+FFFD (3 bytes) per broken byte: never shorter than its bytes.
      longest = Math.max(longest, Buffer.byteLength(typeof token === "string" ? token : utf8.decode(Uint8Array.from(token))))
    }
    assert.strictEqual(longest, MAX_TOKEN_UNITS)
    // Spaces: no run, no digit, so the length bound speaks.
    const spaces = " ".repeat(MAX_TOKEN_UNITS * 10)
    assert.strictEqual(floorOf([spaces]), 10)
    assert.isAtLeast(countTextTokensExact(spaces), 10)
  })

  it("assumes no token holds more non-ASCII bytes or CJK characters than the vocabulary's most", () => {
    const utf8 = new TextEncoder()
    let wideBytes = 0
    let cjkBytes = 0
    for (const token of o200kRanks) {
      // A token is a string, or its bytes where it ends inside a character.
      const bytes = typeof token === "string" ? utf8.encode(token) : Uint8Array.from(token)
      wideBytes = Math.max(wideBytes, bytes.filter((b) => b >= 0x80).length)
      // Bytes of CJK characters, a character cut at either edge counted as one of them.
      let cjk = 0
      let at = 0
      while (at < bytes.length && (bytes[at]! & 0xc0) === 0x80) cjk += (at++, 1)
      while (at < bytes.length) {
        const lead = bytes[at]!
        const size = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2
        if (at + size > bytes.length) {
          cjk += bytes.length - at
          break
        }
        let code = size === 1 ? lead : lead & (0xff >> (size + 1))
        for (let k = 1; k < size; k++) code = (code << 6) | (bytes[at + k]! & 0x3f)
        if (isCjk(code)) cjk += size
        at += size
      }
      cjkBytes = Math.max(cjkBytes, cjk)
    }
    assert.strictEqual(o200kRanks.length, 199_998)
    assert.strictEqual(wideBytes, MAX_TOKEN_WIDE_BYTES)
    assert.strictEqual(cjkBytes, MAX_TOKEN_CJK * 3)
    // Alone, the token with the most of them: its floor is its exact count.
    assert.strictEqual(floorOf(["ありがとうございました"]), 1)
    assert.strictEqual(countTextTokensExact("ありがとうございました"), 1)
  })

  it("is about a tenth of the exact count on Chinese, Japanese and Thai, written without spaces", () => {
    const texts = {
      chinese: "北京是中华人民共和国的首都，是全国的政治中心、文化中心，是世界著名古都和现代化国际城市。",
      japanese: "東京は日本の首都であり、政治、経済、文化の中心地です。多くの人々が毎日電車で通勤しています。",
      thai: "กรุงเทพมหานครเป็นเมืองหลวงและนครที่มีประชากรมากที่สุดของประเทศไทย"
    }
    for (const [name, text] of Object.entries(texts)) {
      const long = text.repeat(20)
      const exact = countTextTokensExact(long)
      const floor = floorOf([long])
      assert.isAtMost(floor, exact, name)
      assert.isAbove(floor, exact * 0.08, name)
    }
  })

  it("is more than half the exact count on English and on Russian, and more than 0.4 of it on code", () => {
    const russian = "Москва — столица России, город федерального значения, административный центр Центрального федерального округа. "
    for (const [file, share] of [["README.md", 0.5], ["src/runtime/dispatcher.ts", 0.4], [russian, 0.5]] as const) {
      const text = file === russian ? russian.repeat(20) : readFileSync(file, "utf8")
      const exact = countTextTokensExact(text)
      const floor = floorOf([text])
      assert.isAtMost(floor, exact, file.slice(0, 20))
      assert.isAbove(floor, exact * share, file.slice(0, 20))
    }
  })
})
