/**
 * Request decoding alone, in process: main-thread CPU per `dialect.decode(body)` for each dialect,
 * on a one-message body, a typical agent turn (system text, tools, a tool call and its result,
 * options) and a body with one bad field deep inside (the 400 path). No server, no I/O: the figure
 * is what decoding adds to a request (issue 12: the request path). A long conversation (the agent
 * turn's history repeated to 100 messages or items) shows how decoding grows with the history.
 *
 *   node bench/decode.ts [--rounds 7] [--iterations 4000]
 *
 * Each case is warmed up, then timed in `rounds` rounds of `iterations` decodes; the figure is the
 * median round's `process.threadCpuUsage()` (user + system) per decode. The decode runs through
 * `Effect.runSyncExit`, which a route's `yield*` costs about as much as.
 */
import { Effect, Exit } from "effect"
import { parseArgs } from "node:util"
import { chatDialect } from "../src/dialects/chat/index.ts"
import { completionsDialect } from "../src/dialects/completions/index.ts"
import type { ChatDialect } from "../src/dialects/dialect.ts"
import { messagesDialect } from "../src/dialects/messages/index.ts"
import { responsesDialect } from "../src/dialects/responses/index.ts"

const { values } = parseArgs({
  options: { rounds: { type: "string", default: "7" }, iterations: { type: "string", default: "4000" } }
})
const rounds = Number(values.rounds)
const iterations = Number(values.iterations)

const weatherSchema = {
  type: "object",
  properties: { city: { type: "string", description: "City name" }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city"]
}
const searchSchema = { type: "object", properties: { query: { type: "string" }, limit: { type: "integer" } }, required: ["query"] }

interface Case {
  readonly name: string
  readonly body: unknown
  /** Whether the body is meant to be refused (a 400). */
  readonly bad: boolean
}

const chatCases: ReadonlyArray<Case> = [
  { name: "one message", bad: false, body: { model: "svc-bench", messages: [{ role: "user", content: "Hello there" }] } },
  {
    name: "agent turn",
    bad: false,
    body: {
      model: "svc-bench",
      messages: [
        { role: "system", content: "You are a helpful assistant." },
        { role: "user", content: [{ type: "text", text: "What's the weather in Paris and Rome?" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
            { id: "call_2", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Rome\"}" } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: "18 C, sunny" },
        { role: "tool", tool_call_id: "call_2", content: "22 C, cloudy" },
        { role: "assistant", content: "Paris is 18 C and sunny; Rome 22 C and cloudy." },
        { role: "user", content: "And search the news for both." }
      ],
      tools: [
        { type: "function", function: { name: "get_weather", description: "Weather now", parameters: weatherSchema } },
        { type: "function", function: { name: "search", description: "Web search", parameters: searchSchema, strict: true } }
      ],
      tool_choice: "auto",
      temperature: 0.7,
      max_completion_tokens: 512,
      stream: true,
      stream_options: { include_usage: true },
      user: "u-1"
    }
  },
  {
    name: "bad field",
    bad: true,
    body: {
      model: "svc-bench",
      messages: [
        { role: "system", content: "You are a helpful assistant." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
        { role: "user", content: [{ type: "text", text: "Look" }, { type: "image_url", image_url: { url: 5 } }] }
      ]
    }
  }
]

const messagesCases: ReadonlyArray<Case> = [
  { name: "one message", bad: false, body: { model: "svc-bench", max_tokens: 256, messages: [{ role: "user", content: "Hello there" }] } },
  {
    name: "agent turn",
    bad: false,
    body: {
      model: "svc-bench",
      max_tokens: 512,
      system: "You are a helpful assistant.",
      messages: [
        { role: "user", content: [{ type: "text", text: "What's the weather in Paris and Rome?" }] },
        {
          role: "assistant",
          content: [
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "get_weather", input: { city: "Rome" } }
          ]
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: "18 C, sunny" },
            { type: "tool_result", tool_use_id: "toolu_2", content: "22 C, cloudy" }
          ]
        },
        { role: "assistant", content: "Paris is 18 C and sunny; Rome 22 C and cloudy." },
        { role: "user", content: "And search the news for both." }
      ],
      tools: [
        { name: "get_weather", description: "Weather now", input_schema: weatherSchema },
        { name: "search", description: "Web search", input_schema: searchSchema }
      ],
      tool_choice: { type: "auto" },
      temperature: 0.7,
      stream: true,
      metadata: { user_id: "u-1" }
    }
  },
  {
    name: "bad field",
    bad: true,
    body: {
      model: "svc-bench",
      max_tokens: 256,
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
        { role: "user", content: [{ type: "text", text: "Look" }, { type: "image", source: { type: "url", url: 5 } }] }
      ]
    }
  }
]

