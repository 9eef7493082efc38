/**
 * A request body that stops arriving must not hold a request open for ever. On the gateway's own
 * Node server the connection's idle timer does this (`gateway.ts`); behind the fetch-style
 * handler the host owns the connection, so the handler watches the body stream itself: when no
 * chunk arrives for `GATEWAY_BODY_IDLE_TIMEOUT_MS`, reading fails with `BodyStalled`, which the
 * body reader answers with 408 (`body.ts`). Only the request side is bounded: the response of a
 * queued request or a stream may take as long as it takes.
 */

/** The error a stalled body stream fails with. */
export class BodyStalled extends Error {
  readonly idleMs: number
  constructor(idleMs: number) {
    super(`no request body bytes arrived for ${idleMs} ms`)
    this.name = "BodyStalled"
    this.idleMs = idleMs
  }
}

/** The `BodyStalled` that `cause` is or wraps, if any. */
export const findBodyStalled = (cause: unknown): BodyStalled | undefined => {
  for (let c = cause, i = 0; c !== undefined && c !== null && i < 8; c = (c as { cause?: unknown }).cause, i++) {
    if (c instanceof BodyStalled) return c
  }
  return undefined
}

/** The body stream, failing with `BodyStalled` after `idleMs()` without a chunk. */
const idleGuarded = (body: ReadableStream<Uint8Array>, idleMs: () => number): ReadableStream<Uint8Array> => {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    pull: (controller) =>
      new Promise<void>((resolve) => {
        let settled = false
        const settle = (action: () => void) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          action()
          resolve()
        }
        const ms = idleMs()
        const timer = setTimeout(() =>
          settle(() => {
            controller.error(new BodyStalled(ms))
            reader.cancel(new BodyStalled(ms)).catch(() => undefined)
          }), ms)
        reader.read().then(
          ({ done, value }) => settle(() => (done ? controller.close() : controller.enqueue(value))),
          (error) => settle(() => controller.error(error))
        )
      }),
    cancel: (reason) => reader.cancel(reason)
  })
}

/** The same request, its body (if any) failing once it stalls for `idleMs()`. */
export const withBodyIdleTimeout = (request: Request, idleMs: () => number): Request =>
  request.body === null
    ? request
    : new Request(request, { body: idleGuarded(request.body, idleMs), duplex: "half" } as RequestInit)
