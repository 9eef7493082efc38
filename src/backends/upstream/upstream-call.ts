/**
 * One upstream HTTP call on an undici pool, through `Pool.dispatch` with a handler of our own
 * rather than `Pool.request`.
 *
 * Why not `request`: with its handler layer (`RequestHandler`, an `AsyncResource`, a body
 * `Readable` and the promise around them) finished calls' objects outlived young-generation
 * collections and were promoted. Measured at 200 calls/s (`--trace-gc`, an undici client alone
 * against a fixed-answer server, two runs each): `request` grew the old generation by ~1.7 MB per
 * scavenge with 4–7 ms pauses; `dispatch` with a plain handler by 0.05–0.13 MB, with ~0.6–1.4 ms
 * pauses. In the gateway, bytes surviving a scavenge per non-streamed request went 27.2 → 20.5 KiB
 * (`bench/alloc-profile.ts --survivors`). Which reference kept them alive was not pinned down.
 *
 * - `callWhole` reads the whole answer as text (non-streamed calls and error bodies).
 * - `callStreamed` hands back the status and headers once they arrive, and the body as an async
 *   iterable of chunks that pauses the socket while the reader is behind (backpressure);
 *   `destroy()` aborts the call if the body is not fully read.
 * - An abort signal (an interrupted Effect) aborts the call at any point.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Readable } from "node:stream"
import type { Dispatcher } from "undici"

export interface UpstreamRequest {
  readonly path: string
  readonly method: "POST"
  readonly headers: Record<string, string>
  /** A string, or the chunks of a body serialized in slices (`upstream-body.ts`). */
  readonly body: string | Readable
}

export type UpstreamHeaders = IncomingHttpHeaders

export interface WholeResponse {
  readonly status: number
  readonly headers: UpstreamHeaders
  readonly text: string
}

type Controller = Dispatcher.DispatchController

const abortedError = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new Error("The upstream call was aborted")

/** Wires an abort signal to a call: before the call has a controller it fails the call, after it aborts it. */
const withSignal = (signal: AbortSignal | undefined, fail: (error: Error) => void) => {
  let controller: Controller | undefined
  let onAbort: (() => void) | undefined
  if (signal !== undefined) {
    onAbort = () => {
      const error = abortedError(signal)
      if (controller !== undefined) controller.abort(error)
      else fail(error)
    }
    signal.addEventListener("abort", onAbort, { once: true })
  }
  return {
    started: (c: Controller) => {
      controller = c
      if (signal?.aborted === true) c.abort(abortedError(signal))
    },
    done: () => {
      if (onAbort !== undefined) signal!.removeEventListener("abort", onAbort)
      onAbort = undefined
    }
  }
}

/** The status, headers and whole body text of one call. */
export const callWhole = (dispatcher: Dispatcher, request: UpstreamRequest, signal?: AbortSignal): Promise<WholeResponse> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(abortedError(signal))
    let status = 0
    let headers: UpstreamHeaders = {}
    const chunks: Array<Buffer> = []
    let settled = false
    const fail = (error: Error) => {
      if (settled) return
      settled = true
      abort.done()
      reject(error)
    }
    const abort = withSignal(signal, fail)
    dispatcher.dispatch(request, {
      onRequestStart: (controller) => abort.started(controller),
      onResponseStart: (_controller, statusCode, responseHeaders) => {
        if (statusCode < 200) return // informational (103 Early Hints…): the answer follows
        status = statusCode
        headers = responseHeaders
      },
      onResponseData: (_controller, chunk) => {
        chunks.push(chunk)
      },
      onResponseEnd: () => {
        if (settled) return
        settled = true
        abort.done()
        resolve({ status, headers, text: chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8") })
      },
      onResponseError: (_controller, error) => fail(error)
    })
  })

/** What one `read` of a streamed body gives: the next chunk, the end, or the call's failure. */
export type BodyRead =
  | { readonly _tag: "Chunk"; readonly chunk: Uint8Array }
  | { readonly _tag: "End" }
  | { readonly _tag: "Failed"; readonly error: Error }

