/**
 * The Responses stream encoder: the exact typed sequence, sequence numbers, the invariants the
 * SDK's accumulator enforces (checked by running the SDK's own `ResponseStream` over our events),
 * a terminal response identical to the non-streaming body, and the failure ending.
 */
import { APIError } from "openai"
import { Stream } from "openai/core/streaming"
import { ResponseStream } from "openai/lib/responses/ResponseStream"
import { describe, expect, it } from "vitest"
import { responsesDialect } from "../../../src/dialects/responses/index.ts"
import { collect } from "../../../src/model/events.ts"
import { contextFor, fullScript, parseSse } from "./fixtures.ts"

const encodeAll = (script = fullScript(), body: Record<string, unknown> = {}) => {
  const context = contextFor(body)
  const encoder = responsesDialect.streamEncoder(context)
  const text = script.map((event) => encoder.event(event)).join("")
  return { context, encoder, text, frames: parseSse(text) }
}

/** Feeds event payloads to the SDK's accumulator, which throws on any invariant we break. */
const sdkFinalResponse = (frames: ReadonlyArray<unknown>) => {
  const lines = frames.map((frame) => JSON.stringify(frame) + "\n").join("")
  const readable = new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(lines))
      controller.close()
    }
  })
  return ResponseStream.fromReadableStream(readable as any).finalResponse()
}

describe("responses stream encoder", () => {
  it("emits the full typed sequence with sequence_number 0..n", () => {
    const { frames } = encodeAll()
    expect(frames.map((f) => f.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed"
    ])
    expect(frames.map((f) => f.sequence_number)).toEqual(frames.map((_, i) => i))
    expect(frames[0].response).toMatchObject({ id: "resp_TEST", status: "in_progress", output: [], usage: null })
  })

  it("writes each text delta frame byte for byte as JSON.stringify of the whole event, whatever the text", () => {
    const texts = ["plain", "", "quote \" backslash \\", "line\nbreak\r\ttab", "\ud800 lone", "🙂", "</script>", "\u2028\u2029", "\u0000"]
    const script = fullScript()
    const at = script.findIndex((event) => event.type === "text_delta")
    const textEvent = script[at] as { index: number }
    const withTexts = [...script.slice(0, at), ...texts.map((text) => ({ type: "text_delta" as const, index: textEvent.index, text })), ...script.slice(at)]
    // (Not parseSse: its `.` stops at U+2028, which JSON.stringify leaves as it is and SSE does not split on.)
    const encoder = responsesDialect.streamEncoder(contextFor({}))
    const text = withTexts.map((event) => encoder.event(event)).join("")
    const raw = text.split("\n\n").filter((frame) => frame.startsWith("event: response.output_text.delta\n"))
    const deltas = raw.map((frame) => JSON.parse(frame.slice(frame.indexOf("data: ") + 6)))
    expect(deltas.length).toBeGreaterThan(texts.length)
    raw.forEach((frame, i) => {
      const data = deltas[i]
      const expected = { type: data.type, sequence_number: data.sequence_number, item_id: data.item_id, output_index: data.output_index, content_index: 0, delta: data.delta, logprobs: [] }
      expect(frame).toBe(`event: response.output_text.delta\ndata: ${JSON.stringify(expected)}`)
    })
    expect(deltas.slice(0, texts.length).map((d) => d.delta)).toEqual(texts)
  })

  it("keeps the SDK invariants: adds at output.length, parts at content.length, item_id = item.id", () => {
    const { frames } = encodeAll()
    const output: Array<any> = []
    for (const frame of frames) {
      if (frame.type === "response.output_item.added") {
        expect(frame.output_index).toBe(output.length)
        expect(frame.item.id).toMatch(/^(msg|rs|fc)_TEST_\d+$/)
        output.push({ ...frame.item, content: frame.item.content ? [] : undefined, summary: frame.item.summary ? [] : undefined })
      } else if (frame.type === "response.content_part.added") {
        expect(frame.content_index).toBe(output[frame.output_index].content.length)
        output[frame.output_index].content.push(frame.part)
      } else if (frame.type === "response.reasoning_summary_part.added") {
        expect(frame.summary_index).toBe(output[frame.output_index].summary.length)
        output[frame.output_index].summary.push(frame.part)
      }
      if ("item_id" in frame) expect(frame.item_id).toBe(output[frame.output_index].id)
    }
    expect(frames.find((f) => f.type === "response.output_item.added" && f.item.type === "function_call").item)
      .toMatchObject({ id: "fc_TEST_2", call_id: "call_abc", arguments: "", status: "in_progress" })
  })

  it("the terminal response is byte for byte encodeResponse(collect(events))", () => {
    const script = fullScript()
    const { frames, context } = encodeAll(script, { store: true, tools: [{ type: "function", name: "get_weather" }] })
    const completed = frames.at(-1)
    expect(JSON.stringify(completed.response)).toBe(JSON.stringify(responsesDialect.encodeResponse(collect(script), context)))
    // output_item.done carries the same items as the final output.
    const done = frames.filter((f) => f.type === "response.output_item.done").map((f) => f.item)
    expect(done).toEqual(completed.response.output)
  })

  it("the SDK's own accumulator accepts the stream and ends with the same response", async () => {
    const { frames } = encodeAll()
    const final = await sdkFinalResponse(frames)
    expect(final.output_text).toBe("Hello world")
    expect(final.output.map((item) => item.type)).toEqual(["reasoning", "message", "function_call"])
    expect(final.id).toBe("resp_TEST")
  })

  it("a cut answer ends with response.incomplete", async () => {
    const { frames } = encodeAll(fullScript("max_tokens"))
    expect(frames.at(-1)).toMatchObject({ type: "response.incomplete", response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } } })
    expect((await sdkFinalResponse(frames)).status).toBe("incomplete")
  })

  it("a failure mid-stream ends with response.failed and then error; keepalives are comments", () => {
    const context = contextFor()
    const encoder = responsesDialect.streamEncoder(context)
    const started = fullScript().slice(0, 8).map((event) => encoder.event(event)).join("")
    const tail = encoder.error({ status: 500, type: "api_error", message: "upstream broke" })
    expect(encoder.keepalive()).toMatch(/^: /)
    expect(encoder.switchover("moved to another placement")).toMatch(/^: moved/)
    const frames = parseSse(started + tail)
    const [failed, error] = frames.slice(-2)
    expect(failed).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: "upstream broke" } } })
    expect(failed.response.output.map((item: any) => [item.id, item.status ?? null])).toEqual([["rs_TEST_0", null], ["msg_TEST_1", "incomplete"]])
    expect(error).toEqual({ type: "error", sequence_number: frames.length - 1, code: "api_error", message: "upstream broke", param: null })
  })

  it("the SDK's SSE reader yields response.failed, then throws an APIError on the error event", async () => {
    const encoder = responsesDialect.streamEncoder(contextFor())
    const text = fullScript().slice(0, 8).map((event) => encoder.event(event)).join("") + encoder.keepalive() +
      encoder.error({ status: 503, type: "overloaded_error", message: "busy" })
    const seen: Array<string> = []
    const read = async () => {
      for await (const event of Stream.fromSSEResponse<any>(new Response(text), new AbortController())) seen.push(event.type)
    }
    const thrown = await read().catch((e) => e)
    expect(thrown).toBeInstanceOf(APIError)
    expect(thrown.message).toContain("busy")
    expect(seen.at(-1)).toBe("response.failed")
  })
})
