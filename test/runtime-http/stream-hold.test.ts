/**
 * `xsvc-model` names the model that served. A stream that waits for capacity holds its headers
 * while the wait is short (`GATEWAY_STREAM_HOLD_MS`), so the header names what was granted — here
 * an equivalent model, to show it is not just the name asked for. A longer wait commits early,
 * without `xsvc-model` (nothing has been chosen yet), keeps the connection alive, and the
 * stream's own `model` field names what served. Also through the `openai` SDK.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gatewayWith, placeModel, post, queueOf, readChunks, type TestGateway, untilQueue } from "./support.ts"

const chatChunks = (text: string) =>
  text.split("\n").filter((line) => line.startsWith("data: {")).map((line) => JSON.parse(line.slice(6)))

describe("a waiting stream's headers", () => {
  describe("held while the wait is short", () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await gatewayWith((config) => {
        placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 1, ttftMs: 4_000 }], ["svc-nova-mini"])
        placeModel(config, "svc-nova-mini", [{ id: "nova-a", capacity: 1, ttftMs: 800 }])
      }, { GATEWAY_STREAM_HOLD_MS: "8000", GATEWAY_KEEPALIVE_MS: "50" })
    })
    afterAll(async () => {
      await gw?.close()
    })

    it("name the model whose slot was granted (an equivalent), not the one asked for", async () => {
      const lyraHolder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-lyra-3", messages: [{ role: "user", content: "hold lyra" }] })
      await untilQueue(gw, "lyra-a", (q) => q.inUse >= 1)
      let novaDone = 0
      const novaHolder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-nova-mini", messages: [{ role: "user", content: "hold nova" }] })
        .then((res) => {
          novaDone = Date.now()
          return res
        })
      await untilQueue(gw, "nova-a", (q) => q.inUse >= 1)

      const waiting = await post(gw, "/v1/chat/completions", gw.apiKey!, {
        model: "svc-lyra-3", stream: true, messages: [{ role: "user", content: "say exactly: served by whoever was free" }]
      })
      const headersAt = Date.now()
      expect(waiting.status).toBe(200)
      // The headers waited for the slot nova's holder gave back, while lyra's holder still ran.
      expect(novaDone).toBeGreaterThan(0)
      expect(headersAt).toBeGreaterThanOrEqual(novaDone)
      expect((await queueOf(gw, "lyra-a")).inUse).toBe(1)
      expect(waiting.headers.get("xsvc-model")).toBe("svc-nova-mini")
      const text = (await readChunks(waiting)).join("")
      expect(text.startsWith(": keepalive")).toBe(false)
      const chunks = chatChunks(text)
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("served by whoever was free")
      expect(chunks[0].model).toBe("svc-nova-mini")
      expect((await novaHolder).status).toBe(200)
      expect((await lyraHolder).status).toBe(200)
    })
  })

  describe("committed early when the wait is long", () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await gatewayWith((config) => {
        placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 1, ttftMs: 2_500 }])
      }, { GATEWAY_STREAM_HOLD_MS: "300", GATEWAY_KEEPALIVE_MS: "100" })
    })
    afterAll(async () => {
      await gw?.close()
    })

    it("send no xsvc-model (nothing chosen yet), then keepalives, then the answer whose model field names what served", async () => {
      const holder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-lyra-3", messages: [{ role: "user", content: "hold" }] })
      await untilQueue(gw, "lyra-a", (q) => q.inUse >= 1)
      const waiting = await post(gw, "/v1/chat/completions", gw.apiKey!, {
        model: "svc-lyra-3", stream: true, messages: [{ role: "user", content: "say exactly: after a long wait" }]
      })
      // Headers arrived while the request still waited for the only slot.
      expect((await queueOf(gw, "lyra-a")).waiting).toBe(1)
      expect(waiting.status).toBe(200)
      expect(waiting.headers.get("xsvc-model")).toBeNull()
      expect(waiting.headers.get("xsvc-allowance-remaining")).not.toBeNull()
      const text = (await readChunks(waiting)).join("")
      expect(text.startsWith(": keepalive\n\n")).toBe(true)
      const chunks = chatChunks(text)
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("after a long wait")
      expect(chunks[0].model).toBe("svc-lyra-3")
      expect((await holder).status).toBe(200)
    })

    it("the openai SDK reads such a stream whole (Responses), its response.model naming what served", async () => {
      const client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      const holder = client.chat.completions.create({ model: "svc-lyra-3", messages: [{ role: "user", content: "hold" }] })
      await untilQueue(gw, "lyra-a", (q) => q.inUse >= 1)
      const { data: stream, response } = await client.responses.create({ model: "svc-lyra-3", input: "say exactly: sdk waited", stream: true, store: false }).withResponse()
      expect(response.headers.get("xsvc-model")).toBeNull()
      let completed: any
      let text = ""
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") text += event.delta
        if (event.type === "response.completed") completed = event.response
      }
      expect(text).toBe("sdk waited")
      expect(completed.model).toBe("svc-lyra-3")
      await holder
    })
  })
})
