/**
 * How the sliced JSON parser (`util/sliced-json.ts`) gathers a string token's bytes: as
 * @streamparser/json's own `BufferedString` does (UTF-8 bytes in a buffer, decoded when it fills),
 * but a long string is kept as flat pieces of about `PIECE_CHARS` characters, joined into
 * a rope (no copy) and remembered beside it (`util/long-strings.ts`), so that nothing ever has to
 * flatten it (30 MB of fresh memory written in one turn, for a 30 MiB text).
 *
 * Also: the library's builder appends each `\uXXXX` escape it keeps as a code unit (a lone
 * surrogate) to its string with `+`, one rope node per escape for the whole string; here the nodes
 * last only until their piece is made flat (a piece's worth of characters at most).
 */
import type { StringBuilder } from "@streamparser/json/utils/bufferedString.js"
import { rememberPieces } from "./long-strings.ts"
import { isHighSurrogate } from "./slices.ts"

/**
 * UTF-8 bytes gathered before they are decoded, and the characters in a piece of a long string
 * (about). Past V8's largest regular object (128 KiB), so a piece is allocated in the large-object
 * space, where the scavenger never copies it: with 64 KiB pieces, which live as long as the
 * request, the young-generation collections copied every long text twice (43 scavenges, 151 ms,
 * for twelve 30 MiB answers; now 1, 1.4 ms).
 */
const BUFFER_BYTES = 256 * 1024
const PIECE_CHARS = 256 * 1024

export class PiecedString implements StringBuilder {
  byteLength = 0
  readonly #decoder = new TextDecoder("utf-8", { fatal: true })
  readonly #buffer = new Uint8Array(BUFFER_BYTES)
  #used = 0
  /** Decoded text not yet made a piece (most strings end here: nothing is allocated for them but it). */
  #text = ""
  /** A long string's finished pieces; none ends in a high surrogate (a pair is never cut). */
  #pieces: Array<string> | undefined = undefined

  appendChar(char: number): void {
    if (this.#used >= BUFFER_BYTES) this.#decodeBuffer()
    this.#buffer[this.#used++] = char
    this.byteLength += 1
  }

  appendBuf(buf: Uint8Array, start = 0, end = buf.length): void {
    const size = end - start
    if (this.#used + size > BUFFER_BYTES) this.#decodeBuffer()
    this.byteLength += size
    // The tokenizer never cuts a character between two calls, so a span decodes on its own.
    if (size > BUFFER_BYTES) this.#add(this.#decoder.decode(buf.subarray(start, end)))
    else {
      this.#buffer.set(buf.subarray(start, end), this.#used)
      this.#used += size
    }
  }

  appendCharCode(code: number): void {
    this.#decodeBuffer()
    this.#add(String.fromCharCode(code))
  }

  reset(): void {
    this.#used = 0
    this.#text = ""
    this.#pieces = undefined
    this.byteLength = 0
  }

  toString(): string {
    this.#decodeBuffer()
    const pieces = this.#pieces
    if (pieces === undefined) return this.#text
    if (this.#text.length > 0) pieces.push(this.#text)
    this.#text = ""
    this.#pieces = undefined
    // A rope over the pieces: `+` links two strings without copying them.
    let text = pieces[0]!
    for (let i = 1; i < pieces.length; i++) text += pieces[i]!
    rememberPieces(text, pieces)
    return text
  }

  #decodeBuffer(): void {
    if (this.#used === 0) return
    const text = this.#decoder.decode(this.#buffer.subarray(0, this.#used))
    this.#used = 0
    this.#add(text)
  }

  /** Adds decoded text; once it reaches PIECE_CHARS it becomes one flat piece. */
  #add(text: string): void {
    const joined = this.#text + text
    if (joined.length < PIECE_CHARS) {
      this.#text = joined
      return
    }
    const pieces = (this.#pieces ??= [])
    // Reading its last character flattens the piece (at most ~2 × PIECE_CHARS: well under a millisecond).
    if (isHighSurrogate(joined.charCodeAt(joined.length - 1))) {
      // Its low half may follow: the high half waits in the next piece.
      pieces.push(joined.slice(0, -1))
      this.#text = joined.slice(-1)
    } else {
      pieces.push(joined)
      this.#text = ""
    }
  }
}
