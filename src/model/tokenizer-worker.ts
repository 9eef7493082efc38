/**
 * The tokenizer worker thread (started by `tokenizer.ts` at the first exact count): it owns the
 * o200k tables, so loading them (~200–370 ms) and counting never run on the gateway's event loop.
 *
 * Jobs take turns: each runs piece by piece (`chunksOf`) for up to SLICE_MS, then the next one;
 * after a round the thread goes back to its own event loop, so new jobs and cancellations (a
 * client that left) are taken between slices. A 32 MiB count therefore never delays a small one
 * by more than a few slices.
 */
import { parentPort } from "node:worker_threads"
import { countChunkTokens, encodeChunk, piecesOfIds, setMergeCacheEntries } from "./bpe.ts"
import { chunksOf } from "./token-chunks.ts"
import type { TokenizerReply, TokenizerRequest } from "./tokenizer.ts"

const SLICE_MS = 2

interface Job {
  /** One piece of work; true when the job is done (it has posted its reply). */
  step(): boolean
}

const port = parentPort!
const jobs = new Map<number, Job>()

const reply = (message: TokenizerReply) => port.postMessage(message)

const countJob = (id: number, texts: ReadonlyArray<string>): Job => {
  const counts = new Array<number>(texts.length).fill(0)
  let index = 0
  let chunks = texts.length > 0 ? chunksOf(texts[0]) : undefined
  return {
    step() {
      while (chunks !== undefined) {
        const next = chunks.next()
        if (!next.done) {
          counts[index] += countChunkTokens(next.value)
          return false
        }
        index++
        chunks = index < texts.length ? chunksOf(texts[index]) : undefined
      }
      reply({ id, counts })
      return true
    }
  }
}

/** The text's first pieces up to `limit` tokens (all of them when it fits), and whether some were left. */
const piecesJob = (id: number, text: string, limit: number): Job => {
  const ids: Array<number> = []
  const chunks = chunksOf(text)
  const finish = (cut: boolean) => {
    const pieces = piecesOfIds(ids)
    let used = 0
    let taken = 0
    while (taken < pieces.length && used + pieces[taken].tokens <= limit) used += pieces[taken++].tokens
    const kept = pieces.slice(0, taken)
    reply({
      id,
      pieces: {
        texts: kept.map((p) => p.text),
        tokens: kept.map((p) => p.tokens),
        cut: cut || taken < pieces.length
      }
    })
    return true
  }
  return {
    step() {
      // Whole pieces only, so the ids always end on a character boundary (see bpe.ts
      // `piecesOfIds`); once past the limit, the rest cannot be taken.
      if (ids.length > limit) return finish(true)
      const next = chunks.next()
      if (next.done) return finish(false)
      for (const tokenId of encodeChunk(next.value)) ids.push(tokenId)
      return false
    }
  }
}

let pumping = false
/** Gives the job at the head a slice, then moves it to the back; returns to the event loop after a few. */
const pump = () => {
  pumping = false
  const roundEnd = performance.now() + SLICE_MS * 3
  while (jobs.size > 0 && performance.now() < roundEnd) {
    const [id, job] = jobs.entries().next().value!
    jobs.delete(id)
    const sliceEnd = performance.now() + SLICE_MS
    try {
      let done = false
      while (!done && performance.now() < sliceEnd) done = job.step()
      if (!done) jobs.set(id, job)
    } catch (error) {
      reply({ id, error: String(error) })
    }
  }
  if (jobs.size > 0) schedule()
}
const schedule = () => {
  if (pumping) return
  pumping = true
  setImmediate(pump)
}

/** Texts sent in parts (`part`), by job and text index, until their count job arrives. */
const parts = new Map<number, Map<number, Array<string>>>()

/** The count job's texts with those sent in parts joined (here, off the gateway's event loop). */
const textsOf = (message: Extract<TokenizerRequest, { op: "count" }>): ReadonlyArray<string> | undefined => {
  if (message.parted === undefined) return message.texts
  const byIndex = parts.get(message.id)
  parts.delete(message.id)
  const texts = [...message.texts]
  for (const index of message.parted) {
    const pieces = byIndex?.get(index)
    if (pieces === undefined) return undefined
    texts[index] = pieces.join("")
  }
  return texts
}

port.on("message", (message: TokenizerRequest) => {
  switch (message.op) {
    case "part": {
      const byIndex = parts.get(message.id) ?? new Map<number, Array<string>>()
      parts.set(message.id, byIndex)
      const pieces = byIndex.get(message.index) ?? []
      byIndex.set(message.index, pieces)
      pieces.push(message.text)
      return
    }
    case "count": {
      const texts = textsOf(message)
      if (texts === undefined) {
        reply({ id: message.id, error: "a text sent in parts did not arrive whole (the tokenizer thread was restarted)" })
        return
      }
      jobs.set(message.id, countJob(message.id, texts))
      break
    }
    case "pieces":
      jobs.set(message.id, piecesJob(message.id, message.text, message.limit))
      break
    case "cancel":
      jobs.delete(message.id)
      parts.delete(message.id)
      return
  }
  schedule()
})

setMergeCacheEntries(20_000)
