/** Vector shaping for `/v1/embeddings`: shortening to `dimensions` and the base64 wire form. */

/** The first `dimensions` components, re-normalized to unit length (Matryoshka-style shortening). */
export const shorten = (vector: ReadonlyArray<number>, dimensions: number): Array<number> => {
  const head = vector.slice(0, dimensions)
  const norm = Math.hypot(...head)
  return norm === 0 ? head : head.map((x) => x / norm)
}

/** Little-endian float32, base64 — what the OpenAI SDK decodes when it asked for `base64`. */
export const toBase64Float32 = (vector: ReadonlyArray<number>): string => {
  const buffer = Buffer.alloc(vector.length * 4)
  vector.forEach((x, i) => buffer.writeFloatLE(x, i * 4))
  return buffer.toString("base64")
}
