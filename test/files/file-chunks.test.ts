/**
 * How a file's content is cut into stored chunks: whole or in the pieces an upload arrived in,
 * every chunk but the last exactly FILE_CHUNK_BYTES, and the chunks joined give the content back.
 */
import { describe, expect, it } from "vitest"
import { FILE_CHUNK_BYTES } from "../../src/files/files-repo.ts"
import { chunksOf } from "../../src/util/byte-chunks.ts"

const bytes = (length: number, seed: number) => Uint8Array.from({ length }, (_, i) => (i * 7 + seed) % 256)

const check = (content: Uint8Array | ReadonlyArray<Uint8Array>) => {
  const whole = content instanceof Uint8Array ? content : Buffer.concat(content as Array<Uint8Array>)
  const chunks = [...chunksOf(content, FILE_CHUNK_BYTES)]
  expect(Buffer.concat(chunks).equals(Buffer.from(whole))).toBe(true)
  for (const chunk of chunks.slice(0, -1)) expect(chunk.byteLength).toBe(FILE_CHUNK_BYTES)
  expect(chunks.at(-1)?.byteLength ?? 0).toBeLessThanOrEqual(FILE_CHUNK_BYTES)
  expect(chunks.length).toBe(Math.ceil(whole.byteLength / FILE_CHUNK_BYTES))
}

describe("chunksOf (a file's chunks)", () => {
  it("cuts one buffer into views of FILE_CHUNK_BYTES", () => {
    check(bytes(2 * FILE_CHUNK_BYTES + 12_345, 1))
    check(bytes(FILE_CHUNK_BYTES, 2))
    check(new Uint8Array(0))
  })

  it("joins an upload's pieces across chunk boundaries, in order", () => {
    // Pieces smaller, larger and exactly the size of a chunk, crossing its boundary anywhere.
    check([bytes(65_536, 3), bytes(FILE_CHUNK_BYTES + 3, 4), bytes(7, 5), bytes(FILE_CHUNK_BYTES, 6), bytes(999_999, 7)])
    check(Array.from({ length: 50 }, (_, i) => bytes(64_000 + i, i)))
    check([bytes(FILE_CHUNK_BYTES - 1, 8), bytes(1, 9)])
  })
})
