/**
 * Agent runs over real HTTP on every engine: the executed lifecycle read over SSE to `done`,
 * resume with Last-Event-ID, tool wait and resume, budget stop, cancel (with children), caller-
 * driven runs, validation, and list paging.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { engines, inOrder } from "../support/engines.ts"
import { fastConfigEnv } from "../support/fast-config.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { checkLog, client, readSse, type RunsClient } from "./support.ts"

const lookupTool = { name: "lookup", description: "Looks a word up", input_schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } }
const fetchTool = { type: "function", function: { name: "fetch", parameters: { type: "object", properties: { url: { type: "string" } } } } }

describe.concurrent.each(engines())("agent runs ($name)", (engine) => {
  let gw: GatewayHandle
  let cleanup: () => Promise<void>
  let runs: RunsClient
  beforeAll(async () => {
    const setup = await engine.setup()
    cleanup = setup.cleanup
    gw = await startInProcessGateway({
      ...setup.env,
      ...fastConfigEnv(setup.env.GATEWAY_DATA_DIR!, (config) => {
        // lyra answers only after a minute: a step that is still running when cancelled
        for (const p of config.models.find((m: any) => m.id === "svc-lyra-3").placements) p.simulator = { ttftMs: 60_000, tokensPerSecond: 0 }
      }),
      // The default lease (15 s), not a short one: nothing here is about recovery, and with 3 s a
      // starved loop on a loaded 2-core VM let the run's own lease lapse mid-test (CI, 2026-11-30:
      // a \`run.resumed\` among the budget test's events).
      GATEWAY_RUN_SSE_HEARTBEAT_MS: "300"
    })
    runs = client(gw.baseUrl, gw.apiKey!)
  })
  afterAll(async () => {
    await gw?.stop()
    await cleanup?.()
  })

  it("executes a run: 202 running with node ids, SSE read to done with node events and one outcome", inOrder, async () => {
    const created = await runs.create({ model: "pico", input: "hello there", metadata: { ticket: 7, tags: ["a"] } })
    expect(created.status).toBe(202)
    expect(created.body.execution).toBe("started")
    const run = created.body.run
    expect(run.id).toMatch(/^run_/)
    expect(run.status).toBe("running")
    expect(run.model).toBe("svc-pico-1")
    expect(run.nodeIds.length).toBe(1)
    expect(run.nodeIds[0]).toMatch(/^node_/)
    expect(run.metadata).toEqual({ ticket: 7, tags: ["a"] })

    const sse = await runs.events(run.id)
    expect(sse.status).toBe(200)
    expect(sse.headers.get("content-type")).toContain("text/event-stream")
    expect(sse.ended).toBe(true)
    const last = sse.frames[sse.frames.length - 1]
    expect(last).toMatchObject({ event: "done", data: "{}" })
    expect(sse.events.map((e) => e.type)).toEqual(["node.started", "node.completed", "outcome"])
    for (const frame of sse.frames.filter((f) => f.event !== undefined && f.event !== "done")) {
      const data = JSON.parse(frame.data!)
      expect(frame.event).toBe(data.type)
      expect(frame.id).toBe(String(data.seq))
    }
    expect(checkLog(sse.events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
    const [started, completed, outcome] = sse.events
    expect(started.nodeId).toBe(run.nodeIds[0])
    expect(completed).toMatchObject({ nodeId: run.nodeIds[0], stopReason: "end_turn", model: "svc-pico-1" })
    expect(completed.usage.outputTokens).toBeGreaterThan(0)
    expect(completed.costUsd).toBeGreaterThan(0)
    expect(completed.output[0].type).toBe("text")
    expect(outcome).toMatchObject({ status: "completed", text: completed.output[0].text })

    const done = (await runs.get(run.id)).body.run
    expect(done).toMatchObject({ status: "completed", lastSeq: 3, outcome: { status: "completed" } })
    expect(done.usage.costUsd).toBe(completed.costUsd)
    expect(done.finishedAt).not.toBeNull()
  })

  it("resumes a stream after a disconnect from Last-Event-ID, without repeating or losing an event", inOrder, async () => {
    const run = (await runs.create({ model: "pico", input: "hello again" })).body.run
    await runs.waitFor(run.id, (r) => r.status === "completed")
    const first = await runs.events(run.id, { until: (frames) => frames.some((f) => f.event !== undefined) })
    expect(first.frames[0]).toEqual({ comment: "stream open" }) // the stream commits at once
    expect(first.ended).toBe(false)
    expect(first.events.map((e) => e.seq)).toEqual([1])
    const rest = await runs.events(run.id, { lastEventId: "1" })
    expect(rest.events.map((e) => e.seq)).toEqual([2, 3])
    expect(rest.frames[rest.frames.length - 1].event).toBe("done")
    const viaQuery = await readSse(`${gw.baseUrl}/v1/agent-runs/${run.id}/events?after=2`, gw.apiKey!)
    expect(viaQuery.events.map((e) => e.seq)).toEqual([3])
    expect((await runs.call("GET", `/v1/agent-runs/${run.id}/events?after=x`)).status).toBe(400)
  })

  it("waits for tool results (requires_action), then resumes with them in the conversation", inOrder, async () => {
    const run = (await runs.create({ model: "pico", input: "use lookup and fetch please", tools: [lookupTool, fetchTool] })).body.run
    const waiting = await runs.waitFor(run.id, (r) => r.status === "requires_action")
    const calls = waiting.requiredAction.toolCalls
    expect(calls.map((c: any) => c.name)).toEqual(["lookup", "fetch"])

    // a heartbeat comment while the run waits; the stream stays open
    const idle = await runs.events(run.id, { until: (frames) => frames.some((f) => f.comment === "heartbeat") })
    expect(idle.ended).toBe(false)
    expect(idle.events.map((e) => e.type)).toEqual(["node.started", "node.completed"])

    const wrong = await runs.append(run.id, [{ type: "tool.result", toolUseId: "toolu_nope", content: "x" }])
    expect(wrong.status).toBe(400)
    expect(wrong.body.error.message).toContain("toolUseId")
    expect((await runs.append(run.id, [{ type: "node.started", nodeId: "node_x" }])).status).toBe(400)

    const first = await runs.append(run.id, [{ type: "tool.result", toolUseId: calls[0].id, content: "a sweet fruit" }])
    expect(first.body).toEqual({ appended: 1, lastSeq: 3 })
    expect((await runs.get(run.id)).body.run.status).toBe("requires_action")
    expect((await runs.append(run.id, [{ type: "tool.result", toolUseId: calls[1].id, content: [{ type: "text", text: "<html>" }] }])).status).toBe(200)

    const sse = await runs.events(run.id)
    expect(sse.events.map((e) => e.type)).toEqual(["node.started", "node.completed", "tool.result", "tool.result", "node.started", "node.completed", "outcome"])
    expect(checkLog(sse.events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
    expect(sse.events[5].output[0].text).toContain("The lookup tool returned: a sweet fruit")
    const done = (await runs.get(run.id)).body.run
    expect(done.status).toBe("completed")
    expect(done.nodeIds).toEqual([sse.events[0].nodeId, sse.events[4].nodeId])
    expect(new Set(done.nodeIds).size).toBe(2)
  })

  it("stops at budgetUsd: a step whose worst case does not fit is never started (incomplete, reason budget)", inOrder, async () => {
    const none = (await runs.create({ model: "pico", input: "hi", budgetUsd: 0 })).body.run
    const stopped = await runs.waitFor(none.id, (r) => r.status !== "running")
    expect(stopped).toMatchObject({ status: "incomplete", outcome: { status: "incomplete", reason: "budget" }, usage: { costUsd: 0 } })
    expect((await runs.events(none.id)).events.map((e) => e.type)).toEqual(["outcome"])

    // pinned to atlas (no pricier equivalent may serve), a step holds ~$0.48 (32k output ceiling at
    // $15/Mtok): this budget fits one step and not a second
    const one = (await runs.create({ model: "atlas", input: "use lookup", tools: [lookupTool], budgetUsd: 0.4806, optimization: { mode: "exact" } })).body.run
    const waiting = await runs.waitFor(one.id, (r) => r.status === "requires_action")
    await runs.append(one.id, [{ type: "tool.result", toolUseId: waiting.requiredAction.toolCalls[0].id, content: "ok" }])
    const ended = await runs.waitFor(one.id, (r) => r.status !== "running" && r.status !== "requires_action")
    expect(ended.outcome).toEqual({ status: "incomplete", reason: "budget" })
    const types = (await runs.events(one.id)).events.map((e) => e.type)
    expect(types).toEqual(["node.started", "node.completed", "tool.result", "outcome"])
    expect(ended.usage.costUsd).toBeGreaterThan(0)
    expect(ended.usage.costUsd).toBeLessThanOrEqual(0.4806)

    const negative = await runs.create({ model: "pico", input: "hi", budgetUsd: -1 })
    expect(negative.status).toBe(400)
    expect(negative.body.error).toMatchObject({ type: "invalid_request" })
    expect(negative.body.error.message).toContain("budgetUsd")
  })

  it("cancels a running step at once, asks the children to cancel, and leaves finished runs unchanged", inOrder, async () => {
    const parent = (await runs.create({ model: "lyra", input: "this takes a minute" })).body.run
    const child = (await runs.create({ model: "pico", input: "use lookup", tools: [lookupTool], parentRunId: parent.id })).body.run
    const grandchild = (await runs.create({ parentRunId: child.id, metadata: { manual: true } })).body.run
    const finished = (await runs.create({ model: "pico", input: "hi", parentRunId: parent.id })).body.run
    await runs.waitFor(finished.id, (r) => r.status === "completed")
    await runs.waitFor(child.id, (r) => r.status === "requires_action")
    await runs.events(parent.id, { until: (frames) => frames.some((f) => f.event === "node.started") })

    const cancelled = await runs.cancel(parent.id, "user pressed stop")
    expect(cancelled.status).toBe(200)
    expect(cancelled.body.run).toMatchObject({ id: parent.id, status: "cancelled", outcome: { status: "cancelled", reason: "user pressed stop" } })
    for (const id of [child.id, grandchild.id]) {
      expect((await runs.get(id)).body.run.outcome).toMatchObject({ status: "cancelled", reason: expect.stringContaining("was cancelled") })
    }
    expect((await runs.get(finished.id)).body.run.status).toBe("completed")

    const sse = await runs.events(parent.id)
    expect(sse.events.map((e) => e.type)).toEqual(["node.started", "outcome"])
    expect(sse.ended).toBe(true)
    const again = await runs.cancel(parent.id, "twice")
    expect(again.body.run.outcome.reason).toBe("user pressed stop")
    expect(again.body.run.lastSeq).toBe(2)
    expect((await runs.append(parent.id, [{ type: "note" }])).status).toBe(409)
  })

  it("a run without model + input is caller-driven: 201, appends of 1 to 1,000 events, ends with the caller's outcome", inOrder, async () => {
    const created = await runs.create({ metadata: { kind: "manual" } })
    expect(created.status).toBe(201)
    expect(created.body.execution).toBeUndefined()
    const run = created.body.run
    expect(run.status).toBe("running")
    expect(run.nodeIds).toBeUndefined()
    expect((await runs.create({ model: "pico" })).status).toBe(201)
    expect((await runs.create({ input: "no model" })).status).toBe(201)

    const batch = Array.from({ length: 1_000 }, (_, i) => ({ type: "step", i, payload: { nested: [i] } }))
    expect((await runs.append(run.id, batch)).body).toEqual({ appended: 1000, lastSeq: 1000 })
    expect((await runs.append(run.id, [])).status).toBe(400)
    expect((await runs.append(run.id, [...batch, { type: "one too many" }])).status).toBe(400)
    const bad = await runs.append(run.id, [{ type: "ok" }, { kind: "no type" }])
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toContain("events[1]")
    expect((await runs.get(run.id)).body.run.lastSeq).toBe(1000) // all-or-nothing

    expect((await runs.append(run.id, [{ type: "outcome", status: "failed", reason: "gave up" }, { type: "after" }])).status).toBe(400)
    expect((await runs.append(run.id, [{ type: "note", text: "last" }, { type: "outcome", status: "failed", reason: "gave up" }])).body.lastSeq).toBe(1002)
    const ended = (await runs.get(run.id)).body.run
    expect(ended).toMatchObject({ status: "failed", outcome: { status: "failed", reason: "gave up" } })
    const refused = await runs.append(run.id, [{ type: "late" }])
    expect(refused.status).toBe(409)
    expect(refused.body.error.type).toBe("conflict")
    const sse = await runs.events(run.id)
    expect(sse.events.length).toBe(1002)
    expect(sse.events[5]).toEqual({ type: "step", i: 5, payload: { nested: [5] }, seq: 6 })
    expect(checkLog(sse.events)).toEqual({ gapFree: true, outcomes: 1, outcomeLast: true })
  })

  it("a large event and large documents are stored and read back whole, the event's SSE frame intact", inOrder, async () => {
    // Over the 256 Ki characters from which JSON is made in slices, with what JSON escapes.
    const text = "😀 \"q\" \\ \n\u0001 é ".repeat(25_000)
    const tools = [{ name: "lookup", input_schema: { type: "object", properties: { q: { type: "string", description: text } } } }]
    const created = await runs.create({ metadata: { note: text }, tools })
    expect(created.status).toBe(201)
    const run = created.body.run
    expect(run.tools).toEqual(tools)
    expect((await runs.get(run.id)).body.run).toMatchObject({ tools, metadata: { note: text } })
    // Read as their text's bytes and parsed in slices, in a list as in a run's own view.
    const listed = (await runs.list("?limit=100")).body.data as ReadonlyArray<{ id: string }>
    expect(listed.find((r) => r.id === run.id)).toMatchObject({ tools, metadata: { note: text } })
    expect((await runs.append(run.id, [{ type: "tool.result", text }, { type: "outcome" }])).body).toEqual({ appended: 2, lastSeq: 2 })
    const sse = await runs.events(run.id)
    expect(sse.events).toEqual([{ type: "tool.result", text, seq: 1 }, { type: "outcome", status: "completed", seq: 2 }])
    expect(sse.frames.find((frame) => frame.event === "tool.result")?.id).toBe("1")
  })

  it("a log of events larger than one read's byte budget is read whole, in order, over SSE", inOrder, async () => {
    // A read takes events up to 4 MiB past its first: three of 2.5 MiB take two reads.
    const run = (await runs.create({})).body.run
    const big = (i: number) => ({ type: "tool.result", i, text: String(i).repeat(2.5 * 1024 * 1024) })
    for (const i of [0, 1, 2]) expect((await runs.append(run.id, [big(i)])).status).toBe(200)
    expect((await runs.append(run.id, [{ type: "outcome" }])).body.lastSeq).toBe(4)
    const sse = await runs.events(run.id)
    expect(sse.ended).toBe(true)
    expect(sse.events.map((e) => [e.seq, e.type, (e as { text?: string }).text?.length])).toEqual([
      [1, "tool.result", 2.5 * 1024 * 1024],
      [2, "tool.result", 2.5 * 1024 * 1024],
      [3, "tool.result", 2.5 * 1024 * 1024],
      [4, "outcome", undefined]
    ])
  })

  it("validates the create body and names the field", inOrder, async () => {
    const cases: Array<[unknown, string]> = [
      [{ model: "svc-nope", input: "x" }, "model"],
      [{ model: "pico", input: [{ role: "robot", content: "x" }] }, "input[0].role"],
      [{ model: "pico", input: 42 }, "input"],
      [{ metadata: "x" }, "metadata"],
      [{ optimization: { mode: "fast" } }, "optimization.mode"],
      [{ parentRunId: "" }, "parentRunId"]
    ]
    for (const [body, field] of cases) {
      const res = await runs.create(body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error.type).toBe("invalid_request")
      expect(res.body.error.message).toContain(field)
    }
    expect((await runs.create("{not json")).status).toBe(400)
    const unknownParent = await runs.create({ parentRunId: "run_nope" })
    expect(unknownParent.status).toBe(404)
    const exact = await runs.create({ model: "pico", input: [{ role: "system", content: "be brief" }, { role: "user", content: [{ type: "text", text: "hi" }] }], optimization: { mode: "exact", allow: { x: 1 } } })
    expect(exact.status).toBe(202)
    expect(exact.body.run.optimization).toEqual({ mode: "exact", allow: { x: 1 } })
  })

  it("lists runs by status and parent, newest first, in pages", inOrder, async () => {
    const parent = (await runs.create({ metadata: { list: true } })).body.run
    const children = []
    for (let i = 0; i < 5; i++) children.push((await runs.create({ parentRunId: parent.id, metadata: { i } })).body.run)
    await runs.cancel(children[0].id)
    const page1 = await runs.list(`?parentRunId=${parent.id}&limit=2`)
    expect(page1.body).toMatchObject({ object: "list", hasMore: true })
    expect(page1.body.data.map((r: any) => r.metadata.i)).toEqual([4, 3])
    const page2 = await runs.list(`?parentRunId=${parent.id}&limit=2&after=${page1.body.nextCursor}`)
    const page3 = await runs.list(`?parentRunId=${parent.id}&limit=2&after=${page2.body.nextCursor}`)
    expect(page2.body.data.map((r: any) => r.metadata.i)).toEqual([2, 1])
    expect(page3.body).toMatchObject({ hasMore: false, nextCursor: null })
    expect(page3.body.data.map((r: any) => r.metadata.i)).toEqual([0])
    const cancelled = await runs.list(`?parentRunId=${parent.id}&status=cancelled`)
    expect(cancelled.body.data.map((r: any) => r.id)).toEqual([children[0].id])
    expect((await runs.list("?status=bogus")).status).toBe(400)
    expect((await runs.list("?limit=0")).status).toBe(400)
    expect((await runs.list("?limit=101")).status).toBe(400)
  })

  it("answers 401 without a key and 405 with Allow on a wrong method", inOrder, async () => {
    const anonymous = await fetch(`${gw.baseUrl}/v1/agent-runs`, { method: "POST", body: "{}" })
    expect(anonymous.status).toBe(401)
    expect(await anonymous.json()).toMatchObject({ error: { type: "unauthorized" } })
    const run = (await runs.create({})).body.run
    const del = await runs.call("DELETE", `/v1/agent-runs/${run.id}`)
    expect(del.status).toBe(405)
    expect(del.headers.get("allow")).toBe("GET")
    expect(del.body.error.type).toBe("method_not_allowed")
    expect((await runs.call("PUT", "/v1/agent-runs")).headers.get("allow")).toBe("POST, GET")
    expect((await runs.call("GET", `/v1/agent-runs/${run.id}/cancel`)).headers.get("allow")).toBe("POST")
  })
})
