/**
 * An incremental Server-Sent Events parser (the WHATWG rules the SDKs follow): feed it text as it
 * arrives, in chunks cut anywhere, and it returns each complete event. Lines end in LF, CRLF or CR;
 * `:` lines are comments; several `data:` lines join with LF; one space after the colon is dropped.
 */
export interface SseEvent {
  /** The `event:` name; `undefined` when the frame had none. */
  readonly event: string | undefined
  readonly data: string
}

export interface SseParser {
  /** The events completed by this chunk. */
  feed(chunk: string): Array<SseEvent>
  /** Whatever complete event was left without its closing blank line when the stream ended. */
  end(): Array<SseEvent>
}

export const makeSseParser = (): SseParser => {
  let buffer = ""
  let event: string | undefined
  let data: Array<string> = []

  const dispatch = (out: Array<SseEvent>) => {
    if (data.length > 0 || event !== undefined) out.push({ event, data: data.join("\n") })
    event = undefined
    data = []
  }

  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") return dispatch(out)
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") data.push(value)
  }

  const drain = (final: boolean): Array<SseEvent> => {
    const out: Array<SseEvent> = []
    const lineEnd = /\r\n|\r|\n/g
    let start = 0
    for (let match = lineEnd.exec(buffer); match !== null; match = lineEnd.exec(buffer)) {
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (!final && match[0] === "\r" && match.index === buffer.length - 1) break
      line(buffer.slice(start, match.index), out)
      start = match.index + match[0].length
    }
    buffer = buffer.slice(start)
    return out
  }

  return {
    feed: (chunk) => {
      buffer += chunk
      return drain(false)
    },
    end: () => {
      const out = drain(true)
      if (buffer !== "") line(buffer, out)
      buffer = ""
      dispatch(out)
      return out
    }
  }
}
