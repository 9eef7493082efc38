/**
 * Idempotent creates (replay, concurrent duplicates, a changed body, key length) and tenant
 * isolation on every run endpoint, over real HTTP on every engine.
 */
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"
import { client, keyFor, readSse, type RunsClient } from "./support.ts"

describe.each(engines())("idempotency and tenants ($name)", (engine) => {
  let gw: SharedGateway
  let runs: RunsClient
  let other: RunsClient
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    runs = client(gw.baseUrl, gw.apiKey!)
    other = client(gw.baseUrl, await keyFor(gw, "other tenant"))
  })

  it("replays a repeated create with the original response and idempotency-replayed: true", async () => {
    const body = { model: "pico", input: "hi", metadata: { a: 1, b: [1, 2] } }
    const first = await runs.create(body, { "idempotency-key": "order-1" })
    expect(first.status).toBe(202)
    expect(first.headers.get("idempotency-replayed")).toBeNull()
    await runs.waitFor(first.body.run.id, (r) => r.status === "completed")
    // same body with keys in another order is the same request
    const again = await runs.create({ metadata: { b: [1, 2], a: 1 }, input: "hi", model: "pico" }, { "idempotency-key": "order-1" })
    expect(again.status).toBe(200)
    expect(again.headers.get("idempotency-replayed")).toBe("true")
    expect(again.body).toEqual(first.body)
    const manual = await runs.create({ metadata: { m: 1 } }, { "idempotency-key": "order-2" })
    expect(manual.status).toBe(201)
    expect((await runs.create({ metadata: { m: 1 } }, { "idempotency-key": "order-2" })).body).toEqual(manual.body)
    // keys are per API key: the other tenant's same key is a new run
    const theirs = await other.create(body, { "idempotency-key": "order-1" })
    expect(theirs.status).toBe(202)
    expect(theirs.body.run.id).not.toBe(first.body.run.id)
  })

  it("refuses the same key with a different body (422) and a key over 200 characters (400)", async () => {
    await runs.create({ metadata: { v: 1 } }, { "idempotency-key": "changed" })
    const changed = await runs.create({ metadata: { v: 2 } }, { "idempotency-key": "changed" })
    expect(changed.status).toBe(422)
    expect(changed.body.error.type).toBe("invalid_request")
    expect(changed.body.error.message).toContain("Idempotency-Key")
    const long = await runs.create({}, { "idempotency-key": "k".repeat(201) })
    expect(long.status).toBe(400)
    expect(long.body.error.message).toContain("Idempotency-Key")
    expect((await runs.create({}, { "idempotency-key": "k".repeat(200) })).status).toBe(201)
  })

  it("creates one run for concurrent duplicates", async () => {
    const body = { model: "pico", input: "once", metadata: { race: true } }
    const answers = await Promise.all(Array.from({ length: 12 }, () => runs.create(body, { "idempotency-key": "race-1" })))
    expect(answers.every((a) => a.status === 202 || a.status === 200)).toBe(true)
    expect(answers.filter((a) => a.status === 202).length).toBe(1)
    expect(new Set(answers.map((a) => a.body.run.id)).size).toBe(1)
    const listed = (await runs.list("?limit=100")).body.data.filter((r: any) => r.metadata.race === true)
    expect(listed.length).toBe(1)
  })

  it("hides another key's runs on every endpoint (404) and in lists", async () => {
    const mine = (await runs.create({ model: "pico", input: "hi", metadata: { secret: true } })).body.run
    const manual = (await runs.create({})).body.run
    const notFound = async (answer: Promise<{ status: number; body: any }>) => {
      const { status, body } = await answer
      expect(status).toBe(404)
      expect(body.error.type).toBe("not_found")
    }
    await notFound(other.get(mine.id))
    await notFound(other.append(manual.id, [{ type: "intrusion" }]))
    await notFound(other.cancel(manual.id))
    await notFound(other.create({ parentRunId: mine.id }))
    const sse = await readSse(`${gw.baseUrl}/v1/agent-runs/${mine.id}/events`, other.key)
    expect(sse.status).toBe(404)
    expect((await other.list(`?parentRunId=${mine.id}`)).body.data).toEqual([])
    expect((await other.list("?limit=100")).body.data.some((r: any) => r.id === mine.id || r.id === manual.id)).toBe(false)
    expect((await other.list(`?after=${mine.id}`)).status).toBe(404)
    // nothing leaked into my run
    expect((await runs.get(manual.id)).body.run).toMatchObject({ status: "running", lastSeq: 0 })
  })

  it("refuses a key without the runs surface (403)", async () => {
    const limited = await gw.admin("POST", "/admin/v1/keys", { name: "states only", permissions: { surfaces: ["states"] } })
    const res = await client(gw.baseUrl, ((await limited.json()) as { key: string }).key).create({})
    expect(res.status).toBe(403)
    expect(res.body.error.type).toBe("permission_error")
  })
})

