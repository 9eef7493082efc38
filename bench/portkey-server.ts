/**
 * Starts Portkey's gateway (`@portkey-ai/gateway`, its own `build/start-server.js`, the package's
 * bin) in this process, with the same arguments (`--headless --port=N`).
 *
 * One fix-up, for streams: on start, `@hono/node-server` replaces the global `Response` with its
 * lightweight class. Portkey builds a streamed answer as `new Response(stream, upstreamResponse)`;
 * the lightweight class then keeps the upstream fetch response's *immutable* `Headers`, and
 * Portkey's next step (`headers.append`) throws `TypeError: immutable` — every streamed request
 * answers 500 "Something went wrong" (Portkey 1.15.2 with @hono/node-server 1.19.x, on Node 20 and
 * 24). Restoring the platform `Response` after start avoids the lightweight class entirely;
 * @hono/node-server serves platform Responses through its regular path. With
 * `PORTKEY_STOCK_RESPONSE=1` the global is left as Portkey sets it (non-streamed calls work that way).
 */
import { join } from "node:path"
import { pathToFileURL } from "node:url"

const platformResponse = globalThis.Response
const entry = pathToFileURL(join(import.meta.dirname, "..", "node_modules", "@portkey-ai", "gateway", "build", "start-server.js")).href
await import(entry)
if (process.env.PORTKEY_STOCK_RESPONSE !== "1") {
  Object.defineProperty(globalThis, "Response", { value: platformResponse, writable: true, configurable: true })
}
