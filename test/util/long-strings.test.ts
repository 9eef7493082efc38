/**
 * Long parsed strings and their pieces (`src/util/pieced-string.ts`, `src/util/long-strings.ts`):
 * the sliced parser builds a long string from flat pieces and keeps them beside it, so
 * `stringSlices` reads the pieces and never flattens the string. Checked here: the string is
 * `JSON.parse`'s, the pieces join to it, no piece or slice cuts a surrogate pair, the slices of a
 * kept string are the slices of the string, and the sliced serializer gives `JSON.stringify`'s text
 * for such a string (escaped and not).
 */
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { forgetPieces, isBlank, LONG_STRING_CHARS, piecesOf, rememberPieces } from "../../src/util/long-strings.ts"
import { slicedJsonParser } from "../../src/util/sliced-json.ts"
import { jsonTextPiecesInSlices } from "../../src/util/sliced-stringify.ts"
import { STRING_SLICE, stringSlices } from "../../src/util/slices.ts"

/** Parses `text` fed in chunks of `chunk` bytes, as an upstream answer arrives. */
const parse = (text: string, chunk: number) =>
  Effect.runPromise(Effect.gen(function*() {
    const parser = slicedJsonParser({ maxDepth: Number.POSITIVE_INFINITY })
    const bytes = Buffer.from(text)
    for (let at = 0; at < bytes.length; at += chunk) yield* parser.feed(bytes.subarray(at, at + chunk))
    return (yield* parser.end()) as { readonly s: string }
  }))

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff

/**
 * The body of a JSON string that parses to at least `chars` characters: plain text, escapes,
 * multi-byte characters, pairs written as escapes, lone surrogates.
 */
const UNITS = ["plain text ", "é", "😀", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\\udc00", "\\n\\\"\\\\", "漢字"]
const UNIT_CHARS = UNITS.map((unit) => (JSON.parse(`"${unit}"`) as string).length)
const mixedText = (chars: number) => {
  const out: Array<string> = []
  let length = 0
  for (let i = 0; length < chars; i++) {
    out.push(UNITS[(i * 7) % UNITS.length]!)
    length += UNIT_CHARS[(i * 7) % UNITS.length]!
  }
  return out.join("")
}

afterEach(() => forgetPieces())

describe("a long parsed string", () => {
  it("is JSON.parse's string, kept in pieces that join to it, none cutting a surrogate pair", async () => {
    const cases = [
      [mixedText(LONG_STRING_CHARS + 10), 8192],
      [mixedText(LONG_STRING_CHARS), 1001],
      ["x".repeat(2 * LONG_STRING_CHARS), 65536],
      // A lone high surrogate every third character: a piece's end falls right after one.
      ["\\ud800xy".repeat(LONG_STRING_CHARS / 2), 4096]
    ] as const
    for (const [body, chunk] of cases) {
      const text = `{"s":"${body}"}`
      const { s } = await parse(text, chunk)
      expect(s === JSON.parse(text).s).toBe(true)
      const pieces = piecesOf(s)
      expect(pieces, "the parser kept the pieces").toBeDefined()
      expect(pieces!.length).toBeGreaterThan(1)
      expect(pieces!.join("") === s).toBe(true)
      for (const piece of pieces!.slice(0, -1)) expect(isHigh(piece.charCodeAt(piece.length - 1))).toBe(false)
    }
  })

  it("is read slice by slice from its pieces: the same slices, each at most the size asked, no pair cut", async () => {
    const { s } = await parse(`{"s":"${mixedText(2 * LONG_STRING_CHARS)}"}`, 4096)
    expect(piecesOf(s)).toBeDefined()
    for (const size of [STRING_SLICE, 1024 * 1024, 1000]) {
      const slices = [...stringSlices(s, size)]
      expect(slices.join("") === s).toBe(true)
      for (const slice of slices) expect(slice.length).toBeLessThanOrEqual(size)
      for (const slice of slices.slice(0, -1)) expect(isHigh(slice.charCodeAt(slice.length - 1))).toBe(false)
    }
  })

  it("is serialized as JSON.stringify writes it, escaped or not", async () => {
    const bodies = [mixedText(LONG_STRING_CHARS + 5), "a ".repeat(LONG_STRING_CHARS), 'say \\"hi\\" '.repeat(LONG_STRING_CHARS / 8), "😀 ".repeat(LONG_STRING_CHARS / 2), "\\u0001".repeat(LONG_STRING_CHARS)]
    for (const body of bodies) {
      const text = `{"s":"${body}"}`
      const value = await parse(text, 65536)
      expect(piecesOf(value.s)).toBeDefined()
      const pieces = await Effect.runPromise(jsonTextPiecesInSlices(value))
      expect(pieces.join("") === JSON.stringify(value)).toBe(true)
    }
  })

  it("a short string is not kept; a kept one is forgotten past the bound on kept characters, oldest first", async () => {
    const { s: short } = await parse(`{"s":"${"y".repeat(LONG_STRING_CHARS - 1)}"}`, 65536)
    expect(piecesOf(short)).toBeUndefined()
    // Each of its own length (one string is kept per length).
    const made = (n: number) => {
      const pieces = [`${n}`.padEnd(STRING_SLICE, "z"), "w".repeat(16 * LONG_STRING_CHARS - STRING_SLICE - n)]
      const text = pieces[0]! + pieces[1]!
      rememberPieces(text, pieces)
      return text
    }
    const kept = [made(1), made(2), made(3), made(4)]
    for (const text of kept) expect(piecesOf(text)).toBeDefined()
    const fifth = made(5)
    expect(piecesOf(kept[0]!)).toBeUndefined()
    for (const text of [...kept.slice(1), fifth]) expect(piecesOf(text)).toBeDefined()
  })

  it("of two strings of one length, the newer is kept and the older read the plain way", async () => {
    const body = (c: string) => `{"s":"${c.repeat(2 * LONG_STRING_CHARS)}"}`
    const { s: older } = await parse(body("a"), 65536)
    const { s: newer } = await parse(body("b"), 65536)
    expect(piecesOf(older)).toBeUndefined()
    expect(piecesOf(newer)!.join("") === newer).toBe(true)
    expect([...stringSlices(older)].join("") === older).toBe(true)
  })

  it("is told blank or not from its pieces, as trim would tell it", async () => {
    const { s: blank } = await parse(`{"s":"${" \\n\\t".repeat(LONG_STRING_CHARS)}"}`, 65536)
    const { s: text } = await parse(`{"s":"${" ".repeat(2 * LONG_STRING_CHARS)}x"}`, 65536)
    for (const s of [blank, text]) expect(piecesOf(s)).toBeDefined()
    expect([isBlank(blank), isBlank(text)]).toEqual([blank.trim() === "", text.trim() === ""])
    expect([isBlank(blank), isBlank(text)]).toEqual([true, false])
    // Read from the pieces, not the string (which trim would flatten first): pieces that disagree
    // with their string, registered for this check only, decide the answer.
    const spaces = " ".repeat(LONG_STRING_CHARS)
    rememberPieces(spaces, [" ".repeat(LONG_STRING_CHARS - 1), "x"])
    expect(isBlank(spaces)).toBe(false)
    // Short strings and strings not kept: trim's answer.
    for (const s of ["", " \n", " a ", "y".repeat(2 * LONG_STRING_CHARS + 1)]) expect(isBlank(s)).toBe(s.trim() === "")
  })
})
