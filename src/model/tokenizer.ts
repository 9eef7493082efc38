/**
 * Exact o200k_base token counts, computed off the event loop: in one worker thread per process
 * (`tokenizer-worker.ts`), started at the first call — a gateway that never needs an exact count
 * never loads the tables (~70 MiB, 200–370 ms of loading that would stall every client).
 *
 * Who needs the exact count: `count_tokens` (the count is the answer), the simulator (its usage
 * and output pieces) and usage estimates for a call whose upstream reported none. Metering's
 * reservation does not: it uses `token-bound.ts`.
 *
 * Why a worker rather than slices on the event loop (measured on this 2-core machine): loading
 * the tables cannot be sliced (one module evaluation, 200–370 ms); a round trip costs ~75 µs and
 * handing over 1 MiB of text ~0.2 ms (32 MiB: ~17 ms); the worker serves jobs in turns (see
 * there), so a huge count cannot delay a small one by more than a few ms.
 *
 * A process-wide singleton like a connection pool: every backend, route and test in the process
 * shares it. Interrupting a call cancels its job. The thread does not keep the process alive.
 */
import { Effect } from "effect"
import { Worker } from "node:worker_threads"
import { gatheredSlices, stringSlices } from "../util/slices.ts"
import type { TokenPiece } from "./bpe.ts"

export type { TokenPiece } from "./bpe.ts"

export type TokenizerRequest =
  /** `parted`: the texts at these indexes came before in `part` messages (in `texts`, empty). */
  | { readonly id: number; readonly op: "count"; readonly texts: ReadonlyArray<string>; readonly parted?: ReadonlyArray<number> }
  /** The next part of text `index` of the count job `id` that follows. */
  | { readonly id: number; readonly op: "part"; readonly index: number; readonly text: string }
  | { readonly id: number; readonly op: "pieces"; readonly text: string; readonly limit: number }
  | { readonly id: number; readonly op: "cancel" }

export type TokenizerReply =
  | { readonly id: number; readonly counts: ReadonlyArray<number> }
  | { readonly id: number; readonly pieces: { readonly texts: ReadonlyArray<string>; readonly tokens: ReadonlyArray<number>; readonly cut: boolean } }
  | { readonly id: number; readonly error: string }

/** A text's first token pieces, up to a token limit. */
export interface TakenPieces {
  /** Pieces concatenating to a prefix of the text, whole characters only, at most `limit` tokens. */
  readonly pieces: ReadonlyArray<TokenPiece>
  /** True when the text did not fit in the limit. */
  readonly cut: boolean
}

let worker: Worker | undefined
let nextId = 0
const pending = new Map<number, (reply: TokenizerReply) => void>()
/** Counts whose texts are still being sent in parts (not pending yet). */
let partsInFlight = 0

const failAll = (reason: string) => {
  worker = undefined
  const waiting = [...pending.values()]
  pending.clear()
  for (const resume of waiting) resume({ id: -1, error: reason })
}

const started = (): Worker => {
  if (worker !== undefined) return worker
  const thread = new Worker(new URL("./tokenizer-worker.ts", import.meta.url))
  thread.on("message", (reply: TokenizerReply) => {
    const resume = pending.get(reply.id)
    if (resume === undefined) return
    pending.delete(reply.id)
    if (pending.size === 0) thread.unref()
    resume(reply)
  })
  thread.on("error", (error) => failAll(`the tokenizer thread failed: ${String(error)}`))
  thread.on("exit", (code) => {
    if (worker === thread) failAll(`the tokenizer thread exited with code ${code}`)
  })
  thread.unref()
  worker = thread
  return thread
}

type Job =
  | { readonly op: "count"; readonly texts: ReadonlyArray<string>; readonly parted?: ReadonlyArray<number> }
  | { readonly op: "pieces"; readonly text: string; readonly limit: number }

/**
 * Starts the thread (and its table loading) now, for a process that will need exact counts
 * anyway (a simulator backend): the first request then does not wait for the tables.
 */
export const startTokenizer = (): void => {
  started()
}

/**
 * Stops the thread if it has no job, giving its tables' memory back (~70 MiB); the next call starts
 * it again. For a server gone quiet (`util/heap-trim.ts`): a simulator backend counts every call,
 * so its process starts the thread at once and would otherwise hold it for good. True if stopped.
 */
export const stopTokenizerIfIdle = (): boolean => {
  const thread = worker
  if (thread === undefined || pending.size > 0 || partsInFlight > 0) return false
  worker = undefined // before terminating: its exit is then not a failure
  void thread.terminate()
  return true
}

