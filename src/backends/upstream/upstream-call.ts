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
 * - `callWhole` reads the whole answer's bytes (non-streamed calls and error bodies).
 * - `callStreamed` hands back the status and headers once they arrive, and the body as an async
 *   iterable of chunks that pauses the socket while the reader is behind (backpressure);
 *   `destroy()` aborts the call if the body is not fully read.
 * - An abort signal (an interrupted Effect) aborts the call until the body is first read; from
 *   then on whoever reads the body ends the call with `destroy()` (`destroyBody`, on its scope).
 */
import { Effect } from "effect"
import { type BackendError, backendErrorFromStatus } from "../backend.ts"
import { KEY_TOO_LONG, LARGE_BODY_BYTES } from "../../util/json-limits.ts"
import { slicedJsonParser } from "../../util/sliced-json.ts"
import { InvalidRequest } from "../../errors.ts"
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

type UpstreamHeaders = IncomingHttpHeaders

export interface WholeResponse {
  readonly status: number
  readonly headers: UpstreamHeaders
  /** The body's bytes as they arrived (`bodyText`, `parseWholeJson`, `errorText` read them). */
  readonly chunks: ReadonlyArray<Buffer>
  readonly bytes: number
}

/** A whole answer's body as text. */
export const bodyText = (answer: WholeResponse): string =>
  answer.chunks.length === 1 ? answer.chunks[0]!.toString("utf8") : Buffer.concat(answer.chunks, answer.bytes).toString("utf8")

/** The most of an error body read: its message is at its start, and no more is shown. */
const ERROR_TEXT_BYTES = 64 * 1024

/**
 * An error answer's text, its first `ERROR_TEXT_BYTES` only: an error body as large as a whole
 * answer may be (32 MiB) is never decoded or parsed whole on the event loop for a message.
 */
export const errorText = (answer: WholeResponse): string => {
  if (answer.bytes <= ERROR_TEXT_BYTES) return bodyText(answer)
  const head: Array<Buffer> = []
  for (let taken = 0; taken < ERROR_TEXT_BYTES && head.length < answer.chunks.length;) {
    const chunk = answer.chunks[head.length]!
    head.push(chunk)
    taken += chunk.length
  }
  return Buffer.concat(head).subarray(0, ERROR_TEXT_BYTES).toString("utf8")
}

/** The upstream's whole answer was not one JSON document. */
export const notJson = () => backendErrorFromStatus(502, "The upstream answered with a body that is not JSON")

/**
 * The most JSON values a whole answer may hold: far above what a model answers (a long answer with
 * `logprobs` and 20 alternatives per token for 8k tokens is ~0.7M), and what bounds the value the
 * parse builds. Built from a 30 MiB answer of tiny values (15M of them), that value alone made
 * V8's full collections pause the event loop 2–3 s on a slow VM, however the parse was sliced.
 */
export const MAX_ANSWER_VALUES = 1_000_000
const tooManyValues = (limit: number) => backendErrorFromStatus(502, `The upstream's answer holds more than ${limit} JSON values`)
/** The parser's refusal past the value limit, told apart from a malformed body by identity. */
const PAST_VALUE_LIMIT = new InvalidRequest({ message: "more JSON values than an answer may hold" })
/** The parser's refusal of a key past `MAX_JSON_KEY_CHARS` (one V8 would hash and copy in one step), by identity. */
const PAST_KEY_LIMIT = new InvalidRequest({ message: KEY_TOO_LONG })
const keyTooLong = () => backendErrorFromStatus(502, `The upstream's answer has ${KEY_TOO_LONG}`)

/**
 * A whole answer's JSON value. A small one (up to `LARGE_BODY_BYTES`, as for request bodies) is
 * `JSON.parse`d at once; a large one is parsed in slices that yield to the event loop
 * (`util/sliced-json.ts`), from its chunks as they arrived, with no copy of the whole: `JSON.parse`
 * of a 30 MiB answer of tiny values (a `logprobs` list) held every other client for 1.3–1.5 s on a
 * slow VM. No limit on depth here (the parser keeps its own stack; what is passed on is bounded
 * where it is taken: tool inputs, blocks); at most `MAX_ANSWER_VALUES` values, and no key longer
 * than a request's may be (`MAX_JSON_KEY_CHARS`). A small answer is within all of them by its size.
 */
