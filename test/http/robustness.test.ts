/**
 * No input makes the gateway crash, hang or answer 500: every route gets malformed and hostile
 * bodies, with and without credentials, and must answer a 4xx in its surface's shape.
 */
import { beforeAll, describe, expect, it } from "vitest"
import { allRoutes } from "../../src/http/routes.ts"
import { embeddedEngine } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

const deep = (depth: number): unknown => (depth === 0 ? {} : { a: deep(depth - 1) })

const hostileBodies: ReadonlyArray<string> = [
  "{",
  "null",
  "[]",
  "42",
  '"text"',
  "{}",
  JSON.stringify({ model: 123, messages: "nope", input: { x: 1 }, value: undefined }),
  JSON.stringify({ model: "svc-atlas-1", max_tokens: -1, messages: [{ role: "wizard", content: 5 }] }),
  JSON.stringify({ model: "svc-atlas-1", messages: [{ role: "user", content: [{ type: "image", source: { type: "base64" } }] }], max_tokens: 1e308 }),
  JSON.stringify({ model: "svc-embed-mini", input: [1, 2, 3], dimensions: "many" }),
  JSON.stringify({ delta: deep(200), name: "x".repeat(500), plan: {}, permissions: { surfaces: "all" } }),
  "\u0000\u0001\u0002",
  JSON.stringify({ __proto__: { polluted: true }, constructor: { prototype: { polluted: true } } })
]

// On the run's shared gateway (a process of its own, like the one a client reaches): what is
// tested is its answers, and whether it still answers afterwards, not how it starts or stops.
// The admin token reaches only key routes and a placement's faults, on ids that do not exist; the
// worst it does is create a few keys (an empty body is a valid key request), which no suite on
// the shared gateway counts.
describe("robustness: hostile input never yields 5xx", () => {
  let gw: SharedGateway
  beforeAll(async () => {
    gw = await sharedGateway(embeddedEngine)
  })

  it("answers every route with a 4xx (or success) for malformed bodies, and stays up", async () => {
    const credentials = [
      {},
      { authorization: `Bearer ${gw.apiKey}`, "x-api-key": gw.apiKey },
      { authorization: `Bearer ${gw.adminToken}` }
    ]
    let checked = 0
    for (const route of allRoutes) {
      const path = route.path.replace(/\{(\w+)\}/g, "does_not_exist")
      for (const headers of credentials) {
        for (const body of route.method === "GET" || route.method === "DELETE" ? [undefined] : hostileBodies) {
          const res = await fetch(`${gw.baseUrl}${path}`, {
            method: route.method,
            headers: { "content-type": "application/json", ...headers },
            ...(body === undefined ? {} : { body })
          })
          const text = await res.text()
          // Every route the spec names is served: no 5xx at all, 501 included.
          expect(res.status, `${route.method} ${path} ${body?.slice(0, 40)} → ${text.slice(0, 200)}`).toBeLessThan(500)
          if (res.status >= 400) {
            const parsed = JSON.parse(text) as { error?: { type?: string; message?: string } }
            expect(typeof parsed.error?.type, text).toBe("string")
            expect(typeof parsed.error?.message, text).toBe("string")
          }
          checked++
        }
      }
    }
    expect(checked).toBeGreaterThan(50)
    // Still up and answering: another request after all of them.
    expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
  }, 120_000)

  it("parses a chunked body (no declared length) like a large one: malformed is a 400, past the value limit a 400 naming the field", async () => {
    const send = async (chunks: ReadonlyArray<string>) => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk))
          controller.close()
        }
      })
      const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
        body,
        duplex: "half"
      } as RequestInit)
      return { status: res.status, body: (await res.json()) as { error: { message: string; param?: string } } }
    }
    const ok = await send([`{"model":"svc-atlas-1","max_tokens":8,`, `"messages":[{"role":"user","content":"hi"}]}`])
    expect(ok.status).toBe(200)
    const malformed = await send([`{"model":"svc-atlas-1",`, `"messages":[}`])
    expect(malformed.status).toBe(400)
    expect(malformed.body.error.message).toMatch(/^Malformed JSON in the request body/)
    const item = `{"role":"user","content":"a"},`
    const many = await send([`{"model":"svc-atlas-1","max_tokens":8,"messages":[`, ...Array(30).fill(item.repeat(1_000)), `{"role":"user","content":"a"}]}`])
    expect(many.status).toBe(400)
    expect(many.body.error).toMatchObject({ param: "messages", message: expect.stringMatching(/^messages: more than 65536 JSON values/) })
  })

  it("survives odd paths, methods and headers", async () => {
    const odd = ["/v1/models/%zz", "//", "//?x=1", "/v1/states/%2e%2e%2fadmin", "//v1//models", "/v1/models/" + "a".repeat(5000), "/admin/v1/keys/%00"]
    for (const path of odd) {
      const res = await fetch(`${gw.baseUrl}${path}`, { headers: { authorization: "Bearer \u00e9" } }).catch(() => undefined)
      if (res !== undefined) expect(res.status, path).toBeLessThan(500)
    }
    const weird = await fetch(`${gw.baseUrl}/v1/models`, { method: "PROPFIND" })
    expect(weird.status).toBe(405)
    expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
  })
})
