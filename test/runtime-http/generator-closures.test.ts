/**
 * No request makes a generator function of its own. A `function*` written inside code that runs
 * per request (an `Effect.gen(function*…)` in a handler, an `Effect.fnUntraced(function*…)` made
 * per call) is a new closure each time, and V8 gives each generator closure an initial map of its
 * own in the old generation, which keeps the closure — and with it the request's scope — alive
 * through every young-generation collection until the next full one. It does not leak, so no heap
 * snapshot shows it (a snapshot collects first), but every scavenge copies and promotes those
 * requests: in Redis mode two such generators (the capacity queue's join, the metering's `fail`)
 * kept 5.4 KiB of each request alive against 1.1 KiB without them, and scavenges paused 3.0–3.2 ms
 * against 1.2 (docs/measurements.md, 2026-12-02).
 *
 * An object literal with a getter (`{ get tokens() {…} }`) made per request did the same: V8 gives
 * each such object a dictionary and a map copied for it, and the literal's closures outlived
 * scavenges (the token bound's steps: 0.18 KiB a request, `bench/alloc-profile.ts --survivors`).
 *
 * V8 logs each map it creates (`--log-maps`); an initial map's line names its function. The
 * gateway runs in process and in Redis mode (its metering and capacity queues on Redis, the paths
 * with most Effect code of their own) and serves every dialect, streamed and not, from each kind of
 * backend (the simulator, and an OpenAI-compatible and an Anthropic upstream: `gateway simulate`,
 * in this process), and stored responses, token counts, embeddings and state handles. After a
 * warm-up, the maps made while it serves a few hundred requests must be far fewer than the
 * requests.
 */
import { randomBytes } from "node:crypto"
import { readFileSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { embeddedDataDir } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { type SimulateUpstream, startInProcessSimulateUpstream } from "../support/simulate-process.ts"

const { redisUrl } = inject("services")

/** Requests of each kind after the warm-up. */
const ROUNDS = 15
const UPSTREAM_KEY = "sk-generator-maps-upstream"
/** The simulator, an Anthropic upstream, an OpenAI-compatible upstream. */
const MODELS = ["svc-pico-1", "svc-atlas-1", "svc-nova-mini"]

// In process (the default: metering and queues as plain calls) and in Redis mode (its own Effect
// code), where there is a Redis (the run's setup fails without one under CI).
const modes = [{ mode: "in process", redis: false }, { mode: "Redis mode", redis: true }].filter(({ redis }) => !redis || redisUrl !== null)

describe.each(modes)("generator closures per request ($mode)", ({ redis }) => {
  let gw: GatewayProcess
  let upstream: SimulateUpstream
  const dir = embeddedDataDir()
  const log = join(dir, "v8-maps.log")

  beforeAll(async () => {
    upstream = await startInProcessSimulateUpstream(UPSTREAM_KEY)
    const config = fastConfigEnv(dir, (config) => {
      const point = (id: string, backend: string, baseUrl: string) => {
        const model = config.models.find((m: { id: string }) => m.id === id)
        model.placements = [{ id: `${id}-up`, backend, capacity: 8, baseUrl, apiKeyEnv: "UPSTREAM_KEY", upstreamModel: "upstream-model" }]
      }
      point(MODELS[1], "anthropic", upstream.baseUrl)
      point(MODELS[2], "openai-compatible", `${upstream.baseUrl}/v1`)
    })
    const store = redis ? { REDIS_URL: redisUrl!, GATEWAY_REDIS_PREFIX: `gw-maps-${randomBytes(4).toString("hex")}:` } : {}
    gw = await startGateway(
      { GATEWAY_DATA_DIR: dir, ...config, UPSTREAM_KEY, ...store },
      [],
      [],
      ["--log-maps", `--logfile=${log}`, "--no-logfile-per-isolate"]
    )
  }, 120_000)
  afterAll(async () => {
    if (gw?.child.exitCode === null) await gw.stop()
    await upstream?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("serving requests makes far fewer maps than requests", async () => {
    const openai = new OpenAI({ apiKey: gw.apiKey!, baseURL: `${gw.baseUrl}/v1`, maxRetries: 0 })
    const anthropic = new Anthropic({ apiKey: gw.apiKey!, baseURL: gw.baseUrl, maxRetries: 0 })
    const messages = [{ role: "user" as const, content: "say exactly: ok" }]
    const kinds: ReadonlyArray<() => Promise<unknown>> = [...MODELS.flatMap((model): Array<() => Promise<unknown>> => [
      () => openai.chat.completions.create({ model, messages }),
      async () => {
        for await (const _ of await openai.chat.completions.create({ model, messages, stream: true })) { /* to the end */ }
      },
      () => openai.responses.create({ model, input: "say exactly: ok", store: false }),
      async () => {
        for await (const _ of await openai.responses.create({ model, input: "say exactly: ok", store: false, stream: true })) { /* to the end */ }
      },
      () => anthropic.messages.create({ model, max_tokens: 16, messages }),
      async () => {
        for await (const _ of await anthropic.messages.create({ model, max_tokens: 16, messages, stream: true })) { /* to the end */ }
      }
    ]),
      () => openai.responses.create({ model: MODELS[0], input: "say exactly: ok", store: true }),
      () => anthropic.messages.countTokens({ model: MODELS[0], messages }),
      // A state handle: made, appended to, read.
      async () => {
        const call = async (path: string, body?: unknown) => {
          const headers = { authorization: `Bearer ${gw.apiKey!}`, "content-type": "application/json" }
          const res = await fetch(`${gw.baseUrl}/v1/states${path}`, body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) })
          if (res.status >= 300) throw new Error(`states${path}: ${res.status} ${await res.text()}`)
          return (await res.json()) as { state: { stateId: string } }
        }
        const { state } = await call("", { value: ["a"] })
        await call(`/${state.stateId}:append`, { delta: ["b"] })
        await call(`/${state.stateId}`)
      },
      () => openai.embeddings.create({ model: "svc-embed-mini", input: "say exactly: ok" })
    ]
    // Warm-up: every path's code loaded, compiled and its maps made once.
    for (let i = 0; i < 5; i++) for (const kind of kinds) await kind()
    const from = statSync(log).size
    for (let i = 0; i < ROUNDS; i++) await Promise.all(kinds.map((kind) => kind()))
    const requests = ROUNDS * kinds.length
    // The log is buffered: a stop flushes it.
    expect(await gw.stop()).toBe(0)
    const text = readFileSync(log, "latin1")
    // A generator function's first map; and an object literal with a getter, each of which V8 gives
    // a dictionary of its own with a freshly copied map ("NormalizeCached"), which kept the
    // literal's closures, and the request they capture, through scavenges the same way.
    const isMadePerObject = (line: string) => line.startsWith("map,InitialMap,") || line.startsWith("map,NormalizeCached,")
    // The log is read as it is written (a format V8 could change): start-up alone makes hundreds.
    expect(text.slice(0, from).split("\n").filter(isMadePerObject).length, "maps logged at start-up").toBeGreaterThan(100)
    const made = text.slice(from).split("\n").filter(isMadePerObject)
    const named = new Map<string, number>()
    for (const line of made) {
      const name = line.slice(line.lastIndexOf(",") + 1) || "(anonymous)"
      named.set(name, (named.get(name) ?? 0) + 1)
    }
    // Before: 2 a request in Redis mode's own code and 9 in the simulator's; a handful in all now.
    expect(made.length, `maps made while serving ${requests} requests: ${JSON.stringify([...named])}`).toBeLessThan(requests / 10)
  }, 120_000)
})
