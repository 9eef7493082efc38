/**
 * A stalled PostgreSQL (a partition, a lock, a frozen disk: connections stay open and nothing
 * comes back) must not hold requests without end. The gateway reaches its database through a
 * proxy in this process that can freeze (`support/postgres-proxy.ts`): it stops forwarding in both
 * directions and keeps every socket open, so no error ever arrives — only silence.
 *
 * What must hold, with `GATEWAY_STORAGE_TIMEOUT_MS` at 1.5 s:
 * - a key never seen is answered 503 api_error naming the key store within the deadline, not
 *   after the pool's own cancellation (5 s more) and never never;
 * - a key verified shortly before keeps working (stale-if-error), also once its cache entry
 *   expired, without waiting on the store again;
 * - a key whose budget was never rebuilt gets a 503 naming the rebuild within the deadline;
 * - a stored response's, a file list's and a state's read get a 503 (storage unavailable) within it;
 * - once the database answers again, every key works, and every answered call is in the ledger;
 * - every other route that waits on the database (batches, agent runs, artifacts, the admin API, a
 *   usage report queued behind a stalled ledger flush) gets a 503 once its statement has had no
 *   answer for three deadlines (the connection's answer deadline), not a wait without end.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { freshDataDir, migratedPostgresDatabase } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { type PostgresProxy, startPostgresProxy } from "../support/postgres-proxy.ts"
import { createKey, post } from "./support.ts"

const { postgresUrl } = inject("services")

const DEADLINE_MS = 1_500
/** Well before the deadline plus the pool's cancellation wait (5 s): the answer did not wait on it. */
const ANSWERED_WITHIN_MS = DEADLINE_MS + 2_500
/** A connection whose statement has had no answer for three deadlines fails (`storage/database.ts`). */
const ANSWER_DEADLINE_MS = 3 * DEADLINE_MS
const KEY_CACHE_MS = 5_000

const body = { model: "svc-pico-1", max_tokens: 16, messages: [{ role: "user", content: "hello" }] }

/**
 * A gateway on its own database, reached through a freezing proxy; `connectTimeoutS`: how long a
 * connection attempt into the stall waits.
 */
const stallingGateway = (connectTimeoutS: number) => {
  const made = { gw: undefined as unknown as GatewayHandle, proxy: undefined as unknown as PostgresProxy, db: undefined as unknown as { url: string; drop(): void } }
  const dir = freshDataDir()
  beforeAll(async () => {
    made.db = await migratedPostgresDatabase(postgresUrl!)
    made.proxy = await startPostgresProxy(new URL(made.db.url))
    made.gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      DATABASE_URL: `${made.proxy.through(made.db.url)}?connect_timeout=${connectTimeoutS}`,
      GATEWAY_ADMIN_TOKEN: "stall-admin",
      GATEWAY_STORAGE_TIMEOUT_MS: String(DEADLINE_MS),
      ...fastConfigEnv(dir)
    })
  }, 120_000)
  afterAll(async () => {
    made.proxy?.thaw()
    await made.gw?.stop()
    await made.proxy?.close()
    await made.db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })
  return made
}

