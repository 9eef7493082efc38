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
import type { TokenPiece } from "./bpe.ts"

export type { TokenPiece } from "./bpe.ts"

export type TokenizerRequest =
  | { readonly id: number; readonly op: "count"; readonly texts: ReadonlyArray<string> }
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
  | { readonly op: "count"; readonly texts: ReadonlyArray<string> }
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
  if (thread === undefined || pending.size > 0) return false
  worker = undefined // before terminating: its exit is then not a failure
  void thread.terminate()
  return true
}

/** Sends one job and waits for its reply; interrupting cancels the job. A thread failure is a defect. */
const ask = <A>(job: Job, read: (reply: TokenizerReply) => A | undefined) =>
  Effect.callback<A>((resume) => {
    const thread = started()
    const id = ++nextId
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

/** The exact token count of each text, in order. */
export const countTexts = (texts: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<number>> =>
  texts.every((text) => text.length === 0)
    ? Effect.succeed(texts.map(() => 0))
    : ask({ op: "count", texts }, (reply) => ("counts" in reply ? reply.counts : undefined))

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
