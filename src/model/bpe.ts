/**
 * Exact o200k_base token counting, bounded in time whatever the input (pieces from
 * `token-chunks.ts`). Synchronous, and importing it loads the tokenizer tables (~200–370 ms of
 * one thread, ~70 MiB): only the tokenizer worker (`tokenizer-worker.ts`) and tests import this
 * module; the gateway reaches it through `tokenizer.ts`.
 *
 * Special-token strings such as `<|endoftext|>` are counted as ordinary text.
 */
import { countTokens, decodeGenerator, encode, setMergeCacheSize } from "gpt-tokenizer/encoding/o200k_base"
import { chunksOf } from "./token-chunks.ts"

const asPlainText = { disallowedSpecial: new Set<string>() }

/** Tokens of one piece from `chunksOf`. */
export const countChunkTokens = (chunk: string): number => countTokens(chunk, asPlainText)

/** Token ids of one piece from `chunksOf`. */
export const encodeChunk = (chunk: string): Array<number> => encode(chunk, asPlainText)

/** Tokens of a text, in one go (tests; the worker goes piece by piece). */
export const countTextTokensExact = (text: string): number => {
  let total = 0
  for (const chunk of chunksOf(text)) total += countChunkTokens(chunk)
  return total
}

/** A run of a text's tokens that decodes to whole characters. */
export interface TokenPiece {
  readonly text: string
  readonly tokens: number
}

/**
 * Token ids → pieces that concatenate to the text, with their token counts summing to the ids'.
 * A character split over several tokens (emoji, CJK) stays whole in one piece.
 *
 * Why not `decode(ids.slice(...))`: the library decodes with one shared streaming TextDecoder, so a
 * slice that ends inside a character leaves bytes behind that corrupt the next decode anywhere in
 * the thread. Decoding the whole sequence in one pass always ends on a character boundary.
 */
export const piecesOfIds = (ids: ReadonlyArray<number>): Array<TokenPiece> => {
  const counted = new CountedIds(ids)
  const pieces: Array<TokenPiece> = []
  let reported = 0
  for (const piece of decodeGenerator(counted)) {
    pieces.push({ text: piece, tokens: counted.consumed - reported })
    reported = counted.consumed
  }
  return pieces
}

/**
 * The ids, counting those the decoder has taken. A class, not a generator written in
 * `piecesOfIds`: a generator closure made per call gets an object map of its own that V8 keeps,
 * with the closure, through young-generation collections.
 */
class CountedIds implements IterableIterator<number> {
  consumed = 0
  readonly #ids: ReadonlyArray<number>
  constructor(ids: ReadonlyArray<number>) {
    this.#ids = ids
  }
  next(): IteratorResult<number> {
    return this.consumed < this.#ids.length ? { done: false, value: this.#ids[this.consumed++]! } : { done: true, value: undefined }
  }
  [Symbol.iterator]() {
    return this
  }
}

/** A text cut at its token boundaries (in one go; tests). */
export const tokenPiecesExact = (text: string): Array<TokenPiece> => {
  const ids: Array<number> = []
  for (const chunk of chunksOf(text)) for (const id of encodeChunk(chunk)) ids.push(id)
  return piecesOfIds(ids)
}

/** Bounds the library's merge cache (pieces are at most MAX_CHUNK_UNITS long, so its memory is too). */
export const setMergeCacheEntries = (entries: number): void => setMergeCacheSize(entries)
