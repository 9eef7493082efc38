/**
 * Keys, the admin API and authentication over real HTTP, on every storage engine: first-start
 * bootstrap, shown-once secrets, revocation at once, permissions, restarts keeping every key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { type GatewayHandle, startGateway } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

const json = async (res: Response) => ({ status: res.status, body: await res.json() as any, headers: res.headers })

describe.concurrent.each(engines())("keys, admin API and authentication ($name)", (engine) => {
  let gw: GatewayHandle
  let env: Record<string, string>
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await engine.setup()
    env = { ...setup.env, GATEWAY_MAX_BODY_BYTES: "4096" }
    cleanup = setup.cleanup
    gw = await startGateway(env)
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const bearer = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" })

  it("prints one API key on first start; it works, and keys are stored only as hashes", inOrder, async () => {
    expect(gw.apiKey).toMatch(/^svc_[0-9A-Za-z]{43,}$/)
    const created = await json(await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: bearer(gw.apiKey!), body: JSON.stringify({ value: 1 }) }))
    expect(created.status).toBe(201)
    const list = await json(await gw.admin("GET", "/admin/v1/keys"))
    expect(list.status).toBe(200)
    expect(list.body.data).toHaveLength(1)
    expect(JSON.stringify(list.body)).not.toContain(gw.apiKey!.slice(8, -4))
    expect(list.body.data[0]).toMatchObject({ name: "default", plan: "free", revoked: false })
  })

  it("admin API needs the admin token (flat 401), never returns secrets after creation", inOrder, async () => {
    const noToken = await json(await fetch(`${gw.baseUrl}/admin/v1/keys`))
    expect(noToken.status).toBe(401)
    expect(noToken.body.error.type).toBe("unauthorized")
    const apiKeyAsAdmin = await json(await fetch(`${gw.baseUrl}/admin/v1/keys`, { headers: bearer(gw.apiKey!) }))
    expect(apiKeyAsAdmin.status).toBe(401)
    const created = await json(await gw.admin("POST", "/admin/v1/keys", { name: "ci", plan: "pro" }))
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: "ci", plan: "pro", permissions: { surfaces: null, models: null } })
    expect(created.body.key).toMatch(/^svc_/)
    expect(created.body.id).toMatch(/^key_/)
    expect(Date.parse(created.body.createdAt)).not.toBeNaN()
    const one = await json(await gw.admin("GET", `/admin/v1/keys/${created.body.id}`))
    expect(one.body.key).toBeUndefined()
    expect(JSON.stringify(one.body)).not.toContain(created.body.key)
  })

  it("validates admin input and names the field", inOrder, async () => {
    const badPlan = await json(await gw.admin("POST", "/admin/v1/keys", { plan: "gold" }))
    expect(badPlan.status).toBe(400)
    expect(badPlan.body.error).toMatchObject({ type: "invalid_request" })
    expect(badPlan.body.error.message).toContain("plan")
    const badSurface = await json(await gw.admin("POST", "/admin/v1/keys", { permissions: { surfaces: ["teleport"] } }))
    expect(badSurface.status).toBe(400)
    expect(badSurface.body.error.message).toContain("permissions.surfaces[0]")
    const malformed = await json(await fetch(`${gw.baseUrl}/admin/v1/keys`, { method: "POST", headers: bearer(gw.adminToken), body: "{nope" }))
    expect(malformed.status).toBe(400)
    expect(malformed.body.error.message).toMatch(/Malformed JSON/)
    const missing = await json(await gw.admin("PATCH", "/admin/v1/keys/key_doesnotexist", { plan: "pro" }))
    expect(missing.status).toBe(404)
    expect(missing.body.error.type).toBe("not_found")
  })

  it("revocation takes effect at once; PATCH changes plan and permissions", inOrder, async () => {
    const created = (await json(await gw.admin("POST", "/admin/v1/keys", { name: "temp" }))).body
    const use = () => fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: bearer(created.key), body: "{}" })
    expect((await use()).status).toBe(201)
    const patched = await json(await gw.admin("PATCH", `/admin/v1/keys/${created.id}`, { plan: "pro", permissions: { surfaces: ["chat"] } }))
    expect(patched.body).toMatchObject({ plan: "pro", permissions: { surfaces: ["chat"], models: null } })
    const forbidden = await json(await use())
    expect(forbidden.status).toBe(403)
    expect(forbidden.body.error.type).toBe("permission_error")
    const revoked = await json(await gw.admin("DELETE", `/admin/v1/keys/${created.id}`))
    expect(revoked.body).toMatchObject({ id: created.id, revoked: true })
    const after = await json(await use())
    expect(after.status).toBe(401)
    expect(after.body).toEqual({ error: { type: "unauthorized", message: "Invalid API key" } })
  })

  it("flat surfaces take Bearer only and answer 401 unauthorized", inOrder, async () => {
    const none = await json(await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", body: "{}" }))
    expect(none.status).toBe(401)
    expect(none.body.error.type).toBe("unauthorized")
    const xApiKey = await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: { "x-api-key": gw.apiKey! }, body: "{}" })
    expect(xApiKey.status).toBe(401)
    const wrong = await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: bearer("svc_not_a_real_key"), body: "{}" })
    expect(wrong.status).toBe(401)
  })

  it("answers 413 over GATEWAY_MAX_BODY_BYTES, in the surface's shape", inOrder, async () => {
    const big = JSON.stringify({ value: "x".repeat(10_000) })
    const res = await json(await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: bearer(gw.apiKey!), body: big }))
    expect(res.status).toBe(413)
    expect(res.body.error.type).toBe("request_too_large")
    // The server is still healthy afterwards.
    expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
  })

  it("keeps every key across a restart, and stops cleanly on SIGTERM", inOrder, async () => {
    const before = (await json(await gw.admin("GET", "/admin/v1/keys"))).body.data
    expect(await gw.stop("SIGTERM")).toBe(0)
    gw = await startInProcessGateway(env) // the restart reads what the stopped process stored
    expect(gw.apiKey).toBeUndefined() // not printed again
    expect(gw.output()).not.toContain("admin token created")
    const after = (await json(await gw.admin("GET", "/admin/v1/keys"))).body.data
    expect(after).toEqual(before)
    const secret = (await json(await gw.admin("POST", "/admin/v1/keys", {}))).body.key
    expect((await fetch(`${gw.baseUrl}/v1/states`, { method: "POST", headers: bearer(secret), body: "{}" })).status).toBe(201)
  })
})
