/**
 * The cost of an agent run's step as the run grows (issue #16, item 7), measured on one gateway
 * embedded in this process (createGateway, its HTTP handler called directly: no network between
 * the driver and the gateway).
 *
 * The model is a tool-calling upstream in a child process (`--upstream`, OpenAI Chat Completions,
 * streamed): it calls the `lookup` tool until the conversation holds `--steps - 1` tool results,
 * then answers in text. So one run makes `--steps` steps; the driver reads the run's SSE stream and
 * answers every tool call with a `tool.result` as soon as its `node.completed` arrives.
 *
 * Per step (from the append that let it start — the create for step 1 — to its `node.completed`
 * on the stream): wall time, this process's CPU (every thread: the embedded database's worker too)
 * and the main thread's CPU. Reported: the median over `--runs` runs of each step's figures, for
 * the first ten and the last ten steps, and the mean over all steps.
 *
 * On PostgreSQL one more run is counted in the database's table statistics (pg_stat_user_tables of
 * the bench's own database): rows read from `run_events` and `runs` per step, a figure the load on
 * the machine does not blur.
 *
 * Then idle for `--idle-ms`: first with no run waiting (the gateway's own periodic work), then with
 * `--idle-runs` runs waiting for a tool result (`requires_action`); the difference is what waiting
 * runs cost (an actor that polls re-reads its run row).
 *
 *   node bench/run-steps.ts [--steps=50] [--runs=3] [--idle-runs=100] [--idle-ms=10000]
 *                           [--engine=postgres|embedded] [--postgres=postgres://postgres@127.0.0.1:5432]
 *                           [--json=out.json]
 *
 * A run takes at most 32 steps (machines/run.ts, DEFAULT_MAX_TURNS; the API sets no other limit),
 * so on PostgreSQL (the default: a database `run_steps_<pid>` created with `psql` and dropped
 * afterwards) the bench raises the run's `maxTurns` in its stored machine state right after the
 * create (`psql`; the row lock orders it with the actor's writes). The embedded engine (PGlite, in
 * a worker thread, a temporary data dir) cannot be reached from outside: at most 32 steps there.
 * The figures are informative, never asserted.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { Redacted } from "effect"
import { defaultConfig } from "../src/config/default-config.ts"
import { createGateway } from "../src/embedded.ts"
import { benchChatModel } from "./lib/catalog.ts"

const args = new Map(process.argv.slice(2).map((arg) => {
  const [name, value] = arg.replace(/^--/, "").split("=")
  return [name, value ?? "true"] as const
}))
const STEPS = Number(args.get("steps") ?? 50)
const RUNS = Number(args.get("runs") ?? 3)
const IDLE_RUNS = Number(args.get("idle-runs") ?? 100)
const IDLE_MS = Number(args.get("idle-ms") ?? 10_000)
const ENGINE = args.get("engine") ?? "postgres"
const POSTGRES = args.get("postgres") ?? "postgres://postgres@127.0.0.1:5432"
const DATABASE = `run_steps_${process.pid}`
const DATABASE_URL = ENGINE === "postgres" ? `${POSTGRES}/${DATABASE}` : undefined
if (ENGINE !== "postgres" && STEPS > 32) throw new Error("more than 32 steps need --engine=postgres (see the header)")

const psql = (statement: string) => execFileSync("psql", [DATABASE_URL!, "-qAtc", statement], { encoding: "utf8" })

// ---------------------------------------------------------------------------------------------
// The upstream (child process): calls `lookup` until the conversation has STEPS - 1 tool results.

const chunk = (delta: Record<string, unknown>, finish: string | null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-steps", object: "chat.completion.chunk", created: 1767225600, model: "steps", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`

const serveUpstream = (steps: number) => {
  let calls = 0
  const server = createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (d: string) => (body += d))
    req.on("end", () => {
      const request = JSON.parse(body) as { messages: Array<{ role: string }> }
      const results = request.messages.filter((m) => m.role === "tool").length
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(chunk({ role: "assistant", content: "" }, null))
      if (results < steps - 1) {
        calls++
        res.write(chunk({ tool_calls: [{ index: 0, id: `call_${calls}`, type: "function", function: { name: "lookup", arguments: "" } }] }, null))
        res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify({ q: `word ${results}` }) } }] }, null))
        res.write(chunk({}, "tool_calls"))
      } else {
        res.write(chunk({ content: "All the words are looked up." }, null))
        res.write(chunk({}, "stop"))
      }
      res.write(`data: ${JSON.stringify({ id: "chatcmpl-steps", object: "chat.completion.chunk", created: 1767225600, model: "steps", choices: [], usage: { prompt_tokens: 100, completion_tokens: 12, total_tokens: 112 } })}\n\n`)
      res.end("data: [DONE]\n\n")
    })
  })
  server.listen(0, "127.0.0.1", () => console.log(`upstream ${(server.address() as { port: number }).port}`))
}

const startUpstream = (steps: number) =>
  new Promise<{ url: string; child: ChildProcess }>((resolve, reject) => {
    const child = spawn(process.execPath, [import.meta.filename, "--upstream", `--steps=${steps}`], { stdio: ["ignore", "pipe", "inherit"] })
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (text: string) => {
      const port = /upstream (\d+)/.exec(text)?.[1]
      if (port !== undefined) resolve({ url: `http://127.0.0.1:${port}/v1`, child })
    })
    child.on("exit", (code) => reject(new Error(`upstream exited (${code})`)))
  })

// ---------------------------------------------------------------------------------------------
// The driver.

const lookupTool = { name: "lookup", description: "Looks a word up", input_schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } }

interface Sample {
  readonly wallMs: number
  readonly cpuMs: number
  readonly mainCpuMs: number
}

const cpuNow = () => {
  const all = process.cpuUsage()
  const main = process.threadCpuUsage()
  return { wall: performance.now(), cpu: (all.user + all.system) / 1000, main: (main.user + main.system) / 1000 }
}

const since = (start: ReturnType<typeof cpuNow>): Sample => {
  const now = cpuNow()
  return { wallMs: now.wall - start.wall, cpuMs: now.cpu - start.cpu, mainCpuMs: now.main - start.main }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)]
}

/** SSE frames of a Response body, as parsed events (`done` ends it). */
async function* sseEvents(response: Response): AsyncGenerator<any> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += value
    let cut: number
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut)
      buffer = buffer.slice(cut + 2)
      const event = /^event: (.*)$/m.exec(block)?.[1]
      const data = /^data: (.*)$/m.exec(block)?.[1]
      if (event === "done") {
        await reader.cancel()
        return
      }
      if (event !== undefined && data !== undefined) yield JSON.parse(data)
    }
  }
}

