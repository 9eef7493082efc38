/**
 * One request must never freeze the gateway for everyone else (issue 10, item 1): on every surface
 * that takes text, a 1 MiB unbroken string and 1 MiB of emoji — in the prompt and, where the
 * surface has tools, inside `tools[].input_schema` — get a proper answer (or a 4xx, never a 5xx)
 * while another client's `GET /v1/models` keeps answering in under 100 ms. So does a 32 MiB body of
 * a million tiny messages (or items, prompts, schema nodes) on every chat surface: a 400 naming
 * the field, from a parser that works in slices (`util/sliced-json.ts`).
 *
 * Before the fix, token counting ran BPE on the event loop in time quadratic in an unbroken run:
 * 256 KB of `A` held every client for 16 s, so these requests held it for minutes.
 *
 * The bystander runs in a worker thread of its own, so the time this process spends building and
 * reading megabyte bodies never counts as the gateway's delay.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Bystander, startBystander } from "../support/bystander.ts"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

const MIB = 1 << 20
const inputs: ReadonlyArray<readonly [string, string]> = [
  ["1 MiB unbroken", "A".repeat(MIB)],
  ["1 MiB of emoji", "😀".repeat(MIB / 4)]
]

/** A tool whose input schema carries the hostile string. */
const schemaWith = (text: string) => ({ type: "object", properties: { q: { type: "string", description: text } } })

/** Creates an agent run on `gw` and waits until its step has run; returns the final run. */
const runToEnd = async (gw: SharedGateway, body: unknown) => {
  const headers = { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" }
  const created = await fetch(`${gw.baseUrl}/v1/agent-runs`, { method: "POST", headers, body: JSON.stringify(body) })
  const text = await created.text()
  expect(created.status, text.slice(0, 300)).toBe(202)
  const id = (JSON.parse(text) as { run: { id: string } }).run.id
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const run = (await (await fetch(`${gw.baseUrl}/v1/agent-runs/${id}`, { headers })).json()) as { run: { status: string; outcome: unknown } }
    if (run.run.status !== "running") return run.run
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`run ${id} did not finish`)
}

/**
 * The run's shared gateways (one process per engine, `shared-gateway.ts`): this file runs alone
 * at the end of the run (the `latency` project), when every other suite is done with them, so it
 * starts no process of its own (two starts and warm-ups were ~2 s of this file's ~8 s, with a core
 * idle). Every engine's gateway is warmed at once before the first engine's tests, as a running
 * gateway is (when this file runs alone, they are fresh).
 */
let warming: Map<string, Promise<SharedGateway>> | undefined
const warmAll = () =>
  (warming ??= new Map(engines().map((engine) => [engine.name, (async () => {
    const gw = await sharedGateway(engine)
    const anthropic = new Anthropic({ apiKey: gw.apiKey, baseURL: gw.baseUrl, maxRetries: 0, timeout: 60_000 })
    const openai = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0, timeout: 60_000 })
    // Every path once (first queries, JIT, the tokenizer thread).
    await anthropic.messages.create({ model: "atlas", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
    await anthropic.messages.countTokens({ model: "atlas", messages: [{ role: "user", content: "hi" }] })
    await openai.embeddings.create({ model: "svc-embed-small", input: "hi" })
    await runToEnd(gw, { model: "atlas", input: "hi" })
    return gw
  })()])))

