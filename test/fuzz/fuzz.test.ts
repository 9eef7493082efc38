/**
 * The bounded fuzz run of `npm test` (issue #10, "Keep it true"), on every engine: every route in
 * `allRoutes` with every hostile class (a deterministic sweep), then property-based random cases
 * (fast-check; `FUZZ_SEED` and `FUZZ_RUNS` change the seed and the count). Properties: no 5xx, no
 * hang, every error body in its surface's shape, a bystander answers beside every case and the
 * server stays up. The longer soak is `npm run fuzz -- --minutes 10` (bench/fuzz.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import { type GatewayProcess, startGateway } from "../support/gateway-process.ts"
import { emptyReport, type FuzzOptions, type FuzzReport, type FuzzTarget, prepareTarget, randomCases, runCases, sweepCases } from "./hostile-requests.ts"

const SEED = Number(process.env.FUZZ_SEED ?? 20_260_110)
const RUNS = Number(process.env.FUZZ_RUNS ?? 300)
// 256 KiB strings: a run of 256 KB of one letter froze the old tokenizer for 16 s; the soak sends
// larger ones (8 MiB by default). Kept moderate so the suite stays well under a minute of cases.
const OPTIONS: FuzzOptions = { hugeBytes: Number(process.env.FUZZ_HUGE_BYTES ?? 256 * 1024), hangMs: 15_000 }

const describeReport = (report: FuzzReport) =>
  (report.frozeOn === undefined ? "" : `the server stopped answering (bystander waited over ${OPTIONS.hangMs} ms) on: ${report.frozeOn}\n`) +
  `${report.tried} requests, statuses ${JSON.stringify(report.byStatus)}, worst bystander ${report.worstBystander.ms} ms beside ${report.worstBystander.label}\n` +
  report.failures.slice(0, 25).map((f) => `- ${f.label}\n    ${f.problems.join("\n    ")}`).join("\n")

/**
 * Cases in flight at once (each with its own bystander). The cases are independent: a case that
 * injects faults runs alone (see `runCases`). Four keep both cores busy with the gateway's work
 * instead of waiting on one round trip at a time; more only queue behind each other.
 */
const CONCURRENCY = Number(process.env.FUZZ_CONCURRENCY ?? 4)

// The sweep runs before the random cases, which start only if the sweep left the server answering.
// (The engines run one after the other: the cases keep both cores busy already.)
describe.each(engines())("fuzz: hostile requests on every route ($name)", (engine) => {
  let gw: GatewayProcess
  let target: FuzzTarget
  let cleanup: () => Promise<void>
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    gw = await startGateway({ ...setup.env, ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR) })
    target = await prepareTarget(gw)
  })
  let frozen = false
  afterAll(async () => {
    await gw?.stop(frozen ? "SIGKILL" : "SIGTERM") // a frozen server cannot stop gracefully
    await cleanup?.()
  })
  const judge = (report: FuzzReport) => {
    frozen ||= report.frozeOn !== undefined
    expect(report.frozeOn, describeReport(report)).toBeUndefined()
    expect(report.failures, describeReport(report)).toEqual([])
  }

  it("every route × every hostile class: no 5xx, errors in the surface's shape, the server answering", { timeout: 120_000 }, async () => {
    const report = await runCases(target, sweepCases(target, OPTIONS), OPTIONS, emptyReport(), CONCURRENCY)
    console.log(`fuzz sweep (${engine.name}): ${describeReport(report)}`)
    judge(report)
    expect(report.tried).toBeGreaterThan(200)
    expect(gw.child.exitCode).toBeNull()
  })

  it(`${RUNS} random cases (seed ${SEED}): the same properties`, { timeout: 120_000 }, async () => {
    expect(frozen, "the sweep froze the server").toBe(false)
    const report = await runCases(target, randomCases(target, { ...OPTIONS, seed: SEED, numRuns: RUNS }), OPTIONS, emptyReport(), CONCURRENCY)
    console.log(`fuzz random (${engine.name}): ${describeReport(report)}`)
    judge(report)
    expect(report.tried).toBe(RUNS)
    expect((await fetch(`${gw.baseUrl}/v1/models`)).status).toBe(200)
  })
})