/** A streamed answer's body: its chunks as they arrive, its remaining text, or given up. */
export interface StreamedBody extends AsyncIterable<Uint8Array> {
  /**
   * The next read, passed to `onRead` — at once when something is there, else when it arrives.
   * One read at a time. No promise per chunk: the stream stages run once per upstream read, and a
   * promise (with its microtasks) per read was a measurable part of a token's cost.
   */
  read(onRead: (result: BodyRead) => void): void
  /** The rest of the body as text (error answers). */
  text(): Promise<string>
  /** Aborts the call unless the body was read to its end; safe to call more than once. */
  destroy(): void
}

export interface StreamedResponse {
  readonly statusCode: number
  readonly headers: UpstreamHeaders
  readonly body: StreamedBody
}

/** Chunks buffered before the socket is paused until the reader catches up. */
const HIGH_WATER_CHUNKS = 16

/** Starts one call; resolves once the status and headers are in, with the body to read. */
export const callStreamed = (dispatcher: Dispatcher, request: UpstreamRequest, signal?: AbortSignal): Promise<StreamedResponse> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(abortedError(signal))
    let controller: Controller | undefined
    const buffered: Array<Buffer> = []
    let ended = false
    let failure: Error | undefined
    let responded = false
    let wake: (() => void) | undefined
    const notify = () => {
      const waiting = wake
      wake = undefined
      waiting?.()
    }
    const fail = (error: Error) => {
      abort.done()
      if (!responded) {
        responded = true
        return reject(error)
      }
      if (!ended && failure === undefined) failure = error
      notify()
    }
    const abort = withSignal(signal, fail)
    /** What a read gives now, or undefined when it has to wait. */
    const take = (): BodyRead | undefined => {
      if (buffered.length > 0) {
        // Whatever arrived since the last read, as one chunk (as a Node stream reads): the
        // stages downstream run once per chunk, not once per socket read.
        const chunk = buffered.length === 1 ? buffered[0]! : Buffer.concat(buffered)
        buffered.length = 0
        controller?.resume()
        return { _tag: "Chunk", chunk }
      }
      if (failure !== undefined) return { _tag: "Failed", error: failure }
      if (ended) return { _tag: "End" }
      return undefined
    }
    const read = (onRead: (result: BodyRead) => void) => {
      const now = take()
      if (now !== undefined) return onRead(now)
      wake = () => read(onRead)
    }
    const next = (): Promise<IteratorResult<Uint8Array>> =>
      new Promise((resolve, reject) =>
        read((result) =>
          result._tag === "Chunk"
            ? resolve({ done: false, value: result.chunk })
            : result._tag === "End"
            ? resolve({ done: true, value: undefined })
            : reject(result.error)
        )
      )
    const destroy = () => {
      abort.done()
      if (!ended && failure === undefined) {
        failure = new Error("The upstream response was given up")
        controller?.abort(failure)
      }
      buffered.length = 0
      notify()
    }
    const body: StreamedBody = {
      read,
      [Symbol.asyncIterator]: () => ({
        next,
        return: async () => {
          destroy()
          return { done: true, value: undefined }
        }
      }),
      text: async () => {
        const parts: Array<Uint8Array> = []
        for (;;) {
          const result = await next()
          if (result.done === true) break
          parts.push(result.value)
        }
        return Buffer.concat(parts).toString("utf8")
      },
      destroy
    }
    dispatcher.dispatch(request, {
      onRequestStart: (c) => {
        controller = c
        abort.started(c)
      },
      onResponseStart: (_c, statusCode, headers) => {
        if (statusCode < 200) return // informational (103 Early Hints…): the answer follows
        responded = true
        resolve({ statusCode, headers, body })
      },
      onResponseData: (c, chunk) => {
        buffered.push(chunk)
        if (buffered.length >= HIGH_WATER_CHUNKS) c.pause()
        notify()
      },
      onResponseEnd: () => {
        ended = true
        abort.done()
        notify()
      },
      onResponseError: (_c, error) => fail(error)
    })
  })
