/**
 * Stored responses through the `openai` SDK and raw HTTP, on every storage engine: `store: true`
 * replays the exact bytes, `previous_response_id` continues the stored conversation with only the
 * new items, and unstored, unknown or another key's ids are 404s that name only the id sent.
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

describe.each(engines())("stored responses and chaining ($name)", (engine) => {
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

  it("store: true, then retrieve gives the same object and a raw GET the same bytes", async () => {
    const created = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: keep me", store: true })
    const createdBytes = await created.text()
    const id = JSON.parse(createdBytes).id as string
    expect(JSON.parse(createdBytes)).toMatchObject({ store: true, output: [{ content: [{ text: "keep me" }] }] })

    const again = await raw("GET", `/v1/responses/${id}`)
    expect(again.status).toBe(200)
    expect(again.headers.get("content-type")).toContain("application/json")
    expect(await again.text()).toBe(createdBytes)

    const viaSdk = await client.responses.create({ model: "svc-atlas-1", input: "say exactly: sdk copy", store: true })
    expect(await client.responses.retrieve(viaSdk.id)).toEqual(viaSdk)
  })

  it("a stored streamed response retrieves as exactly the response.completed envelope", async () => {
    const res = await raw("POST", "/v1/responses", { model: "svc-orion-2", input: "say exactly: streamed and kept", store: true, stream: true, reasoning: { effort: "low" } })
    const sse = await res.text()
    const completed = JSON.parse(/event: response\.completed\ndata: (.+)\n/.exec(sse)![1])
    const stored = await (await raw("GET", `/v1/responses/${completed.response.id}`)).text()
    expect(stored).toBe(JSON.stringify(completed.response))
    expect(completed.response.output.map((item: any) => item.type)).toEqual(["reasoning", "message"])

    const helper = await client.responses.stream({ model: "svc-lyra-3", input: "say exactly: helper kept", store: true }).finalResponse()
    // The helper adds its parse results (`output_parsed`, `parsed`); everything else is the same.
    expect(helper).toMatchObject(await client.responses.retrieve(helper.id))
  })

  it("store defaults to true, as OpenAI's does: an id from a call without `store` retrieves", async () => {
    const kept = await client.responses.create({ model: "svc-atlas-1", input: "say exactly: kept by default" })
    expect(kept).toMatchObject({ store: true })
    expect((await client.responses.retrieve(kept.id)).output_text).toBe("kept by default")
  })

  it("with store: false nothing is kept: retrieve and chaining on that id are 404s naming only the id (rules 1, 2)", async () => {
    const unstored = await client.responses.create({ model: "svc-atlas-1", input: "say exactly: forget me", store: false })
    expect(unstored).toMatchObject({ store: false })
    const retrieve = await client.responses.retrieve(unstored.id).catch((e) => e)
    expect(retrieve).toBeInstanceOf(OpenAI.NotFoundError)
    expect(retrieve.type).toBe("not_found")

    const chain = await client.responses.create({ model: "svc-atlas-1", input: "next", previous_response_id: unstored.id }).catch((e) => e)
    expect(chain).toBeInstanceOf(OpenAI.NotFoundError)
    expect(chain.type).toBe("invalid_request_error")
    expect(chain.param).toBe("previous_response_id")
    expect(chain.error.message).toBe(`Previous response with id '${unstored.id}' not found.`)
  })

  it("another key's stored id is a 404 on retrieve and on chaining, worded as for an unknown id", async () => {
    const mine = await client.responses.create({ model: "svc-atlas-1", input: "say exactly: private", store: true })
    const retrieve = await other.responses.retrieve(mine.id).catch((e) => e)
    expect(retrieve.status).toBe(404)
    expect(retrieve.type).toBe("not_found")
    const chain = await other.responses.create({ model: "svc-atlas-1", input: "x", previous_response_id: mine.id }).catch((e) => e)
    expect(chain.status).toBe(404)
    expect(chain.type).toBe("invalid_request_error")
    expect(chain.error.message).toBe(`Previous response with id '${mine.id}' not found.`)
    // The owner still sees it.
    expect((await client.responses.retrieve(mine.id)).id).toBe(mine.id)
  })

  it("chaining sends only the new item: the stored tool call names the tool the result answers", async () => {
    const first = await client.responses.create({ model: "svc-atlas-1", input: "Use get_weather for Oslo.", tools: [weatherTool], store: true })
    const call = first.output.find((item) => item.type === "function_call")!
    expect(call.name).toBe("get_weather")

    const result = { type: "function_call_output" as const, call_id: call.call_id, output: "snow" }
    const second = await client.responses.create({ model: "svc-atlas-1", input: [result], tools: [weatherTool], previous_response_id: first.id, store: true })
    expect(second.previous_response_id).toBe(first.id)
    // The simulator names the tool only if it finds the call in the conversation it was given.
    expect(second.output_text).toContain("The get_weather tool returned: snow.")
    const alone = await client.responses.create({ model: "svc-atlas-1", input: [result], tools: [weatherTool], store: false })
    expect(alone.output_text).toContain("The requested tool returned: snow.")
  })

  it("a large stored response (read back in pieces) is the same bytes, replays, lists its input and chains", async () => {
    // Over 256 KiB a document is read in pieces cut by bytes, so an emoji straddles a cut somewhere.
    // (Orion: its context window holds all of it, ~150k tokens.)
    const instructions = "Keep to the point 😀 é \"q\" ".repeat(10_000)
    const input = "say exactly: big " + "🦜".repeat(20_000)
    const created = await raw("POST", "/v1/responses", { model: "svc-orion-2", instructions, input, store: true })
    expect(created.status).toBe(200)
    const createdBytes = await created.text()
    const id = JSON.parse(createdBytes).id as string
    const got = await raw("GET", `/v1/responses/${id}`)
    expect(got.headers.get("content-length")).toBe(String(Buffer.byteLength(createdBytes)))
    expect(await got.text()).toBe(createdBytes)
    let completed: any
    for await (const event of await client.responses.retrieve(id, { stream: true })) if (event.type === "response.completed") completed = event.response
    expect(completed?.instructions).toBe(instructions)
    const items = await client.responses.inputItems.list(id)
    expect((items.data[0] as any).content[0].text).toBe(input)
    const next = await client.responses.create({ model: "svc-orion-2", input: "say exactly: small", previous_response_id: id })
    expect(next.output_text).toBe("small")
    expect(next.usage!.input_tokens).toBeGreaterThan(20_000) // the stored conversation came along
    // The large input item (80 KB: read in pieces) referred to by its id stands for itself.
    const referred = await client.responses.create({
      model: "svc-orion-2",
      input: [{ type: "item_reference", id: items.data[0]!.id! }, { role: "user", content: "say exactly: referred" }]
    })
    expect(referred.output_text).toBe("referred")
    expect(referred.usage!.input_tokens).toBeGreaterThan(20_000)
  })

  it("a streamed response with a large echo: every envelope frame holds it whole, and its replay is the same frames", async () => {
    // Large instructions and tools are put into the envelope frames from JSON made ahead (echo-json.ts).
    const instructions = "Echo me 😀 \"q\" \\ \n and keep to these words ".repeat(7_000)
    const tools = [{ type: "function" as const, name: "lookup", parameters: { type: "object", properties: { q: { type: "string", description: "word é ".repeat(40_000) } } }, strict: false }]
    // The output format's schema and the free strings are echoed too.
    const text = { format: { type: "json_schema", name: "answer", strict: false, schema: { type: "object", properties: { a: { type: "string", description: "say ü ".repeat(50_000) } } } } }
    const user = "user 😀 ".repeat(40_000)
    const live = await raw("POST", "/v1/responses", { model: "svc-orion-2", instructions, tools, text, user, input: "say exactly: echoed", stream: true, store: true })
    expect(live.status).toBe(200)
    const frames = (await live.text()).split("\n\n").filter((frame) => frame.startsWith("event: "))
    const data = frames.map((frame) => JSON.parse(frame.slice(frame.indexOf("\ndata: ") + 7)))
    const envelopes = data.filter((d) => d.response !== undefined).map((d) => d.response)
    expect(data.at(-1).type).toBe("response.completed")
    expect(envelopes.length).toBe(3) // created, in_progress, completed
    for (const envelope of envelopes) {
      expect(envelope.instructions).toBe(instructions)
      expect(envelope.tools).toEqual(tools)
      expect(envelope.text).toMatchObject(text)
      expect(envelope.user).toBe(user)
    }
    expect(data.map((d) => d.sequence_number)).toEqual(data.map((_, i) => i))
    const replayed = async (query: string) =>
      (await (await raw("GET", `/v1/responses/${envelopes[0].id}?stream=true${query}`)).text()).split("\n\n").filter((frame) => frame.startsWith("event: "))
    expect(await replayed("")).toEqual(frames)
    // The two envelope frames that open it are counted one by one: resuming after the first keeps the second.
    expect(await replayed("&starting_after=0")).toEqual(frames.slice(1))
    expect(await replayed("&starting_after=1")).toEqual(frames.slice(2))
  })

  it("a chain of three turns carries every earlier turn, and instructions do not carry over", async () => {
    const first = await client.responses.create({ model: "svc-pico-1", input: "say exactly: alpha", instructions: "Long instructions ".repeat(20), store: true })
    const second = await client.responses.create({ model: "svc-pico-1", input: "say exactly: beta", previous_response_id: first.id, store: true })
    const third = await client.responses.create({ model: "svc-pico-1", input: "say exactly: gamma", previous_response_id: second.id })
    expect([first.output_text, second.output_text, third.output_text]).toEqual(["alpha", "beta", "gamma"])
    expect(third.instructions).toBeNull()

    // The same last turn without the chain, and with the full transcript re-sent by hand (rule 2).
    const alone = await client.responses.create({ model: "svc-pico-1", input: "say exactly: gamma" })
    const resent = await client.responses.create({
      model: "svc-pico-1",
      input: [
        { role: "user", content: "say exactly: alpha" },
        { role: "assistant", content: "alpha" },
        { role: "user", content: "say exactly: beta" },
        { role: "assistant", content: "beta" },
        { role: "user", content: "say exactly: gamma" }
      ]
    })
    expect(third.usage!.input_tokens).toBeGreaterThan(alone.usage!.input_tokens)
    // Without the first turn's instructions the chained prompt is exactly the re-sent transcript.
    expect(third.usage!.input_tokens).toBe(resent.usage!.input_tokens)
  })

  it("an unknown id is a 404 on GET; GET needs a key", async () => {
    const missing = await raw("GET", "/v1/responses/resp_doesnotexist")
    expect(missing.status).toBe(404)
    expect((await missing.json() as any).error.type).toBe("not_found")
    const anonymous = await fetch(`${gw.baseUrl}/v1/responses/resp_doesnotexist`)
    expect(anonymous.status).toBe(401)
  })
})
