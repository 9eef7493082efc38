/**
 * The gateway as a library (`createGateway` from src/index.ts): created from a config object, called
 * with canonical requests decoded from any dialect, queue state read, and its HTTP handler mounted
 * in a plain node:http server that the official SDK talks to.
 */
import OpenAI from "openai"
import { rmSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Readable } from "node:stream"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CanonicalEvent, createGateway, type EmbeddedGateway } from "../../src/index.ts"
import { freshDataDir } from "../support/engines.ts"
import { fastConfig } from "../support/fast-config.ts"
import { placeModel } from "./support.ts"

describe("createGateway (embedded runtime)", () => {
  const dir = freshDataDir()
  let gateway: EmbeddedGateway
  beforeAll(async () => {
    const config = fastConfig((c) => placeModel(c, "svc-pico-1", [{ id: "pico-a", capacity: 1, ttftMs: 30 }]))
    gateway = await createGateway({ config, dataDir: dir, databaseUrl: undefined, redisUrl: undefined, adminToken: undefined })
  }, 60_000)
  afterAll(async () => {
    await gateway?.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  it("refuses an invalid config with the path of the bad field", async () => {
    const bad = fastConfig((c) => {
      c.models[0].placements[0].capacity = 0
    })
    await expect(createGateway({ config: bad, dataDir: freshDataDir() })).rejects.toThrow(/models\[0\]\.placements\[0\]\.capacity/)
  })

  it("calls a model with a canonical request decoded from any dialect, and encodes the answer back", async () => {
    const fromChat = await gateway.decode("chat", { model: "gpt-4.1-nano", messages: [{ role: "user", content: "say exactly: from chat" }] })
    expect(fromChat.request.model).toBe("svc-pico-1") // the compatibility handle resolved
    const answer = await gateway.call(fromChat)
    expect(answer.servedModel).toBe("svc-pico-1")
    expect(answer.response.content).toEqual([{ type: "text", text: "from chat" }])
    expect(answer.settlement.costMicros).toBeGreaterThan(0)
    const body = gateway.encode("chat", answer) as { object: string; choices: Array<{ message: { content: string } }> }
    expect(body.object).toBe("chat.completion")
    expect(body.choices[0].message.content).toBe("from chat")

    const fromMessages = await gateway.decode("messages", { model: "pico", max_tokens: 50, messages: [{ role: "user", content: "say exactly: from messages" }] })
    const events: Array<CanonicalEvent> = []
    for await (const event of gateway.stream(fromMessages)) events.push(event)
    expect(events[0].type).toBe("message_start")
    expect(events.at(-1)?.type).toBe("message_stop")
    expect(events.filter((e) => e.type === "text_delta").map((e) => (e as { text: string }).text).join("")).toBe("from messages")

    await expect(gateway.decode("responses", { model: "no-such-model", input: "hi" })).rejects.toMatchObject({ _tag: "NotFound" })
    await expect(gateway.decode("messages", { model: "pico", messages: [] })).rejects.toMatchObject({ _tag: "InvalidRequest" })
  })

  it("encodes an answer in every dialect: its own echo when decoded there, the request's values otherwise", async () => {
    const fromResponses = await gateway.decode("responses", {
      model: "pico", input: "say exactly: every dialect", instructions: "Be brief.", temperature: 0.5, metadata: { a: "b" }, store: true
    })
    const answer = await gateway.call(fromResponses)
    const responses = gateway.encode("responses", answer) as any
    expect(responses).toMatchObject({
      object: "response", status: "completed", model: "svc-pico-1", instructions: "Be brief.", temperature: 0.5, metadata: { a: "b" }, store: true,
      output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "every dialect" }] }]
    })
    expect((gateway.encode("chat", answer) as any).choices[0]).toMatchObject({ message: { role: "assistant", content: "every dialect" }, finish_reason: "stop" })
    expect(gateway.encode("messages", answer)).toMatchObject({ type: "message", role: "assistant", content: [{ type: "text", text: "every dialect" }], stop_reason: "end_turn" })
    expect((gateway.encode("completions", answer) as any)).toMatchObject({ object: "text_completion", choices: [{ text: "every dialect", finish_reason: "stop" }] })

    // Legacy completions with `echo`: the prompt leads the text, as over HTTP.
    const fromCompletions = await gateway.decode("completions", { model: "svc-pico-1", prompt: "say exactly: echoed", echo: true, max_tokens: 20 })
    const completion = gateway.encode("completions", await gateway.call(fromCompletions)) as any
    expect(completion.choices[0].text).toBe("say exactly: echoedechoed")
    // The same answer in Responses terms (decoded elsewhere): the request's own values, nothing stored.
    const asResponses = gateway.encode("responses", await gateway.call(fromCompletions)) as any
    expect(asResponses).toMatchObject({ object: "response", instructions: null, store: false, max_output_tokens: 20, output: [{ content: [{ text: "echoed" }] }] })
  })

  it("decode applies the key's permissions as the HTTP path does, and clamps a compatibility handle's ceiling", async () => {
    const adminToken = (await import("node:fs")).readFileSync(`${dir}/admin-token`, "utf8").trim()
    const create = async (permissions: unknown) => {
      const res = await gateway.handler(new Request("http://gateway/admin/v1/keys", {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
        body: JSON.stringify({ permissions })
      }))
      return ((await res.json()) as { key: string }).key
    }
    const chatOnly = await create({ surfaces: ["chat"] })
    const picoOnly = await create({ models: ["svc-pico-*"] })
    const body = { model: "svc-pico-1", max_tokens: 20, messages: [{ role: "user", content: "say exactly: hi" }] }
    await expect(gateway.decode("messages", body, { apiKey: chatOnly })).rejects.toMatchObject({ _tag: "PermissionDenied" })
    expect((await gateway.decode("messages", body, { apiKey: picoOnly })).request.model).toBe("svc-pico-1")
    await expect(gateway.decode("messages", { ...body, model: "nova" }, { apiKey: picoOnly })).rejects.toMatchObject({ _tag: "PermissionDenied" })
    // A request built by hand is checked when called.
    const byHand = (await gateway.decode("messages", { ...body, model: "nova" })).request
    await expect(gateway.call(byHand, { apiKey: picoOnly })).rejects.toMatchObject({ _tag: "PermissionDenied" })

    const viaHandle = await gateway.decode("messages", { ...body, model: "claude-haiku-4-5", max_tokens: 64000 })
    expect(viaHandle.request).toMatchObject({ model: "svc-nova-mini", maxOutputTokens: 16384 })
    await expect(gateway.decode("messages", { ...body, model: "svc-nova-mini", max_tokens: 64000 })).rejects.toMatchObject({ _tag: "InvalidRequest" })
  })

  it("queues embedded calls like HTTP ones and shows the queue state", async () => {
    const request = await gateway.decode("completions", { model: "svc-pico-1", prompt: "say exactly: queued", max_tokens: 20 })
    const calls = Promise.all(Array.from({ length: 5 }, () => gateway.call(request)))
    let sawWaiting = false
    for (let i = 0; i < 20 && !sawWaiting; i++) {
      const pico = (await gateway.queues()).find((q) => q.placementId === "pico-a")!
      expect(pico.inUse).toBeLessThanOrEqual(1)
      sawWaiting = pico.waiting > 0
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(sawWaiting).toBe(true)
    expect((await calls).map((a) => a.response.stopReason)).toEqual(Array(5).fill("end_turn"))
    const after = (await gateway.queues()).find((q) => q.placementId === "pico-a")!
    expect(after).toMatchObject({ capacity: 1, inUse: 0, waiting: 0, circuit: "closed" })
  })

  describe("its HTTP handler mounted in a plain node:http server", () => {
    let server: Server
    let baseUrl: string
    beforeAll(async () => {
      server = createServer(async (req, res) => {
        const hasBody = req.method !== "GET" && req.method !== "HEAD"
        const request = new Request(`http://${req.headers.host}${req.url}`, {
          method: req.method,
          headers: req.headers as Record<string, string>,
          ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: "half" } : {})
        } as RequestInit)
        const response = await gateway.handler(request)
        res.writeHead(response.status, Object.fromEntries(response.headers))
        if (response.body !== null) for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk)
        res.end()
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    })
    afterAll(async () => {
      await new Promise((resolve) => server.close(resolve))
    })

    it("serves the SDK (create and stream) on the same runtime", async () => {
      const adminToken = (await import("node:fs")).readFileSync(`${dir}/admin-token`, "utf8").trim()
      const created = await fetch(`${baseUrl}/admin/v1/keys`, { method: "POST", headers: { authorization: `Bearer ${adminToken}` }, body: "{}" })
      expect(created.status).toBe(201)
      const { key } = (await created.json()) as { key: string }
      const client = new OpenAI({ apiKey: key, baseURL: `${baseUrl}/v1`, maxRetries: 0 })
      const { data, response } = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "say exactly: mounted" }] }).withResponse()
      expect(data.choices[0].message.content).toBe("mounted")
      expect(response.headers.get("xsvc-model")).toBe("svc-pico-1")
      expect(response.headers.get("xsvc-allowance-remaining")).not.toBeNull()
      const stream = client.chat.completions.stream({ model: "svc-pico-1", messages: [{ role: "user", content: "say exactly: streamed" }] })
      expect((await stream.finalChatCompletion()).choices[0].message.content).toBe("streamed")
    })
  })
})
