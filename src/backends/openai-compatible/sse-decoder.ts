/**
 * Server-Sent Events text → the `data` payload of each event (pure, incremental).
 * Comments (`:` lines) and other fields (`event:`, `id:`, `retry:`) are skipped; multi-line data
 * is joined with newlines, per the SSE spec. Lines end with `\n` or `\r\n`.
 */
export interface SseDecoder {
  /** Feeds the next piece of text; appends the payloads of the events it completed to `out` (by default a new array) and returns it. */
  feed(text: string, out?: Array<string>): Array<string>
  /** The body ended: completes a last event that had no blank line after it. */
  end(out?: Array<string>): Array<string>
}

export const makeSseDecoder = (): SseDecoder => new SseLines()

/** The decoder's state as fields, its steps as methods: an open stream holds one (not a closure per step). */
class SseLines implements SseDecoder {
  #buffer = ""
  // The current event's data lines: one line (every chunk an OpenAI-compatible upstream sends) is
  // kept and handed on as it is, with no array made or kept — this runs once per streamed token.
  #data: string | Array<string> | undefined = undefined

  /** The line `buffer[start, end)` (without its `\n`). */
  private line(start: number, end: number, out: Array<string>) {
    const buffer = this.#buffer
    if (end > start && buffer.charCodeAt(end - 1) === 13) end-- // "\r\n"
    if (end === start) {
      const data = this.#data
      if (data !== undefined) out.push(typeof data === "string" ? data : data.join("\n"))
      this.#data = undefined
      return
    }
    if (buffer.startsWith("data:", start)) {
      const from = buffer.charCodeAt(start + 5) === 32 && start + 5 < end ? start + 6 : start + 5
      this.addData(buffer.slice(from, end))
    } else if (end - start === 4 && buffer.startsWith("data", start)) {
      this.addData("") // a "data" line without a colon: an empty value
    }
    // Anything else is a comment (":") or another field (event, id, retry): skipped.
  }

  private addData(line: string) {
    const data = this.#data
    if (data === undefined) this.#data = line
    else if (typeof data === "string") this.#data = [data, line]
    else data.push(line)
  }

  feed(text: string, out: Array<string> = []): Array<string> {
    this.#buffer += text
    const buffer = this.#buffer
    let start = 0
    for (let newline = buffer.indexOf("\n"); newline !== -1; newline = buffer.indexOf("\n", start)) {
      this.line(start, newline, out)
      start = newline + 1
    }
    this.#buffer = start === buffer.length ? "" : buffer.slice(start)
    return out
  }

  end(out: Array<string> = []): Array<string> {
    if (this.#buffer !== "") this.line(0, this.#buffer.length, out)
    this.#buffer = ""
    this.line(0, 0, out)
    return out
  }
}
