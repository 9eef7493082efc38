/**
 * Run wake-up signals: a subscriber wakes for its run only, and on Redis a signal published by one
 * instance (its own connection pair) wakes a subscriber of another. A wait's timeout runs on
 * Effect's clock (TestClock here); a wait without one ends only at a signal.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { inject } from "vitest"
import { RunSignals } from "../../src/coordination/run-signals.ts"
import { uniquePrefix } from "./support.ts"

const instance = (layer: Layer.Layer<RunSignals>) => Effect.map(Layer.build(layer), (context) => Context.get(context, RunSignals))

const checkDelivery = (publisher: RunSignals["Service"], subscriber: RunSignals["Service"]) =>
  Effect.gen(function*() {
    const mine = yield* subscriber.subscribe("run_mine")
    yield* publisher.publish({ runId: "run_other", lastSeq: 1 })
    assert.isFalse(yield* mine.wait(300), "a signal for another run wakes nobody here")
    yield* publisher.publish({ runId: "run_mine", lastSeq: 2 })
    assert.isTrue(yield* mine.wait(5_000))
    // a signal that arrived while nobody waited is not lost
    yield* publisher.publish({ runId: "run_mine", lastSeq: 3 })
    yield* Effect.sleep("200 millis")
    assert.isTrue(yield* mine.wait(5_000))
  })

describe("RunSignals", () => {
  it.live("in process: wakes the run's subscribers", () =>
    Effect.gen(function*() {
      const bus = yield* instance(RunSignals.layerInProcess)
      yield* checkDelivery(bus, bus)
    }))

  it.effect("a wait times out on Effect's clock; without a timeout it waits for the signal", () =>
    Effect.gen(function*() {
      const bus = yield* instance(RunSignals.layerInProcess)
      const mine = yield* bus.subscribe("run_clock")
      const timed = yield* Effect.forkChild(mine.wait(1_000))
      yield* TestClock.adjust(999)
      assert.isUndefined(timed.pollUnsafe(), "still waiting 1 ms before its timeout")
      yield* TestClock.adjust(1)
      assert.isFalse(yield* Fiber.join(timed))

      const untimed = yield* Effect.forkChild(mine.wait())
      yield* TestClock.adjust(3_600_000)
      assert.isUndefined(untimed.pollUnsafe(), "no timeout: an hour passes without waking it")
      yield* bus.publish({ runId: "run_clock", lastSeq: 1 })
      assert.isTrue(yield* Fiber.join(untimed))
    }))

  const { redisUrl } = inject("services")
  it.live.runIf(redisUrl !== null)("on Redis: a signal from one instance wakes a subscriber on another", () =>
    Effect.gen(function*() {
      const prefix = uniquePrefix()
      const a = yield* instance(RunSignals.layerRedis(redisUrl!, prefix))
      const b = yield* instance(RunSignals.layerRedis(redisUrl!, prefix))
      yield* checkDelivery(a, b)
    }))
})
