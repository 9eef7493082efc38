/**
 * A client that stops reading a stream cannot hold it, its capacity slot and its buffered bytes
 * for ever (`GATEWAY_SEND_TIMEOUT_MS`): once written bytes wait on a client that takes none of
 * them for that long, the connection is closed and the upstream call ends (a whole answer's bytes
 * are freed the same way). A client that pauses for less than that, then reads on, keeps its stream.
 */
import { connect, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type RunawayUpstream, startRunawayUpstream } from "../support/runaway-upstream.ts"
import { createKey, gatewayWith, post, type TestGateway } from "../runtime-http/support.ts"

const BODY_IDLE_TIMEOUT_MS = 1_000
const SEND_TIMEOUT_MS = 4_000

describe("a stream whose client stops reading", () => {
  let upstream: RunawayUpstream
  let gw: TestGateway
  let key: string

  beforeAll(async () => {
    upstream = await startRunawayUpstream()
    // Mostly whitespace: few tokens by the runaway guard's count for many bytes, so the stream
    // fills the socket's buffers (~4 MB on loopback) long before the guard would stop it.
    upstream.delta = `word${" ".repeat(4_000)}`
    gw = await gatewayWith((config) => {
      const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
      // One slot: a second call is answered only once the first has let go of it.
      pico.placements = [{ id: "pico-up", backend: "openai-compatible", capacity: 1, baseUrl: `${upstream.url}/v1`, upstreamModel: "upstream-pico" }]
      pico.equivalents = []
      config.plans.bulk = { allowanceUsd: 1_000_000, rpm: 1_000_000, tpm: 1_000_000_000_000, concurrency: 1_000 }
    }, { GATEWAY_BODY_IDLE_TIMEOUT_MS: String(BODY_IDLE_TIMEOUT_MS), GATEWAY_SEND_TIMEOUT_MS: String(SEND_TIMEOUT_MS) })
    key = (await createKey(gw, "bulk")).secret
  })

  afterAll(async () => {
    await upstream?.close()
    await gw?.close()
  })

  /** A raw connection that sends one streamed call; the caller decides when it reads. */
  const streamedCall = (): Socket => {
    const { hostname, port } = new URL(gw.baseUrl)
    const body = JSON.stringify({ model: "svc-pico-1", stream: true, max_tokens: 30_000, messages: [{ role: "user", content: "go" }] })
    const socket = connect(Number(port), hostname)
    socket.on("error", () => {})
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    return socket
  }
  const closed = (socket: Socket, giveUpMs: number) =>
    new Promise<boolean>((resolve) => {
      const giveUp = setTimeout(() => resolve(false), giveUpMs)
      socket.once("close", () => {
        clearTimeout(giveUp)
        resolve(true)
      })
    })

  it("closes the connection, ends the upstream call and frees the slot", async () => {
    const before = upstream.seen.closed
    const socket = streamedCall()
    socket.pause() // never reads
    const started = Date.now()
    await expect.poll(() => upstream.seen.closed, { timeout: 30_000, message: "the stream went on for a client that reads nothing" }).toBe(before + 1)
    expect(Date.now() - started).toBeGreaterThanOrEqual(SEND_TIMEOUT_MS)
    // The gateway closed its end: a client that reads on gets what was buffered, then the close
    // (a paused socket does not see it before), without the stream's proper end.
    let received = ""
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")))
    socket.resume()
    expect(await closed(socket, 10_000), "the connection stayed open").toBe(true)
    expect(received).toMatch(/^HTTP\/1\.1 200/)
    expect(received).not.toContain("[DONE]")

    // The single slot is free: the next call is answered.
    upstream.stopAfterWords = 80
    try {
      const next = await post(gw, "/v1/chat/completions", key, { model: "svc-pico-1", stream: true, messages: [{ role: "user", content: "again" }] })
      expect(next.status).toBe(200)
      expect(await next.text()).toContain("data: [DONE]")
    } finally {
      upstream.stopAfterWords = undefined
    }
  }, 60_000)

  it("closes a whole answer nobody reads, freeing its buffered bytes", async () => {
    // 8 MB, more than the socket's buffers hold: most of it waits in the gateway's memory.
    const content = "x".repeat(8 * 1024 * 1024)
    const form = new FormData()
    form.append("purpose", "user_data")
    form.append("file", new Blob([content]), "big.txt")
    const uploaded = await fetch(`${gw.baseUrl}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form })
    expect(uploaded.status).toBe(200)
    const { id } = (await uploaded.json()) as { id: string }

    const { hostname, port } = new URL(gw.baseUrl)
    const socket = connect(Number(port), hostname)
    socket.on("error", () => {})
    socket.pause()
    socket.write(`GET /v1/files/${id}/content HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\n\r\n`)
    await new Promise((resolve) => setTimeout(resolve, SEND_TIMEOUT_MS + 3_000))
    let received = 0
    socket.on("data", (chunk: Buffer) => (received += chunk.length))
    socket.resume()
    expect(await closed(socket, 10_000), "the connection stayed open").toBe(true)
    // Cut: what the socket's buffers held, not the whole answer.
    expect(received).toBeLessThan(content.length)
  }, 60_000)

  it("keeps a stream whose client pauses for less than the timeout, then reads on", async () => {
    // ~6 MB, more than the socket's buffers hold and less than the runaway guard lets through.
    upstream.stopAfterWords = 12_000
    try {
      const socket = streamedCall()
      socket.pause()
      let received = ""
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
      // Pauses longer than the idle timeout and shorter than the send timeout, 4.5 s of them in
      // all; between two, the client takes one chunk.
      for (let i = 0; i < 3; i++) {
        await sleep(1_500)
        const chunk = await new Promise<Buffer>((resolve) => socket.once("data", resolve).resume())
        socket.pause()
        received += chunk.toString("latin1")
      }
      expect(socket.destroyed, "the gateway closed a stream whose client kept reading").toBe(false)
      socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")))
      socket.resume()
      await expect.poll(() => received.endsWith("data: [DONE]\n\n") || received.endsWith("0\r\n\r\n"), { timeout: 20_000 }).toBe(true)
      expect(received).toContain("data: [DONE]")
      socket.destroy()
    } finally {
      upstream.stopAfterWords = undefined
    }
  }, 60_000)
})
