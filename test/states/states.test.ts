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

  const read = async (id: string) => {
    const res = await fetch(`${gw.baseUrl}/v1/states/${id}`, { headers: { authorization: `Bearer ${gw.apiKey}` } })
    return { res, text: await res.text() }
  }

  it("a large document is read back as stored, byte for byte, keys in the order written", async () => {
    // Over 1 MiB (two stored chunks), with every kind of character JSON escapes and a long string.
    const value = { text: "😀 \"q\" \\ \n\t\u0001 é".repeat(40_000), list: [1, null, true, "x".repeat(200_000)], nested: { deep: [{ b: "b", a: "a" }] } }
    const created = await call("/v1/states", { value })
    expect(created.status).toBe(201)
    const id = created.body.state.stateId
    const { res, text } = await read(id)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("application/json")
    expect(res.headers.get("etag")).toBe('"0"')
    expect(text).toBe(JSON.stringify({ state: { stateId: id, seq: 0, value } }))
    expect(Number(res.headers.get("content-length"))).toBe(Buffer.byteLength(text))
    // A small body too.
    const small = await read((await call("/v1/states", { value: { z: 1, a: [2] } })).body.state.stateId)
    expect(small.res.headers.get("content-length")).toBe(String(Buffer.byteLength(small.text)))
    expect(JSON.parse(small.text)).toMatchObject({ state: { seq: 0, value: { z: 1, a: [2] } } })
    expect(small.text).toContain('"value":{"z":1,"a":[2]}}}')
  })

  it("appends to large arrays, strings and objects as the combine rules say, and refuses past 16 MiB", async () => {
    const item = (i: number) => `${i} é 😀 "q" ${"y".repeat(2_000)}`
    let list: Array<unknown> = Array.from({ length: 600 }, (_, i) => item(i))
    const listId = (await call("/v1/states", { value: list })).body.state.stateId
    for (const delta of [[item(-1), { nested: [1, "\n"] }], [], [null]]) {
      const appended = await call(`/v1/states/${listId}:append`, { delta })
      expect(appended.status).toBe(200)
      list = [...list, ...delta]
      expect(appended.body.state.value).toEqual(list)
    }
    const listRead = await read(listId)
    expect(listRead.text).toBe(JSON.stringify({ state: { stateId: listId, seq: 3, value: list } }))

    const long = "é😀\"\\".repeat(300_000)
    const textId = (await call("/v1/states", { value: long })).body.state.stateId
    const grown = await call(`/v1/states/${textId}:append`, { delta: "\n and more 😀" })
    expect(grown.body.state.value).toBe(long + "\n and more 😀")
    expect((await read(textId)).text).toBe(JSON.stringify({ state: { stateId: textId, seq: 1, value: long + "\n and more 😀" } }))

    const object = Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`k${i}`, { text: item(i), n: i }]))
    const objectId = (await call("/v1/states", { value: object })).body.state.stateId
    const patched = await call(`/v1/states/${objectId}:append`, { delta: { k1: null, k2: { n: -2 }, added: [1] } })
    const { k1: _gone, ...rest } = object
    const expected = { ...rest, k2: { text: item(2), n: -2 }, added: [1] }
    expect(patched.body.state.value).toEqual(expected)
    expect((await read(objectId)).text).toBe(JSON.stringify({ state: { stateId: objectId, seq: 1, value: expected } }))

    // A type mismatch on a large value is the same 400; nothing changes.
    const mismatch = await call(`/v1/states/${listId}:append`, { delta: "text" })
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.message).toMatch(/^delta: a string cannot be combined with the current array/)
    // The value and the delta each fit, but their sum would not: 413 naming delta, and the value stays.
    const big = "z".repeat(9 * 1024 * 1024)
    const bigId = (await call("/v1/states", { value: big })).body.state.stateId
    const over = await call(`/v1/states/${bigId}:append`, { delta: big.slice(0, 8 * 1024 * 1024) })
    expect(over.status).toBe(413)
    expect(over.body.error.message).toContain("delta")
    expect((await call(`/v1/states/${bigId}`)).body.state).toMatchObject({ seq: 0, value: big })
  })

  it("a read during appends sees one whole value, never half of an append", async () => {
    const id = (await call("/v1/states", { value: ["x".repeat(900_000)] })).body.state.stateId
    const appends = (async () => {
      for (let i = 0; i < 6; i++) expect((await call(`/v1/states/${id}:append`, { delta: ["y".repeat(400_000 + i)] })).status).toBe(200)
    })()
    const reads: Array<{ seq: number; value: Array<string> }> = []
    let done = false
    void appends.finally(() => (done = true))
    while (!done) reads.push(JSON.parse((await read(id)).text).state)
    await appends
    for (const state of reads) {
      expect(state.value).toHaveLength(state.seq + 1)
      state.value.slice(1).forEach((element, i) => expect(element).toBe("y".repeat(400_000 + i)))
    }
  })

})