describe.each(engines())("hostile input does not hold other clients ($name)", (engine) => {
  let gw: SharedGateway
  let bystander: Bystander
  let anthropic: Anthropic
  let openai: OpenAI

  beforeAll(async () => {
    // Every engine's warm-up ends before any engine's tests begin.
    await Promise.all(warmAll().values())
    gw = await warmAll().get(engine.name)!
    anthropic = new Anthropic({ apiKey: gw.apiKey, baseURL: gw.baseUrl, maxRetries: 0, timeout: 60_000 })
    openai = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0, timeout: 60_000 })
    bystander = await startBystander(gw.baseUrl)
  }, 120_000)
  afterAll(async () => {
    await bystander?.stop()
  })

  const whileBystanding = (call: () => Promise<void>) => bystander.whileBystanding(call)

  it("meters a prompt near the context window at its exact count, so the loose bound never cuts the answer", async () => {
    // 25,001 tokens exactly, 40,001 by the bound metering reserves: above pico's 32,000-token
    // window, where the bound alone would leave one output token.
    const prompt = "the quick brown fox jumps over the lazy dog. ".repeat(2_500)
    const answer = await openai.chat.completions.create({ model: "pico", messages: [{ role: "user", content: prompt }] })
    expect(answer.choices[0].finish_reason).toBe("stop")
    expect(answer.usage!.prompt_tokens).toBeLessThan(32_000)
    expect(answer.usage!.completion_tokens).toBeGreaterThan(1)
  })

  /** The default body limit (32 MiB) filled by `item` repeated in a list after `head`. */
  const filling = (head: string, item: string, tail: string) => {
    const count = Math.floor((32 * MIB - 4096 - head.length - tail.length) / (item.length + 1))
    return head + Array(count).fill(item).join(",") + tail
  }

  /** A raw POST of a prebuilt body (an SDK would copy 32 MiB of objects first). */
  const post = async (path: string, body: string) => {
    const headers = { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json", "anthropic-version": "2023-06-01" }
    const res = await fetch(`${gw.baseUrl}${path}`, { method: "POST", headers, body })
    return { status: res.status, text: await res.text() }
  }

  // ~1.1M tiny messages in 32 MiB: JSON.parse alone held the loop ~0.4 s and the passes after
  // it seconds more. Parsed in slices, the body is refused at the value limit, naming the field.
  const manyItems: ReadonlyArray<readonly [string, string, string, string]> = [
    ["/v1/chat/completions", `{"model":"atlas","max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, "messages"],
    ["/v1/messages", `{"model":"atlas","max_tokens":16,"messages":[`, `{"role":"user","content":"a"}`, "messages"],
    ["/v1/messages/count_tokens", `{"model":"atlas","messages":[`, `{"role":"user","content":"a"}`, "messages"],
    ["/v1/responses", `{"model":"atlas","max_output_tokens":16,"input":[`, `{"role":"user","content":"a"}`, "input"],
    ["/v1/completions", `{"model":"atlas","max_tokens":16,"prompt":[`, `"a"`, "prompt"],
    ["/v1/chat/completions", `{"model":"atlas","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"p":[`, `{}`, "tools"]
  ]
  // Refused while the body is parsed, before storage is reached: on the embedded engine only (this
  // file runs alone at the end of a run, so its time is the run's).
  for (const [path, head, item, field] of engine.name === "embedded" ? manyItems : []) {
    it(`${path}: 32 MiB of tiny ${field} is a 400 naming ${field}`, async () => {
      const body = filling(head, item, field === "tools" ? "]}}}}]}" : "]}")
      await whileBystanding(async () => {
        const answer = await post(path, body)
        expect(answer.status, answer.text.slice(0, 300)).toBe(400)
        expect(answer.text).toContain(`${field}: more than 65536 JSON values`)
      })
    })
  }

  // An 8 MiB object key: setting it on its object made V8 hash and copy it in one step (67–80 ms
  // on a slow VM, whatever the slicing). Refused by the parser as it arrives, naming where it is.
  if (engine.name === "embedded") {
    it("/v1/chat/completions: an 8 MiB object key is a 400 naming the field it is in", async () => {
      const body = `{"model":"atlas","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"metadata":{"${"k".repeat(8 * MIB)}":"v"}}`
      await whileBystanding(async () => {
        const answer = await post("/v1/chat/completions", body)
        expect(answer.status, answer.text.slice(0, 300)).toBe(400)
        expect(JSON.parse(answer.text).error).toMatchObject({ param: "metadata", message: "metadata: an object key longer than the limit of 131072 characters (in metadata)" })
      })
    })
  }

  // A model name of megabytes was quoted whole in the 404: an error body (and a request log line)
  // as large as the request, serialized in one turn. Quoted short now, with its length.
  if (engine.name === "embedded") {
    const name = "m".repeat(8 * MIB)
    const bodies: ReadonlyArray<readonly [string, string]> = [
      ["/v1/chat/completions", `{"model":"${name}","messages":[{"role":"user","content":"hi"}]}`],
      ["/v1/messages", `{"model":"${name}","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`],
      ["/v1/messages/count_tokens", `{"model":"${name}","messages":[{"role":"user","content":"hi"}]}`],
      ["/v1/responses", `{"model":"${name}","input":"hi"}`],
      ["/v1/completions", `{"model":"${name}","prompt":"hi"}`],
      ["/v1/embeddings", `{"model":"${name}","input":"hi"}`]
    ]
    it("a model name of 8 MiB is a 404 naming the model, quoted short, on every surface", async () => {
      await whileBystanding(async () => {
        for (const [path, body] of bodies) {
          const answer = await post(path, body)
          expect(answer.status, `${path}: ${answer.text.slice(0, 300)}`).toBe(404)
          expect(answer.text.length, path).toBeLessThan(2_000)
          expect(answer.text, path).toContain(`${"m".repeat(256)}… (${8 * MIB} characters)`)
        }
      })
    })
  }

  // The same for a forced tool that is not among the tools: its name is quoted short.
  if (engine.name === "embedded") {
    const name = "t".repeat(8 * MIB)
    const bodies: ReadonlyArray<readonly [string, string, string]> = [
      ["/v1/chat/completions", `{"model":"atlas","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"${name}"}}}`, "tool_choice.function.name"],
      ["/v1/messages", `{"model":"atlas","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"${name}"}}`, "tool_choice.name"],
      ["/v1/responses", `{"model":"atlas","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"${name}"}}`, "tool_choice.name"]
    ]
    it("a forced tool named by 8 MiB is a 400 naming tool_choice, the name quoted short, on every surface", async () => {
      await whileBystanding(async () => {
        for (const [path, body, param] of bodies) {
          const answer = await post(path, body)
          expect(answer.status, `${path}: ${answer.text.slice(0, 300)}`).toBe(400)
          expect(answer.text.length, path).toBeLessThan(2_000)
          expect(answer.text, path).toContain(param)
          expect(answer.text, path).toContain(`(${8 * MIB} characters)`)
        }
      })
    })
  }

  // A batch's input file is read when the batch is created: a file of millions of lines was split
  // into that many strings at once (16 MiB of newlines held every client for ~1 s, 8 MiB ~0.5 s).
  const batchOf = async (content: string) => {
    const file = await openai.files.create({ file: await toFile(Buffer.from(content), "input.jsonl"), purpose: "batch" })
    let refused: unknown
    await whileBystanding(async () => {
      refused = await openai.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((error: unknown) => error)
    })
    return refused
  }
  it("batches: 8 MiB of blank lines is a 400 naming input_file_id, without holding other clients", async () => {
    const refused = await batchOf("\n".repeat(8 * MIB))
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toContain("input_file_id: a batch holds 1 to 1000 requests; the file has 0")
  })
  it("batches: 4 million one-character lines are a 400 saying there are more than 1,000", async () => {
    const refused = await batchOf("a\n".repeat(4 * MIB))
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).message).toContain("the file has more than 1000")
  })

  it("a large body under the value limit is answered in full", async () => {
    // 15,000 messages (~45,000 values, 0.5 MiB): parsed in slices, then served as any other.
    const body = `{"model":"atlas","max_tokens":16,"messages":[` + Array(15_000).fill(`{"role":"user","content":"hello there"}`).join(",") + "]}"
    await whileBystanding(async () => {
      const answer = await post("/v1/chat/completions", body)
      expect(answer.status, answer.text.slice(0, 300)).toBe(200)
      expect(JSON.parse(answer.text).object).toBe("chat.completion")
    })
  })

  for (const [label, text] of inputs) {
    it(`messages: ${label}, in the prompt and in a tool schema`, async () => {
      await whileBystanding(async () => {
        const answer = await anthropic.messages.create({ model: "atlas", max_tokens: 64, messages: [{ role: "user", content: text }] })
        expect(answer.type).toBe("message")
      })
      await whileBystanding(async () => {
        const answer = await anthropic.messages.create({
          model: "atlas",
          max_tokens: 64,
          messages: [{ role: "user", content: "hi" }],
          tools: [{ name: "lookup", input_schema: schemaWith(text) as Anthropic.Tool.InputSchema }]
        })
        expect(answer.type).toBe("message")
      })
    })

    it(`count_tokens: ${label}, in the prompt and in a tool schema`, async () => {
      await whileBystanding(async () => {
        const counted = await anthropic.messages.countTokens({ model: "atlas", messages: [{ role: "user", content: text }] })
        expect(counted.input_tokens).toBeGreaterThan(1000)
      })
      await whileBystanding(async () => {
        const counted = await anthropic.messages.countTokens({
          model: "atlas",
          messages: [{ role: "user", content: "hi" }],
          tools: [{ name: "lookup", input_schema: schemaWith(text) as Anthropic.Tool.InputSchema }]
        })
        expect(counted.input_tokens).toBeGreaterThan(1000)
      })
    })

    it(`chat completions: ${label}, in the prompt and in a tool schema`, async () => {
      await whileBystanding(async () => {
        const answer = await openai.chat.completions.create({ model: "atlas", max_tokens: 64, messages: [{ role: "user", content: text }] })
        expect(answer.object).toBe("chat.completion")
      })
      await whileBystanding(async () => {
        const answer = await openai.chat.completions.create({
          model: "atlas",
          max_tokens: 64,
          messages: [{ role: "user", content: "hi" }],
          tools: [{ type: "function", function: { name: "lookup", parameters: schemaWith(text) } }]
        })
        expect(answer.object).toBe("chat.completion")
      })
    })

    it(`completions: ${label}`, async () => {
      await whileBystanding(async () => {
        const answer = await openai.completions.create({ model: "atlas", max_tokens: 16, prompt: text })
        expect(answer.object).toBe("text_completion")
      })
    })

    it(`responses: ${label}, in the input and in a tool schema`, async () => {
      await whileBystanding(async () => {
        const answer = await openai.responses.create({ model: "atlas", max_output_tokens: 64, input: text })
        expect(answer.object).toBe("response")
      })
      await whileBystanding(async () => {
        const answer = await openai.responses.create({
          model: "atlas",
          max_output_tokens: 64,
          input: "hi",
          tools: [{ type: "function", name: "lookup", parameters: schemaWith(text), strict: false }]
        })
        expect(answer.object).toBe("response")
      })
    })

    it(`embeddings: ${label}`, async () => {
      await whileBystanding(async () => {
        const answer = await openai.embeddings.create({ model: "svc-embed-small", input: text })
        expect(answer.data[0].embedding.length).toBe(1536)
      })
    })

    it(`an agent run step: ${label}, in the input and in a tool schema`, async () => {
      await whileBystanding(async () => {
        const run = await runToEnd(gw, { model: "atlas", input: text })
        // A prompt beyond the context window leaves one output token: incomplete, not failed.
        expect(["completed", "incomplete"]).toContain(run.status)
      })
      await whileBystanding(async () => {
        const run = await runToEnd(gw, { model: "atlas", input: "hi", tools: [{ name: "lookup", input_schema: schemaWith(text) }] })
        expect(["completed", "incomplete", "requires_action"]).toContain(run.status)
      })
    })
  }
})
