/**
 * The gateway's one Redis client (ioredis): one command connection and one subscriber connection,
 * shared by everything that uses Redis — the coordination counters (redis.ts), the capacity queues
 * (runtime/redis-capacity-queues.ts), the run-log signals (run-signals.ts) and the readiness probe.
 * Shaped like Effect's own `persistence/Redis` service (commands, scoped subscriptions, Lua
 * scripts), but on ioredis, whose pipelines and script commands the callers' one-round-trip paths
 * rely on, and with every subscription multiplexed on a single connection.
 *
 * Outages: the command connection has no offline queue and a command timeout, so while Redis is
 * down a command fails fast with `RedisError` instead of piling up; each caller decides what that
 * means (rate limits fail open, allowance fails closed, queue releases lapse by TTL). The
 * subscriber keeps its offline queue so a SUBSCRIBE waits for the connection, and ioredis
 * subscribes again after every reconnect. A Redis down at start is an outage like any later one,
 * not a crash: the layer waits `connectTimeoutMs` for it, then goes on with a warning. Connection
 * errors are logged through Effect's logger, at most once per 10 s per connection.
 *
 * A stalled Redis (connected, silent: a stopped process, a hung host, a partition that keeps the
 * socket) is told apart by a command that goes unanswered past its deadline. Once the oldest such
 * command was sent `SILENT_AFTER_DEADLINES` deadlines ago and nothing has answered since, commands
 * fail at once instead of each waiting out a deadline of its own, until Redis answers again (a
 * PING asks every `PROBE_EVERY_MS`): a call's admission tries up to three (the one-trip gate,
 * then each policy alone), so in a stall every call waited seconds for its 503 while the clients
 * piled up. A shorter hiccup (a slow command, a fork) is waited out as before.
 */
import { Context, Deferred, Effect, Latch, Layer, Schedule, Schema, type Scope } from "effect"
import type { Redis } from "ioredis"
import { Settings } from "../config/settings.ts"
import { makeScriptBatcher } from "./script-bundle.ts"
import { KEY_PREFIX } from "./types.ts"
import { KeyedSets } from "../util/keyed-sets.ts"
import { RepeatedFailure } from "../util/repeated-failure.ts"

/**
 * The key of a call's admission ticket: left by the metering script when the call is admitted,
 * taken by the capacity queue's first enqueue sent behind it (coordination/lua.ts GATE_AND_RESERVE).
 */
export const admissionTicketKey = (prefix: string, ticket: string) => `${prefix}adm:${ticket}`

/**
 * How long an untaken ticket lives: it is taken at once unless the enqueue went out first (then
 * the caller enqueues again after its admission and the ticket only waits to lapse).
 */
export const ADMISSION_TICKET_TTL_MS = 10_000

/** A Redis command failed (down, timed out, refused, or a script error). */
export class RedisError extends Schema.TaggedError<RedisError>()("RedisError", {
  /** What was being done, e.g. `gate` or `subscribe`. */
  operation: Schema.String,
  message: Schema.String
}) {}

export interface RedisClientOptions {
  readonly url: string
  /** Prefix of every key and channel (default `gw:`): gateways that share it share their state; tests use a unique one. */
  readonly prefix?: string | undefined
  /** A command without an answer after this long fails (default 1 s). */
  readonly commandTimeoutMs?: number | undefined
  /** How long to wait for the first connection, and a connection attempt (default 5 s). */
  readonly connectTimeoutMs?: number | undefined
}

export interface RedisClientShape {
  readonly prefix: string
  /**
   * The command connection, for what `use` runs: pipelines and the script commands defined with
   * `defineScripts`. Fails fast while Redis is down.
   */
  readonly client: Redis
  /**
   * Runs commands on the command connection — one round trip: a command, a script or a pipeline —
   * and counts it under `operation`; a rejection becomes a `RedisError` naming `operation`.
   */
  use<A>(operation: string, run: (client: Redis) => Promise<A>): Effect.Effect<A, RedisError>
  /**
   * Sends commands now and does not wait for the reply, for writes nobody needs the answer of
   * (a slot's release): counted like `use`; a failure is logged as `failed` says (except while Redis
   * is silent, which the client logs once). The command connection runs commands in the order they
   * were sent, so once any later command has answered, this one has run — a release sent before
   * the settle is done when the settle's reply arrives.
   */
  send(operation: string, run: (client: Redis) => Promise<unknown>, failed: (message: string) => string): void
  /**
   * `use` for one script defined with `defineScripts` (`keysAndArgs`: its `numKeys` keys, then its
   * arguments). The scripts issued in one turn go out as one command (script-bundle.ts).
   */
  useScript(operation: string, name: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>): Effect.Effect<unknown, RedisError>
  /** `send` for one script, batched as `useScript`'s. */
  sendScript(operation: string, name: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>, failed: (message: string) => string): void
  /** Round trips made through `use`, by operation, since start (`gateway_redis_round_trips_total`). */
  readonly roundTrips: ReadonlyMap<string, number>
  /**
   * Defines Lua scripts (name → source), for `useScript` (plain EVAL, then EVALSHA, commands:
   * script-bundle.ts) and as commands of the command connection for pipelines (ioredis
   * sends EVALSHA and falls back to EVAL once). Names must differ between callers.
   */
  defineScripts(sources: Readonly<Record<string, string>>): void
  /**
   * Calls `onMessage` with every message on `channel` while the scope is open. The listener is
   * registered at once; SUBSCRIBE is retried in the background until Redis answers. The returned
   * Effect tells whether the subscription is in place: true once it is, false if it is not
   * within the connect timeout, or at once while Redis is down (messages then arrive later).
   */
  subscribe(channel: string, onMessage: (message: string) => void): Effect.Effect<Effect.Effect<boolean>, never, Scope.Scope>
}