const main = async () => {
  const upstream = await startUpstream(STEPS)
  process.on("exit", () => upstream.child.kill())
  const dataDir = mkdtempSync(join(tmpdir(), "run-steps-"))
  const config = {
    ...defaultConfig,
    models: [...defaultConfig.models, {
      ...benchChatModel("svc-steps", "Steps (benchmark)", [{ id: "steps-up", backend: "openai-compatible", capacity: 1000, baseUrl: upstream.url, upstreamModel: "steps" }]),
      capabilities: { tools: true, reasoning: false, vision: false, documents: false },
      supportedParameters: ["messages", "max_tokens", "stream", "tools", "tool_choice"]
    }],
    plans: { free: { allowanceUsd: 1_000_000, rpm: 1_000_000, tpm: 1_000_000_000, concurrency: 1_000 } },
    defaultPlan: "free"
  }
  if (DATABASE_URL !== undefined) {
    execFileSync("psql", [`${POSTGRES}/postgres`, "-qc", `CREATE DATABASE ${DATABASE}`])
    process.on("exit", () => {
      try {
        execFileSync("psql", [`${POSTGRES}/postgres`, "-qc", `DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`])
      } catch {
        console.error(`could not drop the database ${DATABASE}`)
      }
    })
  }
  const adminToken = "bench-admin-token-run-steps"
  const gateway = await createGateway({
    config,
    dataDir,
    adminToken: Redacted.make(adminToken),
    ...(DATABASE_URL === undefined ? {} : { databaseUrl: Redacted.make(DATABASE_URL) })
  })
  const call = async (method: string, path: string, token: string, body?: unknown) =>
    gateway.handler(new Request(`http://gateway${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }))
  const json = async (response: Response) => {
    const body = await response.json() as any
    if (response.status >= 300) throw new Error(`${response.status}: ${JSON.stringify(body)}`)
    return body
  }
  const key: string = (await json(await call("POST", "/admin/v1/keys", adminToken, { name: "bench", plan: "free" }))).key

  /** One run of STEPS steps; the figures of each step. */
  const oneRun = async (): Promise<Array<Sample>> => {
    let start = cpuNow()
    const run = (await json(await call("POST", "/v1/agent-runs", key, { model: "svc-steps", input: "look up fifty words", tools: [lookupTool] }))).run
    if (STEPS > 32) psql(`UPDATE runs SET machine = jsonb_set(machine, '{context,maxTurns}', '${STEPS}') WHERE id = '${run.id}'`)
    const samples: Array<Sample> = []
    for await (const event of sseEvents(await call("GET", `/v1/agent-runs/${run.id}/events`, key))) {
      if (event.type === "node.completed") {
        samples.push(since(start))
        start = cpuNow()
        if (event.toolCalls.length > 0) {
          await json(await call("POST", `/v1/agent-runs/${run.id}/events`, key, {
            events: event.toolCalls.map((tool: { id: string }) => ({ type: "tool.result", toolUseId: tool.id, content: `the meaning of word ${samples.length}` }))
          }))
        }
      }
      if (event.type === "outcome" && event.status !== "completed") throw new Error(`run ended ${JSON.stringify(event)}`)
    }
    if (samples.length !== STEPS) throw new Error(`the run made ${samples.length} steps, not ${STEPS}`)
    return samples
  }

  console.log(`warm-up run`)
  await oneRun()
  const runs: Array<Array<Sample>> = []
  for (let r = 0; r < RUNS; r++) {
    console.log(`run ${r + 1}/${RUNS}`)
    runs.push(await oneRun())
  }
  // On PostgreSQL, one more run counted in the database's table statistics: rows read from the log
  // and reads of run rows. Backends publish their counters at most once a second and within 10 s
  // of going idle, hence the waits.
  let sqlPerStep: Record<string, number> | undefined
  if (DATABASE_URL !== undefined) {
    const tableStats = () => {
      const rows = psql(`SELECT relname, seq_tup_read + coalesce(idx_tup_fetch, 0), seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname IN ('runs', 'run_events')`)
      return Object.fromEntries(rows.trim().split("\n").flatMap((line) => {
        const [table, rowsRead, scans] = line.split("|")
        return [[`${table}.rowsRead`, Number(rowsRead)], [`${table}.scans`, Number(scans)]]
      }))
    }
    console.log("one run counted in the table statistics (waits 2 × 11 s)")
    await new Promise((r) => setTimeout(r, 11_000))
    const before = tableStats()
    await oneRun()
    await new Promise((r) => setTimeout(r, 11_000))
    const after = tableStats()
    sqlPerStep = Object.fromEntries(Object.keys(after).map((name) => [name, (after[name] - (before[name] ?? 0)) / STEPS]))
  }
  const perStep = Array.from({ length: STEPS }, (_, i) => ({
    step: i + 1,
    wallMs: median(runs.map((run) => run[i].wallMs)),
    cpuMs: median(runs.map((run) => run[i].cpuMs)),
    mainCpuMs: median(runs.map((run) => run[i].mainCpuMs))
  }))
  const mean = (field: keyof Sample, from = 0, to = STEPS) => {
    const slice = perStep.slice(Math.max(0, from), Math.min(STEPS, to))
    return slice.reduce((sum, s) => sum + s[field], 0) / slice.length
  }

  // Idle: first with no run waiting (the gateway's own loops), then with IDLE_RUNS waiting for a tool result.
  console.log(`idle: no run waiting, ${IDLE_MS} ms`)
  const quietStart = cpuNow()
  await new Promise((r) => setTimeout(r, IDLE_MS))
  const quiet = since(quietStart)
  console.log(`idle: ${IDLE_RUNS} runs waiting for a tool result, ${IDLE_MS} ms`)
  const waiting: Array<string> = []
  for (let i = 0; i < IDLE_RUNS; i++) {
    waiting.push((await json(await call("POST", "/v1/agent-runs", key, { model: "svc-steps", input: "wait", tools: [lookupTool] }))).run.id)
  }
  for (const id of waiting) {
    for (;;) {
      const run = (await json(await call("GET", `/v1/agent-runs/${id}`, key))).run
      if (run.status === "requires_action") break
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  const idleStart = cpuNow()
  await new Promise((r) => setTimeout(r, IDLE_MS))
  const idle = since(idleStart)
  for (const id of waiting) await call("POST", `/v1/agent-runs/${id}/cancel`, key)

  await gateway.dispose()
  upstream.child.kill()
  rmSync(dataDir, { recursive: true, force: true })

  const fmt = (n: number) => n.toFixed(2)
  const lines = [
    `# Agent run steps (${STEPS} steps, median of ${RUNS} runs; ${DATABASE_URL === undefined ? "embedded database" : "PostgreSQL"}; load ${loadavg()[0].toFixed(2)})`,
    "",
    "| steps | wall ms/step | process CPU ms/step | main-thread CPU ms/step |",
    "|---|---|---|---|",
    `| 1–10 | ${fmt(mean("wallMs", 0, 10))} | ${fmt(mean("cpuMs", 0, 10))} | ${fmt(mean("mainCpuMs", 0, 10))} |`,
    `| ${Math.max(1, STEPS - 9)}–${STEPS} | ${fmt(mean("wallMs", STEPS - 10))} | ${fmt(mean("cpuMs", STEPS - 10))} | ${fmt(mean("mainCpuMs", STEPS - 10))} |`,
    `| all | ${fmt(mean("wallMs"))} | ${fmt(mean("cpuMs"))} | ${fmt(mean("mainCpuMs"))} |`,
    "",
    ...(sqlPerStep === undefined ? [] : [
      `SQL per step (one run, pg_stat_user_tables): run_events rows read ${fmt(sqlPerStep["run_events.rowsRead"])}, scans ${fmt(sqlPerStep["run_events.scans"])}; runs rows read ${fmt(sqlPerStep["runs.rowsRead"])}, scans ${fmt(sqlPerStep["runs.scans"])}`,
      ""
    ]),
    `Idle ${IDLE_MS} ms, no run waiting: process CPU ${fmt(quiet.cpuMs)} ms, main thread ${fmt(quiet.mainCpuMs)} ms`,
    `Idle ${IDLE_MS} ms, ${IDLE_RUNS} runs in requires_action: process CPU ${fmt(idle.cpuMs)} ms, main thread ${fmt(idle.mainCpuMs)} ms`,
    `→ per waiting run and second, main thread: ${fmt(((idle.mainCpuMs - quiet.mainCpuMs) * 1000) / IDLE_RUNS / (IDLE_MS / 1000))} µs`
  ]
  console.log(lines.join("\n"))
  const out = args.get("json")
  if (out !== undefined) writeFileSync(out, JSON.stringify({ steps: STEPS, runs: RUNS, perStep, sqlPerStep, quiet, idle, raw: runs }, null, 2))
  process.exit(0)
}

if (args.has("upstream")) serveUpstream(STEPS)
else await main()
