/**
 * Server-Sent Events text → the `data` payload of each event (pure, incremental).
 * Comments (`:` lines) and other fields (`event:`, `id:`, `retry:`) are skipped; multi-line data
 * is joined with newlines, per the SSE spec. Lines end with `\n` or `\r\n`.
 */
export interface SseDecoder {
  /** Feeds the next piece of text; returns the payloads of the events it completed. */
  feed(text: string): Array<string>
  /** The body ended: completes a last event that had no blank line after it. */
  end(): Array<string>
}

export const makeSseDecoder = (): SseDecoder => new SseLines()

/** The decoder's state as fields, its steps as methods: an open stream holds one (not a closure per step). */
class SseLines implements SseDecoder {
  #buffer = ""
  // One event's data lines; reused, and a single line (every chunk an OpenAI-compatible upstream
  // sends) is handed on as it is, not joined: this runs once per streamed token.
  readonly #data: Array<string> = []

  /** The line `buffer[start, end)` (without its `\n`). */
  private line(start: number, end: number, out: Array<string>) {
    const buffer = this.#buffer
    const data = this.#data
    if (end > start && buffer.charCodeAt(end - 1) === 13) end-- // "\r\n"
    if (end === start) {
      if (data.length > 0) out.push(data.length === 1 ? data[0]! : data.join("\n"))
      data.length = 0
      return
    }
    if (buffer.startsWith("data:", start)) {
      const from = buffer.charCodeAt(start + 5) === 32 && start + 5 < end ? start + 6 : start + 5
      data.push(buffer.slice(from, end))
    } else if (end - start === 4 && buffer.startsWith("data", start)) {
      data.push("") // a "data" line without a colon: an empty value
    }
    // Anything else is a comment (":") or another field (event, id, retry): skipped.
  }

  feed(text: string): Array<string> {
    this.#buffer += text
    const buffer = this.#buffer
    const out: Array<string> = []
    let start = 0
    for (let newline = buffer.indexOf("\n"); newline !== -1; newline = buffer.indexOf("\n", start)) {
      this.line(start, newline, out)
      start = newline + 1
    }
    this.#buffer = start === buffer.length ? "" : buffer.slice(start)
    return out
  }

  end(): Array<string> {
    const out: Array<string> = []
    if (this.#buffer !== "") this.line(0, this.#buffer.length, out)
    this.#buffer = ""
    this.line(0, 0, out)
    return out
  }
}
