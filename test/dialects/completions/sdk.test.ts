/** Legacy completions through the `openai` SDK and raw HTTP against the real gateway process. */
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../../support/shared-gateway.ts"
import { sseFrames } from "../chat/support.ts"

describe.each(engines())("legacy completions ($name)", (engine) => {
  let gw: SharedGateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })

  it("completes a prompt (handle gpt-3.5-turbo-instruct) with a text_completion body", async () => {
    const { data, response } = await client.completions.create({ model: "gpt-3.5-turbo-instruct", prompt: "say exactly: the end" }).withResponse()
    expect(data.id).toMatch(/^cmpl-/)
    expect(data.object).toBe("text_completion")
    expect(data.model).toBe("svc-pico-1")
    expect(data.choices[0]).toMatchObject({ text: "the end", index: 0, logprobs: null, finish_reason: "stop" })
    expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens)
    expect(response.headers.get("xsvc-model")).toBe("svc-pico-1")
  })

  it("applies the default ceiling of 16 tokens, and echo", async () => {
    const long = await client.completions.create({ model: "svc-nova-mini", prompt: "Write an essay about rivers." })
    expect(long.choices[0].finish_reason).toBe("length")
    expect(long.usage!.completion_tokens).toBe(16)
    const echoed = await client.completions.create({ model: "svc-nova-mini", prompt: "say exactly: pong", echo: true })
    expect(echoed.choices[0].text).toBe("say exactly: pongpong")
  })

  it("echoes a large prompt whole, streamed (its JSON made ahead, in pieces) and not", async () => {
    // Over 256 Ki characters the streamed echo's JSON is made in slices and put into its chunk
    // (dialects/spliced-json.ts), which is written a slice a turn; the emoji straddle the cuts.
    const prompt = "say exactly: echoed " + "Prompt 😀 é \"q\" \\ \n words ".repeat(12_000)
    const stream = await client.completions.create({ model: "svc-orion-2", prompt, echo: true, stream: true })
    const texts: Array<string> = []
    for await (const chunk of stream) texts.push(chunk.choices[0]?.text ?? "")
    expect(texts[0]).toBe(prompt)
    const whole = await client.completions.create({ model: "svc-orion-2", prompt, echo: true })
    expect(whole.choices[0].text).toBe(prompt + texts.slice(1).join(""))
    expect(whole.usage!.prompt_tokens).toBeGreaterThan(12_000)
  })

  it("streams text deltas that join to the body's text, finish_reason last", async () => {
    const prompt = "say exactly: streaming legacy text works"
    const stream = await client.completions.create({ model: "svc-nova-mini", prompt, stream: true, stream_options: { include_usage: true } })
    let text = ""
    const chunks: Array<OpenAI.Completions.Completion> = []
    for await (const chunk of stream) {
      chunks.push(chunk)
      text += chunk.choices[0]?.text ?? ""
    }
    expect(text).toBe("streaming legacy text works")
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe("stop")
    expect(chunks.at(-1)!.choices).toEqual([])
    expect(chunks.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0)
  })

  it("refuses unsupported fields with a 400 naming them; raw SSE is data-only and ends in [DONE]", async () => {
    const error = await client.completions.create({ model: "svc-nova-mini", prompt: "x", suffix: "y" }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect(error.param).toBe("suffix")
    const tokens = await client.completions.create({ model: "svc-nova-mini", prompt: [1, 2, 3] }).catch((e) => e)
    expect(tokens.param).toBe("prompt")
    const res = await fetch(`${gw.baseUrl}/v1/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc-pico-1", prompt: "say exactly: raw", stream: true })
    })
    const text = await res.text()
    expect(text).not.toMatch(/^event:/m)
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
    const chunks = sseFrames(text).slice(0, -1).map((frame) => frame.data)
    expect(chunks.map((chunk) => chunk.choices[0].text).join("")).toBe("raw")
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1)
  })
})
