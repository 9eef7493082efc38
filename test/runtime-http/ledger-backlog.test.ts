/**
 * A database that answers reads but refuses the ledger's writes (a full disk, here a trigger that
 * raises on every insert into `usage_ledger`): keys and budgets keep working, so calls would go
 * on and their usage rows pile up in memory without bound. With `GATEWAY_LEDGER_MAX_PENDING` at 3:
 * - the calls up to the bound are answered, their rows kept;
 * - the next call is refused with a 503 naming the ledger (with Retry-After), on every surface,
 *   as the official SDKs read it;
 * - once the database takes the rows again, calls are answered, and the ledger holds one row for
 *   every answered call: none lost, none twice;
 * - a row the database cannot store (a data exception, here raised by a trigger for one model's
 *   rows) does not hold back the rows beside it: they are written, and only it is dropped (logged).
 */
import Anthropic from "@anthropic-ai/sdk"
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { createKey } from "./support.ts"

const { postgresUrl } = inject("services")

const MAX_PENDING = 3

describe.runIf(postgresUrl !== null)("a ledger the database will not take", () => {
  let gw: GatewayHandle
  let db: { url: string; drop(): void }
  const dir = freshDataDir()
  const psql = (statement: string) => execFileSync("psql", [db.url, "-tAc", statement]).toString().trim()

  beforeAll(async () => {
    db = await migratedPostgresDatabase(postgresUrl!)
    gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      DATABASE_URL: db.url,
      GATEWAY_ADMIN_TOKEN: "ledger-admin",
      GATEWAY_LEDGER_MAX_PENDING: String(MAX_PENDING),
      ...fastConfigEnv(dir)
    })
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("refuses new calls past its bound until the rows are written, and loses none", async () => {
    const key = await createKey(gw)
    const openai = new OpenAI({ apiKey: key.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const anthropic = new Anthropic({ apiKey: key.secret, baseURL: gw.baseUrl, maxRetries: 0 })
    const chat = () => openai.chat.completions.create({ model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user", content: "hello" }] })
    const rows = () => Number(psql(`SELECT count(*) FROM usage_ledger WHERE key_id = '${key.id}'`))
    let answered = 0

    await chat()
    answered++
    await expect.poll(rows).toBe(answered)

    psql(`CREATE FUNCTION refuse_ledger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full (test)'; END $$;
      CREATE TRIGGER refuse_ledger BEFORE INSERT ON usage_ledger FOR EACH ROW EXECUTE FUNCTION refuse_ledger()`)
    for (let i = 0; i < MAX_PENDING; i++) {
      await chat()
      answered++
    }

    const refused = await chat().then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(OpenAI.APIError)
    const openaiError = refused as InstanceType<typeof OpenAI.APIError>
    expect({ status: openaiError.status, type: openaiError.type }).toEqual({ status: 503, type: "api_error" })
    expect(openaiError.message).toMatch(/Usage ledger unavailable: 3 calls' usage waits to be written/)
    expect(openaiError.headers?.get("retry-after")).toBe("5")

    const refusedMessage = await anthropic.messages.create({ model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user", content: "hello" }] })
      .then(() => undefined, (error: unknown) => error)
    expect(refusedMessage).toBeInstanceOf(Anthropic.APIError)
    expect((refusedMessage as InstanceType<typeof Anthropic.APIError>).status).toBe(503)
    expect((refusedMessage as InstanceType<typeof Anthropic.APIError>).message).toMatch(/Usage ledger unavailable/)
    // The rows still wait; none was written.
    expect(rows()).toBe(1)

    psql("DROP TRIGGER refuse_ledger ON usage_ledger")
    await expect.poll(rows).toBe(answered)
    await chat()
    answered++
    await expect.poll(rows).toBe(answered)
  }, 60_000)

  it("writes the rows beside one the database cannot store", async () => {
    const key = await createKey(gw)
    const openai = new OpenAI({ apiKey: key.secret, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const chat = (model: string) => openai.chat.completions.create({ model, max_tokens: 16, messages: [{ role: "user", content: "hello" }] })
    const rowsOf = (model: string) => Number(psql(`SELECT count(*) FROM usage_ledger WHERE key_id = '${key.id}' AND model = '${model}'`))
    psql(`CREATE FUNCTION refuse_lyra() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.model = 'svc-lyra-3' THEN RAISE EXCEPTION 'value out of range (test)' USING ERRCODE = '22003'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_lyra BEFORE INSERT ON usage_ledger FOR EACH ROW EXECUTE FUNCTION refuse_lyra()`)
    try {
      // One flush's batch holds both models' rows (the calls are answered well within a second).
      await Promise.all([chat("svc-pico-1"), chat("svc-lyra-3"), chat("svc-pico-1")])
      await expect.poll(() => rowsOf("svc-pico-1")).toBe(2)
      // The refused row left the buffer: as many new calls as it may hold are taken (with the row
      // still there the last would be refused), and written.
      for (let i = 0; i < MAX_PENDING; i++) await chat("svc-pico-1")
      await expect.poll(() => rowsOf("svc-pico-1")).toBe(2 + MAX_PENDING)
      expect(rowsOf("svc-lyra-3")).toBe(0)
    } finally {
      psql("DROP TRIGGER refuse_lyra ON usage_ledger")
    }
  }, 60_000)
})
