import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import type { FaultSettings, PlacementRuntime } from "../../src/backends/backend.ts"
import { BackendError } from "../../src/backends/backend.ts"
import { makeSimulatorBackend, simulatorPlacement } from "../../src/backends/simulator/simulator.ts"
import type { CanonicalEvent } from "../../src/model/events.ts"
import { countText } from "../../src/model/tokenizer.ts"
import { ask } from "./support.ts"

const withFaults = (faults: FaultSettings, simulator: PlacementRuntime["simulator"] = {}): PlacementRuntime =>
  simulatorPlacement({ modelId: "svc-sim-plain", faults, simulator })

/** Runs the stream in a child fiber, recording events as they arrive. */
const record = (stream: Stream.Stream<CanonicalEvent, BackendError>) =>
  Effect.gen(function*() {
    const seen: Array<CanonicalEvent> = []
    const fiber = yield* Effect.forkChild(Stream.runForEach(stream, (event) => Effect.sync(() => seen.push(event))))
    return { seen, fiber }
  })

/**
 * Lets a recorded stream write its script in real time before the test clock moves: the script's
 * token counts come from the tokenizer thread (warmed first, so this is a round trip or two).
 */
const scriptWritten = Effect.gen(function*() {
  yield* countText("warm up")
  yield* TestClock.withLive(Effect.sleep("250 millis"))
})

const isContentDelta = (e: CanonicalEvent) => e.type === "text_delta" || e.type === "thinking_delta" || e.type === "tool_input_delta"

describe("faults", () => {
  it.effect("error fails before any event, with the status mapped to a spec error type", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[number, string, boolean]> = [
        [500, "api_error", true],
        [503, "overloaded_error", true],
        [429, "rate_limit_error", true],
        [400, "invalid_request_error", false]
      ]
      for (const [status, type, retryable] of cases) {
        const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("hi"), withFaults({ mode: "error", status })))
        const error = yield* Fiber.join(fiber).pipe(Effect.flip)
        assert.instanceOf(error, BackendError)
        assert.strictEqual(error.status, status)
        assert.strictEqual(error.type, type)
        assert.strictEqual(error.retryable, retryable)
        assert.strictEqual(error.retryAfterSeconds, status === 429 ? 1 : undefined)
        assert.deepStrictEqual(seen, [])
      }
    }))

  it.effect("break-mid-stream fails after the first content deltas, never reaching message_stop", () =>
    Effect.gen(function*() {
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("hi"), withFaults({ mode: "break-mid-stream" })))
      const error = yield* Fiber.join(fiber).pipe(Effect.flip)
      assert.strictEqual(error.status, 500)
      assert.isTrue(error.retryable)
      assert.strictEqual(seen[0].type, "message_start")
      assert.strictEqual(seen.filter(isContentDelta).length, 2)
      assert.isFalse(seen.some((e) => e.type === "message_stop"))
    }))

  it.effect("hang never emits", () =>
    Effect.gen(function*() {
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("hi"), withFaults({ mode: "hang" })))
      yield* TestClock.adjust("1 hour")
      assert.deepStrictEqual(seen, [])
      assert.isUndefined(fiber.pollUnsafe())
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("rate picks a deterministic share of calls", () =>
    Effect.gen(function*() {
      const failures = (rate: number) =>
        Effect.gen(function*() {
          const backend = makeSimulatorBackend()
          const placement = withFaults({ mode: "error", rate })
          let failed = 0
          for (let i = 0; i < 200; i++) {
            const exit = yield* Effect.exit(Stream.runDrain(backend.stream(ask("hi"), placement)))
            if (exit._tag === "Failure") failed++
          }
          return failed
        })
      assert.strictEqual(yield* failures(0), 0)
      assert.strictEqual(yield* failures(1), 200)
      const half = yield* failures(0.5)
      assert.isAbove(half, 70)
      assert.isBelow(half, 130)
      assert.strictEqual(yield* failures(0.5), half)
    }))

  it.effect("faults are read on every call, so flipping them takes effect at once", () =>
    Effect.gen(function*() {
      const backend = makeSimulatorBackend()
      const placement = withFaults({ mode: "error", status: 502 })
      const failed = yield* Effect.exit(Stream.runDrain(backend.stream(ask("hi"), placement)))
      assert.strictEqual(failed._tag, "Failure")
      placement.faults = { mode: "none" }
      const ok = yield* Effect.exit(Stream.runDrain(backend.stream(ask("hi"), placement)))
      assert.strictEqual(ok._tag, "Success")
    }))
})

describe("timing", () => {
  it.effect("waits ttftMs for the first event, then paces deltas at tokensPerSecond", () =>
    Effect.gen(function*() {
      // 6 tokens in two deltas of 3, at 10 tokens/s: 300 ms per delta after a 1 s first token.
      const placement = withFaults({ mode: "none" }, { ttftMs: 1000, tokensPerSecond: 10 })
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("say exactly: one two three four five six"), placement))
      yield* scriptWritten
      yield* TestClock.adjust(999)
      assert.strictEqual(seen.length, 0)
      yield* TestClock.adjust(1)
      assert.strictEqual(seen[0]?.type, "message_start")
      assert.strictEqual(seen.filter(isContentDelta).length, 0)
      yield* TestClock.adjust(299)
      assert.strictEqual(seen.filter(isContentDelta).length, 0)
      yield* TestClock.adjust(1)
      assert.strictEqual(seen.filter(isContentDelta).length, 1)
      yield* TestClock.adjust(300)
      yield* Fiber.join(fiber)
      assert.strictEqual(seen.at(-1)?.type, "message_stop")
    }))

  it.effect("slow is ten times slower, even on a placement without delays", () =>
    Effect.gen(function*() {
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("say exactly: one two three"), withFaults({ mode: "slow" })))
      yield* scriptWritten
      yield* TestClock.adjust(999)
      assert.strictEqual(seen.length, 0)
      yield* TestClock.adjust(1)
      assert.strictEqual(seen[0]?.type, "message_start")
      // 3 tokens at 5 tokens/s.
      yield* TestClock.adjust(599)
      assert.strictEqual(seen.filter(isContentDelta).length, 0)
      yield* TestClock.adjust(1)
      yield* Fiber.join(fiber)
      assert.strictEqual(seen.filter(isContentDelta).length, 1)
    }))

  it.effect("hidden reasoning takes time before the first visible token", () =>
    Effect.gen(function*() {
      const placement = simulatorPlacement({ modelId: "svc-sim-reasoner", reasoning: true, simulator: { tokensPerSecond: 10 } })
      const request = ask("say exactly: hi", { reasoning: { enabled: true, visible: false, budgetTokens: 20 } })
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(request, placement))
      yield* scriptWritten
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(seen.map((e) => e.type), ["message_start"])
      yield* TestClock.adjust(1999) // 20 reasoning tokens at 10 tokens/s
      assert.strictEqual(seen.length, 1)
      yield* TestClock.adjust(1)
      assert.strictEqual(seen[1]?.type, "block_start")
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(fiber)
    }))

  it.effect("without settings the whole reply is emitted without waiting", () =>
    Effect.gen(function*() {
      const { seen, fiber } = yield* record(makeSimulatorBackend().stream(ask("hello"), withFaults({ mode: "none" })))
      yield* Fiber.join(fiber)
      assert.strictEqual(seen.at(-1)?.type, "message_stop")
    }))
})
