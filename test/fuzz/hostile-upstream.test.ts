/**
 * The fuzz suite's other side: what a broken or hostile upstream answers (`hostile-upstream-
 * answers.ts`), through both adapters (OpenAI-compatible and Anthropic), to a client on every chat
 * surface, streamed and not. Properties: no defect (the gateway's own bug: a 500 "Internal error"
 * or a stream cut by one), every error body in the surface's shape, every stream ended by its
 * dialect's last event or its error event, every whole 2xx answer JSON, and the server answering
 * beside it, on both engines. `FUZZ_SEED` and `FUZZ_UPSTREAM_RUNS` change the seed and the count.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ErrorShape } from "../../src/http/route.ts"
import { createKey, gatewayOnUpstream, type TestGateway } from "../runtime-http/support.ts"
import { engines } from "../support/engines.ts"
import { readBounded, shapeProblems, SSE_END } from "./hostile-requests.ts"
import { startScriptedUpstream, type UpstreamScript, upstreamScript } from "./hostile-upstream-answers.ts"

const SEED = Number(process.env.FUZZ_SEED ?? 20_261_130)
const RUNS = Number(process.env.FUZZ_UPSTREAM_RUNS ?? 200)
/** Longer than any answer takes (retries of a failing upstream back off 1 ms here). */
const HANG_MS = 15_000

const weather = { name: "get_weather", description: "Weather", schema: { type: "object", properties: { city: { type: "string" } } } }

/** Each chat surface: its path, error shape, and a request body asking for a tool-using answer. */
const SURFACES: ReadonlyArray<{ readonly path: string; readonly shape: ErrorShape; readonly body: (model: string, stream: boolean) => unknown }> = [
  { path: "/v1/chat/completions", shape: "openai", body: (model, stream) => ({ model, stream, messages: [{ role: "user", content: "go" }], tools: [{ type: "function", function: { name: weather.name, description: weather.description, parameters: weather.schema } }] }) },
  { path: "/v1/messages", shape: "messages", body: (model, stream) => ({ model, stream, max_tokens: 1000, messages: [{ role: "user", content: "go" }], tools: [{ name: weather.name, description: weather.description, input_schema: weather.schema }] }) },
  { path: "/v1/responses", shape: "openai", body: (model, stream) => ({ model, stream, input: "go", tools: [{ type: "function", name: weather.name, description: weather.description, parameters: weather.schema }] }) },
  { path: "/v1/completions", shape: "openai", body: (model, stream) => ({ model, stream, prompt: "go", max_tokens: 1000 }) }
]
const BACKENDS = [["openai", "svc-pico-1"], ["anthropic", "svc-lyra-3"]] as const

/** An agent run's step calls the model itself: its answer goes into the run's log, not to a client. */
const RUNS_SURFACE = { path: "/v1/agent-runs", shape: "flat" as ErrorShape, body: (model: string) => ({ model, input: "go", tools: [{ name: weather.name, description: weather.description, input_schema: weather.schema }] }) }
const FINISHED = new Set(["requires_action", "completed", "failed", "cancelled", "incomplete"])

const caseArbitrary = fc.record({ surface: fc.nat(SURFACES.length), backend: fc.nat(1), stream: fc.boolean() }).chain(({ surface, backend, stream }) =>
  upstreamScript(BACKENDS[backend]![0], stream).map((script) => ({ surface: SURFACES[surface] ?? RUNS_SURFACE, model: BACKENDS[backend]![1], stream, script }))
)

