/**
 * The stored-response lifecycle through the `openai` SDK, on every storage engine: earlier items
 * referred to by id (`item_reference`, or a bare `{id}`), a stored response replayed as its event
 * stream (`retrieve(id, {stream: true})`, `starting_after`), its input items listed and paged,
 * deletion, and answers that hold what PostgreSQL's jsonb cannot (NUL, unpaired surrogates).
 */
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"

const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: true
}

/** The event frames of an SSE body (comments dropped), as raw text. */
const eventFrames = (sse: string) => sse.split("\n\n").filter((frame) => frame.startsWith("event: "))

describe.each(engines())("the stored-response lifecycle ($name)", (engine) => {
  let gw: SharedGateway
  let client: OpenAI
  let other: OpenAI
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const second = await (await gw.admin("POST", "/admin/v1/keys", { name: "other" })).json() as { key: string }
    other = new OpenAI({ apiKey: second.key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })

  const raw = (method: string, path: string, body?: unknown) =>
    fetch(`${gw.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  describe("item references", () => {
    it("an item_reference to an earlier answer stands for that message: the model sees the earlier turn", async () => {
      const first = await client.responses.create({ model: "svc-pico-1", input: "say exactly: remembered words" })
      const message = first.output.find((item) => item.type === "message")!
      const next = [{ type: "item_reference" as const, id: message.id }, { role: "user" as const, content: "say exactly: next" }]
      const referred = await client.responses.create({ model: "svc-pico-1", input: [{ role: "user", content: "say exactly: remembered words" }, ...next] })
      const resent = await client.responses.create({
        model: "svc-pico-1",
        input: [{ role: "user", content: "say exactly: remembered words" }, { role: "assistant", content: "remembered words" }, { role: "user", content: "say exactly: next" }],
        store: false
      })
      expect(referred.output_text).toBe("next")
      // The reference decoded to exactly the assistant turn a client would re-send.
      expect(referred.usage!.input_tokens).toBe(resent.usage!.input_tokens)
    })

    it("a reasoning item comes back by a bare {id} and a tool call by reference; the result names the tool", async () => {
      const first = await client.responses.create({
        model: "svc-vega-2", input: "Use get_weather for Oslo.", tools: [weatherTool], reasoning: { effort: "low", summary: "auto" }
      })
      const reasoning = first.output.find((item) => item.type === "reasoning")!
      const call = first.output.find((item) => item.type === "function_call")!
      expect(reasoning.summary[0].text.length).toBeGreaterThan(0)
      const second = await client.responses.create({
        model: "svc-vega-2",
        tools: [weatherTool],
        input: [
          { role: "user", content: "Use get_weather for Oslo." },
          { id: reasoning.id } as any,
          { type: "item_reference", id: call.id },
          { type: "function_call_output", call_id: call.call_id, output: "snow" }
        ]
      })
      // The simulator names the tool only when it finds the call in the conversation.
      expect(second.output_text).toContain("The get_weather tool returned: snow.")
    })

    it("an unknown, another key's, an unstored or a deleted item is a 404 invalid_request_error naming only that id", async () => {
      const mine = await client.responses.create({ model: "svc-pico-1", input: "say exactly: mine" })
      const itemId = mine.output[0].id!
      const ask = (sdk: OpenAI, id: string) =>
        sdk.responses.create({ model: "svc-pico-1", input: [{ type: "item_reference", id }, { role: "user", content: "hi" }] }).catch((e) => e)
      for (const error of [await ask(client, "msg_nothing"), await ask(other, itemId)]) {
        expect(error).toBeInstanceOf(OpenAI.NotFoundError)
        expect(error.type).toBe("invalid_request_error")
        expect(error.param).toBe("input")
      }
      expect((await ask(other, itemId)).error.message).toBe(`Item with id '${itemId}' not found.`)
      const unstored = await client.responses.create({ model: "svc-pico-1", input: "say exactly: gone", store: false })
      expect((await ask(client, unstored.output[0].id!)).status).toBe(404)
      await client.responses.delete(mine.id)
      expect((await ask(client, itemId)).error.message).toBe(`Item with id '${itemId}' not found.`)
    })
  })

  describe("retrieve with stream=true", () => {
    it("replays exactly the frames the live stream sent, ending with response.completed holding the stored envelope", async () => {
      const live = await raw("POST", "/v1/responses", {
        model: "svc-vega-2", input: "Use get_weather for Oslo.", tools: [weatherTool], reasoning: { summary: "auto" }, stream: true
      })
      const liveFrames = eventFrames(await live.text())
      const id = JSON.parse(liveFrames[0].split("\ndata: ")[1]).response.id as string
      const replay = await raw("GET", `/v1/responses/${id}?stream=true`)
      expect(replay.status).toBe(200)
      expect(replay.headers.get("content-type")).toContain("text/event-stream")
      expect(eventFrames(await replay.text())).toEqual(liveFrames)

      const events: Array<any> = []
      for await (const event of await client.responses.retrieve(id, { stream: true })) events.push(event)
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
      expect(events.at(-1).type).toBe("response.completed")
      expect(events.at(-1).response).toEqual(await (await raw("GET", `/v1/responses/${id}`)).json())
      expect(events.some((e) => e.type === "response.reasoning_summary_text.delta")).toBe(true)
      expect(events.some((e) => e.type === "response.function_call_arguments.delta")).toBe(true)
    })

    it("a non-streamed stored response replays as a stream too, and starting_after skips what was seen", async () => {
      const created = await client.responses.create({ model: "svc-lyra-3", input: "say exactly: replayed later" })
      const all: Array<any> = []
      for await (const event of await client.responses.retrieve(created.id, { stream: true })) all.push(event)
      const text = all.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")
      expect(text).toBe("replayed later")
      expect(all[0].type).toBe("response.created")
      expect(all.at(-1).response).toEqual(await (await raw("GET", `/v1/responses/${created.id}`)).json())

      const rest: Array<any> = []
      for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: 3 })) rest.push(event)
      expect(rest).toEqual(all.slice(4))
    })

    it("an unknown or another key's id is a 404; a bad starting_after is a 400 naming it", async () => {
      const mine = await client.responses.create({ model: "svc-pico-1", input: "say exactly: x" })
      expect((await other.responses.retrieve(mine.id, { stream: true }).catch((e) => e)).status).toBe(404)
      expect((await raw("GET", "/v1/responses/resp_missing?stream=true")).status).toBe(404)
      const bad = await raw("GET", `/v1/responses/${mine.id}?stream=true&starting_after=-1`)
      expect(bad.status).toBe(400)
      expect(((await bad.json()) as any).error.param).toBe("starting_after")
    })
  })

  describe("delete and input items", () => {
    it("DELETE answers {id, object, deleted}; afterwards retrieve, chaining and a second delete are 404s; another key cannot delete", async () => {
      const created = await client.responses.create({ model: "svc-pico-1", input: "say exactly: delete me" })
      const foreign = await other.responses.delete(created.id).catch((e) => e)
      expect(foreign.status).toBe(404)
      const res = await raw("DELETE", `/v1/responses/${created.id}`)
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ id: created.id, object: "response", deleted: true })
      expect((await client.responses.retrieve(created.id).catch((e) => e)).status).toBe(404)
      const chain = await client.responses.create({ model: "svc-pico-1", input: "x", previous_response_id: created.id }).catch((e) => e)
      expect(chain.status).toBe(404)
      expect((await raw("DELETE", `/v1/responses/${created.id}`)).status).toBe(404)
    })

    it("lists a chain's input items (earlier turns included), newest first by default, paged by after/limit/order", async () => {
      const first = await client.responses.create({ model: "svc-pico-1", input: [{ role: "system", content: "S" }, { role: "user", content: "say exactly: one" }] })
      const second = await client.responses.create({ model: "svc-pico-1", input: "say exactly: two", previous_response_id: first.id })

      const asc = await client.responses.inputItems.list(second.id, { order: "asc" })
      expect(asc.data.map((item: any) => [item.type, item.role, item.content[0].text])).toEqual([
        ["message", "system", "S"],
        ["message", "user", "say exactly: one"],
        ["message", "assistant", "one"],
        ["message", "user", "say exactly: two"]
      ])
      expect(asc.data[2].id).toBe(first.output[0].id)
      expect(new Set(asc.data.map((item) => item.id)).size).toBe(4)

      const desc = await client.responses.inputItems.list(second.id)
      expect(desc.data.map((item) => item.id)).toEqual([...asc.data].reverse().map((item) => item.id))

      const paged: Array<string> = []
      for await (const item of client.responses.inputItems.list(second.id, { limit: 1, order: "asc" })) paged.push(item.id!)
      expect(paged).toEqual(asc.data.map((item) => item.id))
      const page = await client.responses.inputItems.list(second.id, { limit: 2, order: "asc", after: asc.data[0].id! })
      expect(page.data.map((item) => item.id)).toEqual(asc.data.slice(1, 3).map((item) => item.id))
      expect(page.has_more).toBe(true)

      // A listed input item whose id the gateway minted can be referred to later.
      const userItem = asc.data[1]
      const referred = await client.responses.create({ model: "svc-pico-1", input: [{ type: "item_reference", id: userItem.id! }] })
      expect(referred.output_text).toBe("one")

      expect((await other.responses.inputItems.list(second.id).catch((e) => e)).status).toBe(404)
      const bad = await raw("GET", `/v1/responses/${second.id}/input_items?limit=101`)
      expect(bad.status).toBe(400)
      expect(((await bad.json()) as any).error.param).toBe("limit")
    })
  })

  describe("what a stored response can hold", () => {
    it("NUL and unpaired surrogates in the input and in the answer are stored, retrieved byte for byte and chained on", async () => {
      const odd = "a\u0000b \ud800 c"
      const created = await raw("POST", "/v1/responses", { model: "svc-pico-1", input: `say exactly: ${odd}`, store: true })
      expect(created.status).toBe(200)
      const bytes = await created.text()
      const id = JSON.parse(bytes).id as string
      // The simulator's tokenizer turns the lone surrogate into U+FFFD; the NUL it echoes as is.
      expect(JSON.parse(bytes).output[0].content[0].text).toMatch(/^a\u0000b .+ c$/)
      expect(await (await raw("GET", `/v1/responses/${id}`)).text()).toBe(bytes)
      const next = await client.responses.create({ model: "svc-pico-1", input: "say exactly: after", previous_response_id: id })
      expect(next.output_text).toBe("after")
      const listed = await client.responses.inputItems.list(next.id, { order: "asc" })
      expect((listed.data[0] as any).content[0].text).toBe(`say exactly: ${odd}`)
    })

    it("a large conversation is stored exactly: the body read back, its input items, and the next turn of its chain", async () => {
      // Over the 256 Ki characters from which stored JSON is made in slices, with what JSON escapes.
      const big = "é😀 \"q\" \\ line\n".repeat(30_000)
      const created = await raw("POST", "/v1/responses", { model: "svc-pico-1", input: `say exactly: done ${big}`, store: true })
      expect(created.status).toBe(200)
      const bytes = await created.text()
      const id = JSON.parse(bytes).id as string
      expect(await (await raw("GET", `/v1/responses/${id}`)).text()).toBe(bytes)
      const items = await client.responses.inputItems.list(id)
      expect((items.data[0] as any).content[0].text).toBe(`say exactly: done ${big}`)
      const next = await client.responses.create({ model: "svc-pico-1", input: "say exactly: after", previous_response_id: id })
      expect(next.output_text).toBe("after")
    })

    it("a conversation too large to store is a 413 naming store before the model is called; store: false is not limited so", async () => {
      const big = "word ".repeat(1_800_000) // 9 MB
      const tooBig = await raw("POST", "/v1/responses", { model: "svc-pico-1", input: big, store: true })
      expect(tooBig.status).toBe(413)
      const error = ((await tooBig.json()) as any).error
      expect(error).toMatchObject({ type: "invalid_request_error", param: "store" })
      expect(tooBig.headers.get("xsvc-model")).toBeNull() // never dispatched
    })
  })
})
