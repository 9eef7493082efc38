/** State handles over real HTTP on every engine: combine rules, optimistic concurrency, isolation. */
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

describe.each(engines())("state handles ($name)", (engine) => {
  let gw: SharedGateway
  let otherKey: string
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    otherKey = (await (await gw.admin("POST", "/admin/v1/keys", { name: "other" })).json() as { key: string }).key
  })

  const call = async (path: string, body?: unknown, key = gw.apiKey!, headers: Record<string, string> = {}) => {
    const res = await fetch(`${gw.baseUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: res.status, body: await res.json() as any, etag: res.headers.get("etag") }
  }

  it("creates with 201 and combines deltas by type", async () => {
    const created = await call("/v1/states", { value: { a: 1, nested: { x: 1 } } })
    expect(created.status).toBe(201)
    expect(created.body.state).toMatchObject({ seq: 0, value: { a: 1, nested: { x: 1 } } })
    expect(created.body.state.stateId).toMatch(/^state_/)
    expect(created.etag).toBe('"0"')
    const id = created.body.state.stateId
    const merged = await call(`/v1/states/${id}:append`, { delta: { b: 2, nested: { y: 2 }, a: null } })
    expect(merged.body.state).toEqual({ stateId: id, seq: 1, value: { b: 2, nested: { x: 1, y: 2 } } })
    expect((await call(`/v1/states/${id}`)).body.state.seq).toBe(1)

    const counter = (await call("/v1/states", { value: 10 })).body.state.stateId
    expect((await call(`/v1/states/${counter}:append`, { delta: 5 })).body.state.value).toBe(15)
    const list = (await call("/v1/states", { value: ["a"] })).body.state.stateId
    expect((await call(`/v1/states/${list}:append`, { delta: ["b", "c"] })).body.state.value).toEqual(["a", "b", "c"])
    const text = (await call("/v1/states", { value: "ab" })).body.state.stateId
    expect((await call(`/v1/states/${text}:append`, { delta: "cd" })).body.state.value).toBe("abcd")
    const empty = (await call("/v1/states", {})).body.state
    expect(empty.value).toBeNull()
    expect((await call(`/v1/states/${empty.stateId}:append`, { delta: { first: true } })).body.state.value).toEqual({ first: true })
  })

  it("refuses a type mismatch or a missing delta with 400 naming the field", async () => {
    const id = (await call("/v1/states", { value: [1] })).body.state.stateId
    const mismatch = await call(`/v1/states/${id}:append`, { delta: 3 })
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error).toMatchObject({ type: "invalid_request" })
    expect(mismatch.body.error.message).toMatch(/^delta: a number cannot be combined with the current array/)
    const missing = await call(`/v1/states/${id}:append`, {})
    expect(missing.status).toBe(400)
    expect(missing.body.error.message).toContain("delta")
    expect((await call(`/v1/states/${id}`)).body.state).toMatchObject({ seq: 0, value: [1] })
  })

  it("detects a lost race with expectedSeq or If-Match (409 with the current seq)", async () => {
    const id = (await call("/v1/states", { value: 0 })).body.state.stateId
    expect((await call(`/v1/states/${id}:append`, { delta: 1, expectedSeq: 0 })).status).toBe(200)
    const stale = await call(`/v1/states/${id}:append`, { delta: 1, expectedSeq: 0 })
    expect(stale.status).toBe(409)
    expect(stale.etag).toBe('"1"')
    expect(stale.body.error.type).toBe("conflict")
    const viaHeader = await call(`/v1/states/${id}:append`, { delta: 1 }, gw.apiKey!, { "if-match": '"1"' })
    expect(viaHeader.status).toBe(200)
    expect(viaHeader.body.state).toMatchObject({ seq: 2, value: 2 })
  })

  it("never loses a delta under many concurrent writers", async () => {
    const id = (await call("/v1/states", { value: 0 })).body.state.stateId
    const writers = 40
    const results = await Promise.all(Array.from({ length: writers }, (_, i) => call(`/v1/states/${id}:append`, { delta: i + 1 })))
    expect(results.every((r) => r.status === 200)).toBe(true)
    const final = (await call(`/v1/states/${id}`)).body.state
    expect(final.seq).toBe(writers)
    expect(final.value).toBe((writers * (writers + 1)) / 2)
    expect(new Set(results.map((r) => r.body.state.seq)).size).toBe(writers)
  })

  it("hides another key's states (404) and answers 405 on a wrong method", async () => {
    const id = (await call("/v1/states", { value: 1 })).body.state.stateId
    const foreign = await call(`/v1/states/${id}`, undefined, otherKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.error.type).toBe("not_found")
    expect((await call(`/v1/states/${id}:append`, { delta: 1 }, otherKey)).status).toBe(404)
    const res = await fetch(`${gw.baseUrl}/v1/states/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${gw.apiKey}` } })
    expect(res.status).toBe(405)
    expect(res.headers.get("allow")).toBe("GET")
  })

  it("a large document is read back exactly, its JSON made in pieces as it is sent", async () => {
    // Over the 256 Ki characters from which a response is serialized in slices, with every kind
    // of character JSON escapes and a string cut across slices.
    const value = { text: "😀 \"q\" \\ \n\t\u0001 é".repeat(40_000), list: [1, null, true, "x".repeat(200_000)], nested: { deep: [{ a: "b" }] } }
    const created = await call("/v1/states", { value })
    expect(created.status).toBe(201)
    const res = await fetch(`${gw.baseUrl}/v1/states/${created.body.state.stateId}`, { headers: { authorization: `Bearer ${gw.apiKey}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("application/json")
    expect(res.headers.get("etag")).toBe('"0"')
    expect(res.headers.get("transfer-encoding")).toBe("chunked")
    const text = await res.text()
    // The value as stored (jsonb orders keys its own way), in the very text JSON.stringify writes.
    const read = JSON.parse(text)
    expect(read).toEqual({ state: { stateId: created.body.state.stateId, seq: 0, value } })
    expect(text).toBe(JSON.stringify(read))
    // A small body keeps its length.
    const small = await fetch(`${gw.baseUrl}/v1/states/${(await call("/v1/states", { value: 1 })).body.state.stateId}`, { headers: { authorization: `Bearer ${gw.apiKey}` } })
    expect(small.headers.get("content-length")).not.toBeNull()
    expect(await small.json()).toMatchObject({ state: { seq: 0, value: 1 } })
  })
})
