/**
 * Capacity queues over HTTP: requests beyond a placement's capacity wait instead of failing, are
 * served fairly across keys, get headers and keepalives while they wait (streams), and leave with a
 * 503 in the dialect's shape when the maximum wait passes.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createKey, gatewayWith, placeModel, post, queueOf, readChunks, type TestGateway, untilQueue, watchQueue } from "./support.ts"

describe("capacity queues over HTTP", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-pico-1", [{ id: "pico-a", capacity: 2, ttftMs: 120 }])
      placeModel(config, "svc-lyra-3", [{ id: "lyra-a", capacity: 1, ttftMs: 600 }])
      // A holder that outlasts anything a loaded machine does meanwhile (the disconnect test).
      placeModel(config, "svc-nova-mini", [{ id: "nova-hold", capacity: 1, ttftMs: 4_000 }])
      // Waiting streams commit at once here (no header hold): these tests are about what follows.
    }, { GATEWAY_KEEPALIVE_MS: "50", GATEWAY_STREAM_HOLD_MS: "0" })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("serves 20 concurrent requests to a model of capacity 2: all succeed, none gets a 429, at most 2 run at once", async () => {
    const client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const stop = watchQueue(gw, "pico-a")
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) =>
      client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: `say exactly: answer ${i}` }] })))
    const seen = await stop()
    const answers = results.map((r) => (r.status === "fulfilled" ? r.value.choices[0].message.content : `failed: ${r.reason}`))
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `answer ${i}`))
    expect(seen.maxInUse).toBeLessThanOrEqual(2)
    expect(seen.maxInUse).toBe(2)
    expect(seen.maxWaiting).toBeGreaterThan(0) // they really queued
    const after = await queueOf(gw, "pico-a")
    expect(after).toMatchObject({ modelId: "svc-pico-1", capacity: 2, inUse: 0, waiting: 0, circuit: "closed" })
  })

  it("is fair across keys: a key that floods the queue does not starve another", async () => {
    const flooder = await createKey(gw)
    const other = await createKey(gw)
    const finished: Array<string> = []
    const ask = (key: string, label: string) =>
      post(gw, "/v1/chat/completions", key, { model: "svc-pico-1", messages: [{ role: "user", content: `say exactly: ${label}` }] })
        .then(async (res) => {
          expect(res.status).toBe(200)
          finished.push(label)
        })
    // Both slots are held (a hanging call never answers) until the whole flood and then the other
    // key's request are queued: the order they are served in is the queue's alone, not timing's.
    const fault = async (mode: string) => expect((await gw.admin("POST", "/admin/v1/placements/pico-a/faults", { mode })).status).toBe(200)
    await fault("hang")
    const holders = [new AbortController(), new AbortController()]
    const held = holders.map((abort) =>
      fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        signal: abort.signal,
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "svc-pico-1", messages: [{ role: "user", content: "hold" }] })
      }).then((r) => r.text()).catch((e: Error) => e.name))
    await untilQueue(gw, "pico-a", (q) => q.inUse === 2)
    await fault("none") // calls granted from now on answer
    const flood = Array.from({ length: 12 }, (_, i) => ask(flooder.secret, `flood ${i}`))
    await untilQueue(gw, "pico-a", (q) => q.waiting === 12) // the flood is queued first
    const otherAsked = ask(other.secret, "other")
    await untilQueue(gw, "pico-a", (q) => q.waiting === 13)
    for (const abort of holders) abort.abort() // both slots free at once
    expect(await Promise.all(held)).toEqual(["AbortError", "AbortError"])
    await Promise.all([...flood, otherAsked])
    // Round-robin between keys: the other key is served within the next round, not after the flood.
    expect(finished.indexOf("other")).toBeLessThan(5)
  })

  it("sends a waiting stream its headers and keepalives at once, then the answer (Chat Completions, raw SSE)", async () => {
    const holder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-lyra-3", messages: [{ role: "user", content: "hold the slot" }] })
    await untilQueue(gw, "lyra-a", (q) => q.inUse === 1) // the holder has the only slot
    const waiting = await post(gw, "/v1/chat/completions", gw.apiKey!, {
      model: "svc-lyra-3", stream: true, messages: [{ role: "user", content: "say exactly: worth the wait" }]
    })
    // Headers arrived while the first request still holds the only slot.
    expect((await queueOf(gw, "lyra-a")).waiting).toBe(1)
    expect(waiting.status).toBe(200)
    expect(waiting.headers.get("content-type")).toContain("text/event-stream")
    // Committed before a model was chosen: no `xsvc-model` (the chunks' `model` names what served).
    expect(waiting.headers.get("xsvc-model")).toBeNull()
    const chunks = await readChunks(waiting)
    const text = chunks.join("")
    expect(text.startsWith(": keepalive\n\n")).toBe(true)
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
    const content = text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "").join("")
    expect(content).toBe("worth the wait")
    expect((await holder).status).toBe(200)
  })

  it("drops a waiter at once when its client disconnects (streaming or not)", async () => {
    // The holder answers after 4 s: the slot is still its own when the waiters have gone, however
    // slowly this runs (with 600 ms a loaded machine saw it end first, and the slot free).
    const holder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-nova-mini", messages: [{ role: "user", content: "hold" }] })
    await untilQueue(gw, "nova-hold", (q) => q.inUse === 1) // the holder has the only slot
    const aborts = [new AbortController(), new AbortController()]
    const waiting = aborts.map((abort, i) =>
      fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: "POST",
        signal: abort.signal,
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "svc-nova-mini", stream: i === 1, messages: [{ role: "user", content: "wait" }] })
      }).then((r) => r.text()).catch((e: Error) => e.name))
    await untilQueue(gw, "nova-hold", (q) => q.waiting === 2)
    for (const abort of aborts) abort.abort()
    expect(await Promise.all(waiting)).toEqual(["AbortError", "AbortError"])
    await untilQueue(gw, "nova-hold", (q) => q.waiting === 0)
    const after = await queueOf(gw, "nova-hold")
    expect(after.waiting).toBe(0)
    expect(after.inUse).toBe(1) // only the holder: the slot was not given to a gone client
    expect((await holder).status).toBe(200)
    expect((await queueOf(gw, "nova-hold")).inUse).toBe(0)
  })

  it("a waiting Messages stream gets ping events and the SDK reads the whole message", async () => {
    const anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
    const holder = anthropic.messages.create({ model: "svc-lyra-3", max_tokens: 100, messages: [{ role: "user", content: "hold" }] })
    await untilQueue(gw, "lyra-a", (q) => q.inUse === 1) // the holder has the only slot
    const stream = anthropic.messages.stream({ model: "svc-lyra-3", max_tokens: 100, messages: [{ role: "user", content: "say exactly: pinged" }] })
    const events: Array<string> = []
    stream.on("streamEvent", (event) => events.push(event.type))
    const message = await stream.finalMessage()
    expect(message.content).toMatchObject([{ type: "text", text: "pinged" }])
    expect(events[0]).toBe("message_start")
    await holder
  })
})

describe("the maximum wait", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await gatewayWith((config) => {
      placeModel(config, "svc-pico-1", [{ id: "pico-a", capacity: 1, ttftMs: 1_500 }])
    }, { GATEWAY_QUEUE_MAX_WAIT_MS: "300", GATEWAY_KEEPALIVE_MS: "50", GATEWAY_STREAM_HOLD_MS: "0" })
  })
  afterAll(async () => {
    await gw?.close()
  })

  it("ends a wait with 503 api_error and retry-after (non-streaming), and with the dialect's error event (stream)", async () => {
    const holder = post(gw, "/v1/chat/completions", gw.apiKey!, { model: "svc-pico-1", messages: [{ role: "user", content: "hold" }] })
    await untilQueue(gw, "pico-a", (q) => q.inUse === 1) // the holder has the only slot
    const client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const failed = await client.chat.completions.create({ model: "svc-pico-1", messages: [{ role: "user", content: "wait" }] }).catch((e) => e)
    expect(failed).toBeInstanceOf(OpenAI.APIError)
    expect(failed.status).toBe(503)
    expect(failed.error.type).toBe("api_error")
    expect(Number(failed.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)

    const anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
    const raw = await post(gw, "/v1/messages", gw.apiKey!, { model: "svc-pico-1", max_tokens: 50, stream: true, messages: [{ role: "user", content: "wait" }] })
    expect(raw.status).toBe(200) // committed while waiting
    const text = (await readChunks(raw)).join("")
    expect(text.startsWith("event: ping\n")).toBe(true)
    expect(text).toContain("event: error\n")
    expect(text).toContain('"type":"api_error"')
    const sdkStream = anthropic.messages.stream({ model: "svc-pico-1", max_tokens: 50, messages: [{ role: "user", content: "wait" }] })
    const sdkError = await sdkStream.finalMessage().catch((e) => e)
    expect(sdkError).toBeInstanceOf(Anthropic.APIError)
    expect((await holder).status).toBe(200)
  })
})
