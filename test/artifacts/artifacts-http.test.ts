/**
 * The artifacts surface over real HTTP, on each engine: upload and dedupe, every query feature,
 * versions, tenant isolation, delete, restart survival, bad input (400 naming the field, never a
 * 5xx), permissions (403) and size limits (413).
 */
import { execFileSync } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { INLINE_MAX_BYTES } from "../../src/artifacts/content-parser.ts"
import { engines } from "../support/engines.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

const MiB = 1024 * 1024
const errorLines = (output: string) => output.split("\n").filter((line) => /"level":"(ERROR|FATAL)"|storage failure/i.test(line)).slice(-5).join("\n")

describe.each(engines())("artifacts ($name)", (engine) => {
  let gw: GatewayHandle
  let env: Record<string, string>
  let cleanup: () => Promise<void>
  let key: string
  let otherKey: string
  let statesOnlyKey: string

  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    env = { ...setup.env, GATEWAY_MAX_BODY_BYTES: String(8 * MiB), GATEWAY_ARTIFACT_MAX_BYTES: String(3 * MiB) }
    gw = await startInProcessGateway(env)
    key = gw.apiKey!
    const create = async (body: unknown) => ((await (await gw.admin("POST", "/admin/v1/keys", body)).json()) as { key: string }).key
    otherKey = await create({ name: "other" })
    statesOnlyKey = await create({ name: "states-only", permissions: { surfaces: ["states"] } })
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const call = async (method: string, path: string, body?: unknown, as = key) => {
    const res = await fetch(`${gw.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${as}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
    })
    const text = await res.text()
    // A 5xx here is never expected: print the gateway's error lines, which name the failing
    // statement, once its log buffer has been written (every 100 ms).
    if (res.status >= 500) await new Promise((resolve) => setTimeout(resolve, 250))
    if (res.status >= 500) console.error(`${method} ${path} → ${res.status}; the gateway's error log:\n${errorLines(gw.output())}`)
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text), headers: res.headers }
  }
  const upload = (body: unknown, as = key) => call("POST", "/v1/artifacts", body, as)
  const query = (id: string, body: unknown = {}, as = key) => call("POST", `/v1/artifacts/${id}/query`, body, as)
  const rowsOf = async (id: string, body: unknown) => {
    const res = await query(id, body)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return res.body.result.rows as Array<Record<string, unknown>>
  }
  const expectInvalid = (res: { status: number; body: any }, param: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(400)
    expect(Object.keys(res.body)).toEqual(["error"])
    expect(Object.keys(res.body.error).sort()).toEqual(["message", "type"])
    expect(res.body.error.type).toBe("invalid_request")
    expect(res.body.error.message).toContain(param)
  }

  const PEOPLE = [
    "id,name,age,city,member",
    "1,Ann,34,Oslo,true",
    "2,\"Smith, Bob\",9,\"New\nYork\",false",
    "3,cara,10,Oslo,true",
    "4,Dan,,Paris,false",
    "5,Éva,10.50,paris,true"
  ].join("\n") + "\n"
  let people: string

  it("uploads a CSV (201), describes it without its content, and dedupes per key only", async () => {
    const created = await upload({ bytes: PEOPLE, mimeType: "text/csv", summary: "five people", rowCount: 5, source: "test:suite", provenance: { method: "exact", lossless: true } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ reference: { artifactId: expect.stringMatching(/^art_/), version: 1 }, deduped: false, persisted: true })
    people = created.body.reference.artifactId

    const again = await upload({ bytes: PEOPLE, mimeType: "text/csv" })
    expect(again.status).toBe(200)
    expect(again.body).toEqual({ reference: { artifactId: people, version: 1 }, deduped: true, persisted: true })
    const foreign = await upload({ bytes: PEOPLE, mimeType: "text/csv" }, otherKey)
    expect(foreign.status).toBe(201)
    expect(foreign.body.reference.artifactId).not.toBe(people)

    const described = await call("GET", `/v1/artifacts/${people}`)
    expect(described.status).toBe(200)
    expect(described.body.reference).toEqual({ artifactId: people, version: 1 })
    expect(described.body.descriptor).toMatchObject({
      artifactId: people,
      version: 1,
      headVersion: 1,
      versionCount: 1,
      sizeBytes: Buffer.byteLength(PEOPLE),
      contentHash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      mimeType: "text/csv",
      format: "csv",
      summary: "five people",
      source: "test:suite",
      provenance: { method: "exact", lossless: true },
      declaredRowCount: 5,
      shape: {
        kind: "table",
        rowCount: 5,
        columnCount: 5,
        columns: [
          { name: "id", type: "number" }, { name: "name", type: "string" }, { name: "age", type: "number" },
          { name: "city", type: "string" }, { name: "member", type: "boolean" }
        ]
      }
    })
    expect(described.body.descriptor.versions).toEqual([{ version: 1, sizeBytes: Buffer.byteLength(PEOPLE), contentHash: described.body.descriptor.contentHash, createdAt: expect.any(String) }])
    expect(JSON.stringify(described.body)).not.toContain("Smith")

    const defaults = await upload({ content: [{ a: 1 }] })
    expect(defaults.status).toBe(201)
    const d = (await call("GET", `/v1/artifacts/${defaults.body.reference.artifactId}`)).body.descriptor
    expect(d).toMatchObject({ source: "api:upload", provenance: { method: "unknown", lossless: false }, mimeType: "application/json", format: "json", summary: null })
    // The same JSON sent as a string is the same content.
    expect((await upload({ bytes: JSON.stringify([{ a: 1 }]) })).status).toBe(200)
  })

  it("filters with every op, numbers compared as numbers (9 < 10)", async () => {
    const ids = async (filter: unknown) => (await rowsOf(people, { filter, select: ["id"] })).map((r) => r.id)
    expect(await ids([{ field: "age", op: "lt", value: 10 }])).toEqual([2])
    expect(await ids([{ field: "age", op: "lt", value: "10" }])).toEqual([2])
    expect(await ids([{ field: "age", op: "lte", value: 10 }])).toEqual([2, 3])
    expect(await ids([{ field: "age", op: "gt", value: 10 }])).toEqual([1, 5])
    expect(await ids([{ field: "age", op: "gte", value: 10.5 }])).toEqual([1, 5])
    expect(await ids([{ field: "city", op: "eq", value: "Oslo" }])).toEqual([1, 3])
    expect(await ids([{ field: "city", op: "ne", value: "Oslo" }])).toEqual([2, 4, 5])
    expect(await ids([{ field: "name", op: "contains", value: "a" }])).toEqual([3, 4, 5])
    expect(await ids([{ field: "name", op: "contains", value: "A" }])).toEqual([1])
    expect(await ids([{ field: "city", op: "in", value: ["Paris", "paris"] }])).toEqual([4, 5])
    expect(await ids([{ field: "age", op: "exists" }])).toEqual([1, 2, 3, 5])
    expect(await ids([{ field: "age", op: "exists", value: false }])).toEqual([4])
    expect(await ids([{ field: "member", op: "eq", value: true }, { field: "age", op: "gt", value: 20 }])).toEqual([1])
    expect(await ids([{ field: "name", op: "lt", value: "a" }])).toEqual([1, 2, 4])
  })

  it.runIf(engine.name === "postgres")("answers alike for a content stored before row keys (migration 0010), which reads the documents", async () => {
    const created = await upload({ bytes: "n,m,s\n3,1.5,x\n,2,y\n10,-1,z\n9,,w\n", mimeType: "text/csv" })
    expect(created.status).toBe(201)
    const id = created.body.reference.artifactId
    const queries = [
      { filter: [{ field: "n", op: "gt", value: 5 }], sort: [{ field: "m", dir: "desc" }] },
      { filter: [{ field: "m", op: "exists", value: false }] },
      { filter: [{ field: "n", op: "in", value: [3, 9] }], sort: [{ field: "n", dir: "desc" }], limit: 1 },
      { sort: [{ field: "n", dir: "asc" }], select: ["s"] }
    ]
    const answers = async () => Promise.all(queries.map(async (q) => (await query(id, q)).body))
    const keyed = await answers()
    // Nulls sort last in both directions.
    expect(keyed[0].result).toMatchObject({ totalMatched: 2, rows: [{ n: 10, m: -1, s: "z" }, { n: 9, m: null, s: "w" }] })
    expect(keyed[1].result.rows).toEqual([{ n: 9, m: null, s: "w" }])
    expect(keyed[2].result).toMatchObject({ totalMatched: 2, truncated: true, rows: [{ n: 9, m: null, s: "w" }] })
    expect(keyed[3].result.rows).toEqual([{ s: "x" }, { s: "w" }, { s: "z" }, { s: "y" }])
    // As a content written before the migration: no keys, and not marked as having them.
    const url = env.DATABASE_URL
    execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qc", `UPDATE artifact_row_search s SET nums = NULL FROM artifact_versions v
      WHERE v.artifact_id = '${id}' AND s.content_id = v.content_id; UPDATE artifact_contents c SET row_keys = false FROM artifact_versions v
      WHERE v.artifact_id = '${id}' AND c.id = v.content_id`])
    expect(await answers()).toEqual(keyed)
  })

  it("sorts by several keys, searches case-insensitively, selects, and windows", async () => {
    const sorted = await rowsOf(people, { sort: [{ field: "member", dir: "desc" }, { field: "age", dir: "asc" }], select: ["id"] })
    expect(sorted.map((r) => r.id)).toEqual([3, 5, 1, 2, 4])
    expect((await rowsOf(people, { sort: [{ field: "age", dir: "desc" }], select: ["id"] })).map((r) => r.id)).toEqual([1, 5, 3, 2, 4])

    expect((await rowsOf(people, { search: "PARIS", select: ["id"] })).map((r) => r.id)).toEqual([4, 5])
    expect((await rowsOf(people, { search: "éva" })).map((r) => r.id)).toEqual([5])
    expect(await rowsOf(people, { search: "new\\nyork", select: ["name"] })).toEqual([{ name: "Smith, Bob" }])

    const all = await rowsOf(people, {})
    expect(all[1]).toEqual({ id: 2, name: "Smith, Bob", age: 9, city: "New\nYork", member: false })
    expect(Object.keys(all[0])).toEqual(["id", "name", "age", "city", "member"])
    expect(await rowsOf(people, { select: ["city", "id", "nope"], limit: 1 })).toEqual([{ city: "Oslo", id: 1 }])

    const page = await query(people, { sort: [{ field: "id", dir: "desc" }], offset: 1, limit: 2, select: ["id"] })
    expect(page.body.result).toEqual({ artifactId: people, version: 1, rows: [{ id: 4 }, { id: 3 }], totalMatched: 5, truncated: true, structured: true })
    const last = await query(people, { offset: 4, limit: 2, select: ["id"] })
    expect(last.body.result).toMatchObject({ rows: [{ id: 5 }], totalMatched: 5, truncated: false })
    const counted = await query(people, { filter: [{ field: "member", op: "eq", value: true }], limit: 0 })
    expect(counted.body.result).toMatchObject({ rows: [], totalMatched: 3, truncated: true })
    const defaultLimit = await query(people, {})
    expect(defaultLimit.body.result.rows).toHaveLength(5)
  })

  it("reads a row range, and the original cell text on request", async () => {
    expect((await rowsOf(people, { range: { rowStart: 1, rowEnd: 3 }, select: ["id"] })).map((r) => r.id)).toEqual([2, 3])
    const ranged = await query(people, { range: { rowStart: 3 }, filter: [{ field: "member", op: "eq", value: true }], select: ["id"] })
    expect(ranged.body.result).toMatchObject({ rows: [{ id: 5 }], totalMatched: 1 })
    expect((await rowsOf(people, { range: { rowStart: 3 } })).map((r) => [r.age, r.member])).toEqual([[null, false], [10.5, true]])
    expect((await rowsOf(people, { range: { rowStart: 3 }, original: true })).map((r) => [r.age, r.member])).toEqual([["", false], ["10.50", true]])
  })

  it("stores other content as text and slices it by byte range", async () => {
    const text = "Grüße, world — 😀 done.\n".repeat(3)
    const created = await upload({ bytes: text, mimeType: "text/plain", summary: "greetings" })
    expect(created.status).toBe(201)
    const id = created.body.reference.artifactId
    const d = (await call("GET", `/v1/artifacts/${id}`)).body.descriptor
    expect(d.shape).toEqual({ kind: "text", length: Buffer.byteLength(text), characters: [...text].length, lines: 3 })
    const whole = await query(id)
    expect(whole.body.result).toEqual({
      artifactId: id, version: 1, text, totalMatched: Buffer.byteLength(text), truncated: false, structured: false,
      range: { byteStart: 0, byteEnd: Buffer.byteLength(text) }
    })
    // "ü" is bytes 2..3, "ß" 4..5, "e" 6: a range returns the characters that start inside it.
    const slice = await query(id, { range: { byteStart: 3, byteEnd: 6 } })
    expect(slice.body.result).toMatchObject({ text: "ß", range: { byteStart: 4, byteEnd: 6 }, totalMatched: 3 })
    const straddling = await query(id, { range: { byteStart: 1, byteEnd: 3 } })
    expect(straddling.body.result).toMatchObject({ text: "rü", range: { byteStart: 1, byteEnd: 4 } })
    expectInvalid(await query(id, { filter: [] }), "filter")
    expectInvalid(await query(id, { range: { rowStart: 0 } }), "range.rowStart")
    expectInvalid(await query(people, { range: { byteStart: 0 } }), "range.byteStart")
  })

  it("parses large uploads off the event loop, and caps a text answer at 1 MiB", async () => {
    // Over INLINE_MAX_BYTES, so a parse worker reads it; 3,000 rows (~80 KB) instead of 20,000: the
    // same path, and the file's largest cost on the embedded engine was writing those rows.
    const lines = ["n,label"]
    for (let i = 0; i < 3_000; i++) lines.push(`${i},"item ${i}, ${i % 7 === 0 ? "lucky" : "plain"}"`)
    const csv = lines.join("\n") + "\n"
    expect(Buffer.byteLength(csv)).toBeGreaterThan(INLINE_MAX_BYTES)
    // Two identical uploads at once: one stores, the other dedupes onto it.
    const [a, b] = await Promise.all([upload({ bytes: csv, mimeType: "text/csv" }), upload({ bytes: csv, mimeType: "text/csv" })])
    expect([a.status, b.status].sort()).toEqual([200, 201])
    expect(a.body.reference).toEqual(b.body.reference)
    const id = a.body.reference.artifactId
    // Multiples of 7 from 1,505 (7 × 215) to 2,996 (7 × 428): 214 rows.
    const res = await query(id, { filter: [{ field: "label", op: "contains", value: "lucky" }, { field: "n", op: "gte", value: 1_500 }], sort: [{ field: "n", dir: "desc" }], limit: 2 })
    expect(res.body.result).toMatchObject({ rows: [{ n: 2996, label: "item 2996, lucky" }, { n: 2989 }], totalMatched: 214, truncated: true })

    const big = "0123456789abcdef".repeat(100_000)
    const stored = await upload({ bytes: big })
    expect(stored.status, JSON.stringify(stored.body)).toBe(201)
    const text = stored.body.reference.artifactId
    const head = await query(text)
    expect(head.body.result.text).toHaveLength(MiB)
    expect(head.body.result).toMatchObject({ totalMatched: big.length, truncated: true, range: { byteStart: 0, byteEnd: MiB } })
    const tail = await query(text, { range: { byteStart: MiB } })
    expect(tail.body.result.text).toBe(big.slice(MiB))
    expect(tail.body.result.truncated).toBe(false)
  })

  it("versions: artifactId makes a new version, queries read the head or a pinned one", async () => {
    const v1 = (await upload({ content: [{ k: "a", v: 1 }, { k: "b", v: 2 }] })).body.reference
    const v2 = await upload({ artifactId: v1.artifactId, content: [{ k: "a", v: 10 }] })
    expect(v2.status).toBe(201)
    expect(v2.body.reference).toEqual({ artifactId: v1.artifactId, version: 2 })
    const same = await upload({ artifactId: v1.artifactId, content: [{ k: "a", v: 10 }] })
    expect(same.status).toBe(200)
    expect(same.body).toMatchObject({ reference: { artifactId: v1.artifactId, version: 2 }, deduped: true })
    // Reverting to the first content is a new version, stored once.
    expect((await upload({ artifactId: v1.artifactId, content: [{ k: "a", v: 1 }, { k: "b", v: 2 }] })).body.reference.version).toBe(3)

    const head = await query(v1.artifactId, { select: ["v"] })
    expect(head.body.result).toMatchObject({ version: 3, rows: [{ v: 1 }, { v: 2 }] })
    const pinned = await query(v1.artifactId, { version: 2 })
    expect(pinned.body.result).toMatchObject({ version: 2, rows: [{ k: "a", v: 10 }], totalMatched: 1 })
    expectInvalid(await query(v1.artifactId, { version: 4 }), "version")
    expectInvalid(await query(v1.artifactId, { version: 0 }), "version")

    const described = (await call("GET", `/v1/artifacts/${v1.artifactId}`)).body
    expect(described.reference).toEqual({ artifactId: v1.artifactId, version: 3 })
    expect(described.descriptor.versions.map((v: { version: number }) => v.version)).toEqual([3, 2, 1])
    expect((await call("GET", `/v1/artifacts/${v1.artifactId}?version=2`)).body.descriptor).toMatchObject({ version: 2, headVersion: 3 })
    expectInvalid(await call("GET", `/v1/artifacts/${v1.artifactId}?version=x`), "version")

    const foreign = await upload({ artifactId: v1.artifactId, content: [{ k: "x" }] }, otherKey)
    expect(foreign.status).toBe(404)
    expect(foreign.body.error.type).toBe("not_found")
    expect((await upload({ artifactId: "art_nope", content: [] })).status).toBe(404)
  })

  it("hides another key's artifacts (404) and deletes every version once", async () => {
    const id = (await upload({ bytes: "a,b\n1,2\n3,4\n", mimeType: "text/csv", summary: "to delete" })).body.reference.artifactId
    await upload({ artifactId: id, bytes: "a,b\n5,6\n", mimeType: "text/csv" })
    for (const [method, path, body] of [["GET", `/v1/artifacts/${id}`], ["POST", `/v1/artifacts/${id}/query`, {}], ["DELETE", `/v1/artifacts/${id}`]] as const) {
      const res = await call(method, path, body, otherKey)
      expect(res.status).toBe(404)
      expect(res.body).toEqual({ error: { type: "not_found", message: `No artifact with id ${id}` } })
    }
    const deleted = await call("DELETE", `/v1/artifacts/${id}`)
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ deleted: true, artifactId: id })
    expect((await call("DELETE", `/v1/artifacts/${id}`)).status).toBe(404)
    expect((await call("GET", `/v1/artifacts/${id}`)).status).toBe(404)
    expect((await query(id, {})).status).toBe(404)
    expect((await query(id, { version: 1 })).status).toBe(404)
    // Uploading the deleted content again makes a new artifact.
    const again = await upload({ bytes: "a,b\n1,2\n3,4\n", mimeType: "text/csv" })
    expect(again.status).toBe(201)
    expect(again.body.reference.artifactId).not.toBe(id)
    if (engine.name === "postgres") {
      // The sweeper removes the deleted version's rows in the background.
      const url = env.DATABASE_URL
      const leftover = () => Number(execFileSync("psql", [url, "-tAc", "SELECT count(*) FROM artifact_contents WHERE status = 'deleted'"]).toString().trim())
      const deadline = Date.now() + 20_000
      while (leftover() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
      expect(leftover()).toBe(0)
    }
  })

  it("refuses bad uploads with 400 naming the field", async () => {
    expectInvalid(await upload({ mimeType: "text/csv" }), "bytes")
    expectInvalid(await upload({ bytes: 12 }), "bytes")
    expectInvalid(await upload({ bytes: "a", content: "b" }), "content")
    expectInvalid(await upload({ bytes: "a", provenance: { method: "guess" } }), "provenance.method")
    expectInvalid(await upload({ bytes: "a", provenance: { lossless: "yes" } }), "provenance.lossless")
    expectInvalid(await upload({ bytes: "a", rowCount: -1 }), "rowCount")
    expectInvalid(await upload({ bytes: "a", rowCount: 1e300 }), "rowCount")
    expectInvalid(await upload({ bytes: "a,b\n1,2\n", mimeType: "text/csv", rowCount: 2 }), "rowCount")
    expectInvalid(await upload({ bytes: "a", summary: 5 }), "summary")
    expectInvalid(await upload({ bytes: "a", schema: "not json" }), "schema")
    expectInvalid(await upload({ bytes: "a", schema: JSON.stringify({ format: "xml" }) }), "schema.format")
    expectInvalid(await upload({ bytes: "a,\"b\n1", mimeType: "text/csv" }), "bytes")
    expectInvalid(await upload({ bytes: "[1,", mimeType: "application/json" }), "bytes")
    expectInvalid(await upload({ bytes: "a,b\n1,2\n", mimeType: "text/csv", schema: JSON.stringify({ columns: [{ name: "c" }] }) }), "schema.columns[0].name")
    expectInvalid(await upload({ content: [{ a: "x\u0000" }], mimeType: "application/json" }), "content")
    expectInvalid(await upload({ bytes: "x", summary: "nul\u0000" }), "summary")
    expectInvalid(await upload('{"bytes": "\\ud800"}'), "bytes")
    expectInvalid(await upload("{not json"), "Malformed JSON")
    expectInvalid(await upload("[1]"), "JSON object")
    // Deep nesting: content that cannot be serialized is a 400; rows too deep for jsonb stay text.
    const deep = (n: number) => "[".repeat(n) + "]".repeat(n)
    expectInvalid(await upload(`{"content": ${deep(20_000)}}`), "content")
    const deepRows = await upload({ bytes: `[{"a": ${deep(100)}}]` })
    expect(deepRows.status).toBe(201)
    expect((await call("GET", `/v1/artifacts/${deepRows.body.reference.artifactId}`)).body.descriptor.shape.kind).toBe("text")
    expectInvalid(await upload({ bytes: `[{"b": ${deep(100)}}]`, mimeType: "application/json" }), "bytes")
    expectInvalid(await query(people, `{"filter": [{"field": "a", "op": "eq", "value": ${deep(20_000)}}]}`), "filter[0].value")
  })

  it("refuses bad queries with 400 naming the field", async () => {
    expectInvalid(await query(people, { filter: [{ field: "age", op: "like", value: 1 }] }), "filter[0].op")
    expectInvalid(await query(people, { filter: [{ field: 3, op: "eq", value: 1 }] }), "filter[0].field")
    expectInvalid(await query(people, { filter: { field: "age", op: "eq", value: 1 } }), "filter")
    expectInvalid(await query(people, { filter: [{ field: "age", op: "in", value: 10 }] }), "filter[0].value")
    expectInvalid(await query(people, { offset: -1 }), "offset")
    expectInvalid(await query(people, { limit: 2.5 }), "limit")
    expectInvalid(await query(people, { limit: 1001 }), "limit")
    expectInvalid(await query(people, { range: { rowStart: 1.5 } }), "range.rowStart")
    expectInvalid(await query(people, { version: 99 }), "version")
    expectInvalid(await query(people, { version: 2 ** 53 - 1 }), "version")
    expect((await query(people, { offset: 2 ** 53 - 1, range: { rowStart: 2 ** 53 - 1 } })).body.result).toMatchObject({ rows: [], totalMatched: 0 })
    expectInvalid(await query(people, { sort: [{ field: "age", dir: "sideways" }] }), "sort[0].dir")
    expectInvalid(await query(people, { select: [1] }), "select[0]")
    expectInvalid(await query(people, "{oops"), "Malformed JSON")
    expectInvalid(await query(people, { filter: [{ field: "name", op: "eq", value: "nul\u0000" }] }), "filter[0].value")
    expectInvalid(await query(people, { search: "\u0000" }), "search")
    // Ids that cannot exist are simply unknown, never a storage error.
    for (const id of ["art_%00", "art_x%27%3B", "nope", "%F0%9F%98%80"]) {
      expect((await call("GET", `/v1/artifacts/${id}`)).status).toBe(404)
      expect((await query(id, {})).status).toBe(404)
      expect((await call("DELETE", `/v1/artifacts/${id}`)).status).toBe(404)
    }
    expect((await upload({ artifactId: "art_\u0000", bytes: "x" })).status).toBe(404)
    expect((await query(people, "")).status).toBe(200)
  })

  it("answers 401, 403 (artifacts surface), 405 and 413 in the flat shape", async () => {
    const anonymous = await fetch(`${gw.baseUrl}/v1/artifacts/${people}`)
    expect(anonymous.status).toBe(401)
    expect((await anonymous.json() as any).error.type).toBe("unauthorized")
    for (const [method, path, body] of [["POST", "/v1/artifacts", { bytes: "x" }], ["GET", `/v1/artifacts/${people}`], ["POST", `/v1/artifacts/${people}/query`, {}], ["DELETE", `/v1/artifacts/${people}`]] as const) {
      const res = await call(method, path, body, statesOnlyKey)
      expect(res.status).toBe(403)
      expect(res.body.error.type).toBe("permission_error")
    }
    expect((await call("GET", `/v1/artifacts/${people}`)).status).toBe(200)
    const wrong = await call("PUT", `/v1/artifacts/${people}`, {})
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("GET, DELETE")

    const overArtifact = await upload({ bytes: "x".repeat(3 * MiB + 1) })
    expect(overArtifact.status).toBe(413)
    expect(overArtifact.body.error).toEqual({ type: "request_too_large", message: expect.stringContaining("bytes: the content is 3145729 bytes") })
    if (engine.name === "embedded") {
      // Counted while parsing, before storage is reached: on one engine (a million rows to parse).
      const manyRows = await upload({ bytes: "n\n" + "1\n".repeat(1_000_001), mimeType: "text/csv" })
      expect(manyRows.status).toBe(413)
      expect(manyRows.body.error).toEqual({ type: "request_too_large", message: expect.stringContaining("at most 1,000,000") })
    }
    const overBody = await upload({ bytes: "x".repeat(8 * MiB) })
    expect(overBody.status).toBe(413)
    expect(overBody.body.error.type).toBe("request_too_large")
    // The gateway still serves after refusing them.
    expect((await call("GET", `/v1/artifacts/${people}`)).status).toBe(200)
  })

  it("survives a restart: content, versions and dedupe come back from the database", async () => {
    const before = await query(people, { sort: [{ field: "age", dir: "desc" }], limit: 2 })
    expect(await gw.stop()).toBe(0)
    gw = await startInProcessGateway(env)
    const after = await query(people, { sort: [{ field: "age", dir: "desc" }], limit: 2 })
    expect(after.status).toBe(200)
    expect(after.body).toEqual(before.body)
    expect((await upload({ bytes: PEOPLE, mimeType: "text/csv" })).body).toMatchObject({ deduped: true, reference: { artifactId: people, version: 1 } })
  })
})
