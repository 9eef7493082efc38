/**
 * OpenAI's Files and Batch APIs through the official `openai` SDK against the real gateway:
 * upload with `toFile`, create / retrieve / list / cancel, every output and error line checked,
 * input validation (`errors`), 400s naming the field, the file size limit (413), and isolation
 * between keys (404).
 */
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { keyFor, parseJsonl, waitForBatch } from "./support.ts"

const line = (customId: string, body: unknown, url = "/v1/chat/completions") => JSON.stringify({ custom_id: customId, method: "POST", url, body })
const jsonl = (lines: ReadonlyArray<string>) => lines.join("\n") + "\n"

describe.concurrent.each(engines())("OpenAI files and batches ($name)", (engine) => {
  let gw: GatewayHandle
  let client: OpenAI
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    gw = await startInProcessGateway({ ...setup.env, ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR), GATEWAY_FILE_MAX_BYTES: "200000" })
    client = new OpenAI({ apiKey: gw.apiKey, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  const upload = async (text: string, name = "input.jsonl", purpose: "batch" | "assistants" = "batch") =>
    client.files.create({ file: await toFile(Buffer.from(text), name), purpose })

  it("uploads, lists, retrieves, reads and deletes a file", inOrder, async () => {
    const text = jsonl([line("a", { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })])
    const file = await upload(text)
    expect(file).toMatchObject({ object: "file", bytes: Buffer.byteLength(text), filename: "input.jsonl", purpose: "batch", expires_at: null })
    expect(file.id).toMatch(/^file-/)
    expect(typeof file.created_at).toBe("number")
    expect(await client.files.retrieve(file.id)).toEqual(file)
    expect(await (await client.files.content(file.id)).text()).toBe(text)
    const listed = []
    for await (const f of client.files.list()) listed.push(f.id)
    expect(listed).toContain(file.id)
    expect(await client.files.delete(file.id)).toEqual({ id: file.id, object: "file", deleted: true })
    const gone = await client.files.retrieve(file.id).catch((e) => e)
    expect(gone.status).toBe(404)
  })

  it("refuses a file above GATEWAY_FILE_MAX_BYTES with 413 naming file, and a missing purpose with 400", inOrder, async () => {
    const big = await upload("x".repeat(200_001)).catch((e) => e)
    expect(big).toBeInstanceOf(OpenAI.APIError)
    expect(big.status).toBe(413)
    expect(big.param).toBe("file")
    const form = new FormData()
    form.append("file", new Blob(["{}\n"]), "a.jsonl")
    const res = await fetch(`${gw.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${gw.apiKey}` }, body: form })
    expect(res.status).toBe(400)
    expect(((await res.json()) as any).error.param).toBe("purpose")
  })

  it("runs a chat batch: every line answered once, in the output file, errors in the error file", inOrder, async () => {
    const lines = [
      ...Array.from({ length: 6 }, (_, i) => line(`ok-${i}`, { model: "svc-pico-1", messages: [{ role: "user", content: `say exactly: answer ${i}` }] })),
      line("unknown-model", { model: "no-such-model", messages: [{ role: "user", content: "hi" }] }),
      line("bad-body", { model: "svc-pico-1", messages: "not a list" })
    ]
    const input = await upload(jsonl(lines))
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "nightly" } })
    expect(created).toMatchObject({ object: "batch", endpoint: "/v1/chat/completions", input_file_id: input.id, completion_window: "24h", metadata: { job: "nightly" }, errors: null })
    expect(created.id).toMatch(/^batch_/)
    expect(["in_progress", "finalizing", "completed"]).toContain(created.status)
    const done = await waitForBatch(() => client.batches.retrieve(created.id), (b) => b.status === "completed")
    expect(done.request_counts).toEqual({ total: 8, completed: 6, failed: 2 })
    expect(done.completed_at).toBeGreaterThanOrEqual(done.created_at)
    expect(done.in_progress_at).not.toBeNull()
    expect(done.finalizing_at).not.toBeNull()
    const output = parseJsonl(await (await client.files.content(done.output_file_id!)).text())
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: 6 }, (_, i) => `ok-${i}`))
    for (const [i, l] of output.entries()) {
      expect(l.id).toMatch(/^batch_req_/)
      expect(l.error).toBeNull()
      expect(l.response.status_code).toBe(200)
      expect(l.response.body.object).toBe("chat.completion")
      expect(l.response.body.model).toBe("svc-pico-1")
      expect(l.response.body.choices[0].message.content).toBe(`answer ${i}`)
    }
    const errors = parseJsonl(await (await client.files.content(done.error_file_id!)).text())
    expect(errors.map((l) => l.custom_id)).toEqual(["unknown-model", "bad-body"])
    expect(errors[0].response.status_code).toBe(404)
    expect(errors[0].response.body.error.param).toBe("model")
    expect(errors[1].response.status_code).toBe(400)
    expect(errors[1].response.body.error.type).toBe("invalid_request_error")
    const outputFile = await client.files.retrieve(done.output_file_id!)
    expect(outputFile.purpose).toBe("batch_output")
  })

  it("a batch cancelled with more than a page of requests lists each one once, in order, in its two files", inOrder, async () => {
    // Results are read 32 rows at a time and each page becomes a piece of its file.
    const input = await upload(jsonl(Array.from({ length: 70 }, (_, i) => line(`c${i}`, { model: "svc-pico-1", messages: [{ role: "user", content: `say exactly: c ${i}` }] }))))
    const created = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    await client.batches.cancel(created.id)
    const done = await waitForBatch(() => client.batches.retrieve(created.id), (b) => b.status === "cancelled")
    const read = async (id: string | null | undefined) => id == null ? [] : parseJsonl(await (await client.files.content(id)).text())
    const output = await read(done.output_file_id)
    const errors = await read(done.error_file_id)
    expect(errors.length).toBeGreaterThan(32)
    for (const l of errors) expect(l.error.code).toBe("batch_cancelled")
    const index = (l: { custom_id: string }) => Number(l.custom_id.slice(1))
    expect([...output, ...errors].map(index).sort((a, b) => a - b)).toEqual(Array.from({ length: 70 }, (_, i) => i))
    for (const file of [output, errors]) expect(file.map(index)).toEqual(file.map(index).sort((a, b) => a - b))
  })

  it("runs embeddings and responses batches", inOrder, async () => {
    const embed = await upload(jsonl([line("e1", { model: "text-embedding-3-small", input: "hello", encoding_format: "float" }, "/v1/embeddings")]))
    const eb = await client.batches.create({ input_file_id: embed.id, endpoint: "/v1/embeddings", completion_window: "24h" })
    const edone = await waitForBatch(() => client.batches.retrieve(eb.id), (b) => b.status === "completed")
    const [e] = parseJsonl(await (await client.files.content(edone.output_file_id!)).text())
    expect(e.response.body.data[0].embedding).toHaveLength(1536)
    const resp = await upload(jsonl([line("r1", { model: "svc-pico-1", input: "say exactly: via responses" }, "/v1/responses")]))
    const rb = await client.batches.create({ input_file_id: resp.id, endpoint: "/v1/responses", completion_window: "24h" })
    const rdone = await waitForBatch(() => client.batches.retrieve(rb.id), (b) => b.status === "completed")
    const [r] = parseJsonl(await (await client.files.content(rdone.output_file_id!)).text())
    expect(r.response.body.object).toBe("response")
    expect(r.response.body.output_text ?? r.response.body.output[0].content[0].text).toBe("via responses")
  })

  it("fails a batch whose input does not validate, naming each line in errors", inOrder, async () => {
    const input = await upload(jsonl([
      "not json",
      line("dup", { model: "svc-pico-1", messages: [] }),
      line("dup", { model: "svc-pico-1", messages: [] }),
      line("other-url", { model: "svc-pico-1", input: "x" }, "/v1/responses"),
      JSON.stringify({ custom_id: "get", method: "GET", url: "/v1/chat/completions", body: {} })
    ]))
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    expect(batch.status).toBe("failed")
    expect(batch.failed_at).not.toBeNull()
    expect(batch.errors!.data!.map((e) => [e.code, e.line])).toEqual([
      ["invalid_json_line", 1],
      ["duplicate_custom_id", 3],
      ["mismatched_endpoint", 4],
      ["invalid_method", 5]
    ])
  })

  it("answers 400 naming the field for a bad create, and 404 for an unknown file", inOrder, async () => {
    const input = await upload(jsonl([line("a", { model: "svc-pico-1", messages: [] })]))
    const badEndpoint = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/moderations" as never, completion_window: "24h" }).catch((e) => e)
    expect(badEndpoint.status).toBe(400)
    expect(badEndpoint.param).toBe("endpoint")
    const badWindow = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "1h" as never }).catch((e) => e)
    expect(badWindow.status).toBe(400)
    expect(badWindow.param).toBe("completion_window")
    const missing = await client.batches.create({ input_file_id: "file-nope", endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e) => e)
    expect(missing.status).toBe(404)
    expect(missing.param).toBe("input_file_id")
    const tooMany = await upload(jsonl(Array.from({ length: 1001 }, (_, i) => line(`n${i}`, { model: "m", messages: [] }))))
    const over = await client.batches.create({ input_file_id: tooMany.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e) => e)
    expect(over.status).toBe(400)
    expect(over.param).toBe("input_file_id")
    const notBatch = await upload("hello", "notes.txt", "assistants")
    const wrongPurpose = await client.batches.create({ input_file_id: notBatch.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e) => e)
    expect(wrongPurpose.status).toBe(400)
  })

  it("lists batches newest first with after/limit, and cancels one", inOrder, async () => {
    const input = await upload(jsonl([line("a", { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })]))
    const first = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const second = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const page = await client.batches.list({ limit: 1 })
    expect(page.data.map((b) => b.id)).toEqual([second.id])
    expect(page.has_more).toBe(true)
    const next = await client.batches.list({ limit: 1, after: second.id })
    expect(next.data.map((b) => b.id)).toEqual([first.id])
    const cancelled = await client.batches.cancel(first.id)
    expect(["cancelling", "cancelled", "completed"]).toContain(cancelled.status)
    const ended = await waitForBatch(() => client.batches.retrieve(first.id), (b) => ["cancelled", "completed"].includes(b.status))
    expect(ended.request_counts?.total).toBe(1)
  })

  it("isolates keys: another key's files and batches are 404, and lists do not show them", inOrder, async () => {
    const input = await upload(jsonl([line("a", { model: "svc-pico-1", messages: [{ role: "user", content: "hi" }] })]))
    const batch = await client.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
    const other = new OpenAI({ apiKey: await keyFor(gw, "other"), baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    for (
      const attempt of [
        () => other.files.retrieve(input.id),
        () => other.files.content(input.id),
        () => other.files.delete(input.id),
        () => other.batches.retrieve(batch.id),
        () => other.batches.cancel(batch.id),
        () => other.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" })
      ] as ReadonlyArray<() => Promise<unknown>>
    ) {
      const error = await attempt().then(() => undefined, (e) => e)
      expect(error?.status).toBe(404)
    }
    expect((await other.files.list()).data).toEqual([])
    expect((await other.batches.list()).data).toEqual([])
  })

  it("needs the batches permission surface", inOrder, async () => {
    const res = await gw.admin("POST", "/admin/v1/keys", { name: "chat-only", plan: "pro", permissions: { surfaces: ["chat"] } })
    const limited = new OpenAI({ apiKey: ((await res.json()) as any).key, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const denied = await limited.batches.list().catch((e) => e)
    expect(denied.status).toBe(403)
  })
})
