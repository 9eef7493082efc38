/**
 * Large request bodies hold memory while they arrive (`http/body-budget.ts`): one key's bodies
 * that trickle in are refused with 429 once they hold half the budget — other keys are served
 * meanwhile, up to the whole budget (then 503) — and every byte is given back when a body ends,
 * however it ends. Raw sockets stand for a client that sends part of a body and holds the rest.
 */
import { connect, type Socket } from "node:net"
import { rmSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { createKey } from "../runtime-http/support.ts"

const MiB = 1024 * 1024
/** A 4 MiB budget: a key may hold 2 MiB of bodies in flight (and a body is at most 2 MiB). */
const BUDGET = 4 * MiB
const DECLARED = 2 * MiB
const HEAD = `{"model":"svc-pico-1","max_tokens":8,"messages":[{"role":"user","content":"`

describe("large bodies in flight", () => {
  let gw: GatewayHandle
  let dir: string
  const sockets: Array<Socket> = []
  const answers = new Map<Socket, string>()
  /** The partial requests the gateway has answered (refused), with their answers. */
  const answered = (held: ReadonlyArray<Socket>) => held.filter((socket) => answers.get(socket) !== "")

  beforeAll(async () => {
    dir = embeddedDataDir()
    // A plan without practical rate limits or allowance: megabyte prompts ask for megatokens, and
    // a 429 here must be the budget's, not the key's tokens per minute.
    const bulk = (config: any) => {
      config.plans.bulk = { allowanceUsd: 1_000_000, rpm: 1_000_000, tpm: 1_000_000_000_000, concurrency: 1_000 }
    }
    gw = await startInProcessGateway({
      GATEWAY_DATA_DIR: dir,
      GATEWAY_BODY_BYTES_IN_FLIGHT: String(BUDGET),
      GATEWAY_MAX_BODY_BYTES: String(DECLARED),
      ...fastConfigEnv(dir, bulk)
    })
  }, 120_000)

  afterAll(async () => {
    for (const socket of sockets) socket.destroy()
    await gw?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Opens a request declaring a body of `declared` bytes, sends `sent` bytes of it and holds the rest. */
  const partial = async (key: string, sent: number, declared = DECLARED) => {
    const socket = connect(Number(new URL(gw.baseUrl).port), "127.0.0.1")
    sockets.push(socket)
    socket.on("error", () => {})
    // What the gateway answered on it, if anything (a refused body is answered at once).
    answers.set(socket, "")
    socket.on("data", (chunk: Buffer) => answers.set(socket, answers.get(socket)! + chunk.toString("latin1")))
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`)
    await new Promise<void>((resolve) => socket.write(HEAD + "a".repeat(sent - HEAD.length), () => resolve()))
    return socket
  }

  /** Waits until one of `held` is answered, checks that only one is, and returns its answer. */
  const theOneRefused = async (held: ReadonlyArray<Socket>) => {
    await expect.poll(() => answered(held).length).toBeGreaterThanOrEqual(1)
    const refusedSockets = answered(held)
    expect(refusedSockets).toHaveLength(1)
    return answers.get(refusedSockets[0]!)!
  }

  /** A whole request of about `bytes`, through fetch: its status and error type. */
  const whole = async (key: string, bytes: number) => {
    const body = HEAD + "a".repeat(bytes - HEAD.length - 4) + `"}]}`
    const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body })
    const answer = (await res.json()) as { error?: { type: string; message: string } }
    return { status: res.status, type: answer.error?.type, message: answer.error?.message, retryAfter: res.headers.get("retry-after") }
  }

  it("refuses a key's bodies with 429 once its trickling ones hold half the budget, serves another key meanwhile, frees the bytes when bodies end", async () => {
    const greedy = (await createKey(gw, "bulk")).secret
    const other = (await createKey(gw, "bulk")).secret
    // Three bodies of ~0.9 MiB each, held open: together past the key's 2 MiB. Whichever one's
    // bytes cross it is refused at once (they arrive interleaved: which one is a race); after that
    // the other two hold ~1.8 MiB, and nothing else of theirs is refused.
    const held = [await partial(greedy, 0.9 * MiB), await partial(greedy, 0.9 * MiB), await partial(greedy, 0.9 * MiB)]
    const refused = await theOneRefused(held)
    expect(refused).toMatch(/^HTTP\/1\.1 429 /)
    expect(refused.toLowerCase()).toContain("retry-after: 1")
    expect(refused).toContain('"type":"rate_limit_error"')
    expect(refused).toContain("request bodies are arriving for this key")
    // Another key is served: 1 MiB more fits in the 4 MiB budget.
    expect((await whole(other, 1 * MiB)).status).toBe(200)
    // The held bodies' clients leave: their bytes come back, and the first key is served again.
    for (const socket of held) socket.destroy()
    await expect.poll(async () => (await whole(greedy, 1.5 * MiB)).status).toBe(200)
  }, 60_000)

  it("counts small bodies too, by their declared length, while they are read", async () => {
    const [patient, other] = await Promise.all([createKey(gw, "bulk"), createKey(gw, "bulk")])
    // Twenty-one bodies declaring 100 KiB each (read whole, not parsed as they arrive), each sent
    // only its first kilobyte: together past the key's 2 MiB, so one is refused and twenty held.
    const held: Array<Socket> = []
    for (let i = 0; i < 21; i++) held.push(await partial(patient.secret, 1024, 100 * 1024))
    expect(await theOneRefused(held)).toContain("request bodies are arriving for this key")
    expect((await whole(other.secret, 100 * 1024)).status).toBe(200)
    for (const socket of held) socket.destroy()
    await expect.poll(async () => (await whole(patient.secret, 100 * 1024)).status).toBe(200)
  }, 60_000)

  it("answers 503 once all keys together hold the whole budget", async () => {
    const keys = await Promise.all([createKey(gw, "bulk"), createKey(gw, "bulk"), createKey(gw, "bulk")])
    // 1.9 + 1.9 + 0.5 MiB from three keys, each under its half: together past 4 MiB, so one of
    // them (whichever crosses it) is refused with 503, and the other two then fit.
    const held = [await partial(keys[0].secret, 1.9 * MiB), await partial(keys[1].secret, 1.9 * MiB), await partial(keys[2].secret, 0.5 * MiB)]
    const refused = await theOneRefused(held)
    expect(refused).toMatch(/^HTTP\/1\.1 503 /)
    expect(refused.toLowerCase()).toContain("retry-after: 1")
    expect(refused).toContain('"type":"api_error"')
    for (const socket of held) socket.destroy()
    await expect.poll(async () => (await whole(keys[2].secret, 0.5 * MiB)).status).toBe(200)
  }, 60_000)
})
