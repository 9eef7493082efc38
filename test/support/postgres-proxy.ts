/**
 * A TCP proxy to PostgreSQL in the test's process, for faults between a gateway and its database:
 * `shut` cuts every connection and refuses new ones (a server gone); `freeze` stops forwarding in
 * both directions and keeps every socket open (a stalled server or a partition: no error, only
 * silence) until `thaw`, which forwards again and resets the connections that lost bytes meanwhile.
 * `delayConnections` holds each new connection's first bytes back for a while (a server slow to
 * accept and authenticate: the client's connect timeout covers both).
 */
import { connect, createServer, type Server, type Socket } from "node:net"

export interface PostgresProxy {
  readonly port: number
  /** The database URL `url` with its host and port replaced by the proxy's. */
  through(url: string): string
  freeze(): void
  thaw(): void
  /** From now on, each new connection's bytes wait `ms` before they are forwarded either way. */
  delayConnections(ms: number): void
  shut(): void
  close(): Promise<void>
}

export const startPostgresProxy = async (target: URL): Promise<PostgresProxy> => {
  let frozen = false
  let connectDelayMs = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    if (connectDelayMs > 0) {
      client.pause()
      const timer = setTimeout(() => client.resume(), connectDelayMs)
      client.once("close", () => clearTimeout(timer))
    }
    const upstream = connect(Number(target.port || 5432), target.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
      socket.on("error", () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
    client.on("data", (bytes) => frozen || upstream.write(bytes))
    upstream.on("data", (bytes) => frozen || client.write(bytes))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const destroyAll = () => {
    for (const socket of sockets) socket.destroy()
  }
  const port = (server.address() as { port: number }).port
  return {
    port,
    through: (url) => {
      const proxied = new URL(url)
      proxied.host = `127.0.0.1:${port}`
      return proxied.toString()
    },
    freeze: () => {
      frozen = true
    },
    thaw: () => {
      frozen = false
      destroyAll()
    },
    delayConnections: (ms) => {
      connectDelayMs = ms
    },
    shut: () => {
      server.close()
      destroyAll()
    },
    close: () => {
      destroyAll()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