// On PostgreSQL (stored answers, runs and the ledger in SQL) half as many cases: each costs twice the time.
describe.each(engines())("fuzz: hostile upstream answers on every chat surface ($name)", (engine) => {
  const runs = engine.name === "embedded" ? RUNS : Math.ceil(RUNS / 2)
  let upstream: Awaited<ReturnType<typeof startScriptedUpstream>>
  let gw: TestGateway
  let key: string
  let cleanup = async () => {}
  beforeAll(async () => {
    upstream = await startScriptedUpstream()
    const storage = engine.name === "postgres" ? await engine.setup() : undefined
    cleanup = storage?.cleanup ?? cleanup
    // Failures are retried at once (a run's step twice) and an open circuit is probed again at once: every case reaches the upstream.
    gw = await gatewayOnUpstream(upstream.url, {
      ...storage?.env,
      GATEWAY_RETRY_BASE_MS: "1",
      GATEWAY_CIRCUIT_COOLDOWN_MS: "1",
      GATEWAY_RUN_RETRY_BASE_MS: "1",
      GATEWAY_RUN_STEP_RETRIES: "2"
    })
    key = (await createKey(gw)).secret
  })
  afterAll(async () => {
    await gw?.close()
    await upstream?.close()
    await cleanup()
  })

  // A soak (`npm run fuzz -- --upstream`) runs many more cases: its time grows with them.
  it("no defect, errors in the surface's shape, every stream ended by its dialect, the server answering", { timeout: Math.max(600_000, runs * 200) }, async () => {
    /** Each case's request id → what it was, to name the case of a defect the log shows later. */
    const sent = new Map<string, string>()
    let tried = 0
    await fc.assert(
      fc.asyncProperty(caseArbitrary, async ({ surface, model, stream, script }) => {
        upstream.state.current = script
        tried++
        const label = `${surface.path} ${model} stream=${stream} ← ${describeScript(script)}`
        const response = await fetch(`${gw.baseUrl}${surface.path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "anthropic-version": "2023-06-01" },
          body: JSON.stringify(surface.body(model, stream)),
          signal: AbortSignal.timeout(HANG_MS)
        })
        sent.set(response.headers.get("request-id") ?? response.headers.get("x-request-id") ?? `#${tried}`, label)
        if (surface === RUNS_SURFACE) {
          // The run's step runs on: it must end (or wait for tool results) with a reason, never an unexpected failure.
          const created = await response.json() as { run?: { id: string } }
          const problems: Array<string> = response.status === 202 && created.run !== undefined ? [] : [`create: ${response.status} ${JSON.stringify(created).slice(0, 200)}`]
          let run: { status: string; outcome: { reason?: string } | null } | undefined
          for (const deadline = Date.now() + HANG_MS; created.run !== undefined && Date.now() < deadline;) {
            const got = await fetch(`${gw.baseUrl}/v1/agent-runs/${created.run.id}`, { headers: { authorization: `Bearer ${key}` } })
            run = (await got.json() as { run: typeof run }).run
            if (FINISHED.has(run!.status)) break
            await new Promise((resolve) => setTimeout(resolve, 10))
          }
          if (created.run !== undefined && !FINISHED.has(run?.status ?? "")) problems.push(`the run did not finish within ${HANG_MS} ms: ${JSON.stringify(run)}`)
          if (run?.outcome?.reason === "execution_error") problems.push(`the run failed unexpectedly: ${JSON.stringify(run.outcome)}`)
          expect(problems, label).toEqual([])
          return
        }
        const isSse = (response.headers.get("content-type") ?? "").includes("text/event-stream")
        const problems: Array<string> = []
        const { text, complete } = await readBounded(response, HANG_MS, 64 * 1024 * 1024).catch((error: Error) => {
          problems.push(`the answer was cut: ${error.message} (${String((error.cause as Error | undefined)?.message)})`)
          return { text: "", complete: true }
        })
        if (!complete) problems.push(`the answer did not end within ${HANG_MS} ms`)
        if (response.status >= 400) {
          let parsed: unknown
          try {
            parsed = JSON.parse(text)
          } catch {
            problems.push(`error body is not JSON: ${text.slice(0, 200)}`)
          }
          if (parsed !== undefined) problems.push(...shapeProblems(surface.shape, parsed))
          if (text.includes("Internal error")) problems.push(`a defect: ${text.slice(0, 200)}`)
        } else if (isSse) {
          // The last event (a long error message may put its head far from the end).
          const last = text.trimEnd().split("\n\n").at(-1) ?? ""
          if (!SSE_END[surface.path]!.test(`${last}\n`)) problems.push(`stream ended without its terminal event: …${text.slice(-300)}`)
          if (text.includes("Internal error")) problems.push(`a stream ended by a defect: …${text.slice(-300)}`)
        } else {
          try {
            JSON.parse(text)
          } catch {
            problems.push(`2xx body does not parse: ${text.slice(0, 200)}`)
          }
        }
        // A stored answer read back and continued: what the upstream sent is now the gateway's own input.
        const stored = surface.path === "/v1/responses" && response.status === 200 ? /"id":"(resp_[A-Za-z0-9]+)"/.exec(text)?.[1] : undefined
        if (stored !== undefined) {
          const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
          for (const [method, path, body] of [
            ["GET", `/v1/responses/${stored}`, undefined],
            ["GET", `/v1/responses/${stored}/input_items`, undefined],
            ["GET", `/v1/responses/${stored}?stream=true`, undefined],
            ["POST", "/v1/responses", JSON.stringify({ ...(surface.body(model, false) as object), previous_response_id: stored })]
          ] as const) {
            const next = await fetch(`${gw.baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(HANG_MS) })
            const nextText = await next.text()
            if (nextText.includes("Internal error")) problems.push(`${method} ${path} after it: ${next.status} ${nextText.slice(0, 200)}`)
            // A stream that failed after `response.created` is not kept (its id reads as absent).
            const kept = !isSse || /event: response\.(completed|incomplete)\n/.test(text)
            if (method === "GET" && next.status !== 200 && (kept || next.status !== 404)) problems.push(`${method} ${path} after it: ${next.status} ${nextText.slice(0, 200)}`)
            // A replay ends as the answer did.
            if (path.endsWith("?stream=true") && next.status === 200 && !SSE_END["/v1/responses"]!.test(`${nextText.trimEnd().split("\n\n").at(-1) ?? ""}\n`)) {
              problems.push(`the replay ended without its terminal event: …${nextText.slice(-300)}`)
            }
          }
        }
        const bystander = await fetch(`${gw.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(HANG_MS) }).then((r) => r.status, () => "no answer")
        if (bystander !== 200) problems.push(`bystander GET /v1/models: ${bystander}`)
        if (problems.length > 0) {
          // The defect's cause, from the log (written in batches).
          await new Promise((resolve) => setTimeout(resolve, 1_200))
          const id = response.headers.get("request-id") ?? ""
          problems.push(...gw.output().split("\n").filter((line) => id !== "" && line.includes(id) && line.includes("defect")).map((line) => line.slice(0, 1_500)))
        }
        expect(problems, `${label}: ${response.status}`).toEqual([])
      }),
      { seed: SEED, numRuns: runs, endOnFailure: true }
    )
    // The log is written in batches: read it once the last line is out.
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    const defects = gw.output().split("\n").filter((line) => line.includes("defect"))
    const named = defects.map((line) => {
      const id = /"request_id":"([^"]+)"/.exec(line)?.[1]
      return `${(id !== undefined && sent.get(id)) || "?"}\n    ${line.slice(0, 600)}`
    })
    expect(named, `${tried} cases`).toEqual([])
    expect(tried).toBe(runs)
  })
})

const describeScript = (script: UpstreamScript) => {
  const body = script.parts.join("")
  return `${script.label} (${script.contentType || "no content-type"}): ${body.length > 400 ? `${body.slice(0, 300)}… (${body.length} chars)` : body}`
}
