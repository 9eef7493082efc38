/**
 * Every surface renders a defect (a bug) as a 500 in its own shape with type `api_error`, as the
 * spec's error tables say for 5xx (issue #10.8: the flat shape said `internal_error`).
 */
import { describe, expect, it } from "vitest"
import { renderDefect } from "../../src/http/render-error.ts"

const bodyOf = (response: ReturnType<typeof renderDefect>) => {
  const body = response.body as { _tag: string; body: Uint8Array }
  expect(body._tag).toBe("Uint8Array")
  return JSON.parse(new TextDecoder().decode(body.body))
}

describe("renderDefect", () => {
  it("answers 500 api_error in the messages, openai and flat shapes, quoting the request id", () => {
    const messages = renderDefect("messages", "req_1")
    expect(messages.status).toBe(500)
    expect(bodyOf(messages)).toEqual({ type: "error", error: { type: "api_error", message: expect.stringContaining("req_1") }, request_id: "req_1" })
    expect(bodyOf(renderDefect("openai", "req_2"))).toEqual({ error: { type: "api_error", message: expect.stringContaining("req_2"), param: null, code: null } })
    const flat = renderDefect("flat", "req_3")
    expect(flat.status).toBe(500)
    expect(bodyOf(flat)).toEqual({ error: { type: "api_error", message: expect.stringContaining("req_3") } })
  })
})
