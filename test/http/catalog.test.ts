/** The catalog endpoints over real HTTP, on every storage engine. */
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

describe.each(engines())("catalog endpoints ($name)", (engine) => {
  let gw: SharedGateway
  beforeAll(async () => {
    gw = await sharedGateway(engine)
  })

  it("lists non-preview models in the OpenAI list shape, cacheable, without a key", async () => {
    const res = await fetch(`${gw.baseUrl}/v1/models`)
    expect(res.status).toBe(200)
    expect(res.headers.get("cache-control")).toBe("public, max-age=300")
    expect(res.headers.get("content-type")).toContain("application/json")
    expect(res.headers.get("x-request-id")).toMatch(/^req_/)
    expect(res.headers.get("request-id")).toBe(res.headers.get("x-request-id"))
    const body = await res.json() as { object: string; data: Array<Record<string, any>> }
    expect(body.object).toBe("list")
    const ids = body.data.map((m) => m.id)
    expect(ids).toContain("svc-atlas-1")
    expect(ids).not.toContain("svc-atlas-2-preview")
    expect(ids.filter((id) => id.startsWith("svc-embed-"))).toHaveLength(7)
    const atlas = body.data.find((m) => m.id === "svc-atlas-1")!
    expect(atlas).toMatchObject({
      object: "model", owned_by: "svc", tier: "frontier", context_window: 200000, max_output: 32000,
      capabilities: { tools: true, reasoning: true, vision: true, documents: true },
      pricing_usd_per_mtok: { input: 3, output: 15, cached_input: 0.3 }
    })
    expect(Array.isArray(atlas.aliases) && Array.isArray(atlas.supported_parameters) && Array.isArray(atlas.native_wires)).toBe(true)
    // Backends and placements never appear in the catalog.
    expect(JSON.stringify(body)).not.toMatch(/simulator|placement|atlas-a|upstream/)
    expect(body.data.some((m) => m.max_output === null)).toBe(true)
    expect(body.data.some((m) => m.pricing_usd_per_mtok.cached_input === null)).toBe(true)
  })

  it("resolves canonical ids, aliases and bare ids; preview models by id; not compatibility handles", async () => {
    for (const id of ["svc-atlas-1", "atlas", "atlas-1"]) {
      const res = await fetch(`${gw.baseUrl}/v1/models/${id}`)
      expect(res.status, id).toBe(200)
      expect((await res.json() as { id: string }).id).toBe("svc-atlas-1")
    }
    const preview = await fetch(`${gw.baseUrl}/v1/models/svc-atlas-2-preview`)
    expect(preview.status).toBe(200)
    for (const id of ["gpt-4o", "claude-sonnet-4-5", "nope"]) {
      const res = await fetch(`${gw.baseUrl}/v1/models/${id}`)
      expect(res.status, id).toBe(404)
      const body = await res.json() as { error: { type: string; message: string } }
      expect(body.error.type).toBe("not_found")
      expect(body.error.message).toContain(id)
    }
  })

  it("answers in the Messages dialect's shape with its version header, paged", async () => {
    const headers = { "anthropic-version": "2023-06-01" }
    const first = await fetch(`${gw.baseUrl}/v1/models?limit=3`, { headers })
    const page1 = await first.json() as { data: Array<Record<string, string>>; has_more: boolean; first_id: string; last_id: string }
    expect(page1.data).toHaveLength(3)
    expect(page1.has_more).toBe(true)
    expect(page1.data[0]).toEqual({ type: "model", id: "svc-atlas-1", display_name: "Atlas 1 (simulated)", created_at: "2026-01-01T00:00:00.000Z" })
    expect(page1.first_id).toBe(page1.data[0].id)
    expect(page1.last_id).toBe(page1.data[2].id)
    const all: Array<string> = page1.data.map((m) => m.id)
    let cursor = page1.last_id
    for (;;) {
      const res = await fetch(`${gw.baseUrl}/v1/models?limit=3&after_id=${cursor}`, { headers: { "messages-version": "1" } })
      const page = await res.json() as typeof page1
      all.push(...page.data.map((m) => m.id))
      if (!page.has_more) break
      cursor = page.last_id
    }
    const openai = await (await fetch(`${gw.baseUrl}/v1/models`)).json() as { data: Array<{ id: string }> }
    expect(all).toEqual(openai.data.map((m) => m.id))
    const before = await (await fetch(`${gw.baseUrl}/v1/models?limit=2&before_id=${all[3]}`, { headers })).json() as typeof page1
    expect(before.data.map((m) => m.id)).toEqual(all.slice(1, 3))
    const one = await (await fetch(`${gw.baseUrl}/v1/models/orion`, { headers })).json()
    expect(one).toMatchObject({ type: "model", id: "svc-orion-2" })
    const bad = await fetch(`${gw.baseUrl}/v1/models?limit=0`, { headers })
    expect(bad.status).toBe(400)
  })

  it("answers unknown routes with 404 and wrong methods with 405 + Allow", async () => {
    const unknown = await fetch(`${gw.baseUrl}/v1/unknown`)
    expect(unknown.status).toBe(404)
    expect((await unknown.json() as { error: { type: string } }).error.type).toBe("not_found")
    const wrong = await fetch(`${gw.baseUrl}/v1/models`, { method: "DELETE" })
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("GET")
    expect(wrong.headers.get("x-request-id")).toMatch(/^req_/)
    const flat = await fetch(`${gw.baseUrl}/admin/v1/keys/x/y`)
    expect(flat.status).toBe(404)
    expect(await flat.json()).toEqual({ error: { type: "not_found", message: "Unknown route: GET /admin/v1/keys/x/y" } })
  })

  it("answers an unknown path in its family's error shape, read from the routes (operational endpoints flat)", async () => {
    const bodyOf = async (path: string) => {
      const response = await fetch(`${gw.baseUrl}${path}`)
      expect(response.status, path).toBe(404)
      return response.json()
    }
    for (const path of ["/metrics/x", "/healthz/x", "/readyz/x", "/v1/states/a/b/c"]) {
      expect(await bodyOf(path), path).toEqual({ error: { type: "not_found", message: `Unknown route: GET ${path}` } })
    }
    expect(await bodyOf("/v1/messages/nope")).toMatchObject({ type: "error", error: { type: "not_found" } })
    expect(await bodyOf("/v1/chat/nope")).toMatchObject({ error: { type: "not_found", param: null, code: null } })
    // The router reads a trailing slash as none: the route answers, in its own shape.
    const slashed = await fetch(`${gw.baseUrl}/metrics/?limit=%00`)
    expect(slashed.status).toBe(401)
    expect(Object.keys((await slashed.json() as { error: object }).error).sort()).toEqual(["message", "type"])
  })
})
