import { describe, expect, it } from "vitest"
import { refusedForDiskFull } from "../../src/storage/wire-errors.ts"

const text = new TextEncoder()

/** One wire message: its type byte, its int32 length (counting itself), its body. */
const message = (type: string, body: Uint8Array) => {
  const out = new Uint8Array(5 + body.length)
  out[0] = type.charCodeAt(0)
  new DataView(out.buffer).setInt32(1, 4 + body.length)
  out.set(body, 5)
  return out
}
/** An ErrorResponse with these fields (`S`everity, `C`ode, `M`essage…), as PostgreSQL sends it. */
const errorResponse = (fields: Record<string, string>) =>
  message("E", text.encode(Object.entries(fields).map(([type, value]) => `${type}${value}\0`).join("") + "\0"))
const readyForQuery = message("Z", text.encode("I"))
const dataRow = message("D", new Uint8Array([0, 1, 0, 0, 0, 5, 53, 51, 49, 48, 48])) // a row holding the text "53100"
const answer = (...parts: Array<Uint8Array>): Uint8Array => Buffer.concat(parts)
const diskFull = errorResponse({ S: "ERROR", V: "ERROR", C: "53100", M: "could not extend file \"base/5/16384\": No space left on device" })

describe("refusedForDiskFull", () => {
  it("finds SQLSTATE 53100 in an ErrorResponse, wherever it stands in the answer", () => {
    expect(refusedForDiskFull(answer(diskFull, readyForQuery))).toBe(true)
    expect(refusedForDiskFull(answer(dataRow, dataRow, diskFull, readyForQuery))).toBe(true)
    // A pipelined batch: another error first, then the disk's.
    expect(refusedForDiskFull(answer(errorResponse({ S: "ERROR", C: "22P02", M: "invalid input syntax" }), readyForQuery, diskFull, readyForQuery))).toBe(true)
  })

  it("is false for other errors, for rows that hold the text 53100, and for cut or empty answers", () => {
    expect(refusedForDiskFull(answer(errorResponse({ S: "ERROR", C: "22P02", M: "53100" }), readyForQuery))).toBe(false)
    expect(refusedForDiskFull(answer(errorResponse({ S: "ERROR", C: "531000" }), readyForQuery))).toBe(false)
    expect(refusedForDiskFull(answer(dataRow, readyForQuery))).toBe(false)
    // Cut inside the code: the bytes past the view (the rest of "53100") are not read.
    const whole = answer(diskFull, readyForQuery)
    expect(refusedForDiskFull(whole.subarray(0, whole.indexOf(0x43) + 4))).toBe(false)
  })
})
