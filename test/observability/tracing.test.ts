/**
 * Traces on the real gateway with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver
 * in this process: the client's W3C `traceparent` is honoured, the request span carries the
 * OpenTelemetry GenAI attributes, queue waits, attempts and failovers are child spans, and the
 * upstream receives a `traceparent` naming the attempt's span. The upstream is an OpenAI-compatible
 * server in this process too, so the headers it receives can be read.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { gatewayWith, type TestGateway } from "../runtime-http/support.ts"

interface OtlpValue {
  readonly stringValue?: string
  readonly intValue?: string | number
  readonly doubleValue?: number
  readonly boolValue?: boolean
}
interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly status: { readonly code: number; readonly message?: string }
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }>
}

const attr = (span: Span, key: string): string | number | boolean | undefined => {
  const value = span.attributes.find((a) => a.key === key)?.value
  if (value === undefined) return undefined
  if (value.intValue !== undefined) return Number(value.intValue)
  return value.stringValue ?? value.doubleValue ?? value.boolValue
}

const listen = (server: Server) =>
  new Promise<string>((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`)))

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (d: string) => (body += d))
    req.on("end", () => resolve(body))
  })

const completion = JSON.stringify({
  id: "chatcmpl-up", object: "chat.completion", created: 1767225600, model: "hidden",
  choices: [{ index: 0, message: { role: "assistant", content: "Traced answer." }, finish_reason: "stop" }],
  usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 }
})
const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: Record<string, number>) =>
  `data: ${JSON.stringify({ id: "chatcmpl-up", object: "chat.completion.chunk", created: 1767225600, model: "hidden", choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`

describe("OTLP traces", () => {
  const spans: Array<Span> = []
  const upstreamTraceparents: Array<{ path: string; traceparent: string | undefined }> = []
  let receiver: Server
  let upstream: Server
  let gw: TestGateway

  beforeAll(async () => {
    receiver = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      const body = await readBody(req)
      if (req.url === "/v1/traces") {
        const data = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Span> }> }> }
        for (const resource of data.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans)
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
    upstream = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      const body = await readBody(req)
      upstreamTraceparents.push({ path: req.url ?? "", traceparent: req.headers.traceparent as string | undefined })
      if ((req.url ?? "").startsWith("/fail")) {
        res.writeHead(503, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: "overloaded", type: "server_error" } }))
        return
      }
      if (/"stream"\s*:\s*true/.test(body)) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(chunk({ role: "assistant", content: "" }, null))
        res.write(chunk({ content: "Traced stream." }, null))
        res.write(chunk({}, "stop"))
        res.write(chunk({}, null, { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 }))
        res.end("data: [DONE]\n\n")
        return
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(completion)
    })
    const [receiverUrl, upstreamUrl] = await Promise.all([listen(receiver), listen(upstream)])
    gw = await gatewayWith((config) => {
      const model = config.models.find((m: { id: string }) => m.id === "svc-lyra-3")
      model.equivalents = []
      model.placements = [
        { id: "lyra-flaky", backend: "openai-compatible", capacity: 4, baseUrl: `${upstreamUrl}/fail/v1`, upstreamModel: "hidden" },
        { id: "lyra-up", backend: "openai-compatible", capacity: 4, baseUrl: `${upstreamUrl}/v1`, upstreamModel: "hidden" }
      ]
      const pico = config.models.find((m: { id: string }) => m.id === "svc-pico-1")
      pico.equivalents = []
      pico.placements = [{ id: "pico-up", backend: "openai-compatible", capacity: 4, baseUrl: `${upstreamUrl}/v1`, upstreamModel: "hidden" }]
    }, { OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl, OTEL_BSP_SCHEDULE_DELAY: "100", GATEWAY_RETRY_BASE_MS: "5" })
  })
  afterAll(async () => {
    await gw?.close()
    receiver?.close()
    upstream?.closeAllConnections()
    upstream?.close()
  })

  const waitFor = async <A>(find: () => A | undefined): Promise<A> => {
    for (let i = 0; i < 300; i++) {
      const found = find()
      if (found !== undefined) return found
      await new Promise((r) => setTimeout(r, 20))
    }
    throw new Error(`spans never arrived; got: ${spans.map((s) => s.name).join(", ")}`)
  }

  const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${gw.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })

  it("honours the client's traceparent: the request's GenAI span, its queue wait and attempt, and the upstream's traceparent", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const clientSpanId = "00f067aa0ba902b7"
    const res = await chat({ model: "pico", messages: [{ role: "user", content: "trace me" }] }, { traceparent: `00-${traceId}-${clientSpanId}-01` })
    expect(res.status).toBe(200)
    await res.json()
    const genAi = await waitFor(() => spans.find((s) => s.traceId === traceId && s.name === "chat svc-pico-1"))
    const server = spans.find((s) => s.spanId === genAi.parentSpanId)!
    expect(server).toBeDefined()
    expect(server.parentSpanId).toBe(clientSpanId) // the server span continues the client's trace
    expect(server.kind).toBe(2) // server
    expect(attr(genAi, "gen_ai.operation.name")).toBe("chat")
    expect(attr(genAi, "gen_ai.request.model")).toBe("svc-pico-1")
    expect(attr(genAi, "gen_ai.response.model")).toBe("svc-pico-1")
    expect(attr(genAi, "gen_ai.usage.input_tokens")).toBe(11)
    expect(attr(genAi, "gen_ai.usage.output_tokens")).toBe(3)
    expect(attr(genAi, "gateway.request_id")).toBe(res.headers.get("x-request-id"))
    expect(attr(genAi, "http.response.status_code")).toBe(200)

    const children = await waitFor(() => {
      const found = spans.filter((s) => s.parentSpanId === genAi.spanId)
      return found.length >= 2 ? found : undefined
    })
    const wait = children.find((s) => s.name === "gateway.queue_wait")!
    const attempt = children.find((s) => s.name === "chat pico-up")!
    expect(wait).toBeDefined()
    expect(attempt.kind).toBe(3) // client
    expect(attr(attempt, "gateway.placement")).toBe("pico-up")
    expect(attr(attempt, "gateway.outcome")).toBe("success")
    // The upstream was called under the attempt's span.
    expect(upstreamTraceparents.at(-1)!.traceparent).toBe(`00-${traceId}-${attempt.spanId}-01`)
  })

  it("traces a failover: the failed attempt, the failover span, the attempt that answered — streamed", async () => {
    const before = spans.length
    const res = await chat({ model: "lyra", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "fail over" }] })
    expect(res.status).toBe(200)
    expect(await res.text()).toContain("Traced stream.")
    const genAi = await waitFor(() => spans.slice(before).find((s) => s.name === "chat svc-lyra-3" && attr(s, "gen_ai.usage.output_tokens") !== undefined))
    expect(attr(genAi, "gen_ai.response.model")).toBe("svc-lyra-3")
    expect(attr(genAi, "gen_ai.usage.input_tokens")).toBe(11)
    expect(attr(genAi, "gateway.stream")).toBe(true)
    const children = await waitFor(() => {
      const found = spans.filter((s) => s.parentSpanId === genAi.spanId)
      return found.some((s) => s.name === "chat lyra-up") && found.some((s) => s.name === "gateway.failover") ? found : undefined
    })
    const failed = children.find((s) => s.name === "chat lyra-flaky")!
    expect(attr(failed, "gateway.outcome")).toBe("failure")
    expect(failed.status.code).toBe(2) // error
    const failover = children.find((s) => s.name === "gateway.failover")!
    expect(attr(failover, "gateway.failover.from")).toBe("lyra-flaky")
    expect(attr(failover, "gateway.failover.to")).toBe("lyra-up")
    expect(children.filter((s) => s.name === "gateway.queue_wait").length).toBe(2)
    const answered = children.find((s) => s.name === "chat lyra-up")!
    expect(upstreamTraceparents.some((t) => t.path.startsWith("/v1") && t.traceparent === `00-${genAi.traceId}-${answered.spanId}-01`)).toBe(true)
    expect(upstreamTraceparents.some((t) => t.path.startsWith("/fail") && t.traceparent === `00-${genAi.traceId}-${failed.spanId}-01`)).toBe(true)
  })

  it("puts the trace id in the request's log line", async () => {
    const res = await chat({ model: "pico", messages: [{ role: "user", content: "log me" }] })
    await res.json()
    const requestId = res.headers.get("x-request-id")!
    const genAi = await waitFor(() => spans.find((s) => attr(s, "gateway.request_id") === requestId))
    const line = await waitFor(() =>
      gw.output().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.request_id === requestId)
    )
    expect(line.trace_id).toBe(genAi.traceId)
  })
})
