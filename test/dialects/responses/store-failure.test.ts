/**
 * A stored response whose store refuses it (spec: the client never sees the end of a response that
 * is not stored): on PostgreSQL, a trigger refuses every stored response with a data exception
 * (SQLSTATE class 22, the client's input: `store` is named, never a retryable 503).
 * - streamed: the answer's deltas, then `response.failed` and the `error` event, never
 *   `response.completed`; the id is then unknown;
 * - whole: a 400 naming `store`;
 * - where the items' insert is refused instead, the response's row is not kept either (the two
 *   inserts are one statement, or one transaction for a large response);
 * - a store that is down (a full disk: SQLSTATE 53100) is the store's fault, not the client's: a
 *   retryable 503, and on a stream an error event that is not `invalid_request_error` (it was a
 *   400 naming `store`, found with a gateway on a full tmpfs, 2026-12-03); a program limit (class
 *   54) a 413 naming `store`, as on every other route.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { freshDataDir, migratedPostgresDatabase } from "../../support/engines.ts"
import { fastConfigEnv } from "../../support/fast-config.ts"
import type { GatewayHandle } from "../../support/gateway-process.ts"
import { startInProcessGateway } from "../../support/in-process-gateway.ts"

const { postgresUrl } = inject("services")

/** Each SSE frame's event name and data, in order. */
const framesOf = (sse: string) =>
  sse.split("\n\n").filter((frame) => frame.startsWith("event: ")).map((frame) => {
    const [head, data] = frame.split("\ndata: ")
    return { event: head!.slice("event: ".length), data: JSON.parse(data!) as any }
  })

const psql = (url: string, statement: string) => execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qc", statement], { stdio: "pipe" })

describe.skipIf(postgresUrl === null)("a stored response the store refuses (postgres)", () => {
  let db: Awaited<ReturnType<typeof migratedPostgresDatabase>>
  let dir: string
  let gw: GatewayHandle
  beforeAll(async () => {
    db = await migratedPostgresDatabase(postgresUrl!)
    dir = freshDataDir()
    psql(db.url, `
      CREATE FUNCTION refuse_response() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22023'; END $$;
      CREATE TRIGGER refuse_response BEFORE INSERT ON stored_responses FOR EACH ROW EXECUTE FUNCTION refuse_response();`)
    gw = await startInProcessGateway({ DATABASE_URL: db.url, GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir) })
  }, 120_000)
  afterAll(async () => {
    await gw?.stop()
    await db?.drop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  const raw = (method: string, path: string, body?: unknown) =>
    fetch(`${gw.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  it("streamed: the deltas, then response.failed and an error naming the store; never completed, nothing kept", async () => {
    const res = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: one two three four five six", store: true, stream: true })
    expect(res.status).toBe(200)
    const frames = framesOf(await res.text())
    const events = frames.map((frame) => frame.event)
    expect(events[0]).toBe("response.created")
    expect(events).toContain("response.output_text.delta")
    expect(events).not.toContain("response.completed")
    expect(events.slice(-2)).toEqual(["response.failed", "error"])
    expect(frames.at(-1)!.data.message).toContain("could not be stored")
    const id = frames[0]!.data.response.id as string
    expect((await raw("GET", `/v1/responses/${id}`)).status).toBe(404)
  })

  it("whole: a 400 naming store", async () => {
    const res = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: kept nowhere", store: true })
    expect(res.status).toBe(400)
    const body = await res.json() as { error: { type: string; param: string; message: string } }
    expect(body.error).toMatchObject({ type: "invalid_request_error", param: "store" })
    expect(body.error.message).toContain("could not be stored")
  })

  it("an items' insert refused leaves no response row behind, streamed or whole", async () => {
    psql(db.url, `DROP TRIGGER refuse_response ON stored_responses;
      CREATE TRIGGER refuse_item BEFORE INSERT ON stored_response_items FOR EACH ROW EXECUTE FUNCTION refuse_response();`)
    const res = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: half kept", store: true, stream: true })
    const frames = framesOf(await res.text())
    expect(frames.at(-1)!.event).toBe("error")
    const whole = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: half kept", store: true })
    expect(whole.status).toBe(400)
    const rows = execFileSync("psql", [db.url, "-qAtc", "SELECT count(*) FROM stored_responses"]).toString().trim()
    expect(rows).toBe("0")
    expect((await raw("GET", `/v1/responses/${frames[0]!.data.response.id as string}`)).status).toBe(404)
  })

  /** The trigger function (on whichever table's trigger is in place) raises `code` from now on. */
  const refuseWith = (code: string, message: string) =>
    psql(db.url, `CREATE OR REPLACE FUNCTION refuse_response() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION '${message}' USING ERRCODE = '${code}'; END $$;`)

  it("a store that is down (a full disk): a retryable 503, whole or streamed, never the client's error", async () => {
    refuseWith("53100", "could not extend file: No space left on device (test)")
    const whole = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: no room", store: true })
    expect(whole.status).toBe(503)
    expect(whole.headers.get("retry-after")).not.toBeNull()
    const body = await whole.json() as { error: { type: string; message: string } }
    expect(body.error.type).not.toBe("invalid_request_error")
    expect(body.error.message).toContain("storage is unavailable")
    // The official SDK sees a server error (which it retries), not a BadRequestError.
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    await expect(openai.responses.create({ model: "svc-atlas-1", input: "say exactly: no room", store: true })).rejects.toMatchObject({ status: 503 })

    const streamed = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: no room", store: true, stream: true })
    const frames = framesOf(await streamed.text())
    expect(frames.slice(-2).map((frame) => frame.event)).toEqual(["response.failed", "error"])
    expect(frames.at(-1)!.data.code).not.toBe("invalid_request_error")
    expect(frames.at(-1)!.data.message).toContain("storage is unavailable")
  })

  it("a response too large for the store (a program limit): a 413 naming store", async () => {
    refuseWith("54000", "total size of jsonb object elements exceeds the maximum (test)")
    const whole = await raw("POST", "/v1/responses", { model: "svc-atlas-1", input: "say exactly: too big", store: true })
    expect(whole.status).toBe(413)
    const body = await whole.json() as { error: { type: string; param: string; message: string } }
    expect(body.error).toMatchObject({ type: "invalid_request_error", param: "store" })
    expect(body.error.message).toContain("too large to store")
  })
})
