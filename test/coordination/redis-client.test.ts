/**
 * The one Redis client: a running gateway holds exactly two connections (commands and one
 * subscriber carrying every channel), whatever uses Redis; a Redis that is down at start is an
 * outage, not a crash, with typed errors and one log line per connection instead of one per
 * reconnect; the command timeout fails a command Redis does not answer, but not one whose answer
 * came while the event loop was stalled; and once Redis has left a command unanswered for three
 * deadlines, commands fail at once without being sent until it answers again.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger, Schedule } from "effect"
import { Redis } from "ioredis"
import { afterAll, inject } from "vitest"
import { RedisClient } from "../../src/coordination/redis-client.ts"
import { embeddedDataDir } from "../support/engines.ts"
import type { GatewayHandle } from "../support/gateway-process.ts"
import { startInProcessGateway } from "../support/in-process-gateway.ts"
import { startPrivateRedis } from "../support/private-redis.ts"
import { dropPrefix, uniquePrefix } from "./support.ts"

const { redisUrl } = inject("services")

/** The connections CLIENT LIST shows under `prefix`'s names: name → channel count. */
const connectionsOf = async (url: string, prefix: string) => {
  const admin = new Redis(url, { maxRetriesPerRequest: 1 })
  try {
    const list = String(await admin.client("LIST"))
    return list.split("\n").flatMap((line) => {
      const name = /(?:^| )name=(\S*)/.exec(line)?.[1]
      return name !== undefined && name.startsWith(prefix) ? [[name.slice(prefix.length), Number(/ sub=(\d+)/.exec(line)?.[1])] as const] : []
    }).sort()
  } finally {
    admin.disconnect()
  }
}

describe.skipIf(redisUrl === null)("RedisClient in a running gateway", () => {
  const prefix = `${uniquePrefix()}`
  let gateway: GatewayHandle | undefined
  afterAll(async () => {
    await gateway?.stop()
    await Effect.runPromise(dropPrefix(redisUrl!, prefix))
  })

  it("coordination, capacity queues, run signals and readiness share two connections", async () => {
    gateway = await startInProcessGateway({ GATEWAY_DATA_DIR: embeddedDataDir(), REDIS_URL: redisUrl!, GATEWAY_REDIS_PREFIX: prefix })
    const ready = await fetch(`${gateway.baseUrl}/readyz`)
    assert.strictEqual(ready.status, 200)
    assert.deepInclude(await ready.json(), { status: "ready" })
    // The subscriber carries the run-signal channel and this instance's grant channel.
    assert.deepStrictEqual(await connectionsOf(redisUrl!, prefix), [["commands", 0], ["subscriber", 2]])
  }, 60_000)
})

/** Holds the event loop, as a long GC pause or a process descheduled on a busy machine does. */
const stall = (ms: number) => {
  const end = performance.now() + ms
  while (performance.now() < end) { /* busy */ }
}

describe.skipIf(redisUrl === null)("RedisClient's command timeout", () => {
  const prefix = `${uniquePrefix()}`
  afterAll(() => Effect.runPromise(dropPrefix(redisUrl!, prefix)))

  it.live("a reply that arrived while the event loop was stalled past the timeout is a reply, not a timeout", () =>
    Effect.gen(function*() {
      const redis = yield* RedisClient.make({ url: redisUrl!, prefix, commandTimeoutMs: 100 })
      yield* redis.use("set", (client) => client.set(`${prefix}stalled`, "answered"))
      for (let i = 0; i < 6; i++) {
        // The loop is held three times the timeout: in the turn that sends the command (its write
        // waits for the turn's end), or once it is written, while the reply arrives.
        const reading = yield* Effect.forkChild(redis.use("get", (client) => client.get(`${prefix}stalled`)), { startImmediately: true })
        if (i % 2 === 0) stall(300)
        else setImmediate(() => stall(300))
        assert.strictEqual(yield* Fiber.join(reading), "answered")
      }
    }).pipe(Effect.scoped), 20_000)

  it.live("a command Redis does not answer within the timeout fails with a RedisError naming the operation", () =>
    Effect.gen(function*() {
      const redis = yield* RedisClient.make({ url: redisUrl!, prefix, commandTimeoutMs: 100 })
      // BLPOP on an empty list answers (null) only after 2 s: far past the timeout.
      const error = yield* Effect.flip(redis.use("wait", (client) => client.blpop(`${prefix}empty`, 2)))
      assert.strictEqual(error._tag, "RedisError")
      assert.strictEqual(error.operation, "wait")
      assert.strictEqual(error.message, "Command timed out")
    }).pipe(Effect.scoped), 20_000)

  it.live("once Redis has left a command unanswered for three deadlines, commands fail at once without being sent, until it answers again", () =>
    Effect.gen(function*() {
      const own = yield* Effect.acquireRelease(Effect.promise(() => startPrivateRedis()), (server) =>
        Effect.promise(async () => {
          server.resume()
          await server.stop()
        }))
      const redis = yield* RedisClient.make({ url: own.url, prefix, commandTimeoutMs: 1_000 })
      yield* redis.use("set", (client) => client.set(`${prefix}k`, "v"))
      own.pause()
      const unanswered = yield* Effect.flip(redis.use("first", (client) => client.get(`${prefix}k`)))
      assert.strictEqual(unanswered.message, "Command timed out")
      // One deadline of silence is a hiccup: the next command is still sent, and waits its deadline.
      const next = yield* Effect.flip(redis.use("next", (client) => client.get(`${prefix}k`)))
      assert.strictEqual(next.message, "Command timed out")
      assert.strictEqual(redis.roundTrips.get("next"), 1)
      // Three deadlines since the first was sent: the next command is not sent (nor counted as a
      // round trip) and fails at once.
      yield* Effect.sleep("1200 millis")
      let sent = false
      const refused = yield* Effect.flip(redis.use("second", (client) => {
        sent = true
        return client.get(`${prefix}k`)
      }))
      assert.strictEqual(refused.operation, "second")
      assert.match(refused.message, /^no answer from Redis for \d+ ms \(failing at once until it answers\)$/)
      assert.isFalse(sent)
      assert.isFalse(redis.roundTrips.has("second"))
      own.resume()
      // The PING that asks every 500 ms finds it answering: commands are sent again.
      const value = yield* redis.use("third", (client) => client.get(`${prefix}k`)).pipe(
        Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 100 })
      )
      assert.strictEqual(value, "v")
      assert.strictEqual(redis.roundTrips.get("first"), 1)
    }).pipe(Effect.scoped), 30_000)
})

