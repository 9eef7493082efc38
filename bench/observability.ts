/**
 * What metrics, the request log and tracing cost per request (issue #15: ≤ 20 µs of CPU for metrics
 * and the log line together; nothing when tracing is unset).
 *
 *   node bench/observability.ts [--runs 3] [--rate 200] [--seconds 15] [--stream]   end to end
 *   node bench/observability.ts --micro [--requests 200000]                          in process
 *
 * End to end: `bench/hot-path.ts` in four arms, run in turn (order rotated each run), each a fresh
 * gateway on the fixed-answer upstream at a fixed open-loop rate; the figure is the median over runs
 * of the gateway process's CPU µs per request:
 *   bare      GATEWAY_METRICS=off, GATEWAY_LOG_LEVEL=none   (no metrics, no log line)
 *   metrics   GATEWAY_LOG_LEVEL=none                        (metrics only)
 *   default   metrics and the request log line at info (what `npm start` does)
 *   tracing   default + OTEL_EXPORTER_OTLP_ENDPOINT at a receiver in this process (every span exported)
 *
 * In process (`--micro`): the recording a request does — the dispatcher's counters (a grant, an
 * attempt's end), the meter's charge, the request's metrics and its JSON log line written through
 * Effect's logger to /dev/null — `--requests` times, main-thread CPU
 * (`process.threadCpuUsage`) minus the same loop without the recording. Deterministic enough to
 * compare against the 20 µs target on a busy machine, where the end-to-end figures are noisy.
 */
import { execFileSync } from "node:child_process"
import { openSync, writeSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Logger } from "effect"
import { makeJsonLogger } from "../src/observability/json-logger.ts"
import { newRequestRecord } from "../src/observability/request-record.ts"
import { makeTelemetry } from "../src/observability/telemetry.ts"

const { values } = parseArgs({
  options: {
    micro: { type: "boolean", default: false },
    requests: { type: "string", default: "200000" },
    runs: { type: "string", default: "3" },
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "15" },
    stream: { type: "boolean", default: false }
  }
})

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const micro = async () => {
  const n = Number(values.requests)
  const devNull = openSync("/dev/null", "w")
  const logger = makeJsonLogger((text) => void writeSync(devNull, text))
  const usage = { inputTokens: 24, outputTokens: 16, cachedInputTokens: 0, reasoningTokens: 0 }
  const measure = async (record: boolean) => {
    const telemetry = makeTelemetry({ metrics: true, tracing: false, logLevel: "Info" })
    const metrics = telemetry.metrics!
    const batch = (size: number, offset: number) =>
      Effect.gen(function*() {
        for (let i = 0; i < size; i++) {
          const r = newRequestRecord(`req_${offset + i}`, "POST", "/v1/chat/completions", performance.now())
          if (!record) continue
          r.surface = "chat"
          r.keyId = "key_bench"
          r.modelAsked = "bench"
          r.model = "svc-bench"
          r.servedModel = "svc-bench"
          r.stream = false
          metrics.queueWait("bench-up", 0.0001) // the dispatcher's grant
          r.queueWaitMs += 0.1
          r.attempts++
          r.placement = "bench-up"
          metrics.upstream("bench-up", "svc-bench", "success", 0.002) // the attempt's end
          r.upstreamMs += 2
          metrics.charged("svc-bench", usage, 37) // the meter's settle
          r.usage = usage
          r.costMicros = 37
          r.status = 200
          yield* telemetry.finish(r) // the request's metrics and log line
        }
      }).pipe(Effect.provide(Logger.layer([logger])))
    const perTurn = 4 // requests finishing in one event-loop turn (one write for their lines)
    const start = process.threadCpuUsage()
    for (let done = 0; done < n; done += perTurn) {
      await Effect.runPromise(batch(perTurn, done))
      await new Promise((r) => setImmediate(r))
    }
    const used = process.threadCpuUsage(start)
    return (used.user + used.system) / n
  }
  // Warm up both paths (JIT), then alternate and keep the medians.
  await measure(true)
  await measure(false)
  const withRecording: Array<number> = []
  const without: Array<number> = []
  for (let i = 0; i < 3; i++) {
    withRecording.push(await measure(true))
    without.push(await measure(false))
  }
  const cost = median(withRecording) - median(without)
  console.log(JSON.stringify({
    mode: "micro",
    requests: n,
    harnessUsPerRequest: Number(median(without).toFixed(2)),
    withRecordingUsPerRequest: Number(median(withRecording).toFixed(2)),
    metricsAndLogUsPerRequest: Number(cost.toFixed(2))
  }))
}

