/**
 * The batch input file's reading (`src/batches/openai-input.ts`) over its bytes: line ends, blank
 * lines as `trim` sees them, line numbers, the request limit, and lines long enough to be parsed
 * in slices. (The HTTP surface and the event loop: openai-batches.test.ts, hostile-input.test.ts.)
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { MAX_BATCH_REQUESTS, parseOpenAiInput } from "../../src/batches/openai-input.ts"

const ENDPOINT = "/v1/chat/completions"
const request = (id: string, body: unknown = { model: "m", messages: [{ role: "user", content: "hi" }] }) =>
  JSON.stringify({ custom_id: id, method: "POST", url: ENDPOINT, body })
const parse = (text: string) => Effect.runPromise(parseOpenAiInput(new TextEncoder().encode(text), ENDPOINT))

describe("parseOpenAiInput", () => {
  it("reads LF and CRLF lines, skips blank ones (Unicode spaces and a BOM too) and numbers lines as the file does", async () => {
    const text = `\uFEFF${request("a")}\r\n\r\n   \t\n\u00a0\u3000\n${request("b")}\n{oops\n`
    const parsed = await parse(text)
    expect(parsed).toEqual({ _tag: "Invalid", errors: [{ code: "invalid_json_line", message: "Line 6 is not valid JSON.", param: null, line: 6 }] })
    const valid = await parse(text.replace("{oops\n", ""))
    expect(valid._tag === "Valid" && valid.requests.map((r) => [r.customId, JSON.parse(r.params)])).toEqual([
      ["a", { model: "m", messages: [{ role: "user", content: "hi" }] }],
      ["b", { model: "m", messages: [{ role: "user", content: "hi" }] }]
    ])
  })

  it("counts requests up to the limit and one past it, no further", async () => {
    expect(await parse("\n \n")).toEqual({ _tag: "WrongSize", lines: 0 })
    const full = Array.from({ length: MAX_BATCH_REQUESTS }, (_, i) => request(`r${i}`)).join("\n")
    expect((await parse(full))._tag).toBe("Valid")
    expect(await parse(`${full}\n${request("extra")}\n${"x\n".repeat(10_000)}`)).toEqual({ _tag: "WrongSize", lines: MAX_BATCH_REQUESTS + 1 })
  })

  it("parses a long line in slices into the same body, and names a long line that is not JSON", async () => {
    const body = { model: "m", messages: [{ role: "user", content: "é😀".repeat(100_000) }], tags: Array.from({ length: 5_000 }, (_, i) => i) }
    const parsed = await parse(`${request("long", body)}\n`)
    expect(parsed._tag === "Valid" && parsed.requests[0]!.params).toBe(JSON.stringify(body))
    const broken = await parse(`${request("ok")}\n${request("long", body).slice(0, -1)}\n`)
    expect(broken).toEqual({ _tag: "Invalid", errors: [{ code: "invalid_json_line", message: "Line 2 is not valid JSON.", param: null, line: 2 }] })
    const tooMany = await parse(`${request("many", { model: "m", messages: Array(70_000).fill({}) })}\n`)
    expect(tooMany._tag === "Invalid" && tooMany.errors[0]!.message).toMatch(/^Line 1 is refused: .*more than 65536 JSON values/)
  })
})
