/**
 * Preloaded into a gateway (or the bare or floor proxy) under test (`bench/hot-path.ts --timeline
 * FILE` adds it with `--import`): records, on the main thread, when each step of every request
 * happens — its head and body read, every Redis command issued, written, answered, the upstream
 * call created, its head sent, its bytes written to the upstream's socket (named by
 * `BENCH_UPSTREAM_URL`) and the upstream answer's first bytes read, that answer's head, each body
 * chunk and its end received, our answer's head, each write and its end
 * written (a stream's first token: `up-chunk` → `res-head` → `res-write`) — with the event loop's idle
 * time so far (`eventLoopUtilization`: time spent waiting in the poll phase). `bench/request-timeline.ts`
 * turns that into a median timeline of back-to-back requests: where a request waits (idle grows)
 * and where it works (idle stands still), which a CPU profile alone cannot tell apart.
 *
 * Times are `process.hrtime` microseconds. Only node's own hooks are used (prototype patches on
 * node:http, node:net and ioredis, undici's diagnostics channels): the gateway knows nothing of it.
 * Costs ~1 µs per event; written to `BENCH_TIMELINE_FILE` when the process exits (SIGTERM included).
 */
import { subscribe } from "node:diagnostics_channel"
import { writeFileSync } from "node:fs"
import http from "node:http"
import net from "node:net"
import { performance } from "node:perf_hooks"
import { isMainThread } from "node:worker_threads"

/** One step: [µs, what, the loop's idle µs so far]. */
export type TimelineEvent = readonly [number, string, number]

const KEEP = 400_000

if (isMainThread && process.env.BENCH_TIMELINE_FILE !== undefined) {
  const file = process.env.BENCH_TIMELINE_FILE
  const redisPort = Number(new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379").port || 6379)
  let events: Array<TimelineEvent> = []
  const note = (what: string) => {
    events.push([Number(process.hrtime.bigint() / 1000n), what, performance.eventLoopUtilization().idle * 1000])
    if (events.length > 2 * KEEP) events = events.slice(-KEEP)
  }

  const serverEmit = http.Server.prototype.emit
  http.Server.prototype.emit = function(this: http.Server, event: string | symbol, ...args: Array<unknown>) {
    if (event === "request") {
      note("in")
      const [request, response] = args as [http.IncomingMessage, http.ServerResponse]
      request.once("end", () => note("body"))
      response.once("finish", () => note("finish"))
    }
    return (serverEmit as (...a: Array<unknown>) => boolean).call(this, event, ...args)
  } as typeof serverEmit
  /** Notes `step` each time the answer's `method` is called, before it runs. */
  const noteCalls = (method: "writeHead" | "write" | "end", step: string) => {
    const prototype = http.ServerResponse.prototype as unknown as Record<string, (...a: Array<unknown>) => unknown>
    const original = prototype[method]!
    prototype[method] = function(this: http.ServerResponse, ...args: Array<unknown>) {
      note(step)
      return original.apply(this, args)
    }
  }
  noteCalls("writeHead", "res-head")
  noteCalls("write", "res-write")
  noteCalls("end", "res-end")

  // The upstream's socket too (when `BENCH_UPSTREAM_URL` names it): when the call's bytes are
  // written (`up-write`; `up-uncork` when a corked write is let go) and its answer's bytes arrive
  // (`up-data`), beside undici's own view of the call.
  const upstreamPort = process.env.BENCH_UPSTREAM_URL === undefined ? -1 : Number(new URL(process.env.BENCH_UPSTREAM_URL).port)
  const socketEmit = net.Socket.prototype.emit
  net.Socket.prototype.emit = function(this: net.Socket, event: string | symbol, ...args: Array<unknown>) {
    if (event === "data" && this.remotePort === redisPort) note("redis-data")
    else if (event === "data" && this.remotePort === upstreamPort) note("up-data")
    return (socketEmit as (...a: Array<unknown>) => boolean).call(this, event, ...args)
  } as typeof socketEmit
  const socketWrite = net.Socket.prototype.write
  net.Socket.prototype.write = function(this: net.Socket, ...args: Array<unknown>) {
    if (this.remotePort === redisPort) note("redis-write")
    else if (this.remotePort === upstreamPort) note(this.writableCorked > 0 ? "up-write-corked" : "up-write")
    return (socketWrite as (...a: Array<unknown>) => boolean).apply(this, args)
  } as typeof socketWrite
  const socketUncork = net.Socket.prototype.uncork
  net.Socket.prototype.uncork = function(this: net.Socket) {
    if (this.remotePort === upstreamPort && this.writableCorked === 1) note("up-uncork")
    return socketUncork.call(this)
  }

  if (process.env.REDIS_URL !== undefined) {
    // (Loaded only for a gateway on Redis, as the gateway itself does.)
    const { Redis } = await import("ioredis")
    const sendCommand = Redis.prototype.sendCommand
    Redis.prototype.sendCommand = function(this: InstanceType<typeof Redis>, ...args: Array<unknown>) {
      const command = args[0] as { readonly name?: string; readonly promise?: Promise<unknown> }
      const name = command.name ?? "?"
      note(`redis-send:${name}`)
      command.promise?.then(() => note(`redis-reply:${name}`), () => note(`redis-reply:${name}`))
      return (sendCommand as (...a: Array<unknown>) => unknown).apply(this, args)
    } as typeof sendCommand
  }

  subscribe("undici:request:create", () => note("up-create"))
  subscribe("undici:client:sendHeaders", () => note("up-sent"))
  subscribe("undici:request:headers", () => note("up-head"))
  subscribe("undici:request:bodyChunkReceived", () => note("up-chunk"))
  subscribe("undici:request:trailers", () => note("up-end"))

  const write = () => writeFileSync(file, JSON.stringify(events.slice(-KEEP)))
  process.on("exit", write)
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.prependListener(signal, write)
}