const ERROR_LOG_INTERVAL_MS = 10_000
const reconnectDelay = (attempt: number) => Math.min(attempt * 200, 2_000)
const messageOf = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** How many times a command's timeout starts over because the event loop stalled past it. */
const STALL_RESTARTS = 3

/** While a command is left unanswered, how often a PING asks whether Redis answers again. */
const PROBE_EVERY_MS = 500

/**
 * How many command deadlines Redis may stay silent before commands fail at once: as many as a
 * call's admission may try one after another, so a stall shorter than that still admits the call.
 */
const SILENT_AFTER_DEADLINES = 3

/** A command Redis did not answer within its deadline (as against a refusal or a closed connection). */
class CommandTimedOut extends Error {
  constructor() {
    super("Command timed out")
  }
}

/** A command not sent, because Redis has been silent too long (see the module comment). */
class RedisSilent extends Error {
  constructor(ms: number) {
    super(`no answer from Redis for ${Math.round(ms)} ms (failing at once until it answers)`)
  }
}

/**
 * `reply`, or a "Command timed out" failure once `ms` have passed without it while the event loop
 * ran. ioredis's own `commandTimeout` is a plain timer, and a stall of the event loop (a long GC, a
 * process descheduled on a busy machine) failed every command in flight though Redis had answered:
 * Node runs expired timers before it reads the sockets, and a command sent just before the stall
 * was not even written (its write waits for the turn's end, `coalesce`). The allowance then refused
 * those calls with 503. Here a timer that fires late by more than half its time says the loop was
 * stalled: the command gets its time again (at most `STALL_RESTARTS` times); and the verdict waits
 * for the next poll phase (`setImmediate`), by when a reply that arrived meanwhile has settled
 * `reply`. A command Redis never answers stays in ioredis's queue either way (its reply is matched
 * and dropped if it comes; a reconnect flushes it).
 */
const withinDeadline = <A>(reply: Promise<A>, ms: number): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    let settled = false
    let restarts = 0
    let due = performance.now() + ms
    const expire = () => {
      if (settled) return
      settled = true
      reject(new CommandTimedOut())
    }
    const check = () => {
      const now = performance.now()
      if (now - due > ms / 2 && restarts < STALL_RESTARTS) {
        restarts++
        due = now + ms
        timer = setTimeout(check, ms)
      } else setImmediate(expire)
    }
    let timer = setTimeout(check, ms)
    reply.then(
      (value) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(value)
      },
      (cause: unknown) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reject(cause)
      }
    )
  })

/** Waits for a connection's first "ready", at most `timeoutMs`; true when it came. */
const awaitReady = (connection: Redis, timeoutMs: number) =>
  Effect.callback<void>((resume) => {
    if (connection.status === "ready") return resume(Effect.void)
    const ready = () => resume(Effect.void)
    connection.once("ready", ready)
    return Effect.sync(() => connection.off("ready", ready))
  }).pipe(Effect.timeoutOption(timeoutMs), Effect.map((done) => done._tag === "Some"))

/**
 * QUIT when connected (replies in flight still arrive), else drop the socket: a command sent to a
 * connection that is down would wait in its offline queue for reconnects and hold up the shutdown.
 */
const close = (connection: Redis) =>
  connection.status === "ready"
    ? Effect.tryPromise(() => connection.quit()).pipe(
      Effect.timeout(1_000),
      Effect.catchCause(() => Effect.sync(() => connection.disconnect()))
    )
    : Effect.sync(() => connection.disconnect())

