/** Shared helpers for the runtime's HTTP suites: a gateway on a tailored catalog, raw SSE reads. */
import { rmSync } from "node:fs"
import { expect } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"

/** A deep-mutable config, as fastConfig hands it to `mutate`. */
type Editable = any

/** Replaces a model's placements (and drops its equivalents unless given). */
export const placeModel = (
  config: Editable,
  modelId: string,
  placements: ReadonlyArray<{ id: string; capacity: number; ttftMs?: number; tokensPerSecond?: number }>,
  equivalents: ReadonlyArray<string> = []
) => {
  const model = config.models.find((m: Editable) => m.id === modelId)
  model.placements = placements.map((p) => ({
    id: p.id,
    backend: "simulator",
    capacity: p.capacity,
    simulator: { ttftMs: p.ttftMs ?? 0, tokensPerSecond: p.tokensPerSecond ?? 0 }
  }))
  model.equivalents = [...equivalents]
}

/**
 * A gateway whose `svc-pico-1` is served by an OpenAI-compatible upstream at `url` (`/v1`) and
 * `svc-lyra-3` by an Anthropic one at `url`, capacity 8 each, no equivalents: one upstream server
 * that answers both dialects, for what the gateway does with either adapter.
 */
export const gatewayOnUpstream = (url: string, env: Record<string, string> = {}) => gatewayWith(placedOnUpstream(url), env)

/** The config edit of `gatewayOnUpstream`: pico and lyra served by the upstream at `url` alone. */
export const placedOnUpstream = (url: string) => (config: Editable) => {
  const pico = config.models.find((m: Editable) => m.id === "svc-pico-1")
  pico.placements = [{ id: "pico-up", backend: "openai-compatible", capacity: 8, baseUrl: `${url}/v1`, upstreamModel: "upstream-pico" }]
  pico.equivalents = []
  const lyra = config.models.find((m: Editable) => m.id === "svc-lyra-3")
  lyra.placements = [{ id: "lyra-up", backend: "anthropic", capacity: 8, baseUrl: url, upstreamModel: "upstream-lyra" }]
  lyra.equivalents = []
}

export interface TestGateway extends GatewayHandle {
  close(): Promise<void>
}

/**
 * A gateway on the embedded engine with a config edited by `mutate` and extra environment, in this
 * process (these suites are about what it answers, not its process: see in-process-gateway.ts).
 */
export const gatewayWith = async (mutate: (config: Editable) => void, env: Record<string, string> = {}): Promise<TestGateway> => {
  const dir = embeddedDataDir()
  const gw = await startInProcessGateway({ GATEWAY_DATA_DIR: dir, ...fastConfigEnv(dir, mutate), ...env })
  return Object.assign(gw, {
    close: async () => {
      await gw.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
}

/** Creates a key through the admin API and returns its secret and id. */
export const createKey = async (gw: GatewayHandle, plan?: string) => {
  const res = await gw.admin("POST", "/admin/v1/keys", plan === undefined ? {} : { plan })
  if (res.status !== 201) throw new Error(`key create failed: ${res.status} ${await res.text()}`)
  const body = (await res.json()) as { id: string; key: string }
  return { id: body.id, secret: body.key }
}

export interface QueueRow {
  readonly placementId: string
  readonly modelId: string | null
  readonly capacity: number
  readonly inUse: number
  readonly waiting: number
  readonly circuit: string
}

export const queues = async (gw: GatewayHandle): Promise<ReadonlyArray<QueueRow>> =>
  ((await (await gw.admin("GET", "/admin/v1/queues")).json()) as { data: ReadonlyArray<QueueRow> }).data

export const queueOf = async (gw: GatewayHandle, placementId: string) => (await queues(gw)).find((q) => q.placementId === placementId)!

/**
 * Waits until none of these placements' circuits is open: each open one has passed its cooldown
 * (half-open, ready for its probe) or closed. A condition, not a sleep longer than the cooldown.
 */
export const untilCircuitsNotOpen = async (gw: GatewayHandle, placementIds: ReadonlyArray<string>) => {
  await expect.poll(async () => (await queues(gw)).filter((q) => placementIds.includes(q.placementId) && q.circuit === "open").map((q) => q.placementId)).toEqual([])
}

/** Waits until a placement's queue view satisfies `ready` (e.g. a holder has taken its slot). */
export const untilQueue = async (gw: GatewayHandle, placementId: string, ready: (queue: QueueRow) => boolean) => {
  await expect.poll(async () => ready(await queueOf(gw, placementId))).toBe(true)
}

/** Polls the queue view until `stop` resolves; returns the most in use and waiting seen. */
export const watchQueue = (gw: GatewayHandle, placementId: string) => {
  let maxInUse = 0
  let maxWaiting = 0
  let running = true
  const loop = (async () => {
    while (running) {
      const q = await queueOf(gw, placementId)
      maxInUse = Math.max(maxInUse, q.inUse)
      maxWaiting = Math.max(maxWaiting, q.waiting)
      await new Promise((r) => setTimeout(r, 15))
    }
  })()
  return async () => {
    running = false
    await loop
    return { maxInUse, maxWaiting }
  }
}

/** POSTs JSON with a Bearer key and returns the raw response. */
export const post = (gw: GatewayHandle, path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gw.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })

/** Reads an SSE body to its end, recording each chunk's arrival order. */
export const readChunks = async (response: Response): Promise<Array<string>> => {
  const chunks: Array<string> = []
  const decoder = new TextDecoder()
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) chunks.push(decoder.decode(chunk, { stream: true }))
  return chunks
}

