/** `/v1/embeddings` through the official OpenAI SDK, on every storage engine. */
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import { engines } from "../support/engines.ts"
import { type SharedGateway, sharedGateway } from "../support/shared-gateway.ts"

const norm = (v: ReadonlyArray<number>) => Math.hypot(...v)
const cosine = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b))

describe.each(engines())("embeddings ($name)", (engine) => {
  let gw: SharedGateway
  let client: OpenAI
  beforeAll(async () => {
    gw = await sharedGateway(engine)
    client = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })

  it("answers the SDK's default base64 request with unit vectors of the model's dimension", async () => {
    const { data: result, response } = await client.embeddings.create({
      model: "text-embedding-3-small",
      input: ["the cat sat on the mat", "a cat sat on a mat", "quarterly revenue grew in europe"]
    }).withResponse()
    expect(response.headers.get("xsvc-model")).toBe("svc-embed-small")
    expect(result.model).toBe("svc-embed-small")
    expect(result.data.map((d) => d.index)).toEqual([0, 1, 2])
    for (const d of result.data) {
      expect(d.embedding).toHaveLength(1536)
      expect(norm(d.embedding)).toBeCloseTo(1, 5)
    }
    const [a, b, c] = result.data.map((d) => d.embedding)
    expect(cosine(a, b)).toBeGreaterThan(cosine(a, c))
    expect(result.usage.prompt_tokens).toBeGreaterThan(10)
    expect(result.usage.total_tokens).toBe(result.usage.prompt_tokens)
  })

  it("returns the same vectors as float arrays when asked, and shortens where allowed", async () => {
    const input = "hello embeddings"
    const b64 = await client.embeddings.create({ model: "svc-embed-large", input })
    const floats = await client.embeddings.create({ model: "svc-embed-large", input, encoding_format: "float" })
    expect(floats.data[0].embedding).toHaveLength(2048)
    floats.data[0].embedding.forEach((x, i) => expect(b64.data[0].embedding[i]).toBeCloseTo(x, 6))
    const short = await client.embeddings.create({ model: "svc-embed-large", input, dimensions: 256, encoding_format: "float" })
    expect(short.data[0].embedding).toHaveLength(256)
    expect(norm(short.data[0].embedding)).toBeCloseTo(1, 5)
    for (const model of ["svc-embed-mini", "svc-embed-lite", "svc-embed-base", "svc-embed-code", "svc-embed-multilingual"]) {
      const res = await client.embeddings.create({ model, input: "x y z", encoding_format: "float" })
      expect(res.data[0].embedding.length, model).toBe({ "svc-embed-mini": 384, "svc-embed-lite": 512, "svc-embed-base": 768 }[model as "svc-embed-mini"] ?? 1024)
    }
  })

  it("refuses bad input with 400 naming the field, unknown models with 404", async () => {
    const fixed = await client.embeddings.create({ model: "svc-embed-mini", input: "x", dimensions: 100 }).catch((e) => e)
    expect(fixed).toBeInstanceOf(OpenAI.BadRequestError)
    expect(fixed.error.type).toBe("invalid_request_error")
    expect(fixed.error.param).toBe("dimensions")
    const empty = await client.embeddings.create({ model: "svc-embed-mini", input: "" }).catch((e) => e)
    expect(empty).toBeInstanceOf(OpenAI.BadRequestError)
    expect(empty.error.param).toBe("input")
    const unknown = await client.embeddings.create({ model: "text-embedding-9", input: "x" }).catch((e) => e)
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
    expect(unknown.error.type).toBe("not_found")
    const chatModel = await client.embeddings.create({ model: "svc-atlas-1", input: "x" }).catch((e) => e)
    expect(chatModel).toBeInstanceOf(OpenAI.NotFoundError)
  })

  it("authenticates with Bearer only and answers in the OpenAI error shape", async () => {
    const noKey = await fetch(`${gw.baseUrl}/v1/embeddings`, { method: "POST", body: JSON.stringify({ model: "svc-embed-mini", input: "x" }) })
    expect(noKey.status).toBe(401)
    const body = await noKey.json() as { error: { type: string; message: string; param: unknown } }
    expect(body.error.type).toBe("authentication_error")
    expect(body).toHaveProperty("error.param", null)
    const wrong = await new OpenAI({ apiKey: "svc_wrong", baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      .embeddings.create({ model: "svc-embed-mini", input: "x" }).catch((e) => e)
    expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError)
    const xApiKey = await fetch(`${gw.baseUrl}/v1/embeddings`, { method: "POST", headers: { "x-api-key": gw.apiKey! }, body: "{}" })
    expect(xApiKey.status).toBe(401)
    const limited = (await (await gw.admin("POST", "/admin/v1/keys", { permissions: { surfaces: ["chat"] } })).json() as { key: string }).key
    const forbidden = await new OpenAI({ apiKey: limited, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
      .embeddings.create({ model: "svc-embed-mini", input: "x" }).catch((e) => e)
    expect(forbidden).toBeInstanceOf(OpenAI.PermissionDeniedError)
    const modelLimited = (await (await gw.admin("POST", "/admin/v1/keys", { permissions: { models: ["svc-embed-l*"] } })).json() as { key: string }).key
    const c = new OpenAI({ apiKey: modelLimited, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    expect((await c.embeddings.create({ model: "svc-embed-lite", input: "x" })).data).toHaveLength(1)
    expect(await c.embeddings.create({ model: "svc-embed-mini", input: "x" }).catch((e) => e)).toBeInstanceOf(OpenAI.PermissionDeniedError)
  })
})
