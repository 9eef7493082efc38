/**
 * Routes the spec names that this deployment does not serve answer the spec's 501
 * `not_implemented` in their family's shape — through raw HTTP and through both SDKs — so a client can
 * tell "not here" from "bad id" (an unknown path is still a 404).
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"

describe("routes the spec names but this deployment does not serve", () => {
  const dir = freshDataDir()
  let gw: GatewayProcess
  beforeAll(async () => {
    gw = await startGateway({ GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir) })
  })
  afterAll(async () => {
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const routes: ReadonlyArray<[string, string]> = [
    ["POST", "/v1/messages/batches"],
    ["GET", "/v1/messages/batches"],
    ["GET", "/v1/messages/batches/msgbatch_1"],
    ["DELETE", "/v1/messages/batches/msgbatch_1"],
    ["POST", "/v1/messages/batches/msgbatch_1/cancel"],
    ["GET", "/v1/messages/batches/msgbatch_1/results"],
    ["POST", "/v1/batches"],
    ["GET", "/v1/batches"],
    ["GET", "/v1/batches/batch_1"],
    ["POST", "/v1/batches/batch_1/cancel"],
    ["POST", "/v1/files"],
    ["GET", "/v1/files/file_1/content"]
  ]

  it.each(routes)("%s %s → 501 {error: {type: not_implemented, message}}", async (method, path) => {
    const res = await fetch(`${gw.baseUrl}${path}`, { method, headers: { authorization: `Bearer ${gw.apiKey}` }, ...(method === "POST" ? { body: "{}" } : {}) })
    expect(res.status).toBe(501)
    const body = (await res.json()) as { type?: string; error: { type: string; message: string } }
    // In the family's shape: Messages batches answer like /v1/messages, the rest like OpenAI.
    if (path.startsWith("/v1/messages")) expect(body.type).toBe("error")
    else expect(Object.keys(body)).toEqual(["error"])
    expect(body.error.type).toBe("not_implemented")
    expect(body.error.message).toMatch(/not enabled on this deployment/)
  })

  it("the SDKs surface it as a 501 error, and an unknown path is still a 404", async () => {
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const batch = await openai.batches.create({ input_file_id: "file_1", endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e) => e)
    expect(batch).toBeInstanceOf(OpenAI.APIError)
    expect(batch.status).toBe(501)
    expect(batch.type).toBe("not_implemented")
    const anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
    const list = await anthropic.messages.batches.list().catch((e) => e)
    expect(list.status).toBe(501)
    expect((await fetch(`${gw.baseUrl}/v1/nothing-here`)).status).toBe(404)
    // A wrong method on a named route is still a 405 with Allow.
    const wrong = await fetch(`${gw.baseUrl}/v1/batches`, { method: "PUT" })
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("POST, GET")
  })
})
