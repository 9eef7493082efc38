/** A TCP port free on 127.0.0.1 right now (the OS picks it; a server of the test's own then binds it). */
import { createServer } from "node:net"

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