const endToEnd = () => {
  const arms: ReadonlyArray<{ name: string; args: ReadonlyArray<string> }> = [
    { name: "bare", args: ["--env", "GATEWAY_METRICS=off", "--env", "GATEWAY_LOG_LEVEL=none"] },
    { name: "metrics", args: ["--env", "GATEWAY_LOG_LEVEL=none"] },
    { name: "default", args: [] },
    { name: "tracing", args: ["--otlp"] }
  ]
  const results = new Map<string, Array<Record<string, number>>>(arms.map((arm) => [arm.name, []]))
  const runs = Number(values.runs)
  for (let run = 0; run < runs; run++) {
    for (let i = 0; i < arms.length; i++) {
      const arm = arms[(i + run) % arms.length]
      const out = execFileSync(process.execPath, [
        join(import.meta.dirname, "hot-path.ts"),
        "--rate", values.rate, "--seconds", values.seconds, "--c1", "200",
        ...(values.stream ? ["--stream"] : []),
        ...arm.args
      ], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 * 1024 * 1024 })
      const line = out.trim().split("\n").filter((l) => l.startsWith("{")).at(-1)!
      const result = JSON.parse(line) as Record<string, number>
      results.get(arm.name)!.push(result)
      console.error(`run ${run + 1} ${arm.name}: ${result.cpuUsPerRequest} µs/request (main thread ${result.mainThreadUsPerRequest}), p50 ${result.rateP50Us} µs, ok ${result.ok}/${result.requests}`)
    }
  }
  const summary = Object.fromEntries(arms.map((arm) => {
    const rs = results.get(arm.name)!
    return [arm.name, {
      cpuUsPerRequest: median(rs.map((r) => r.cpuUsPerRequest)),
      mainThreadUsPerRequest: median(rs.map((r) => r.mainThreadUsPerRequest)),
      c1P50Us: median(rs.map((r) => r.c1P50Us)),
      rateP50Us: median(rs.map((r) => r.rateP50Us)),
      rateP99Us: median(rs.map((r) => r.rateP99Us)),
      ...(arm.name === "tracing" ? { spansReceived: median(rs.map((r) => r.spansReceived)) } : {}),
      runs: rs.map((r) => r.cpuUsPerRequest),
      mainThreadRuns: rs.map((r) => r.mainThreadUsPerRequest)
    }]
  }))
  const bare = summary.bare.cpuUsPerRequest
  console.log(JSON.stringify({
    mode: "end-to-end",
    rate: Number(values.rate),
    seconds: Number(values.seconds),
    stream: values.stream,
    loadAverage: execFileSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).trim(),
    arms: summary,
    addedCpuUsPerRequest: {
      metrics: summary.metrics.cpuUsPerRequest - bare,
      metricsAndLog: summary.default.cpuUsPerRequest - bare,
      tracing: summary.tracing.cpuUsPerRequest - summary.default.cpuUsPerRequest
    },
    addedMainThreadUsPerRequest: {
      metrics: summary.metrics.mainThreadUsPerRequest - summary.bare.mainThreadUsPerRequest,
      metricsAndLog: summary.default.mainThreadUsPerRequest - summary.bare.mainThreadUsPerRequest,
      tracing: summary.tracing.mainThreadUsPerRequest - summary.default.mainThreadUsPerRequest
    }
  }, null, 2))
}

if (values.micro) await micro()
else endToEnd()
