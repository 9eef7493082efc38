/**
 * An upstream that reads each request whole and never answers, like a model whose first token is
 * far off: for what the gateway holds while it waits, and how it ends a call its client left.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

export interface HoldingUpstream {
  readonly url: string
  /** Requests read whole, and connections closed since the start. */
  readonly seen: { received: number; closed: number }
  close(): Promise<void>
}

export const startHoldingUpstream = async (): Promise<HoldingUpstream> => {
  const seen = { received: 0, closed: 0 }
  const server = createServer((req) => {
    req.resume()
    req.on("end", () => seen.received++)
    req.socket.once("close", () => seen.closed++)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}
