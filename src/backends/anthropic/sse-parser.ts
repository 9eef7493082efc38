/**
 * An incremental Server-Sent Events parser (the WHATWG rules the SDKs follow): feed it text as it
 * arrives, in chunks cut anywhere, and it returns each complete event. Lines end in LF, CRLF or CR;
 * `:` lines are comments; several `data:` lines join with LF; one space after the colon is dropped.
 *
 * It runs once per streamed token, and an open stream holds one, so it is a class with its state in
 * fields, finds line ends with `indexOf` (a regex made a match array per line: three per event),
 * reads fields in place rather than slicing each line, keeps a single data line as a string, and
 * appends to the caller's array: per event, only the event and its two strings are made.
 */
export interface SseEvent {
  /** The `event:` name; `undefined` when the frame had none. */
  readonly event: string | undefined
  readonly data: string
}

export interface SseParser {
  /** The events completed by this chunk, appended to `out` (by default a new array), which is returned. */
  feed(chunk: string, out?: Array<SseEvent>): Array<SseEvent>
  /** Whatever complete event was left without its closing blank line when the stream ended. */
  end(out?: Array<SseEvent>): Array<SseEvent>
}

export const makeSseParser = (): SseParser => new SseEvents()

const LF = 10
const SPACE = 32

class SseEvents implements SseParser {
  #buffer = ""
  #event: string | undefined = undefined
  #data: string | Array<string> | undefined = undefined

  feed(chunk: string, out: Array<SseEvent> = []): Array<SseEvent> {
    this.#buffer += chunk
    this.drain(false, out)
    return out
  }

  end(out: Array<SseEvent> = []): Array<SseEvent> {
    this.drain(true, out)
    const rest = this.#buffer
    if (rest !== "") this.line(rest, 0, rest.length, out)
    this.#buffer = ""
    this.dispatch(out)
    return out
  }

  /** Every complete line of the buffer; what follows the last line end stays for the next chunk. */
  private drain(final: boolean, out: Array<SseEvent>) {
    const buffer = this.#buffer
    const n = buffer.length
    let start = 0
    let lf = buffer.indexOf("\n")
    let cr = buffer.indexOf("\r")
    while (lf !== -1 || cr !== -1) {
      let end: number
      let next: number
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (!final && cr === n - 1) break
        end = cr
        next = buffer.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1
      } else {
        end = lf
        next = lf + 1
      }
      this.line(buffer, start, end, out)
      start = next
      if (lf !== -1 && lf < start) lf = buffer.indexOf("\n", start)
      if (cr !== -1 && cr < start) cr = buffer.indexOf("\r", start)
    }
    this.#buffer = start === 0 ? buffer : buffer.slice(start)
  }

  /** The line `text[start, end)`, without its line end. */
  private line(text: string, start: number, end: number, out: Array<SseEvent>) {
    if (end === start) return this.dispatch(out)
    if (text.charCodeAt(start) === 58) return // ":" a comment
    let colon = text.indexOf(":", start)
    if (colon === -1 || colon > end) colon = end
    const fieldLength = colon - start
    let from = colon + 1
    if (from < end && text.charCodeAt(from) === SPACE) from++
    const value = from >= end ? "" : text.slice(from, end)
    if (fieldLength === 5 && text.startsWith("event", start)) this.#event = value
    else if (fieldLength === 4 && text.startsWith("data", start)) this.addData(value)
    // Any other field (id, retry, unknown) is skipped.
  }

  private addData(value: string) {
    const data = this.#data
    if (data === undefined) this.#data = value
    else if (typeof data === "string") this.#data = [data, value]
    else data.push(value)
  }

  private dispatch(out: Array<SseEvent>) {
    const data = this.#data
    if (data !== undefined || this.#event !== undefined) {
      out.push({ event: this.#event, data: data === undefined ? "" : typeof data === "string" ? data : data.join("\n") })
    }
    this.#event = undefined
    this.#data = undefined
  }
}
