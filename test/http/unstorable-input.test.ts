/**
 * The client's own bad input is a 4xx naming the field, never a retryable 503 "Storage is
 * unavailable" (issue #10.6) nor a 500 (issue #10.7), on both engines: text PostgreSQL refuses
 * (NUL, unpaired surrogates), `%00` in ids and cursors, numbers and dates out of range, values
 * between the SQL client's old 16 MiB message limit and the 32 MiB body limit, and bodies nested
 * thousands of levels deep.
 */
import { beforeAll, describe, expect, it } from "vitest"
import { MAX_JSON_DEPTH, MAX_STORED_JSON_BYTES } from "../../src/util/json-limits.ts"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

interface Answer {
  readonly status: number
  readonly body: any
  readonly text: string
}

/** `{a:{a:…}}` `depth` levels deep, as text (building it as an object would need the stack). */
const nestedText = (depth: number, key = "a") => `{"${key}":`.repeat(depth - 1) + "{}" + "}".repeat(depth - 1)

describe.each(engines())("input the store cannot hold ($name)", (engine) => {
  let gw: SharedGateway
  beforeAll(async () => {
    gw = await sharedGateway(engine)
  })

  const call = async (method: string, path: string, body?: string, token = gw.apiKey!): Promise<Answer> => {
    const res = await fetch(`${gw.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body })
    })
    const text = await res.text()
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { status: res.status, body: parsed, text: text.slice(0, 300) }
  }
  const admin = (method: string, path: string, body?: string) => call(method, path, body, gw.adminToken)

  const expectFlat = (answer: Answer, status: number, type: string, mentions?: string) => {
    expect(answer.status, answer.text).toBe(status)
    expect(answer.body?.error?.type, answer.text).toBe(type)
    if (mentions !== undefined) expect(answer.body.error.message, answer.text).toContain(mentions)
  }

  it("NUL and unpaired surrogates in stored strings are 400 naming the field", async () => {
    expectFlat(await call("POST", "/v1/states", '{"value":"a\\u0000b"}'), 400, "invalid_request", "value")
    expectFlat(await call("POST", "/v1/states", '{"value":{"k":["\\ud800"]}}'), 400, "invalid_request", "value.k[0]")
    expectFlat(await call("POST", "/v1/states", '{"value":{"a\\u0000":1}}'), 400, "invalid_request", "value")
    const state = await call("POST", "/v1/states", '{"value":"ok"}')
    expect(state.status).toBe(201)
    expectFlat(await call("POST", `/v1/states/${state.body.state.stateId}:append`, '{"delta":"\\udfff"}'), 400, "invalid_request", "delta")
    expectFlat(await call("POST", "/v1/agent-runs", '{"metadata":{"note":"x\\u0000"}}'), 400, "invalid_request", "metadata.note")
    expectFlat(await call("POST", "/v1/agent-runs", '{"input":"\\ud83d","model":"svc-pico-1"}'), 400, "invalid_request", "input")
    const run = await call("POST", "/v1/agent-runs", "{}")
    expect(run.status).toBe(201)
    expectFlat(await call("POST", `/v1/agent-runs/${run.body.run.id}/events`, '{"events":[{"type":"note","text":"\\u0000"}]}'), 400, "invalid_request", "events[0].text")
    expectFlat(await call("POST", `/v1/agent-runs/${run.body.run.id}/cancel`, '{"reason":"\\ud800"}'), 400, "invalid_request", "reason")
    expectFlat(await admin("POST", "/admin/v1/keys", '{"name":"a\\u0000"}'), 400, "invalid_request", "name")
    expectFlat(await admin("POST", "/admin/v1/keys", '{"name":"\\udc00"}'), 400, "invalid_request", "name")
  })

  it("%00 in a path id is 404, in a query value 400 naming the parameter", async () => {
    expectFlat(await call("GET", "/v1/states/%00"), 404, "not_found")
    expectFlat(await call("POST", "/v1/states/a%00b:append", '{"delta":1}'), 404, "not_found")
    expectFlat(await call("GET", "/v1/agent-runs/run_%00"), 404, "not_found")
    expectFlat(await call("GET", "/v1/agent-runs/run_%00/events"), 404, "not_found")
    expectFlat(await admin("GET", "/admin/v1/keys/%00"), 404, "not_found")
    expectFlat(await admin("DELETE", "/admin/v1/keys/%00"), 404, "not_found")
    expectFlat(await call("GET", "/v1/agent-runs?after=%00"), 400, "invalid_request", "after")
    expectFlat(await call("GET", "/v1/agent-runs?parentRunId=run_%00"), 400, "invalid_request", "parentRunId")
    expectFlat(await admin("GET", "/admin/v1/usage?keyId=%00"), 400, "invalid_request", "keyId")
  })

  it("numbers and dates out of range are 400 naming the field", async () => {
    expectFlat(await call("POST", "/v1/agent-runs", '{"budgetUsd":1e300}'), 400, "invalid_request", "budgetUsd")
    const key = await admin("POST", "/admin/v1/keys", '{"plan":"prepaid"}')
    expect(key.status).toBe(201)
    expectFlat(await admin("POST", `/admin/v1/keys/${key.body.id}/credits`, '{"amountUsd":1e300}'), 400, "invalid_request", "amountUsd")
    expectFlat(await admin("GET", "/admin/v1/usage?from=-271821-04-20T00:00:00Z"), 400, "invalid_request", "from")
    expectFlat(await admin("GET", "/admin/v1/usage?to=+275760-09-13T00:00:00Z"), 400, "invalid_request", "to")
    expectFlat(await admin("GET", "/admin/v1/usage?from=99999999999999"), 400, "invalid_request", "from")
    // A sum that overflows a double would be stored as null: refused instead.
    const state = await call("POST", "/v1/states", '{"value":1.7e308}')
    expectFlat(await call("POST", `/v1/states/${state.body.state.stateId}:append`, '{"delta":1.7e308}'), 400, "invalid_request", "delta")
    expect((await call("GET", `/v1/states/${state.body.state.stateId}`)).body.state.value).toBe(1.7e308)
  })

  it("a value larger than a row holds is 413; one that fits is stored and read back", async () => {
    const big = "x".repeat(MAX_STORED_JSON_BYTES + 1024)
    expectFlat(await call("POST", "/v1/states", JSON.stringify({ value: big })), 413, "request_too_large")
    expectFlat(await call("POST", "/v1/agent-runs", JSON.stringify({ metadata: { big } })), 413, "request_too_large")
    // Just under the limit a document is stored and read back whole.
    const fits = "y".repeat(MAX_STORED_JSON_BYTES - 1024)
    const stored = await call("POST", "/v1/states", JSON.stringify({ value: fits }))
    expect(stored.status, stored.text).toBe(201)
    const read = await fetch(`${gw.baseUrl}/v1/states/${stored.body.state.stateId}`, { headers: { authorization: `Bearer ${gw.apiKey}` } })
    expect(read.status).toBe(200)
    expect(((await read.json()) as any).state.value.length).toBe(fits.length)
    // Appends add up: the state may not outgrow a row.
    expectFlat(await call("POST", `/v1/states/${stored.body.state.stateId}:append`, JSON.stringify({ delta: "z".repeat(4096) })), 413, "request_too_large", "delta")
    // jsonb prints numbers in full: 360 KB of 1e300 would come back as 18 MB.
    const wide = `{"value":[${Array(60_000).fill("1e300").join(",")}]}`
    expectFlat(await call("POST", "/v1/states", wide), 413, "request_too_large")
  }, 120_000) // 41.8 s in a clean clone's first run on a slow VM (2026-11-27)

  it("nesting deeper than the limit is 400 naming the field, on every surface", async () => {
    const deep = nestedText(5_000)
    expectFlat(await call("POST", "/v1/states", `{"value":${deep}}`), 400, "invalid_request", "value")
    expectFlat(await call("POST", "/v1/agent-runs", `{"metadata":${deep}}`), 400, "invalid_request", "metadata")
    const messages = await fetch(`${gw.baseUrl}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": gw.apiKey!, "content-type": "application/json" },
      body: `{"model":"svc-pico-1","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","input_schema":${deep}}]}`
    })
    const messagesBody = await messages.json() as any
    expect(messages.status).toBe(400)
    expect(messagesBody).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    expect(messagesBody.error.message).toContain("tools")
    const chat = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: `{"model":"svc-pico-1","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${deep}}}}`
    })
    const chatBody = await chat.json() as any
    expect(chat.status).toBe(400)
    expect(chatBody.error).toMatchObject({ type: "invalid_request_error", param: "response_format" })
    const bare = await call("POST", "/v1/states", "[".repeat(5_000) + "]".repeat(5_000))
    expectFlat(bare, 400, "invalid_request", "request body")
    // At the limit it is accepted: real schemas are far shallower.
    const atLimit = await call("POST", "/v1/states", `{"value":${nestedText(MAX_JSON_DEPTH - 1)}}`)
    expect(atLimit.status, atLimit.text).toBe(201)
  })

  it("still answers everyone afterwards", async () => {
    expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
    expect((await call("POST", "/v1/states", '{"value":1}')).status).toBe(201)
  })
})