describe.runIf(postgresUrl !== null)("a stalled PostgreSQL", () => {
  // A connection attempt into the stall waits 30 s (5 by default), so no answer within the
  // deadline can come from a failed attempt instead of the deadline itself.
  const made = stallingGateway(30)

  const timed = async (key: string) => {
    const started = performance.now()
    const res = await post(made.gw, "/v1/chat/completions", key, body)
    const json = (await res.json()) as { error?: { type: string; message: string } }
    return { status: res.status, error: json.error, ms: performance.now() - started }
  }

  it("answers within its deadline, keeps keys in use working, and loses no usage", async () => {
    const known = await createKey(made.gw)
    const unseeded = await createKey(made.gw)
    const stranger = await createKey(made.gw)
    let answeredForKnown = 0
    expect((await timed(known.secret)).status).toBe(200)
    answeredForKnown++
    // Verified (cached) but never metered: its budget is not built yet.
    expect((await fetch(`${made.gw.baseUrl}/v1/responses/resp_none`, { headers: { authorization: `Bearer ${unseeded.secret}` } })).status).toBe(404)
    const verifiedAt = performance.now()

    made.proxy.freeze()

    // Past the key cache's lifetime: the store is asked, gives no answer within the deadline, and
    // the key verified shortly before is honoured.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, verifiedAt + KEY_CACHE_MS + 200 - performance.now())))
    const first = await timed(known.secret)
    expect(first.status).toBe(200)
    expect(first.ms).toBeLessThan(ANSWERED_WITHIN_MS)
    answeredForKnown++

    const strangerCall = await timed(stranger.secret)
    expect({ status: strangerCall.status, type: strangerCall.error?.type }).toEqual({ status: 503, type: "api_error" })
    expect(strangerCall.error?.message).toMatch(/Key store unavailable \(no answer within 1500 ms\)/)
    expect(strangerCall.ms).toBeLessThan(ANSWERED_WITHIN_MS)

    const unseededCall = await timed(unseeded.secret)
    expect({ status: unseededCall.status, type: unseededCall.error?.type }).toEqual({ status: 503, type: "api_error" })
    expect(unseededCall.error?.message).toMatch(/allowance store is unavailable \(rebuild: the database gave no answer within 1500 ms\)/)
    expect(unseededCall.ms).toBeLessThan(ANSWERED_WITHIN_MS)

    // A request's own storage work has the deadline too: a stored response, a file list, a state.
    for (const path of ["/v1/responses/resp_none", "/v1/files", "/v1/states/state_none"]) {
      const started = performance.now()
      const read = await fetch(`${made.gw.baseUrl}${path}`, { headers: { authorization: `Bearer ${known.secret}` } })
      const readError = ((await read.json()) as { error?: { type: string } }).error
      expect({ path, status: read.status, type: readError?.type }).toEqual({ path, status: 503, type: "api_error" })
      expect(performance.now() - started, path).toBeLessThan(ANSWERED_WITHIN_MS)
    }

    // The store is known to be in trouble now: the known key no longer waits on it.
    for (let i = 0; i < 3; i++) {
      const call = await timed(known.secret)
      expect(call.status).toBe(200)
      expect(call.ms).toBeLessThan(DEADLINE_MS)
      answeredForKnown++
    }

    made.proxy.thaw()

    await expect.poll(async () => (await timed(stranger.secret)).status).toBe(200)
    await expect.poll(async () => (await timed(unseeded.secret)).status).toBe(200)
    expect((await timed(known.secret)).status).toBe(200)
    answeredForKnown++
    // The calls answered while the database stalled reach the ledger once it answers.
    await expect.poll(() =>
      Number(execFileSync("psql", [made.db.url, "-tAc", `SELECT count(*) FROM usage_ledger WHERE key_id = '${known.id}'`]).toString().trim())
    ).toBe(answeredForKnown)
  }, 60_000)

})

describe.runIf(postgresUrl !== null)("a stalled PostgreSQL, past the request path's deadlines", () => {
  // Connection attempts into the stall fail in 2 s, so what a route waits on is a statement on a
  // connection already open (or a failed attempt), as with the default 5 s — not an attempt as
  // long as the answer deadline (the usage report's flush reconnects).
  const made = stallingGateway(2)

  it("fails every other route's statement at the connection's answer deadline", async () => {
    const { gw, proxy } = made
    const key = await createKey(gw)
    const bearer = { authorization: `Bearer ${key.secret}` }
    const admin = { authorization: "Bearer stall-admin" }
    const reads: ReadonlyArray<readonly [string, Record<string, string>]> = [
      ["/v1/batches", bearer],
      ["/v1/messages/batches", bearer],
      ["/v1/agent-runs", bearer],
      ["/v1/artifacts/art_none", bearer],
      ["/admin/v1/keys", admin],
      [`/admin/v1/usage?keyId=${key.id}`, admin]
    ]
    const readAll = () =>
      Promise.all(reads.map(async ([path, headers]) => {
        const started = performance.now()
        const res = await fetch(`${gw.baseUrl}${path}`, { headers, signal: AbortSignal.timeout(30_000) }).catch((error: Error) => ({ status: error.name }))
        return { path, status: res.status, ms: performance.now() - started }
      }))
    // Each answers while the database does (and leaves open connections in the pool, so what
    // follows waits on a statement's answer).
    for (const read of await readAll()) expect(read.status, read.path).not.toBe(503)
    // A metered call, so the ledger has a row to flush into the stall: the usage report queues
    // behind that flush.
    expect((await post(gw, "/v1/chat/completions", key.secret, body)).status).toBe(200)

    proxy.freeze()
    const stalled = await readAll()
    proxy.thaw()

    for (const read of stalled) expect({ path: read.path, status: read.status }).toEqual({ path: read.path, status: 503 })
    // The report may wait for the flush's statement to fail, then for reconnections to fail.
    for (const read of stalled) expect(read.ms, read.path).toBeLessThan(2 * ANSWER_DEADLINE_MS + 2_500)
    await expect.poll(async () => (await readAll()).map((read) => read.status).filter((status) => status === 503).length).toBe(0)
  }, 60_000)
})
