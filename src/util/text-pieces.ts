/**
 * Text kept as it streams by (an answer's deltas), read back whole only if asked: what was
 * generated when the upstream reports no usage, what a broken stream delivered, the text a
 * continuation resumes from, the answer a Responses stream repeats when a block ends. Held for as
 * long as a stream is open, so it is kept compact: every `GROUP` pieces are joined into one flat
 * string. An array of the deltas themselves cost a pointer per delta and kept every delta's own
 * string object alive (~50 bytes per delta against ~5 for its characters).
 */
const GROUP = 64

export class TextPieces {
  /** Joined groups of `GROUP` pieces, oldest first. */
  readonly #groups: Array<string> = []
  /** The pieces since the last group (fewer than `GROUP`). */
  readonly #pieces: Array<string> = []

  add(text: string): void {
    const pieces = this.#pieces
    pieces.push(text)
    if (pieces.length === GROUP) {
      this.#groups.push(pieces.join(""))
      pieces.length = 0
    }
  }

  /** The whole text so far. */
  text(): string {
    return this.#groups.join("") + this.#pieces.join("")
  }

  /** The text so far in a few large parts (whose concatenation is `text()`), e.g. to count their tokens. */
  parts(): Array<string> {
    return this.#pieces.length === 0 ? [...this.#groups] : [...this.#groups, this.#pieces.join("")]
  }

  clear(): void {
    this.#groups.length = 0
    this.#pieces.length = 0
  }
}