export const parseWholeJson = (answer: WholeResponse, maxValues: number = MAX_ANSWER_VALUES): Effect.Effect<unknown, BackendError> => {
  if (answer.bytes <= LARGE_BODY_BYTES) {
    try {
      return Effect.succeed(JSON.parse(bodyText(answer)) as unknown)
    } catch {
      return Effect.fail(notJson())
    }
  }
  return Effect.suspend(() => {
    const parser = slicedJsonParser({ maxDepth: Number.POSITIVE_INFINITY, maxValues, tooMany: () => PAST_VALUE_LIMIT, keyTooLong: () => PAST_KEY_LIMIT })
    return Effect.forEach(answer.chunks, parser.feed, { discard: true }).pipe(
      Effect.andThen(parser.end()),
      Effect.flatMap((value) => value === undefined ? Effect.fail(notJson()) : Effect.succeed(value)),
      Effect.catchTag("InvalidRequest", (refusal) =>
        Effect.fail(refusal === PAST_VALUE_LIMIT ? tooManyValues(maxValues) : refusal === PAST_KEY_LIMIT ? keyTooLong() : notJson()))
    )
  })
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

/**
 * The largest whole (non-streamed) answer read, in bytes: far above any model's answer (a long
 * completion is ~100 KB, one with base64 audio a few MB), and a bound on what a broken or hostile
 * upstream can make the gateway hold and parse on its event loop.
 */
export const MAX_WHOLE_ANSWER_BYTES = 32 * 1024 * 1024

/** An upstream's whole answer outgrew `MAX_WHOLE_ANSWER_BYTES`: the call is aborted. */
export class UpstreamAnswerTooLarge extends Error {
  constructor() {
    super(`the upstream's answer is larger than ${MAX_WHOLE_ANSWER_BYTES} bytes`)
  }
}

/** The status, headers and whole body text of one call (at most `MAX_WHOLE_ANSWER_BYTES`). */
export const callWhole = (dispatcher: Dispatcher, request: UpstreamRequest, signal?: AbortSignal): Promise<WholeResponse> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(abortedError(signal))
    let status = 0
    let headers: UpstreamHeaders = {}
    const chunks: Array<Buffer> = []
    let bytes = 0
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
      onResponseData: (controller, chunk) => {
        if (settled) return
        bytes += chunk.length
        if (bytes > MAX_WHOLE_ANSWER_BYTES) {
          chunks.length = 0
          const error = new UpstreamAnswerTooLarge()
          fail(error)
          controller.abort(error)
          return
        }
        chunks.push(chunk)
      },
      onResponseEnd: () => {
        if (settled) return
        settled = true
        abort.done()
        resolve({ status, headers, chunks, bytes })
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

/**
 * One streamed call: undici's handler and the body it feeds, as one object. An open stream holds
 * it for as long as it lasts, so its state is fields and its steps are methods (shared by every
 * call) rather than a closure each over a shared scope (17 closures per open stream).
 */
class StreamedCall implements StreamedBody, Dispatcher.DispatchHandler {
  private controller: Controller | undefined
  private readonly buffered: Array<Buffer> = []
  private ended = false
  private failure: Error | undefined
  private responded = false
  /** The read waiting for the next chunk, the end or a failure. */
  private waiting: ((result: BodyRead) => void) | undefined
  private resolve: ((response: StreamedResponse) => void) | undefined
  private reject: ((error: Error) => void) | undefined
  /** Until the body's first read (see `read`). */
  private signal: AbortSignal | undefined
  private onAbort: (() => void) | undefined

  constructor(signal: AbortSignal | undefined, resolve: (response: StreamedResponse) => void, reject: (error: Error) => void) {
    this.signal = signal
    this.resolve = resolve
    this.reject = reject
    if (signal !== undefined) {
      // Before the call has a controller an abort fails the call; after, it aborts it.
      this.onAbort = () => {
        const error = abortedError(signal)
        if (this.controller !== undefined) this.controller.abort(error)
        else this.fail(error)
      }
      signal.addEventListener("abort", this.onAbort, { once: true })
    }
  }

  private unlisten() {
    if (this.onAbort !== undefined) this.signal!.removeEventListener("abort", this.onAbort)
    this.onAbort = undefined
    this.signal = undefined
  }

  private fail(error: Error) {
    this.unlisten()
    if (!this.responded) {
      this.responded = true
      const reject = this.reject
      this.resolve = this.reject = undefined
      return reject?.(error)
    }
    if (!this.ended && this.failure === undefined) this.failure = error
    this.notify()
  }

  private notify() {
    const onRead = this.waiting
    if (onRead === undefined) return
    const now = this.take()
    if (now === undefined) return
    this.waiting = undefined
    onRead(now)
  }

  /** What a read gives now, or undefined when it has to wait. */
  private take(): BodyRead | undefined {
    if (this.buffered.length > 0) {
      // Whatever arrived since the last read, as one chunk (as a Node stream reads): the stages
      // downstream run once per chunk, not once per socket read.
      const chunk = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered)
      this.buffered.length = 0
      this.controller?.resume()
      return { _tag: "Chunk", chunk }
    }
    if (this.failure !== undefined) return { _tag: "Failed", error: this.failure }
    if (this.ended) return { _tag: "End" }
    return undefined
  }

  read(onRead: (result: BodyRead) => void): void {
    // The signal is the caller's wait for the answer (an interrupted Effect.tryPromise aborts it).
    // A read means the body was taken — whoever reads now ends the call with `destroy` — so an
    // open stream need not keep the signal and its listener (~0.4 KiB).
    if (this.onAbort !== undefined) this.unlisten()
    const now = this.take()
    if (now !== undefined) return onRead(now)
    this.waiting = onRead
  }

  private next(): Promise<IteratorResult<Uint8Array>> {
    return new Promise((resolve, reject) =>
      this.read((result) =>
        result._tag === "Chunk"
          ? resolve({ done: false, value: result.chunk })
          : result._tag === "End"
          ? resolve({ done: true, value: undefined })
          : reject(result.error)
      )
    )
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    return {
      next: () => this.next(),
      return: async () => {
        this.destroy()
        return { done: true, value: undefined }
      }
    }
  }

  async text(): Promise<string> {
    const parts: Array<Uint8Array> = []
    for (;;) {
      const result = await this.next()
      if (result.done === true) break
      parts.push(result.value)
    }
    return Buffer.concat(parts).toString("utf8")
  }

  destroy(): void {
    this.unlisten()
    if (!this.ended && this.failure === undefined) {
      this.failure = new Error("The upstream response was given up")
      this.controller?.abort(this.failure)
    }
    this.buffered.length = 0
    this.notify()
  }

  // ---- undici's handler ----

  onRequestStart(controller: Controller): void {
    this.controller = controller
    if (this.signal?.aborted === true) controller.abort(abortedError(this.signal))
  }

  onResponseStart(controller: Controller, statusCode: number, headers: UpstreamHeaders): void {
    // The controller (kept for pause, resume and abort while the answer streams) also keeps the
    // raw header lines undici parsed `headers` from: ~18 Buffers, ~2 KiB per open stream, unused.
    controller.rawHeaders = null
    if (statusCode < 200) return // informational (103 Early Hints…): the answer follows
    this.responded = true
    const resolve = this.resolve
    this.resolve = this.reject = undefined
    resolve?.({ statusCode, headers, body: this })
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.buffered.push(chunk)
    if (this.buffered.length >= HIGH_WATER_CHUNKS) controller.pause()
    this.notify()
  }

  onResponseEnd(): void {
    this.ended = true
    this.unlisten()
    this.notify()
  }

  onResponseError(_controller: Controller, error: Error): void {
    this.fail(error)
  }
}

/**
 * A streamed call's release (with `acquireInterruptible`, which calls this once the headers are in):
 * a body not read to its end aborts the call. It closes over the body alone, not the response
 * (whose headers an open stream would keep), and is made at module level: a closure written beside
 * the call would hold that call's scope (the call, with its request body) for as long as the
 * stream stays open.
 */
export const destroyBody = (response: StreamedResponse) => {
  const body = response.body
  return () => Effect.sync(() => body.destroy())
}

/** Starts one call; resolves once the status and headers are in, with the body to read. */
export const callStreamed = (dispatcher: Dispatcher, request: UpstreamRequest, signal?: AbortSignal): Promise<StreamedResponse> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(abortedError(signal))
    dispatcher.dispatch(request, new StreamedCall(signal, resolve, reject))
  })
