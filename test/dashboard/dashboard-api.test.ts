/**
 * The dashboard's API over HTTP on the real gateway, on both engines: sign-in and its cookie,
 * CSRF, what operators and key holders may see (another key's data is 404, operator pages 403),
 * sign-out, the per-day usage report against the admin API's totals, and the artifact views
 * (a key holder's own, the operator's across keys; descriptors and queries as /v1/artifacts answers).
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { dashboardClient, type DashboardClient, errorOf, signIn } from "./support.ts"

describe.concurrent.each(engines())("dashboard API ($name)", (engine) => {
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  let operator: DashboardClient
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    gw = await startInProcessGateway({
      ...setup.env,
      ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR, (config) => {
        // A plan whose windows refill slowly enough to watch (6 requests per minute: one per 10 s).
        config.plans.slow = { allowanceUsd: 10, rpm: 6, tpm: 60_000, concurrency: 2 }
        // orion (which no other test here uses) answers slowly, and batches run one request at a
        // time: a batch on orion is still running when the test cancels it.
        const orion = config.models.find((m: { id: string }) => m.id === "svc-orion-2")
        for (const p of orion.placements) p.simulator = { ttftMs: 800, tokensPerSecond: 20 }
        orion.equivalents = []
      }),
      GATEWAY_BATCH_CONCURRENCY: "1",
      GATEWAY_BATCH_POLL_MS: "50"
    })
    operator = await dashboardClient(gw.baseUrl, gw.adminToken)
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const createKey = async (body: unknown = {}) => {
    const res = await operator.call("POST", "/keys", { body })
    expect(res.status).toBe(201)
    return (await res.json()) as { id: string; key: string; hint: string }
  }

  it("refuses a wrong token with 401 and sets no cookie", inOrder, async () => {
    for (const token of ["wrong", "svc_notakey", `${gw.adminToken}x`]) {
      const res = await signIn(gw.baseUrl, token)
      expect(res.status).toBe(401)
      expect(res.headers.get("set-cookie")).toBeNull()
      expect(await errorOf(res)).toMatchObject({ type: "unauthorized", message: expect.stringContaining("neither the admin token nor an active API key") })
    }
  })

  it("keeps the token out of the cookie: a random session id, HttpOnly, SameSite=Strict, scoped to /dashboard; Secure behind HTTPS", inOrder, async () => {
    const res = await signIn(gw.baseUrl, gw.adminToken)
    expect(res.status).toBe(200)
    const cookie = res.headers.get("set-cookie")!
    expect(cookie).toMatch(/^svc_dashboard=[0-9A-Za-z]{40,}; Path=\/dashboard; HttpOnly; SameSite=Strict; Max-Age=43200$/)
    expect(cookie).not.toContain(gw.adminToken)
    expect(res.headers.get("cache-control")).toBe("no-store")
    const body = await res.json()
    expect(body).toMatchObject({ role: "operator", key: null, csrfToken: expect.stringMatching(/^[0-9A-Za-z]{40,}$/) })
    expect(JSON.stringify(body)).not.toContain(gw.adminToken)
    const https = await signIn(gw.baseUrl, gw.adminToken, { "x-forwarded-proto": "https" })
    expect(https.headers.get("set-cookie")).toMatch(/; Secure$/)
  })

  it("refuses sign-in that is cross-site or not JSON (no login CSRF)", inOrder, async () => {
    const crossSite = await signIn(gw.baseUrl, gw.adminToken, { "sec-fetch-site": "cross-site" })
    expect(crossSite.status).toBe(403)
    expect(crossSite.headers.get("set-cookie")).toBeNull()
    const form = await fetch(`${gw.baseUrl}/dashboard/api/session`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `token=${gw.adminToken}`
    })
    expect(form.status).toBe(400)
    expect(await errorOf(form)).toMatchObject({ type: "invalid_request", message: expect.stringContaining("content-type") })
  })

  it("refuses a change without the session's CSRF token, or with another session's, and changes nothing", inOrder, async () => {
    const before = ((await (await operator.call("GET", "/keys")).json()) as { data: Array<unknown> }).data.length
    const other = await dashboardClient(gw.baseUrl, gw.adminToken)
    for (const csrf of [null, "", "forged", other.csrfToken]) {
      const res = await operator.call("POST", "/keys", { body: { name: "csrf" }, csrf })
      expect(res.status).toBe(403)
      expect(await errorOf(res)).toMatchObject({ type: "permission_error", message: expect.stringContaining("CSRF") })
    }
    const crossSite = await operator.call("POST", "/keys", { body: { name: "csrf" }, headers: { "sec-fetch-site": "cross-site" } })
    expect(crossSite.status).toBe(403)
    const after = ((await (await operator.call("GET", "/keys")).json()) as { data: Array<unknown> }).data.length
    expect(after).toBe(before)
    // and with it, the same request works
    expect((await operator.call("POST", "/keys", { body: { name: "with csrf" } })).status).toBe(201)
  })

  it("answers 401 without a session, with an unknown cookie, and after sign-out", inOrder, async () => {
    expect((await fetch(`${gw.baseUrl}/dashboard/api/keys`)).status).toBe(401)
    expect((await fetch(`${gw.baseUrl}/dashboard/api/keys`, { headers: { cookie: "svc_dashboard=nope" } })).status).toBe(401)
    const session = await dashboardClient(gw.baseUrl, gw.adminToken)
    expect((await session.call("GET", "/keys")).status).toBe(200)
    const out = await session.call("DELETE", "/session")
    expect(out.status).toBe(200)
    expect(out.headers.get("set-cookie")).toMatch(/^svc_dashboard=; .*Max-Age=0/)
    const after = await session.call("GET", "/keys")
    expect(after.status).toBe(401)
    expect((await errorOf(after)).message).toContain("signed out")
  })

  it("creates, changes, tops up and revokes keys with the admin API's rules; the secret is in the create answer only", inOrder, async () => {
    const created = await createKey({ name: "svc-a", plan: "pro", permissions: { surfaces: ["chat"], models: ["svc-nova-*"] } })
    expect(created.key).toMatch(/^svc_/)
    const list = await (await operator.call("GET", "/keys")).text()
    expect(list).not.toContain(created.key)
    const row = (JSON.parse(list) as { data: Array<{ id: string; plan: string; allowance: unknown; permissions: unknown }> }).data.find((k) => k.id === created.id)!
    expect(row).toMatchObject({
      plan: "pro",
      permissions: { surfaces: ["chat"], models: ["svc-nova-*"] },
      allowance: { kind: "monthly", limitUsd: "100.000000", usedUsd: "0.000000", remainingUsd: "100.000000" }
    })
    const bad = await operator.call("PATCH", `/keys/${created.id}`, { body: { plan: "gold" } })
    expect(bad.status).toBe(400)
    expect(await errorOf(bad)).toMatchObject({ type: "invalid_request", message: expect.stringContaining("plan") })
    expect((await operator.call("PATCH", `/keys/${created.id}`, { body: { plan: "prepaid" } })).status).toBe(200)
    const credits = await operator.call("POST", `/keys/${created.id}/credits`, { body: { amountUsd: 7.5 } })
    expect(credits.status).toBe(201)
    const afterCredits = ((await (await operator.call("GET", "/keys")).json()) as { data: Array<{ id: string; allowance: unknown }> }).data
    expect(afterCredits.find((k) => k.id === created.id)!.allowance).toMatchObject({ kind: "credits", remainingUsd: "7.500000" })
    expect((await operator.call("DELETE", `/keys/${created.id}`)).status).toBe(200)
    const sdk = new OpenAI({ apiKey: created.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    await expect(sdk.chat.completions.create({ model: "svc-nova-mini", messages: [{ role: "user", content: "hi" }] }))
      .rejects.toMatchObject({ status: 401 })
  })

  it("reports usage per day and model in SQL, matching the admin API's totals", inOrder, async () => {
    const key = await createKey({ name: "usage" })
    const sdk = new OpenAI({ apiKey: key.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    for (const model of ["svc-nova-mini", "svc-nova-mini", "svc-pico-1"]) {
      await sdk.chat.completions.create({ model, messages: [{ role: "user", content: "Tell me about rivers" }] })
    }
    const res = await operator.call("GET", `/usage?keyId=${key.id}`)
    expect(res.status).toBe(200)
    const report = (await res.json()) as {
      days: Array<string>; daily: Array<{ day: string; model: string; requests: number; costUsd: string }>
      byKey: Array<{ keyId: string; requests: number; costUsd: string }>; totals: { requests: number; costUsd: string }
    }
    const today = new Date().toISOString().slice(0, 10)
    expect(report.days).toContain(today)
    expect(report.daily.map((d) => [d.day, d.model, d.requests])).toEqual([[today, "svc-nova-mini", 2], [today, "svc-pico-1", 1]])
    const admin = (await (await gw.admin("GET", `/admin/v1/usage?keyId=${key.id}`)).json()) as { totalCostUsd: string }
    expect(report.totals).toMatchObject({ requests: 3, costUsd: admin.totalCostUsd })
    expect(Number(report.totals.costUsd)).toBeGreaterThan(0)
    expect(report.byKey).toEqual([expect.objectContaining({ keyId: key.id, requests: 3, costUsd: admin.totalCostUsd })])
    // a past month has no rows; a bad month is a 400 naming the field
    const empty = (await (await operator.call("GET", `/usage?keyId=${key.id}&month=2020-01`)).json()) as { daily: Array<unknown>; days: Array<string> }
    expect(empty).toMatchObject({ daily: [], days: expect.arrayContaining(["2020-01-31"]) })
    const bad = await operator.call("GET", "/usage?month=2020-13")
    expect(bad.status).toBe(400)
    expect(await errorOf(bad)).toMatchObject({ message: expect.stringContaining("month") })
  })

  it("shows a key holder only their own key: 403 on operator pages, 404 for another key's usage and runs", inOrder, async () => {
    const mine = await createKey({ name: "holder" })
    const theirs = await createKey({ name: "someone else" })
    const post = (secret: string, body: unknown) =>
      fetch(`${gw.baseUrl}/v1/agent-runs`, { method: "POST", headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" }, body: JSON.stringify(body) })
    const myRun = ((await (await post(mine.key, { metadata: { who: "me" } })).json()) as { run: { id: string } }).run.id
    const theirRun = ((await (await post(theirs.key, { metadata: { who: "them" } })).json()) as { run: { id: string } }).run.id
    await new OpenAI({ apiKey: theirs.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 }).chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })

    const holder = await dashboardClient(gw.baseUrl, mine.key)
    expect(holder.role).toBe("key")
    for (const [method, path] of [["GET", "/keys"], ["GET", "/queues"], ["GET", "/queues/stream"], ["POST", "/keys"], ["DELETE", `/keys/${theirs.id}`]]) {
      const res = await holder.call(method, path, method === "POST" ? { body: {} } : {})
      expect(res.status, `${method} ${path}`).toBe(403)
    }
    expect((await holder.call("GET", `/usage?keyId=${theirs.id}`)).status).toBe(404)
    const usage = (await (await holder.call("GET", "/usage")).json()) as { keyId: string; byKey: Array<{ keyId: string }>; totals: { requests: number } }
    expect(usage).toMatchObject({ keyId: mine.id, totals: { requests: 0 } })
    expect(usage.byKey.map((k) => k.keyId)).toEqual([mine.id])
    const runs = (await (await holder.call("GET", "/runs")).json()) as { data: Array<{ id: string }> }
    expect(runs.data.map((r) => r.id)).toEqual([myRun])
    expect((await holder.call("GET", `/runs/${theirRun}`)).status).toBe(404)
    expect((await holder.call("GET", `/runs/${theirRun}/events`)).status).toBe(404)
    expect((await holder.call("POST", `/runs/${theirRun}/cancel`, { body: {} })).status).toBe(404)
    const me = (await (await holder.call("GET", "/my-key")).json()) as Record<string, unknown>
    expect(me).toMatchObject({
      key: { id: mine.id, name: "holder" },
      allowance: { kind: "monthly" },
      rateLimits: { requestsPerMinute: { limit: expect.any(Number) }, concurrency: { inFlight: 0 } }
    })
    expect(JSON.stringify(me)).not.toContain(theirs.id)
    // The operator sees both runs and can cancel the key holder's.
    const all = (await (await operator.call("GET", "/runs")).json()) as { data: Array<{ id: string; keyId: string }> }
    expect(all.data.map((r) => r.id)).toEqual(expect.arrayContaining([myRun, theirRun]))
    const cancelled = await operator.call("POST", `/runs/${myRun}/cancel`, { body: {} })
    expect(((await cancelled.json()) as { run: { status: string } }).run.status).toBe("cancelled")
    // Revoking the key ends its dashboard session.
    expect((await operator.call("DELETE", `/keys/${mine.id}`)).status).toBe(200)
    const revoked = await holder.call("GET", "/my-key")
    expect(revoked.status).toBe(401)
    expect((await errorOf(revoked)).message).toContain("revoked")
  })

  it("shows a key holder the rate-limit windows the meter takes from, without taking anything", inOrder, async () => {
    const key = await createKey({ name: "limited", plan: "slow" })
    const holder = await dashboardClient(gw.baseUrl, key.key)
    const read = async () => ((await (await holder.call("GET", "/my-key")).json()) as {
      rateLimits: { requestsPerMinute: { limit: number; remaining: number; resetMs: number }; tokensPerMinute: { limit: number; remaining: number } }
    }).rateLimits
    expect((await read()).requestsPerMinute).toEqual({ limit: 6, remaining: 6, resetMs: 0 })
    const sdk = new OpenAI({ apiKey: key.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    // Each call's input is ~5,000 tokens: the token window (1,000 back a second) needs ~10 s to
    // refill them, so it still shows them taken on a slow machine (a "hi" refilled in 0.1 s).
    const long = "word ".repeat(5_000)
    for (let i = 0; i < 2; i++) await sdk.chat.completions.create({ model: "svc-pico-1", max_tokens: 50, messages: [{ role: "user", content: long }] })
    const after = await read()
    // Two requests taken (one more could have refilled on a very slow machine: 10 s each).
    expect(after.requestsPerMinute.remaining).toBeGreaterThanOrEqual(4)
    expect(after.requestsPerMinute.remaining).toBeLessThanOrEqual(5)
    expect(after.requestsPerMinute.resetMs).toBeGreaterThan(0)
    expect(after.tokensPerMinute.remaining).toBeLessThan(60_000)
    // Reading took nothing: a read that took a request would leave fewer (refilling can only add).
    expect((await read()).requestsPerMinute.remaining).toBeGreaterThanOrEqual(after.requestsPerMinute.remaining)
  })

  it("lists artifacts: a key holder's own only (another key's id is 404, never listed), the operator's across keys, read-only", inOrder, async () => {
    const mine = await createKey({ name: "artifact holder" })
    const theirs = await createKey({ name: "artifact neighbour" })
    const chatOnly = await createKey({ name: "chat only", permissions: { surfaces: ["chat"] } })
    const upload = async (secret: string, body: unknown) => {
      const res = await fetch(`${gw.baseUrl}/v1/artifacts`, { method: "POST", headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" }, body: JSON.stringify(body) })
      expect(res.status).toBe(201)
      return ((await res.json()) as { reference: { artifactId: string; version: number } }).reference
    }
    const csv = "city,population\nOslo,709000\nBergen,291000\nTromsø,78000\n"
    const table = await upload(mine.key, { bytes: csv, mimeType: "text/csv", summary: "Norwegian cities" })
    await upload(mine.key, { bytes: `${csv}Stavanger,146000\n`, mimeType: "text/csv", artifactId: table.artifactId })
    const text = await upload(mine.key, { bytes: "Plain notes, not a table." })
    const other = await upload(theirs.key, { bytes: csv, mimeType: "text/csv" })

    const holder = await dashboardClient(gw.baseUrl, mine.key)
    const list = (await (await holder.call("GET", "/artifacts")).json()) as { data: Array<Record<string, unknown>>; hasMore: boolean }
    expect(list.data.map((a) => a.id)).toEqual([text.artifactId, table.artifactId])
    expect(list.data[1]).toMatchObject({
      keyId: mine.id, headVersion: 2, versionCount: 2, kind: "table", rowCount: 4, format: "csv", mimeType: "text/csv",
      sizeBytes: Buffer.byteLength(`${csv}Stavanger,146000\n`), summary: null, createdAt: expect.any(String)
    })
    expect(list.data[0]).toMatchObject({ kind: "text", rowCount: null, versionCount: 1, mimeType: "text/plain" })
    // paging: the cursor is the last id of the page
    const first = (await (await holder.call("GET", "/artifacts?limit=1")).json()) as { data: Array<{ id: string }>; nextCursor: string }
    expect(first.data.map((a) => a.id)).toEqual([text.artifactId])
    const second = (await (await holder.call("GET", `/artifacts?limit=1&after=${first.nextCursor}`)).json()) as { data: Array<{ id: string }>; hasMore: boolean }
    expect(second).toMatchObject({ data: [{ id: table.artifactId }], hasMore: false })

    // Another key's artifact is 404 everywhere, as on /v1/artifacts; it never shows up.
    for (const [method, path] of [
      ["GET", `/artifacts/${other.artifactId}`], ["POST", `/artifacts/${other.artifactId}/query`],
      ["GET", `/artifacts?keyId=${theirs.id}`], ["GET", `/artifacts?after=${other.artifactId}`], ["GET", "/artifacts/art_nope"]
    ]) {
      const res = await holder.call(method, path, method === "POST" ? { body: {} } : {})
      expect(res.status, `${method} ${path}`).toBe(404)
      expect(await errorOf(res)).toMatchObject({ type: "not_found" })
    }

    const detail = (await (await holder.call("GET", `/artifacts/${table.artifactId}`)).json()) as { keyId: string; descriptor: Record<string, unknown> }
    const direct = (await (await fetch(`${gw.baseUrl}/v1/artifacts/${table.artifactId}`, { headers: { authorization: `Bearer ${mine.key}` } })).json()) as { descriptor: unknown }
    expect(detail).toMatchObject({ keyId: mine.id, descriptor: direct.descriptor })
    expect((detail.descriptor.versions as Array<unknown>).length).toBe(2)
    const v1 = (await (await holder.call("GET", `/artifacts/${table.artifactId}?version=1`)).json()) as { descriptor: { version: number; shape: { rowCount: number } } }
    expect(v1.descriptor).toMatchObject({ version: 1, shape: { rowCount: 3 } })
    expect((await holder.call("GET", `/artifacts/${table.artifactId}?version=x`)).status).toBe(400)

    // The query is the API's own: the same body gives the same answer.
    const body = { filter: [{ field: "population", op: "gt", value: "100000" }], sort: [{ field: "population", dir: "asc" }], limit: 2 }
    const answer = await (await holder.call("POST", `/artifacts/${table.artifactId}/query`, { body })).json()
    const api = await (await fetch(`${gw.baseUrl}/v1/artifacts/${table.artifactId}/query`, {
      method: "POST", headers: { authorization: `Bearer ${mine.key}`, "content-type": "application/json" }, body: JSON.stringify(body)
    })).json()
    expect(answer).toEqual(api)
    expect(answer).toMatchObject({ result: { rows: [{ city: "Stavanger" }, { city: "Bergen" }], totalMatched: 3, truncated: true } })
    const bad = await holder.call("POST", `/artifacts/${table.artifactId}/query`, { body: { filter: [{ field: "city", op: "like", value: "O" }] } })
    expect(bad.status).toBe(400)
    expect(await errorOf(bad)).toMatchObject({ type: "invalid_request", message: expect.stringContaining("filter[0].op") })
    expect((await holder.call("POST", `/artifacts/${table.artifactId}/query`, { body: {}, csrf: null })).status).toBe(403)
    expect((await holder.call("GET", "/artifacts?limit=0")).status).toBe(400)

    // A key without the artifacts surface gets the API's 403.
    const limited = await dashboardClient(gw.baseUrl, chatOnly.key)
    const refused = await limited.call("GET", "/artifacts")
    expect(refused.status).toBe(403)
    expect(await errorOf(refused)).toMatchObject({ type: "permission_error", message: expect.stringContaining("artifacts") })

    // The operator sees every key's, filters by key, reads and queries any of them.
    const all = (await (await operator.call("GET", "/artifacts?limit=100")).json()) as { data: Array<{ id: string; keyId: string; key: { name: string } }> }
    expect(all.data.map((a) => a.id)).toEqual(expect.arrayContaining([table.artifactId, text.artifactId, other.artifactId]))
    expect(all.data.find((a) => a.id === other.artifactId)).toMatchObject({ keyId: theirs.id, key: { name: "artifact neighbour" } })
    const filtered = (await (await operator.call("GET", `/artifacts?keyId=${theirs.id}`)).json()) as { data: Array<{ id: string }> }
    expect(filtered.data.map((a) => a.id)).toEqual([other.artifactId])
    const theirDetail = (await (await operator.call("GET", `/artifacts/${other.artifactId}`)).json()) as Record<string, unknown>
    expect(theirDetail).toMatchObject({ keyId: theirs.id, key: { name: "artifact neighbour" }, descriptor: { artifactId: other.artifactId, headVersion: 1 } })
    const theirRows = await (await operator.call("POST", `/artifacts/${other.artifactId}/query`, { body: { select: ["city"], limit: 1 } })).json()
    expect(theirRows).toMatchObject({ result: { rows: [{ city: "Oslo" }], totalMatched: 3 } })
    // read-only: the dashboard has no delete; the artifact is still there for its key
    expect((await operator.call("DELETE", `/artifacts/${other.artifactId}`)).status).toBe(405)
    expect((await fetch(`${gw.baseUrl}/v1/artifacts/${other.artifactId}`, { headers: { authorization: `Bearer ${theirs.key}` } })).status).toBe(200)
  })

  it("lists both kinds of batches: a key holder's own only (another key's id is 404, never listed), cancel through the batch service", inOrder, async () => {
    const mine = await createKey({ name: "batch holder" })
    const theirs = await createKey({ name: "batch neighbour" })
    const chatOnly = await createKey({ name: "no batches", permissions: { surfaces: ["chat"] } })
    const ask = (customId: string, text: string, model = "svc-nova-mini") => ({
      custom_id: customId, params: { model, max_tokens: 32, messages: [{ role: "user" as const, content: text }] }
    })
    const anthropic = (secret: string) => new Anthropic({ apiKey: secret, baseURL: gw.baseUrl, maxRetries: 0 })
    const openai = new OpenAI({ apiKey: mine.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const input = await openai.files.create({
      file: await toFile(Buffer.from(["a", "b"].map((id) => JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "svc-nova-mini", messages: [{ role: "user", content: `say exactly: ${id}` }] } })).join("\n")), "in.jsonl"),
      purpose: "batch"
    })
    const openaiBatch = await openai.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const slow = await anthropic(mine.key).messages.batches.create({ requests: Array.from({ length: 6 }, (_, i) => ask(`slow-${i}`, `say exactly: ${i}`, "svc-orion-2")) })
    const other = await anthropic(theirs.key).messages.batches.create({ requests: [ask("x", "hi")] })

    const holder = await dashboardClient(gw.baseUrl, mine.key)
    const list = (await (await holder.call("GET", "/batches")).json()) as { data: Array<Record<string, unknown>> }
    expect(list.data.map((b) => b.id)).toEqual([slow.id, openaiBatch.id])
    expect(list.data[0]).toMatchObject({ kind: "messages", keyId: mine.id, endpoint: "/v1/messages", total: 6, ended: false, status: "in_progress", createdAt: expect.any(String), endedAt: null })
    expect(list.data[1]).toMatchObject({ kind: "openai", keyId: mine.id, endpoint: "/v1/chat/completions", total: 2 })
    const onlyOpenai = (await (await holder.call("GET", "/batches?kind=openai")).json()) as { data: Array<{ id: string }> }
    expect(onlyOpenai.data.map((b) => b.id)).toEqual([openaiBatch.id])
    expect((await holder.call("GET", "/batches?kind=both")).status).toBe(400)

    // Another key's batch is 404 everywhere and never listed.
    for (const [method, path] of [
      ["GET", `/batches/${other.id}`], ["POST", `/batches/${other.id}/cancel`], ["GET", `/batches?keyId=${theirs.id}`],
      ["GET", `/batches?after=${other.id}`], ["GET", "/batches/msgbatch_nope"]
    ]) {
      const res = await holder.call(method, path, method === "POST" ? { body: {} } : {})
      expect(res.status, `${method} ${path}`).toBe(404)
    }
    expect(((await anthropic(theirs.key).messages.batches.retrieve(other.id)).cancel_initiated_at)).toBeNull()

    // The OpenAI batch ends by itself; its counts agree with the API's.
    let done: { batch: { status: string; counts: Record<string, number>; outputFileId: string | null } } | undefined
    for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
      done = (await (await holder.call("GET", `/batches/${openaiBatch.id}`)).json()) as typeof done
      if (done!.batch.status === "completed") break
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(done!.batch).toMatchObject({ status: "completed", counts: { succeeded: 2, errored: 0, processing: 0 }, outputFileId: expect.stringMatching(/^file-/) })
    const viaApi = await openai.batches.retrieve(openaiBatch.id)
    expect(viaApi.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })

    // Cancel from the dashboard is the API's cancel: unclaimed requests end canceled.
    expect((await holder.call("POST", `/batches/${slow.id}/cancel`, { body: {}, csrf: null })).status).toBe(403)
    const cancelled = (await (await holder.call("POST", `/batches/${slow.id}/cancel`, { body: {} })).json()) as { batch: { status: string; cancelInitiatedAt: string | null } }
    expect(["canceling", "ended"]).toContain(cancelled.batch.status)
    expect(cancelled.batch.cancelInitiatedAt).not.toBeNull()
    const retrieved = await anthropic(mine.key).messages.batches.retrieve(slow.id)
    expect(retrieved.cancel_initiated_at).not.toBeNull()
    expect(retrieved.request_counts.canceled).toBeGreaterThanOrEqual(4)

    // A key without the batches surface gets the API's 403.
    const limited = await dashboardClient(gw.baseUrl, chatOnly.key)
    expect((await limited.call("GET", "/batches")).status).toBe(403)

    // The operator sees every key's batches, filters by key and kind, and may cancel any of them.
    const all = (await (await operator.call("GET", "/batches?limit=100")).json()) as { data: Array<{ id: string; key: { name: string } }> }
    expect(all.data.map((b) => b.id)).toEqual(expect.arrayContaining([slow.id, openaiBatch.id, other.id]))
    expect(all.data.find((b) => b.id === other.id)).toMatchObject({ key: { name: "batch neighbour" } })
    const theirsOnly = (await (await operator.call("GET", `/batches?keyId=${theirs.id}&kind=messages`)).json()) as { data: Array<{ id: string }> }
    expect(theirsOnly.data.map((b) => b.id)).toEqual([other.id])
    const detail = (await (await operator.call("GET", `/batches/${other.id}`)).json()) as { batch: Record<string, unknown> }
    expect(detail.batch).toMatchObject({ id: other.id, kind: "messages", keyId: theirs.id, key: { name: "batch neighbour" }, total: 1 })
  })

  it("streams the queues as SSE", inOrder, async () => {
    const res = await operator.call("GET", "/queues/stream")
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
    let text = ""
    while (!text.includes("\n\n")) text += (await reader.read()).value ?? ""
    await reader.cancel()
    const frame = text.slice(0, text.indexOf("\n\n"))
    expect(frame.split("\n")[0]).toBe("event: queues")
    const data = JSON.parse(frame.split("\n")[1].slice("data: ".length)) as { data: Array<{ placementId: string; capacity: number }> }
    expect(data.data.find((q) => q.placementId === "pico-a")).toMatchObject({ capacity: expect.any(Number), inUse: 0, circuit: "closed", fault: null })
  })

  it("serves the page with no-cache and its hashed assets as immutable, gzip when asked", inOrder, async () => {
    const page = await fetch(`${gw.baseUrl}/dashboard/keys`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(page.headers.get("cache-control")).toBe("no-cache")
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'")
    const html = await page.text()
    // item pages open by their address too (a reload, a shared link)
    for (const path of ["/dashboard/runs/run_x", "/dashboard/artifacts/art_x", "/dashboard/batches/batch_x"]) {
      const item = await fetch(`${gw.baseUrl}${path}`)
      expect(item.status, path).toBe(200)
      expect(await item.text()).toBe(html)
    }
    const js = /src="(\/dashboard\/assets\/main-[A-Z0-9]+\.js)"/.exec(html)![1]
    const css = /href="(\/dashboard\/assets\/main-[A-Z0-9]+\.css)"/.exec(html)![1]
    const again = await fetch(`${gw.baseUrl}/dashboard`, { headers: { "if-none-match": page.headers.get("etag")! } })
    expect(again.status).toBe(304)
    const script = await fetch(`${gw.baseUrl}${js}`, { headers: { "accept-encoding": "gzip" } })
    expect(script.status).toBe(200)
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
    expect(script.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    expect(script.headers.get("content-encoding")).toBe("gzip")
    expect((await script.text()).length).toBeGreaterThan(1000) // fetch decoded it
    expect((await fetch(`${gw.baseUrl}${css}`)).headers.get("content-type")).toBe("text/css; charset=utf-8")
    const missing = await fetch(`${gw.baseUrl}/dashboard/assets/main-NOPE.js`)
    expect(missing.status).toBe(404)
    expect(await errorOf(missing)).toMatchObject({ type: "not_found" })
    const unknown = await fetch(`${gw.baseUrl}/dashboard/api/nothing/here`)
    expect(unknown.status).toBe(404)
    expect(await errorOf(unknown)).toMatchObject({ type: "not_found" }) // the flat shape, like /admin
  })
})

describe("dashboard sessions end (embedded)", () => {
  it("at expiry, and when the admin token changes", async () => {
    const setup = await engines()[0].setup()
    let gw = await startInProcessGateway({ ...setup.env, GATEWAY_ADMIN_TOKEN: "first-admin-token-for-this-test" })
    try {
      const before = await dashboardClient(gw.baseUrl, "first-admin-token-for-this-test")
      await gw.stop()
      // The same data dir with another admin token, and sessions of four seconds.
      gw = await startInProcessGateway({ ...setup.env, GATEWAY_ADMIN_TOKEN: "second-admin-token-for-this-test", GATEWAY_DASHBOARD_SESSION_MS: "4000" })
      // (a new process, a new port: the old cookie is sent to it by hand)
      const changed = await fetch(`${gw.baseUrl}/dashboard/api/session`, { headers: { cookie: before.cookie } })
      expect(changed.status).toBe(401)
      expect((await errorOf(changed)).message).toContain("admin token changed")

      const current = await dashboardClient(gw.baseUrl, "second-admin-token-for-this-test")
      expect((await current.call("GET", "/session")).status).toBe(200)
      // Asked until the session ends (fixed expiry: asking does not extend it), not a sleep past it.
      let expired = await current.call("GET", "/session")
      for (const deadline = Date.now() + 15_000; expired.status === 200 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 200))
        expired = await current.call("GET", "/session")
      }
      expect(expired.status).toBe(401)
      expect((await errorOf(expired)).message).toContain("expired")
    } finally {
      await gw.stop()
      await setup.cleanup()
    }
  }, 120_000)
})