describe.skipIf(redisUrl === null)("RedisClient's script bundles", () => {
  const prefix = `${uniquePrefix()}`
  afterAll(() => Effect.runPromise(dropPrefix(redisUrl!, prefix)))

  it.live("scripts issued in one turn run in order in one command, each with its own keys, arguments, answer and error", () =>
    Effect.gen(function*() {
      // A Redis of its own: its command counts are this test's alone.
      const own = yield* Effect.acquireRelease(Effect.promise(() => startPrivateRedis()), (server) => Effect.promise(() => server.stop()))
      const redis = yield* RedisClient.make({ url: own.url, prefix })
      /** EVAL and EVALSHA commands Redis has run so far (a NOSCRIPT answer included). */
      const scriptCommands = () =>
        redis.use("info", (client) => client.info("commandstats")).pipe(Effect.map((info) =>
          [...String(info).matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0)
        ))
      redis.defineScripts({
        tAppend: "return redis.call('APPEND', KEYS[1], ARGV[1])",
        tRead: "return { redis.call('GET', KEYS[1]), ARGV[1], #KEYS, #ARGV }",
        tNothing: "return nil",
        tBroken: "return redis.call('INCR', KEYS[1])"
      })
      const key = `${prefix}bundle`
      yield* redis.use("reset", (client) => client.del(key))
      const before = redis.roundTrips.get("tAppend") ?? 0
      const commandsBefore = yield* scriptCommands()
      const answers = yield* Effect.all([
        redis.useScript("tAppend", "tAppend", 1, [key, "a"]),
        Effect.result(redis.useScript("tBroken", "tBroken", 1, [key])),
        redis.useScript("tAppend", "tAppend", 1, [key, "b"]),
        redis.useScript("tNothing", "tNothing", 0, []),
        redis.useScript("tRead", "tRead", 1, [key, "x"])
      ], { concurrency: "unbounded" })
      const [first, broken, second, nothing, read] = answers
      assert.strictEqual(first, 1)
      // INCR of "a" fails alone, with Redis's error; the scripts after it still run.
      assert.isTrue(broken._tag === "Failure" && /not an integer/.test(broken.failure.message))
      assert.strictEqual(second, 2)
      assert.isNull(nothing)
      assert.deepStrictEqual(read, ["ab", "x", 1, 1])
      assert.strictEqual((redis.roundTrips.get("tAppend") ?? 0) - before, 2)
      // One command for the five: EVALSHA of the bundle (and EVAL after its first NOSCRIPT).
      assert.isAtMost((yield* scriptCommands()) - commandsBefore, 2)
    }).pipe(Effect.scoped), 20_000)
})

describe("RedisClient when Redis is down", () => {
  it.live("starts after the connect timeout, fails commands with a typed RedisError, logs each connection's errors once", () => {
    const logged: Array<string> = []
    const capture = Logger.make(({ message }) => {
      logged.push([message].flat().map(String).join(" "))
    })
    return Effect.gen(function*() {
      const redis = yield* RedisClient.make({ url: "redis://127.0.0.1:1", connectTimeoutMs: 200, prefix: "down:" })
      const error = yield* Effect.flip(redis.use("gate", (client) => client.get("x")))
      assert.strictEqual(error._tag, "RedisError")
      assert.strictEqual(error.operation, "gate")
      // A subscription registers; it is not in place, and says so instead of hanging.
      const subscribed = yield* redis.subscribe("down:channel", () => {})
      assert.isFalse(yield* subscribed)
      // ioredis retries every 200 ms–2 s meanwhile; each connection logs its error once per 10 s.
      yield* Effect.sleep("1 second")
      const errorLines = logged.filter((line) => line.startsWith("redis ") && line.includes(" connection: "))
      assert.deepStrictEqual(errorLines.map((line) => line.split(" ")[1]).sort(), ["commands", "subscriber"])
      assert.isTrue(logged.some((line) => line.startsWith("redis: not reachable at start")))
    }).pipe(Effect.scoped, Effect.provide(Logger.layer([capture])))
  }, 20_000)
})
