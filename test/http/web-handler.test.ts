/** The gateway mounted as a fetch-style handler, without its own listener. */
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createWebHandler } from "../../src/index.ts"
import { freshDataDir } from "../support/engines.ts"

describe("createWebHandler", () => {
  it("serves the catalog and authenticated routes through a Web Request handler", async () => {
    const dir = freshDataDir()
    const gateway = createWebHandler({ dataDir: dir, databaseUrl: undefined, adminToken: undefined })
    try {
      const models = await gateway.handler(new Request("http://embedded/v1/models/atlas"))
      expect(models.status).toBe(200)
      expect(((await models.json()) as { id: string }).id).toBe("svc-atlas-1")
      expect(models.headers.get("x-request-id")).toMatch(/^req_/)
      const unauthorized = await gateway.handler(new Request("http://embedded/v1/states", { method: "POST", body: "{}" }))
      expect(unauthorized.status).toBe(401)
      expect(await unauthorized.json()).toMatchObject({ error: { type: "unauthorized" } })

      // A large JSON answer (serialized in slices as it is sent) reaches a Web Response whole.
      const adminToken = readFileSync(join(dir, "admin-token"), "utf8").trim()
      const created = await gateway.handler(new Request("http://embedded/admin/v1/keys", { method: "POST", headers: { authorization: `Bearer ${adminToken}` }, body: "{}" }))
      const key = ((await created.json()) as { key: string }).key
      const value = { text: "é😀 \"q\"\n".repeat(60_000) }
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      const state = await gateway.handler(new Request("http://embedded/v1/states", { method: "POST", headers, body: JSON.stringify({ value }) }))
      expect(state.status).toBe(201)
      const id = ((await state.json()) as { state: { stateId: string } }).state.stateId
      const read = await gateway.handler(new Request(`http://embedded/v1/states/${id}`, { headers }))
      expect(read.headers.get("content-type")).toContain("application/json")
      expect(await read.json()).toEqual({ state: { stateId: id, seq: 0, value } })

      // A streamed answer whose envelope frames repeat a large echo comes in slices (each at most
      // 256 Ki characters, so at most 768 KiB), and every envelope frame still holds it whole.
      const instructions = "Echo me 😀 é \"q\" \\ \n and keep to these words ".repeat(8_000)
      const streamed = await gateway.handler(new Request("http://embedded/v1/responses", {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "svc-orion-2", instructions, input: "say exactly: echoed", stream: true, store: false })
      }))
      expect(streamed.status).toBe(200)
      const reader = streamed.body!.getReader()
      const chunks: Array<Uint8Array> = []
      for (let read = await reader.read(); !read.done; read = await reader.read()) chunks.push(read.value)
      expect(Math.max(...chunks.map((chunk) => chunk.byteLength))).toBeLessThanOrEqual(3 * 256 * 1024)
      const frames = Buffer.concat(chunks).toString("utf8").split("\n\n").filter((frame) => frame.startsWith("event: "))
      const envelopes = frames.map((frame) => JSON.parse(frame.slice(frame.indexOf("\ndata: ") + 7))).filter((d) => d.response !== undefined)
      expect(envelopes.map((d) => d.type)).toEqual(["response.created", "response.in_progress", "response.completed"])
      for (const envelope of envelopes) expect(envelope.response.instructions).toBe(instructions)
    } finally {
      await gateway.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