/** Opens both connections; they close with the scope (after every user of the client, which the layers' order ensures). */
const make = Effect.fnUntraced(function*(options: RedisClientOptions) {
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000
  const commandTimeoutMs = options.commandTimeoutMs ?? 1_000
  // Loaded here, not at start: a gateway without REDIS_URL never needs ioredis (~50 modules).
  const { Command, Redis } = yield* Effect.promise(() => import("ioredis"))
  const prefix = options.prefix ?? KEY_PREFIX
  const log = Effect.runForkWith(yield* Effect.context<never>())

  const open = (role: "commands" | "subscriber") =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const connection = new Redis(options.url, {
          ...(role === "commands"
            ? { enableOfflineQueue: false, maxRetriesPerRequest: 1 }
            : {}),
          connectTimeout: connectTimeoutMs,
          retryStrategy: reconnectDelay,
          // Named after the prefix, so CLIENT LIST shows which gateway holds which connection.
          connectionName: `${prefix}${role}`.replace(/[^\w:.-]/g, "_")
        })
        // Without a listener ioredis prints every failed reconnect; one line per 10 s is enough.
        const errors = new RepeatedFailure(`redis ${role} connection`, ERROR_LOG_INTERVAL_MS)
        connection.on("error", (error: Error) => log(errors.failed(error.message, undefined)))
        return connection
      }),
      close
    )

  const client = yield* open("commands")
  const subscriber = yield* open("subscriber")

  // channel → its listeners; one SUBSCRIBE per channel on the shared subscriber connection
  const listeners = new KeyedSets<string, (message: string) => void>()
  subscriber.on("message", (channel: string, message: string) => {
    for (const listener of listeners.get(channel)) {
      try {
        listener(message)
      } catch (cause) {
        log(Effect.logWarning(`redis: a listener on ${channel} threw: ${messageOf(cause)}`))
      }
    }
  })

  const roundTrips = new Map<string, number>()
  const scripts = makeScriptBatcher(client, Command)
  // Commands sent in one turn of the event loop (a slot's release and the settle after it) go out
  // in one socket write: each write is a syscall that costs more than the command's encoding. The
  // socket is corked at the turn's first command and uncorked on the next tick, after the turn's
  // scripts were sent (as one command); order is kept.
  let turnEnds = false
  let corked: { uncork?: () => void } | undefined
  const endTurn = () => {
    turnEnds = false
    scripts.flush()
    const socket = corked
    corked = undefined
    socket?.uncork?.()
  }
  const coalesce = () => {
    if (!turnEnds) {
      turnEnds = true
      process.nextTick(endTurn)
    }
    const socket = client.stream as { cork?: () => void; uncork?: () => void; writable?: boolean } | undefined
    if (corked !== undefined || socket?.cork === undefined || socket.writable !== true) return
    corked = socket
    socket.cork()
  }
  // When the oldest command Redis left unanswered past its deadline was sent; cleared by any answer.
  let unansweredSince: number | undefined
  const silentAfterMs = SILENT_AFTER_DEADLINES * commandTimeoutMs
  let failingFast = false
  let lastAnswerAt = 0
  const unanswered = yield* Latch.make(false)
  const heard = () => {
    lastAnswerAt = performance.now()
    if (unansweredSince === undefined) return
    if (failingFast) log(Effect.logInfo(`redis: answering again after ${Math.round(performance.now() - unansweredSince)} ms`))
    unansweredSince = undefined
    failingFast = false
    unanswered.closeUnsafe()
  }
  const watch = <A>(reply: Promise<A>): Promise<A> => {
    const sentAt = performance.now()
    reply.then(heard, (cause: unknown) => {
      // (Sent before an answer that came since: Redis was not silent from then on.)
      if (!(cause instanceof CommandTimedOut) || sentAt < lastAnswerAt) return
      unansweredSince = Math.min(unansweredSince ?? sentAt, sentAt)
      unanswered.openUnsafe()
    })
    return reply
  }
  const silentFor = () => {
    if (unansweredSince === undefined) return undefined
    const ms = performance.now() - unansweredSince
    if (ms < silentAfterMs) return undefined
    if (!failingFast) {
      failingFast = true
      log(Effect.logWarning(`redis: no answer for ${Math.round(ms)} ms; commands fail at once until it answers (a PING every ${PROBE_EVERY_MS} ms asks)`))
    }
    return ms
  }
  // While a command is left unanswered, asks Redis whether it answers again; sleeps on the latch otherwise.
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    yield* unanswered.await
    yield* Effect.sleep(PROBE_EVERY_MS)
    if (unansweredSince === undefined || client.status !== "ready") return
    yield* Effect.promise(() => watch(withinDeadline(client.ping(), commandTimeoutMs)).then(() => undefined, () => undefined))
  })))

  /**
   * Counts a round trip under `operation` and runs it (its write joins the turn's), within the
   * command timeout; while Redis is silent, fails at once without sending anything. A command that
   * is not a queued script first sends the scripts queued before it, so order is kept.
   */
  const issue = <A>(operation: string, run: (client: Redis) => Promise<A>, queuesScript = false): Promise<A> => {
    const silentMs = silentFor()
    if (silentMs !== undefined) return Promise.reject(new RedisSilent(silentMs))
    roundTrips.set(operation, (roundTrips.get(operation) ?? 0) + 1)
    coalesce()
    if (!queuesScript) scripts.flush()
    return watch(withinDeadline(run(client), commandTimeoutMs))
  }
  const use = <A>(operation: string, run: (client: Redis) => Promise<A>, queuesScript = false) =>
    Effect.tryPromise({
      try: () => issue(operation, run, queuesScript),
      catch: (cause) => new RedisError({ operation, message: messageOf(cause) })
    })

  const send = (operation: string, run: (client: Redis) => Promise<unknown>, failed: (message: string) => string, queuesScript = false) => {
    // Not sent while Redis is silent: that was logged once, not once per command.
    const warn = (cause: unknown) => (cause instanceof RedisSilent ? undefined : void log(Effect.logWarning(failed(messageOf(cause)))))
    try {
      issue(operation, run, queuesScript).catch(warn)
    } catch (cause) {
      warn(cause)
    }
  }
  const useScript = (operation: string, name: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>) =>
    use(operation, () => scripts.queue(name, numKeys, keysAndArgs), true)
  const sendScript = (operation: string, name: string, numKeys: number, keysAndArgs: ReadonlyArray<string | number>, failed: (message: string) => string) =>
    send(operation, () => scripts.queue(name, numKeys, keysAndArgs), failed, true)

  const subscribe = Effect.fnUntraced(function*(channel: string, onMessage: (message: string) => void) {
    yield* Effect.acquireRelease(
      Effect.sync(() => listeners.add(channel, onMessage)),
      () =>
        Effect.sync(() => {
          // The channel's last listener: not awaited, and only when connected (see `close`).
          if (listeners.delete(channel, onMessage) && subscriber.status === "ready") subscriber.unsubscribe(channel).catch(() => undefined)
        })
    )
    const subscribed = yield* Deferred.make<void>()
    // SUBSCRIBE is idempotent, so a second listener on a channel may send it again.
    yield* Effect.tryPromise({
      try: () => subscriber.subscribe(channel),
      catch: (cause) => new RedisError({ operation: `subscribe ${channel}`, message: messageOf(cause) })
    }).pipe(
      Effect.retry(Schedule.spaced(1_000)),
      Effect.andThen(Deferred.succeed(subscribed, undefined)),
      Effect.forkScoped
    )
    const inPlace = Deferred.await(subscribed).pipe(Effect.timeoutOption(connectTimeoutMs), Effect.map((done) => done._tag === "Some"))
    // While Redis is down (the client's start already waited for it once) nobody waits again.
    return Effect.suspend(() => (client.status === "ready" ? inPlace : Deferred.isDone(subscribed)))
  })

  // Wait for the first connection so early requests do not fail for nothing.
  if (!(yield* awaitReady(client, connectTimeoutMs))) {
    yield* Effect.logWarning("redis: not reachable at start; going on (callers fail open or closed until it is)")
  }

  return RedisClient.of({
    prefix,
    client,
    use: (operation, run) => use(operation, run),
    send: (operation, run, failed) => send(operation, run, failed),
    useScript,
    sendScript,
    roundTrips,
    defineScripts: scripts.define,
    subscribe
  })
})

export class RedisClient extends Context.Service<RedisClient, RedisClientShape>()("gateway/coordination/RedisClient") {
  /** A client of its own, closed with the scope (tests and embedders running several instances in one process). */
  static readonly make = make

  /** A client at `url`; the connections close with the layer. */
  static readonly layer = (options: RedisClientOptions) => Layer.effect(RedisClient, make(options))

  /**
   * The client at `REDIS_URL` under `GATEWAY_REDIS_PREFIX`. One value, so that every layer that
   * provides it (coordination, capacity queues, run signals, readiness) shares one client when
   * built together. Only provided where `REDIS_URL` is set.
   */
  static readonly layerFromSettings = Layer.effect(RedisClient, Effect.gen(function*() {
    const { redisUrl, redisPrefix } = yield* Settings
    if (redisUrl === undefined) return yield* Effect.die(new Error("RedisClient.layerFromSettings needs REDIS_URL"))
    return yield* make({ url: redisUrl, prefix: redisPrefix })
  }))
}
