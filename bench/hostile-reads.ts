/**
 * Micro-benchmark of two readers a broken or hostile peer can feed without end, and how long each
 * holds the event loop:
 * - the upstream SSE reader (`src/backends/upstream/sse.ts`) given one line of `--mib` MiB in
 *   64 KiB reads: total time, the slowest read, and the read that completes the line (one copy);
 * - a batch's input file (`src/batches/openai-input.ts`) of 32 MiB: blank lines, one-character
 *   lines, one line of spaces, 1,000 lines of 32 KiB and one 32 MiB line — total time and the longest hold, seen by a
 *   1 ms interval timer.
 *
 *   node bench/hostile-reads.ts [--mib 15.9]
 */
import { parseArgs } from "node:util"
import { Effect } from "effect"
import { parseOpenAiInput } from "../src/batches/openai-input.ts"
import { sseEvents, ssePayloads } from "../src/backends/upstream/sse.ts"

const { values } = parseArgs({ options: { mib: { type: "string", default: "15.9" } } })
const mib = Number(values.mib)

const READ = "x".repeat(64 * 1024)
for (const [name, make] of [["payloads (OpenAI-compatible)", ssePayloads], ["events (Messages)", sseEvents]] as const) {
  const reader: { feed(text: string): Array<unknown> } = make()
  const reads = Math.ceil((mib * 1024 * 1024) / READ.length)
  let slowest = 0
  const started = performance.now()
  reader.feed("data: ")
  for (let i = 0; i < reads; i++) {
    const at = performance.now()
    reader.feed(READ)
    slowest = Math.max(slowest, performance.now() - at)
  }
  const at = performance.now()
  const events = reader.feed("\n\n")
  const last = performance.now() - at
  console.log(`SSE ${name}: a ${mib} MiB line in ${reads} reads of 64 KiB: ${(performance.now() - started).toFixed(1)} ms, slowest read ${slowest.toFixed(2)} ms, the line's end ${last.toFixed(2)} ms (${events.length} event)`)
}

const MIB = 1024 * 1024
const line = (id: string, content: string) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "m", messages: [{ role: "user", content }] } })
const files: ReadonlyArray<readonly [string, () => string]> = [
  ["32 MiB of blank lines", () => "\n".repeat(32 * MIB)],
  ["16 Mi one-character lines", () => "a\n".repeat(16 * MIB)],
  ["one 32 MiB line of spaces", () => " ".repeat(32 * MIB)],
  ["1,000 lines of 32 KiB", () => Array.from({ length: 1000 }, (_, i) => line(`r${i}`, "y".repeat(32 * 1024))).join("\n")],
  ["one 32 MiB line", () => line("one", "z".repeat(32 * MIB - 200))]
]
for (const [name, make] of files) {
  const bytes = new TextEncoder().encode(make())
  let longest = 0
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
  }, 1)
  const started = performance.now()
  const parsed = await Effect.runPromise(parseOpenAiInput(bytes, "/v1/chat/completions"))
  clearInterval(timer)
  const now = performance.now()
  longest = Math.max(longest, now - last)
  console.log(`batch input, ${name}: ${(now - started).toFixed(0)} ms, longest hold ${longest.toFixed(0)} ms (${parsed._tag})`)
}
