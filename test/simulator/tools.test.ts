import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { OutputBlock } from "../../src/model/content.ts"
import type { JsonObject } from "../../src/util/json.ts"
import { assistantMessage, userMessage } from "../../src/model/content.ts"
import type { ToolDefinition } from "../../src/model/request.ts"
import { makeRequest } from "../../src/model/request.ts"
import { countTextTokensExact as countTextTokens } from "../../src/model/bpe.ts"
import { ask, runEvents, textOf } from "./support.ts"
import { validateJsonSchema } from "./validate-json-schema.ts"

const weatherSchema: JsonObject = {
  type: "object",
  properties: {
    city: { type: "string", minLength: 2 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1, maximum: 10 },
    coordinates: {
      type: "object",
      properties: { lat: { type: "number", minimum: -90, maximum: 90 }, lon: { type: "number", minimum: -180, maximum: 180 } },
      required: ["lat", "lon"],
      additionalProperties: false
    }
  },
  required: ["city", "unit", "days", "coordinates"],
  additionalProperties: false
}
const getWeather: ToolDefinition = { name: "get_weather", description: "Weather forecast", inputSchema: weatherSchema }
const getTime: ToolDefinition = {
  name: "get_time",
  inputSchema: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] }
}
const tools = [getWeather, getTime]

const toolNames = (content: ReadonlyArray<OutputBlock>): Array<string> =>
  content.flatMap((block) => (block.type === "tool_use" ? [block.name] : []))

describe("tool calls", () => {
  it.effect("a forced tool is called with input that satisfies its schema", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 30; i++) {
        const { response } = yield* runEvents(ask(`Plan number ${i}`, { tools, toolChoice: { type: "tool", name: "get_weather" } }))
        assert.strictEqual(response.stopReason, "tool_use")
        const [call] = response.content
        assert.strictEqual(call.type, "tool_use")
        if (call.type !== "tool_use") return
        assert.strictEqual(call.name, "get_weather")
        assert.match(call.id, /^toolu_sim[0-9a-f]{20}$/)
        assert.deepStrictEqual(validateJsonSchema(call.input, weatherSchema), [], JSON.stringify(call.input))
      }
    }))

  it.effect("usage counts the streamed arguments JSON", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("go", { tools, toolChoice: { type: "tool", name: "get_time" } }))
      const [call] = response.content
      assert.strictEqual(call.type, "tool_use")
      if (call.type !== "tool_use") return
      assert.strictEqual(response.usage.outputTokens, countTextTokens(JSON.stringify(call.input)))
    }))

  it.effect("'any' calls the mentioned tool, or the first one", () =>
    Effect.gen(function*() {
      const mentioned = (yield* runEvents(ask("What time is it? use get_time", { tools, toolChoice: { type: "any" } }))).response
      assert.deepStrictEqual(toolNames(mentioned.content), ["get_time"])
      const unnamed = (yield* runEvents(ask("Do something", { tools, toolChoice: { type: "any" } }))).response
      assert.deepStrictEqual(toolNames(unnamed.content), ["get_weather"])
    }))

  it.effect("'auto' calls tools only when the last user message names them, in order of mention", () =>
    Effect.gen(function*() {
      const none = (yield* runEvents(ask("How are you?", { tools }))).response
      assert.strictEqual(none.stopReason, "end_turn")
      assert.deepStrictEqual(none.content.map((b) => b.type), ["text"])
      const both = (yield* runEvents(ask("Call GET_TIME then get_weather please", { tools }))).response
      assert.deepStrictEqual(toolNames(both.content), ["get_time", "get_weather"])
      assert.strictEqual(both.stopReason, "tool_use")
      const single = (yield* runEvents(ask("get_time and get_weather", { tools, parallelToolCalls: false }))).response
      assert.deepStrictEqual(toolNames(single.content), ["get_time"])
      // A name inside a longer word is not a mention.
      const partial = (yield* runEvents(ask("my_get_time_helper is broken", { tools }))).response
      assert.strictEqual(partial.stopReason, "end_turn")
    }))

  it.effect("'none' never calls a tool, even when one is named", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("use get_weather", { tools, toolChoice: { type: "none" } }))
      assert.deepStrictEqual(response.content.map((b) => b.type), ["text"])
    }))

  it.effect("a ceiling inside the arguments truncates the call with max_tokens", () =>
    Effect.gen(function*() {
      const { response, events } = yield* runEvents(ask("x", { tools, toolChoice: { type: "tool", name: "get_weather" }, maxOutputTokens: 4 }))
      assert.strictEqual(response.stopReason, "max_tokens")
      assert.strictEqual(response.usage.outputTokens, 4)
      const json = events.map((e) => (e.type === "tool_input_delta" ? e.partialJson : "")).join("")
      assert.throws(() => JSON.parse(json))
    }))

  it.effect("after a tool result the answer quotes the result and the turn ends", () =>
    Effect.gen(function*() {
      const request = makeRequest({
        model: "svc-sim-plain",
        tools,
        messages: [
          userMessage("What is the weather? use get_weather"),
          assistantMessage([{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }]),
          userMessage([{ type: "tool_result", toolUseId: "toolu_1", content: "{\"temp\": 21,\n \"sky\": \"clear\"}", isError: false }])
        ]
      })
      const { response } = yield* runEvents(request)
      assert.strictEqual(response.stopReason, "end_turn")
      assert.isTrue(textOf(response).startsWith("The get_weather tool returned: {\"temp\": 21, \"sky\": \"clear\"}. "), textOf(response))
    }))

  it.effect("an error result is reported as an error", () =>
    Effect.gen(function*() {
      const request = makeRequest({
        model: "svc-sim-plain",
        tools,
        messages: [
          userMessage("use get_time"),
          assistantMessage([{ type: "tool_use", id: "toolu_2", name: "get_time", input: { zone: "UTC" } }]),
          userMessage([{ type: "tool_result", toolUseId: "toolu_2", content: [{ type: "text", text: "zone unknown" }], isError: true }])
        ]
      })
      const { response } = yield* runEvents(request)
      assert.isTrue(textOf(response).startsWith("The get_time tool reported an error: zone unknown."))
    }))
})

describe("response formats", () => {
  it.effect("json_schema answers with JSON that satisfies the schema", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 10; i++) {
        const { response } = yield* runEvents(ask(`Forecast ${i}`, { responseFormat: { type: "json_schema", name: "forecast", schema: weatherSchema, strict: true } }))
        const value: unknown = JSON.parse(textOf(response))
        assert.deepStrictEqual(validateJsonSchema(value, weatherSchema), [])
      }
    }))

  it.effect("json_object answers with a JSON object", () =>
    Effect.gen(function*() {
      const { response } = yield* runEvents(ask("Anything", { responseFormat: { type: "json_object" } }))
      const value = JSON.parse(textOf(response)) as { answer: unknown }
      assert.isString(value.answer)
    }))
})
