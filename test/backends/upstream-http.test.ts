/**
 * What an upstream call of the OpenAI-compatible backend holds while it waits, and how it ends when
 * the caller gives up. A non-streamed call waits for the whole answer (minutes, for a long one) and
 * a streamed one for its headers (a reasoning model's first token, a chained gateway's queue):
 * neither may keep the request's serialized body — beside the request the gateway holds anyway —
 * for that long, and a caller that leaves (the client hung up) ends the upstream call at once.
 */
import { Effect, Exit, Fiber, Stream } from "effect"
import { getHeapStatistics } from "node:v8"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PlacementRuntime } from "../../src/backends/backend.ts"
import { makeOpenAICompatibleBackend } from "../../src/backends/openai-compatible/index.ts"
import { userMessage } from "../../src/model/content.ts"
import { makeRequest } from "../../src/model/request.ts"
import { type HoldingUpstream, startHoldingUpstream } from "../support/holding-upstream.ts"
import { exposedGc } from "../support/gc.ts"

let upstream: HoldingUpstream
let placement: PlacementRuntime
const backend = makeOpenAICompatibleBackend()

beforeAll(async () => {
  upstream = await startHoldingUpstream()
  placement = { id: "up-a", modelId: "svc-up", upstreamModel: "up-x", reasoning: false, upstream: { baseUrl: `${upstream.url}/v1`, apiKey: "k" }, faults: { mode: "none" } }
})

afterAll(async () => {
  await upstream.close()
  await backend.close()
})

/** Heap and buffers in use after full collections, MiB. */
const inUseMiB = (gc: () => void) => {
  gc()
  gc()
  return (getHeapStatistics().used_heap_size + process.memoryUsage().arrayBuffers) / 1048576
}

describe("an upstream call while it waits", () => {
  it("holds no copy of its body, streamed or not, and ends at once when its caller leaves", async () => {
    const gc = exposedGc()
    const calls = 6
    // ~200 K characters each (a string body, not one serialized in slices), held by the test. Flat
    // strings: `repeat` builds a tree of shared halves, which the first reader flattens into ~200
    // KiB more — the test would count its own text.
    const text = (i: number) => Buffer.alloc(200_000, `${i} the tide turns `).toString("latin1")
    const requests = Array.from({ length: 2 * calls }, (_, i) => makeRequest({ model: "svc-up", messages: [userMessage(text(i))] }))
    // A first call makes what every call after it shares (undici's parser and its ~3 MiB of memory).
    const first = Effect.runFork(backend.complete!(makeRequest({ model: "svc-up", messages: [userMessage("hi")] }), placement))
    await expect.poll(() => upstream.seen.received, { timeout: 20_000 }).toBe(1)
    await Effect.runPromise(Fiber.interrupt(first))
    await expect.poll(() => upstream.seen.closed, { timeout: 5_000 }).toBe(1)
    upstream.seen.received = 0
    upstream.seen.closed = 0
    const before = inUseMiB(gc)
    const waiting = requests.map((request, i) =>
      Effect.runFork(i < calls ? backend.complete!(request, placement) : Stream.runDrain(backend.stream(request, placement)))
    )
    await expect.poll(() => upstream.seen.received, { timeout: 20_000 }).toBe(2 * calls)
    // Each body held while waiting would be ~195 KiB of JSON, and undici's UTF-8 copy as much
    // again; a waiting call's own state (its sockets, parser, fibers) is ~60 KiB.
    const perCallKiB = ((inUseMiB(gc) - before) * 1024) / (2 * calls)
    expect(perCallKiB).toBeLessThan(120)
    const t0 = performance.now()
    for (const fiber of waiting) await Effect.runPromise(Fiber.interrupt(fiber))
    await expect.poll(() => upstream.seen.closed, { timeout: 5_000 }).toBe(2 * calls)
    // Interrupted before the headers, each call was aborted, not waited for.
    expect(performance.now() - t0).toBeLessThan(5_000)
    expect(waiting.every((fiber) => fiber.pollUnsafe() !== undefined && Exit.isFailure(fiber.pollUnsafe()!))).toBe(true)
  })
})
