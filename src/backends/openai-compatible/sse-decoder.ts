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

export const makeSseDecoder = (): SseDecoder => {
  let buffer = ""
  let data: Array<string> = []

  const line = (raw: string, out: Array<string>) => {
    const text = raw.endsWith("\r") ? raw.slice(0, -1) : raw
    if (text === "") {
      if (data.length > 0) out.push(data.join("\n"))
      data = []
      return
    }
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    if (field !== "data") return
    const value = colon === -1 ? "" : text.slice(colon + 1)
    data.push(value.startsWith(" ") ? value.slice(1) : value)
  }

  return {
    feed(text) {
      buffer += text
      const out: Array<string> = []
      let start = 0
      for (let newline = buffer.indexOf("\n"); newline !== -1; newline = buffer.indexOf("\n", start)) {
        line(buffer.slice(start, newline), out)
        start = newline + 1
      }
      buffer = buffer.slice(start)
      return out
    },
    end() {
      const out: Array<string> = []
      if (buffer !== "") line(buffer, out)
      buffer = ""
      line("", out)
      return out
    }
  }
}
