/**
 * A TCP proxy that delays everything it forwards by `--delay-ms` each way: a Redis (or any
 * server) "across a network" on one machine, without `tc netem` (which would slow
 * the loopback for every process, the upstream and the load generator too). Order is kept: every
 * chunk of a direction waits the same time, and timers of equal delay fire in the order they were
 * set. On loopback a Redis round trip costs ~0.1 ms; a managed Redis in another zone, 0.5–1 ms —
 * where the number of round trips a request awaits shows. Node's timers fire on whole
 * milliseconds, so `--delay-ms 1` makes a round trip of 2–3 ms (`redis-cli -p 6390 --latency`
 * measured 2.8 ms on average on a slow VM, against 0.22 ms direct).
 *
 *   node bench/delay-proxy.ts [--listen 6390] [--target 127.0.0.1:6379] [--delay-ms 1]
 *   node bench/hot-path.ts --redis --env REDIS_URL=redis://127.0.0.1:6390
 */
import { connect, createServer, type Socket } from "node:net"
import { parseArgs } from "node:util"

export const startDelayProxy = async (options: { readonly listen: number; readonly target: string; readonly delayMs: number }) => {
  const [host, port] = options.target.split(":")
  const oneWay = options.delayMs
  const sockets = new Set<Socket>()
  const forward = (from: Socket, to: Socket) =>
    from.on("data", (data) => {
      setTimeout(() => to.write(data), oneWay)
    })
  const server = createServer((client) => {
    const upstream = connect(Number(port ?? 6379), host ?? "127.0.0.1")
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    sockets.add(client).add(upstream)
    forward(client, upstream)
    forward(upstream, client)
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      a.on("error", () => b.destroy())
      a.on("close", () => {
        sockets.delete(a)
        setTimeout(() => b.destroy(), oneWay)
      })
    }
  })
  await new Promise<void>((resolve) => server.listen(options.listen, "127.0.0.1", resolve))
  return {
    url: `redis://127.0.0.1:${options.listen}`,
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      listen: { type: "string", default: "6390" },
      target: { type: "string", default: "127.0.0.1:6379" },
      "delay-ms": { type: "string", default: "1" }
    }
  })
  const proxy = await startDelayProxy({ listen: Number(values.listen), target: values.target, delayMs: Number(values["delay-ms"]) })
  console.log(`delay proxy on ${proxy.url} → ${values.target}, +${values["delay-ms"]} ms each way`)
}