const responsesCases: ReadonlyArray<Case> = [
  { name: "one message", bad: false, body: { model: "svc-bench", input: "Hello there" } },
  {
    name: "agent turn",
    bad: false,
    body: {
      model: "svc-bench",
      instructions: "You are a helpful assistant.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "What's the weather in Paris and Rome?" }] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: "{\"city\":\"Rome\"}" },
        { type: "function_call_output", call_id: "call_1", output: "18 C, sunny" },
        { type: "function_call_output", call_id: "call_2", output: "22 C, cloudy" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Paris is 18 C and sunny; Rome 22 C and cloudy." }] },
        { role: "user", content: "And search the news for both." }
      ],
      tools: [
        { type: "function", name: "get_weather", description: "Weather now", parameters: weatherSchema },
        { type: "function", name: "search", description: "Web search", parameters: searchSchema, strict: true }
      ],
      tool_choice: "auto",
      temperature: 0.7,
      max_output_tokens: 512,
      stream: true,
      store: false,
      user: "u-1"
    }
  },
  {
    name: "bad field",
    bad: true,
    body: {
      model: "svc-bench",
      input: [
        { role: "system", content: "You are a helpful assistant." },
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
        { role: "user", content: [{ type: "input_text", text: "Look" }, { type: "input_image", image_url: 5 }] }
      ]
    }
  }
]

const completionsCases: ReadonlyArray<Case> = [
  { name: "one message", bad: false, body: { model: "svc-bench", prompt: "Say this is a test" } },
  {
    name: "agent turn",
    bad: false,
    body: {
      model: "svc-bench",
      prompt: "Summarise: Paris is 18 C and sunny; Rome 22 C and cloudy.",
      max_tokens: 128,
      temperature: 0.7,
      stop: ["\n\n", "END"],
      stream: true,
      stream_options: { include_usage: true },
      user: "u-1",
      echo: false
    }
  },
  { name: "bad field", bad: true, body: { model: "svc-bench", prompt: "Hi", stop: ["a", 5] } }
]

/** The agent turn with its history repeated to about 100 entries in `key`. */
const longConversation = (cases: ReadonlyArray<Case>, key: string): Case => {
  const agent = cases.find((c) => c.name === "agent turn")!.body as Record<string, ReadonlyArray<unknown>>
  const history = agent[key]
  const repeated = Array.from({ length: Math.ceil(100 / history.length) }, () => history).flat()
  return { name: "long conversation", bad: false, body: { ...agent, [key]: repeated } }
}

const dialects: ReadonlyArray<readonly [string, ChatDialect<unknown>, ReadonlyArray<Case>]> = [
  ["chat", chatDialect as ChatDialect<unknown>, [...chatCases, longConversation(chatCases, "messages")]],
  ["messages", messagesDialect as ChatDialect<unknown>, [...messagesCases, longConversation(messagesCases, "messages")]],
  ["responses", responsesDialect as ChatDialect<unknown>, [...responsesCases, longConversation(responsesCases, "input")]],
  ["completions", completionsDialect as ChatDialect<unknown>, completionsCases]
]

const cpuMicros = () => {
  const usage = process.threadCpuUsage()
  return usage.user + usage.system
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const measure = (dialect: ChatDialect<unknown>, c: Case) => {
  // The outcome must be what the case says, or the figure measures something else.
  const first = Effect.runSyncExit(dialect.decode(c.body))
  if (Exit.isSuccess(first) === c.bad) throw new Error(`${dialect.surface} ${c.name}: expected ${c.bad ? "a 400" : "success"}, got ${JSON.stringify(first)}`)
  for (let i = 0; i < iterations; i++) Effect.runSyncExit(dialect.decode(c.body))
  const perDecode: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const start = cpuMicros()
    for (let i = 0; i < iterations; i++) Effect.runSyncExit(dialect.decode(c.body))
    perDecode.push((cpuMicros() - start) / iterations)
  }
  return { median: median(perDecode), min: Math.min(...perDecode), error: c.bad && Exit.isFailure(first) ? String(first.cause) : undefined }
}

console.log(`decode CPU per request (main thread, µs; median of ${rounds} rounds × ${iterations}; node ${process.version})\n`)
console.log("| dialect | case | µs/decode (median) | min |")
console.log("|---|---|---:|---:|")
for (const [name, dialect, cases] of dialects) {
  for (const c of cases) {
    const { median: m, min } = measure(dialect, c)
    console.log(`| ${name} | ${c.name} | ${m.toFixed(1)} | ${min.toFixed(1)} |`)
  }
}