/** Sends one job and waits for its reply; interrupting cancels the job. A thread failure is a defect. */
const ask = <A>(job: Job, read: (reply: TokenizerReply) => A | undefined, id = ++nextId) =>
  Effect.callback<A>((resume) => {
    const thread = started()
    pending.set(id, (reply) => {
      if ("error" in reply) return resume(Effect.die(new Error(reply.error)))
      const value = read(reply)
      resume(value === undefined ? Effect.die(new Error("the tokenizer thread gave an unexpected reply")) : Effect.succeed(value))
    })
    thread.ref() // a pending count keeps the process alive
    thread.postMessage({ ...job, id })
    return Effect.sync(() => {
      if (!pending.delete(id)) return
      if (pending.size === 0) thread.unref()
      thread.postMessage({ op: "cancel", id } satisfies TokenizerRequest)
    })
  })

/**
 * A text given as the pieces it was made in (a large schema's JSON, made in slices): it is sent to
 * the thread in parts and joined there, never on the gateway's event loop, where the join of a
 * 16 MiB text (and the collection it set off) took tens of milliseconds.
 */
export class TextPieces {
  readonly pieces: ReadonlyArray<string>
  constructor(pieces: ReadonlyArray<string>) {
    this.pieces = pieces
  }
}

/** A text to count: a string, or its pieces. */
export type Text = string | TextPieces

/**
 * Above this many characters a text goes to the thread in parts of about this size, a message per
 * turn of the event loop: handing over a 16 MiB string in one message held the loop 30–70 ms, and
 * a 1 Mi-character part (gathered from its pieces, then copied into the message) 10–20 ms on a
 * slow VM, most of it page faults on the fresh memory.
 */
const PART_CHARS = 256 * 1024

/** A text's parts to send, each at most PART_CHARS: a long string's slices, or its pieces gathered. */
function* partsOf(text: Text): Generator<string> {
  let sent = false
  for (const part of typeof text === "string" ? stringSlices(text, PART_CHARS) : gatheredSlices(text.pieces, PART_CHARS)) {
    sent = true
    yield part
  }
  // At least one part, so the thread knows the text (an empty one is a part too).
  if (!sent) yield ""
}

const isEmpty = (text: Text) => typeof text === "string" ? text.length === 0 : text.pieces.every((piece) => piece.length === 0)
const readCounts = (reply: TokenizerReply) => ("counts" in reply ? reply.counts : undefined)

/** The exact token count of each text, in order. */
export const countTexts = (texts: ReadonlyArray<Text>): Effect.Effect<ReadonlyArray<number>> =>
  Effect.suspend(() => {
    if (texts.every(isEmpty)) return Effect.succeed(texts.map(() => 0))
    const parted = texts.flatMap((text, index) => typeof text !== "string" || text.length > PART_CHARS ? [index] : [])
    if (parted.length === 0) return ask({ op: "count", texts: texts as ReadonlyArray<string> }, readCounts)
    const id = ++nextId
    const post = (request: TokenizerRequest) => started().postMessage(request)
    const sendParts = Effect.forEach(parted, (index) =>
      Effect.forEach(partsOf(texts[index]!), (text) =>
        Effect.andThen(Effect.sync(() => post({ id, op: "part", index, text })), Effect.yieldNow), { discard: true }), { discard: true })
    const whole = texts.map((text, index) => parted.includes(index) ? "" : text as string)
    // While parts are on their way the job is not pending yet: the count keeps the thread alive.
    partsInFlight++
    return sendParts.pipe(
      Effect.onInterrupt(() => Effect.sync(() => post({ id, op: "cancel" }))),
      Effect.ensuring(Effect.sync(() => void partsInFlight--)),
      Effect.andThen(ask({ op: "count", texts: whole, parted }, readCounts, id))
    )
  })

/** The exact token count of a text. */
export const countText = (text: string): Effect.Effect<number> => Effect.map(countTexts([text]), (counts) => counts[0])

/**
 * The text cut at its token boundaries, up to `limit` tokens (see bpe.ts `piecesOfIds`): used to
 * stream output token by token and to cut it at an exact token count. Only the text up to the
 * limit is tokenized.
 */
export const takeTokenPieces = (text: string, limit: number): Effect.Effect<TakenPieces> =>
  text.length === 0
    ? Effect.succeed({ pieces: [], cut: false })
    : ask({ op: "pieces", text, limit: Math.max(0, Math.floor(limit)) }, (reply) =>
      "pieces" in reply
        ? { pieces: reply.pieces.texts.map((piece, i) => ({ text: piece, tokens: reply.pieces.tokens[i] })), cut: reply.pieces.cut }
        : undefined)
