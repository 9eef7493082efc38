/**
 * Text kept as it streams by (an answer's deltas), read back whole only if asked: what was
 * generated when the upstream reports no usage, what a broken stream delivered, the text a
 * continuation resumes from, the answer a Responses stream repeats when a block ends. Held for as
 * long as a stream is open, so it is kept compact, close to one byte per character:
 * - an array of the deltas themselves cost a pointer per delta and kept every delta's own string
 *   object alive (~30 bytes per delta against ~5 for its characters);
 * - so every `GROUP` deltas are joined into one flat string (a run), and runs are merged the way a
 *   binary counter carries: a new run absorbs the last one while that one is at most twice its
 *   length. Runs then shrink by more than half from the first to the last — a few dozen at most,
 *   however long the text — and each character is copied O(log n) times in all.
 * `join` is used, not `+`: V8 makes `a + b` a rope (a node pointing at both), which would keep
 * every piece alive; `join` writes one flat string. The arrays are sized exactly: one grown by
 * `push` gets 16 spare slots, ~130 bytes for as long as the stream is open.
 */
const GROUP = 8

export class TextPieces {
  /** Flat runs, oldest first, each more than twice as long as the next; an exact-size array. */
  #runs: Array<string> = []
  /** The deltas since the last run: the first `#count` of `GROUP` slots (allocated at the first delta, exactly). */
  #pieces: Array<string> | undefined = undefined
  #count = 0

  add(text: string): void {
    const pieces = (this.#pieces ??= new Array<string>(GROUP).fill(""))
    pieces[this.#count++] = text
    if (this.#count < GROUP) return
    let run = pieces.join("")
    pieces.fill("")
    this.#count = 0
    const runs = this.#runs
    while (runs.length > 0 && runs[runs.length - 1]!.length <= 2 * run.length) run = [runs.pop()!, run].join("")
    this.#runs = runs.concat([run])
  }

  /** The whole text so far. */
  text(): string {
    return this.#runs.join("") + this.pending()
  }

  /** The text so far in a few large parts (whose concatenation is `text()`), e.g. to count their tokens. */
  parts(): Array<string> {
    return this.#count === 0 ? [...this.#runs] : [...this.#runs, this.pending()]
  }

  clear(): void {
    this.#runs = []
    this.#pieces = undefined
    this.#count = 0
  }

  private pending(): string {
    // The slots past `#count` hold "", so the whole array joins to the pending text.
    return this.#count === 0 || this.#pieces === undefined ? "" : this.#pieces.join("")
  }
}
